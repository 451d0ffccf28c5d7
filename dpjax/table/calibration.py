"""One budget for the whole release, calibrated on the exact composed PLD.

Every noisy component of the release (:mod:`dpjax.table.statistics`) and the selection's noisy
unit counts use the same kernel at scale ``t · s`` for a component of per-group sensitivity
``s`` (equal noise-to-sensitivity ratio ``t``). Removing one unit moves at most ``K·m`` elements
of a component (``K`` groups, multiplicity ``m``), each by at most ``s``, so the release is
dominated by the composition of ``K·m`` runs of ``kernel(t·s)`` at sensitivity ``s`` per
component (plus ``K`` runs at sensitivity 1 for the selection). For a continuous kernel a run of
``kernel(t·s)`` at sensitivity ``s`` has the same PLD as ``kernel(t)`` at sensitivity 1, so the
whole release is ``N = K·(Σ m + selection)`` runs of ``kernel(t)``: one batched query of
``accounting.get_epsilon`` per refinement round. Integer-valued kernels (not scale-invariant)
compose one PLD per distinct sensitivity (``accounting.pld(...).self_compose(...).compose(...)``).

``t`` is the smallest scale whose exact ε at the composition's δ share is ≤ the requested ε,
found to a relative ε gap of 1e-3 (the reported ε is the accountant's, pessimistic, ≤ the
request and ≥ (1 − 1e-3) of it).
"""

from __future__ import annotations

import math

import jax
import numpy as np

import accounting
from dpjax.kernels import AdditiveMechanism, by_name

__all__ = ["kernel_of", "Calibration", "calibrate"]

#: relative ε gap the calibration stops at
TOLERANCE = 1e-3


def kernel_of(noise):
    """A factory ``scale -> kernel`` for ``noise``: a built-in name, a kernel class of the protocol,
    or a kernel instance (whose scale is replaced)."""
    if isinstance(noise, str):
        try:
            cls = by_name(noise)
        except ValueError as exc:
            raise ValueError(f"noise: {exc}") from None
        return lambda t: cls(**{cls.scale_name: t})
    if isinstance(noise, type) and issubclass(noise, AdditiveMechanism):
        return lambda t: noise(**{noise.scale_name: t})
    if isinstance(noise, AdditiveMechanism):
        return lambda t: noise.with_scale(np.asarray(t, float))
    raise ValueError(f"noise must be 'gaussian', 'laplace', 'discrete_laplace', 'discrete_gaussian', a kernel "
                     f"class or a kernel instance (dpjax.kernels), got {noise!r}")


class Calibration:
    """The calibrated ratio ``t`` and the exact privacy of the composition it gives."""

    def __init__(self, ratio, epsilon, delta):
        self.ratio, self.epsilon, self.delta = float(ratio), float(epsilon), float(delta)


def _runs(components, max_groups, selection):
    """``{sensitivity: number of runs}`` of the release's components."""
    runs = {}
    for c in components:
        runs[float(c.sensitivity)] = runs.get(float(c.sensitivity), 0) + max_groups * c.multiplicity
    if selection:
        runs[1.0] = runs.get(1.0, 0) + max_groups
    return runs


def _epsilons(make, runs, ratios, delta, discrete):
    """The exact ε (at ``delta``; pure ε when ``delta`` is 0) of the release at each ratio."""
    ratios = np.asarray(ratios, float)
    if not discrete:
        n = sum(runs.values())
        if delta == 0:
            return np.array([float(accounting.pld(make(r)).self_compose(n).pure_epsilon()) for r in ratios])
        with jax.enable_x64(True):
            return np.asarray(accounting.get_epsilon(make(ratios), delta, count=n, progress=False), float)
    out = []
    for r in ratios:
        total = None
        for s, n in runs.items():
            p = accounting.pld(make(r * s), sensitivity=s).self_compose(n)
            total = p if total is None else total.compose(p)
        out.append(float(total.pure_epsilon() if delta == 0 else total.get_epsilon_for_delta(delta)))
    return np.array(out)


def calibrate(make, components, max_groups: int, selection: bool, epsilon: float, delta: float,
              discrete: bool) -> Calibration:
    """The smallest ratio ``t`` with composed ε(δ) ≤ ``epsilon`` (within :data:`TOLERANCE`)."""
    runs = _runs(components, max_groups, selection)
    n = sum(runs.values())
    guess = max(math.sqrt(n * 2 * math.log(1.25 / delta)) if delta > 0 else 0.0, n) / epsilon
    lo, hi = guess / 64, guess * 64
    grid = 24 if discrete else 48
    for _ in range(8):
        ratios = np.geomspace(lo, hi, grid)
        eps = _epsilons(make, runs, ratios, delta, discrete)
        ok = np.flatnonzero(np.isfinite(eps) & (eps <= epsilon))
        if not len(ok):
            lo, hi = hi, hi * 4096
            continue
        i = ok[0]
        if i == 0:
            lo, hi = lo / 4096, lo
            continue
        best, best_eps = ratios[i], eps[i]
        if best_eps >= epsilon * (1 - TOLERANCE):
            return Calibration(best, best_eps, delta)
        lo, hi = ratios[i - 1], ratios[i]
        grid = 8 if discrete else 16
    raise ValueError(f"epsilon: could not calibrate the noise to epsilon={epsilon}, delta={delta} "
                     f"(last ε {best_eps} at ratio {best})")
