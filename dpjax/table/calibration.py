"""One budget for the whole release, calibrated on the exact composed PLD.

Every noisy component of the release (:mod:`dpjax.table.statistics`) and the selection's noisy
unit counts use the same kernel at scale ``t · s`` for a component of per-group sensitivity
``s`` (equal noise-to-sensitivity ratio ``t``). Removing one unit moves at most ``K·m`` elements
of a component (``K`` groups, multiplicity ``m``), each by at most ``s``, so the release is
dominated by the composition of ``K·m`` runs of ``kernel(t·s)`` at sensitivity ``s`` per
component (plus ``K`` runs at sensitivity 1 for the selection). For a continuous kernel a run of
``kernel(t·s)`` at sensitivity ``s`` has the same PLD as ``kernel(t)`` at sensitivity 1, so the
whole release is ``N = K·(Σ m + selection)`` runs of ``kernel(t)``: one query of
``accounting.get_epsilon`` per ratio tried. Integer-valued kernels (not scale-invariant)
compose one PLD per distinct sensitivity (``accounting.pld(...).self_compose(...).compose(...)``).

On the exact tier (``exact``) every run is the kernel's lattice mechanism ``kernel(t·s).exact_lattice()``
(:mod:`dpjax.exact.lattice`: the answer rounded to the lattice gℤ, integer noise at a scale rounded up),
accounted at its lattice sensitivity ⌈s/g⌉ (``ExactLattice.neighbour_pairs``): one PLD per distinct
sensitivity, as for integer-valued kernels — the privacy of the mechanism actually run, rounding included.
A continuous kernel's lattice search with several distinct sensitivities, or a Gaussian one, starts from
the float calibration (fast: one fused query per ratio): the lattice costs ≤ g/s relative in sensitivity
(g ≤ 2^-20 b for Laplace, 2^-11 σ for Gaussian), so the first lattice evaluation — one PLD per distinct
sensitivity; a discrete Gaussian one, accounted from its atoms, takes seconds — usually meets the
tolerance.

``t`` is a scale whose exact ε at the composition's δ share is ≤ the requested ε and within a
relative gap of 1e-3 of it (the reported ε is the accountant's, pessimistic, ≤ the request and
≥ (1 − 1e-3) of it), found by a secant search on ``log ε(log t)`` from the pure-ε or Gaussian
estimate; a handful of nearby ratios, so the accountant compiles the programs of one or two
grid lengths only.
"""

from __future__ import annotations

import math
import threading

import jax
import numpy as np

import accounting
from dpjax.kernels import AdditiveMechanism, by_name
from dpjax.mechanism import overrides

__all__ = ["kernel_of", "Calibration", "calibrate", "has_pure_epsilon", "kernel_key", "remembered"]

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


def _epsilons(make, runs, ratios, delta, discrete, exact=False):
    """The exact ε (at ``delta``; pure ε when ``delta`` is 0) of the release at each ratio (on the exact tier:
    of the lattice mechanisms run)."""
    ratios = np.asarray(ratios, float)
    if exact:
        return _epsilons(lambda scale: make(scale).exact_lattice(), runs, ratios, delta, True)
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


_CACHE: dict = {}
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 256


def kernel_key(kernel) -> tuple:
    """A hashable identity of a kernel: its class, pytree structure and the bytes of its leaves."""
    leaves = tuple(np.asarray(leaf).tobytes() for leaf in jax.tree_util.tree_leaves(kernel))
    return type(kernel), jax.tree_util.tree_structure(kernel), leaves


def remembered(key, compute):
    """``compute()``, remembered under ``key`` (thread-safe, the last 256 answers): for the pure
    functions of a release's configuration (its calibration, its selection threshold)."""
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
    if hit is None:
        hit = compute()
        with _CACHE_LOCK:
            if len(_CACHE) >= _CACHE_SIZE:
                _CACHE.pop(next(iter(_CACHE)))
            _CACHE[key] = hit
    return hit


def calibrate(make, components, max_groups: int, selection: bool, epsilon: float, delta: float,
              discrete: bool, exact: bool = False) -> Calibration:
    """The smallest ratio ``t`` with composed ε(δ) ≤ ``epsilon`` (within :data:`TOLERANCE`), the noise
    ``make(t·s)`` (``exact``: its lattice mechanism ``make(t·s).exact_lattice()``) on each component.

    A pure function of the kernel family, the runs, the budget and the tier: remembered
    (:func:`remembered`), so repeated releases of one shape calibrate once."""
    runs = _runs(components, max_groups, selection)
    probe = make(1.0)
    key = ("calibrate", *kernel_key(probe), tuple(sorted(runs.items())), float(epsilon), float(delta),
           bool(discrete), bool(exact))

    def compute():
        start = None
        if exact and not discrete and (len(runs) > 2 or not overrides(probe.exact_lattice(), "hockey_stick")):
            # the float calibration (scale-invariant: one fused query per ratio) is within ≈ g/s of the lattice's
            # ratio: usually the first lattice evaluation meets the tolerance. Worth its cost (a compiled fused
            # query) where a lattice evaluation is dear: several distinct sensitivities (one PLD each), or a
            # lattice accounted from its atoms (the Gaussian's); one statistic and the selection of a Laplace
            # lattice (closed form) go faster from the pure-ε start (measured: 5.2 s against 6.7–9.4 s cold)
            start = calibrate(make, components, max_groups, selection, epsilon, delta, False).ratio
        return _calibrate(make, runs, epsilon, delta, discrete, exact, start)

    return remembered(key, compute)


def has_pure_epsilon(kernel) -> bool:
    """Whether ``kernel`` has a finite pure ε at sensitivity 1 (Laplace-type noise; not the Gaussians): what a
    release at δ = 0 needs."""
    if not overrides(kernel, "pure_epsilon"):
        return False
    with jax.enable_x64(True):
        pure = float(np.asarray(kernel.pure_epsilon(1.0)))
    return math.isfinite(pure) and pure > 0


def _start(make, n, epsilon, delta) -> float:
    """A first ratio to try: Gaussian-like scales need about √(2N log(1.25/δ))/ε; a kernel with a
    pure ε needs at most about N·ε₁/ε (ε₁ its pure ε at scale 1 and sensitivity 1; exact for
    Laplace's scale family, where the composition's ε(δ) ≤ its pure ε)."""
    t = math.sqrt(2 * n * math.log(1.25 / delta)) / epsilon if delta > 0 else math.inf
    probe = make(1.0)
    if overrides(probe, "pure_epsilon"):
        with jax.enable_x64(True):
            pure = float(np.asarray(probe.pure_epsilon(1.0)))
        if math.isfinite(pure) and pure > 0:
            t = min(t, n * pure / epsilon)
    return t if math.isfinite(t) else n / epsilon


def _calibrate(make, runs, epsilon, delta, discrete, exact=False, start=None) -> Calibration:
    """A safeguarded secant search on ``log ε(t)`` against ``log t``, one ratio per accountant query.

    One ratio at a time, each near the last, keeps the accountant on the few compiled programs of
    the grid-length buckets it visits (a batch of ratios spanning many buckets compiles a program
    per bucket and per batch size: the first release used to pay ≈ 95 compilations for it). ``start``:
    the first ratio (default :func:`_start`). The
    secant aims at ``ε·(1 − TOLERANCE/4)``; a step leaving the current bracket (largest ratio over
    the budget, smallest within it) is replaced by the bracket's geometric midpoint."""
    n = sum(runs.values())
    target = math.log(epsilon * (1 - TOLERANCE / 4))
    over, under = 0.0, math.inf  # largest ratio found over the budget; smallest found within it
    best_eps = math.nan
    t = _start(make, n, epsilon, delta) if start is None else start
    last = None  # (log t, log ε) of the previous finite evaluation
    failure = None  # the accountant's last refusal of a ratio (counted as over the budget: never returned)
    for _ in range(64):
        try:
            e = float(_epsilons(make, runs, [t], delta, discrete, exact)[0])
        except (ValueError, ArithmeticError) as exc:
            e, failure = math.nan, f"{exc}"
        if math.isfinite(e) and e <= epsilon:
            if t < under:
                under, best_eps = t, e
            if e >= epsilon * (1 - TOLERANCE):
                return Calibration(t, e, delta)
        else:
            over = max(over, t)
        step = None
        if math.isfinite(e) and e > 0:
            here = (math.log(t), math.log(e))
            slope = -1.0  # ε ∝ 1/t for a pure-ε kernel, and about so for Gaussian-like ones
            if last is not None and here[0] != last[0]:
                s = (here[1] - last[1]) / (here[0] - last[0])
                slope = s if s < 0 else slope
            # the secant's log-step, clamped to the ×64 steps below before exp (a nearly flat ε(t), where the
            # accountant no longer resolves ε, overflowed math.exp: OverflowError at epsilon = 1e-6)
            log_step = here[0] + (target - here[1]) / slope
            step = math.exp(min(max(log_step, here[0] - math.log(64)), here[0] + math.log(64)))
            last = here
        if under < math.inf and over > 0:
            if step is None or not over < step < under:
                step = math.sqrt(over * under)
            if under / over - 1 < 1e-12:
                break
        elif step is None:  # ε not finite: no feasible ratio seen yet, go up
            step = t * 64
        step = min(max(step, t / 64), t * 64)
        if under == math.inf and step <= over:
            step = over * 4
        if over == 0 and step >= under:
            step = under / 4
        t = step
    found = f"the nearest: ε {best_eps:.6g} at noise ratio {under:.6g}" if under < math.inf else \
        "no noise ratio met the budget"
    why = f"; the accountant refused a ratio: {failure}" if failure else ""
    raise ValueError(f"epsilon: could not calibrate {type(make(1.0)).__name__} noise to epsilon={epsilon:g}, "
                     f"delta={delta:g} within {TOLERANCE:g} relative ({found}{why}); try another epsilon or "
                     "noise, or fewer statistics, groups or rows per unit")
