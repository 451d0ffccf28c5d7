"""Baselines of the paper's experiments (Chen, Sun, Xu, Dong, SIGMOD 2025, §8.1).

The naive global-minimum mechanisms and the personalized-DP (PDP) truncation of Sun et al.
("Personalized Truncation for Personalized Privacy").

* Naive: any ε̌-DP mechanism is E-PrDP because ``ε̌ ≤ E(r)`` for every record (the paper's §3.4):
  :func:`naive_count` (``n + Lap(1/ε̌)``) and :func:`naive_sum` (the universal sum at ε̌ on
  ``[0, U]``). Certified E-PrDP; their ledger charges ε̌ to every level.
* PDP: :func:`pdp_count` and :func:`pdp_sum` treat each budget ``ε_j = E(r_j)`` as *public*.
  They are **NOT E-PrDP — NOT CERTIFIED under per-record DP**: their noise and truncation
  depend on the budgets, which PrDP keeps private (the paper's §3.4), and the sum's ``t + 1``
  queries with noise calibrated for ``t`` spend ``(1 + 1/t)·ε_j`` on record j (the public
  code's overshoot, kept for parity). They return a bare estimate, no ledger,
  and exist only for the paper's side-by-side comparison.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.prdp._noise import Stream
from dpjax._float64 import x64
from dpjax.prdp._args import check_common, check_upper, check_values
from dpjax.prdp.count import make_result
from dpjax.prdp.domains import dyadic_exponent, opaque, partition_records, pow2
from dpjax.prdp.result import PrDPResult
from dpjax.prdp.universal_sum import bucket_table, universal_sum_from_buckets
from dpjax.validation import is_traced

__all__ = ["naive_count", "naive_sum", "pdp_count", "pdp_sum"]


def _naive_result(estimate, part):
    """ε̌ charged to every level; ε_τ = ε̌, ℓ = 1."""
    return make_result(estimate, jnp.int32(0), part, jnp.full(part.floor.shape, part.eps_min))


@partial(jax.jit, static_argnames=("max_levels",))
def _naive_count(key, budgets, mask, eps_min, eps_max, *, max_levels):
    part = partition_records(budgets, mask, eps_min, eps_max, max_levels)
    n = jnp.sum(part.weight.astype(jnp.float64))
    return _naive_result(n + Stream(key).laplace(0) / part.eps_min, part)


@x64
def naive_count(key, budgets, *, eps_min, eps_max, mask=None, max_levels=None) -> PrDPResult:
    """The naive count ``n + Lap(1/ε̌)``: ε̌-DP, hence E-PrDP, with error ``O(1/ε̌)``.

    ``budgets`` only mark the valid records (``≥ ε̌``) and shape the ledger; the noise ignores them.

    Args:
      key: a JAX PRNG key, consumed.
      budgets: ``E(r)`` per record, shape (n,), all ``≥ eps_min``.
      eps_min: ε̌, the least budget of the whole domain (data-independent).
      eps_max: ε̂, the cap of the budget function.
      mask: optional boolean (n,): False marks padding.
      max_levels: static level count, needed only when ``eps_min``/``eps_max`` are traced.

    Returns:
      :class:`~dpjax.prdp.PrDPResult`, ε̌ charged to every level.

    Raises:
      ValueError: ``key`` not a single Threefry key; ``eps_min`` or ``eps_max`` not a positive
        scalar, or ``eps_max < eps_min``; ``beta`` outside (0, 1); ``budgets`` not a finite,
        non-empty 1-D array or with an entry below ``eps_min``; ``mask`` not a boolean array of the
        budgets' shape; ``max_levels`` missing for traced ``eps_min``/``eps_max``, not an integer in
        [1, 64], or below L; a budget range needing more than 64 levels.

    References:
      Chen, Sun, Xu, Dong, "A General Framework for Per-record Differential Privacy", SIGMOD 2025
      (PACMMOD 3(6), article 287), §8.1.
    """
    key, max_levels = check_common(key, budgets, mask, eps_min, eps_max, None, max_levels)
    return _naive_count(key, budgets, mask, eps_min, eps_max, max_levels=max_levels)


@partial(jax.jit, static_argnames=("max_levels", "max_exponent"))
def _naive_sum(key, values, budgets, mask, eps_min, eps_max, beta, upper, *, max_levels, max_exponent):
    part = partition_records(budgets, mask, eps_min, eps_max, max_levels)
    top = jnp.minimum(jnp.max(jnp.asarray(upper, jnp.float64)), 2.0**max_exponent)
    v = jnp.clip(opaque(values), 0.0, top)
    counts, sums = bucket_table(v, part.weight, jnp.zeros(v.shape, jnp.int32), 1, max_exponent)
    estimate, _ = universal_sum_from_buckets(Stream(key), 0, counts[0], sums[0], part.eps_min, jnp.float64(beta), top)
    return _naive_result(estimate, part)


@x64
def naive_sum(key, values, budgets, *, eps_min, eps_max, beta, upper, mask=None, max_levels=None) -> PrDPResult:
    """The naive sum: the universal sum with ε̌ on ``[0, U]``.

    :mod:`dpjax.prdp.universal_sum` with ε̌, ``U`` the largest entry of ``upper``.

    Args:
      key: a JAX PRNG key, consumed.
      values: ``v(r) ∈ [0, upper]`` per record, shape (n,).
      budgets: ``E(r)`` per record, all ``≥ eps_min``.
      eps_min: ε̌, the least budget of the whole domain (data-independent).
      eps_max: ε̂, the cap of the budget function.
      beta: failure probability in (0, 1).
      upper: public bound of the values (a scalar, or per-level bounds of which the largest is used).
      mask: optional boolean (n,): False marks padding.
      max_levels: static level count, needed only when ``eps_min``/``eps_max`` are traced.

    Returns:
      :class:`~dpjax.prdp.PrDPResult`, ε̌ charged to every level.

    Raises:
      ValueError: ``key`` not a single Threefry key; ``eps_min`` or ``eps_max`` not a positive
        scalar, or ``eps_max < eps_min``; ``beta`` outside (0, 1); ``budgets`` not a finite,
        non-empty 1-D array or with an entry below ``eps_min``; ``mask`` not a boolean array of the
        budgets' shape; ``max_levels`` missing for traced ``eps_min``/``eps_max``, not an integer in
        [1, 64], or below L; a budget range needing more than 64 levels; ``values`` not finite, not
        of the budgets' shape, negative or above ``upper``; ``upper`` not a positive scalar or 1-D
        array of non-negative per-level bounds, all 0, or above 2^63.

    References:
      Chen, Sun, Xu, Dong, "A General Framework for Per-record Differential Privacy", SIGMOD 2025
      (PACMMOD 3(6), article 287), §8.1.
    """
    key, max_levels = check_common(key, budgets, mask, eps_min, eps_max, beta, max_levels)
    upper, max_exponent = check_upper(upper, max_levels)
    check_values(values, budgets, upper)
    return _naive_sum(
        key, values, budgets, mask, eps_min, eps_max, beta, upper, max_levels=max_levels, max_exponent=max_exponent
    )


def _num_queries(name, ratio):
    """``t = ⌈log2(ratio)⌉`` from concrete values (the PDP baselines' static query count)."""
    if is_traced(ratio):
        raise ValueError(
            f"{name}: the PDP baselines need concrete eps_min/eps_max/upper (their query count t is static)"
        )
    return max(int(math.ceil(math.log2(float(ratio)))), 1)


@partial(jax.jit, static_argnames=("t",))
def _pdp_count(key, budgets, mask, eps_min, beta, *, t):
    budgets = opaque(budgets)
    w = budgets >= eps_min
    if mask is not None:
        w = w & opaque(mask, bool)
    i = jnp.arange(t + 1, dtype=jnp.int32)
    k = jnp.asarray(eps_min, jnp.float64) * pow2(i)
    # #{ε_j > k_i} = #{records whose least b with ε_j ≤ ε̌·2^b exceeds i}: one histogram, exact
    b = jnp.clip(dyadic_exponent(budgets, eps_min), 0, t + 1)
    hist = jax.ops.segment_sum(w.astype(jnp.float64), b, num_segments=t + 2)
    above = jnp.sum(hist) - jnp.cumsum(hist)[: t + 1]
    scale = t / k
    est = above + scale * Stream(key).laplace(0, (t + 1,)) - scale * jnp.log(t / beta)
    return jnp.maximum(0.0, jnp.max(est))


@x64
def pdp_count(key, budgets, *, eps_min, eps_max, beta, mask=None):
    """Sun et al.'s PDP count with public budgets (the paper's §8.1 baseline). NOT CERTIFIED under PrDP.

    See the module docstring for why.

    ``t = ⌈log2(ε̂/ε̌)⌉``; for ``k_i = 2^i ε̌``, ``i = 0 … t``:
    ``Ĉ_i = #{j : ε_j > k_i} + (t/k_i)·Lap(1) − (t/k_i)·ln(t/β)``; returns ``max(0, max_i Ĉ_i)``.

    Args:
      key: a JAX PRNG key, consumed.
      budgets: the records' public budgets ε_j, shape (n,), all ``≥ eps_min``.
      eps_min: ε̌, the least budget of the whole domain (data-independent).
      eps_max: ε̂, the cap of the budget function.
      beta: failure probability in (0, 1).
      mask: optional boolean (n,): False marks padding.

    Returns:
      The float64 estimate (not a :class:`~dpjax.prdp.PrDPResult`: no PrDP ledger applies).

    Raises:
      ValueError: ``key`` not a single Threefry key; ``eps_min`` or ``eps_max`` not a positive
        scalar, or ``eps_max < eps_min``; ``beta`` outside (0, 1); ``budgets`` not a finite,
        non-empty 1-D array or with an entry below ``eps_min``; ``mask`` not a boolean array of the
        budgets' shape; a budget range needing more than 64 levels; traced ``eps_min``/``eps_max``.

    References:
      Sun et al., "Personalized Truncation for Personalized Privacy"; used as a baseline in Chen, Sun,
      Xu, Dong, "A General Framework for Per-record Differential Privacy", SIGMOD 2025, §8.1.
    """
    key, _ = check_common(key, budgets, mask, eps_min, eps_max, beta, None)
    t = _num_queries("pdp_count", eps_max / eps_min)
    return _pdp_count(key, budgets, mask, eps_min, beta, t=t)


@partial(jax.jit, static_argnames=("t",))
def _pdp_sum(key, values, budgets, mask, eps_min, eps_max, beta, *, t):
    budgets = opaque(budgets)
    w = budgets >= eps_min
    if mask is not None:
        w = w & opaque(mask, bool)
    x = jnp.where(w, opaque(values), 0.0)
    g = pow2(jnp.arange(t + 1, dtype=jnp.int32)) / eps_max

    def truncated_sum(gi):  # Σ_j min(x_j, ⌊g_i ε_j⌋), the personalized truncation at level i
        return jnp.sum(jnp.minimum(x, jnp.floor(gi * budgets)))

    sums = jax.lax.map(truncated_sum, g)
    est = sums + t * g * Stream(key).laplace(0, (t + 1,)) - t * g * jnp.log(t / beta)
    return jnp.maximum(0.0, jnp.max(est))


@x64
def pdp_sum(key, values, budgets, *, eps_min, eps_max, beta, upper, mask=None):
    """Sun et al.'s PDP sum with public budgets (the paper's §8.1 baseline). NOT CERTIFIED under PrDP.

    See the module docstring for why.

    ``t = ⌈log2(ε̂U/ε̌)⌉``; for ``g_i = 2^i/ε̂``, ``i = 0 … t``: ``Ŝ_i = Σ_j min(x_j, ⌊g_i ε_j⌋) +
    t g_i·Lap(1) − t g_i·ln(t/β)``; returns ``max(0, max_i Ŝ_i)``. O(n·t) work.

    Args:
      key: a JAX PRNG key, consumed.
      values: ``x_j ∈ [0, upper]`` per record, shape (n,).
      budgets: the records' public budgets ε_j, all ``≥ eps_min``.
      eps_min: ε̌, the least budget of the whole domain (data-independent).
      eps_max: ε̂, the cap of the budget function.
      beta: failure probability in (0, 1).
      upper: the public bound U of the values.
      mask: optional boolean (n,): False marks padding.

    Returns:
      The float64 estimate (not a :class:`~dpjax.prdp.PrDPResult`).

    Raises:
      ValueError: ``key`` not a single Threefry key; ``eps_min`` or ``eps_max`` not a positive
        scalar, or ``eps_max < eps_min``; ``beta`` outside (0, 1); ``budgets`` not a finite,
        non-empty 1-D array or with an entry below ``eps_min``; ``mask`` not a boolean array of the
        budgets' shape; a budget range needing more than 64 levels; ``values`` not finite, not of
        the budgets' shape, negative or above ``upper``; ``upper`` not a positive scalar or 1-D
        array of non-negative per-level bounds, all 0, or above 2^63; traced
        ``eps_min``/``eps_max``/``upper``.

    References:
      Sun et al., "Personalized Truncation for Personalized Privacy"; used as a baseline in Chen, Sun,
      Xu, Dong, "A General Framework for Per-record Differential Privacy", SIGMOD 2025, §8.1.
    """
    key, max_levels = check_common(key, budgets, mask, eps_min, eps_max, beta, None)
    upper, _ = check_upper(upper, max_levels)
    check_values(values, budgets, upper)
    t = _num_queries("pdp_sum", float(eps_max) * float(np.max(upper)) / float(eps_min))
    return _pdp_sum(key, values, budgets, mask, eps_min, eps_max, beta, t=t)
