"""Argument checks and static sizes of the PrDP mechanisms (concrete values, outside ``jit``).

Every public PrDP function calls these before tracing, so bad input raises a
``ValueError`` that names the parameter. Traced arguments (the mechanism called inside
the caller's ``jit``/``vmap`` with that argument batched) cannot be inspected and are let
through; the mechanisms stay private for any input regardless (records whose budget is
below ε̌ get weight 0, values are clipped into ``[0, upper]``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.random import check_key
from dpjax.validation import (
    check_finite_values,
    check_int,
    check_positive,
    check_probability,
    is_traced,
)

__all__ = [
    "check_range",
    "check_common",
    "check_values",
    "check_upper",
    "static_levels",
    "MAX_LEVELS",
    "MAX_CLIP_EXPONENT",
]

#: Levels are ``ε̌·2^j``; 64 covers every budget ratio ε̂/ε̌ ≤ 2^64.
MAX_LEVELS = 64
#: Clipping thresholds ``2^j`` of the universal sum go up to ``2^63``; larger value bounds are refused.
MAX_CLIP_EXPONENT = 63


def _scalar(name, x):
    if not is_traced(x) and np.ndim(x) != 0:
        raise ValueError(f"{name} must be a scalar, got shape {np.shape(x)}")


def static_levels(eps_min, eps_max, max_levels) -> int:
    """The static level count: ``L`` from concrete ``eps_min``/``eps_max``, else ``max_levels``."""
    traced = is_traced(eps_min) or is_traced(eps_max)
    if max_levels is None:
        if traced:
            raise ValueError(
                "max_levels: eps_min/eps_max are traced (a sweep under vmap/jit); pass a static "
                "max_levels >= the largest L = ceil(log2(eps_max/eps_min)) of the sweep"
            )
        from dpjax.prdp.domains import num_levels

        with jax.enable_x64(True), jax.ensure_compile_time_eval():
            levels = int(num_levels(jnp.float64(eps_min), jnp.float64(eps_max)))
        if levels > MAX_LEVELS:
            raise ValueError(
                f"eps_max / eps_min = {eps_max / eps_min:.3g} needs {levels} levels; at most "
                f"{MAX_LEVELS} (a ratio of 2^{MAX_LEVELS}) are supported"
            )
        return levels
    max_levels = check_int("max_levels", max_levels, minimum=1)
    if max_levels > MAX_LEVELS:
        raise ValueError(f"max_levels must be at most {MAX_LEVELS}, got {max_levels}")
    if not traced:
        needed = static_levels(eps_min, eps_max, None)
        if needed > max_levels:
            raise ValueError(f"max_levels={max_levels} is below L = {needed} levels of [eps_min, eps_max]")
    return max_levels


def check_range(eps_min, eps_max, beta, max_levels) -> int:
    """Validate the budget range ``[ε̌, ε̂]`` and ``β`` (None: not used); return the static level count."""
    for name, x in (("eps_min", eps_min), ("eps_max", eps_max)):
        _scalar(name, x)
        check_positive(name, x)
    if not (is_traced(eps_min) or is_traced(eps_max)) and float(eps_max) < float(eps_min):
        raise ValueError(f"eps_max must be >= eps_min, got eps_max={eps_max} < eps_min={eps_min}")
    if beta is not None:
        _scalar("beta", beta)
        check_probability("beta", beta, high_open=True)
    return static_levels(eps_min, eps_max, max_levels)


def check_common(key, budgets, mask, eps_min, eps_max, beta, max_levels):
    """Validate the arguments every PrDP mechanism takes; return ``(key, max_levels)``."""
    key = check_key(key)
    max_levels = check_range(eps_min, eps_max, beta, max_levels)
    check_finite_values("budgets", budgets)
    if np.ndim(budgets) != 1:
        raise ValueError(f"budgets must be a 1-D array (one budget E(r) per record), got shape {np.shape(budgets)}")
    if not (is_traced(budgets) or is_traced(eps_min)):
        low = np.asarray(budgets, np.float64) < float(eps_min)
        if low.any():
            raise ValueError(
                f"budgets: {int(low.sum())} record(s) have a budget below eps_min = {float(eps_min):g}; eps_min is "
                "the least budget of the whole domain (data-independent), so every E(r) must be >= eps_min"
            )
    if mask is not None:
        if np.shape(mask) != np.shape(budgets):
            raise ValueError(f"mask must have the shape of budgets {np.shape(budgets)}, got {np.shape(mask)}")
        if not is_traced(mask) and np.asarray(mask).dtype != bool:
            raise ValueError(f"mask must be a boolean array (True = a real record), got dtype {np.asarray(mask).dtype}")
    return key, max_levels


def check_upper(upper, max_levels: int):
    """Validate ``upper`` (a scalar bound U, or one public bound per level); return ``(upper, J_max)``.

    A per-level array may be shorter than ``max_levels`` but not shorter than L; it is
    padded with its last entry. ``J_max`` is the static number of clipping exponents of the
    universal sum (``2^{J_max} ≥`` every bound).
    """
    if is_traced(upper):
        if np.ndim(upper) not in (0,) and np.shape(upper) != (max_levels,):
            raise ValueError(f"upper: a traced per-level bound must have shape ({max_levels},), got {np.shape(upper)}")
        return upper, MAX_CLIP_EXPONENT
    arr = np.asarray(upper, np.float64)
    if arr.ndim > 1 or arr.size == 0:
        raise ValueError(f"upper must be a scalar or a 1-D array of per-level bounds, got shape {arr.shape}")
    check_positive("upper", arr, allow_zero=arr.ndim == 1)
    if arr.max() <= 0:
        raise ValueError("upper: every per-level bound is 0")
    if arr.max() > 2.0**MAX_CLIP_EXPONENT:
        raise ValueError(
            f"upper must be at most 2^{MAX_CLIP_EXPONENT} = {2.0**MAX_CLIP_EXPONENT:.3g}, got {arr.max():g}"
        )
    if arr.ndim == 1:
        if arr.size > max_levels:
            arr = arr[:max_levels]
        arr = np.pad(arr, (0, max_levels - arr.size), mode="edge")
    top = max(float(arr.max()), 1.0)
    j_max = max(int(math.ceil(math.log2(top))), 0)
    j_max += top > 2.0**j_max
    return arr, min(j_max, MAX_CLIP_EXPONENT)


def check_values(values, budgets, upper):
    """Values ``v(r)``: finite, one per record, in ``[0, max(upper)]``."""
    check_finite_values("values", values)
    if np.shape(values) != np.shape(budgets):
        raise ValueError(f"values must have the shape of budgets {np.shape(budgets)}, got {np.shape(values)}")
    if not is_traced(values):
        arr = np.asarray(values, np.float64)
        if arr.min() < 0:
            raise ValueError(f"values must be >= 0 (the domain is [0, upper]), got min {arr.min():g}")
        if not is_traced(upper) and arr.max() > np.max(upper):
            raise ValueError(
                f"values must be <= upper = {np.max(upper):g} (clip the data to the public bound "
                f"first), got max {arr.max():g}"
            )
