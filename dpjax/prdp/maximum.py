"""PrDP max: ``dpjax.prdp.max``, Algorithm 2 with the exponential-mechanism max (Asi & Duchi, "Instance-optimality in differential privacy via approximate inverse sensitivity mechanisms", NeurIPS 2020; Dong & Yi, PODS 2023)."""

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
    estimate = exponential_max_sorted(noise, 1, sorted_values, kept, part.floor[level] / 2.0, beta / 2.0,
                                      kept_upper(upper, part)[level])
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

    Args: as :func:`dpjax.prdp.sum` (no ``method``).
    """
    key, max_levels = check_common(key, budgets, mask, eps_min, eps_max, beta, max_levels)
    upper, _ = check_upper(upper, max_levels)
    check_values(values, budgets, upper)
    return _framework_max(key, values, budgets, mask, eps_min, eps_max, beta, upper, max_levels=max_levels)
