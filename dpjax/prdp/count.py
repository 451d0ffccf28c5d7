"""Algorithm 1, PrDP Count (Chen, Sun, Xu, Dong, SIGMOD 2025, §5.1).

Every record lies in exactly one privacy-specified domain X_i (:mod:`dpjax.prdp.domains`).
Each level count ``c_i = |D ∩ X_i|`` is released with ``Lap(1/lo_i)`` noise — ``lo_i``-DP
for the records of X_i, whose budgets are all ``≥ lo_i`` — so by parallel composition over
the disjoint levels the vector of noisy counts is E-PrDP (Lemma 3.11). The first level whose
noisy count reaches ``T_i = ln(L/β)/lo_i`` is ℓ ("heavy"); the estimate is the sum of the
noisy counts of levels ℓ … L, and ``ε_τ = lo_ℓ`` estimates ε_min(D) (Theorem 5.1: with
probability ≥ 1 − β, ``ε_τ ≥ ε_min(D)/2`` and the error is ``< 12·ln(L/β)/ε_min(D)``).
Selecting ℓ and summing are post-processing; the record count n is never used.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from dpjax.prdp._noise import Stream
from dpjax._float64 import x64
from dpjax.prdp._args import check_common
from dpjax.prdp.domains import Partition, first_heavy_level, partition_records, sum_from_level
from dpjax.prdp.result import PrDPResult

__all__ = ["count", "noisy_levels", "make_result"]


def noisy_levels(noise: Stream, stream: int, stats, scales, levels, beta):
    """Noisy level statistics and the first heavy level (Algorithm 1 lines 3–8).

    ``stats + scales·Lap(1)`` per level; threshold ``T = scales·ln(L/β)`` (the
    ``1 − β/L`` two-sided Laplace quantile, so that with probability ≥ 1 − β no noise
    crosses its threshold). Levels with scale 0 (nothing to protect, e.g. an extension
    level holding no positive value) and padded levels are never heavy.
    The noise comes from stream ``stream`` of ``noise``. Returns ``(noisy, ℓ)`` with ℓ 0-based.

    Args:
      noise: the mechanism's :class:`dpjax.prdp._noise.Stream`.
      stream: the first stream number drawn from.
      stats: the level statistics (max_levels,).
      scales: the Laplace scales per level (0: never heavy).
      levels: L.
      beta: failure probability.

    Returns:
      ``(noisy, ℓ)``.
    """
    idx = jnp.arange(stats.shape[-1], dtype=jnp.int32)
    real = idx < levels
    noisy = jnp.where(real, stats + scales * noise.laplace(stream, stats.shape), 0.0)
    log_term = jnp.log(levels.astype(jnp.float64) / beta)
    thresholds = jnp.where(real & (scales > 0), scales * log_term, jnp.inf)
    return noisy, first_heavy_level(noisy, thresholds, levels)


def make_result(estimate, level, part: Partition, level_epsilon) -> PrDPResult:
    """A :class:`PrDPResult` for 0-based level ℓ (padded levels charged nothing).

    Args:
      estimate: the released answer.
      level: ℓ, 0-based.
      part: the records' :class:`dpjax.prdp.domains.Partition`.
      level_epsilon: the pure ε spent per level.

    Returns:
      The :class:`PrDPResult`.
    """
    return PrDPResult(
        estimate=estimate,
        epsilon_tau=part.floor[level],
        level=level + 1,
        num_levels=part.levels,
        level_floor=part.floor,
        level_epsilon=jnp.where(part.floor > 0, level_epsilon, 0.0),
        eps_min=part.eps_min,
        eps_max=part.eps_max,
    )


@partial(jax.jit, static_argnames=("max_levels",))
def _count(key, budgets, mask, eps_min, eps_max, beta, *, max_levels):
    part = partition_records(budgets, mask, eps_min, eps_max, max_levels)
    scales = jnp.where(part.floor > 0, 1.0 / jnp.where(part.floor > 0, part.floor, 1.0), 0.0)
    noisy, level = noisy_levels(Stream(key), 0, part.counts(), scales, part.levels, jnp.float64(beta))
    return make_result(sum_from_level(noisy, level, part.levels), level, part, part.floor)


@x64
def count(key, budgets, *, eps_min, eps_max, beta, mask=None, max_levels=None) -> PrDPResult:
    """E-PrDP count of the records (Algorithm 1).

    Args:
      key: a JAX PRNG key, consumed (split per use inside); never reuse it.
      budgets: ``E(r)`` of each record, shape (n,), float64 path; every entry ``≥ eps_min``.
      eps_min: ε̌, the least budget over the whole *domain* (data-independent, e.g. ``E(U)``);
        never the least budget of the data, which is private.
      eps_max: ε̂, the cap of the budget function.
      beta: failure probability in (0, 1).
      mask: optional boolean (n,): False marks padding (a static-shape batch of datasets).
      max_levels: static level count, needed only when ``eps_min``/``eps_max`` are traced
        (a sweep under ``vmap``); defaults to L.

    Returns:
      :class:`~dpjax.prdp.PrDPResult`: ``estimate``, ``epsilon_tau`` (= lo_ℓ), ``level`` (ℓ,
      1-based), and the per-level ledger (``level_epsilon = lo_i``: each level pays its floor).
      ``jit``/``vmap``-able over keys.

    Raises:
      ValueError: ``key`` not a single Threefry key; ``eps_min`` or ``eps_max`` not a positive
        scalar, or ``eps_max < eps_min``; ``beta`` outside (0, 1); ``budgets`` not a finite,
        non-empty 1-D array or with an entry below ``eps_min``; ``mask`` not a boolean array of the
        budgets' shape; ``max_levels`` missing for traced ``eps_min``/``eps_max``, not an integer in
        [1, 64], or below L; a budget range needing more than 64 levels.

    References:
      Chen, Sun, Xu, Dong, "A General Framework for Per-record Differential Privacy", SIGMOD 2025
      (PACMMOD 3(6), article 287), §5.1, Algorithm 1 and Theorem 5.1.
    """
    key, max_levels = check_common(key, budgets, mask, eps_min, eps_max, beta, max_levels)
    return _count(key, budgets, mask, eps_min, eps_max, beta, max_levels=max_levels)
