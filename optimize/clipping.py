"""Clipped sums of per-example gradients without materialising the per-example gradients.

:func:`clipped_grad` turns a per-example loss ``loss_fn(params, *example)`` into a function of
``(params, *batch)`` returning Σ_i min(1, C/‖g_i‖)·g_i (a :class:`optimize.ClippedSum` for
:func:`optimize.private_aggregate`). It traces the per-example loss once (its jaxpr) and finds
where each parameter leaf is used:

* **views**: transpose, reshape, squeeze, expand_dims, broadcast_in_dim and float casts of a leaf
  are followed to the operations that consume them;
* **sites**: every first-order operation with a parameter view as an operand. One pass of the
  batched forward with a zero "tap" added to each site's output, and one backward pass with
  respect to the taps only, give each site's operands and output cotangent g per example;
* **ghost norms** (Li, Tramèr, Liang, Hashimoto, "Large Language Models Can Be Strong
  Differentially Private Learners", ICLR 2022, §4): a leaf used once, through a
  norm-preserving view, by a ``dot_general`` (a dense layer, the batch or a sequence as free
  dimensions), a convolution (its patches, strided slices of the padded input) or a row gather
  (an embedding) gets its per-example norm from the activation a and g alone: ‖a‖²‖g‖² for one
  row, Σ_ts (a_t·a_s)(g_t·g_s) over a sequence, or the per-example gradient a^T g where that is
  smaller than the two Gram matrices;
* **per-operation gradients**: any other use (element-wise scale and bias, layer norm's affine,
  a leaf used twice, a broadcast view) materialises the per-example gradient of that leaf from the
  operation's own VJP at the captured operands: an activation-sized product, not a backward pass;
* **fallback**: a leaf consumed inside a higher-order primitive (``custom_jvp``/``custom_vjp``
  functions, ``scan``, ``cond``, ``checkpoint``...), by a multi-output operation, or returned as
  the loss itself, gets vmapped per-example gradients, computed in the same pass.

The clipped sum is then book-kept (Bu, Wang, Zha, Karypis, "Differentially Private Optimization
on Large Model at Small Cost", ICML 2023, §3): each site's weight gradient is taken once for the
whole batch with the cotangents scaled by the per-example factors, so no second backward pass
runs; leaves whose per-example gradients were formed sum them. Examples left out (masked, or with a
non-finite norm) have their rows zeroed, not just weighted by 0. Calls (``jit``) inside the loss are
inlined.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.extend.core import Literal, jaxprs_in_params

from dpjax.validation import check_positive
from optimize.dpsgd import ClippedSum, clipped_sum, scales_from_norms

__all__ = ["clipped_grad"]

_VIEWS = frozenset(
    {"transpose", "reshape", "squeeze", "expand_dims", "broadcast_in_dim", "convert_element_type", "copy", "copy_p"}
)
#: views that permute or regroup the entries (the per-example norm of the view's gradient is the leaf's)
_ISOMETRIC = frozenset({"transpose", "reshape", "squeeze", "expand_dims", "copy", "copy_p"})
_CALLS = frozenset({"jit", "pjit", "closed_call", "core_call"})
_HIGHEST = jax.lax.Precision.HIGHEST


class _View(NamedTuple):
    leaf: int
    chain: tuple  # the view equations applied to the leaf, in order


class _Use(NamedTuple):
    leaf: int
    site: int  # index into _Plan.sites
    position: int  # operand position of the view in the site's equation
    chain: tuple


class _Site(NamedTuple):
    eqn: object
    positions: tuple  # operand positions holding views of ghost-path leaves


class _Plan(NamedTuple):
    sites: dict  # equation path -> site index
    site_list: list
    uses: dict  # leaf -> [_Use]
    site_uses: dict  # site index -> [_Use]
    calls: frozenset  # paths of inlined calls
    fallback: frozenset  # leaves with vmapped per-example gradients


def _is_float(dtype):
    return jnp.issubdtype(dtype, jnp.floating)


def _analyse(jaxpr, num_leaves):
    """Walk the per-example jaxpr: each parameter leaf's views, its use sites, the fallback leaves."""
    raw, calls, fallback = [], set(), set()

    def walk(jx, origins, path):
        env = {v: o for v, o in zip(jx.invars, origins) if o is not None}
        for i, eqn in enumerate(jx.eqns):
            ins = [None if isinstance(v, Literal) else env.get(v) for v in eqn.invars]
            hits = [(k, o) for k, o in enumerate(ins) if o is not None]
            if not hits:
                continue
            name = eqn.primitive.name
            if name in _CALLS:
                calls.add(path + (i,))
                outs = walk(eqn.params["jaxpr"].jaxpr, ins, path + (i,))
                env.update({v: o for v, o in zip(eqn.outvars, outs) if o is not None})
            elif (
                name in _VIEWS
                and len(eqn.invars) == 1
                and len(eqn.outvars) == 1
                and _is_float(eqn.outvars[0].aval.dtype)
            ):
                leaf, chain = hits[0][1]
                env[eqn.outvars[0]] = _View(leaf, chain + (eqn,))
            elif (
                eqn.primitive.multiple_results
                or any(jaxprs_in_params(eqn.params))
                or not _is_float(eqn.outvars[0].aval.dtype)
            ):
                fallback.update(o.leaf for _, o in hits)
            else:
                raw.append((path + (i,), eqn, hits))
        return [None if isinstance(v, Literal) else env.get(v) for v in jx.outvars]

    outs = walk(jaxpr, [_View(i, ()) for i in range(num_leaves)] + [None] * (len(jaxpr.invars) - num_leaves), ())
    fallback.update(o.leaf for o in outs if o is not None)
    sites, site_list, uses, site_uses = {}, [], {}, []
    for path, eqn, hits in raw:
        fast = [(k, o) for k, o in hits if o.leaf not in fallback]
        if not fast:
            continue
        sites[path] = len(site_list)
        site_list.append(_Site(eqn, tuple(k for k, _ in fast)))
        site_uses.append([_Use(o.leaf, sites[path], k, o.chain) for k, o in fast])
        for u in site_uses[-1]:
            uses.setdefault(u.leaf, []).append(u)
    return _Plan(sites, site_list, uses, dict(enumerate(site_uses)), frozenset(calls), frozenset(fallback))


def _bind(eqn, invals):
    with eqn.ctx.manager:
        out = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(eqn.params))
    return out if eqn.primitive.multiple_results else [out]


def _evaluate(jaxpr, consts, args, plan, taps, captured, path=()):
    """Evaluate ``jaxpr``; each site's output gets its tap added and its other operands are captured."""
    env = {}

    def read(v):
        return v.val if isinstance(v, Literal) else env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for i, eqn in enumerate(jaxpr.eqns):
        here = path + (i,)
        invals = [read(v) for v in eqn.invars]
        if here in plan.calls:
            closed = eqn.params["jaxpr"]
            outs = _evaluate(closed.jaxpr, closed.consts, invals, plan, taps, captured, here)
        else:
            outs = _bind(eqn, invals)
            j = plan.sites.get(here)
            if j is not None:
                outs = [outs[0] + taps[j]]
                captured[j] = [
                    None if (k in plan.site_list[j].positions or isinstance(v, Literal)) else x
                    for k, (v, x) in enumerate(zip(eqn.invars, invals))
                ]
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def _apply_chain(chain, value):
    for eqn in chain:
        (value,) = _bind(eqn, [value])
    return value


def _site_out(site, operands, views):
    """The site's output from its captured operands (one example) with the views put back."""
    full = list(operands)
    for k, v in zip(site.positions, views):
        full[k] = v
    for k, var in enumerate(site.eqn.invars):
        if isinstance(var, Literal):
            full[k] = var.val
    return _bind(site.eqn, full)[0]


def _sq(x):
    return jnp.sum(jnp.square(x).reshape(x.shape[0], -1), axis=1)


def _rows_norm(a, g):
    """Σ over rows n of ‖Σ_t a[n,t]^T g[n,t]‖² per example: a [B,N,T,C], g [B,N,T,F] (the Gram form
    Σ_ts (a_t·a_s)(g_t·g_s) or the product itself, whichever is smaller)."""
    t, c, f = a.shape[2], a.shape[3], g.shape[3]
    if t == 1:
        return jnp.sum(jnp.sum(jnp.square(a), (2, 3)) * jnp.sum(jnp.square(g), (2, 3)), axis=1)
    if t * (c + f) <= c * f:
        ga = jnp.einsum("bntc,bnsc->bnts", a, a, precision=_HIGHEST)
        gg = jnp.einsum("bntf,bnsf->bnts", g, g, precision=_HIGHEST)
        return jnp.sum((ga * gg).reshape(a.shape[0], -1), axis=1)
    return _sq(jnp.einsum("bntc,bntf->bncf", a, g, precision=_HIGHEST))


def _dot_ghost(eqn, k, other, g):
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    xc, xb = (rc, rb) if k == 0 else (lc, lb)
    xnd = other.ndim - 1
    xfree = [d for d in range(xnd) if d not in xc and d not in xb]
    bsz, nb = other.shape[0], math.prod(other.shape[1 + d] for d in xb)
    t = math.prod(other.shape[1 + d] for d in xfree)
    a = jnp.transpose(other, [0] + [1 + d for d in (*xb, *xfree, *xc)]).reshape(bsz, nb, t, -1)
    f = g[0].size // (nb * t)
    g = g.reshape(bsz, nb, t, f) if k == 1 else jnp.swapaxes(g.reshape(bsz, nb, f, t), 2, 3)
    return _rows_norm(a, g)


def _patches(eqn, view_shape, lhs):
    """[B, N, K·C, out spatial...]: each output position's input window of a convolution, per example, as
    strided slices of the padded (and dilated) input, one per kernel offset (K of them); no arithmetic."""
    lhs_spec, rhs_spec, _ = eqn.params["dimension_numbers"]
    strides, dilation = eqn.params["window_strides"], eqn.params["rhs_dilation"]
    x = jnp.transpose(lhs, [0] + [1 + d for d in lhs_spec])  # [B, N, C, spatial...]
    pads = [(lo, hi, d - 1) for (lo, hi), d in zip(eqn.params["padding"], eqn.params["lhs_dilation"])]
    x = jax.lax.pad(x, jnp.zeros((), x.dtype), [(0, 0, 0)] * 3 + pads)
    kernel = [view_shape[d] for d in rhs_spec[2:]]
    out = [(n - (k - 1) * r - 1) // s + 1 for n, k, r, s in zip(x.shape[3:], kernel, dilation, strides)]
    windows = []
    for offset in itertools.product(*map(range, kernel)):
        start = [o * r for o, r in zip(offset, dilation)]
        stop = [b + (m - 1) * s + 1 for b, m, s in zip(start, out, strides)]
        windows.append(jax.lax.slice(x, (0, 0, 0, *start), (*x.shape[:3], *stop), (1, 1, 1, *strides)))
    return jnp.concatenate(windows, axis=2)


def _conv_ghost(eqn, view_shape, lhs, g):
    out_spec = eqn.params["dimension_numbers"][2]
    bsz = lhs.shape[0]

    def rows(x):  # [B, N, C, spatial...] -> [B, 1, N·spatial, C]
        return jnp.moveaxis(x, 2, -1).reshape(bsz, 1, -1, x.shape[2])

    return _rows_norm(rows(_patches(eqn, view_shape, lhs)), rows(jnp.transpose(g, [0] + [1 + d for d in out_spec])))


def _gather_ghost(eqn, view_shape, indices, g):
    bsz = indices.shape[0]
    idx = indices.reshape(bsz, -1)
    rows = g.reshape(bsz, idx.shape[1], -1)
    valid = (idx >= 0) & (idx < view_shape[0])
    if eqn.params["mode"] != jax.lax.GatherScatterMode.FILL_OR_DROP:
        valid = jnp.ones_like(valid)
    idx = jnp.clip(idx, 0, view_shape[0] - 1)
    same = (idx[:, :, None] == idx[:, None, :]) & valid[:, :, None] & valid[:, None, :]
    gram = jnp.einsum("btd,bsd->bts", rows, rows, precision=_HIGHEST)
    return jnp.sum(jnp.where(same, gram, 0.0).reshape(bsz, -1), axis=1)


def _ghost(site, use, view_shape, operands, g):
    """The per-example squared norm of the use's gradient by a ghost norm, or None where there is none."""
    eqn, k = site.eqn, use.position
    if len(site.positions) != 1 or not all(e.primitive.name in _ISOMETRIC for e in use.chain):
        return None
    name = eqn.primitive.name
    other = operands[1 - k] if len(operands) == 2 else None
    if other is None:
        return None
    if name == "dot_general":
        return _dot_ghost(eqn, k, other, g)
    if (
        name == "conv_general_dilated"
        and k == 1
        and eqn.params["feature_group_count"] == 1
        and eqn.params["batch_group_count"] == 1
    ):
        return _conv_ghost(eqn, view_shape, other, g)
    if name == "gather" and k == 0 and _row_gather(eqn, view_shape, other.shape[1:]):
        t = math.prod(other.shape[1:-1])
        if t * t <= math.prod(view_shape):
            return _gather_ghost(eqn, view_shape, other, g)
    return None


def _row_gather(eqn, view_shape, index_shape):
    """A gather of whole rows (axis 0) by one index per row: ``table[indices]``."""
    dn = eqn.params["dimension_numbers"]
    lead = len(index_shape) - 1
    return (
        index_shape[-1:] == (1,)
        and tuple(dn.collapsed_slice_dims) == (0,)
        and tuple(dn.start_index_map) == (0,)
        and not dn.operand_batching_dims
        and tuple(eqn.params["slice_sizes"]) == (1, *view_shape[1:])
        and tuple(dn.offset_dims) == tuple(range(lead, lead + len(view_shape) - 1))
    )


def _keep_rows(x, keep):
    """Rows of examples not kept set to zero (a NaN times a zero weight would still be NaN)."""
    if x is None or not _is_float(x.dtype):
        return x
    return jnp.where(keep.reshape((-1,) + (1,) * (x.ndim - 1)), x, jnp.zeros((), x.dtype))


def _weight_grad(fn, leaf, ops, weighted):
    """Σ_i of the VJP of ``fn(leaf, ops_i)`` at ``weighted_i``, as one batched VJP."""
    return jax.vjp(lambda p: jax.vmap(lambda o: fn(p, o))(ops), leaf)[1](weighted)[0]


def clipped_grad(loss_fn, l2_norm_clip, *, method="ghost"):
    """Transform a per-example loss into the sum of its per-example gradients, each clipped in L2.

    ``clipped_grad(loss_fn, C)(params, *batch, mask=None)`` returns a :class:`optimize.ClippedSum`
    whose ``grads`` are Σ_i min(1, C/‖∇loss_fn(params, *example_i)‖)·∇loss_fn(params, *example_i) over
    the examples (the leading axis of every array in ``batch``) and whose ``norms`` are the
    unclipped ‖∇loss_fn(params, *example_i)‖ (one global L2 norm over all parameter leaves). Examples
    with ``mask`` False, or with a non-finite norm, contribute nothing. It is the same function of
    its inputs as clipping vmapped per-example gradients (:func:`optimize.clipped_sum`); with
    ``method="ghost"`` (default) per-example gradients are only formed where the traced program
    does not allow a cheaper norm (module docstring), with ``method="per_example"`` they are vmapped.
    Works under ``jit``; the sum is a contraction over the batch, not the partition-independent
    pairwise sum of :func:`optimize.clipped_sum`.

    Args:
      loss_fn: ``loss_fn(params, *example) -> scalar`` for one example (arrays without the batch axis).
      l2_norm_clip: C > 0.
      method: ``"ghost"`` or ``"per_example"``.

    Returns:
      A function ``(params, *batch, mask=None) -> ClippedSum``.

    Raises:
      ValueError: ``l2_norm_clip`` not positive, an unknown ``method``, no batch, batch arrays with
        different leading sizes, a ``mask`` not of shape ``(B,)``, or a loss that is not one
        floating-point scalar per example.

    References:
      Li, Tramèr, Liang, Hashimoto, "Large Language Models Can Be Strong Differentially Private
      Learners", ICLR 2022, §4 (ghost clipping). Bu, Wang, Zha, Karypis, "Differentially Private
      Optimization on Large Model at Small Cost", ICML 2023, §3 (book-keeping).
    """
    check_positive("l2_norm_clip", l2_norm_clip)
    if method not in ("ghost", "per_example"):
        raise ValueError(f"method must be 'ghost' or 'per_example', got {method!r}")
    clip = float(l2_norm_clip)

    def per_example_fn(params, *batch, mask=None):
        leaves, treedef = jax.tree_util.tree_flatten(params)
        ex_leaves, ex_def = jax.tree_util.tree_flatten(batch)
        sizes = {jnp.shape(x)[0] if jnp.ndim(x) else None for x in ex_leaves}
        if len(sizes) != 1 or None in sizes:
            raise ValueError(
                "batch: every batch array needs the same leading (example) axis, got shapes "
                f"{[jnp.shape(x) for x in ex_leaves]}"
            )
        (size,) = sizes
        if mask is not None and jnp.shape(mask) != (size,):
            raise ValueError(f"mask: expected shape ({size},), got {jnp.shape(mask)}")

        def loss_flat(lv, *ex):
            return loss_fn(
                jax.tree_util.tree_unflatten(treedef, list(lv)), *jax.tree_util.tree_unflatten(ex_def, list(ex))
            )

        example = [jax.ShapeDtypeStruct(jnp.shape(x)[1:], jnp.result_type(x)) for x in ex_leaves]
        closed = jax.make_jaxpr(loss_flat)(leaves, *example)
        out = closed.out_avals
        if len(out) != 1 or out[0].shape != () or not _is_float(out[0].dtype):
            raise ValueError(f"loss_fn: must return one floating-point scalar per example, got {out}")
        if method == "per_example":
            grads = jax.vmap(jax.grad(loss_flat), in_axes=(None, *[0] * len(ex_leaves)))(leaves, *ex_leaves)
            norms = jnp.sqrt(sum(_sq(g) for g in grads))
            total = clipped_sum(grads, clip, mask=mask)
        else:
            norms, total = _ghost_clipped(closed, leaves, ex_leaves, clip, mask)
        return ClippedSum(jax.tree_util.tree_unflatten(treedef, total), norms, clip, mask is not None)

    return per_example_fn


def _ghost_clipped(closed, leaves, ex_leaves, clip, mask):
    """(per-example norms, clipped sum per leaf) by the plan of :func:`_analyse`."""
    plan = _analyse(closed.jaxpr, len(leaves))
    fb = sorted(plan.fallback)
    size = jnp.shape(ex_leaves[0])[0]
    taps = [jnp.zeros((size,) + s.eqn.outvars[0].aval.shape, s.eqn.outvars[0].aval.dtype) for s in plan.site_list]

    def example_loss(fb_vals, taps_i, ex):
        vals = list(leaves)
        for leaf, v in zip(fb, fb_vals):
            vals[leaf] = v
        captured = [None] * len(plan.site_list)
        (loss,) = _evaluate(closed.jaxpr, closed.consts, vals + list(ex), plan, taps_i, captured)
        return loss, captured

    (g_fb, g_sites), captured = jax.vmap(jax.grad(example_loss, argnums=(0, 1), has_aux=True), in_axes=(None, 0, 0))(
        [leaves[i] for i in fb], taps, ex_leaves
    )
    views = {u: _apply_chain(u.chain, leaves[u.leaf]) for us in plan.uses.values() for u in us}

    def views_of(j):
        """The views at site j's view positions, in order."""
        return [views[next(u for u in plan.site_uses[j] if u.position == k)] for k in plan.site_list[j].positions]

    def through(u):
        """(leaf value, one example's captured operands) -> the site's output, the leaf entering at ``u``."""
        site = plan.site_list[u.site]
        slot = site.positions.index(u.position)

        def out(leaf, ops):
            local = views_of(u.site)
            local[slot] = _apply_chain(u.chain, leaf)
            return _site_out(site, ops, local)

        return out

    def per_example_grad(u):
        """[B, *leaf.shape]: the use's per-example gradient, from its operation's VJP and the view's."""
        fn = through(u)
        return jax.vmap(lambda ops, g: jax.vjp(lambda leaf: fn(leaf, ops), leaves[u.leaf])[1](g)[0])(
            captured[u.site], g_sites[u.site]
        )

    sq = jnp.zeros((size,), closed.out_avals[0].dtype)
    materialised = dict(zip(fb, g_fb))  # leaf -> its per-example gradients, where they were formed
    for leaf, us in plan.uses.items():
        ghost = None
        if len(us) == 1:
            u = us[0]
            ghost = _ghost(plan.site_list[u.site], u, views[u].shape, captured[u.site], g_sites[u.site])
        if ghost is None:
            materialised[leaf] = sum(per_example_grad(u) for u in us)
            ghost = _sq(materialised[leaf])
        sq = sq + ghost.astype(sq.dtype)
    for g in g_fb:
        sq = sq + _sq(g).astype(sq.dtype)
    norms = jnp.sqrt(sq)
    scale = scales_from_norms(norms, clip, mask)
    keep = scale > 0
    # Σ_i scale_i·g_i per leaf. Rows of examples left out (masked, or a non-finite norm) are zeroed in the
    # per-example gradients, operands and cotangents, not just weighted by 0 (NaN·0 is NaN); a ghost-norm
    # leaf's use is linear in each of its operands (dot_general, convolution, gather), so the zeroed
    # rows add exactly nothing to its weight gradient, taken once for the batch.
    total = [jnp.zeros_like(x) for x in leaves]
    for leaf, g in materialised.items():
        total[leaf] = jnp.einsum("b,b...->...", scale.astype(g.dtype), _keep_rows(g, keep), precision=_HIGHEST)
    for u in (u for us in plan.site_uses.values() for u in us if u.leaf not in materialised):
        g = g_sites[u.site]
        weighted = _keep_rows(g * scale.reshape((-1,) + (1,) * (g.ndim - 1)).astype(g.dtype), keep)
        ops = [_keep_rows(x, keep) for x in captured[u.site]]
        total[u.leaf] = total[u.leaf] + _weight_grad(through(u), leaves[u.leaf], ops, weighted)
    return norms, total
