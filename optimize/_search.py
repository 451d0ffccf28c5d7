"""One-dimensional searches over the log kernel scale ``u = log(σ/σ_base)``.

* :func:`ternary` — the paper's Algorithm 2 (ternary search, two objective values per
  iteration, interval shrinking by 2/3), in ``u`` instead of ε0 (spec §4.2 / typo 40).
* :func:`gradient` — optax descent on ``u`` with derivatives through the exact
  accountant; the default transformation :func:`scale_by_bracket` is a bracketing
  1-D quasi-Newton step (secant of the derivative, or tangent meeting point at kinks).

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


def ternary(fn, lower, upper, warm, iterations: int):
    """Algorithm 2: ``iterations`` ternary steps on ``[lower, upper]``; returns ``(u*, steps)``.

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

    lo, hi, _, _ = jax.lax.fori_loop(0, iterations, body, (lower, upper, warm, warm))
    return 0.5 * (lo + hi), jnp.asarray(iterations, jnp.int32)


class BracketState(NamedTuple):
    a: jax.Array  # left end: derivative < 0 there (the minimiser lies right of it)
    fa: jax.Array
    ga: jax.Array
    b: jax.Array  # right end: derivative > 0 there (+inf until one is seen)
    fb: jax.Array
    gb: jax.Array
    probe: jax.Array  # expansion step while no right end is known
    stall: jax.Array  # consecutive steps that moved the same end of the bracket


def _candidate(a, fa, ga, b, fb, gb):
    """Next point inside a bracket ``ga < 0 < gb`` from the values and slopes at its ends.

    Two models: a quadratic (the secant of the derivative, exact for smooth minima)
    and two tangents meeting at a kink (exact for the V-shaped minima of the (ε, δ)
    objective, where two loss regimes cross). The quadratic's prediction of ``fb``
    from ``(fa, ga, gb)`` tells which one fits.
    """
    length = b - a
    dg = gb - ga
    secant = a - ga * length / dg
    kink = (fb - fa + ga * a - gb * b) / (ga - gb)
    mismatch = jnp.abs(fb - fa - 0.5 * (ga + gb) * length) / (0.5 * dg * length)
    u = jnp.where(mismatch < 0.1, secant, kink)
    margin = 1e-3 * length
    return jnp.clip(jnp.where(jnp.isfinite(u), u, a + 0.5 * length), a + margin, b - margin)


def scale_by_bracket(lower, upper, first_step: float = 0.5) -> optax.GradientTransformationExtraArgs:
    """Bracketing quasi-Newton step for a 1-D unimodal objective (an optax transformation).

    ``update(grad, state, params, value=f)``: keeps the tightest ``[a, b]`` with a
    negative derivative at ``a`` and a positive one at ``b`` (unimodality puts the
    minimiser inside), expands (doubling ``first_step``) until a right end is seen,
    then moves to the minimiser of a two-point model: the secant of the derivative
    (quadratic model, superlinear at smooth minima) or the meeting point of the two
    end tangents (kink model, superlinear at V-shaped minima), chosen by how well the
    quadratic predicts the values. The update is clipped into ``[lower, upper]``.
    """

    def init(params):
        z = jnp.zeros_like(params)
        inf = jnp.full_like(params, jnp.inf)
        return BracketState(z + lower, inf, -inf, z + upper, inf, inf, z + first_step, z)

    def update(updates, state, params=None, value=None, **extra):
        g, u, f = updates, params, value
        left = g < 0
        right = g > 0
        a = jnp.where(left & (u >= state.a), u, state.a)
        fa = jnp.where(left & (u >= state.a), f, state.fa)
        ga = jnp.where(left & (u >= state.a), g, state.ga)
        b = jnp.where(right & (u <= state.b), u, state.b)
        fb = jnp.where(right & (u <= state.b), f, state.fb)
        gb = jnp.where(right & (u <= state.b), g, state.gb)
        have_a, have_b = jnp.isfinite(ga), jnp.isfinite(gb)
        both = have_a & have_b
        inner = _candidate(a, fa, ga, jnp.where(both, b, a + 1.0), fb, jnp.where(both, gb, 1.0))
        # one end moving while the other is stuck (a model biased to one side): every
        # third such step is a bisection, so the bracket at least halves every 3 steps
        stall = jnp.where(left == (state.stall < 0), state.stall + jnp.where(left, -1.0, 1.0),
                          jnp.where(left, -1.0, 1.0))
        inner = jnp.where(jnp.abs(stall) >= 3, 0.5 * (a + b), inner)
        stall = jnp.where(jnp.abs(stall) >= 3, 0.0, stall)
        target = jnp.where(both, inner,
                           jnp.where(have_a, u + state.probe, u - state.probe))
        target = jnp.clip(target, lower, upper)
        target = jnp.where(g == 0, u, target)
        # at a box end with the derivative pointing out of the box: stay (constrained optimum)
        target = jnp.where((u <= lower) & right | (u >= upper) & left, u, target)
        probe = jnp.where(both, state.probe, 2.0 * state.probe)
        return target - u, BracketState(a, fa, ga, b, fb, gb, probe, stall)

    return optax.GradientTransformationExtraArgs(init, update)


def gradient(fn, lower, upper, warm, start, tol: float, max_steps: int, optimizer=None):
    """Minimise ``fn`` over ``u ∈ [lower, upper]`` with optax; returns ``(u*, steps)``.

    The derivative comes from ``jax.jvp`` of ``fn`` (through the implicit root solve).
    ``optimizer``: an optax transformation (default :func:`scale_by_bracket`; any transformation
    accepting ``value=`` as an extra argument, or ignoring it, works), whose
    updates are projected back onto the box. Stops when a step moves ``u`` by less
    than ``tol`` (or after ``max_steps``).
    """
    opt = scale_by_bracket(lower, upper) if optimizer is None else optimizer
    u0 = jnp.clip(start, lower, upper)

    def cond(s):
        u, st, w, step, k = s
        return (jnp.abs(step) > tol) & (k < max_steps)

    def body(s):
        u, st, w, _, k = s
        (e, w), (g, _) = jax.jvp(fn, (u, w), (jnp.ones_like(u), jax.tree_util.tree_map(jnp.zeros_like, w)))
        upd, st = opt.update(g, st, u, value=e)
        un = optax.projections.projection_box(optax.apply_updates(u, upd), lower, upper)
        return un, st, w, un - u, k + 1

    s0 = (u0, opt.init(u0), warm, jnp.inf + u0, jnp.zeros((), jnp.int32))
    u, _, _, _, k = jax.lax.while_loop(cond, body, s0)
    return u, k
