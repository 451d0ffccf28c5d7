"""Algorithm 2, the general PrDP framework (Chen, Sun, Xu, Dong, SIGMOD 2025, §6).

Any ε-DP mechanism M (add/remove neighbours, any input size) becomes E-PrDP:

1. Part 1 — Algorithm 1 with ``E' = E/2`` and ``β/2``: the same levels, noise
   ``Lap(2/lo_i)``, thresholds ``T'_i = (2/lo_i)·ln(2L/β)``; ℓ is the first heavy level and
   ``ε_τ = lo_ℓ`` (in units of E, the paper's convention).
2. Part 2 — M on ``D_ℓ = {r : level(r) ≥ ℓ}`` (membership by level index, so the closed
   level 1 keeps its ``E(r) = ε̌`` records when ℓ = 1) with budget ``ε_τ/2 = lo_ℓ/2`` and
   failure ``β/2``.

Privacy (adaptive sequential composition, the paper's §6): part 1 costs a record of level i
``lo_i/2 ≤ E(r)/2``; in part 2 a record outside D_ℓ costs nothing and one inside has
``E(r) ≥ lo_ℓ``, so it pays ``lo_ℓ/2 ≤ E(r)/2``. The per-level ledger of a run is
therefore ``lo_i/2`` for ``i < ℓ`` and ``lo_i/2 + lo_ℓ/2 ≤ lo_i`` for ``i ≥ ℓ`` (A2).

Domain tightening (ours, not in the paper): given the public ℓ, the records of D_ℓ have values
at most ``U_ℓ = max_{i ≥ ℓ} u_i`` where ``u_i`` is the public bound of the values of level i
(``E^{-1}(lo_i)`` for a non-increasing E, :meth:`PrivacyFunction.level_upper`). M receives
``U_ℓ`` as its domain bound; with a scalar ``upper`` every ``u_i = U``.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from dpjax.prdp._noise import Stream
from dpjax._float64 import x64
from dpjax.prdp._args import check_common, check_upper
from dpjax.prdp.count import make_result, noisy_levels
from dpjax.prdp.domains import Partition, opaque, partition_records
from dpjax.prdp.result import PrDPResult
from dpjax.validation import check_finite_values

__all__ = ["framework", "select_epsilon_tau", "framework_ledger", "kept_upper", "level_upper_bounds"]


def select_epsilon_tau(noise: Stream, part: Partition, beta):
    """Part 1 of Algorithm 2: Algorithm 1 with ``E/2`` and ``β/2`` (stream 0); returns ℓ (0-based).

    Args:
      noise: the mechanism's :class:`dpjax.prdp._noise.Stream`.
      part: the records' :class:`dpjax.prdp.domains.Partition`.
      beta: failure probability.

    Returns:
      int32 ℓ, 0-based.
    """
    scales = jnp.where(part.floor > 0, 2.0 / jnp.where(part.floor > 0, part.floor, 1.0), 0.0)
    _, level = noisy_levels(noise, 0, part.counts(), scales, part.levels, beta / 2.0)
    return level


def framework_ledger(part: Partition, level):
    """Pure ε spent per level by one run: ``lo_i/2 + [i ≥ ℓ]·lo_ℓ/2``.

    Sequential composition of the two parts.

    Args:
      part: the records' :class:`dpjax.prdp.domains.Partition`.
      level: ℓ, 0-based.

    Returns:
      float64 per-level ε, shape (max_levels,).
    """
    idx = jnp.arange(part.floor.shape[0], dtype=jnp.int32)
    return part.floor / 2.0 + jnp.where(idx >= level, part.floor[level] / 2.0, 0.0)


def level_upper_bounds(upper, part: Partition):
    """Per-level public value bounds ``u_i`` (max_levels,): a scalar ``upper`` on every level.

    Args:
      upper: a scalar bound or per-level bounds.
      part: the records' :class:`dpjax.prdp.domains.Partition`.

    Returns:
      float64 bounds of shape (max_levels,).
    """
    upper = jnp.asarray(upper, jnp.float64)
    return jnp.broadcast_to(upper, part.floor.shape)


def kept_upper(upper, part: Partition):
    """``U_ℓ = max_{i ≥ ℓ, i < L} u_i`` for every ℓ (max_levels,): the public bound of D_ℓ's values.

    Args:
      upper: a scalar bound or per-level bounds.
      part: the records' :class:`dpjax.prdp.domains.Partition`.

    Returns:
      float64 bounds of shape (max_levels,).
    """
    bounds = jnp.where(part.floor > 0, level_upper_bounds(upper, part), 0.0)
    return jax.lax.cummax(bounds, reverse=True)


@partial(jax.jit, static_argnames=("mechanism", "max_levels"))
def _framework(key, values, budgets, mask, eps_min, eps_max, beta, upper, *, mechanism, max_levels):
    part = partition_records(budgets, mask, eps_min, eps_max, max_levels)
    noise = Stream(key)
    level = select_epsilon_tau(noise, part, jnp.float64(beta))
    weights = part.weight & (part.level >= level)
    bound = None if upper is None else kept_upper(upper, part)[level]
    estimate = mechanism(noise.key(1), opaque(values, None), weights, part.floor[level] / 2.0, beta / 2.0, bound)
    return make_result(estimate, level, part, framework_ledger(part, level))


@x64
def framework(
    key, values, budgets, mechanism, *, eps_min, eps_max, beta, upper=None, mask=None, max_levels=None
) -> PrDPResult:
    """E-PrDP release of any ε-DP mechanism (Algorithm 2).

    Args:
      key: a JAX PRNG key, consumed (split between the two parts).
      values: the records' data, any shape ``(n, ...)`` M understands; M alone reads it.
      budgets: ``E(r)`` per record, shape (n,), all ``≥ eps_min``.
      mechanism: ``M(key, values, weights, epsilon, beta, upper) -> estimate`` (any pytree),
        ε-DP under add/remove neighbours for every input size, reading only the records with
        ``weights`` True (it must not even depend on how many records are excluded).
        Called inside ``jit`` with traced ``epsilon = lo_ℓ/2``, ``beta/2`` and
        ``upper = U_ℓ`` (None when ``upper`` is None), traced under ``jax.enable_x64(True)``.
        Must be hashable (a function). An M that draws float64 noise with ``jax.random``
        lowers only where the caller's own ``jit`` runs with x64 on (wrap the call in
        ``jax.enable_x64(True)``); the built-in mechanisms draw from 32-bit words and lower
        either way.
      eps_min: ε̌, the least budget of the whole domain (public, data-independent).
      eps_max: ε̂, the cap of the budget function (public).
      beta: failure probability in (0, 1), split β/2 + β/2.
      upper: optional public bound of the values: a scalar U, or per-level bounds ``u_i``.
      mask: optional boolean (n,): False marks padding.
      max_levels: static level count, needed only when ``eps_min``/``eps_max`` are traced.

    Returns:
      :class:`~dpjax.prdp.PrDPResult` with M's output as ``estimate``.

    Raises:
      ValueError: ``key`` not a single Threefry key; ``eps_min`` or ``eps_max`` not a positive
        scalar, or ``eps_max < eps_min``; ``beta`` outside (0, 1); ``budgets`` not a finite,
        non-empty 1-D array or with an entry below ``eps_min``; ``mask`` not a boolean array of the
        budgets' shape; ``max_levels`` missing for traced ``eps_min``/``eps_max``, not an integer in
        [1, 64], or below L; a budget range needing more than 64 levels; ``values`` not finite or
        without one row per record; an invalid ``upper``.

    References:
      Chen, Sun, Xu, Dong, "A General Framework for Per-record Differential Privacy", SIGMOD 2025
      (PACMMOD 3(6), article 287), §6 and Algorithm 2.
    """
    key, max_levels = check_common(key, budgets, mask, eps_min, eps_max, beta, max_levels)
    check_finite_values("values", values)
    if jnp.shape(values)[:1] != jnp.shape(budgets):
        raise ValueError(
            f"values must have one row per record ({jnp.shape(budgets)[0]}), got shape {jnp.shape(values)}"
        )
    if upper is not None:
        upper, _ = check_upper(upper, max_levels)
    return _framework(
        key, values, budgets, mask, eps_min, eps_max, beta, upper, mechanism=mechanism, max_levels=max_levels
    )
