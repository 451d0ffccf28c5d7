r"""Samplers of a privacy-boosted mechanism: the exact three-component mixture and the paper's rejection.

The boosted law (eq. 2) is a mixture of the kernel restricted to below / inside / above the
preferred region, with weights ``(1−q)·P_lo``, ``P_in``, ``(1−q)·P_hi``. Every function here
maps per-record uniforms (:class:`dpjax.random.UniformStream`) to noise, through the kernel
protocol only (masses, quantiles), so any kernel is sampled exactly in idealized arithmetic.

* :func:`mixture_noise_continuous` — one uniform picks the component, a second inverts the
  kernel CDF restricted to it, in linear space: masses from half-masses and tails
  (``noise_side_masses``), the quantile target carried both as a tail probability and as an
  offset from the median (``noise_split_icdf``), so that far tails and regions narrow
  against the scale are exact to the float (with the kernels' closed forms).
* :func:`mixture_noise_discrete` — integer noise: log-space targets and the kernel's
  ``noise_log_icdf`` (far tails stay exact).
* :func:`rejection_noise` — the paper's sampler: propose from the kernel, accept inside the
  region or with probability ``1 − q`` outside, in a ``lax.while_loop`` whose trial ``j``
  uses the uniform streams ``2j`` (proposal) and ``2j + 1`` (acceptance). Expected trials
  ``1/(1 − p̄_S q)`` (``rho/p_S`` at the hardest answer).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["mixture_noise_continuous", "mixture_noise_discrete", "rejection_noise"]


def mixture_noise_continuous(kernel, uniform, e_lo, e_hi, keep, symmetric):
    """Noise of the exact three-component mixture, continuous kernel.

    Noise of the exact three-component mixture for a continuous kernel and a region
    ``[e_lo, e_hi] ∋ 0`` in noise coordinates (per record or per batch); ``keep = 1 − q``.

    Masses in linear space from two half-masses and two tails (one of each when the region
    is symmetric, ``e_lo = −e_hi``): ``P_in = H_lo + H_hi`` has no cancellation however
    narrow the region. ``u0`` picks the component against the unnormalised weights
    ``(keep·P_lo, P_in, keep·P_hi)``; ``u1`` gives the quantile target as both
    ``p = min(F, 1 − F)`` and ``w = F − 1/2``:

    * below: ``p = u1 P_lo``; above: ``p = u1 P_hi`` (mirrored);
    * inside: ``w = u1 H_hi − (1 − u1) H_lo`` (exact relative to ``P_in``),
      ``p = P_lo + u1 P_in`` or ``P_hi + (1 − u1) P_in`` (exact in the tails).

    A weight below the float's range belongs to a component ``u0`` cannot select anyway
    (``u0`` is a multiple of 2^-23 or 2^-52). ``1 − u1`` is exact on the uniforms' grid.
    (For an interval not holding 0 — a fixed region's answer outside it, which
    :func:`dpjax.release` refuses — the formulas stay right but ``P_in`` loses precision.)

    Args:
      kernel: the additive kernel.
      uniform: the records' :class:`dpjax.random.UniformStream`.
      e_lo: the region's lower edge in noise coordinates (per record or per batch).
      e_hi: its upper edge.
      keep: ``1 − q``.
      symmetric: the region is symmetric (``e_lo = −e_hi``).

    Returns:
      One noise draw per record.
    """
    h_lo, p_lo = kernel.noise_side_masses(-e_lo)
    h_hi, p_hi = (h_lo, p_lo) if symmetric else kernel.noise_side_masses(e_hi)
    p_in = h_lo + h_hi
    w_lo, w_hi = keep * p_lo, keep * p_hi
    u0, u1 = uniform(0), uniform(1)
    c = u0 * (w_lo + p_in + w_hi)
    below = c < w_lo
    inside = ~below & (c < w_lo + p_in)
    v1 = 1.0 - u1
    w_in = u1 * h_hi - v1 * h_lo
    p_in_lo, p_in_hi = p_lo + u1 * p_in, p_hi + v1 * p_in
    one = jnp.ones((), u1.dtype)
    s = jnp.where(inside, jnp.sign(w_in), jnp.where(below, -one, one))
    p = jnp.where(inside, jnp.where(w_in < 0, p_in_lo, p_in_hi), u1 * jnp.where(below, p_lo, p_hi))
    w = jnp.where(inside, w_in, s * (0.5 - p))
    n = kernel.noise_split_icdf(p, w, s)
    # clamp to the component's range; bounds selected first so that n has a single use (with
    # n inside three selects XLA's CPU fusion materialises the masses and re-hashes per fusion)
    lower = jnp.where(inside, e_lo, jnp.where(below, -jnp.inf, e_hi))
    upper = jnp.where(inside, e_hi, jnp.where(below, e_lo, jnp.inf))
    return jnp.minimum(jnp.maximum(n, lower), upper)


def mixture_noise_discrete(kernel, uniform, e_lo, e_hi, log1mq):
    """Integer noise of the exact three-component mixture, discrete kernel.

    Integer noise of the exact mixture: ``e_lo``/``e_hi`` are the last noise values below /
    inside the region; ``log1mq = log(1 − q)``. The inside component is reflected so that its
    interval's centre is ≤ 0 (small CDF values, no ``1 − F``); targets in log space.

    Args:
      kernel: the additive kernel.
      uniform: the records' :class:`dpjax.random.UniformStream`.
      e_lo: the region's lower edge in noise coordinates (per record or per batch).
      e_hi: its upper edge.
      log1mq: ``log(1 − q)``.

    Returns:
      One integer-valued noise draw per record.
    """
    one = 1.0
    log_lo, log_in, log_hi = kernel.noise_region_log_masses(e_lo, e_hi)
    lw_lo, lw_hi = log1mq + log_lo, log1mq + log_hi
    log_z = jnp.logaddexp(jnp.logaddexp(lw_lo, log_in), lw_hi)
    t_lo = jnp.exp(lw_lo - log_z)
    t_in = jnp.exp(jnp.logaddexp(lw_lo, log_in) - log_z)
    flip = e_lo + e_hi > 0
    r_lo = jnp.where(flip, -e_hi - one, e_lo)  # last noise value below the reflected interval
    r_hi = jnp.where(flip, -e_lo - one, e_hi)
    u0, u1 = uniform(0), uniform(1)
    below = u0 < t_lo
    inside = ~below & (u0 < t_in)
    # below: F(n) = u1 F(e_lo); above: by symmetry −N below −e_hi; inside: F(n) = F(r_lo) + u1 P_in
    log_u1 = jnp.log(u1)
    log_target = jnp.where(
        inside, jnp.logaddexp(kernel.noise_log_cdf(r_lo), log_u1 + log_in), log_u1 + jnp.where(below, log_lo, log_hi)
    )
    n = kernel.noise_log_icdf(log_target)
    n_in = jnp.clip(n, r_lo + one, r_hi)
    n_in = jnp.where(flip, -n_in, n_in)
    return jnp.where(inside, n_in, jnp.where(below, jnp.minimum(n, e_lo), jnp.maximum(-n, e_hi + one)))


def rejection_noise(kernel, uniform, e_lo, e_hi, keep_out):
    """The paper's rejection sampler (``keep_out = 1 − q``); region edges as in the mixture.

    Args:
      kernel: the additive kernel.
      uniform: the records' :class:`dpjax.random.UniformStream`.
      e_lo: the region's lower edge in noise coordinates (per record or per batch).
      e_hi: its upper edge.
      keep_out: ``1 − q``, the acceptance probability outside the region.

    Returns:
      One noise draw per record.

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, §3.1 (rejection sampling) and §5.2.
    """

    def trial(j):
        n = kernel.noise_icdf(uniform(2 * j))
        inside = (n > e_lo) & (n <= e_hi) if kernel.discrete else (n >= e_lo) & (n <= e_hi)
        return n, inside | (uniform(2 * j + 1) < keep_out)

    def cond(state):
        return ~jnp.all(state[2])

    def body(state):
        j, out, done = state
        n, ok = trial(j)
        return j + 1, jnp.where(ok & ~done, n, out), done | ok

    n0, ok0 = trial(jnp.uint32(0))
    _, noise, _ = jax.lax.while_loop(cond, body, (jnp.uint32(1), n0, ok0))
    return noise
