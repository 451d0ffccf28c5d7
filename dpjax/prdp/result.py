"""The result of a PrDP release: the estimate, ε_τ and ℓ, and the per-level privacy ledger."""

from __future__ import annotations

import jax.numpy as jnp

from dpjax.pytree import pytree_dataclass

__all__ = ["PrDPResult"]


@pytree_dataclass
class PrDPResult:
    """What a PrDP mechanism releases, plus the pure ε it spent on each privacy level.

    A pytree: it comes out of ``jit`` and ``vmap`` (every field then gains the batch axes).

    Attributes:
      estimate: the released answer (count, sum, max; a pytree for a user mechanism in
        :func:`dpjax.prdp.framework`).
      epsilon_tau: ``ε_τ = lo_ℓ = 2^{ℓ−1}ε̌``, the private estimate of ε_min(D) (released; for
        the naive baseline ε̌).
      level: ℓ, the selected level, 1-based as in the paper (the first "heavy" level).
      num_levels: ``L = ⌈log2(ε̂/ε̌)⌉``.
      level_floor: ``lo_i = 2^{i−1}ε̌`` for ``i = 1 … max_levels`` (0 on padded levels ``i > L``):
        the least budget of a record of level i.
      level_epsilon: the pure ε this release spent on a record of level i (0 on padded
        levels). Algorithm 1: ``lo_i``; Algorithm 2: ``lo_i/2`` for ``i < ℓ`` and
        ``lo_i/2 + lo_ℓ/2`` for ``i ≥ ℓ``; extension: ``sup v/cap_i = lo_i`` (sequential
        composition of the two parts).
      eps_min: ε̌, the lower end of the budget range the levels were built from.
      eps_max: ε̂, its upper end.
    """

    estimate: object
    epsilon_tau: jnp.ndarray
    level: jnp.ndarray
    num_levels: jnp.ndarray
    level_floor: jnp.ndarray
    level_epsilon: jnp.ndarray
    eps_min: jnp.ndarray
    eps_max: jnp.ndarray

    def within_floors(self):
        """True where no level was charged more than its floor (acceptance A2; batched like the fields).

        Since every record of level i has budget ``E(r) ≥ lo_i``, this is the check that
        no record was charged more than its own budget.

        Returns:
          A boolean array of the batch shape.
        """
        return jnp.all(self.level_epsilon <= self.level_floor, axis=-1)
