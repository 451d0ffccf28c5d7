"""Single-step PLD construction: the static plan (grid offsets and lengths) and the build.

For every neighbouring pair the mechanism declares (``mech.neighbour_pairs(sensitivity)``),
in both orders, the privacy profile δ(ε) is evaluated on a power-of-two loss grid —
closed form where the mechanism has one (``hockey_stick``), exact atoms for discrete
mechanisms, an output-space grid otherwise (:mod:`accounting.privacy_loss.profiles`) — Poisson
subsampling is applied per pair, the pointwise max is taken (the supremum along the path
for pairs sampling a path of answers, :mod:`accounting.privacy_loss.pair_path`), and connect-the-dots
turns it into a dominating pmf per direction (:func:`accounting.privacy_loss.grid.from_profile`).

The grid range comes from the envelope on a coarse grid (:func:`make_plan`): its static
sizes are a :class:`Plan`, decided from concrete parameters, so that the build itself
(:func:`build_core`) is one compiled program per plan *shape*, parameters traced.

The batch queries (:mod:`accounting.privacy_loss.batch`) build through this module's public
names: :func:`validate`, :func:`sampling_rate`, :func:`pairs`, :func:`make_plan`,
:func:`build_core`, and, to plan a whole batch at once, :data:`COARSE_BATCH`,
:func:`row_bounds`, :func:`mirror_extension`, :func:`next_pow2`.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from accounting.privacy_loss import grid as _grid
from accounting._numerics import as64, concrete, leaf64, pow2_floor, to64, x64
from accounting.privacy_loss.profiles import (
    discrete_plan,
    envelope,
    expand,
    host_envelope,
    host_gaussian_profile,
    host_laplace_profile,
)
from accounting.privacy_loss.route import route
from dpjax.mechanism import Mechanism
from dpjax.validation import check_int, check_positive, check_probability, is_traced

#: default loss-grid step 2^-13 ≈ 1.22e-4 (a power of two: ε/step is exact for dyadic losses).
DEFAULT_DISCRETIZATION = 2.0**-13
#: default mass cut per composition (Chernoff-bounded, carried to the +∞ atom).
DEFAULT_TAIL_MASS = 1e-16
#: profile truncation: δ(ε_hi) − δ(∞) ≤ this at the top of a single-step grid.
_PROFILE_TAIL = 1e-20
#: lower cut: δ(ε_lo) − (1 − e^{ε_lo}) ≤ this (mass below ε_lo is raised to ε_lo).
_LOWER_TAIL = 1e-16
#: the range finder looks for losses in [−LOSS_LIMIT, LOSS_LIMIT]: mass at larger losses goes to the
#: +∞ atom, mass at smaller ones is lifted to the grid (pessimistic). The grid itself holds any loss
#: (its values are computed relative to the grid, e^{ε−ℓ}, never e^ε alone).
LOSS_LIMIT = 1e8
#: largest single-step loss grid / FFT length accepted before asking for a coarser step.
MAX_GRID = 2**25
#: shortest single-step loss grid: mechanisms of small losses (at the default step, a Laplace scale or a
#: Gaussian σ above ~8) share one build program instead of one per octave of their scale (the grid
#: extends upwards, where δ ≈ δ(∞): zero masses, which compositions, sized by the supports, skip)
MIN_GRID = 2**11
#: adaptive step (``value_discretization_interval=None``): at most this many points across the
#: single-step loss range (a wider range takes a coarser step than the default) ...
AUTO_RANGE_POINTS = 2**18
#: ... and at least this many per loss scale (√(2∫_0^∞ δ(ε)dε) ≈ √E[L₊²], the root mean square of the
#: positive losses): per composition connect-the-dots raises the mean loss by ≤ step²/8 and its
#: variance by ≤ step²/4, a 1/(8·32²) and 1/(4·32²) fraction of the loss scale's
AUTO_SCALE_POINTS = 32
#: adaptive PLDs are coarsened (by powers of two, :func:`accounting.privacy_loss.grid.coarsen`) before a
#: composition whose window would exceed this length
AUTO_WINDOW = 2**23
#: coarsest loss-grid step (the adaptive step of the widest loss range, 2·LOSS_LIMIT / AUTO_RANGE_POINTS,
#: rounded up to a power of two; e^step stays finite)
MAX_STEP = 2.0**10
#: δ below this multiple of the estimated round-off is refused.
ROUNDOFF_FACTOR = 10.0
#: default number of output cells for mechanisms without a closed-form profile.
DEFAULT_OUTPUT_CELLS = 2**16


def _coarse_eps(n=8193):
    u = np.linspace(-7.0, 7.0, n)
    eps = np.sign(u) * np.expm1(np.abs(u))
    # tiny losses (down to 1e-13) and large ones (up to LOSS_LIMIT), a few % apart: the range and the
    # loss scale of a PLD whose losses are all far below the linear part's first point or above its last
    tiny, big = np.geomspace(1e-13, eps[n // 2 + 1], 600, endpoint=False), np.geomspace(eps[-1], LOSS_LIMIT, 600)[1:]
    pos = np.concatenate([tiny, eps[n // 2 + 1 :], big])
    return np.concatenate([-pos[::-1], [0.0], pos])


_COARSE = _coarse_eps()
#: coarser range-finding grid of the batch queries (one per mechanism of the batch), with the same
#: tiny and large losses: a member's adaptive step (:func:`auto_step`) reads them
COARSE_BATCH = _coarse_eps(2049)


# ----------------------------------------------------------------------------------
# static plan
# ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Plan:
    """Static sizes of a single-step PLD (hashable): grid offsets and lengths per direction.

    Built from concrete parameters by :func:`make_plan` (``pld`` does it for you);
    pass it to :func:`pld` to build PLDs from *traced* parameters inside ``jit``.

    Args:
      step: the loss-grid step.
      remove: ``(k0, n, ng)`` of the remove direction: losses ``(k0 + i)·step`` for i < n; δ may exceed 1/2
        only for i < ng.
      add: the same for the add direction, or None (symmetric: no subsampling).
      cells: output cells per pair for the profile envelope.
      count: discrete support length (0: not discrete).
      klo: discrete support start per pair.
      mirror: per direction, the (below, above) extension of its grid that also holds the mirrored gap points
        of the other direction, or None (evaluated apart).
    """

    step: float
    remove: tuple[int, int, int]  # (k0, n, ng): losses (k0 + i)·step, i < n; δ may exceed 1/2 only for i < ng
    add: tuple[int, int, int] | None  # None: symmetric (no subsampling)
    cells: int = DEFAULT_OUTPUT_CELLS
    count: int = 0  # discrete support length (0: not discrete)
    klo: tuple[float, ...] = ()  # discrete support start per pair
    # per direction: (below, above) extension of its grid that also holds the mirrored gap points
    # −ε of the other direction (one profile evaluation serves both), or None (evaluated apart)
    mirror: tuple = (None, None)

    @property
    def shape(self):
        """The static part (grid lengths, no offsets): plans of equal shape share compiled code."""
        return (
            self.step,
            self.remove[1:],
            None if self.add is None else self.add[1:],
            self.cells,
            self.count,
            len(self.klo),
            tuple(self.mirror),
        )

    @property
    def offsets(self):
        """The dynamic part: (k0 remove, k0 add, discrete support starts) as float64 arrays."""
        return (
            as64(float(self.remove[0])),
            as64(float(self.add[0] if self.add else 0)),
            as64(self.klo),
        )


def validate(mech, sensitivity, sampling_prob, value_discretization_interval):
    """Check the arguments of a PLD built from a mechanism, outside ``jit``.

    Args:
      mech: the dpjax mechanism.
      sensitivity: the query's sensitivity (a positive scalar).
      sampling_prob: the Poisson sampling probability, in [0, 1].
      value_discretization_interval: the loss-grid step, or None (adaptive).

    Raises:
      ValueError: ``mech`` is not a dpjax Mechanism, ``sensitivity`` is not a scalar, or
        ``value_discretization_interval`` exceeds MAX_STEP (and the checks of ``check_positive`` /
        ``check_probability`` on each parameter).
    """
    if not isinstance(mech, Mechanism):
        raise ValueError(f"mech must be a dpjax Mechanism, got {type(mech).__name__}")
    check_positive("sensitivity", sensitivity)
    if jnp.ndim(sensitivity) != 0:
        raise ValueError(
            f"sensitivity must be a scalar (one query for the whole batch: batch the mechanism's scale "
            f"instead, scale/Δ), got shape {jnp.shape(sensitivity)}"
        )
    check_probability("sampling_prob", sampling_prob)
    if value_discretization_interval is None:  # adaptive
        return
    check_positive("value_discretization_interval", value_discretization_interval)
    if not is_traced(value_discretization_interval) and float(value_discretization_interval) > MAX_STEP:
        raise ValueError(f"value_discretization_interval must be <= {MAX_STEP:g}, got {value_discretization_interval}")


def sampling_rate(sampling_prob):
    """None for no subsampling (a Python 1), else a float64 array.

    Args:
      sampling_prob: the Poisson sampling probability (a scalar or array, possibly traced).

    Returns:
      None when ``sampling_prob`` is a concrete 1, else ``sampling_prob`` as a float64 array.
    """
    if not is_traced(sampling_prob) and np.all(np.asarray(sampling_prob) == 1.0):
        return None
    return as64(sampling_prob) if not is_traced(sampling_prob) else jnp.asarray(sampling_prob, jnp.float64)


def pairs(mech, sensitivity):
    """The mechanism's worst-case neighbouring output pairs at ``sensitivity``, as float64 arrays.

    Args:
      mech: the dpjax mechanism.
      sensitivity: the query's sensitivity.

    Returns:
      ``(values, neighbour_values)`` from ``mech.neighbour_pairs``.
    """
    v, nv = mech.neighbour_pairs(sensitivity)
    return jnp.asarray(v, jnp.float64), jnp.asarray(nv, jnp.float64)


def row_bounds(d, d_other_neg, eps):
    """Per-row (ε_lo, ε_hi) arrays of one direction from the envelope on the coarse (symmetric) grid.

    ``d_other_neg`` is the other direction's profile at −ε, so that the gap
    g(ε) = δ(ε) − (1 − e^ε) = e^ε δ_other(−ε) is computed without cancellation.

    Args:
      d: the direction's profile on ``eps``, shape (..., len(eps)).
      d_other_neg: the other direction's profile at ``-eps``, same shape.
      eps: the coarse symmetric ε grid.

    Returns:
      ``(eps_lo, eps_hi)``: float64 arrays with one bound per row, clipped to ±LOSS_LIMIT.
    """
    d = np.asarray(d).reshape(-1, eps.size)
    floor = d[:, -1:] + _PROFILE_TAIL
    hi_idx = np.argmax(d <= floor, axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        g = np.where(
            eps > 700.0, np.inf, np.exp(np.minimum(eps, 700.0)) * np.asarray(d_other_neg).reshape(-1, eps.size)
        )
    # at ε > 0 the gap (≈ e^ε) cannot be small; there P[L ≤ ε] ≤ 1 − δ(ε) bounds the mass below ε
    below = ((g <= _LOWER_TAIL) | ((eps > 0) & (1.0 - d <= _LOWER_TAIL))) & (np.arange(eps.size) <= hi_idx[:, None])
    lo_idx = np.where(below.any(axis=1), eps.size - 1 - np.argmax(below[:, ::-1], axis=1), 0)
    lo_idx = np.minimum(lo_idx, np.maximum(hi_idx - 1, 0))
    return np.maximum(eps[lo_idx], -LOSS_LIMIT), np.minimum(eps[hi_idx], LOSS_LIMIT)


def _bounds(d, d_other_neg, eps):
    """(ε_lo, ε_hi) covering every row (a batch shares one grid)."""
    lo, hi = row_bounds(d, d_other_neg, eps)
    return float(np.min(lo)), float(np.max(hi))


@x64
def make_plan(
    mech,
    *,
    sensitivity=1.0,
    sampling_prob=1.0,
    value_discretization_interval=None,
    pessimistic=True,
    output_cells=DEFAULT_OUTPUT_CELLS,
) -> Plan:
    """Static grid sizes for ``pld(mech, ...)``, from concrete parameter values.

    Args:
      mech: the mechanism (concrete parameters).
      sensitivity: the query's sensitivity.
      sampling_prob: the Poisson rate.
      value_discretization_interval: ``None`` chooses the step from the loss range and scale
        (:func:`auto_step`); a number is the step, rounded down to a power of two.
      pessimistic: unused by the plan (kept for :func:`accounting.pld`'s signature).
      output_cells: output-grid size for mechanisms without a closed-form profile.

    Returns:
      A :class:`Plan`.

    Raises:
      ValueError: traced parameters, a parameter out of range, or a grid beyond ``MAX_GRID``.
    """
    validate(mech, sensitivity, sampling_prob, value_discretization_interval)
    return plan_with(mech, sensitivity, sampling_prob, value_discretization_interval, output_cells, None)


def plan_with(mech, sensitivity, sampling_prob, value_discretization_interval, output_cells, host):
    """:func:`make_plan` of validated arguments, given ``mech``'s :func:`host_profile` (``None``: none, or not
    known yet) — :func:`accounting.pld` passes the one it reads for the build.

    Args:
      mech: the mechanism (concrete parameters).
      sensitivity: the query's sensitivity.
      sampling_prob: the Poisson rate.
      value_discretization_interval: the step, or ``None`` (adaptive).
      output_cells: output-grid size for mechanisms without a closed-form profile.
      host: ``host_profile(mech, ...)``, or ``None``.

    Returns:
      A :class:`Plan`.

    Raises:
      ValueError: as :func:`make_plan`.
    """
    output_cells = check_int("output_cells", output_cells, minimum=16)
    if host is None:
        host = host_profile(mech, sensitivity, sampling_prob, route(mech, sampling_rate(sampling_prob)))
    extra = {"cells": output_cells}
    if host is not None:  # (on the host: nothing compiled)
        prob = None if np.all(np.asarray(sampling_prob) == 1.0) else np.asarray(sampling_prob, np.float64)
        rem, add = host_envelope(*host[:2], prob, _COARSE, None if prob is None else _COARSE, True)
    else:
        m = concrete(to64(mech))
        sens = concrete(sensitivity)
        sampling_prob = concrete(sampling_prob)
        if m is None or sens is None or sampling_prob is None:
            raise ValueError(
                "make_plan: mechanism parameters are traced (inside jit); build the plan outside jit from concrete "
                "parameters (accounting.make_plan(mech_concrete, ...)) and pass plan= to accounting.pld"
            )
        m = jax.tree_util.tree_map(lambda x: jnp.asarray(x, x.dtype), m)
        sampling_prob = sampling_rate(sampling_prob)
        sens = jnp.asarray(np.asarray(sens, np.float64), jnp.float64)
        if route(m, sampling_prob).profile == "discrete":
            extra.update(discrete_plan(expand(m), *pairs(m, sens)))
        rem, add = _coarse_jit(m, sens, sampling_prob, extra.get("klo"), output_cells, int(extra.get("count", 0)))
    other = {0: rem if add is None else add, 1: rem}
    ranges = [
        None if d is None else _bounds(d, np.asarray(other[i])[..., ::-1], _COARSE) for i, d in enumerate((rem, add))
    ]
    if value_discretization_interval is None:
        width = max(r[1] - r[0] for r in ranges if r is not None)
        step = auto_step(width, min(float(np.min(loss_scale(d))) for d in (rem, add) if d is not None))
    else:
        step = pow2_floor(float(value_discretization_interval))
    dirs = []
    for d, r in zip((rem, add), ranges):
        if d is None:
            dirs.append(None)
            continue
        lo, hi = r
        k0, k1 = math.floor(lo / step), math.ceil(hi / step)
        # lengths rounded up to powers of two (the grid extends upwards, where δ ≈ δ(∞)): a new scale
        # meets a compiled program of its octave instead of one of its own
        n = next_pow2(max(k1 - k0 + 1, MIN_GRID))
        dd = np.asarray(d).reshape(-1, _COARSE.size)
        big = _COARSE[np.argmax(np.all(dd < 0.25, axis=0))] if np.any(np.all(dd < 0.25, axis=0)) else hi
        ng = int(min(n, coarse_len(max(3, math.ceil(big / step) - k0 + 2), n)))
        if n > MAX_GRID:
            raise ValueError(
                f"value_discretization_interval: the loss range [{lo:.4g}, {hi:.4g}] needs {n} grid points at step "
                f"{step:.3g}; use a coarser value_discretization_interval (or None: a step that follows the losses)"
            )
        dirs.append((k0, n, ng))
    klo = tuple(float(x) for x in np.atleast_1d(np.asarray(extra.get("klo", ()))))
    return Plan(step, dirs[0], dirs[1], output_cells, int(extra.get("count", 0)), klo, _mirrors(dirs))


def pow2_ceil(x: float) -> float:
    """Smallest power of two >= x.

    Args:
      x: a positive float.

    Returns:
      The power of two, as a float.
    """
    return 2.0 ** math.ceil(math.log2(x) - 1e-12)


def loss_scale(d, eps=_COARSE):
    """√(2∫_0^∞ (δ(ε) − δ(∞)) dε) per profile row on the coarse grid ``eps`` (∞ for a row without
    positive losses): for small losses ≈ √E[L₊²] (∫_0^∞ (1 − e^{ε−L})_+ dε = L − 1 + e^{−L} ≈ L²/2),
    the size of the losses the grid must resolve.

    Args:
      d: profile values on ``eps``, shape (..., len(eps)).
      eps: the coarse ε grid.

    Returns:
      The loss scale per row, a float64 array.
    """
    d = np.asarray(d).reshape(-1, eps.size)
    pos = eps >= 0
    x, y = eps[pos], np.clip(d[:, pos] - d[:, -1:], 0.0, None)
    area = np.sum(0.5 * (y[:, 1:] + y[:, :-1]) * np.diff(x), axis=-1)
    return np.where(area > 0, np.sqrt(2.0 * np.maximum(area, 0.0)), math.inf)


def auto_step(width: float, scale: float) -> float:
    """The adaptive loss-grid step of a single-step PLD whose loss range is ``width`` wide and whose
    loss scale (:func:`loss_scale`) is ``scale``: the default 2^-13, unless the range needs more than
    AUTO_RANGE_POINTS points at it (then the power of two that fits: losses of any size stay
    finite), or the scale is below AUTO_SCALE_POINTS default steps (then scale/AUTO_SCALE_POINTS,
    but no finer than the range allows): a grid much coarser than the losses spreads each loss over
    a whole step, and composed the spread adds up (RR(10⁻⁶) composed 10⁶ times on such a grid would read 14× the truth).

    The one rule of every route that leaves the step to the engine (``value_discretization_interval
    =None``): :func:`make_plan` (``accounting.pld``, the ``Accountant``, DP-SGD) and the batch
    queries' per-member plans.

    Args:
      width: the loss range's width.
      scale: the loss scale.

    Returns:
      The step, a power of two.
    """
    floor = pow2_ceil(max(width, 1e-300) / AUTO_RANGE_POINTS)
    step = DEFAULT_DISCRETIZATION
    if scale / AUTO_SCALE_POINTS < step:
        step = pow2_floor(scale / AUTO_SCALE_POINTS)
    return max(step, floor)


def next_pow2(n):
    """Smallest power of two >= n (an int, at least 1): the grid lengths that share compiled code.

    Args:
      n: a length.

    Returns:
      The power of two, an int.
    """
    return 1 << (max(int(n), 1) - 1).bit_length()


def coarse_len(x, n):
    """A static length ``x`` next to a grid of ``n`` points, rounded up to a power of two and, above 16,
    to at least n/8: a handful of values per grid length, so that grids of one length share compiled
    programs whatever their offsets (0 for x <= 0).

    Args:
      x: the length to round.
      n: the length of the grid it extends.

    Returns:
      The rounded length, an int.
    """
    if x <= 0:
        return 0
    x = next_pow2(x)
    return x if x <= 16 else max(x, n // 8)


def mirror_extension(k0, n, k0o, g):
    """Static (below, above) extension of a grid (k0, n) holding the mirrored positions −(k0o + j),
    j < g, of the other grid, for either rounding shift (0 pessimistic, 1 optimistic); arrays are
    maxed over (a batch of offsets). Rounded up by :func:`coarse_len` (shared compiles); None when
    evaluating the g mirrored points apart is no dearer.

    Args:
      k0: grid index of the grid's first point (an int or an array over the batch).
      n: the grid's length.
      k0o: grid index of the other grid's first point (an int or an array).
      g: the number of the other grid's points mirrored.

    Returns:
      ``(below, above)`` as ints, or None.
    """
    below = int(np.max(np.asarray(k0) + np.asarray(k0o) + 2 + g - 1))
    above = int(np.max(-np.asarray(k0o) - np.asarray(k0) - n + 1))
    below, above = (coarse_len(x, n) for x in (below, above))
    return (below, above) if below + above < g else None


def _mirrors(dirs):
    rem, add = dirs
    if add is None:
        return (mirror_extension(rem[0], rem[1], rem[0], rem[2]), None)
    return (mirror_extension(rem[0], rem[1], add[0], add[2]), mirror_extension(add[0], add[1], rem[0], rem[2]))


@functools.partial(jax.jit, static_argnums=(4, 5))
def _coarse_jit(mech, sensitivity, sampling_prob, klo, cells, count):
    """The envelope of ``mech``'s pair profiles on the coarse range-finding grid (one program, with the
    pairs and the expanded parameters inside: nothing else compiled per plan)."""
    coarse = jnp.asarray(_COARSE)
    extra = {"cells": cells}
    if count:
        extra.update(count=count, klo=klo)
    values, nvalues = pairs(mech, sensitivity)
    return envelope(
        expand(mech),
        values,
        nvalues,
        sampling_prob,
        coarse,
        None if sampling_prob is None else coarse,
        pessimistic=True,
        plan=extra,
    )


def build(mech, sensitivity, sampling_prob, plan, pessimistic):
    """Single-step (remove, add) grid pmfs of ``plan`` (``sampling_prob`` as :func:`sampling_rate` gives
    it); compiled once per plan *shape*.

    Args:
      mech: the dpjax mechanism.
      sensitivity: the query's sensitivity.
      sampling_prob: the Poisson rate as :func:`sampling_rate` returns it (None: no subsampling).
      plan: the :class:`Plan`.
      pessimistic: build the dominating (else the dominated) pmfs.

    Returns:
      ``(remove, add)`` grid pmfs; ``add`` is None for a symmetric plan.
    """
    return _build_jit(mech, sensitivity, sampling_prob, plan.offsets, plan.shape, pessimistic)


@functools.partial(jax.jit, static_argnums=(4, 5))
def _build_jit(mech, sensitivity, sampling_prob, offsets, shape, pessimistic):
    return build_core(mech, sensitivity, sampling_prob, offsets, shape, pessimistic)


def build_core(mech, sensitivity, sampling_prob, offsets, shape, pessimistic):
    """``offsets`` = (k0_remove, k0_add, klo) traced; ``shape`` = :attr:`Plan.shape` (static).

    Args:
      mech: the dpjax mechanism.
      sensitivity: the query's sensitivity.
      sampling_prob: the Poisson rate as :func:`sampling_rate` returns it.
      offsets: ``(k0_remove, k0_add, klo)``, possibly traced.
      shape: :attr:`Plan.shape` (static).
      pessimistic: build the dominating (else the dominated) pmfs.

    Returns:
      ``(remove, add)`` grid pmfs; ``add`` is None for a symmetric plan.
    """
    _, _, _, cells, count, _ = shape[:6]
    values, nvalues = pairs(mech, sensitivity)
    extra = {"cells": cells}
    if count:
        extra["count"] = count
        extra["klo"] = offsets[2]

    def env(eps_rem, eps_add):
        return envelope(
            expand(mech), values, nvalues, sampling_prob, eps_rem, eps_add, pessimistic=pessimistic, plan=extra
        )

    rem, add = grids(env, offsets, shape, pessimistic)
    # a shift off the mechanism's lattice separates the neighbours' supports: all mass at +∞
    apart = mech.off_lattice(sensitivity)
    return _grid.disjoint(rem, apart), None if add is None else _grid.disjoint(add, apart)


def grids(env, offsets, shape, pessimistic, xp=jnp):
    """The single-step (remove, add) grid pmfs of a plan from the envelope of its pair profiles.

    Args:
      env: ``env(eps_rem, eps_add) -> (δ_rem, δ_add)``, the envelope at the given losses (``eps_add``
        None: symmetric, δ_add None).
      offsets: :attr:`Plan.offsets` (the last, the discrete support starts, unused here).
      shape: :attr:`Plan.shape`.
      pessimistic: a dominating PLD (else optimistic).
      xp: ``numpy`` for a host envelope of concrete values (the pmfs built on the host).

    Returns:
      ``(remove, add)`` grid pmfs (``add`` None when symmetric).
    """
    step, (nr, gr), add_shape = shape[:3]
    mirror = shape[6] if len(shape) > 6 else (None, None)
    k0r, k0a, _ = offsets
    shift = 0.0 if pessimistic else 1.0
    eps_r = (k0r + shift + xp.arange(nr, dtype=np.float64)) * step
    eps_a = None
    if add_shape is not None:
        na, ga = add_shape
        eps_a = (k0a + shift + xp.arange(na, dtype=np.float64)) * step
    # the gap g(ε) = e^ε δ_other(−ε) is needed only where δ may exceed 1/2 (the first ng points)

    def gaps(d, eps, ng, dother):
        e = eps[..., :ng]  # (beyond e^700 the gap is never the small side: connect-the-dots reads δ)
        g = xp.where(e > 700.0, np.inf, xp.exp(xp.minimum(e, 700.0)) * dother)
        rest = d[..., ng:] - (
            1.0 - xp.exp(xp.minimum(eps[..., ng:], 700.0))
        )  # unused by connect_the_dots (δ ≤ 1/2 there)
        return xp.concatenate([xp.broadcast_to(g, d.shape[:-1] + (ng,)), rest], -1)

    def args(k0, n, eps, k0o, g, eps_o, ext):
        """Where to evaluate one direction's profile: its grid, then the mirrored −ε of the other
        direction's first g points — or (ext) one contiguous grid holding both."""
        if ext is None:
            return xp.concatenate([eps, -eps_o[..., :g]], -1)
        below, above = ext
        return (k0 + shift - below + xp.arange(below + n + above, dtype=np.float64)) * step

    def split(vals, k0, n, k0o, g, ext):
        """(values on the grid, values at the mirrored points) from :func:`args`' evaluation."""
        if ext is None:
            return vals[..., :n], vals[..., n:]
        below, _ = ext
        # −(k0o + shift + j) sits at index c − j of the extended grid (start k0 + shift − below)
        start = -k0o - k0 - 2.0 * shift + below - (g - 1)
        if xp is np:
            mir = vals[..., int(start) : int(start) + g]
        else:
            mir = jax.lax.dynamic_slice_in_dim(vals, start.astype(jnp.int32), g, axis=vals.ndim - 1)
        return vals[..., below : below + n], xp.flip(mir, -1)

    if eps_a is None:  # symmetric: g(ε) = e^ε δ(−ε)
        d, _ = env(args(k0r, nr, eps_r, k0r, gr, eps_r, mirror[0]), None)
        d, dneg = split(d, k0r, nr, k0r, gr, mirror[0])
        return _grid.from_profile(d, gaps(d, eps_r, gr, dneg), k0r, step, xp), None
    dr, da = env(args(k0r, nr, eps_r, k0a, ga, eps_a, mirror[0]), args(k0a, na, eps_a, k0r, gr, eps_r, mirror[1]))
    dr, dr_mir = split(dr, k0r, nr, k0a, ga, mirror[0])
    da, da_mir = split(da, k0a, na, k0r, gr, mirror[1])
    rem = _grid.from_profile(dr, gaps(dr, eps_r, gr, da_mir), k0r, step, xp)
    add = _grid.from_profile(da, gaps(da, eps_a, ga, dr_mir), k0a, step, xp)
    return rem, add


def _host_mechanism(mech):
    """``mech`` with float64 numpy leaves (concrete): its pair-law hooks then run in numpy, nothing compiled."""
    return jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), concrete(mech))


def concrete_mu(mech, sensitivity):
    """μ = Δ/σ of a mechanism whose pair loss is exactly Gaussian, on concrete values (in numpy).

    Args:
      mech: the mechanism.
      sensitivity: the query's sensitivity.

    Returns:
      μ as a float64 numpy array, ``None`` for another mechanism or traced values.
    """
    if mech.gaussian_pld_mu is None or is_traced(sensitivity) or concrete(mech) is None:
        return None
    return np.asarray(_host_mechanism(mech).gaussian_pld_mu(np.asarray(concrete(sensitivity), np.float64)), np.float64)


def host_profile(mech, sensitivity, sampling_prob, how):
    """The numpy profile of ``mech``'s one symmetric pair, for :func:`host_build`, or ``None``.

    Args:
      mech: the mechanism.
      sensitivity: the query's sensitivity.
      sampling_prob: the Poisson rate.
      how: ``mech``'s :class:`accounting.privacy_loss.route.Route`.

    Returns:
      ``(profile, param, pure)`` for concrete parameters of a pair loss that is exactly Gaussian
      (``gaussian_pld_mu``: no lattice, no pure-ε cap, no pair path; the profile of μ, ``pure`` None)
      or the Laplace pair (``laplace_pld_ratio``: the profile of r, ``pure`` its pure ε r), with
      ``profile(param, eps)`` as :func:`accounting.privacy_loss.profiles.host_envelope` takes it;
      ``None`` for any other mechanism or traced values (the compiled build).
    """
    if how.profile != "closed_form" or how.pair_path or how.atomic or is_traced((mech, sensitivity, sampling_prob)):
        return None
    if mech.gaussian_pld_mu is not None and not how.pure_cap:
        return host_gaussian_profile, concrete_mu(mech, sensitivity), None
    if mech.laplace_pld_ratio is not None:
        sens = np.asarray(concrete(sensitivity), np.float64)
        r = np.asarray(_host_mechanism(mech).laplace_pld_ratio(sens), np.float64)
        return host_laplace_profile, r, r
    return None


def host_build(profile, param, sampling_prob, plan, pessimistic):
    """The single-step grid pmfs of a mechanism with a numpy pair profile (:func:`host_profile`), built
    on the host.

    The arithmetic of the compiled build (:func:`grids` on
    :func:`accounting.privacy_loss.profiles.host_envelope`), nothing compiled.

    Args:
      profile: the pair's numpy profile, ``profile(param, eps)``.
      param: its concrete parameter (over the batch).
      sampling_prob: the Poisson rate (``None``: not subsampled).
      plan: the :class:`Plan`.
      pessimistic: a dominating PLD (else optimistic).

    Returns:
      ``(remove, add)`` grid pmfs with float64 JAX leaves (``add`` None when not subsampled).
    """
    prob = None if sampling_prob is None else np.asarray(sampling_prob, np.float64)

    def env(eps_rem, eps_add):
        return host_envelope(profile, param, prob, eps_rem, eps_add, pessimistic)

    offsets = (float(plan.remove[0]), float(plan.add[0] if plan.add else 0), None)
    rem, add = grids(env, offsets, plan.shape, pessimistic, np)
    with jax.enable_x64(True):
        return tuple(None if p is None else jax.tree_util.tree_map(leaf64, p) for p in (rem, add))
