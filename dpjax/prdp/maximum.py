"""PrDP max: ``dpjax.prdp.max``, Algorithm 2 with the exponential-mechanism max.

The max is that of Asi & Duchi, "Instance-optimality in differential privacy via approximate
inverse sensitivity mechanisms", NeurIPS 2020, and Dong & Yi, "Universal Private Estimators",
PODS 2023.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from dpjax._float64 import x64
from dpjax.prdp._args import check_common, check_upper, check_values
from dpjax.prdp._noise import Stream
from dpjax.prdp.count import make_result
from dpjax.prdp.domains import partition_records
from dpjax.prdp.exponential_max import exponential_max_sorted, sort_records
from dpjax.prdp.framework import framework_ledger, kept_upper, select_epsilon_tau
from dpjax.prdp.result import PrDPResult

__all__ = ["max"]


@partial(jax.jit, static_argnames=("max_levels",))
def _framework_max(key, values, budgets, mask, eps_min, eps_max, beta, upper, *, max_levels):
    part = partition_records(budgets, mask, eps_min, eps_max, max_levels)
    sorted_values, sorted_level, sorted_weight = sort_records(values, part.level, part.weight)
    noise = Stream(key)
    level = select_epsilon_tau(noise, part, jnp.float64(beta))
    kept = sorted_weight & (sorted_level >= level)
    estimate = exponential_max_sorted(
        noise, 1, sorted_values, kept, part.floor[level] / 2.0, beta / 2.0, kept_upper(upper, part)[level]
    )
    return make_result(estimate, level, part, framework_ledger(part, level))


@x64
def max(key, values, budgets, *, eps_min, eps_max, beta, upper, mask=None, max_levels=None) -> PrDPResult:  # noqa: A001
    """E-PrDP maximum of values in ``[0, upper]`` (Algorithm 2 + the exponential-mechanism max).

    Part 1 finds ℓ with E/2; the EM max (target rank ``c = ⌈(2/ε)ln((U_ℓ+1)/β)⌉`` records above
    the output, ε = lo_ℓ/2, β/2) runs on ``D_ℓ`` over the integers ``[0, ⌊U_ℓ⌋]``. With per-level
    bounds (:meth:`PrivacyFunction.level_upper`) ``U_ℓ = E^{-1}(ε_τ)``, the reading that reproduces
    the paper's rank errors (docs/prdp.md); with a scalar ``upper`` the domain stays ``[0, U]``.
    The released value is an integer (float64). It needs ``|D_ℓ| ≳ c`` records to be useful
    (the paper's "n > Õ(1/ε)").

    Args:
      key: a JAX PRNG key, consumed.
      values: ``v(r) ∈ [0, upper]`` per record, shape (n,).
      budgets: ``E(r)`` per record, all ``≥ eps_min``.
      eps_min: ε̌, the least budget of the whole domain (data-independent).
      eps_max: ε̂, the cap of the budget function.
      beta: failure probability in (0, 1).
      upper: public bound of the values: a scalar U, or per-level bounds ``u_i``.
      mask: optional boolean (n,): False marks padding.
      max_levels: static level count, needed only when ``eps_min``/``eps_max`` are traced.

    Returns:
      :class:`~dpjax.prdp.PrDPResult` with the released maximum (an integer, float64) as ``estimate``.

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
      (PACMMOD 3(6), article 287), §6 and Algorithm 2.
    """
    key, max_levels = check_common(key, budgets, mask, eps_min, eps_max, beta, max_levels)
    upper, _ = check_upper(upper, max_levels)
    check_values(values, budgets, upper)
    return _framework_max(key, values, budgets, mask, eps_min, eps_max, beta, upper, max_levels=max_levels)
