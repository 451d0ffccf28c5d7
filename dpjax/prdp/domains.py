"""Privacy-specified domain partitioning (Chen, Sun, Xu, Dong, SIGMOD 2025, §5.1).

The budget range ``[ε̌, ε̂]`` is cut into ``L = ⌈log2(ε̂/ε̌)⌉`` levels (the paper's §5.1): level 1 is
the closed interval ``[ε̌, 2ε̌]``, level ``i ≥ 2`` is ``(2^{i−1}ε̌, min(2^i ε̌, ε̂)]``. The
*floor* of level ``i`` is ``lo_i = 2^{i−1}ε̌``, the least budget of its records; every noise
scale on a level is calibrated to its floor, so a record is never charged more than its
own budget E(r).

Code stores levels 0-based (``j = i − 1``); results report the paper's 1-based level.
Level assignment is exact at powers of two: ``floor·2^k`` values are compared exactly
(scaling by a power of two is exact) after a ``log2`` first guess, so a record is never put into a level
whose floor exceeds its budget (the privacy-critical direction; acceptance A1).
All functions here are pure and ``jit``/``vmap``-able; call them inside
``jax.enable_x64(True)`` for float64 results (the PrDP mechanisms do).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "pow2",
    "dyadic_exponent",
    "num_levels",
    "level_of",
    "level_floors",
    "first_heavy_level",
    "sum_from_level",
    "Partition",
    "partition_records",
    "opaque",
]


#: ``2^k`` for ``k = -1100 … 1100`` (exact; 0 and inf at the ends): power-of-two scaling by lookup.
_POW2_OFFSET = 1100
with np.errstate(over="ignore"):
    _POW2 = np.ldexp(1.0, np.arange(-_POW2_OFFSET, _POW2_OFFSET + 1))


def pow2(k, dtype=jnp.float64):
    """``2^k`` for an int32 array ``k``, exactly, by a table lookup (not ``jnp.ldexp``).

    Args:
      k: int32 exponents (clipped to [−1100, 1100]).
      dtype: the result's float dtype.

    Returns:
      ``2^k`` of ``k``'s shape.
    """
    return jnp.asarray(_POW2, dtype)[jnp.clip(k + _POW2_OFFSET, 0, 2 * _POW2_OFFSET)]


def dyadic_exponent(x, base):
    """The least integer ``k`` with ``x ≤ base·2^k`` (int32), exactly, for ``x, base > 0``.

    ``k0 = ceil(log2(x) − log2(base))`` is within one of the answer; one exact comparison with
    ``t = base·2^{k0}`` (and ``t/2``) corrects it — multiplying by a power of two is exact in
    binary floating point (away from the subnormal range, below 1e-307). Entries with ``x ≤ 0``
    or non-finite ``x`` give 0 (callers mask them).

    Args:
      x: positive values (array).
      base: the positive base.

    Returns:
      int32 ``k`` of the broadcast shape.
    """
    x = jnp.asarray(x)
    base = jnp.asarray(base, x.dtype)
    ok = (x > 0) & jnp.isfinite(x)
    xs = jnp.where(ok, x, base)
    k = jnp.ceil(jnp.log2(xs) - jnp.log2(base)).astype(jnp.int32)
    t = base * pow2(k, x.dtype)
    k = k + (xs > t).astype(jnp.int32) - (xs <= 0.5 * t).astype(jnp.int32)
    return jnp.where(ok, k, 0)


def num_levels(eps_min, eps_max):
    """``L = max(1, ⌈log2(ε̂/ε̌)⌉)``: the least ``L`` with ``ε̂ ≤ ε̌·2^L`` (int32, exact).

    Args:
      eps_min: ε̌ > 0.
      eps_max: ε̂ ≥ ε̌.

    Returns:
      int32 L.
    """
    return jnp.maximum(dyadic_exponent(eps_max, eps_min), 1)


def level_of(budgets, eps_min, levels):
    """0-based level of each budget: ``j`` with ``E ∈ (2^j ε̌, 2^{j+1} ε̌]`` (``j = 0`` closed below).

    Clipped to ``[0, levels − 1]``: budgets above ``2^{L−1}ε̌`` share the top level, whose
    floor they exceed. Budgets below ``ε̌`` also land on level 0 here, whose floor exceeds
    them: the mechanisms give such records weight 0 (they never influence a release).

    Args:
      budgets: the records' budgets (array).
      eps_min: ε̌.
      levels: L.

    Returns:
      int32 levels of ``budgets``' shape.
    """
    return jnp.clip(dyadic_exponent(budgets, eps_min) - 1, 0, levels - 1)


def level_floors(eps_min, max_levels: int):
    """Floors ``lo_j = 2^j ε̌``, ``j = 0 … max_levels − 1`` (exact).

    Args:
      eps_min: ε̌.
      max_levels: the static number of floors.

    Returns:
      An array of shape ``(max_levels,)``.
    """
    eps_min = jnp.asarray(eps_min)
    return eps_min * pow2(jnp.arange(max_levels, dtype=jnp.int32), eps_min.dtype)


def first_heavy_level(noisy, thresholds, levels):
    """ℓ (0-based): the first level with ``noisy ≥ threshold``, scanning from the smallest floor.

    Algorithm 1 lines 6–8: ``L − 1`` when no level is heavy. Padded levels (index ≥
    ``levels``) are never heavy. Returns int32.

    Args:
      noisy: the noisy level statistics (trailing level axis).
      thresholds: the levels' thresholds.
      levels: L.

    Returns:
      int32 ℓ, 0-based.
    """
    idx = jnp.arange(noisy.shape[-1], dtype=jnp.int32)
    heavy = (idx < levels) & (noisy >= thresholds)
    return jnp.min(jnp.where(heavy, idx, levels - 1), axis=-1).astype(jnp.int32)


def sum_from_level(noisy, level, levels):
    """``Σ_{j = ℓ}^{L−1} noisy_j`` (Algorithm 1 line 10), padded levels excluded.

    Args:
      noisy: the noisy level statistics (trailing level axis).
      level: ℓ, 0-based.
      levels: L.

    Returns:
      The sum.
    """
    idx = jnp.arange(noisy.shape[-1], dtype=jnp.int32)
    return jnp.sum(jnp.where((idx >= level) & (idx < levels), noisy, 0.0), axis=-1)


class Partition(NamedTuple):
    """Records split into privacy-specified domains (float64; build inside ``jax.enable_x64``).

    Attributes:
      level: (n,) int32, the 0-based level of each record.
      weight: (n,) bool: a real record (mask) whose budget is ≥ ε̌ (others never count).
      levels: () int32, L.
      floor: (max_levels,) float64, lo_j on levels j < L, 0 on padded levels.
      eps_min: () float64, ε̌.
      eps_max: () float64, ε̂.
    """

    level: jax.Array  # (n,) int32, 0-based level of each record
    weight: jax.Array  # (n,) bool: a real record (mask) whose budget is ≥ ε̌ (others never count)
    levels: jax.Array  # () int32, L
    floor: jax.Array  # (max_levels,) float64, lo_j on levels j < L, 0 on padded levels
    eps_min: jax.Array  # () float64
    eps_max: jax.Array  # () float64

    def counts(self, weight=None):
        """``c_j = |D ∩ X_j|`` (weighted by ``weight``, default the records' own weights).

        Args:
          weight: optional (n,) weights replacing the records' own.

        Returns:
          float64 counts of shape ``(max_levels,)``.
        """
        w = self.weight if weight is None else weight
        return jax.ops.segment_sum(w.astype(jnp.float64), self.level, num_segments=self.floor.shape[0])


def opaque(x, dtype=jnp.float64):
    """``x`` as an array of ``dtype`` behind an optimization barrier.

    Data a caller closes over inside ``jit`` become compile-time constants, and XLA would
    constant-fold the sorts and scatters of a mechanism on them (slowly, for large inputs); the
    barrier keeps them run-time values.

    Args:
      x: the data.
      dtype: the array's dtype.

    Returns:
      The array, opaque to constant folding.
    """
    return jax.lax.optimization_barrier(jnp.asarray(x, dtype))


def partition_records(budgets, mask, eps_min, eps_max, max_levels: int) -> Partition:
    """Assign each record its privacy level.

    Assign each record its level (the paper's §5.1). Records with a budget below ε̌ (or NaN), and
    padded records (``mask`` False), get weight 0: they are in no level, so no release
    depends on them and they spend nothing.

    Args:
      budgets: the records' budgets, shape (n,).
      mask: optional (n,) bool, False for padding.
      eps_min: ε̌.
      eps_max: ε̂.
      max_levels: the static level count.

    Returns:
      The :class:`Partition`.
    """
    budgets = opaque(budgets)
    eps_min = jnp.asarray(eps_min, jnp.float64)
    eps_max = jnp.asarray(eps_max, jnp.float64)
    levels = num_levels(eps_min, eps_max)
    weight = budgets >= eps_min
    if mask is not None:
        weight = weight & opaque(mask, bool)
    idx = jnp.arange(max_levels, dtype=jnp.int32)
    floor = jnp.where(idx < levels, level_floors(eps_min, max_levels), 0.0)
    return Partition(level_of(budgets, eps_min, levels), weight, levels, floor, eps_min, eps_max)
