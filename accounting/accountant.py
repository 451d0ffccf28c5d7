"""A small stateful privacy odometer over PLD composition."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from accounting._pld import DEFAULT_DISCRETIZATION, PrivacyLossDistribution, pld
from dpjax.validation import check_int, check_positive, check_probability
from dpjax.mechanism import Mechanism

__all__ = ["Accountant", "Release"]


@dataclasses.dataclass(frozen=True)
class Release:
    """One recorded entry: ``count`` runs of ``mechanism`` on a query of ``sensitivity``."""

    mechanism: Mechanism
    sensitivity: float
    count: int
    sampling_prob: float


class Accountant:
    """Records releases and reports the privacy spent, refusing what would exceed a budget.

    >>> acc = Accountant(epsilon_budget=3.0, delta=1e-5)
    >>> acc.record(dpjax.Gaussian(sigma=2.0), sensitivity=1.0, count=4)
    >>> acc.spent_epsilon()          # ε at the default δ
    >>> acc.record(...)              # ValueError if ε would exceed the budget; nothing recorded

    Composition is exact (pessimistic PLD, one FFT per record); single mechanisms only
    (no batched parameters).
    """

    def __init__(self, *, epsilon_budget=None, delta=None, value_discretization_interval=DEFAULT_DISCRETIZATION):
        if epsilon_budget is not None:
            check_positive("epsilon_budget", epsilon_budget, allow_inf=True)
            if delta is None:
                raise ValueError("delta: a budget in ε needs the δ at which it is measured")
        if delta is not None:
            check_probability("delta", delta, high_open=True)
        check_positive("value_discretization_interval", value_discretization_interval)
        self.epsilon_budget = None if epsilon_budget is None else float(epsilon_budget)
        self.delta = None if delta is None else float(delta)
        self.value_discretization_interval = float(value_discretization_interval)
        self._pld: PrivacyLossDistribution | None = None
        self._releases: list[Release] = []

    @property
    def releases(self) -> tuple[Release, ...]:
        return tuple(self._releases)

    @property
    def pld(self) -> PrivacyLossDistribution | None:
        """The composed PLD of everything recorded (``None`` before the first record)."""
        return self._pld

    def _candidate(self, mech, sensitivity, count, sampling_prob):
        if not isinstance(mech, Mechanism):
            raise ValueError(f"mech must be a dpjax Mechanism, got {type(mech).__name__}")
        if mech.batch_shape != ():
            raise ValueError(f"mech: the accountant records single mechanisms, got batch shape {mech.batch_shape}")
        check_positive("sensitivity", sensitivity)
        count = check_int("count", count, minimum=1)
        check_probability("sampling_prob", sampling_prob)
        step = pld(mech, sensitivity=sensitivity, sampling_prob=sampling_prob,
                   value_discretization_interval=self.value_discretization_interval).self_compose(count)
        new = step if self._pld is None else self._pld.compose(step)
        return new, Release(mech, float(sensitivity), count, float(sampling_prob))

    def _epsilon_of(self, p, delta):
        d = self.delta if delta is None else delta
        if d is None:
            raise ValueError("delta: give a δ (here or in Accountant(delta=...))")
        return float(np.asarray(p.get_epsilon_for_delta(d)))

    def would_exceed(self, mech, *, sensitivity=1.0, count=1, sampling_prob=1.0) -> bool:
        """True if recording this release would take ε past the budget."""
        if self.epsilon_budget is None:
            return False
        new, _ = self._candidate(mech, sensitivity, count, sampling_prob)
        return self._epsilon_of(new, None) > self.epsilon_budget

    def record(self, mech, *, sensitivity=1.0, count=1, sampling_prob=1.0) -> float:
        """Record ``count`` runs of ``mech``; returns the ε spent so far (at the budget's δ).

        Raises ``ValueError`` (and records nothing) if the budget would be exceeded.
        """
        new, rel = self._candidate(mech, sensitivity, count, sampling_prob)
        eps = self._epsilon_of(new, None) if self.delta is not None else math.nan
        if self.epsilon_budget is not None and eps > self.epsilon_budget:
            raise ValueError(
                f"epsilon_budget: this release would bring ε to {eps:.6g} > budget {self.epsilon_budget:.6g} "
                f"(δ={self.delta:g}); it was refused and nothing was recorded"
            )
        self._pld, self._releases = new, self._releases + [rel]
        return eps

    def spent_epsilon(self, delta=None) -> float:
        """ε spent so far at ``delta`` (default: the budget's δ); 0 before any release."""
        if self._pld is None:
            return 0.0
        return self._epsilon_of(self._pld, delta)

    def spent_delta(self, epsilon) -> float:
        """δ spent so far at ``epsilon``."""
        check_positive("epsilon", epsilon, allow_zero=True)
        if self._pld is None:
            return 0.0
        return float(np.asarray(self._pld.get_delta_for_epsilon(epsilon)))

    def remaining_epsilon(self, delta=None) -> float:
        """Budget minus spent ε (``inf`` without a budget)."""
        if self.epsilon_budget is None:
            return math.inf
        return self.epsilon_budget - self.spent_epsilon(delta)
