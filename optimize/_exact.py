r"""Exact privacy of a PB-DP mechanism for the tuner: worst case over pairs, ε at a δ.

The closed forms are the mechanism's own accounting hooks,
:meth:`dpjax.PrivacyBoosted.hockey_stick` and :meth:`~dpjax.PrivacyBoosted.renyi_divergence`
(spec §3.8), which are differentiable in every parameter (finite outer piece edges,
gradient-safe empty pieces). What is the tuner's own:

* the worst case over the mechanism's neighbouring pairs, shared with
  :func:`accounting._pair_path.worst_case` (both directions unless the mechanism declares
  them symmetric; the supremum along the answers for relative and fixed regions). A
  listed pair set sized for a larger scale than the kernel's (the tuner's, a discrete
  kernel's relative region: one pair per region width up to the reach of the largest scale
  searched) is swept in chunks that stop past the kernel's own reach (``trim``);
* the ε of the privacy profile at a target δ, a root: :func:`epsilon_for_delta` solves
  it by bracketed Newton steps on ``log δ(ε)`` (warm start, tolerance stop) and is
  differentiated implicitly (``custom_jvp``): ``dε = −∂_θ log δ · dθ / ∂_ε log δ``. For
  pure-DP kernels (Laplace, discrete Laplace) δ(ε) is exactly 0 from the mechanism's pure
  ε on (``log δ = −∞``, no slope there): such points only close the bracket, and the
  derivatives come from the last evaluation where δ > 0;
* :func:`epsilon_and_slope`: the ε root and its derivative along one parameter
  direction from the *same* Newton iterations (forward mode with two tangents), the
  fused value-and-derivative the gradient tuner runs on.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from accounting._pair_path import worst_case
from dpjax.boosting import kernel_reach

#: default root tolerance on ε and iteration cap.
ROOT_TOL = 1e-12
ROOT_ITERS = 60
#: pairs per chunk of a trimmed sweep over listed pairs.
CHUNK = 384


def delta(mech, epsilon, sensitivity, trim=False):
    """Worst-case exact δ(ε) over the mechanism's neighbouring pairs (unbatched mech): the
    supremum along the answers where the pairs sample a path (:func:`accounting._pair_path.worst_case`).
    ``trim``: see :func:`_worst`."""
    return _worst(mech, "hockey_stick", epsilon, sensitivity, trim)


def renyi(mech, order, sensitivity, trim=False):
    """Worst-case exact Rényi divergence ``D_α`` over the neighbouring pairs (unbatched mech)."""
    return _worst(mech, "renyi", order, sensitivity, trim)


def _worst(mech, kind, x, sensitivity, trim=False):
    """The worst case over ``mech.neighbour_pairs``; with ``trim``, a listed (not path) pair set
    longer than :data:`CHUNK` is swept chunk by chunk, stopping after the first chunk whose
    pairs all lie beyond the kernel's reach (both answers' regions reach past it).

    Such a pair's two laws are the kernel's own, shifted (the kernel's mass outside both
    regions is below 1e-17), so every later pair repeats that chunk's: the list may be sized
    for a larger kernel scale (the tuner's static list covers its whole search range) while
    each evaluation pays for its own scale. Forward-mode differentiable only (a while loop).
    """
    v, nv = mech.neighbour_pairs(sensitivity)
    n = v.shape[-1]
    if not trim or mech.pair_path or n <= CHUNK:
        return worst_case(mech, kind, x, v, nv)[0]
    count = -(-n // CHUNK)
    pad = count * CHUNK - n  # repeats of the first pair fill the last chunk

    def chunks(a):
        return jnp.concatenate([a, jnp.broadcast_to(a[..., :1], a.shape[:-1] + (pad,))], -1).reshape(count, CHUNK)

    vc, nvc = chunks(v), chunks(nv)
    reach = kernel_reach(mech.kernel)
    near = jnp.min(jnp.minimum(mech.region.noise_interval(vc)[1], mech.region.noise_interval(nvc)[1]), -1) <= reach

    def cond(s):
        i = s[0]
        return (i < count) & ((i == 0) | near[jnp.maximum(i - 1, 0)])

    def body(s):
        i, best = s
        return i + 1, jnp.maximum(best, worst_case(mech, kind, x, vc[i], nvc[i])[0])

    x = jnp.asarray(x)
    return jax.lax.while_loop(cond, body, (jnp.zeros((), jnp.int32), jnp.full(x.shape, -jnp.inf, x.dtype)))[1]


# ----------------------------------------------------------------------------------
# ε at a target δ: bracketed Newton on log δ(ε), implicit derivative
# ----------------------------------------------------------------------------------
def _newton_root(fn, log_target, x0, hi, tol, iters, aux0=None):
    """Root of the decreasing ``log δ(ε) = log_target`` on ``[0, hi]`` (0 if already below).

    ``fn(ε) -> (log δ, ∂_ε log δ, aux)``. Newton steps on ``log δ`` (concave for
    Gaussian-like tails: one overshoot, then monotone quadratic convergence), kept inside
    the bracket by bisection; a step below 0 before ε = 0 has been seen above the target
    goes to 0 itself (so a root at 0 costs no extra evaluation). A point where δ = 0 (past
    a pure-DP mechanism's pure ε: ``log δ = −∞``, no finite slope) only closes the bracket:
    the next point is its midpoint. Stops when a step is below ``tol``; the root is
    reported on the safe side, ``tol`` above the last point (never above the least point
    seen below the target), since near a pure ε the profile falls to 0 within a few ulps
    and the last point may sit on either side. Returns ``(root, ∂_ε log δ, aux,
    iterations)``, the middle two from the last evaluation with ``δ > 0`` and a finite
    slope (within ``tol`` of the root, or an end of the final bracket).
    """

    def cond(s):
        return (jnp.abs(s[3]) > tol) & (s[4] < iters)

    def body(s):
        lo, h, x, _, k, df_kept, aux_kept, lo_seen = s
        f, df, aux = fn(x)
        g = f - log_target
        above = g > 0
        lo = jnp.where(above, x, lo)
        h = jnp.where(above, h, x)
        lo_seen = lo_seen | above
        newton = x - g / df  # NaN where δ = 0 (−∞ / NaN): bisection below
        bad = ~((newton > lo) & (newton < h))
        xn = jnp.where(bad, 0.5 * (lo + h), newton)
        xn = jnp.where(bad & ~lo_seen & (newton < lo), lo, xn)
        at0 = ~above & (x <= 0.0)  # already below the target at ε = 0: the root is 0
        xn = jnp.where(at0, 0.0, xn)
        finite = jnp.isfinite(f) & jnp.isfinite(df)
        df_kept = jnp.where(finite, df, df_kept)
        aux_kept = jax.tree_util.tree_map(lambda a, b: jnp.where(finite, a, b), aux, aux_kept)
        return lo, h, xn, jnp.where(at0, 0.0, xn - x), k + 1, df_kept, aux_kept, lo_seen

    zero = jnp.zeros_like(x0)
    x0 = jnp.clip(x0, 0.0, hi)
    s0 = (zero, hi + zero, x0, jnp.inf + zero, jnp.zeros((), jnp.int32), -1.0 + zero, aux0, jnp.zeros((), bool))
    _, h, x, _, k, df, aux, _ = jax.lax.while_loop(cond, body, s0)
    return jnp.where(x > 0, jnp.minimum(x + tol, h), x), df, aux, k


def _value_and_derivative(log_delta, x):
    """``(log δ, ∂_ε log δ, ε)``: the evaluation point is the aux (the implicit derivative's point)."""
    f, df = jax.jvp(log_delta, (x,), (jnp.ones_like(x),))
    return f, df, x


def _solve(log_delta_fn, params, log_target, x0, hi):
    """``(root, point)``: the root and the last point evaluated with δ > 0 (within the root
    tolerance of it), where the implicit derivative is taken."""
    fn = functools.partial(_value_and_derivative, lambda e: log_delta_fn(e, params))
    x, _, point, _ = _newton_root(fn, log_target, x0, hi, ROOT_TOL, ROOT_ITERS, aux0=x0)
    return x, point


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _implicit_eps(log_delta_fn, params, log_target, x0, hi):
    return _solve(log_delta_fn, params, log_target, x0, hi)[0]


@_implicit_eps.defjvp
def _implicit_eps_jvp(log_delta_fn, primals, tangents):
    params, log_target, x0, hi = primals
    dparams, dtarget, _, _ = tangents
    x, point = _solve(log_delta_fn, params, log_target, x0, hi)
    # at the last point with δ > 0 (the root itself may sit where a pure-DP mechanism's δ is 0)
    _, dfx = jax.jvp(lambda e: log_delta_fn(e, params), (point,), (jnp.ones_like(point),))
    _, dfp = jax.jvp(lambda p: log_delta_fn(point, p), (params,), (dparams,))
    dfx = jnp.where(dfx == 0, -1e-300, dfx)
    dx = (dtarget - dfp) / dfx
    return x, jnp.where(x > 0, dx, 0.0)


def epsilon_for_delta(log_delta_fn, params, delta_target, x0=1.0, hi=200.0):
    """Smallest ε ≥ 0 with ``exp(log_delta_fn(ε, params)) ≤ delta_target``; implicit gradients.

    ``log_delta_fn`` must be decreasing in ε and must not close over traced values
    (pass them in ``params``: it is a non-differentiable argument of a ``custom_jvp``);
    ``x0`` is a warm start (not differentiated).
    """
    x0 = jax.lax.stop_gradient(jnp.asarray(x0, jnp.result_type(float)))
    return _implicit_eps(log_delta_fn, params, jnp.log(delta_target), x0, jnp.asarray(hi, x0.dtype))


def epsilon_and_slope(log_delta_fn, u, params, delta_target, x0, hi=200.0):
    """``(ε(u), dε/du)``: the ε root of ``log_delta_fn(ε, u, params) = log δ_target`` and its
    derivative in the scalar ``u``, from one Newton loop.

    Each Newton step evaluates ``log δ`` with two forward tangents (ε and u) in one
    vmapped ``jvp``; the implicit derivative ``−∂_u log δ / ∂_ε log δ`` is read off the
    last step with δ > 0 (within the root tolerance of the root) instead of a further
    evaluation.
    ``x0``: warm start. Not differentiable itself (it is the tuner's value-and-slope).
    """
    u = jnp.asarray(u)

    def fn(x):
        def f(z):
            return log_delta_fn(z[0], z[1], params)

        z = jnp.stack([x, u])
        val, jac = jax.vmap(lambda t: jax.jvp(f, (z,), (t,)), out_axes=(None, 0))(jnp.eye(2, dtype=z.dtype))
        return val, jac[0], jac[1]

    x0 = jnp.asarray(x0, u.dtype)
    x, dfx, dfu, _ = _newton_root(fn, jnp.log(delta_target), x0, jnp.asarray(hi, u.dtype), ROOT_TOL, ROOT_ITERS,
                                  aux0=jnp.zeros_like(u))
    dfx = jnp.where(dfx == 0, -1e-300, dfx)
    return x, jnp.where(x > 0, -dfu / dfx, 0.0)
