"""The ε-DP base sum M of the PrDP framework: SVT-chosen clipping plus Laplace.

Dong & Yi, "Universal Private Estimators", PODS 2023.

The paper cites "Laplace-based standard DP sum estimation (dong2023universal)" without
specifying it; this is a reconstruction from the co-authors' public code, with one
fix (clip at ``τ = 2^j``, not ``2^{j−1}``), and reproduces the paper's numbers with it:

1. ``ε1 = ε2 = ε/2``, ``β1 = β/2``, public threshold ``θ = (6/ε1)·ln(2/β1)``;
2. AboveThreshold over the candidates ``j = 0 … J``, ``J = ⌈log2 max(B, 1)⌉``: the first ``j``
   with ``A_j + Lap(4/ε1) < θ + Lap(2/ε1)``, where ``A_j = #{x > 2^j}`` (sensitivity 1 under
   add/remove); ``j = J`` if none passes. ε1-DP.
3. ``τ = 2^j``; release ``Σ min(x, τ) + Lap(τ/ε2)`` (sensitivity τ for x ≥ 0). ε2-DP.

All J + 1 query noises are drawn up front and the first passing index is taken: the
same law as the sequential scan, since unused noises are never released.
The data enter only through a table of counts and sums per *bucket* ``b`` (the least
``b ≥ 0`` with ``x ≤ 2^b``): ``A_j = Σ_{b>j} count_b`` and
``Σ min(x, 2^j) = Σ_{b≤j} sum_b + 2^j·A_j``, both exact. The framework builds that table
once per level, so a batch of repetitions costs O(L·J) each after one O(n) pass.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax.prdp._args import MAX_CLIP_EXPONENT
from dpjax.prdp._noise import Stream
from dpjax.prdp.domains import dyadic_exponent, opaque, pow2

__all__ = ["value_bucket", "bucket_table", "universal_sum_from_buckets", "universal_sum"]


def value_bucket(values, max_exponent: int):
    """Bucket of each value: the least ``b ∈ [0, max_exponent]`` with ``x ≤ 2^b`` (0 for x ≤ 1).

    Args:
      values: non-negative values (array).
      max_exponent: the largest bucket.

    Returns:
      int32 buckets of ``values``' shape.
    """
    return jnp.clip(dyadic_exponent(values, 1.0), 0, max_exponent)


def bucket_table(values, weights, groups, num_groups: int, max_exponent: int):
    """Weighted counts and sums per (group, bucket): two arrays of shape (num_groups, max_exponent + 1).

    Args:
      values: the values, shape (n,).
      weights: (n,) bool.
      groups: (n,) int32 group of each record.
      num_groups: the static number of groups.
      max_exponent: the largest bucket.

    Returns:
      ``(counts, sums)``.
    """
    width = max_exponent + 1
    cell = groups * width + value_bucket(values, max_exponent)
    w = weights.astype(jnp.float64)
    counts = jax.ops.segment_sum(w, cell, num_segments=num_groups * width)
    sums = jax.ops.segment_sum(w * values, cell, num_segments=num_groups * width)
    return counts.reshape(num_groups, width), sums.reshape(num_groups, width)


def universal_sum_from_buckets(noise: Stream, stream: int, counts, sums, epsilon, beta, upper):
    """The universal sum of the records summarised by ``counts``/``sums`` per bucket (see module doc).

    ``upper`` is the public bound B of the values (sets J); every summarised value must be
    ``≤ 2^{len(counts) − 1}``. Draws from streams ``stream … stream + 2`` of ``noise``. Returns
    ``(estimate, τ)``. ε-DP under add/remove for any number of records (the record count is
    never read).

    Args:
      noise: the mechanism's :class:`dpjax.prdp._noise.Stream`.
      stream: the first stream number drawn from.
      counts: the weighted counts per bucket.
      sums: the weighted sums per bucket.
      epsilon: ε.
      beta: failure probability.
      upper: the public bound B.

    Returns:
      ``(estimate, τ)``.

    References:
      Dong, Yi, "Universal Private Estimators", PODS 2023.
    """
    j_max = counts.shape[-1] - 1
    e1 = epsilon / 2.0
    theta = 6.0 / e1 * jnp.log(2.0 / (beta / 2.0))
    top = jnp.minimum(jnp.maximum(dyadic_exponent(jnp.maximum(upper, 1.0), 1.0), 0), j_max)
    j = jnp.arange(j_max + 1, dtype=jnp.int32)
    above = jnp.sum(counts) - jnp.cumsum(counts)  # A_j = #{x > 2^j}
    rho = 2.0 / e1 * noise.laplace(stream)
    nu = 4.0 / e1 * noise.laplace(stream + 1, (j_max + 1,))
    passed = (above + nu < theta + rho) & (j <= top)
    chosen = jnp.min(jnp.where(passed, j, top))
    tau = pow2(chosen)
    clipped = jnp.sum(jnp.where(j <= chosen, sums, 0.0)) + tau * above[chosen]
    return clipped + tau / (epsilon - e1) * noise.laplace(stream + 2), tau


def universal_sum(key, values, weights, epsilon, beta, upper, *, max_exponent: int = MAX_CLIP_EXPONENT):
    """The universal sum of the records with ``weights`` True, values clipped into ``[0, 2^max_exponent]``.

    Returns the estimate. It has the signature of a user mechanism M of :func:`dpjax.prdp.framework`
    (the base M of ``dpjax.prdp.sum``, here from the records: one O(n) pass per run).

    Args:
      key: a JAX PRNG key.
      values: the records' values, shape (n,).
      weights: (n,) bool, the records the mechanism may read.
      epsilon: ε.
      beta: failure probability.
      upper: the public bound of the values.
      max_exponent: the largest clipping exponent (static).

    Returns:
      The float64 estimate.

    References:
      Dong, Yi, "Universal Private Estimators", PODS 2023.
    """
    values = jnp.clip(opaque(values), 0.0, 2.0**max_exponent)
    zeros = jnp.zeros(values.shape, jnp.int32)
    counts, sums = bucket_table(values, weights, zeros, 1, max_exponent)
    return universal_sum_from_buckets(Stream(key), 0, counts[0], sums[0], epsilon, beta, upper)[0]
