"""The PrDP sum "extension" of Algorithm 1 (Chen, Sun, Xu, Dong, SIGMOD 2025, §5.2, App. A).

Algorithm 1 with level *sums* instead of counts: ``s_i = Σ_{r ∈ D∩X_i} v(r)`` is released with
``Lap(cap_i)``, ``cap_i = sup_{r ∈ X_i} v(r)/E(r)``, computed over the domain (never from the
data); ℓ is the first level with ``S̃_i ≥ cap_i·ln(L/β)`` and the estimate is ``Σ_{i ≥ ℓ} S̃_i``.

``cap_i = u_i / lo_i`` where ``u_i`` is the public bound of the values of level i (a scalar
``upper`` U on every level, or :meth:`PrivacyFunction.level_upper`, ``E^{-1}(lo_i)`` for a
non-increasing E — the paper's §5.2). Each value is clipped to its own level's bound
before summing, so a record of level i moves ``s_i`` by at most ``u_i`` and loses at most
``u_i/cap_i = lo_i ≤ E(r)`` whatever the data: E-PrDP by parallel composition over the levels.
A level whose bound is 0 carries no noise and is never heavy.

Theorem A.1: error ``O(E^{-1}(ε_min/2)/ε_min · log(log(ε̂/ε̌)/β))`` — ``Õ(Max/ε_min)`` for the
inverse function but ``Õ(Max²/ε_min)`` for ``E = α/ln v`` (the framework keeps ``Õ(Max/ε_min)``).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from dpjax.prdp._noise import Stream
from dpjax.prdp.count import make_result, noisy_levels
from dpjax.prdp.domains import opaque, partition_records, sum_from_level
from dpjax.prdp.framework import level_upper_bounds

__all__ = ["extension_sum"]


@partial(jax.jit, static_argnames=("max_levels",))
def extension_sum(key, values, budgets, mask, eps_min, eps_max, beta, upper, *, max_levels):
    """The Section 5.2 extension sum (arguments checked by :func:`dpjax.prdp.sum`).

    Args:
      key: a JAX PRNG key.
      values: the values, shape (n,).
      budgets: the budgets, shape (n,).
      mask: optional (n,) bool.
      eps_min: ε̌.
      eps_max: ε̂.
      beta: failure probability.
      upper: a scalar bound or per-level bounds.
      max_levels: the static level count.

    Returns:
      The :class:`PrDPResult`.

    References:
      Chen, Sun, Xu, Dong, "A General Framework for Per-record Differential Privacy", SIGMOD 2025
      (PACMMOD 3(6), article 287), §5.2 and Theorem A.1.
    """
    part = partition_records(budgets, mask, eps_min, eps_max, max_levels)
    bounds = jnp.where(part.floor > 0, level_upper_bounds(upper, part), 0.0)
    v = jnp.clip(opaque(values), 0.0, bounds[part.level])
    sums = jax.ops.segment_sum(jnp.where(part.weight, v, 0.0), part.level, num_segments=max_levels)
    caps = jnp.where(part.floor > 0, bounds / jnp.where(part.floor > 0, part.floor, 1.0), 0.0)
    noisy, level = noisy_levels(Stream(key), 0, sums, caps, part.levels, jnp.float64(beta))
    return make_result(sum_from_level(noisy, level, part.levels), level, part, jnp.where(caps > 0, part.floor, 0.0))
