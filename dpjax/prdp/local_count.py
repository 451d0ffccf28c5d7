"""Per-record local DP count: Algorithms 3 and 4 (Chen, Sun, Xu, Dong, SIGMOD 2025, §7.2).

*Privacy-specified query augmentation.* A noise scale that depended on E(r) would leak
E(r), so every user sends all L levels: coordinate i is ``1[level(r) = i] + Lap(1/lo_i)``
(Algorithm 3). Against the dummy record ⊥ (all zeros) the two output laws differ only in
coordinate ``i(r)``, by a shift of 1, so their density ratio is at most
``e^{lo_{i(r)}} ≤ e^{E(r)}`` in both directions: E-PrLDP (Definition 7.2). A user whose budget
is below ε̌ (not a valid record) answers as ⊥.

The analyzer (Algorithm 4) sums the n messages per level and runs Algorithm 1's scan with
thresholds grown by the aggregation of n noises:

* ``"paper"``: ``T_i = √(8n)·ln(L/β)/lo_i`` as printed (valid but conservative; on the paper's
  Normal(50k, 50k) data it gives ≈ 50 % error, not the published 9.84 %; docs/prdp.md);
* ``"subgaussian"`` (default): a Chernoff threshold (sub-Gaussian tail of the Laplace sum). ``Lap(b)`` has
  ``E e^{λX} ≤ e^{2λ²b²}`` for ``|λ|b ≤ 1/√2``, so a sum of n noises exceeds
  ``b·√(8n·ln(2L/β))`` (either side) with probability ≤ β/L when ``n ≥ ln(2L/β)``;
  otherwise ``√2·b·(n + ln(2L/β))``. This reproduces the paper's Table 4 (App. B; docs/prdp.md). (The
  Appendix A's driver uses ``ln(L/β)`` — a one-sided bound; the two-sided form is the one
  the union bound over L levels needs, and it selects the same level on that data.)

Simulating the protocol: ``per_user=True`` draws every user's L-vector (O(n·L));
the default fast path draws the aggregate exactly — a sum of n i.i.d. ``Lap(b)`` is
``b·(G − G')`` with ``G, G' ~ Gamma(n, 1)`` — in O(L) (a simulation shortcut with the same law).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from dpjax.prdp._noise import Stream
from dpjax._float64 import x64
from dpjax.prdp._args import check_common, check_range
from dpjax.prdp.count import make_result
from dpjax.prdp.domains import Partition, first_heavy_level, partition_records, sum_from_level
from dpjax.prdp.result import PrDPResult
from dpjax.validation import check_finite_values, check_positive, is_traced

__all__ = ["local_count", "local_randomizer", "local_analyzer", "THRESHOLDS"]

THRESHOLDS = ("subgaussian", "paper")


def _scales(part: Partition, multiplier):
    """Per-level Laplace scales ``multiplier/lo_i`` (0 on padded levels)."""
    return jnp.where(part.floor > 0, multiplier / jnp.where(part.floor > 0, part.floor, 1.0), 0.0)


def _users(part: Partition, mask):
    """n, the number of responding users (public in LDP): every real row, ⊥ answers included."""
    n = part.level.shape[0] if mask is None else jnp.sum(jnp.asarray(mask, bool))
    return jnp.asarray(n, jnp.float64)


def randomize(noise: Stream, stream: int, part: Partition, mask, multiplier):
    """Algorithm 3 for every user: (n, max_levels) messages; padded rows (``mask`` False) are 0.

    Args:
      noise: the mechanism's :class:`dpjax.prdp._noise.Stream`.
      stream: the first stream number drawn from.
      part: the records' :class:`dpjax.prdp.domains.Partition`.
      mask: optional (n,) bool.
      multiplier: the budget fraction the messages are calibrated to.

    Returns:
      float64 messages of shape (n, max_levels).
    """
    scales = _scales(part, multiplier)
    idx = jnp.arange(part.floor.shape[0], dtype=jnp.int32)
    onehot = (part.level[:, None] == idx[None, :]) & part.weight[:, None]
    msgs = onehot.astype(jnp.float64) + scales * noise.laplace(stream, (part.level.shape[0], part.floor.shape[0]))
    real = jnp.ones(part.level.shape, bool) if mask is None else jnp.asarray(mask, bool)
    return jnp.where(real[:, None] & (part.floor > 0), msgs, 0.0)


def aggregate(noise: Stream, stream: int, part: Partition, mask, multiplier, per_user):
    """``Q̃_i = Σ_j msg_j[i]``: from every user's message, or drawn exactly as ``c_i + b_i(G − G')``.

    Args:
      noise: the mechanism's :class:`dpjax.prdp._noise.Stream`.
      stream: the first stream number drawn from.
      part: the records' :class:`dpjax.prdp.domains.Partition`.
      mask: optional (n,) bool.
      multiplier: the budget fraction.
      per_user: draw every user's message instead of the exact aggregate.

    Returns:
      float64 ``Q̃`` of shape (max_levels,).
    """
    if per_user:
        return jnp.sum(randomize(noise, stream, part, mask, multiplier), axis=0)
    scales = _scales(part, multiplier)
    n = _users(part, mask)
    g = noise.gamma(stream, jnp.broadcast_to(n, (2,) + part.floor.shape))
    return jnp.where(part.floor > 0, part.counts() + scales * (g[0] - g[1]), 0.0)


def thresholds(scales, n, levels, beta, threshold: str):
    """Algorithm 4's thresholds for n aggregated ``Lap(scales)`` noises (module doc); padded: +inf.

    Args:
      scales: the per-level Laplace scales.
      n: the number of users.
      levels: L.
      beta: failure probability.
      threshold: ``"subgaussian"`` or ``"paper"``.

    Returns:
      float64 thresholds of shape (max_levels,).
    """
    lev = levels.astype(jnp.float64)
    if threshold == "paper":
        t = jnp.sqrt(8.0 * n) * scales * jnp.log(lev / beta)
    else:
        log_term = jnp.log(2.0 * lev / beta)
        t = jnp.where(n >= log_term, scales * jnp.sqrt(8.0 * n * log_term), jnp.sqrt(2.0) * scales * (n + log_term))
    return jnp.where(scales > 0, t, jnp.inf)


def analyze(aggregated, n, part: Partition, beta, multiplier, threshold: str):
    """Algorithm 4: ℓ (0-based) and the estimate ``Σ_{i ≥ ℓ} Q̃_i``.

    Args:
      aggregated: ``Q̃`` (max_levels,).
      n: the number of users.
      part: the records' :class:`dpjax.prdp.domains.Partition`.
      beta: failure probability.
      multiplier: the budget fraction.
      threshold: ``"subgaussian"`` or ``"paper"``.

    Returns:
      ``(ℓ, estimate)``.
    """
    level = first_heavy_level(
        aggregated, thresholds(_scales(part, multiplier), n, part.levels, beta, threshold), part.levels
    )
    return level, sum_from_level(aggregated, level, part.levels)


@partial(jax.jit, static_argnames=("threshold", "per_user", "max_levels"))
def _local_count(key, budgets, mask, eps_min, eps_max, beta, *, threshold, per_user, max_levels):
    part = partition_records(budgets, mask, eps_min, eps_max, max_levels)
    agg = aggregate(Stream(key), 0, part, mask, 1.0, per_user)
    level, estimate = analyze(agg, _users(part, mask), part, jnp.float64(beta), 1.0, threshold)
    return make_result(estimate, level, part, part.floor)


def check_message_count(budgets, max_levels):
    """Every user's L noises are addressed by one 32-bit counter: n·max_levels < 2^32.

    Args:
      budgets: the users' budgets, shape (n,).
      max_levels: the static level count.

    Raises:
      ValueError: n·max_levels ≥ 2^32.
    """
    if jnp.shape(budgets)[0] * max_levels >= 2**32:
        raise ValueError(
            f"budgets: {jnp.shape(budgets)[0]} users × {max_levels} levels exceed the 2^32 per-user "
            "noises one key addresses; use the exact aggregate (per_user=False) or split the users"
        )


def _check_threshold(threshold):
    if threshold not in THRESHOLDS:
        raise ValueError(f"threshold must be one of {THRESHOLDS}, got {threshold!r}")


@x64
def local_count(
    key, budgets, *, eps_min, eps_max, beta, threshold="subgaussian", per_user=False, mask=None, max_levels=None
) -> PrDPResult:
    """E-PrLDP count of the users (Algorithms 3 + 4), simulated end to end.

    Args:
      key: a JAX PRNG key, consumed.
      budgets: each user's ``E(r)`` (n,); every row is a responding user (n is public in LDP).
      eps_min: ε̌, the least budget of the whole domain (data-independent).
      eps_max: ε̂, the cap of the budget function.
      beta: failure probability in (0, 1).
      threshold: ``"subgaussian"`` (default) or ``"paper"`` (module doc).
      per_user: draw every user's message (protocol fidelity, O(n·L)) instead of the exact
        aggregate (O(L)); the two have the same law.
      mask: optional boolean (n,): False marks padding rows, which are not users.
      max_levels: static level count, needed only when ``eps_min``/``eps_max`` are traced.

    Returns:
      :class:`~dpjax.prdp.PrDPResult`; each level's users are charged its floor ``lo_i``.

    Raises:
      ValueError: an unknown ``threshold``; ``key`` not a single Threefry key; ``eps_min`` or
        ``eps_max`` not a positive scalar, or ``eps_max < eps_min``; ``beta`` outside (0, 1);
        ``budgets`` not a finite, non-empty 1-D array or with an entry below ``eps_min``; ``mask``
        not a boolean array of the budgets' shape; ``max_levels`` missing for traced
        ``eps_min``/``eps_max``, not an integer in [1, 64], or below L; a budget range needing more
        than 64 levels; with ``per_user``, n·L ≥ 2^32.

    References:
      Chen, Sun, Xu, Dong, "A General Framework for Per-record Differential Privacy", SIGMOD 2025
      (PACMMOD 3(6), article 287), §7.2, Algorithms 3 and 4.
    """
    _check_threshold(threshold)
    key, max_levels = check_common(key, budgets, mask, eps_min, eps_max, beta, max_levels)
    if per_user:
        check_message_count(budgets, max_levels)
    return _local_count(
        key, budgets, mask, eps_min, eps_max, beta, threshold=threshold, per_user=bool(per_user), max_levels=max_levels
    )


@partial(jax.jit, static_argnames=("max_levels",))
def _local_randomizer(key, budgets, mask, eps_min, eps_max, *, max_levels):
    return randomize(Stream(key), 0, partition_records(budgets, mask, eps_min, eps_max, max_levels), mask, 1.0)


@x64
def local_randomizer(key, budgets, *, eps_min, eps_max, mask=None, max_levels=None):
    """Algorithm 3 for every user: the (n, max_levels) float64 messages (columns ≥ L are 0).

    Row j is what user j sends: ``1[level(r_j) = i] + Lap(1/lo_i)`` in column i (a ⊥ user, or
    one whose budget is below ε̌, sends noise only).

    Args:
      key: a JAX PRNG key, consumed.
      budgets: each user's ``E(r)``, shape (n,).
      eps_min: ε̌, the least budget of the whole domain (data-independent).
      eps_max: ε̂, the cap of the budget function.
      mask: optional boolean (n,): False marks padding rows.
      max_levels: static level count, needed only when ``eps_min``/``eps_max`` are traced.

    Returns:
      float64 messages of shape ``(n, max_levels)``.

    Raises:
      ValueError: ``key`` not a single Threefry key; ``eps_min`` or ``eps_max`` not a positive
        scalar, or ``eps_max < eps_min``; ``budgets`` not a finite, non-empty 1-D array or with an
        entry below ``eps_min``; ``mask`` not a boolean array of the budgets' shape; ``max_levels``
        missing for traced ``eps_min``/``eps_max``, not an integer in [1, 64], or below L; a budget
        range needing more than 64 levels; n·L ≥ 2^32.

    References:
      Chen, Sun, Xu, Dong, "A General Framework for Per-record Differential Privacy", SIGMOD 2025
      (PACMMOD 3(6), article 287), §7.2, Algorithm 3.
    """
    key, max_levels = check_common(key, budgets, mask, eps_min, eps_max, None, max_levels)
    check_message_count(budgets, max_levels)
    return _local_randomizer(key, budgets, mask, eps_min, eps_max, max_levels=max_levels)


@x64
def local_analyzer(messages, *, eps_min, eps_max, beta, num_users=None, threshold="subgaussian"):
    """Algorithm 4 on received messages (n, ≥ L): ``(ε_τ, estimate)`` as a :class:`PrDPResult`.

    ``num_users`` (default: the number of rows) is the number of responding parties.
    Post-processing of the messages only; its ledger repeats the randomizer's (``lo_i``).

    Args:
      messages: the received messages, shape ``(n, ≥ L)``.
      eps_min: ε̌, the least budget of the whole domain (data-independent).
      eps_max: ε̂, the cap of the budget function.
      beta: failure probability in (0, 1).
      num_users: the number of responding parties (positive).
      threshold: ``"subgaussian"`` (default) or ``"paper"``.

    Returns:
      :class:`~dpjax.prdp.PrDPResult`.

    Raises:
      ValueError: an unknown ``threshold``; ``messages`` not finite, not 2-D or with fewer than L
        columns; ``num_users`` not positive; ``eps_min``/``eps_max`` not positive scalars or
        ``eps_max < eps_min``; ``beta`` outside (0, 1); a budget range needing more than 64 levels.

    References:
      Chen, Sun, Xu, Dong, "A General Framework for Per-record Differential Privacy", SIGMOD 2025
      (PACMMOD 3(6), article 287), §7.2, Algorithm 4.
    """
    _check_threshold(threshold)
    check_finite_values("messages", messages)
    if jnp.ndim(messages) != 2:
        raise ValueError(f"messages must have shape (users, levels), got {jnp.shape(messages)}")
    n = jnp.shape(messages)[0] if num_users is None else num_users
    if not is_traced(n):
        check_positive("num_users", n)
    max_levels = check_range(eps_min, eps_max, beta, None)
    if jnp.shape(messages)[1] < max_levels:
        raise ValueError(f"messages must have at least L = {max_levels} columns, got {jnp.shape(messages)[1]}")
    part = partition_records(jnp.zeros((0,)), None, eps_min, eps_max, max_levels)
    agg = jnp.sum(jnp.asarray(messages, jnp.float64)[:, :max_levels], axis=0)
    level, estimate = analyze(agg, jnp.asarray(n, jnp.float64), part, jnp.float64(beta), 1.0, threshold)
    return make_result(estimate, level, part, part.floor)
