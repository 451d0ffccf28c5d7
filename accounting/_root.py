r"""The root solvers of the accountants: ε at a target δ (traced, differentiable), a scale at a target ε (host).

ε is solved for on a decreasing privacy profile; the scale on a decreasing, concrete function of it.

:func:`epsilon_root` solves ``log δ(ε) = log δ_target`` for the smallest ε ≥ ``lower`` by
bracketed Newton steps on ``log δ`` (concave for Gaussian-like tails: one overshoot, then
monotone quadratic convergence), elementwise over arrays:

* the bracket ``[lo, hi]`` starts at ``[lower, upper]`` (``upper = ∞`` by default: the
  bracket is unbounded until a point below the target is seen, and meanwhile a step goes
  at most to twice ``lo``), so no ε is ever cut at an arbitrary cap; where δ stays above
  the target up to ``upper`` (or through every doubling) the answer is ``inf``;
* a point where δ = 0 (past a pure-DP mechanism's pure ε: ``log δ = −∞``, no slope) only
  closes the bracket, as does a NaN;
* the root is reported on the safe side, ``tol`` above the last point (never above the
  least point seen below the target): near a pure ε the profile falls to 0 within a few
  ulps and the last point may sit on either side;
* its derivative is implicit (``custom_jvp``): ``dε = (dlog δ_target − ∂_θ log δ · dθ) / ∂_ε log δ``,
  at the last evaluation with δ > 0 and a finite slope (within ``tol`` of the root).

:func:`epsilon_and_slope` is the same iteration carrying a second tangent (a scalar
parameter ``u``): the root and ``dε/du`` from one loop, the gradient tuner's fused step.

:func:`log_bisect` is the host-side solver for a scale (a noise multiplier, a common scale of a
plan) at which a decreasing, concrete function (an accountant's ε) meets a target: bisection in
log space of a bracket the caller found, returning the end on the safe side.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

__all__ = ["epsilon_root", "epsilon_and_slope", "log_bisect", "ROOT_TOL", "ROOT_ITERS"]

#: default tolerance on ε (absolute) and iteration cap.
ROOT_TOL = 1e-12
ROOT_ITERS = 100


def newton_root(fn, log_target, x0, lower, upper, tol, iters, aux0):
    """Elementwise root of the decreasing ``log δ(ε) = log_target`` on ``[lower, upper]``.

    ``fn(ε) -> (log δ, ∂_ε log δ, aux)`` for arrays of points (a point per element). Returns
    ``(root, ∂_ε log δ, aux, iterations)``, the middle two from the last evaluation with
    ``δ > 0`` and a finite slope. ``lower`` when δ(lower) is already at or below the target;
    ``inf`` when no point up to ``upper`` is.
    """
    shape = jnp.broadcast_shapes(jnp.shape(log_target), jnp.shape(x0), jnp.shape(lower), jnp.shape(upper))
    dt = jnp.result_type(x0, lower, float)
    log_target = jnp.broadcast_to(log_target, shape)
    lo = jnp.broadcast_to(jnp.asarray(lower, dt), shape)
    hi = jnp.broadcast_to(jnp.asarray(upper, dt), shape)
    x = jnp.clip(jnp.broadcast_to(jnp.asarray(x0, dt), shape), lo, hi)

    def cond(s):
        return jnp.any(s[5]) & (s[4] < iters)

    def body(s):
        lo, hi, x, low_seen, k, active, df_kept, aux_kept, found, below_seen = s
        f, df, aux = fn(x)
        g = f - log_target
        above = g > 0  # NaN (δ ≤ 0 from cancellation) counts as below
        at_lower = ~above & (x <= lo) & ~low_seen  # already below the target at the lower end
        lo_n = jnp.where(above, x, lo)
        hi_n = jnp.where(above, hi, x)
        newton = x - g / df  # NaN where δ = 0 (−∞ / NaN): a bracket step below
        unbounded = jnp.isinf(hi_n)
        mid = jnp.where(unbounded, jnp.maximum(2.0 * lo_n, lo_n + 1.0), 0.5 * (lo_n + hi_n))
        # no upper end yet: at most a doubling (on a flat profile, δ ≈ 1, Newton would overshoot by orders)
        newton = jnp.where(unbounded, jnp.minimum(newton, mid), newton)
        bad = ~((newton > lo_n) & (newton < hi_n))
        xn = jnp.where(bad, mid, newton)
        # a Newton step below the bracket before any point above the target: go to the lower end
        xn = jnp.where(bad & ~(low_seen | above) & (newton <= lo_n) & ~unbounded, lo_n, xn)
        xn = jnp.where(at_lower, x, xn)
        finite = jnp.isfinite(f) & jnp.isfinite(df)
        keep = active & finite
        step = jnp.abs(xn - x)
        converged = at_lower | (step <= tol)
        still = active & ~converged & jnp.isfinite(xn)
        pick = lambda new, old: jnp.where(active, new, old)  # noqa: E731
        return (
            pick(lo_n, lo),
            pick(hi_n, hi),
            pick(xn, x),
            low_seen | (active & above),
            k + 1,
            still,
            jnp.where(keep, df, df_kept),
            jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), aux, aux_kept),
            found | (active & (~above | converged)),
            below_seen | (active & ~above),
        )

    aux0 = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, shape), aux0)
    s0 = (
        lo,
        hi,
        x,
        jnp.zeros(shape, bool),
        jnp.zeros((), jnp.int32),
        jnp.ones(shape, bool),
        jnp.full(shape, -1.0, dt),
        aux0,
        jnp.zeros(shape, bool),
        jnp.zeros(shape, bool),
    )
    lo_f, hi_f, x, low_seen, k, unfinished, df, aux, found, below_seen = jax.lax.while_loop(cond, body, s0)
    root = jnp.where(low_seen, jnp.minimum(x + tol, hi_f), x)
    # neither a point at or below the target nor a converged step (δ stays above it), or the
    # steps converged onto ``upper`` from below it: no root up to ``upper``
    at_upper = ~below_seen & (x + tol >= hi_f)
    root = jnp.where(found & ~at_upper, root, jnp.inf)
    # the iteration cap reached before the step converged: the bracket's safe end (a point at or
    # below the target, or ∞ where none was seen), never the last iterate (a doubling search toward a
    # root beyond the float range stops at the cap far below it)
    root = jnp.where(unfinished, hi_f, root)
    return root, df, aux, k


def _value_and_derivative(log_delta, x):
    """``(log δ, ∂_ε log δ, ε)``: the evaluation point is the aux (the implicit derivative's point)."""
    f, df = jax.jvp(log_delta, (x,), (jnp.ones_like(x),))
    return f, df, x


def _solve(log_delta_fn, params, log_target, x0, lower, upper, tol, iters):
    fn = functools.partial(_value_and_derivative, lambda e: log_delta_fn(e, params))
    x, _, point, _ = newton_root(fn, log_target, x0, lower, upper, tol, iters, aux0=jnp.asarray(x0, float))
    return x, point


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 6, 7))
def _implicit(log_delta_fn, params, log_target, x0, lower, upper, tol, iters):
    return _solve(log_delta_fn, params, log_target, x0, lower, upper, tol, iters)[0]


@_implicit.defjvp
def _implicit_jvp(log_delta_fn, tol, iters, primals, tangents):
    params, log_target, x0, lower, upper = primals
    dparams, dtarget = tangents[0], tangents[1]
    x, point = _solve(log_delta_fn, params, log_target, x0, lower, upper, tol, iters)
    # at the last point with δ > 0 (the root itself may sit where a pure-DP mechanism's δ is 0)
    _, dfx = jax.jvp(lambda e: log_delta_fn(e, params), (point,), (jnp.ones_like(point),))
    _, dfp = jax.jvp(lambda p: log_delta_fn(point, p), (params,), (dparams,))
    dfx = jnp.where(dfx == 0, -1e-300, dfx)
    dx = (dtarget - dfp) / dfx
    return x, jnp.where((x > lower) & jnp.isfinite(x), dx, 0.0)


#: relative margin below the target δ that covers the profiles' own round-off (a few float64 ulp)
TARGET_SLACK = 8.0 * 2.0**-52


def epsilon_root(
    log_delta_fn, params, delta_target, *, x0=1.0, lower=0.0, upper=jnp.inf, tol=ROOT_TOL, iters=ROOT_ITERS
):
    """Smallest ε ≥ ``lower`` with ``exp(log_delta_fn(ε, params)) ≤ delta_target``, elementwise.

    Implicit derivatives in ``params`` and ``delta_target`` (a ``custom_jvp``; ``x0``, ``lower`` and ``upper`` are
    not differentiated). The target is lowered by :data:`TARGET_SLACK` (relative): a profile evaluated to a few
    ulp of δ could otherwise meet it just below the true root where the profile is flat (δ near 1).

    Args:
      log_delta_fn: ``log_delta_fn(ε, params) -> log δ(ε)``, decreasing in ε; it must not close over traced
        values (pass them in ``params``: a non-differentiable argument of a ``custom_jvp``).
      params: the profile's parameters (a pytree; differentiable).
      delta_target: the target δ (broadcasting; differentiable).
      x0: a warm start.
      lower: the least ε considered.
      upper: the largest ε considered (default ∞: the bracket is unbounded until a point below the target is
        seen).
      tol: the absolute tolerance on ε (the root is reported ``tol`` above the last point, on the safe side).
      iters: the iteration cap (reached before convergence: the bracket's safe end).

    Returns:
      ε, of the broadcast shape; ``lower`` where δ(lower) is already at or below the target, ``inf`` where no
      point up to ``upper`` is.
    """
    x0 = jax.lax.stop_gradient(jnp.asarray(x0, jnp.result_type(float)))
    lower = jax.lax.stop_gradient(jnp.asarray(lower, x0.dtype))
    upper = jax.lax.stop_gradient(jnp.asarray(upper, x0.dtype))
    log_target = jnp.log(delta_target) + math.log1p(-TARGET_SLACK)
    return _implicit(log_delta_fn, params, log_target, x0, lower, upper, float(tol), int(iters))


def epsilon_and_slope(log_delta_fn, u, params, delta_target, x0, tol=ROOT_TOL, iters=ROOT_ITERS):
    """``(ε(u), dε/du)``: the ε root of ``log_delta_fn(ε, u, params) = log δ_target`` (ε ≥ 0) and its derivative.

    From one Newton loop: each step evaluates ``log δ`` with two forward tangents (ε and u) in one vmapped
    ``jvp``; the implicit derivative ``−∂_u log δ / ∂_ε log δ`` is read off the last step with δ > 0 instead of a
    further evaluation. Not differentiable itself.

    Args:
      log_delta_fn: ``log_delta_fn(ε, u, params) -> log δ``, decreasing in ε.
      u: the scalar parameter (array of them, elementwise).
      params: the profile's other parameters.
      delta_target: the target δ.
      x0: a warm start.
      tol: the absolute tolerance on ε.
      iters: the iteration cap.

    Returns:
      ``(ε, dε/du)``; the slope is 0 where ε is 0 or infinite.
    """
    u = jnp.asarray(u)

    def fn(x):
        def f(z):
            return log_delta_fn(z[0], z[1], params)

        z = jnp.stack([x, u])
        val, jac = jax.vmap(lambda t: jax.jvp(f, (z,), (t,)), out_axes=(None, 0))(jnp.eye(2, dtype=z.dtype))
        return val, jac[0], jac[1]

    x0 = jnp.asarray(x0, u.dtype)
    x, dfx, dfu, _ = newton_root(
        fn, jnp.log(delta_target), x0, jnp.zeros_like(u), jnp.full_like(u, jnp.inf), tol, iters, aux0=jnp.zeros_like(u)
    )
    dfx = jnp.where(dfx == 0, -1e-300, dfx)
    return x, jnp.where((x > 0) & jnp.isfinite(x), -dfu / dfx, 0.0)


def log_bisect(fn, lo, hi, target, *, rtol):
    """The root of the decreasing ``fn(x) = target`` in a bracket, by bisection in log space.

    Bisects until ``hi/lo − 1 < rtol`` and returns ``hi``, where ``fn ≤ target`` (the feasible end: a noise
    scale never below the one needed).

    Args:
      fn: a decreasing function of a positive float (concrete, on the host).
      lo: the bracket's lower end, ``0 < lo`` and ``fn(lo) > target``.
      hi: the bracket's upper end, ``lo < hi`` and ``fn(hi) ≤ target``.
      target: the target value.
      rtol: the relative width at which the bisection stops.

    Returns:
      ``hi``, a float.
    """
    while hi / lo - 1.0 >= rtol:
        mid = math.sqrt(lo * hi)
        if fn(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi
