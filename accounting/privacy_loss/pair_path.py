r"""The supremum of a pair divergence along a path of neighbouring pairs.

A mechanism whose output law does not move rigidly with the answer (PB-DP with a
relative-error or fixed region) has a worst neighbouring pair that depends on the
privacy level: at each ε (or Rényi order) the divergence, as a function of the true
answer Q of the pair (Q, Q + Δ), has its own peak — a smooth maximum that moves with ε
(σ=3.368, θ=0.2, τ=5: Q ≈ 18 at ε = 1, 40 at ε = 1.43, 71 at ε = 2) or a kink (Q = 0).
Such a mechanism declares its pairs as samples of a path (``pair_path``); the maximum
over the samples alone sits below the supremum by up to ~1e-3 relative in δ (a peak's
quadratic fall-off over half a grid step), which an accountant must not report.

:func:`supremum` bounds the supremum at every point ``x`` (ε or order) separately,
vectorised over the points:

1. the caller's sample maximum and its sample index k(x);
2. a bracket [k − 1, k + 1] of the path position around it, halved ``ROUNDS`` times: each
   round evaluates the two quarter points and keeps the best of five points at the
   centre of the next bracket (two evaluations per round, four in the first);
3. the bound: the best value found plus the larger of its falls to the two final
   neighbours. Between those neighbours a smooth peak or a kink rises above the best
   point by at most the change over one final step (a quadratic peak by a quarter of
   it), so this margin makes the result an upper bound at the final resolution
   (2^-ROUNDS of a grid step). For integer answers (discrete kernels) the margin is
   dropped once the final points cover every integer between them (the supremum is
   then attained among them).

A PLD turns its envelope's second differences into masses, so there the bounds enter through
their lower convex hull in e^ε (:func:`convex_minorant`), never point by point.

The assumption, stated where the mechanism declares its grid: the samples resolve
the peaks (peaks wider than a grid step, or kinks placed on the grid), so that the
supremum lies within a grid step of the best sample — or of a kink the mechanism
declares off the grid (``path_kink``), around which a second search runs, the larger
bound kept (a kink peak between two samples lower than the best escapes the first).

:func:`certified_supremum` drops the assumption (host side, concrete values): a branch and bound over
cells of the path, each bounded by the cones of a proven bound of the divergence's variation along it
(for PB-DP, :meth:`dpjax.PrivacyBoosted.path_variation`: a pair's divergence is that of its noise laws,
which move with the answer only as their regions' edges do, so the bound scales with the kernel's density
at the edges, the region's edge speed in noise coordinates and the boosting rate). A peak of any width
between samples is then found or bounded, and the answer is proven either way: the threshold where every
cell closes within the budget, else the largest bound of the cells left. ``accounting.exact``'s
``privacy_profile`` returns that proven bound and ``epsilon`` raises the search's root until the cells
prove it (where they can: not at small δ); the PLD (10⁴–10⁵ ε per build) and traced calls keep the search's.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.kernels.base import take_small

#: bisection rounds: the final step is 2^-ROUNDS of the grid's.
ROUNDS = 12
#: :func:`certified_supremum`: evaluations per point before it stops refining (its answer is then the
#: largest cell bound left, still an upper bound), and the size of one compiled evaluation
CERTIFY_EVALS = 1 << 14
#: :func:`certified_supremum`'s threshold: the value to certify raised by this fraction of itself
CERTIFY_SLACK = 1e-7
_CERTIFY_CHUNK = 4096


def pairs_at(values, nvalues, position, discrete: bool):
    """The pair at real path ``position`` (an index into the nodes ``values``/``nvalues``, last
    axis): linear between consecutive nodes; integer answers (same gap) for discrete mechanisms.

    Args:
      values: the path's node answers, last axis.
      nvalues: the neighbours' node answers, same shape.
      position: real path positions (clipped to the path).
      discrete: round to integer answers keeping each node's gap.

    Returns:
      ``(v, nv)``: the pair at every position.
    """
    last = values.shape[-1] - 1
    position = jnp.clip(position, 0.0, float(last))
    k = jnp.clip(jnp.floor(position), 0.0, float(max(last - 1, 0))).astype(jnp.int32)
    t = position - k
    k1 = jnp.minimum(k + 1, last)
    v0, v1 = take_small(values, k), take_small(values, k1)
    n0, n1 = take_small(nvalues, k), take_small(nvalues, k1)
    if discrete:
        v = jnp.round(v0 + t * (v1 - v0))
        return v, v + (n0 - v0)
    return v0 + t * (v1 - v0), n0 + t * (n1 - n0)


def supremum(div, values, nvalues, best, index, *, discrete: bool, kink=None):
    """``(value, margin, position)`` of the supremum over the path of ``div`` at every point:
    ``value`` is the best found (a divergence the path attains, never below ``best``), at path
    ``position``; ``value + margin`` is the upper bound.

    ``div(v, nv)``: the divergence at every point for per-point pairs ``v``/``nv`` of shape
    (K,) + points shape, both orders already maxed (one call site: it is called once per
    round). ``values``/``nvalues``: the path's nodes (..., P); ``best``/``index``: the
    nodes' maximum at every point and its node index (points shape). ``kink``: optionally an
    answer (``values``' shape less the last axis) where the divergence has a kink, searched as
    well (a bracket of a grid step either side): a peak there, between two nodes lower than the
    best, escapes the search around the best node. The result is then the larger bound of the two
    searches. All results have the points shape.

    Args:
      div: the divergence ``div(v, nv)`` at every point for per-point pairs.
      values: the path's node answers (..., P).
      nvalues: the neighbours' node answers (..., P).
      best: the nodes' maximum at every point.
      index: the node index of ``best`` at every point.
      discrete: integer answers along the path.
      kink: an answer where the divergence has a kink, also searched; or None.

    Returns:
      ``(value, margin, position)``, each of the points' shape.
    """
    value, margin, centre = _search(
        div, values, nvalues, best, jax.lax.stop_gradient(index).astype(values.dtype), discrete
    )
    if kink is None:
        return value, margin, centre
    # a position on the path, not differentiated (as the search's centres): a gather of values' tangents would
    # transpose to a scatter into zeros of the backward pass's dtype (float32 outside x64)
    pos = jax.lax.stop_gradient(_position(values, jnp.broadcast_to(kink, values.shape[:-1])))
    pos = jnp.broadcast_to(pos.reshape(pos.shape + (1,) * (best.ndim - pos.ndim)), best.shape)
    at_kink = div(*pairs_at(values, nvalues, pos[None], discrete))[0]
    v2, m2, c2 = _search(div, values, nvalues, at_kink, pos, discrete)
    second = v2 + m2 > value + margin
    return jnp.where(second, v2, value), jnp.where(second, m2, margin), jnp.where(second, c2, centre)


def _position(values, answer):
    """The real path position (index into the nodes, last axis) of ``answer`` (values' shape less
    the last axis), linear between nodes, clipped to the path."""
    last = values.shape[-1] - 1
    k = jnp.clip(jnp.sum(values <= answer[..., None], axis=-1) - 1, 0, max(last - 1, 0))
    v0 = jnp.take_along_axis(values, k[..., None], -1)[..., 0]
    v1 = jnp.take_along_axis(values, jnp.minimum(k + 1, last)[..., None], -1)[..., 0]
    t = jnp.clip((answer - v0) / jnp.where(v1 > v0, v1 - v0, 1.0), 0.0, 1.0)
    return jnp.clip(k + t, 0.0, float(last))


def _search(div, values, nvalues, best, index, discrete):
    """:func:`supremum`'s bracketed search started at path position ``index`` (value ``best``)."""
    offsets = jnp.asarray([-1.0, 1.0], values.dtype)

    def evaluate(centre, half):
        pos = jax.lax.stop_gradient(centre + half * offsets.reshape((2,) + (1,) * centre.ndim))
        return div(*pairs_at(values, nvalues, pos, discrete))

    def step(state, r):
        centre, value, left, right, half = state
        first = r == 0
        # round 0: the bracket ends (grid neighbours); later: the quarter points
        new = evaluate(centre, jnp.where(first, half, 0.5 * half))
        left = jnp.where(first, new[0], left)
        right = jnp.where(first, new[1], right)
        five = jnp.stack([left, new[0], value, new[1], right])
        inner = five[1:4]
        # 0, 1, 2 → positions −half/2, 0, +half/2; a tie keeps the centre: at an end of the path the
        # outer quarter point is clipped onto the end itself (the same value), and following it would
        # leave the inner half, where the peak is, unsearched
        j = jnp.where(inner[1] >= jnp.maximum(inner[0], inner[2]), 1, jnp.where(inner[0] >= inner[2], 0, 2))
        pick = lambda arr: jnp.where(j == 0, arr[0], jnp.where(j == 1, arr[1], arr[2]))  # noqa: E731
        moved = jnp.where(first, centre, centre + (j.astype(centre.dtype) - 1.0) * 0.5 * half)
        return (
            moved,
            jnp.where(first, value, pick(inner)),
            jnp.where(first, left, pick(five[0:3])),
            jnp.where(first, right, pick(five[2:5])),
            jnp.where(first, half, 0.5 * half),
        ), None

    state = (index, best, best, best, jnp.ones_like(best))
    (centre, value, left, right, half), _ = jax.lax.scan(step, state, jnp.arange(ROUNDS + 1))
    margin = jnp.maximum(jnp.maximum(value - left, value - right), 0.0)
    # at an end of the path the bracket is one-sided: the best point is the end itself, rising
    # towards it from the inner neighbour (a peak inside the last final step would be narrower
    # than a grid step), so the supremum is attained there; a margin would only over-state it
    last = float(values.shape[-1] - 1)
    margin = jnp.where((centre - half < 0.0) | (centre + half > last), 0.0, margin)
    if discrete:
        answers = pairs_at(
            values, nvalues, centre + half * jnp.asarray([-1.0, 0.0, 1.0]).reshape((3,) + (1,) * centre.ndim), discrete
        )[0]
        covered = jnp.all(jnp.abs(jnp.diff(answers, axis=0)) <= 1.0, axis=0)
        margin = jnp.where(covered, 0.0, margin)
    return value, margin, centre


def convex_minorant(t, bound):
    """The greatest function convex in e^t below the points (t_i, bound_i), at every t_i (last axis,
    points in any order; leading axes a batch): the lower convex hull of the points in x = e^t.

    What a PLD needs from point-by-point bounds of a supremum of privacy profiles: the supremum is
    convex in e^ε, the bounds are not (each point has its own search, its margin jitters and jumps
    where the worst answer switches between a kink and a smooth peak), and connect-the-dots turns
    second differences into masses, a non-convex jitter η into masses ~η/step of either sign. The
    minorant is convex (no negative masses), never above the bounds, and never below the supremum f:
    at a vertex it is the bound itself, between vertices a chord of bounds, above the chord of f,
    above f — whichever points a round-off in the hull's turns keeps or drops. A finer grid adds
    points, so its minorant is at or below the coarser one's everywhere: the PLD's figures can only
    fall as the step shrinks, towards the minorant of the bounds along the whole continuum.

    Andrew's monotone chain on the points sorted by t (equal t: the later is kept), the turn tested
    on slopes in x scaled by e^{-t} of the middle point (finite at any t); the vertices' values are
    interpolated linearly in x. Differentiable in the bounds and the points' t (the choice of
    vertices is piecewise constant).

    Args:
      t: the points' losses, last axis (leading axes a batch).
      bound: the bounds at those points, same shape.

    Returns:
      The minorant at every ``t``, of ``bound``'s shape.
    """
    return jnp.vectorize(_convex_minorant_row, signature="(n),(n)->(n)")(t, bound)


def _convex_minorant_row(t, y):
    n = t.shape[0]
    # (the barrier: a constant grid's sort would be folded at compile time, seconds for 10⁴ points)
    order = jnp.argsort(jax.lax.optimization_barrier(t))
    ts, ys = t[order], y[order]
    tc_, yc_ = jax.lax.stop_gradient(ts), jax.lax.stop_gradient(ys)

    def drop_top(stack, top, c):
        """Whether the stack's top b leaves the lower hull when c comes (a: the vertex below b)."""
        a, b = stack[jnp.maximum(top - 2, 0)], stack[jnp.maximum(top - 1, 0)]
        ta, tb, tc = tc_[a], tc_[b], tc_[c]
        ya, yb, yc = yc_[a], yc_[b], yc_[c]
        same = (top >= 1) & (tc <= tb)
        # slopes in x = e^t times e^{-t_b}: b stays only strictly below the chord a–c
        s_ab = (yb - ya) / -jnp.expm1(jnp.minimum(ta - tb, -1e-300))
        s_bc = (yc - yb) / jnp.expm1(jnp.clip(tc - tb, 1e-300, 700.0))
        return same | ((top >= 2) & (s_ab >= s_bc))

    def push(carry, c):
        stack, top = carry
        stack, top = jax.lax.while_loop(
            lambda st: drop_top(st[0], st[1], c), lambda st: (st[0], st[1] - 1), (stack, top)
        )
        return (stack.at[top].set(c), top + 1), None

    (stack, top), _ = jax.lax.scan(push, (jnp.zeros(n, jnp.int32), jnp.int32(0)), jnp.arange(n, dtype=jnp.int32))
    vertices = jnp.where(jnp.arange(n) < top, stack, n)
    j = jnp.clip(jnp.searchsorted(vertices, jnp.arange(n), side="right") - 1, 0, top - 1)
    a, b = vertices[j], vertices[jnp.minimum(j + 1, top - 1)]
    # the weight of b: (x − x_a)/(x_b − x_a), from exponentials of non-positive differences
    w = jnp.where(
        b > a, jnp.exp(ts - ts[b]) * -jnp.expm1(ts[a] - ts) / -jnp.expm1(jnp.minimum(ts[a] - ts[b], -1e-300)), 0.0
    )
    hull = ys[a] + (ys[b] - ys[a]) * w
    return jnp.zeros_like(hull).at[order].set(hull)


def elementwise(hook, mech, x, v, nv):
    """``hook(m, x, v, nv)`` of scalar mechanisms, elementwise over arrays shaped (K,) + batch + (M,).

    ``mech``: parameters shaped batch + (1,) (the accountant's expanded mechanism); ``hook``
    returns, for scalar parameters and arguments, an array of size 1. Every element gets its
    own pair, unlike the hooks' own broadcasting (one pair against a grid of ε).

    Args:
      hook: the scalar divergence ``hook(m, x, v, nv)``.
      mech: the mechanism, parameters shaped batch + (1,).
      x: the points, shape (K,) + batch + (M,).
      v: the answers, broadcasting to ``x``.
      nv: the neighbours' answers, broadcasting to ``x``.

    Returns:
      The divergence of every element, of ``x``'s shape.
    """
    batch = x.shape[1:-1]
    nb = math.prod(batch)
    flat = jax.tree_util.tree_map(lambda p: jnp.broadcast_to(jnp.asarray(p)[..., 0], batch).reshape(nb), mech)

    def rows(a):  # (K,) + batch + (M,) → (nb, K·M)
        a = jnp.broadcast_to(a, x.shape).reshape((x.shape[0], nb, x.shape[-1]))
        return jnp.swapaxes(a, 0, 1).reshape(nb, -1)

    def one(m, a, b, c):
        return hook(m, a, b, c).reshape(())

    out = jax.vmap(jax.vmap(one, in_axes=(None, 0, 0, 0)))(flat, rows(x), rows(v), rows(nv))
    return jnp.swapaxes(out.reshape(nb, x.shape[0], x.shape[-1]), 0, 1).reshape(x.shape)


def path_divergence(hook, mech, x, forward=False):
    """``div(v, nv)`` for :func:`supremum`: ``hook`` at the points ``x`` (broadcast to the
    pairs' shape (K,) + batch + (M,)), every point with its own pair, both orders maxed
    unless ``forward``. ``mech``: parameters shaped batch + (1,).

    Args:
      hook: the scalar divergence hook (a value of ``HOOKS``).
      mech: the mechanism, parameters shaped batch + (1,).
      x: the points.
      forward: evaluate one order of each pair only.

    Returns:
      The function ``div(v, nv)``.
    """

    def div(v, nv):
        xs = jnp.broadcast_to(x, v.shape)
        if forward:
            return elementwise(hook, mech, xs, v, nv)
        k = v.shape[0]
        out = elementwise(hook, mech, jnp.concatenate([xs, xs]), jnp.concatenate([v, nv]), jnp.concatenate([nv, v]))
        return jnp.maximum(out[:k], out[k:])

    return div


HOOKS = {
    "hockey_stick": lambda m, x, v, nv: m.hockey_stick(x, v, nv),
    "renyi": lambda m, x, v, nv: m.renyi_divergence(x, v, nv),
}


def worst_case(m, kind, x, values, nvalues, *, directions="both", path=True):
    """``(bound, pair)``: the worst case over the pairs of the divergence ``kind``
    (``"hockey_stick"`` at ε or ``"renyi"`` at orders) at every point of ``x``.

    Traceable (no validation, no float64 switch): the tuner differentiates through it.
    Both orders of every pair unless ``directions="forward"`` or the mechanism declares
    symmetric pairs. With ``path`` and a mechanism whose pairs sample a path of answers
    (``pair_path``), ``bound`` is the supremum along the path (an upper bound,
    :func:`supremum`) and ``pair`` the path pair ``(v, v')`` where it peaks; otherwise
    the grid maximum and its pair.

    Args:
      m: the mechanism.
      kind: ``"hockey_stick"`` or ``"renyi"``.
      x: the ε values or orders.
      values: the pairs' answers.
      nvalues: the neighbours' answers.
      directions: ``"both"`` or ``"forward"``.
      path: search along the mechanism's pair path where it has one.

    Returns:
      ``(bound, pair)`` as described above.
    """
    hook = HOOKS[kind]
    x = jnp.asarray(x)
    flat = jnp.ravel(x)
    forward = directions == "forward" or bool(m.symmetric_pairs)
    v_all, nv_all = jnp.ravel(values), jnp.ravel(nvalues)

    def both(xs, v, nv):
        d = hook(m, xs, v, nv).reshape(xs.shape)
        return d if forward else jnp.maximum(d, hook(m, xs, nv, v).reshape(xs.shape))

    d = jax.vmap(lambda v, nv: both(flat, v, nv))(v_all, nv_all)  # (pairs, points)
    best, index = jnp.max(d, axis=0), jnp.argmax(d, axis=0)
    if not (path and m.pair_path and v_all.size > 1):
        pair = (take_small(v_all, index), take_small(nv_all, index))
        return best.reshape(x.shape), tuple(p.reshape(x.shape) for p in pair)
    me = jax.tree_util.tree_map(lambda p: jnp.asarray(p)[..., None], m)
    div = path_divergence(hook, me, flat, forward)
    kink = m.path_kink(v_all, nv_all) if hasattr(m, "path_kink") else None
    value, margin, position = supremum(div, v_all, nv_all, best, index, discrete=m.discrete, kink=kink)
    pair = pairs_at(v_all, nv_all, position, m.discrete)
    return (value + margin).reshape(x.shape), tuple(p.reshape(x.shape) for p in pair)


def certified_supremum(div, x, values, nvalues, variation, bound, *, discrete: bool, max_evals: int = CERTIFY_EVALS):
    """A proven upper bound of the supremum along the path at every point ``x``: branch and bound over cells
    of the path (host side, concrete values).

    ``div(x, v, nv)``: the divergence at flat arrays of points and pairs (elementwise, both orders maxed).
    ``values``/``nvalues``: the path's nodes (P,), linear between them (integer answers for ``discrete``).
    ``variation(x, v, nv, v2, nv2)``: per cell (flat arrays: its point, its end pairs), a bound V of
    the divergence's change between any two of its pairs, proportional along the cell (a Lipschitz
    constant V / length; :meth:`dpjax.PrivacyBoosted.path_variation`). ``bound``: per point, the value to
    certify (the search's bound).

    Each cell bounds the divergence inside it by the two cones from its ends, (f(a) + f(b) + V)/2 (with
    integer answers and no integer inside, max(f(a), f(b)) exactly). Cells whose bound exceeds the
    threshold — ``bound``, or the best value found if larger, raised by CERTIFY_SLACK of itself (a search's
    bound is often within round-off of the supremum, which no cell bound reaches) — are halved, the others
    are proven below their bound. When no cell is left the threshold is proven; after ``max_evals``
    evaluations per point the cells left stay open. Either way the supremum is at most the largest bound
    of all the cells (closed or open) and the best value found: that is ``upper``, proven in every case
    (below the threshold when every cell closed).

    Returns ``(upper, best, proven)``: the bound, the best value found (a divergence the path attains) and
    whether every cell closed below the threshold within the budget, arrays of ``x``'s length.

    Args:
      div: the divergence at flat arrays of points and pairs.
      x: the points.
      values: the path's node answers (P,).
      nvalues: the neighbours' node answers (P,).
      variation: the per-cell variation bound.
      bound: the value to certify per point.
      discrete: integer answers along the path.
      max_evals: the evaluation budget per point.

    Returns:
      ``(upper, best, proven)`` as described above.
    """
    x = np.asarray(x, np.float64).reshape(-1)
    values, nvalues = np.asarray(values, np.float64), np.asarray(nvalues, np.float64)
    n, last = x.size, values.size - 1
    evaluate = functools.partial(_evaluate, div, discrete, values, nvalues)
    nodes = evaluate(np.repeat(x, last + 1), np.tile(np.arange(last + 1.0), n)).reshape(n, last + 1)
    best = nodes.max(axis=1)
    slack = 1.0 + CERTIFY_SLACK
    thr = np.maximum(np.asarray(bound, np.float64).reshape(-1), best) * slack
    pt = np.repeat(np.arange(n), last)
    pa, pb = np.tile(np.arange(last, dtype=np.float64), n), np.tile(np.arange(1.0, last + 1), n)
    fa, fb = nodes[:, :-1].reshape(-1), nodes[:, 1:].reshape(-1)
    spent = np.full(n, float(last + 1))
    closed = np.full(n, -np.inf)
    left = np.full(n, -np.inf)
    while pt.size:
        start, end = _answers(values, nvalues, pa, discrete), _answers(values, nvalues, pb, discrete)
        ub = 0.5 * (fa + fb + _chunked(variation, x[pt], *start, *end))
        if discrete:
            width = np.maximum(np.abs(end[0] - start[0]), np.abs(end[1] - start[1]))
            ub = np.where(width <= 1.0, np.maximum(fa, fb), ub)
        ub = np.where(np.isnan(ub), np.inf, ub)
        live = ub > thr[pt]
        np.maximum.at(closed, pt[~live], ub[~live])
        over = spent[pt] >= max_evals
        np.maximum.at(left, pt[live & over], ub[live & over])
        keep = live & ~over
        pt, pa, pb, fa, fb = pt[keep], pa[keep], pb[keep], fa[keep], fb[keep]
        if not pt.size:
            break
        mid = 0.5 * (pa + pb)
        fm = evaluate(x[pt], mid)
        spent += np.bincount(pt, minlength=n)
        np.maximum.at(best, pt, np.where(np.isnan(fm), -np.inf, fm))
        thr = np.maximum(thr, best * slack)
        pt, pa, pb = np.concatenate([pt, pt]), np.concatenate([pa, mid]), np.concatenate([mid, pb])
        fa, fb = np.concatenate([fa, fm]), np.concatenate([fm, fb])
    return np.maximum(np.maximum(best, closed), left), best, ~np.isfinite(left)


def _answers(values, nvalues, position, discrete):
    """:func:`pairs_at` on the host (numpy)."""
    last = values.size - 1
    position = np.clip(position, 0.0, float(last))
    k = np.clip(np.floor(position), 0, max(last - 1, 0)).astype(np.int64)
    t = position - k
    k1 = np.minimum(k + 1, last)
    v0, v1, n0, n1 = values[k], values[k1], nvalues[k], nvalues[k1]
    if discrete:
        v = np.round(v0 + t * (v1 - v0))
        return v, v + (n0 - v0)
    return v0 + t * (v1 - v0), n0 + t * (n1 - n0)


def _evaluate(div, discrete, values, nvalues, x, position):
    """``div`` at the points ``x`` and path positions ``position`` (flat)."""
    return _chunked(div, x, *_answers(values, nvalues, position, discrete))


def _chunked(fn, *arrays):
    """``fn`` elementwise over flat arrays of one length, in chunks of one compiled size (the last padded)."""
    size = arrays[0].size
    out = np.empty(size)
    for i in range(0, size, _CERTIFY_CHUNK):
        m = min(_CERTIFY_CHUNK, size - i)
        args = [np.concatenate([a[i : i + m], np.repeat(a[i + m - 1 : i + m], _CERTIFY_CHUNK - m)]) for a in arrays]
        out[i : i + m] = np.asarray(fn(*args), np.float64)[:m]
    return out
