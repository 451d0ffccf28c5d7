"""Per-record privacy ledger for PrDP releases (Chen, Sun, Xu, Dong, SIGMOD 2025).

Per-record DP is pure DP per record: a release is E_q-PrDP when it spends at most E_q(r) on
record r, and releases on the same records compose sequentially, record by record:
``Σ_q E_q(r)`` (Lemma 3.10). The PrDP mechanisms calibrate everything to the floor
``lo_i = 2^{i−1}ε̌`` of the record's privacy level, so composition is tracked per level.

:class:`PrDPLedger` holds the records' *total* budget function through its range
``[ε̌, ε̂]`` (its levels and floors). Each release is granted a fraction ``c`` of every
record's budget: it runs on budgets ``c·E(r)`` over ``[c·ε̌, c·ε̂]`` (:class:`PrDPShare` gives
both). A record of ledger level i (``E(r) ∈ (lo_i, 2lo_i]``) then has release budget
``fl(c·E(r)) ≤ 2^i·fl(c·ε̌)`` (rounding is monotone and scaling by 2^i exact), so it lies in
release level ≤ i and the release spends at most the release's floor
``2^{min(i, L_c−1)}·fl(c·ε̌)`` on it — every mechanism of :mod:`dpjax.prdp` spends at most the
floor of a record's level (its ``level_epsilon``). The ledger charges that bound per level
*before* the release and refuses (``ValueError``, nothing recorded) a release that would take
any level past its floor ``lo_i``, the least total budget of its records: no record of the
domain is ever charged more than E(r). The check is over the domain, not the data, so a
refusal reveals nothing about the records.

Charges are the releases' guarantees, the supremum over their outputs. A framework release
realizes less on levels below its ℓ (``lo_i/2``, the ``level_epsilon`` of its result);
:meth:`PrDPLedger.verify` checks a result against its grant.
"""

from __future__ import annotations

import dataclasses
import threading

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.prdp.domains import level_floors, num_levels
from dpjax.validation import check_positive, check_probability, is_traced

__all__ = ["PrDPLedger", "PrDPShare"]


def _grid(eps_min: float, eps_max: float):
    """(L, floors) of a budget range, in float64 with exact powers of two."""
    with jax.enable_x64(True), jax.ensure_compile_time_eval():
        levels = int(num_levels(jnp.float64(eps_min), jnp.float64(eps_max)))
        floors = np.asarray(level_floors(jnp.float64(eps_min), levels))
    return levels, floors


@dataclasses.dataclass(frozen=True)
class PrDPShare:
    """A granted release: run it on :meth:`budgets` with ``eps_min``/``eps_max`` (the share of E).

    Returned by :meth:`PrDPLedger.record`.

    Attributes:
      fraction: the fraction c of every record's budget granted.
      eps_min: the release's lowest budget ``c·ε̌``.
      eps_max: the release's highest budget ``c·ε̂``.
      charge: pure ε reserved on each of the ledger's levels.
      label: the caller's label of the release.
    """

    fraction: float
    eps_min: float
    eps_max: float
    charge: np.ndarray  # pure ε reserved on each of the ledger's levels
    label: str

    def budgets(self, budgets) -> np.ndarray:
        """The release's budgets from the records' total budgets.

        Args:
          budgets: the records' total budgets E(r) (concrete array).

        Returns:
          float64 ``c·E(r)``.

        Raises:
          ValueError: traced ``budgets`` (inside ``jit``).
        """
        if is_traced(budgets):
            raise ValueError("budgets: scale concrete budgets (outside jit)")
        return self.fraction * np.asarray(budgets, np.float64)


class PrDPLedger:
    """Pure ε spent per privacy level by PrDP releases on one set of records.

    >>> E = dpjax.prdp.PrivacyFunction.inverse(1e12)
    >>> ledger = accounting.PrDPLedger(eps_min=E.eps_min, eps_max=E.eps_max)
    >>> share = ledger.record(0.5, label="sum")      # half of every record's budget
    >>> res = dpjax.prdp.sum(key, x, share.budgets(E(x)), eps_min=share.eps_min,
    ...                      eps_max=share.eps_max, beta=0.1, upper=1e12)
    >>> ledger.verify(res); ledger.remaining          # floors − spent, per level
    >>> ledger.record(0.75)                           # ValueError: would exceed; nothing recorded

    Thread-safe: a lock makes each :meth:`record` (check and charge) one indivisible step, so
    concurrent grants can never together take a level past its floor, and reads see the
    ledger between grants.

    Args:
      eps_min: the records' lowest total budget ε̌ (a concrete positive scalar).
      eps_max: their highest total budget ε̂ (≥ ``eps_min``).

    Raises:
      ValueError: ``eps_min`` or ``eps_max`` traced, not a scalar or not positive;
        ``eps_max < eps_min``.

    References:
      Chen, Sun, Xu, Dong, "A General Framework for Per-record Differential Privacy", SIGMOD 2025
      (PACMMOD 3(6), article 287), Lemma 3.10 (sequential composition per record).
    """

    def __init__(self, *, eps_min, eps_max):
        for name, x in (("eps_min", eps_min), ("eps_max", eps_max)):
            if is_traced(x) or np.ndim(x) != 0:
                raise ValueError(f"{name} must be a concrete scalar")
            check_positive(name, x)
        if float(eps_max) < float(eps_min):
            raise ValueError(f"eps_max must be >= eps_min, got {eps_max} < {eps_min}")
        self.eps_min = float(eps_min)
        self.eps_max = float(eps_max)
        self.num_levels, self.floors = _grid(self.eps_min, self.eps_max)
        self._spent = np.zeros(self.num_levels)
        self._shares: list[PrDPShare] = []
        self._lock = threading.Lock()

    @property
    def spent(self) -> np.ndarray:
        """Pure ε charged so far to each level ``i = 1 … L`` (a copy).

        Returns:
          float64 array of shape ``(num_levels,)``.
        """
        with self._lock:
            return self._spent.copy()

    @property
    def remaining(self) -> np.ndarray:
        """What every record of each level has left, at least.

        Returns:
          ``lo_i − spent_i`` per level, shape ``(num_levels,)``.
        """
        with self._lock:
            return self.floors - self._spent

    @property
    def releases(self) -> tuple[PrDPShare, ...]:
        """The shares granted so far, in order.

        Returns:
          A tuple of :class:`PrDPShare`.
        """
        with self._lock:
            return tuple(self._shares)

    def charge(self, fraction) -> np.ndarray:
        """Per-level pure ε of a release run on ``fraction·E``, without recording it.

        Args:
          fraction: the fraction c in (0, 1] of every record's budget.

        Returns:
          The release's floors mapped onto the ledger's levels, shape ``(num_levels,)``.

        Raises:
          ValueError: ``fraction`` outside (0, 1].
        """
        check_probability("fraction", fraction)
        eps_min = float(fraction) * self.eps_min
        levels, floors = _grid(eps_min, float(fraction) * self.eps_max)
        return floors[np.minimum(np.arange(self.num_levels), levels - 1)]

    def would_exceed(self, fraction) -> bool:
        """Whether granting a fraction of every budget would take some level past its floor.

        Args:
          fraction: the fraction c in (0, 1].

        Returns:
          True if some level would exceed its floor.

        Raises:
          ValueError: ``fraction`` outside (0, 1].
        """
        charge = self.charge(fraction)
        with self._lock:
            return bool(np.any(self._spent + charge > self.floors))

    def record(self, fraction=1.0, *, label: str = "") -> PrDPShare:
        """Grant a fraction of every record's budget to the next release.

        Fractions that are sums of powers of two (1/2, 1/4, 3/4 …) compose exactly; others are
        compared in float64 with no tolerance (the check errs on refusing).

        Args:
          fraction: the fraction c in (0, 1].
          label: a label kept with the share.

        Returns:
          The release's :class:`PrDPShare`.

        Raises:
          ValueError: ``fraction`` outside (0, 1], or a level would exceed its floor (nothing is
            recorded).
        """
        charge = self.charge(fraction)
        with self._lock:
            over = self._spent + charge > self.floors
            if over.any():
                i = int(np.argmax(over))
                raise ValueError(
                    f"fraction: granting {float(fraction):g} of every budget would spend "
                    f"{self._spent[i] + charge[i]:.6g} on level {i + 1} (floor lo = {self.floors[i]:.6g}, the least "
                    f"budget of its records); {int(over.sum())} level(s) would be over budget. The release was "
                    "refused and nothing was recorded"
                )
            share = PrDPShare(
                float(fraction), float(fraction) * self.eps_min, float(fraction) * self.eps_max, charge, label
            )
            self._spent = self._spent + charge
            self._shares.append(share)
            return share

    def verify(self, result) -> None:
        """Check a :class:`dpjax.prdp.PrDPResult` (batched or not) against a recorded share.

        Its level grid must be a granted share's (``eps_min``/``eps_max``), and on every level
        its realized ``level_epsilon`` must stay within the level's floor and within the charge
        recorded for it (acceptance A2).

        Args:
          result: a :class:`dpjax.prdp.PrDPResult`.

        Raises:
          ValueError: the result's budget range is no recorded share's, or a level was charged more
            than its floor or than the share's charge.
        """
        eps_min = np.unique(np.asarray(result.eps_min, np.float64))
        eps_max = np.unique(np.asarray(result.eps_max, np.float64))
        share = next(
            (s for s in self.releases if eps_min.tolist() == [s.eps_min] and eps_max.tolist() == [s.eps_max]), None
        )
        if share is None:
            raise ValueError(f"result: its budget range [{eps_min}, {eps_max}] is not a share recorded on this ledger")
        spent = np.asarray(result.level_epsilon, np.float64)
        floor = np.asarray(result.level_floor, np.float64)
        if np.any(spent > floor):
            raise ValueError("result: a level was charged more than its floor (acceptance A2 fails)")
        levels = min(spent.shape[-1], self.num_levels)
        if np.any(spent[..., :levels] > share.charge[:levels]):
            raise ValueError("result: a level was charged more than the ledger recorded for its share")
