"""One budget for the whole release, split across its measurements, calibrated on the exact composed PLD.

Each noisy measurement of the release (:mod:`dpjax.table.statistics`, the selection's noisy unit count
among them) gets the kernel at scale ``t·v·s`` for a measurement of per-group sensitivity ``s``: a common
ratio ``t`` and a weight ``v`` per measurement, its share of the budget. :func:`split` chooses the weights
to minimise the statistics' total relative error at a fixed privacy cost (the rule is in its docstring and
docs/tables.md); the user's ``weights`` scale each statistic's error in it. Removing one unit moves at most
``K·m`` elements of a measurement (``K`` groups, multiplicity ``m``), each by at most ``s``, so the release is
dominated by the composition of ``K·m`` runs of ``kernel(t·v·s)`` at sensitivity ``s`` per measurement
(a quantile: ``K`` runs of the exponential mechanism at scale β = ``t·v·s``, each dominated by the
ε-bounded-range pair :class:`dpjax.BoundedRange` at ε = 2s/β, whatever the tier: it is drawn exactly).
For a continuous kernel a run of ``kernel(t·v·s)`` at sensitivity ``s`` has the PLD of ``kernel(t·v)`` at
sensitivity 1: one PLD per distinct weight, composed (``accounting.pld(...).self_compose(...).compose(...)``); one fused
``accounting.get_epsilon`` query when every weight is the same, or for Gaussian noise, whose composition is
the Gaussian of the summed ``μ²`` (one run of ``kernel(t/√(Σ K·m/v²))``). Integer-valued kernels (not
scale-invariant) compose one PLD per distinct (weight, sensitivity).

On the exact tier (``exact``) every run is the kernel's lattice mechanism ``kernel(t·s).exact_lattice()``
(:mod:`dpjax.exact.lattice`: the answer rounded to the lattice gℤ, integer noise at a scale rounded up),
accounted at its lattice sensitivity ⌈s/g⌉ (``ExactLattice.neighbour_pairs``): one PLD per distinct
sensitivity, as for integer-valued kernels — the privacy of the mechanism actually run, rounding included.
A continuous kernel's lattice search with several distinct sensitivities, or a Gaussian one, starts from
the float calibration (fast: one fused query per ratio): the lattice costs ≤ g/s relative in sensitivity
(g ≤ 2^-20 b for Laplace, 2^-11 σ for Gaussian), so the first lattice evaluation — one PLD per distinct
sensitivity; a discrete Gaussian one is accounted from its atoms, the dearest — usually meets the
tolerance.

``t`` is a scale whose exact ε at the composition's δ share is ≤ the requested ε and within a
relative gap of 1e-3 of it (the reported ε is the accountant's, pessimistic, ≤ the request and
≥ (1 − 1e-3) of it), found by a secant search on ``log ε(log t)`` from the pure-ε or Gaussian
estimate; a handful of nearby ratios, so the accountant compiles the programs of one or two
grid lengths only.
"""

from __future__ import annotations

import dataclasses
import math
import threading

import jax
import numpy as np

import accounting
from dpjax.bounded_range import BoundedRange
from dpjax.kernels import AdditiveMechanism, by_name

__all__ = [
    "kernel_of",
    "Calibration",
    "Run",
    "calibrate",
    "split",
    "noisy_max_epsilon",
    "has_pure_epsilon",
    "kernel_key",
    "remembered",
]

#: relative ε gap the calibration stops at
TOLERANCE = 1e-3


def kernel_of(noise):
    """A factory ``scale -> kernel`` for ``noise``.

    Args:
      noise: a built-in kernel name (:func:`dpjax.kernels.by_name`), a kernel class of the protocol, or a
        kernel instance (whose scale is replaced).

    Returns:
      ``make(scale)``, building the kernel at that scale.

    Raises:
      ValueError: ``noise`` an unknown name, or neither a name, a kernel class nor a kernel instance.
    """
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
    raise ValueError(
        f"noise must be 'gaussian', 'laplace', 'discrete_laplace', 'discrete_gaussian', a kernel "
        f"class or a kernel instance (dpjax.kernels), got {noise!r}"
    )


class Calibration:
    """The calibrated ratio ``t`` and the exact privacy of the composition it gives.

    Args:
      ratio: ``t``, the common noise-to-sensitivity ratio.
      epsilon: the composition's exact ε at ``delta``.
      delta: the composition's δ.
    """

    def __init__(self, ratio, epsilon, delta):
        self.ratio, self.epsilon, self.delta = float(ratio), float(epsilon), float(delta)


@dataclasses.dataclass(frozen=True)
class Run:
    """``count`` runs of one measurement: noise ``kernel(t·weight·sensitivity)`` on values of per-group sensitivity.

    Attributes:
      weight: ``v``, the measurement's share of the budget (:func:`split`).
      sensitivity: the per-group sensitivity ``s``.
      count: how many elements one unit moves (``K·m``).
      noisy_max: the exponential mechanism at that scale β on scores of that sensitivity Δ (report-noisy-max
        with Gumbel noise), accounted as the ε-bounded-range pair at ε = 2Δ/β.
    """

    weight: float
    sensitivity: float
    count: int
    noisy_max: bool = False


def noisy_max_epsilon(scale, sensitivity) -> float:
    """ε = 2Δ/β of the exponential mechanism at scale β on scores of sensitivity Δ.

    Its pure ε and its bounded range: a score moves by at most Δ either way, so the log-probability of a
    candidate moves within an interval of width 2Δ/β (:class:`dpjax.BoundedRange` accounts it).

    Args:
      scale: β, the mechanism's scale (its weights are ``exp(score/β)``).
      sensitivity: Δ, how far one unit moves a score.

    Returns:
      ε, a float.

    References:
      McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007. Durfee & Rogers, "Practical
      differentially private top-k selection with pay-what-you-get composition", NeurIPS 2019.
    """
    return 2.0 * float(sensitivity) / float(scale)


def split(measurements, max_groups: int, pure: bool) -> dict:
    """The weight ``v`` of each measurement (its noise-to-sensitivity ratio is ``t·v``) for the least total error.

    It minimises ``Σ c·(t·v·s̃)²`` (``c`` its loss coefficient, ``s̃`` its sensitivity relative to its values'
    size) at a fixed privacy cost: ``Σ n/(t·v)`` for pure-ε noise (``n = K·m`` runs), whose optimum is
    ``v ∝ (n/(c·s̃²))^(1/3)``; ``Σ n/(t·v)²`` for Gaussian noise (the composition of Gaussians is the Gaussian
    of the summed ``μ²``), ``v ∝ (n/(c·s̃²))^(1/4)``. The exponential mechanism counts as one run in both: its
    ε = 2/(t·v) is bounded-range, ε²/8 = 1/(2(t·v)²) of zCDP, as much as a Gaussian run's or a Laplace run's
    (ε = 1/(t·v), ε²/2) at the same ratio.

    Args:
      measurements: ``{name: (Component, c·s̃²)}`` (:meth:`dpjax.table.release.Request.measurements`).
      max_groups: the contribution bound ``K``.
      pure: whether the noise is pure-ε (else the Gaussian rule).

    Returns:
      ``{name: v}``, the largest weight 1.

    References:
      Cesar & Rogers, "Bounding, concentrating, and truncating: unifying privacy loss composition for data
      analytics", ALT 2021 (bounded range and zCDP).
    """
    power = 1 / 3 if pure else 1 / 4
    out = {}
    for name, (comp, loss) in measurements.items():
        out[name] = (max_groups * comp.multiplicity / loss) ** power
    top = max(out.values())
    return {name: v / top for name, v in out.items()}


def _group(runs, scale_invariant):
    """The runs grouped by what their PLD depends on: ``{(weight, sensitivity, noisy_max): count}`` (the
    sensitivity set to 1 for a scale-invariant kernel's additive runs and for the exponential mechanism, whose ε
    is 2/(t·v))."""
    out = {}
    for r in runs:
        key = (r.weight, 1.0 if scale_invariant or r.noisy_max else r.sensitivity, r.noisy_max)
        out[key] = out.get(key, 0) + r.count
    return out


def _pure_epsilon(make, scale, sensitivity, noisy_max, exact) -> float:
    """The pure ε of one run (an exponential mechanism's, or the kernel's at ``scale`` — on the exact tier its
    lattice's)."""
    if noisy_max:
        return noisy_max_epsilon(scale, sensitivity)
    kernel = make(scale)
    with jax.enable_x64(True):
        return float(np.asarray((kernel.exact_lattice() if exact else kernel).pure_epsilon(sensitivity)))


def _epsilons(make, runs, ratios, delta, discrete, exact=False):
    """The exact ε (at ``delta``; pure ε when ``delta`` is 0) of the release at each ratio ``t`` (on the exact
    tier: of the lattice mechanisms run)."""
    groups = _group(runs, not (discrete or exact))
    if delta == 0 and make(1.0).pure_epsilon is not None:  # pure ε composes by addition, exactly
        return np.array(
            [
                sum(n * _pure_epsilon(make, t * w * s, s, nm, exact) for (w, s, nm), n in groups.items())
                for t in np.asarray(ratios, float)
            ]
        )
    additive = [(w, s, n) for (w, s, nm), n in groups.items() if not nm]
    if not (discrete or exact) and len(additive) == len(groups) and delta > 0:
        probe = make(1.0)
        if len(additive) == 1:  # one ratio: the fused query of N runs
            ((w, _, n),) = additive
            with jax.enable_x64(True):
                return np.asarray(
                    accounting.get_epsilon(make(np.asarray(ratios, float) * w), delta, count=n, progress=False), float
                )
        if probe.gaussian_pld_mu is not None:  # Gaussians compose to the Gaussian of the summed μ²: one run
            eff = math.sqrt(sum(n / w**2 for w, _, n in additive))
            with jax.enable_x64(True):
                return np.asarray(
                    accounting.get_epsilon(make(np.asarray(ratios, float) / eff), delta, count=1, progress=False), float
                )
    out = []
    for t in np.asarray(ratios, float):
        total = None
        for (w, s, nm), n in groups.items():
            if nm:
                p = accounting.pld(BoundedRange(epsilon=np.float64(noisy_max_epsilon(t * w * s, s)))).self_compose(n)
            elif discrete or exact:
                kernel = make(t * w * s)
                p = accounting.pld(kernel.exact_lattice() if exact else kernel, sensitivity=s).self_compose(n)
            else:
                p = accounting.pld(make(t * w)).self_compose(n)
            total = p if total is None else total.compose(p)
        out.append(float(total.pure_epsilon() if delta == 0 else total.get_epsilon_for_delta(delta)))
    return np.array(out)


_CACHE: dict = {}
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 256


def kernel_key(kernel) -> tuple:
    """A hashable identity of a kernel: its class, pytree structure and the bytes of its leaves.

    Args:
      kernel: a kernel (any pytree).

    Returns:
      A tuple, usable as a dictionary key.
    """
    leaves = tuple(np.asarray(leaf).tobytes() for leaf in jax.tree_util.tree_leaves(kernel))
    return type(kernel), jax.tree_util.tree_structure(kernel), leaves


def remembered(key, compute):
    """``compute()``, remembered under ``key`` (thread-safe, the last 256 answers).

    For the pure functions of a release's configuration (its calibration, its selection threshold).

    Args:
      key: a hashable key that determines the answer.
      compute: a function of no argument computing it.

    Returns:
      The remembered or freshly computed answer.
    """
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
    if hit is None:
        hit = compute()
        with _CACHE_LOCK:
            if len(_CACHE) >= _CACHE_SIZE:
                _CACHE.pop(next(iter(_CACHE)))
            _CACHE[key] = hit
    return hit


def calibrate(make, runs, epsilon: float, delta: float, discrete: bool, exact: bool = False) -> Calibration:
    """The smallest ratio ``t`` with composed ε(δ) ≤ ``epsilon`` (within :data:`TOLERANCE`).

    A pure function of the kernel family, the runs, the budget and the tier: remembered
    (:func:`remembered`), so repeated releases of one shape calibrate once.

    Args:
      make: ``scale -> kernel``, the noise family (:func:`kernel_of`).
      runs: the measurements (:class:`Run`: noise ``make(t·v·s)``, on the exact tier its lattice mechanism).
      epsilon: the budget's ε.
      delta: the δ share of the composition.
      discrete: whether the kernel is integer-valued (not scale-invariant).
      exact: whether the release runs on the exact tier.

    Returns:
      A :class:`Calibration`: ``t`` and the exact (ε, δ) it gives, ε ≤ ``epsilon`` and within
      :data:`TOLERANCE` of it.

    Raises:
      ValueError: no ratio meets ``epsilon`` within :data:`TOLERANCE` (naming the nearest).
    """
    runs = tuple(runs)
    probe = make(1.0)
    key = ("calibrate", *kernel_key(probe), runs, float(epsilon), float(delta), bool(discrete), bool(exact))

    def compute():
        start = None
        if exact and not discrete and (len(_group(runs, False)) > 2 or probe.exact_lattice().hockey_stick is None):
            # the float calibration (scale-invariant: few PLDs per ratio) is within ≈ g/s of the lattice's
            # ratio: usually the first lattice evaluation meets the tolerance
            start = calibrate(make, runs, epsilon, delta, False).ratio
        return _calibrate(make, runs, epsilon, delta, discrete, exact, start)

    return remembered(key, compute)


def has_pure_epsilon(kernel) -> bool:
    """Whether ``kernel`` has a finite pure ε at sensitivity 1 (Laplace-type noise; not the Gaussians).

    What a release at δ = 0 needs.

    Args:
      kernel: a kernel.

    Returns:
      A bool.
    """
    if kernel.pure_epsilon is None:
        return False
    with jax.enable_x64(True):
        pure = float(np.asarray(kernel.pure_epsilon(1.0)))
    return math.isfinite(pure) and pure > 0


def _start(make, runs, epsilon, delta) -> float:
    """A first ratio to try: Gaussian-like scales need about √(2N log(1.25/δ))/ε (``N = Σ n/v²``); a kernel
    with a pure ε needs at most about ``Σ n/v · ε₁/ε`` (ε₁ its pure ε at scale 1 and sensitivity 1; exact for
    Laplace's scale family, where the composition's ε(δ) ≤ its pure ε)."""
    n_pure = sum(r.count * (2 if r.noisy_max else 1) / r.weight for r in runs)
    n_gauss = sum(r.count / r.weight**2 for r in runs)
    t = math.sqrt(2 * n_gauss * math.log(1.25 / delta)) / epsilon if delta > 0 else math.inf
    probe = make(1.0)
    if probe.pure_epsilon is not None:
        with jax.enable_x64(True):
            pure = float(np.asarray(probe.pure_epsilon(1.0)))
        if math.isfinite(pure) and pure > 0:
            t = min(t, n_pure * pure / epsilon)
    return t if math.isfinite(t) else n_pure / epsilon


def _calibrate(make, runs, epsilon, delta, discrete, exact=False, start=None) -> Calibration:
    """A safeguarded secant search on ``log ε(t)`` against ``log t``, one ratio per accountant query.

    One ratio at a time, each near the last, keeps the accountant on the few compiled programs of
    the grid-length buckets it visits (a batch of ratios spanning many buckets would compile a
    program per bucket and per batch size). ``start``:
    the first ratio (default :func:`_start`). The
    secant aims at ``ε·(1 − TOLERANCE/4)``; a step leaving the current bracket (largest ratio over
    the budget, smallest within it) is replaced by the bracket's geometric midpoint. Where the bracket closes
    (1e-12 relative) with ε jumping across the window — integer-valued noise, whose ε(t) is a staircase — the
    smallest feasible ratio is the answer (its ε a little below the window); where the accountant refused the
    ratios above it, the request is refused."""
    target = math.log(epsilon * (1 - TOLERANCE / 4))
    over, under = 0.0, math.inf  # largest ratio found over the budget; smallest found within it
    over_refused = False  # whether the accountant refused ``over`` (rather than answering ε above the budget)
    best_eps = math.nan
    t = _start(make, runs, epsilon, delta) if start is None else start
    last = None  # (log t, log ε) of the previous finite evaluation
    failure = None  # the accountant's last refusal of a ratio, or ε = ∞ (counted as over the budget: never returned)
    for _ in range(64):
        try:
            e = float(_epsilons(make, runs, [t], delta, discrete, exact)[0])
        except (ValueError, ArithmeticError) as exc:
            e, failure = math.nan, f"{exc}"
        if e == math.inf:
            failure = f"ε = ∞ at noise ratio {t:.6g}"
        if math.isfinite(e) and e <= epsilon:
            if t < under:
                under, best_eps = t, e
            if e >= epsilon * (1 - TOLERANCE):
                return Calibration(t, e, delta)
        elif t > over:
            over, over_refused = t, not math.isfinite(e)
        step = None
        if math.isfinite(e) and e > 0:
            here = (math.log(t), math.log(e))
            slope = -1.0  # ε ∝ 1/t for a pure-ε kernel, and about so for Gaussian-like ones
            if last is not None and here[0] != last[0]:
                s = (here[1] - last[1]) / (here[0] - last[0])
                slope = s if s < 0 else slope
            # the secant's log-step, clamped to the ×64 steps below before exp (on a nearly flat ε(t), where the
            # accountant does not resolve ε, an unclamped step would overflow math.exp)
            log_step = here[0] + (target - here[1]) / slope
            step = math.exp(min(max(log_step, here[0] - math.log(64)), here[0] + math.log(64)))
            last = here
        if under < math.inf and over > 0:
            if step is None or not over < step < under:
                step = math.sqrt(over * under)
            if under / over - 1 < 1e-12:
                if not over_refused:  # ε(t) jumps across the window (integer-valued noise): the smallest feasible t
                    return Calibration(under, best_eps, delta)
                break
        elif step is None:  # ε not finite: no feasible ratio seen yet, go up
            step = t * 64
        step = min(max(step, t / 64), t * 64)
        if under == math.inf and step <= over:
            step = over * 4
        if over == 0 and step >= under:
            step = under / 4
        t = step
    found = (
        f"the nearest: ε {best_eps:.6g} at noise ratio {under:.6g}"
        if under < math.inf
        else "no noise ratio met the budget"
    )
    why = f"; the accountant refused a ratio: {failure}" if failure else ""
    raise ValueError(
        f"epsilon: could not calibrate {type(make(1.0)).__name__} noise to epsilon={epsilon:g}, "
        f"delta={delta:g} within {TOLERANCE:g} relative ({found}{why}); try another epsilon or "
        "noise, or fewer statistics, groups or rows per unit"
    )
