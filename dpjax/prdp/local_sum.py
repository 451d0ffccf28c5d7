"""Per-record local DP sum: Algorithm 5 (the general PrLDP framework, Chen, Sun, Xu, Dong, SIGMOD 2025,
§7.3) with a reference LDP sum protocol as its Round II (the paper leaves Round II open).

Round I (budget E/2, failure β/2): every user runs Algorithm 3 with ``E/2`` (noise
``Lap(2/lo_i)``) and the analyzer runs Algorithm 4, giving ℓ and ``ε_τ = lo_ℓ``, broadcast.

Round II (budget ``ε = ε_τ/2 ≤ E(r)/2``, failure β/2): a user of level ``< ℓ`` answers as the
dummy ⊥ (value 0; the paper's "E(r_j) < ε_τ", here by level index as in the central
framework), so its Round II output law is ⊥'s and it loses nothing; the others run an
ε-LDP sum protocol. The paper defers that protocol to huang21mean and runs no experiment;
this is our reference protocol (not in the paper):

* IIa (ε/2): user j gets a public uniform group ``k_j ∈ {0 … J}``, ``J = ⌈log2 U_ℓ⌉``, and sends
  ``RR_{ε/2}(1[x_j > 2^{k_j}])`` (⊥ sends the bit 0 through the same randomizer). The analyzer
  debiases ``Â_k = n·(ȳ_k − p0)/(p1 − p0)`` (``p1 = e^{ε/2}/(1 + e^{ε/2})``, ``p0 = 1 − p1``) and
  takes ``τ = 2^k`` for the least k with
  ``Â_k ≤ κ·√(n(J+1)·ln((J+1)/β'))·(e^{ε/2}+1)/(e^{ε/2}−1)``, ``β' = β/2`` (``τ = 2^J`` if none).
* IIb (ε/2): user j sends ``min(x_j, τ) + Lap(2τ/ε)``; the analyzer sums.

Every user's Round II output differs from ⊥'s by a randomized-response bit (ratio ≤ e^{ε/2})
and a Laplace shift of at most τ at scale 2τ/ε (≤ e^{ε/2}): ε-LDP against ⊥, and Algorithm 5
composes E/2 + E/2 = E (E-PrLDP). Error ``Õ(√n·Max/ε_min)`` at best; with small budgets the
IIa threshold exceeds n, every group passes and τ = 1 (docs/prdp.md has the measurements).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from dpjax.prdp._noise import Stream
from dpjax._float64 import x64
from dpjax.prdp._args import check_common, check_upper, check_values
from dpjax.prdp.count import make_result
from dpjax.prdp.domains import dyadic_exponent, opaque, partition_records, pow2
from dpjax.prdp.framework import framework_ledger, kept_upper, level_upper_bounds
from dpjax.prdp.local_count import _check_threshold, _users, aggregate, analyze, check_message_count
from dpjax.prdp.result import PrDPResult
from dpjax.validation import check_positive

__all__ = ["local_sum"]


@partial(jax.jit, static_argnames=("threshold", "per_user", "max_levels", "max_exponent"))
def _local_sum(
    key, values, budgets, mask, eps_min, eps_max, beta, upper, kappa, *, threshold, per_user, max_levels, max_exponent
):
    part = partition_records(budgets, mask, eps_min, eps_max, max_levels)
    beta = jnp.float64(beta)
    n = _users(part, mask)
    real = jnp.ones(part.level.shape, bool) if mask is None else opaque(mask, bool)
    noise = Stream(key)

    # Round I: Algorithms 3-4 with E/2 and β/2 (stream 0)
    level, _ = analyze(aggregate(noise, 0, part, mask, 2.0, per_user), n, part, beta / 2.0, 2.0, threshold)
    eps = part.floor[level] / 2.0
    kept = part.weight & (part.level >= level)  # the others answer ⊥
    bounds = jnp.where(part.floor > 0, level_upper_bounds(upper, part), 0.0)
    x = jnp.where(kept, jnp.clip(opaque(values), 0.0, bounds[part.level]), 0.0)

    # Round IIa: randomized response on 1[x > 2^k] in a public random group k
    top = jnp.clip(dyadic_exponent(jnp.maximum(kept_upper(upper, part)[level], 1.0), 1.0), 0, max_exponent)
    group = jnp.minimum(jnp.floor(noise.uniform(1, x.shape) * (top + 1.0)), top).astype(jnp.int32)
    bit = x > pow2(group)
    e_a = eps / 2.0
    p1 = jax.nn.sigmoid(e_a)
    report = jnp.where(noise.uniform(2, x.shape) < p1, bit, ~bit) & real
    n_k = jax.ops.segment_sum(real.astype(jnp.float64), group, num_segments=max_exponent + 1)
    y_k = jax.ops.segment_sum(report.astype(jnp.float64), group, num_segments=max_exponent + 1)
    a_k = jnp.where(n_k > 0, n * (y_k / jnp.where(n_k > 0, n_k, 1.0) - (1.0 - p1)) / (2.0 * p1 - 1.0), jnp.inf)
    k = jnp.arange(max_exponent + 1, dtype=jnp.int32)
    width = top + 1.0
    limit = kappa * jnp.sqrt(n * width * jnp.log(width / (beta / 2.0))) / jnp.tanh(e_a / 2.0)
    chosen = jnp.min(jnp.where((a_k <= limit) & (k <= top), k, top))
    tau = pow2(chosen)

    # Round IIb: clipped values plus Laplace(2τ/ε) from every user
    scale = tau / (eps / 2.0)
    if per_user:
        total = jnp.sum(jnp.where(real, noise.laplace(3, x.shape), 0.0))
    else:
        g = noise.gamma(3, jnp.broadcast_to(n, (2,)))
        total = g[0] - g[1]
    estimate = jnp.sum(jnp.minimum(x, tau)) + scale * total
    return make_result(estimate, level, part, framework_ledger(part, level))


@x64
def local_sum(
    key,
    values,
    budgets,
    *,
    eps_min,
    eps_max,
    beta,
    upper,
    threshold="subgaussian",
    per_user=False,
    kappa=1.0,
    mask=None,
    max_levels=None,
) -> PrDPResult:
    """E-PrLDP sum of values in ``[0, upper]`` (Algorithm 5 + the reference LDP sum, module doc).

    Args:
      key: a JAX PRNG key, consumed.
      values: ``v(r) ∈ [0, upper]`` per user, shape (n,).
      budgets: ``E(r)`` per user, all ``≥ eps_min``.
      eps_min: ε̌, the least budget of the whole domain (data-independent).
      eps_max: ε̂, the cap of the budget function.
      beta: failure probability in (0, 1).
      upper: public bound of the values: a scalar U, or per-level bounds ``u_i``.
      threshold: Round I analyzer threshold, ``"subgaussian"`` or ``"paper"``
        (:mod:`dpjax.prdp.local_count`).
      per_user: draw every user's Laplace messages (O(n·L)) instead of the exact aggregates.
      kappa: the constant κ of Round IIa's threshold (any κ is private; our choice, not the paper's).
      mask: optional boolean (n,): False rows are padding, not users.
      max_levels: static level count, needed only when ``eps_min``/``eps_max`` are traced.

    Returns:
      :class:`~dpjax.prdp.PrDPResult`, ledger ``lo_i/2 + [i ≥ ℓ]·lo_ℓ/2`` per level.

    Raises:
      ValueError: an unknown ``threshold``; ``kappa`` not positive; ``key`` not a single Threefry
        key; ``eps_min`` or ``eps_max`` not a positive scalar, or ``eps_max < eps_min``; ``beta``
        outside (0, 1); ``budgets`` not a finite, non-empty 1-D array or with an entry below
        ``eps_min``; ``mask`` not a boolean array of the budgets' shape; ``max_levels`` missing for
        traced ``eps_min``/``eps_max``, not an integer in [1, 64], or below L; a budget range
        needing more than 64 levels; ``values`` not finite, not of the budgets' shape, negative or
        above ``upper``; ``upper`` not a positive scalar or 1-D array of non-negative per-level
        bounds, all 0, or above 2^63; with ``per_user``, n·L ≥ 2^32.

    References:
      Chen, Sun, Xu, Dong, "A General Framework for Per-record Differential Privacy", SIGMOD 2025
      (PACMMOD 3(6), article 287), §7.3 and Algorithm 5.
    """
    _check_threshold(threshold)
    check_positive("kappa", kappa)
    key, max_levels = check_common(key, budgets, mask, eps_min, eps_max, beta, max_levels)
    upper, max_exponent = check_upper(upper, max_levels)
    check_values(values, budgets, upper)
    if per_user:
        check_message_count(budgets, max_levels)
    return _local_sum(
        key,
        values,
        budgets,
        mask,
        eps_min,
        eps_max,
        beta,
        upper,
        kappa,
        threshold=threshold,
        per_user=bool(per_user),
        max_levels=max_levels,
        max_exponent=max_exponent,
    )
