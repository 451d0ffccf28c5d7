"""The per-step privacy odometer of a DP-SGD training loop."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp

from accounting._numerics import x64
from accounting.accountant import Accountant
from accounting.dpsgd.epsilon import _validate_setting
from accounting.dpsgd.noise import _noise, _rdp_curve, step_mechanism
from accounting.rdp import RDP_ORDERS, rdp_to_epsilon
from dpjax.validation import check_int, check_positive, check_probability

__all__ = ["DpsgdAccountant"]


class DpsgdAccountant:
    """The privacy odometer of a DP-SGD training loop: call :meth:`step` once per noisy update.

    >>> acc = DpsgdAccountant(noise_multiplier=1.1, sampling_prob=256 / 60000, delta=1e-5, epsilon_budget=3.0)
    >>> for t in range(steps):
    ...     eps = acc.step()        # ValueError (nothing recorded) once the budget would be exceeded

    Gaussian and Laplace noise go through :class:`accounting.Accountant` (exact composition by
    count); a step with another noise multiplier or rate (a schedule)
    is recorded as its own kind and composed exactly. The discrete Gaussian adds its per-step
    Rényi bound. ``steps`` counts noisy updates (logical batches), not micro-batches.

    Thread-safe: a lock makes each :meth:`step` (check, record, step count) one indivisible
    update and every read see a state between steps.

    Args:
      noise_multiplier: the noise multiplier z of each step.
      sampling_prob: the Poisson sampling probability of each step.
      delta: the δ at which ε is reported.
      epsilon_budget: the largest ε allowed, or None (no budget).
      mechanism: the noise kernel class (None: the Gaussian).
      value_discretization_interval: the loss-grid step, or None (adaptive).

    Raises:
      ValueError: an argument is out of range, or ``mechanism`` is not a supported kernel.

    References:
      Abadi et al., "Deep Learning with Differential Privacy", CCS 2016.
    """

    def __init__(
        self,
        noise_multiplier,
        sampling_prob,
        *,
        delta,
        epsilon_budget=None,
        mechanism=None,
        value_discretization_interval=None,
    ):
        self.kind = _noise(mechanism)
        self._mechanism = mechanism
        _validate_setting(noise_multiplier, sampling_prob, 1)
        check_probability("delta", delta, high_open=True)
        if epsilon_budget is not None:
            check_positive("epsilon_budget", epsilon_budget, allow_inf=True)
        self.noise_multiplier = float(noise_multiplier)
        self.sampling_prob = float(sampling_prob)
        self.delta = float(delta)
        self.epsilon_budget = None if epsilon_budget is None else float(epsilon_budget)
        self.steps = 0
        self._lock = threading.RLock()
        if self.kind.kind == "discrete_gaussian":
            self._rdp = {}  # (z, sampling_prob) -> count
        else:
            self._acc = Accountant(
                epsilon_budget=epsilon_budget, delta=delta, value_discretization_interval=value_discretization_interval
            )

    @x64
    def _rdp_eps(self, counts, delta):
        total = sum(_rdp_curve(self.kind, jnp.asarray(z), jnp.asarray(prob)) * c for (z, prob), c in counts.items())
        return float(rdp_to_epsilon(RDP_ORDERS, total, delta))

    def step(self, count=1, *, noise_multiplier=None, sampling_prob=None) -> float:
        """Record ``count`` steps (at this noise multiplier / rate unless overridden); returns ε spent
        at ``delta``. Raises ``ValueError`` and records nothing if the budget would be exceeded.

        Args:
          count: the number of steps to record (>= 1).
          noise_multiplier: this step's noise multiplier (default: the accountant's).
          sampling_prob: this step's sampling probability (default: the accountant's).

        Returns:
          ε spent at ``delta`` after these steps.

        Raises:
          ValueError: an argument is out of range, or the budget would be exceeded (nothing is recorded).
        """
        count = check_int("count", count, minimum=1)
        z = (
            self.noise_multiplier
            if noise_multiplier is None
            else float(check_positive("noise_multiplier", noise_multiplier))
        )
        sampling_prob = (
            self.sampling_prob if sampling_prob is None else float(check_probability("sampling_prob", sampling_prob))
        )
        with self._lock:
            if self.kind.kind != "discrete_gaussian":
                with jax.enable_x64(True):
                    mech = step_mechanism(jnp.asarray(z, jnp.float64), self._mechanism)
                eps = self._acc.record(mech, sampling_prob=sampling_prob, count=count)
            else:
                counts = dict(self._rdp)
                counts[(z, sampling_prob)] = counts.get((z, sampling_prob), 0) + count
                eps = self._rdp_eps(counts, self.delta)
                if self.epsilon_budget is not None and eps > self.epsilon_budget:
                    raise ValueError(
                        f"epsilon_budget: this step would bring ε to {eps:.6g} > budget "
                        f"{self.epsilon_budget:.6g} (δ={self.delta:g}); it was refused and nothing was recorded"
                    )
                self._rdp = counts
            self.steps += count
            return eps

    def epsilon(self, delta=None) -> float:
        """ε spent so far at ``delta`` (default: the accountant's δ).

        Args:
          delta: δ, in [0, 1); None for the accountant's.

        Returns:
          ε spent so far (0.0 before any step).

        Raises:
          ValueError: ``delta`` is out of range.
        """
        d = self.delta if delta is None else float(check_probability("delta", delta, high_open=True))
        with self._lock:
            if self.steps == 0:
                return 0.0
            if self.kind.kind == "discrete_gaussian":
                return self._rdp_eps(self._rdp, d)
            return self._acc.spent_epsilon(d)

    def remaining_steps(self) -> int | None:
        """Steps at the current noise multiplier and rate left within the budget (None without one);
        a count whose composition outgrows the largest FFT length counts as not fitting, so the
        answer may then be below the truth, never above."""
        if self.epsilon_budget is None:
            return None
        with self._lock:
            lo, hi = 0, 1
            while self._would_fit(hi):
                lo, hi = hi, hi * 2
                if hi > 10**7:
                    return lo
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if self._would_fit(mid) else (lo, mid)
            return lo

    def _would_fit(self, count) -> bool:
        if self.kind.kind == "discrete_gaussian":
            counts = dict(self._rdp)
            key = (self.noise_multiplier, self.sampling_prob)
            counts[key] = counts.get(key, 0) + count
            return self._rdp_eps(counts, self.delta) <= self.epsilon_budget
        with jax.enable_x64(True):
            mech = step_mechanism(jnp.asarray(self.noise_multiplier, jnp.float64), self._mechanism)
        try:
            return not self._acc.would_exceed(mech, sampling_prob=self.sampling_prob, count=count)
        except ValueError as err:
            if "FFT" not in str(err):
                raise
            return False
