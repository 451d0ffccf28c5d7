"""PrDP sum estimation: ``dpjax.prdp.sum`` (framework with the universal sum, or the extension)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from dpjax._float64 import x64
from dpjax.prdp._args import check_common, check_upper, check_values
from dpjax.prdp._noise import Stream
from dpjax.prdp.count import make_result
from dpjax.prdp.domains import opaque, partition_records
from dpjax.prdp.extension import extension_sum
from dpjax.prdp.framework import framework_ledger, kept_upper, level_upper_bounds, select_epsilon_tau
from dpjax.prdp.result import PrDPResult
from dpjax.prdp.universal_sum import bucket_table, universal_sum_from_buckets

__all__ = ["sum", "METHODS"]

METHODS = ("framework", "extension")


@partial(jax.jit, static_argnames=("max_levels", "max_exponent"))
def _framework_sum(key, values, budgets, mask, eps_min, eps_max, beta, upper, *, max_levels, max_exponent):
    """Algorithm 2 with the universal sum as M. The data enter through one (level × bucket)
    table of counts and sums; D_ℓ's table is the sum of its rows ``≥ ℓ``."""
    part = partition_records(budgets, mask, eps_min, eps_max, max_levels)
    bounds = jnp.where(part.floor > 0, level_upper_bounds(upper, part), 0.0)
    bounds = jnp.minimum(bounds, 2.0**max_exponent)  # the buckets' range (traced upper)
    v = jnp.clip(opaque(values), 0.0, bounds[part.level])
    counts, sums = bucket_table(v, part.weight, part.level, max_levels, max_exponent)
    noise = Stream(key)
    level = select_epsilon_tau(noise, part, jnp.float64(beta))
    rows = (jnp.arange(max_levels, dtype=jnp.int32) >= level)[:, None]
    estimate, _ = universal_sum_from_buckets(
        noise,
        1,
        jnp.sum(jnp.where(rows, counts, 0.0), axis=0),
        jnp.sum(jnp.where(rows, sums, 0.0), axis=0),
        part.floor[level] / 2.0,
        beta / 2.0,
        kept_upper(upper, part)[level],
    )
    return make_result(estimate, level, part, framework_ledger(part, level))


@x64
def sum(
    key, values, budgets, *, eps_min, eps_max, beta, upper, method="framework", mask=None, max_levels=None
) -> PrDPResult:  # noqa: A001 - the public name dpjax.prdp.sum
    """E-PrDP sum of non-negative values.

    ``method="framework"``: Algorithm 2 (part 1 finds ℓ with E/2; the universal SVT/clip sum
    of :mod:`dpjax.prdp.universal_sum` runs on ``D_ℓ`` with ``lo_ℓ/2`` and domain ``U_ℓ``);
    error ``Õ(Max(D)/ε_min(D))`` for every E (Theorem 6.1).
    ``method="extension"``: Section 5.2, per-level sums with ``Lap(u_i/lo_i)``; optimal for the
    inverse function, ``Õ(Max²/ε_min)`` for a logarithmic E (Theorem A.1).

    Args:
      key: a JAX PRNG key, consumed.
      values: ``v(r) ∈ [0, upper]`` per record, shape (n,).
      budgets: ``E(r)`` per record, all ``≥ eps_min``.
      eps_min: ε̌, the least budget of the whole domain (data-independent).
      eps_max: ε̂, the cap of the budget function.
      beta: failure probability in (0, 1).
      upper: public bound of the values: a scalar U, or per-level bounds ``u_i`` (the values of
        level-i records never exceed ``u_i``; :meth:`PrivacyFunction.level_upper`), which tighten
        the extension's noise ``u_i/lo_i`` and the framework's domain ``U_ℓ``. Values above their
        level's bound are clipped to it.
      method: ``"framework"`` (default) or ``"extension"``.
      mask: optional boolean (n,): False marks padding.
      max_levels: static level count, needed only when ``eps_min``/``eps_max`` are traced.

    Returns:
      :class:`~dpjax.prdp.PrDPResult` (estimate, ε_τ, ℓ, per-level ledger).

    Raises:
      ValueError: an unknown ``method``; ``key`` not a single Threefry key; ``eps_min`` or
        ``eps_max`` not a positive scalar, or ``eps_max < eps_min``; ``beta`` outside (0, 1);
        ``budgets`` not a finite, non-empty 1-D array or with an entry below ``eps_min``; ``mask``
        not a boolean array of the budgets' shape; ``max_levels`` missing for traced
        ``eps_min``/``eps_max``, not an integer in [1, 64], or below L; a budget range needing more
        than 64 levels; ``values`` not finite, not of the budgets' shape, negative or above
        ``upper``; ``upper`` not a positive scalar or 1-D array of non-negative per-level bounds,
        all 0, or above 2^63.

    References:
      Chen, Sun, Xu, Dong, "A General Framework for Per-record Differential Privacy", SIGMOD 2025
      (PACMMOD 3(6), article 287), §5.2, §6, Algorithm 2, Theorems 6.1 and A.1.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    key, max_levels = check_common(key, budgets, mask, eps_min, eps_max, beta, max_levels)
    upper, max_exponent = check_upper(upper, max_levels)
    check_values(values, budgets, upper)
    if method == "extension":
        return extension_sum(key, values, budgets, mask, eps_min, eps_max, beta, upper, max_levels=max_levels)
    return _framework_sum(
        key, values, budgets, mask, eps_min, eps_max, beta, upper, max_levels=max_levels, max_exponent=max_exponent
    )
