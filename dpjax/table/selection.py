"""Private partition selection: a group is released when its noisy unit count clears a threshold.

Desfontaines, Voss, Gipson & Mandayam, "Differentially private partition selection", PoPETs
2022 (§3, thresholding; as PipelineDP's Laplace/Gaussian thresholding). The selection count
of a group is its number of units (after bounding) plus the release kernel's noise at scale
``t`` (sensitivity 1); the group is kept when that exceeds ``τ``.

Privacy. The candidates are the groups with a kept row after bounding (:func:`candidates`). Let D, D'
differ by one unit, which is in at most K candidate groups. Groups present in both
tables see their selection counts move by at most 1 (composed in the release's PLD,
:mod:`dpjax.table.calibration`). A group present only in D (the unit is its only one) is
released with probability ``p = Pr[1 + Z > τ]``, independently of every other noise; nothing of it
appears in D's neighbour. Write D's output law as ``P = (1 − a)·P₁ + a·P₂``, ``a ≤ K·p`` the
probability that one of those groups is released, ``P₁`` the law of the common groups' output (the
law of D' run on D's common groups), ``Q`` the law on D'. Then
``δ_{P‖Q}(ε) ≤ δ_{P₁‖Q}(ε) + a``, and on the set ``S* = {Q > e^ε(1 − a)P₁}`` that attains
``δ_{Q‖P}(ε) = Q(S*) − e^ε(1 − a)P₁(S*) ≤ δ_{Q‖P₁}(ε) + a·e^ε P₁(S*)`` with
``e^ε P₁(S*) < Q(S*)/(1 − a)``:
``δ_{Q‖P}(ε) ≤ δ_{Q‖P₁}(ε) + a/(1 − a)``. So the selection adds ``δ_sel = K·p/(1 − K·p)`` to the
composition's δ at every ε — no e^ε factor — with ``p`` the kernel's exact tail. The noisy count that is
thresholded is the release's noisy unit count: where ``count_units()`` is released, the released values
themselves (one measurement, paid once).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.table.calibration import kernel_key, remembered

__all__ = ["candidates", "threshold", "selection_delta", "tail_point"]


def candidates(agg: dict) -> np.ndarray:
    """The indices of the selection's candidate groups.

    Exactly those with at least one kept row after contribution bounding (``agg["units"] > 0``). A group seen in
    the data whose rows were all dropped by the bounding is no candidate: else one unit with rows in many groups
    would add a chance of release to each of them, beyond the ``max_groups_per_unit`` the privacy argument
    counts.

    Args:
      agg: the integer aggregates (:func:`dpjax.table.aggregate.aggregate`).

    Returns:
      int64 array of group indices, increasing.
    """
    return np.flatnonzero(agg["units"] > 0)


@jax.jit
def _log_sf(kernel, x):
    return kernel.noise_log_sf(x)


def _log_tail(kernel, x):
    """``log Pr[Z > x]`` of the kernel's noise, float64 (``x`` a number or an array). One compiled
    program per shape (a number, the search's grid), reused by every release of the kernel class
    (run op by op, a first release would compile each of the tail's operations per shape)."""
    with jax.enable_x64(True):
        return np.asarray(_log_sf(kernel, jnp.asarray(x, jnp.float64)), np.float64)


def threshold(kernel, max_groups: int, delta_share: float) -> float:
    """The smallest threshold ``τ`` (to 1e-9 relative) with ``a/(1 − a) ≤ delta_share``, ``a = K · Pr[1 + Z > τ]``.

    A doubling bracket, then grids of 1024 points (:func:`tail_point`). A pure function of its arguments:
    remembered, so repeated releases of one configuration search once.

    Args:
      kernel: the unit count's noise (a kernel at its calibrated scale).
      max_groups: ``K``, the contribution bound.
      delta_share: the δ the selection may spend.

    Returns:
      ``τ``, a float.

    References:
      Desfontaines, Voss, Gipson, Mandayam, "Differentially private partition selection", PoPETs 2022, §3.
    """
    key = ("threshold", *kernel_key(kernel), int(max_groups), float(delta_share))
    return remembered(key, lambda: 1.0 + tail_point(kernel, math.log(delta_share / (1 + delta_share) / max_groups)))


def tail_point(kernel, log_mass: float) -> float:
    """The smallest ``x ≥ 0`` (to 1e-9 relative) with ``log Pr[Z > x] ≤ log_mass`` for the kernel's noise ``Z``.

    Args:
      kernel: a kernel.
      log_mass: the tail mass's logarithm (negative).

    Returns:
      ``x``, a float.
    """
    hi = 1.0
    while float(_log_tail(kernel, hi)) > log_mass:
        hi *= 2
    lo = 0.0
    while hi - lo > 1e-9 * hi:
        grid = np.linspace(lo, hi, 1025)
        ok = np.flatnonzero(_log_tail(kernel, grid) <= log_mass)[0]  # the tail decreases; hi is always ok
        lo, hi = grid[max(ok - 1, 0)], grid[ok]
    return hi


def selection_delta(kernel, tau: float, max_groups: int) -> float:
    """``δ_sel = a/(1 − a)``, ``a = K · Pr[1 + Z > τ]``: what selection adds to the release's δ.

    Remembered, like the threshold.

    Args:
      kernel: the unit count's noise.
      tau: the threshold.
      max_groups: ``K``, the contribution bound.

    Returns:
      ``δ_sel``, a float (``inf`` when ``a ≥ 1``).

    References:
      Desfontaines, Voss, Gipson, Mandayam, "Differentially private partition selection", PoPETs 2022, §3
      (the module docstring has the argument).
    """
    key = ("selection_delta", *kernel_key(kernel), float(tau), int(max_groups))

    def compute():
        a = max_groups * math.exp(float(_log_tail(kernel, tau - 1.0)))
        return a / (1 - a) if a < 1 else math.inf

    return remembered(key, compute)
