"""DP-SGD as optax transformations: per-example clipping, one noise draw per logical batch.

:func:`private_aggregate` is a drop-in for ``optax.contrib.differentially_private_aggregate``
(Abadi et al. 2016, Alg. 1): it takes per-example gradients (leading axis), clips each
example, sums, adds noise of scale ``l2_norm_clip · noise_multiplier`` and normalises. What
differs, and why:

* **the normaliser** is the *expected* batch size q·n under Poisson sampling
  (``expected_batch_size``), not the number of examples that happened to be sampled: the
  actual size depends on who is in the data, so dividing by it is not post-processing of the
  noisy sum. Without ``expected_batch_size`` the physical (leading-axis) size is used, which
  is optax.contrib's behaviour for unmasked fixed-size batches;
* **masks**: Poisson batches of varying size run at a fixed physical shape under ``jit``;
  ``mask`` (an extra argument of ``update``) zeroes padded examples, which then contribute
  nothing (not even through their clipped gradient); examples with a non-finite gradient
  contribute nothing either;
* **gradient accumulation before noise**: with ``last_microbatch=False`` a call only adds its
  clipped sum to the state; the call with ``last_microbatch=True`` adds the noise once for the
  whole logical batch. ``optax.MultiSteps`` around optax.contrib's transformation adds noise
  per micro-batch instead (optax #515/#527). :func:`on_noisy_steps` keeps a downstream
  optimizer's state still on the accumulating calls;
* **noise from any dpjax additive mechanism**: ``dpjax.Gaussian`` (default, L2 clipping),
  ``dpjax.Laplace`` (L1 clipping), ``dpjax.DiscreteGaussian`` on a grid of step ``grid_step``
  (integer arithmetic end to end: each clipped example is rounded to the grid, sums and
  noise are int32, the result is scaled back at the end);
* **record-addressed noise**: coordinate i of the noise of noisy update t depends only on
  ``(key, t, i)`` (:meth:`dpjax.Mechanism.sample_records` under ``fold_in(key, t)``): a step
  is reproducible from the key and its index, and no key is used twice.

The privacy of ``T`` noisy updates at Poisson rate q is ``accounting.dpsgd_epsilon(
noise_multiplier, q, T, δ, mechanism=...)``; :class:`accounting.DpsgdAccountant` is the
per-step odometer.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from accounting.dpsgd import noise_kind, noise_mechanism
from dpjax.random import check_key
from dpjax.validation import check_positive

__all__ = [
    "PrivateAggregateState",
    "private_aggregate",
    "on_noisy_steps",
    "dpsgd",
    "clip_per_example",
    "clipped_sum",
    "ClippedSum",
    "scales_from_norms",
    "NOISE_TAG",
]

#: domain-separation tag folded into the key before the step index (the Poisson sampler folds another)
NOISE_TAG = 0x7D15E001


class PrivateAggregateState(NamedTuple):
    """The state of :func:`private_aggregate`.

    Attributes:
      key: the PRNG key, never consumed: each noisy update folds its index in.
      step: the number of noisy updates so far.
      accumulated: the clipped sum of the logical batch in progress (int32 on a grid).
    """

    key: jax.Array
    step: jax.Array
    accumulated: Any


@jax.tree_util.register_pytree_node_class
class ClippedSum:
    """A sum of per-example gradients each clipped to L2 norm ``l2_norm_clip``.

    What :func:`optimize.clipped_grad` returns, ready for :func:`private_aggregate`, which refuses
    a sum clipped to more than its own C, and a masked sum without ``expected_batch_size``. A pytree
    whose leaves are ``grads`` and ``norms``; ``l2_norm_clip`` and ``masked`` are static.

    Args:
      grads: a pytree shaped like the parameters, Σ_i min(1, C/‖g_i‖)·g_i over the examples kept.
      norms: float[B], the unclipped per-example norms ‖g_i‖ of the whole batch.
      l2_norm_clip: the clipping norm C.
      masked: whether a mask chose the examples.
    """

    def __init__(self, grads, norms, l2_norm_clip, masked=False):
        self.grads = grads
        self.norms = norms
        self.l2_norm_clip = float(l2_norm_clip)
        self.masked = bool(masked)

    def tree_flatten(self):
        """Split a ``ClippedSum`` into its pytree parts (JAX's pytree protocol).

        Returns:
          ``((grads, norms), (l2_norm_clip, masked))``.
        """
        return (self.grads, self.norms), (self.l2_norm_clip, self.masked)

    @classmethod
    def tree_unflatten(cls, aux, children):
        """Rebuild a ``ClippedSum`` from its pytree parts (JAX's pytree protocol).

        Args:
          aux: ``(l2_norm_clip, masked)``.
          children: ``(grads, norms)``.

        Returns:
          The ``ClippedSum``.
        """
        return cls(*children, *aux)

    def __repr__(self):
        return f"ClippedSum(l2_norm_clip={self.l2_norm_clip}, masked={self.masked}, grads={self.grads!r})"


def _clip_scales(leaves, clip, order, mask):
    """Per-example factors min(1, clip/‖g_i‖) (0 for masked examples and for examples whose norm is
    not finite: a NaN or inf entry, or a norm overflowing the dtype). One pass over the gradients;
    each example's norm is added in one fixed order (:func:`_pairwise_sum` over each leaf's entries,
    then the leaves in order), element-wise code that does not depend on the batch's size or
    partitioning (a reduction is compiled differently for different batch sizes)."""
    terms = [(jnp.abs(g) if order == 1 else jnp.square(g)).reshape(g.shape[0], -1) for g in leaves]
    norm = sum(_pairwise_sum(t, axis=1) for t in terms)
    if order != 1:
        norm = jnp.sqrt(norm)
    return scales_from_norms(norm, clip, mask)


def scales_from_norms(norm, clip, mask=None):
    """The per-example clipping factors of a batch's norms.

    Args:
      norm: float[B], the per-example norms.
      clip: the clipping norm.
      mask: optional bool[B], False for examples to drop.

    Returns:
      float[B]: min(1, clip/norm) per example; 0 where ``mask`` is False or the norm is not finite.
    """
    finite = jnp.isfinite(norm)
    keep = finite if mask is None else finite & jnp.asarray(mask, bool)
    return jnp.where(keep, jnp.minimum(1.0, clip / jnp.maximum(jnp.where(finite, norm, 1.0), 1e-30)), 0.0)


def _zero_nonfinite(leaves, scale):
    """Examples with factor 0 replaced by zeros (a NaN times 0 is still NaN)."""
    return [jnp.where(_bcast(scale > 0, g), g, 0.0) for g in leaves]


def _bcast(v, g):
    return v.reshape((g.shape[0],) + (1,) * (g.ndim - 1))


def clip_per_example(per_example_grads, clip, *, order=2, mask=None):
    """Scale each example's gradient to a global norm of at most ``clip``.

    Examples with ``mask`` False or a non-finite norm become zero.

    Args:
      per_example_grads: a pytree of per-example gradients (examples on the leading axis of each leaf).
      clip: the clipping norm.
      order: 2 (L2 norm, the Gaussian's) or 1 (L1 norm, the Laplace's), over all leaves together.
      mask: optional bool[B], False for padded examples.

    Returns:
      The clipped pytree, shaped like ``per_example_grads``.
    """
    leaves, treedef = jax.tree_util.tree_flatten(per_example_grads)
    return jax.tree_util.tree_unflatten(treedef, _clipped(leaves, _clip_scales(leaves, clip, order, mask)))


def _clipped(leaves, scale):
    return [g * _bcast(scale, g).astype(g.dtype) for g in _zero_nonfinite(leaves, scale)]


def _rounded(x, never):
    """``x``, each entry rounded to its dtype where the compiler cannot see through: its bits XOR
    ``never`` (False at run time, unknown to the compiler). Otherwise XLA contracts a product feeding
    a sum into one fused multiply-add (rounded once instead of twice) wherever it fuses the two, and a
    program partitioned over devices fuses them differently from a one-device program."""
    uint = jnp.dtype(f"uint{8 * jnp.dtype(x.dtype).itemsize}")
    bits = jax.lax.bitcast_convert_type(x, uint) ^ never.astype(uint)
    return jax.lax.bitcast_convert_type(bits, x.dtype)


#: rows added per fused step of :func:`_pairwise_sum` (a power of two: the order is the binary tree's)
_PAIRWISE_BLOCK = 8


def _pairwise_sum(x, axis=0):
    """Σ over ``axis`` in one fixed order: the binary tree ((x₀+x₁)+(x₂+x₃))+…, the last entry carried
    up a level while a level has an odd count. The order depends on the axis's size only, never on
    how the array is partitioned: under ``jit`` with the batch sharded over devices or JAX processes
    each shard adds its own subtrees (element-wise adds, which the compiler neither reassociates nor,
    on rounded inputs (:func:`_rounded`), contracts) and only the few top levels cross shards, so the
    sum is bitwise the one-device sum (a reduction or contraction over a sharded axis adds per-shard
    partial sums instead, in an order that changes with the partitioning). Levels are fused
    ``_PAIRWISE_BLOCK`` entries at a time."""
    axis = axis % x.ndim
    lead, tail = x.shape[:axis], x.shape[axis + 1 :]

    def take(a, i):
        return jax.lax.index_in_dim(a, i, axis + 1, keepdims=False)

    if x.shape[axis] == 0:
        return jnp.zeros(lead + tail, x.dtype)
    while x.shape[axis] > 1:
        n = x.shape[axis]
        if n % 2:
            pairs = jax.lax.slice_in_dim(x, 0, n - 1, axis=axis).reshape(lead + (n // 2, 2) + tail)
            x = jnp.concatenate([take(pairs, 0) + take(pairs, 1), jax.lax.slice_in_dim(x, n - 1, n, axis=axis)], axis)
            continue
        r = 2
        while r < _PAIRWISE_BLOCK and n % (2 * r) == 0:
            r *= 2
        block = x.reshape(lead + (n // r, r) + tail)
        parts = [take(block, i) for i in range(r)]
        while len(parts) > 1:
            parts = [parts[i] + parts[i + 1] for i in range(0, len(parts), 2)]
        x = parts[0]
    return x.reshape(lead + tail)


def clipped_sum(per_example_grads, clip, *, order=2, mask=None):
    """The sum of the clipped per-example gradients, bitwise independent of the sharding.

    Each clipped gradient (:func:`clip_per_example`) is rounded to its dtype and added in a fixed
    pairwise order: the same bits whether the batch is on one device or sharded over devices of
    several JAX processes (the mesh splitting the batch axis only).

    Args:
      per_example_grads: a pytree of per-example gradients (examples on the leading axis of each leaf).
      clip: the clipping norm.
      order: 2 (L2 norm) or 1 (L1 norm).
      mask: optional bool[B], False for padded examples.

    Returns:
      A pytree shaped like one example's gradients: Σ_i min(1, clip/‖g_i‖)·g_i.
    """
    leaves, treedef = jax.tree_util.tree_flatten(per_example_grads)
    scale = _clip_scales(leaves, clip, order, mask)
    never = scale < 0  # the factors are never negative
    return jax.tree_util.tree_unflatten(
        treedef, [_pairwise_sum(_rounded(c, _bcast(never, c))) for c in _clipped(leaves, scale)]
    )


def private_aggregate(
    l2_norm_clip, noise_multiplier, key, *, mechanism=None, expected_batch_size=None, grid_step=None
) -> optax.GradientTransformationExtraArgs:
    """Clip per-example gradients, sum, add noise once per logical batch, normalise.

    A drop-in for ``optax.contrib.differentially_private_aggregate`` normalising by the expected
    batch size, with masks, accumulation before noise and record-addressed noise from any dpjax
    additive kernel (the module's docstring says why).

    Args:
      l2_norm_clip: clipping norm C (an L1 norm for a pure-DP kernel such as ``dpjax.Laplace``).
      noise_multiplier: z; the noise has scale C·z (Gaussian σ, Laplace b, discrete-Gaussian σ).
      key: a Threefry PRNG key, held in the state and never consumed; use it for nothing else.
      mechanism: the noise kernel's class: ``None``/``dpjax.Gaussian``, ``dpjax.Laplace``,
        ``dpjax.DiscreteGaussian``, or any additive kernel whose DP-SGD accounting it declares
        (:func:`accounting.dpsgd.noise_kind`).
      expected_batch_size: q·n, the normaliser under Poisson sampling (required with ``mask`` or
        accumulation); default: the leading-axis size (optax.contrib's normaliser).
      grid_step: γ of the discrete Gaussian's grid. Examples are clipped to C − γ√d/2 in L2 and
        rounded to the grid, so that each rounded contribution has norm ≤ C (d parameters). Sums
        and noise are int32 in units of γ: keep (examples per logical batch)·C/γ plus the noise's
        tail below 2**31 (past it the arithmetic wraps: still private, post-processing of the
        integer release, but useless).

    Returns:
      An ``optax.GradientTransformationExtraArgs`` whose state is a :class:`PrivateAggregateState`.
      ``update(per_example_grads, state, params=None, *, mask=None, last_microbatch=None)``:
      ``mask`` bool[B] marks real examples; ``last_microbatch=False`` accumulates without noise
      (returns zeros), ``True``/``None`` closes the logical batch (noise once, state reset).
      ``per_example_grads`` may instead be a :class:`ClippedSum` (from :func:`optimize.clipped_grad`,
      Gaussian noise only, clipped to at most ``l2_norm_clip``, its mask given to ``clipped_grad``):
      the sum is used as it is and the physical batch size is its number of examples.

    Raises:
      ValueError: ``l2_norm_clip``, ``noise_multiplier``, ``expected_batch_size`` or ``grid_step``
        not positive; ``key`` not a single Threefry key; a ``mechanism`` DP-SGD cannot account
        (:func:`accounting.dpsgd.noise_kind`); ``grid_step`` missing for the discrete Gaussian or
        given for another kernel. At ``update``: γ√d/2 ≥ ``l2_norm_clip``; a masked or accumulated
        batch without ``expected_batch_size``; a :class:`ClippedSum` with another mechanism than the
        Gaussian, a larger clip, or a ``mask`` of its own.

    References:
      Abadi et al., "Deep Learning with Differential Privacy", ACM CCS 2016, Algorithm 1.
    """
    kind = noise_kind(mechanism)
    check_positive("l2_norm_clip", l2_norm_clip)
    check_positive("noise_multiplier", noise_multiplier)
    key = check_key(key)
    if expected_batch_size is not None:
        check_positive("expected_batch_size", expected_batch_size)
    clip = float(l2_norm_clip)
    scale = clip * float(noise_multiplier)
    if kind == "discrete_gaussian":
        if grid_step is None:
            raise ValueError(
                "grid_step: the discrete Gaussian needs the grid step γ (noise and sums are integers in units of γ)"
            )
        check_positive("grid_step", grid_step)
        gamma = float(grid_step)
        mech = noise_mechanism(mechanism, scale / gamma)
    else:
        if grid_step is not None:
            raise ValueError("grid_step: only the discrete Gaussian works on a grid")
        gamma = None
        mech = noise_mechanism(mechanism, scale)

    def init_fn(params):
        dt = jnp.int32 if gamma is not None else None
        acc = jax.tree_util.tree_map(lambda p: jnp.zeros(jnp.shape(p), dt or jnp.result_type(p)), params)
        return PrivateAggregateState(key, jnp.zeros((), jnp.int32), acc)

    def batch_sum(grads, mask):
        leaves = jax.tree_util.tree_leaves(grads)
        if gamma is None:
            return clipped_sum(grads, clip, order=1 if kind == "laplace" else 2, mask=mask)
        d = sum(math.prod(g.shape[1:]) for g in leaves)
        inner = clip - gamma * math.sqrt(d) / 2.0
        if inner <= 0:
            raise ValueError(
                f"grid_step: γ√d/2 = {gamma * math.sqrt(d) / 2:.4g} must stay below l2_norm_clip = {clip} "
                f"(d = {d} parameters); use a finer grid"
            )
        clipped = clip_per_example(grads, inner, order=2, mask=mask)
        return jax.tree_util.tree_map(lambda g: jnp.sum(jnp.round(g / gamma).astype(jnp.int32), axis=0), clipped)

    def noisy(total, step_key):
        leaves, treedef = jax.tree_util.tree_flatten(total)
        sizes = [math.prod(jnp.shape(x)) for x in leaves]
        flat_dtype = jnp.int32 if gamma is not None else jnp.result_type(*leaves)
        out, start = [], 0
        for x, n in zip(leaves, sizes):  # records start, …, start + n - 1 of the flattened parameters
            noise = mech.sample_records(step_key, jnp.zeros((n,), flat_dtype), start)
            out.append(x + noise.reshape(jnp.shape(x)).astype(x.dtype))
            start += n
        return jax.tree_util.tree_unflatten(treedef, out)

    def presummed(updates, mask):
        """The sum inside a :class:`ClippedSum`, after the checks that keep its sensitivity ≤ C."""
        if kind != "gaussian":
            raise ValueError(
                "mechanism: a ClippedSum is clipped in L2 and summed in floats; the Laplace kernel "
                "clips in L1 and the discrete Gaussian rounds each example to its grid: pass them "
                "per-example gradients"
            )
        if updates.l2_norm_clip > clip:
            raise ValueError(
                f"l2_norm_clip: the ClippedSum was clipped to {updates.l2_norm_clip} > l2_norm_clip = "
                f"{clip} of private_aggregate (its sensitivity would exceed the noise's calibration)"
            )
        if mask is not None:
            raise ValueError("mask: a ClippedSum is already summed; pass the mask to clipped_grad")
        return updates.grads

    def update_fn(updates, state, params=None, *, mask=None, last_microbatch=None, **extra):
        del params, extra
        if isinstance(updates, ClippedSum):
            masked, physical = updates.masked, updates.norms.shape[0]
            updates = summed = presummed(updates, mask)
        else:
            masked, physical = mask is not None, jax.tree_util.tree_leaves(updates)[0].shape[0]
            summed = batch_sum(updates, mask)
        if expected_batch_size is None and (masked or last_microbatch is not None):
            raise ValueError(
                "expected_batch_size: a masked or accumulated (Poisson) batch is normalised by its expected "
                "size q·n; pass expected_batch_size to private_aggregate"
            )
        factor = (gamma or 1.0) / float(expected_batch_size if expected_batch_size is not None else physical)
        total = jax.tree_util.tree_map(jnp.add, state.accumulated, summed)
        close = jnp.asarray(True if last_microbatch is None else last_microbatch)
        step_key = jax.random.fold_in(jax.random.fold_in(state.key, NOISE_TAG), state.step)
        released = noisy(total, step_key)
        out = jax.tree_util.tree_map(
            lambda x, g: jnp.where(close, x.astype(g.dtype) * jnp.asarray(factor, g.dtype), jnp.zeros((), g.dtype)),
            released,
            updates,
        )
        acc = jax.tree_util.tree_map(lambda t: jnp.where(close, jnp.zeros_like(t), t), total)
        step = state.step + close.astype(jnp.int32)
        return out, PrivateAggregateState(state.key, step, acc)

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def on_noisy_steps(inner: optax.GradientTransformation) -> optax.GradientTransformationExtraArgs:
    """Run an optax transformation only on the calls that close a logical batch.

    On the calls with ``last_microbatch`` True or absent ``inner`` runs; on accumulating calls its
    state stays as it was and the update is zero. Chain it after :func:`private_aggregate` when
    accumulating micro-batches into one noisy update.

    Args:
      inner: the optax transformation to gate (e.g. momentum and a learning rate).

    Returns:
      An ``optax.GradientTransformationExtraArgs`` taking ``last_microbatch`` in ``update``.
    """
    inner = optax.with_extra_args_support(inner)

    def update_fn(updates, state, params=None, *, last_microbatch=None, **extra):
        new_updates, new_state = inner.update(updates, state, params, **extra)
        if last_microbatch is None:
            return new_updates, new_state
        close = jnp.asarray(last_microbatch)
        keep = jax.tree_util.tree_map(lambda n, o: jnp.where(close, n, o), new_state, state)
        return jax.tree_util.tree_map(lambda u: jnp.where(close, u, jnp.zeros_like(u)), new_updates), keep

    return optax.GradientTransformationExtraArgs(inner.init, update_fn)


def dpsgd(
    learning_rate,
    l2_norm_clip,
    noise_multiplier,
    key,
    *,
    momentum=None,
    nesterov=False,
    mechanism=None,
    expected_batch_size=None,
    grid_step=None,
) -> optax.GradientTransformationExtraArgs:
    """DP-SGD as one optax transformation, like ``optax.contrib.dpsgd``.

    :func:`private_aggregate`, then momentum (optional) and the learning rate, the latter only on
    noisy updates (:func:`on_noisy_steps`).

    Args:
      learning_rate: a float or an optax schedule.
      l2_norm_clip: clipping norm C (L1 for ``dpjax.Laplace``).
      noise_multiplier: z; the noise has scale C·z.
      key: a Threefry PRNG key, held in the state and never consumed.
      momentum: ``optax.trace``'s decay, or ``None`` for plain SGD.
      nesterov: Nesterov momentum.
      mechanism: the noise kernel's class (see :func:`private_aggregate`).
      expected_batch_size: q·n, the normaliser under Poisson sampling.
      grid_step: γ of the discrete Gaussian's grid.

    Returns:
      An ``optax.GradientTransformationExtraArgs`` (``update`` takes ``mask`` and ``last_microbatch``).

    Raises:
      ValueError: as :func:`private_aggregate`.

    References:
      Abadi et al., "Deep Learning with Differential Privacy", ACM CCS 2016, Algorithm 1.
    """
    tail = optax.chain(
        optax.trace(decay=momentum, nesterov=nesterov) if momentum is not None else optax.identity(),
        optax.scale_by_learning_rate(learning_rate),
    )
    return optax.chain(
        private_aggregate(
            l2_norm_clip,
            noise_multiplier,
            key,
            mechanism=mechanism,
            expected_batch_size=expected_batch_size,
            grid_step=grid_step,
        ),
        on_noisy_steps(tail),
    )
