"""The ε-DP base max M of the PrDP framework: an exponential mechanism on ranks.

Chen et al. (per-record DP, SIGMOD 2025) name an "exponential-based max-selection mechanism"
(Asi & Duchi, NeurIPS 2020; Dong & Yi, PODS 2023) without specifying it; this is the
reconstruction used here (it reproduces the paper's rank errors when the domain is ``U_ℓ``):

* target rank ``c = ⌈(2/ε)·ln((B + 1)/β)⌉``;
* utility ``u(y) = −|#{x > y} − c|`` on the integers ``y ∈ [0, B]`` (sensitivity 1 under
  add/remove: one record moves every ``#{x > y}`` by at most 1);
* ``Pr[y] ∝ exp(ε·u(y)/2)``: ε-DP.

Between consecutive sorted values the utility is constant, so the law is a choice among
the ``m + 1`` intervals ``[0, x_(1)), [x_(1), x_(2)), …, [x_(m), B + 1)`` with weight
``#integers · exp(ε·u/2)`` (drawn from the log-weights by :func:`categorical`; empty
intervals, i.e. ties, weigh 0) and then a uniform integer inside the chosen interval. Values
need not be integers: an interval holds the integers from ``⌈start⌉`` to ``⌈end⌉ − 1``.

The sort is done once; records are included by a mask, so a batch of repetitions whose
kept set differs (the framework's ``level ≥ ℓ``) costs O(n) each after one O(n log n)
sort: the interval after a kept value ends at the next *kept* value (a reverse running
minimum) and ``#{kept x > y}`` is a running count.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax.prdp._noise import Stream
from dpjax.prdp.domains import opaque

__all__ = ["exponential_max_sorted", "exponential_max", "sort_records", "categorical"]


def exponential_max_sorted(noise: Stream, stream: int, sorted_values, kept, epsilon, beta, upper):
    """The EM max of the records ``sorted_values[kept]`` over the integers ``[0, ⌊upper⌋]``.

    ``sorted_values``: ascending (n,); ``kept``: boolean (n,) in the same order. The
    domain bound ``upper`` must be public (data-independent). Draws from streams ``stream …
    stream + 2`` of ``noise``. Returns the released integer as float64.

    Args:
      noise: the mechanism's :class:`dpjax.prdp._noise.Stream`.
      stream: the first stream number drawn from.
      sorted_values: ascending values (n,).
      kept: (n,) bool, in the same order.
      epsilon: ε.
      beta: failure probability.
      upper: the public domain bound.

    Returns:
      The released integer, as float64.
    """
    top = jnp.floor(upper) + 1.0  # one past the largest candidate
    m = jnp.sum(kept.astype(jnp.float64))
    c = jnp.ceil(2.0 / epsilon * jnp.log(top / beta))
    vals = jnp.where(kept, jnp.clip(sorted_values, 0.0, top), top)
    nxt = jnp.concatenate([jax.lax.cummin(vals, reverse=True)[1:], top[None]])
    start = jnp.ceil(vals)
    size = jnp.where(kept, jnp.ceil(nxt) - start, 0.0)
    above = m - jnp.cumsum(kept.astype(jnp.float64))  # #{kept x > y} on [x_p, next kept)
    first = jnp.min(vals)  # = top when nothing is kept
    starts = jnp.concatenate([jnp.zeros((1,)), start])
    sizes = jnp.concatenate([jnp.ceil(first)[None], size])
    aboves = jnp.concatenate([m[None], above])
    log_w = (
        jnp.where(sizes > 0, jnp.log(jnp.where(sizes > 0, sizes, 1.0)), -jnp.inf) - epsilon * jnp.abs(aboves - c) / 2.0
    )
    pick = categorical(noise, stream, log_w)
    offset = jnp.floor(noise.uniform(stream + 2) * sizes[pick])
    return starts[pick] + jnp.minimum(offset, sizes[pick] - 1.0)


def _log_sum_exp(x, axis):
    top = jnp.max(x, axis=axis, keepdims=True)
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    return jnp.squeeze(top, axis) + jnp.log(jnp.sum(jnp.exp(x - top), axis=axis))


def _gumbel_argmax(noise: Stream, stream: int, log_w):
    """``argmax(log_w + Gumbel)`` over the last axis, with int32 indices (see :func:`sort_records`)."""
    scores = log_w + noise.gumbel(stream, log_w.shape)
    idx = jnp.arange(scores.shape[-1], dtype=jnp.int32)
    return jnp.min(jnp.where(scores == jnp.max(scores), idx, scores.shape[-1] - 1))


def categorical(noise: Stream, stream: int, log_w):
    """An index drawn with probability ∝ ``exp(log_w)`` (1-D; ``-inf`` = weight 0), in two stages.

    The entries are cut into blocks of ``B ≈ √len`` (a power of two): a block is drawn by
    Gumbel-max on the blocks' log-sum-exp masses, then an entry of that block by Gumbel-max
    on its log-weights. The law is exactly the categorical one (Pr[block]·Pr[entry | block]),
    with every mass computed from log-weights in float64, and it takes O(√len) random numbers
    instead of one Gumbel per entry. Draws from streams ``stream`` and ``stream + 1``.

    Args:
      noise: the mechanism's :class:`dpjax.prdp._noise.Stream`.
      stream: the first stream number drawn from.
      log_w: 1-D log-weights.

    Returns:
      An int32 index.
    """
    size = log_w.shape[0]
    block = 1 << max(int(size**0.5).bit_length() - 1, 0)
    blocks = -(-size // block)
    padded = jnp.concatenate([log_w, jnp.full((blocks * block - size,), -jnp.inf)]).reshape(blocks, block)
    b = _gumbel_argmax(noise, stream, _log_sum_exp(padded, axis=1))
    row = jax.lax.dynamic_index_in_dim(padded, b, axis=0, keepdims=False)
    return b * block + _gumbel_argmax(noise, stream + 1, row)


def exponential_max(key, values, weights, epsilon, beta, upper):
    """The EM max of the records with ``weights`` True (sorts them; see :func:`exponential_max_sorted`).

    Has the signature of a user mechanism M of :func:`dpjax.prdp.framework`.

    Args:
      key: a JAX PRNG key.
      values: the records' values, shape (n,).
      weights: (n,) bool, the records the mechanism may read.
      epsilon: ε.
      beta: failure probability.
      upper: the public bound of the values.

    Returns:
      The released integer, as float64.
    """
    sorted_values, sorted_weights = sort_records(values, weights)
    return exponential_max_sorted(Stream(key), 0, sorted_values, sorted_weights, epsilon, beta, upper)


def sort_records(values, *columns):
    """``values`` (as float64) in ascending order, and ``columns`` in the same order.

    int32 indices throughout (``jnp.argsort`` would emit 64-bit indices under x64, which
    do not lower in a program traced with the x64 flag off).

    Args:
      values: the values, shape (n,).
      *columns: arrays of shape (n,) reordered alongside.

    Returns:
      ``(sorted_values, *sorted_columns)``.
    """
    values = opaque(values)
    order = jnp.arange(values.shape[0], dtype=jnp.int32)
    sorted_values, order = jax.lax.sort_key_val(values, order)
    return (sorted_values,) + tuple(jnp.asarray(c)[order] for c in columns)
