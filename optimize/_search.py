"""One-dimensional searches over the log kernel scale ``u = log(σ/σ_base)``.

* :func:`ternary` — the paper's Algorithm 2 (ternary search, two objective values per
  iteration, interval shrinking by 2/3), in ``u`` instead of ε0 (Jiang et al., IEEE S&P 2025, §3.4).
* :func:`gradient` — optax descent on ``u`` with derivatives through the exact
  accountant; the default transformation :func:`scale_by_bracket` is a bracketing
  1-D quasi-Newton step (secant of the derivative, or tangent meeting point at kinks).
* :func:`grid_cell` — a coarse scan that hands the local search the cell around its best
  point, for objectives with several local minima.

Both are pure, fixed-shape and ``vmap``-able; objectives are ``fn(u, warm) -> (ε, warm)``
where ``warm`` is a warm start for the objective's inner root solve.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax


def ternary_iterations(width: float, tol: float) -> int:
    """Iterations Algorithm 2 needs to shrink an interval of ``width`` below ``tol``."""
    return max(1, math.ceil(math.log(max(width, tol) / tol) / math.log(1.5)))


def ternary(fn, lower, upper, warm, iterations: int, with_warm: bool = False):
    """Algorithm 2: ``iterations`` ternary steps on ``[lower, upper]``; returns ``(u*, steps)``
    (and, ``with_warm``, the last warm start, for evaluating the objective at ``u*``).

    Each step evaluates the objective at the two third points (warm-started from the
    previous step's values) and drops the third on the worse side.
    """

    def body(_, s):
        lo, hi, w1, w2 = s
        u1 = lo + (hi - lo) / 3.0
        u2 = hi - (hi - lo) / 3.0
        e1, w1 = fn(u1, w1)
        e2, w2 = fn(u2, w2)
        worse_left = e1 > e2
        return jnp.where(worse_left, u1, lo), jnp.where(worse_left, hi, u2), w1, w2

    lo, hi, w1, _ = jax.lax.fori_loop(0, iterations, body, (lower, upper, warm, warm))
    if with_warm:
        return 0.5 * (lo + hi), jnp.asarray(iterations, jnp.int32), w1
    return 0.5 * (lo + hi), jnp.asarray(iterations, jnp.int32)


#: ITP truncation constants (Oliveira & Takahashi 2020): shift ``K1·width^K2`` towards the middle.
_ITP_K1 = 0.1
_ITP_K2 = 2.0
#: relative misfit of one quadratic below which the bracket is treated as a smooth minimum.
_SMOOTH_FIT = 0.1
#: steps moving the same end before a bisection.
_STALL = 3
#: expansion: the zero of the left slope's secant, overshot by this factor (to land past the minimiser).
_OVERSHOOT = 2.0


class BracketState(NamedTuple):
    """The state of :func:`scale_by_bracket`: the bracket's ends with their values, slopes and curvatures.

    Attributes:
      a: the left end (derivative < 0 there: the minimiser lies right of it).
      fa: the objective at ``a``.
      ga: its derivative at ``a``.
      ca: the curvature left of the minimiser (slope secant of the last two left ends).
      b: the right end (derivative > 0 there; +inf until one is seen).
      fb: the objective at ``b``.
      gb: its derivative at ``b``.
      cb: the curvature right of the minimiser.
      probe: the expansion step while no right end is known.
      stall: consecutive steps that moved the same end of the bracket (signed).
      last: which end the last step moved: −1 left, +1 right.
      c: the end the last step replaced (a third point for inverse interpolation).
      gc: the derivative at ``c``.
    """

    a: jax.Array  # left end: derivative < 0 there (the minimiser lies right of it)
    fa: jax.Array
    ga: jax.Array
    ca: jax.Array  # curvature of the objective left of the minimiser (slope secant of the last two left ends)
    b: jax.Array  # right end: derivative > 0 there (+inf until one is seen)
    fb: jax.Array
    gb: jax.Array
    cb: jax.Array  # curvature right of the minimiser
    probe: jax.Array  # expansion step while no right end is known
    stall: jax.Array  # consecutive steps that moved the same end of the bracket (signed)
    last: jax.Array  # which end the last step moved: −1 left, +1 right
    c: jax.Array  # the end the last step replaced (a third point for inverse interpolation)
    gc: jax.Array


def _branch(f, g, c, d):
    """Value and slope at offset ``d`` of the branch model through ``(f, g, c)`` (value, slope,
    curvature): ``f + g·expm1(λd)/λ`` with ``λ = c/g`` — exact for the exponential tails of the
    privacy objectives (``f ≈ A + B e^{λu}``), and second-order accurate for any branch."""
    lam = c / g
    z = lam * d
    small = jnp.abs(z) < 1e-8
    zs = jnp.where(small, 1.0, z)
    ratio = jnp.where(small, 1.0 + 0.5 * z, jnp.expm1(jnp.minimum(zs, 50.0)) / zs)
    return f + g * d * ratio, g * jnp.exp(jnp.minimum(z, 50.0))


def _branch_meet(a, fa, ga, ca, b, fb, gb, cb):
    """Where the two one-sided branch models ``L`` (at ``a``) and ``R`` (at ``b``) meet.

    The two branches of a kinked minimum (two loss regimes crossing), each with its own
    value, slope and curvature (:func:`_branch`). ``R − L`` increases (``gb > 0 > ga``):
    Newton steps from the meeting point of the tangents, kept inside ``(a, b)``.
    """
    x = (fb - fa + ga * a - gb * b) / (ga - gb)
    for _ in range(4):
        fl, gl = _branch(fa, ga, ca, x - a)
        fr, gr = _branch(fb, gb, cb, x - b)
        dd = gr - gl
        xn = x - (fr - fl) / jnp.where(dd > 0, dd, 1.0)
        x = jnp.where((dd > 0) & (xn > a) & (xn < b), xn, x)
    return x


def _candidate(s, tol):
    """Next point inside a bracket ``ga < 0 < gb`` from the values, slopes and curvatures at its ends.

    Two global models: smooth (one function across the bracket: inverse quadratic
    interpolation of the slope through both ends and the replaced one, else a Newton step
    from the side that moved last, else the secant across the bracket) and kinked (two
    branches meeting, each end's :func:`_branch` model with its own curvature). How well a
    quadratic predicts ``fb`` from ``(fa, ga, gb)`` tells which one fits; the point is then
    ITP-truncated towards the middle and keeps 1e-3 of the width (at least ``tol/2``) from
    the ends. A Newton step from the better end overrides both, unshifted, when its local
    quadratic agrees with the other end's slope sign (inside a rounded kink). Returns
    ``(point, whether it is that local Newton step)``.
    """
    a, fa, ga, ca, b, fb, gb, cb = s.a, s.fa, s.ga, s.ca, s.b, s.fb, s.gb, s.cb
    length = b - a
    dg = gb - ga
    across = a - ga * length / dg
    u, g, c = jnp.where(s.last < 0, a, b), jnp.where(s.last < 0, ga, gb), jnp.where(s.last < 0, ca, cb)
    newton = u - g / jnp.where(c > 0, c, 1.0)
    smooth = jnp.where((c > 0) & (newton > a) & (newton < b), newton, across)
    # inverse quadratic interpolation of the slope through a, b and the replaced end (Brent)
    x3, g3 = s.c, s.gc
    d1, d2, d3 = (ga - gb) * (ga - g3), (gb - ga) * (gb - g3), (g3 - ga) * (g3 - gb)
    ok3 = jnp.isfinite(g3) & (d1 != 0) & (d2 != 0) & (d3 != 0)
    one = jnp.where(ok3, 1.0, 0.0)
    iqi = (
        a * gb * g3 / jnp.where(ok3, d1, 1.0)
        + b * ga * g3 / jnp.where(ok3, d2, 1.0)
        + x3 * ga * gb / jnp.where(ok3, d3, 1.0)
    ) * one
    smooth = jnp.where(ok3 & (iqi > a) & (iqi < b), iqi, smooth)
    kink = _branch_meet(a, fa, ga, ca, b, fb, gb, cb)
    mismatch = jnp.abs(fb - fa - 0.5 * (ga + gb) * length) / (0.5 * dg * length)
    x = jnp.where(mismatch < _SMOOTH_FIT, smooth, kink)
    # a Newton step from the better end, when its local quadratic agrees with the other
    # end's slope sign (inside a rounded kink, where neither global model fits)
    best_a = fa <= fb
    ub, gbest, cbest = jnp.where(best_a, a, b), jnp.where(best_a, ga, gb), jnp.where(best_a, ca, cb)
    uo, go = jnp.where(best_a, b, a), jnp.where(best_a, gb, ga)
    local = ub - gbest / jnp.where(cbest > 0, cbest, 1.0)
    # (and not onto the other end: that point is known, so a step there cannot make progress)
    agree = (
        (cbest > 0)
        & ((gbest + cbest * (uo - ub)) * go > 0)
        & (local > a)
        & (local < b)
        & (jnp.abs(local - uo) > 1e-3 * length)
    )
    x = jnp.where(jnp.isfinite(x), x, a + 0.5 * length)
    # ITP truncation: move the model's point towards the middle by 0.1·width² (at most
    # to the middle), so that a model biased to one side still lands past the minimiser
    mid = a + 0.5 * length
    shift = jnp.minimum(_ITP_K1 * length**_ITP_K2, jnp.abs(mid - x))
    x = x + jnp.sign(mid - x) * shift
    margin = jnp.minimum(jnp.maximum(1e-3 * length, 0.5 * tol), 0.5 * length)
    x = jnp.clip(x, a + margin, b - margin)
    # the local Newton step goes unshifted (quadratic convergence), keeping tol/2 from the ends
    edge = jnp.minimum(0.5 * tol, 0.5 * length)
    return jnp.where(agree, jnp.clip(local, a + edge, b - edge), x), agree


def scale_by_bracket(lower, upper, first_step: float = 0.5, tol: float = 0.0) -> optax.GradientTransformationExtraArgs:
    """Bracketing quasi-Newton step for a 1-D unimodal objective (an optax transformation).

    ``update(grad, state, params, value=f)``: keeps the tightest ``[a, b]`` with a
    negative derivative at ``a`` and a positive one at ``b`` (unimodality puts the
    minimiser inside), with the value, slope and a curvature estimate (slope secant of
    that side's last two points, or the exact second derivative passed as
    ``update(..., curvature=h)``) at each end. While no right end is known it expands: to
    the zero of the left slope's secant (overshot twofold, between ``first_step`` and four
    times the last expansion), or doubling. Inside a bracket it moves to the minimiser of a
    two-sided model (:func:`_candidate`): inverse-quadratic/secant/Newton steps on the
    derivative (smooth minima), the meeting point of the two ends' branch models (kinked
    minima, where two loss regimes cross), or a Newton step from the better end (inside a
    rounded kink), with an ITP truncation towards the middle; every third step that moves
    the same end is a bisection (expansion steps and local Newton steps do not count).
    Superlinear on both kinds of minima. Points keep ``tol/2`` from the bracket's ends. The
    update is clipped into ``[lower, upper]``.

    Args:
      lower: the search box's lower end (scalar or array, broadcast with the parameters).
      upper: the search box's upper end.
      first_step: the first expansion step while no right end of the bracket is known.
      tol: the distance (doubled) the candidate points keep from the bracket's ends.

    Returns:
      An ``optax.GradientTransformationExtraArgs`` whose ``update(grad, state, params, value=f,
      curvature=h)`` needs the parameters and the objective's value (``curvature`` is optional);
      its state is a :class:`BracketState`.
    """

    def init(params):
        z = jnp.zeros_like(params)
        inf = jnp.full_like(params, jnp.inf)
        return BracketState(z + lower, inf, -inf, z, z + upper, inf, inf, z, z + first_step, z, z, z, inf)

    def update(updates, state, params=None, value=None, **extra):
        g, u, f = updates, params, value
        h = extra.get("curvature")  # the objective's second derivative at u, when the caller has it
        left = g < 0
        right = g > 0
        have_a0, have_b0 = jnp.isfinite(state.ga), jnp.isfinite(state.gb)
        move_a = left & (u >= state.a)
        move_b = right & (u <= state.b)
        if h is None:
            ca = jnp.where(move_a & have_a0 & (u > state.a), (g - state.ga) / (u - state.a), state.ca)
            cb = jnp.where(move_b & have_b0 & (u < state.b), (state.gb - g) / (state.b - u), state.cb)
        else:
            ca = jnp.where(move_a, h, state.ca)
            cb = jnp.where(move_b, h, state.cb)
        s = BracketState(
            jnp.where(move_a, u, state.a),
            jnp.where(move_a, f, state.fa),
            jnp.where(move_a, g, state.ga),
            jnp.where(move_a, ca, state.ca),
            jnp.where(move_b, u, state.b),
            jnp.where(move_b, f, state.fb),
            jnp.where(move_b, g, state.gb),
            jnp.where(move_b, cb, state.cb),
            state.probe,
            state.stall,
            jnp.where(left, -1.0, 1.0) + 0.0 * u,
            jnp.where(move_a, state.a, jnp.where(move_b, state.b, state.c)),
            jnp.where(move_a, state.ga, jnp.where(move_b, state.gb, state.gc)),
        )
        have_a, have_b = jnp.isfinite(s.ga), jnp.isfinite(s.gb)
        both = have_a & have_b
        safe = s._replace(
            b=jnp.where(both, s.b, s.a + 1.0),
            gb=jnp.where(both, s.gb, 1.0),
            fb=jnp.where(both, s.fb, s.fa),
            a=jnp.where(both, s.a, s.b - 1.0),
            ga=jnp.where(both, s.ga, -1.0),
            fa=jnp.where(both, s.fa, s.fb),
        )
        inner, local = _candidate(safe, tol)
        # one end moving while the other is stuck (a model biased to one side): every
        # third such step is a bisection, so the bracket at least halves every 3 steps
        stall = jnp.where(
            left == (state.stall < 0), state.stall + jnp.where(left, -1.0, 1.0), jnp.where(left, -1.0, 1.0)
        )
        stall = jnp.where(have_a0 & have_b0, stall, 0.0)  # expansion steps do not count
        bisect = (jnp.abs(stall) >= _STALL) & ~local
        inner = jnp.where(bisect, 0.5 * (s.a + s.b), inner)
        stall = jnp.where(bisect | local, 0.0, stall)
        # expansion: to the zero of the slope secant of the last two left points, overshot
        # twofold (to land past the minimiser), within [probe, 4 probe]; else doubling
        c_ok = move_a & (have_a0 | (h is not None)) & (ca > 0)
        guess = jnp.clip(-_OVERSHOOT * g / jnp.where(c_ok, ca, 1.0), state.probe, 4.0 * state.probe)
        step = jnp.where(c_ok, guess, state.probe)
        target = jnp.where(both, inner, jnp.where(have_a, u + step, u - state.probe))
        target = jnp.clip(target, lower, upper)
        target = jnp.where(g == 0, u, target)
        # at a box end with the derivative pointing out of the box: stay (constrained optimum)
        target = jnp.where((u <= lower) & right | (u >= upper) & left, u, target)
        probe = jnp.where(both, state.probe, jnp.where(c_ok, step, 2.0 * state.probe))
        return target - u, s._replace(probe=probe, stall=stall)

    return optax.GradientTransformationExtraArgs(init, update)


def grid_cell(fn, lower, upper, warm, points: int):
    """Scan ``fn`` on ``points`` equally spaced ``u`` from ``lower`` to ``upper`` (each evaluation
    warm-started from the previous one); returns ``(a, b, u_best, f(lower), warm at u_best)``:
    the cell ``[a, b]`` between the best point's grid neighbours, where a local search goes on.
    """
    grid = lower + (upper - lower) * jnp.linspace(0.0, 1.0, points, dtype=jnp.result_type(lower))

    def step(w, u):
        e, w = fn(u, w)
        return w, (e, w)

    _, (values, warms) = jax.lax.scan(step, warm, grid)
    k = jnp.argmin(values)
    pick = lambda i: jax.tree_util.tree_map(lambda x: x[i], (grid, values, warms))  # noqa: E731
    (u, _, w), (a, _, _), (b, _, _) = pick(k), pick(jnp.maximum(k - 1, 0)), pick(jnp.minimum(k + 1, points - 1))
    return a, b, u, values[0], w


def gradient(
    fn,
    lower,
    upper,
    warm,
    start,
    tol: float,
    max_steps: int,
    optimizer=None,
    value_and_slope=None,
    with_values: bool = False,
):
    """Minimise ``fn`` over ``u ∈ [lower, upper]`` with optax; returns ``(u*, steps)``.

    The derivative comes from ``value_and_slope(u, warm) -> (value, slope, warm)`` when
    given (a fused evaluation; ``slope`` may be a pair ``(slope, curvature)``, passed on
    as ``curvature=``), else from ``jax.jvp`` of ``fn`` (through the implicit root solve).
    ``optimizer``: an optax transformation (default :func:`scale_by_bracket`
    with this ``tol``; any transformation accepting ``value=`` as an extra argument, or
    ignoring it, works), whose updates are projected back onto the box. Stops when a
    step moves ``u`` by less than ``tol`` (or after ``max_steps``); under ``vmap`` the
    loop runs until every setting has stopped. With ``with_values``: returns
    ``(u_best, steps, f(u_best), f(lower))`` — the evaluated point with the smallest
    value (within ``tol`` of the last step) and the value at ``lower`` if it was
    evaluated (``NaN`` otherwise), so that the caller need not evaluate them again.
    """
    opt = scale_by_bracket(lower, upper, tol=tol) if optimizer is None else optimizer
    u0 = jnp.clip(start, lower, upper)
    if value_and_slope is None:

        def value_and_slope(u, w):
            (e, w), (g, _) = jax.jvp(fn, (u, w), (jnp.ones_like(u), jax.tree_util.tree_map(jnp.zeros_like, w)))
            return e, g, w

    def cond(s):
        return (jnp.abs(s[3]) > tol) & (s[4] < max_steps)

    def body(s):
        u, st, w, _, k, best = s
        e, g, w = value_and_slope(u, w)
        if isinstance(g, tuple):  # (slope, curvature)
            g, h = g
            upd, st = opt.update(g, st, u, value=e, curvature=h)
        else:
            upd, st = opt.update(g, st, u, value=e)
        un = optax.projections.projection_box(optax.apply_updates(u, upd), lower, upper)
        better = e < best[1]
        best = (jnp.where(better, u, best[0]), jnp.where(better, e, best[1]), jnp.where(u == lower, e, best[2]))
        return un, st, w, un - u, k + 1, best

    nan = jnp.full_like(u0, jnp.nan)
    s0 = (u0, opt.init(u0), warm, jnp.inf + u0, jnp.zeros((), jnp.int32), (u0, jnp.inf + u0, nan))
    u, _, _, _, k, best = jax.lax.while_loop(cond, body, s0)
    if with_values:
        return best[0], k, best[1], best[2]
    return u, k
