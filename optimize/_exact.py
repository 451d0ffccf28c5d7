r"""Exact privacy of a Gaussian-kernel PB-DP mechanism, written for differentiation.

Spec §3.8: for a pair of answers ``(v, v')`` the real line is cut at the four region
boundaries ``{lo(v), hi(v), lo(v'), hi(v')}``; on each piece ``j`` the boosted
log-densities are the kernel's plus constants ``c_j`` / ``c'_j`` (``log w − log Z``), so
the privacy loss is the Gaussian loss plus ``c_j − c'_j`` and

* the hockey-stick divergence is a sum of Gaussian interval masses cut at the
  loss threshold ``y*_j = (ε − c_j + c'_j) σ²/(v − v') + (v + v')/2``;
* the Rényi integral is ``Σ_j e^{α c_j + (1−α) c'_j + K} P_m(piece_j)`` with
  ``m = α v + (1 − α) v'``, ``K = α(α−1)(v − v')²/(2σ²)``.

Everything here is finite and smooth in (σ, τ, θ, ρ, Δ, ε): the two outer pieces end
at finite edges far in the tails instead of ±∞, and empty pieces are guarded with the
double-``where`` trick, so ``jax.grad`` / ``jax.jvp`` never meet ``inf − inf``. The
boosting rate is eq. (3) at the region's hardest answers (``region.hardest_answers``),
computed in the same fused Gaussian-mass call as the normalisers (compile time grows
with the number of ``log_ndtr`` calls). The values agree with ``PrivacyBoosted.hockey_stick`` /
``renyi_divergence`` (tested); only the gradients are the reason this module exists.

The ε of a privacy profile at a target δ is a root: :func:`epsilon_for_delta` solves it
by bracketed Newton steps on ``log δ(ε)`` (fixed maximum of iterations, warm start) and
is differentiated implicitly (``custom_jvp``): ``dε = −∂_θ log δ · dθ / ∂_ε log δ``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr

#: width (in kernel standard deviations) of the two outer pieces: Φ(−40) underflows.
_FAR = 40.0
#: default root tolerance on ε and iteration cap.
ROOT_TOL = 1e-12
ROOT_ITERS = 60


def log_gauss_mass(a, b):
    """``log P(a < N(0,1) < b)`` elementwise, tail-stable; ``-inf`` (zero gradient) for ``b <= a``.

    One ``log_ndtr`` call on the stacked ends: compile time grows with the number of
    such calls, not with their size.
    """
    a, b = jnp.broadcast_arrays(a, b)
    flip = a + b > 0
    lo = jnp.where(flip, -b, a)
    hi = jnp.where(flip, -a, b)
    ok = hi > lo
    lo = jnp.where(ok, lo, hi - 1.0)
    both = log_ndtr(jnp.concatenate([jnp.ravel(lo), jnp.ravel(hi)]))
    la, lb = both[: lo.size].reshape(lo.shape), both[lo.size:].reshape(lo.shape)
    d = jnp.minimum(la - lb, -1e-300)
    return jnp.where(ok, lb + jnp.log(-jnp.expm1(d)), -jnp.inf)


def _boost(mech, v, nv):
    """``(log(1−q), log Z(v), log Z(v'))`` with ``Z = 1 − p̄_S q`` (eq. 2), one fused mass call.

    ``q`` is eq. (3) at the region's hardest answers, as :attr:`PrivacyBoosted.boosting_rate`
    (tested equal); recomputed here only to share the mass evaluation.
    """
    sigma = mech.kernel.sigma
    hard = jnp.stack([jnp.asarray(h, jnp.result_type(sigma)) for h in mech.region.hardest_answers()])
    answers = jnp.concatenate([hard, jnp.stack([v, nv])])
    lo, hi = mech.region.interval(answers)
    lp = log_gauss_mass((lo - answers) / sigma, (hi - answers) / sigma)
    p_in = jnp.exp(lp)
    p_out = -jnp.expm1(lp)
    n = hard.shape[0]
    rates = (mech.rho - p_in[:n]) / (mech.rho * p_out[:n])
    q = jnp.clip(jnp.max(rates), 0.0, 1.0)
    log_z = jnp.log1p(-p_out[n:] * q)
    return jnp.log1p(-q), log_z[0], log_z[1]


def _pieces(mech, v, nv, margin):
    """Finite piece edges ``(lo, hi)`` (5 pieces) and the constants ``(c, c')`` on them."""
    l1, h1 = mech.region.interval(v)
    l2, h2 = mech.region.interval(nv)
    inner = jnp.sort(jnp.stack([l1, h1, l2, h2]))
    lo = jnp.concatenate([inner[:1] - margin, inner])
    hi = jnp.concatenate([inner, inner[-1:] + margin])
    mid = 0.5 * (lo + hi)
    log1mq, log_z1, log_z2 = _boost(mech, v, nv)

    def const(l, h, log_z):
        inside = (mid >= l) & (mid <= h)
        return jnp.where(inside, 0.0, log1mq) - log_z

    return lo, hi, const(l1, h1, log_z1), const(l2, h2, log_z2)


def pair_delta(mech, epsilon, v, nv):
    """Exact ``δ(ε) = ∫ (p(y|v) − e^ε p(y|v'))_+ dy`` for a Gaussian-kernel PB mechanism; scalars."""
    sigma = mech.kernel.sigma
    d = v - nv
    lo, hi, c, c2 = _pieces(mech, v, nv, _FAR * sigma + jnp.abs(d))
    t = epsilon - (c - c2)
    ystar = 0.5 * (v + nv) + sigma**2 * t / d
    a = jnp.where(d < 0, lo, jnp.maximum(lo, ystar))
    b = jnp.where(d < 0, jnp.minimum(hi, ystar), hi)
    centres = jnp.stack([v, nv])[:, None]
    lm = log_gauss_mass((a - centres) / sigma, (b - centres) / sigma)
    terms = jnp.exp(c + lm[0]) - jnp.exp(epsilon + c2 + lm[1])
    # q = 1 (the bounded mechanism): no mass of P_v outside S(v), whatever the threshold says
    terms = jnp.where(jnp.isneginf(c), 0.0, terms)
    return jnp.sum(jnp.maximum(jnp.where(jnp.isnan(terms), 0.0, terms), 0.0))


def pair_log_renyi_integral(mech, order, v, nv):
    """``log ∫ p(y|v)^α p(y|v')^{1−α} dy`` (so ``D_α`` is this over ``α − 1``); scalars."""
    sigma = mech.kernel.sigma
    d = v - nv
    lo, hi, c, c2 = _pieces(mech, v, nv, _FAR * sigma + order * jnp.abs(d))
    m = order * v + (1.0 - order) * nv
    k = order * (order - 1.0) * d * d / (2.0 * sigma**2)
    lm = log_gauss_mass((lo - m) / sigma, (hi - m) / sigma)
    # q = 1: no mass of P_v on a piece (−∞), or an infinite loss on it (+∞)
    weight = jnp.where(jnp.isneginf(c), -jnp.inf,
                       jnp.where(jnp.isneginf(c2), jnp.inf, order * c + (1.0 - order) * jnp.where(jnp.isneginf(c2), 0.0, c2)))
    return jax.nn.logsumexp(jnp.where(jnp.isneginf(lm), -jnp.inf, weight + k + lm))


def _directed_pairs(mech, sensitivity):
    """Flat arrays of ordered pairs (both directions unless the mechanism is symmetric)."""
    v, nv = mech.neighbour_pairs(sensitivity)
    v, nv = jnp.ravel(v), jnp.ravel(nv)
    if mech.symmetric_pairs:
        return v, nv
    return jnp.concatenate([v, nv]), jnp.concatenate([nv, v])


def delta(mech, epsilon, sensitivity):
    """Worst-case exact δ(ε) over the mechanism's declared neighbouring pairs (unbatched mech)."""
    v, nv = _directed_pairs(mech, sensitivity)
    return jnp.max(jax.vmap(lambda a, b: pair_delta(mech, epsilon, a, b))(v, nv))


def renyi(mech, order, sensitivity):
    """Worst-case exact Rényi divergence ``D_α`` over the declared pairs (unbatched mech)."""
    v, nv = _directed_pairs(mech, sensitivity)
    li = jax.vmap(lambda a, b: pair_log_renyi_integral(mech, order, a, b))(v, nv)
    return jnp.maximum(jnp.max(li) / (order - 1.0), 0.0)


# ----------------------------------------------------------------------------------
# ε at a target δ: bracketed Newton on log δ(ε), implicit derivative
# ----------------------------------------------------------------------------------
def _newton_root(log_delta, log_target, x0, hi, tol, iters):
    """Root of the decreasing ``log_delta(ε) = log_target`` on ``[0, hi]`` (0 if already below).

    Newton steps on ``log δ`` (concave for Gaussian-like tails: one overshoot, then
    monotone quadratic convergence), kept inside the bracket by bisection.
    Returns ``(root, iterations)``.
    """

    def cond(s):
        lo, h, x, step, k = s
        return (jnp.abs(step) > tol) & (k < iters)

    def body(s):
        lo, h, x, _, k = s
        f, df = jax.jvp(log_delta, (x,), (jnp.ones_like(x),))
        g = f - log_target
        above = g > 0
        lo = jnp.where(above, x, lo)
        h = jnp.where(above, h, x)
        xn = x - g / df
        bad = ~((xn > lo) & (xn < h))
        xn = jnp.where(bad, 0.5 * (lo + h), xn)
        return lo, h, xn, xn - x, k + 1

    zero = jnp.zeros_like(x0)
    at0 = log_delta(zero) <= log_target
    x0 = jnp.clip(x0, 0.0, hi)
    _, _, x, _, k = jax.lax.while_loop(cond, body, (zero, hi + zero, x0, jnp.inf + zero, jnp.zeros((), jnp.int32)))
    return jnp.where(at0, 0.0, x), k


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _implicit_eps(log_delta_fn, params, log_target, x0, hi):
    return _newton_root(lambda e: log_delta_fn(e, params), log_target, x0, hi, ROOT_TOL, ROOT_ITERS)[0]


@_implicit_eps.defjvp
def _implicit_eps_jvp(log_delta_fn, primals, tangents):
    params, log_target, x0, hi = primals
    dparams, dtarget, _, _ = tangents
    x = _implicit_eps(log_delta_fn, params, log_target, x0, hi)
    _, dfx = jax.jvp(lambda e: log_delta_fn(e, params), (x,), (jnp.ones_like(x),))
    _, dfp = jax.jvp(lambda p: log_delta_fn(x, p), (params,), (dparams,))
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
