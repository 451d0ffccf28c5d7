"""Privacy-loss distributions (PLDs) of dpjax mechanisms: build, compose, query.

Names follow Google's dp_accounting. A :class:`PrivacyLossDistribution` keeps the
*remove* and *add* directions separately (they differ under Poisson subsampling) and
reports the max. It is a pytree: a mechanism with batched parameters gives a batch of
PLDs, and every query returns an array over that batch.

Construction (see docs/accounting.md): for every neighbouring pair the mechanism
declares (``mech.neighbour_pairs(sensitivity)``), in both orders, the privacy profile
δ(ε) is evaluated on a power-of-two loss grid — closed form where the mechanism has
one (``hockey_stick``), exact atoms for discrete mechanisms, an output-space grid
otherwise — Poisson subsampling is applied per pair, the pointwise max is taken (for
pairs sampling a path of answers, ``pair_path``, the supremum along the path: see
:mod:`accounting._pair_path`), and connect-the-dots turns it into a dominating PLD (pessimistic; an optimistic estimate
shifts it down by one grid step). The plain Gaussian mechanism stays analytic
(μ composes as √Σμ²) until it meets a grid PLD.

All arithmetic is float64 inside ``jax.enable_x64(True)`` contexts; the user's global
configuration is never changed.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtri

from accounting import _grid
from accounting._numerics import bucket_len, concrete, implicit_root, pow2_floor, to64, x64, x64_vjp
from accounting._profiles import discrete_plan, envelope, expand, source_kind
from dpjax.pytree import pytree_dataclass, static_field
from dpjax.validation import check_int, check_positive, check_probability, check_real, is_traced
from dpjax.kernels import Gaussian, gaussian_privacy_profile
from dpjax.mechanism import Mechanism

__all__ = [
    "PrivacyLossDistribution",
    "Plan",
    "pld",
    "make_plan",
    "identity",
    "get_epsilon",
    "get_delta",
    "DEFAULT_DISCRETIZATION",
    "DEFAULT_TAIL_MASS",
]

#: default loss-grid step 2^-13 ≈ 1.22e-4 (a power of two: ε/step is exact for dyadic losses).
DEFAULT_DISCRETIZATION = 2.0**-13
#: default mass cut per composition (Chernoff-bounded, carried to the +∞ atom).
DEFAULT_TAIL_MASS = 1e-16
#: profile truncation: δ(ε_hi) − δ(∞) ≤ this at the top of a single-step grid.
_PROFILE_TAIL = 1e-20
#: lower cut: δ(ε_lo) − (1 − e^{ε_lo}) ≤ this (mass below ε_lo is raised to ε_lo).
_LOWER_TAIL = 1e-16
#: largest single-step loss grid / FFT length accepted before asking for a coarser step.
MAX_GRID = 2**25
#: δ below this multiple of the estimated round-off is refused.
ROUNDOFF_FACTOR = 10.0
#: batches up to this size are built whole (vectorised); larger ones are mapped in chunks.
_SMALL_BATCH = 4
#: default number of output cells for mechanisms without a closed-form profile.
DEFAULT_OUTPUT_CELLS = 2**16


def _coarse_eps(n=8193):
    u = np.linspace(-7.0, 7.0, n)
    return np.sign(u) * np.expm1(np.abs(u))


_COARSE = _coarse_eps()
#: coarser range-finding grid of the batch queries (one per mechanism of the batch)
_COARSE_BATCH = _coarse_eps(2049)


# ----------------------------------------------------------------------------------
# static plan
# ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Plan:
    """Static sizes of a single-step PLD (hashable): grid offsets and lengths per direction.

    Built from concrete parameters by :func:`make_plan` (``pld`` does it for you);
    pass it to :func:`pld` to build PLDs from *traced* parameters inside ``jit``.
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
        return (self.step, self.remove[1:], None if self.add is None else self.add[1:], self.cells, self.count,
                len(self.klo), tuple(self.mirror))

    @property
    def offsets(self):
        """The dynamic part: (k0 remove, k0 add, discrete support starts) as float64 arrays."""
        return (jnp.asarray(float(self.remove[0])), jnp.asarray(float(self.add[0] if self.add else 0)),
                jnp.asarray(self.klo, jnp.float64))


def _validate(mech, sensitivity, sampling_prob, value_discretization_interval):
    if not isinstance(mech, Mechanism):
        raise ValueError(f"mech must be a dpjax Mechanism, got {type(mech).__name__}")
    check_positive("sensitivity", sensitivity)
    check_probability("sampling_prob", sampling_prob)
    check_positive("value_discretization_interval", value_discretization_interval)
    if not is_traced(value_discretization_interval) and float(value_discretization_interval) > 1.0:
        raise ValueError(f"value_discretization_interval must be <= 1, got {value_discretization_interval}")


def _q(sampling_prob):
    """None for no subsampling (a Python 1), else a float64 array."""
    if not is_traced(sampling_prob) and np.all(np.asarray(sampling_prob) == 1.0):
        return None
    return jnp.asarray(sampling_prob, jnp.float64)


def _pairs(mech, sensitivity):
    v, nv = mech.neighbour_pairs(sensitivity)
    return jnp.asarray(v, jnp.float64), jnp.asarray(nv, jnp.float64)


def _row_bounds(d, d_other_neg, eps):
    """Per-row (ε_lo, ε_hi) arrays of one direction from the envelope on the coarse (symmetric) grid.

    ``d_other_neg`` is the other direction's profile at −ε, so that the gap
    g(ε) = δ(ε) − (1 − e^ε) = e^ε δ_other(−ε) is computed without cancellation.
    """
    d = np.asarray(d).reshape(-1, eps.size)
    floor = d[:, -1:] + _PROFILE_TAIL
    hi_idx = np.argmax(d <= floor, axis=1)
    g = np.exp(np.minimum(eps, 700.0)) * np.asarray(d_other_neg).reshape(-1, eps.size)
    below = (g <= _LOWER_TAIL) & (np.arange(eps.size) <= hi_idx[:, None])
    lo_idx = np.where(below.any(axis=1), eps.size - 1 - np.argmax(below[:, ::-1], axis=1), 0)
    lo_idx = np.minimum(lo_idx, np.maximum(hi_idx - 1, 0))
    return eps[lo_idx], eps[hi_idx]


def _bounds(d, d_other_neg, eps):
    """(ε_lo, ε_hi) covering every row (a batch shares one grid)."""
    lo, hi = _row_bounds(d, d_other_neg, eps)
    return float(np.min(lo)), float(np.max(hi))


@x64
def make_plan(mech, *, sensitivity=1.0, sampling_prob=1.0, value_discretization_interval=DEFAULT_DISCRETIZATION,
              pessimistic=True, output_cells=DEFAULT_OUTPUT_CELLS) -> Plan:
    """Static grid sizes for ``pld(mech, ...)``, from concrete parameter values."""
    _validate(mech, sensitivity, sampling_prob, value_discretization_interval)
    output_cells = check_int("output_cells", output_cells, minimum=16)
    step = pow2_floor(float(value_discretization_interval))
    m = concrete(to64(mech))
    sens = concrete(sensitivity)
    qc = concrete(sampling_prob)
    if m is None or sens is None or qc is None:
        raise ValueError(
            "make_plan: mechanism parameters are traced (inside jit); build the plan outside jit from concrete "
            "parameters (accounting.make_plan(mech_concrete, ...)) and pass plan= to accounting.pld"
        )
    m = jax.tree_util.tree_map(jnp.asarray, m)
    q = _q(qc)
    values, nvalues = _pairs(m, jnp.asarray(sens, jnp.float64))
    me = expand(m)
    extra = {"cells": output_cells}
    if source_kind(m) == "discrete":
        extra.update(discrete_plan(me, values, nvalues))
    rem, add = _coarse_jit(me, values, nvalues, q, extra.get("klo"), output_cells, int(extra.get("count", 0)))
    dirs = []
    other = {0: rem if add is None else add, 1: rem}
    for i, d in enumerate((rem, add)):
        if d is None:
            dirs.append(None)
            continue
        lo, hi = _bounds(d, np.asarray(other[i])[..., ::-1], _COARSE)
        k0, k1 = math.floor(lo / step), math.ceil(hi / step)
        # lengths on the bucket ladder (the grid extends upwards, where δ ≈ δ(∞)): shared compiles
        n = bucket_len(max(k1 - k0 + 1, 3))
        dd = np.asarray(d).reshape(-1, _COARSE.size)
        big = _COARSE[np.argmax(np.all(dd < 0.25, axis=0))] if np.any(np.all(dd < 0.25, axis=0)) else hi
        ng = int(min(n, bucket_len(max(3, math.ceil(big / step) - k0 + 2))))
        if n > MAX_GRID:
            raise ValueError(
                f"value_discretization_interval: the loss range [{lo:.4g}, {hi:.4g}] needs {n} grid points at step "
                f"{step:.3g}; use a coarser value_discretization_interval (or a less extreme mechanism)"
            )
        dirs.append((k0, n, ng))
    klo = tuple(float(x) for x in np.atleast_1d(np.asarray(extra.get("klo", ()))))
    return Plan(step, dirs[0], dirs[1], output_cells, int(extra.get("count", 0)), klo, _mirrors(dirs))


def _mirror_ext(k0, n, k0o, g):
    """Static (below, above) extension of a grid (k0, n) holding the mirrored positions −(k0o + j),
    j < g, of the other grid, for either rounding shift (0 pessimistic, 1 optimistic); arrays are
    maxed over (a batch of offsets). Powers of two (shared compiles); None when evaluating the g
    mirrored points apart is no dearer."""
    below = int(np.max(np.asarray(k0) + np.asarray(k0o) + 2 + g - 1))
    above = int(np.max(-np.asarray(k0o) - np.asarray(k0) - n + 1))
    below, above = (0 if x <= 0 else _pow2(x) for x in (below, above))
    return (below, above) if below + above < g else None


def _mirrors(dirs):
    rem, add = dirs
    if add is None:
        return (_mirror_ext(rem[0], rem[1], rem[0], rem[2]), None)
    return (_mirror_ext(rem[0], rem[1], add[0], add[2]), _mirror_ext(add[0], add[1], rem[0], rem[2]))


@functools.partial(jax.jit, static_argnums=(5, 6))
def _coarse_jit(me, values, nvalues, q, klo, cells, count):
    coarse = jnp.asarray(_COARSE)
    extra = {"cells": cells}
    if count:
        extra.update(count=count, klo=klo)
    return envelope(me, values, nvalues, q, coarse, None if q is None else coarse, pessimistic=True, plan=extra)


# ----------------------------------------------------------------------------------
# the PLD object
# ----------------------------------------------------------------------------------
@pytree_dataclass
class PrivacyLossDistribution:
    """A (batch of) privacy-loss distribution(s), remove and add directions kept apart.

    Build with :func:`pld`. ``gaussian_mu`` is set for the exact (analytic) Gaussian PLD
    of μ = Δ/σ; otherwise ``remove`` (and ``add``, ``None`` when both directions agree)
    are grid pmfs.
    """

    remove: _grid.GridPmf | None = None
    add: _grid.GridPmf | None = None
    gaussian_mu: jax.Array | None = None
    pure_eps: jax.Array | None = None  # the mechanisms' own pure-ε bound, composed (None: unknown)
    pessimistic: bool = static_field(default=True)
    step: float = static_field(default=DEFAULT_DISCRETIZATION)

    # -- structure ---------------------------------------------------------------------
    @property
    def is_analytic(self) -> bool:
        return self.gaussian_mu is not None

    @property
    def batch_shape(self):
        if self.is_analytic:
            return tuple(jnp.shape(self.gaussian_mu))
        return tuple(self.remove.batch_shape)

    def _directions(self):
        return (self.remove,) if self.add is None else (self.remove, self.add)

    @x64
    def to_grid(self, value_discretization_interval=None) -> "PrivacyLossDistribution":
        """The grid (connect-the-dots) PLD of an analytic one (needs concrete μ)."""
        if not self.is_analytic:
            return self
        step = self.step if value_discretization_interval is None else pow2_floor(float(value_discretization_interval))
        mu = concrete(self.gaussian_mu)
        if mu is None:
            raise ValueError("to_grid: μ is traced; call outside jit or pass plan= to accounting.pld")
        return pld(Gaussian(sigma=1.0 / jnp.asarray(self.gaussian_mu)), value_discretization_interval=step,
                   pessimistic=self.pessimistic, use_analytic=False)

    # -- composition -------------------------------------------------------------------
    @x64
    def compose(self, other: "PrivacyLossDistribution", *, tail_mass_truncation=DEFAULT_TAIL_MASS):
        """The PLD of running both mechanisms (heterogeneous composition, one FFT)."""
        if not isinstance(other, PrivacyLossDistribution):
            raise ValueError(f"other must be a PrivacyLossDistribution, got {type(other).__name__}")
        if self.pessimistic != other.pessimistic:
            raise ValueError("other: cannot compose a pessimistic PLD with an optimistic one")
        check_positive("tail_mass_truncation", tail_mass_truncation)
        if self.is_analytic and other.is_analytic:
            mu = jnp.sqrt(jnp.asarray(self.gaussian_mu) ** 2 + jnp.asarray(other.gaussian_mu) ** 2)
            return PrivacyLossDistribution(gaussian_mu=mu, pessimistic=self.pessimistic, step=self.step)
        a = self.to_grid(other.step if self.is_analytic else None)
        b = other.to_grid(a.step)
        if a.step != b.step:
            raise ValueError(
                f"other: discretization intervals differ ({a.step} vs {b.step}); build both with the same "
                "value_discretization_interval"
            )
        rem = _compose_trim(a.remove, b.remove, a.pessimistic, float(tail_mass_truncation))
        if a.add is None and b.add is None:
            add = None
        else:
            add = _compose_trim(a.add or a.remove, b.add or b.remove, a.pessimistic, float(tail_mass_truncation))
        return PrivacyLossDistribution(rem, add, None, _sum_pure(self.pure_eps, other.pure_eps), a.pessimistic, a.step)

    @x64
    def self_compose(self, count: int, *, tail_mass_truncation=DEFAULT_TAIL_MASS, size: int | None = None):
        """The PLD of ``count`` independent runs: one FFT power per direction.

        ``size`` (static FFT length / window) is chosen from a Chernoff bound on
        concrete values; inside ``jit`` pass it explicitly (e.g. from a concrete run,
        ``pld.self_compose(T).remove.size``). Mass outside the window is Chernoff-bounded
        and carried to the +∞ atom (pessimistic).
        """
        count = check_int("count", count, minimum=1)
        check_positive("tail_mass_truncation", tail_mass_truncation)
        if count == 1:
            return self
        if self.is_analytic:
            mu = jnp.asarray(self.gaussian_mu) * math.sqrt(count)
            return PrivacyLossDistribution(gaussian_mu=mu, pessimistic=self.pessimistic, step=self.step)
        tail = float(tail_mass_truncation)
        outs = []
        for pmf in self._directions():
            s = size if size is not None else _window_size(pmf, count, tail)
            s = check_int("size", s, minimum=pmf.size)
            outs.append(x64_vjp(functools.partial(_self_compose_jit, count=count, size=s, tail=tail,
                                                  pessimistic=self.pessimistic))(pmf))
        pure = None if self.pure_eps is None else self.pure_eps * count
        return PrivacyLossDistribution(outs[0], outs[1] if len(outs) > 1 else None, None, pure, self.pessimistic, self.step)

    # -- queries -----------------------------------------------------------------------
    @x64
    def get_delta_for_epsilon(self, epsilon):
        """δ(ε) (max over directions); ``epsilon`` scalar or array → shape batch + ε.shape."""
        eps = jnp.asarray(epsilon, jnp.float64)
        if not is_traced(epsilon):
            e = np.asarray(epsilon, float)
            if np.isnan(e).any():
                raise ValueError(f"epsilon must not be NaN, got {epsilon!r}")
        shp = eps.shape
        flat = jnp.broadcast_to(eps.reshape(-1), self.batch_shape + (max(eps.size, 1),))[..., : eps.size]
        return x64_vjp(_delta_core)(self, flat).reshape(self.batch_shape + shp)

    def _delta_core(self, flat):
        if self.is_analytic:
            mu = jnp.asarray(self.gaussian_mu, jnp.float64)[..., None]
            out = gaussian_privacy_profile(flat, mu)
            out = jnp.clip(out, 0.0, 1.0)
        else:
            outs = []
            for pmf in self._directions():
                d = _grid.delta_for_epsilon(pmf, flat)
                r = pmf.roundoff[..., None]
                outs.append(jnp.minimum(d + r, 1.0) if self.pessimistic else jnp.maximum(d - r, 0.0))
            out = functools.reduce(jnp.maximum, outs)
        return out

    @x64
    def get_epsilon_for_delta(self, delta):
        """Smallest ε with δ(ε) ≤ delta (max over directions); array in, batch + δ.shape out.

        Raises ``ValueError`` when ``delta`` is below the round-off floor of this PLD
        (the answer would be noise); inside ``jit`` such entries are NaN.
        """
        if not is_traced(delta):
            check_probability("delta", delta, high_open=True)
        dl = jnp.asarray(delta, jnp.float64)
        shp = dl.shape
        flat = jnp.broadcast_to(dl.reshape(-1), self.batch_shape + (max(dl.size, 1),))[..., : dl.size]
        if not self.is_analytic:
            for pmf in self._directions():
                _check_floor(flat, ROUNDOFF_FACTOR * pmf.roundoff[..., None])
        return x64_vjp(_epsilon_core)(self, flat).reshape(self.batch_shape + shp)

    def _epsilon_core(self, flat):
        if self.is_analytic:
            return _gaussian_epsilon(jnp.asarray(self.gaussian_mu, jnp.float64)[..., None], flat)
        outs = []
        for pmf in self._directions():
            floor = ROUNDOFF_FACTOR * pmf.roundoff[..., None]
            # pessimistic: answer for δ − round-off (sound); optimistic: for δ + round-off
            r = pmf.roundoff[..., None]
            e = _grid.epsilon_for_delta(pmf, flat - r if self.pessimistic else flat + r)
            outs.append(jnp.where(flat < floor, jnp.nan, e))
        return functools.reduce(jnp.maximum, outs)

    @x64
    def get_epsilon_bounds(self, delta):
        """Alias kept for symmetry with prv_accountant: same as :meth:`get_epsilon_for_delta`."""
        return self.get_epsilon_for_delta(delta)

    @x64
    def pure_epsilon(self):
        """The pure-DP ε (largest loss with mass, both directions); ∞ if any mass is at +∞."""
        if self.is_analytic:
            return jnp.full(self.batch_shape, jnp.inf)
        grid = functools.reduce(jnp.maximum, [_grid.pure_epsilon(p) for p in self._directions()])
        return grid if self.pure_eps is None else jnp.minimum(grid, self.pure_eps)

    @property
    def roundoff(self):
        """Estimated absolute float64 round-off of δ (max over directions)."""
        if self.is_analytic:
            return jnp.zeros(self.batch_shape)
        return functools.reduce(jnp.maximum, [p.roundoff for p in self._directions()])


@jax.jit
def _delta_core(p, flat):
    return p._delta_core(flat)


@jax.jit
def _epsilon_core(p, flat):
    return p._epsilon_core(flat)


def _check_floor(delta, floor):
    if is_traced(delta) or is_traced(floor):
        return
    d, f = np.asarray(delta), np.asarray(floor)
    bad = d < f
    if bad.any():
        raise ValueError(
            f"delta={float(d[bad].min()):.3g} is below the float64 round-off floor {float(f.max()):.3g} of this PLD: "
            "the answer would be dominated by numerical error. Ask for a larger delta, use fewer compositions "
            "per FFT, or a coarser value_discretization_interval (smaller grids carry less round-off)."
        )


def _window_size(pmf, count, tail):
    conc = concrete(pmf.probs)
    if conc is not None and is_traced(pmf.probs):  # eager jax.grad: plan on the primal values
        pmf = _grid.GridPmf(jnp.asarray(conc), jnp.asarray(concrete(pmf.offset)), jnp.asarray(concrete(pmf.inf_mass)),
                            jnp.asarray(concrete(pmf.roundoff)), pmf.step)
    if conc is None:
        raise ValueError(
            "size: the PLD is traced (inside jit); pass self_compose(count, size=...) with a static FFT length "
            "(take it from a concrete run: pld.self_compose(count).remove.size)"
        )
    need = _grid.required_window(pmf, count, tail)
    size = bucket_len(max(need, pmf.size))
    if size > MAX_GRID:
        raise ValueError(
            f"count: the {count}-fold composition needs an FFT of length {size}; use a coarser "
            "value_discretization_interval"
        )
    return size


@functools.partial(jax.jit, static_argnames=("count", "size", "tail", "pessimistic"))
def _self_compose_jit(pmf, count, size, tail, pessimistic):
    return _grid.self_compose(pmf, count, size, tail, pessimistic)


@functools.partial(jax.jit, static_argnames=("pessimistic",))
def _compose_jit(a, b, pessimistic):
    return _grid.compose(a, b, pessimistic)


def _compose_trim(a, b, pessimistic, tail):
    out = x64_vjp(functools.partial(_compose_jit, pessimistic=pessimistic))(a, b)
    if is_traced(out.probs):
        return out
    start, stop = _grid.trim_window(out, tail)
    if not (start == 0 and stop >= out.size):
        out = _grid.trim(out, start, stop, pessimistic)
    return _grid.pad_to(out, bucket_len(out.size))  # zeros on top: sizes on the ladder share compiles


def _gaussian_epsilon(mu, delta):
    """ε of the Gaussian PLD of μ at δ (bisection + implicit gradient)."""
    mu, delta = jnp.broadcast_arrays(mu, delta)
    hi = mu * mu / 2.0 + mu * (jnp.abs(ndtri(jnp.clip(delta, 1e-300, 0.5))) + 2.0) + 1.0

    def fn(x, m):
        return gaussian_privacy_profile(x, m)

    eps = implicit_root(fn, mu, delta, jnp.zeros_like(mu), hi)
    return jnp.where(gaussian_privacy_profile(0.0, mu) <= delta, 0.0, eps)


# ----------------------------------------------------------------------------------
# construction
# ----------------------------------------------------------------------------------
def _sum_pure(a, b):
    return None if a is None or b is None else a + b


def _mech_pure(mech, sensitivity, q):
    """The mechanism's own pure-ε (``mech.pure_epsilon``), amplified by subsampling."""
    fn = getattr(mech, "pure_epsilon", None)
    if fn is None:
        return None
    eps = jnp.asarray(fn(sensitivity), jnp.float64)
    if q is not None:
        eps = jnp.log1p(q * jnp.expm1(eps))
    return jnp.broadcast_to(eps, tuple(mech.batch_shape))
def _is_plain_gaussian(mech, q):
    return type(mech) is Gaussian and q is None


@x64
def pld(mech, *, sensitivity=1.0, sampling_prob=1.0, value_discretization_interval=DEFAULT_DISCRETIZATION,
        pessimistic=True, use_analytic=True, output_cells=DEFAULT_OUTPUT_CELLS, plan: Plan | None = None):
    """The privacy-loss distribution of one run of ``mech`` on a query of ``sensitivity``.

    * ``sampling_prob``: Poisson subsampling rate q (add/remove neighbours; remove and add
      directions kept apart).
    * ``value_discretization_interval``: loss-grid step, rounded down to a power of two.
    * ``pessimistic``: dominating PLD (never below the true δ); ``False`` gives an
      optimistic estimate (never above), so the pair brackets the truth.
    * ``use_analytic``: keep the plain Gaussian mechanism as the exact Gaussian PLD.
    * ``output_cells``: output-grid size for mechanisms without closed-form profile.
    * ``plan``: static sizes (from :func:`make_plan`) — required when the parameters are
      traced (inside ``jit``).

    A mechanism with batched parameters gives a batch of PLDs.
    """
    _validate(mech, sensitivity, sampling_prob, value_discretization_interval)
    step = pow2_floor(float(value_discretization_interval))
    q = _q(sampling_prob)
    m64 = to64(mech)
    if use_analytic and _is_plain_gaussian(mech, q):
        mu = x64_vjp(lambda s, sig: to64(s) / to64(sig))(jnp.asarray(sensitivity), jnp.asarray(mech.sigma))
        return PrivacyLossDistribution(gaussian_mu=mu, pessimistic=pessimistic, step=step)
    if plan is None:
        plan = make_plan(mech, sensitivity=sensitivity, sampling_prob=sampling_prob,
                         value_discretization_interval=step, pessimistic=pessimistic, output_cells=output_cells)
    elif plan.step != step:
        raise ValueError(f"plan: built for step {plan.step}, but value_discretization_interval gives {step}")
    rem, add = x64_vjp(lambda m, s, qq: _build(to64(m), to64(s), qq, plan, bool(pessimistic)))(
        mech, jnp.asarray(sensitivity), q)
    return PrivacyLossDistribution(rem, add, None, _mech_pure(m64, sensitivity, q), bool(pessimistic), step)


def _build(mech, sensitivity, q, plan, pessimistic):
    """Single-step (remove, add) grid pmfs of ``plan``; compiled once per plan *shape*."""
    return _build_jit(mech, sensitivity, q, plan.offsets, plan.shape, pessimistic)


@functools.partial(jax.jit, static_argnums=(4, 5))
def _build_jit(mech, sensitivity, q, offsets, shape, pessimistic):
    return _build_core(mech, sensitivity, q, offsets, shape, pessimistic)


def _build_core(mech, sensitivity, q, offsets, shape, pessimistic):
    """``offsets`` = (k0_remove, k0_add, klo) traced; ``shape`` = :attr:`Plan.shape` (static)."""
    step, (nr, gr), add_shape, cells, count, _ = shape[:6]
    mirror = shape[6] if len(shape) > 6 else (None, None)
    k0r, k0a, klo = offsets
    values, nvalues = _pairs(mech, sensitivity)
    me = expand(mech)
    shift = 0.0 if pessimistic else 1.0
    eps_r = (k0r + shift + jnp.arange(nr, dtype=jnp.float64)) * step
    eps_a = None
    if add_shape is not None:
        na, ga = add_shape
        eps_a = (k0a + shift + jnp.arange(na, dtype=jnp.float64)) * step
    extra = {"cells": cells}
    if count:
        extra["count"] = count
        extra["klo"] = klo
    # the gap g(ε) = e^ε δ_other(−ε) is needed only where δ may exceed 1/2 (the first ng points)

    def gaps(d, eps, ng, dother):
        g = jnp.exp(eps[..., :ng]) * dother
        rest = d[..., ng:] - (1.0 - jnp.exp(eps[..., ng:]))  # unused by connect_the_dots (δ ≤ 1/2 there)
        return jnp.concatenate([jnp.broadcast_to(g, d.shape[:-1] + (ng,)), rest], -1)

    def args(k0, n, eps, k0o, g, eps_o, ext):
        """Where to evaluate one direction's profile: its grid, then the mirrored −ε of the other
        direction's first g points — or (ext) one contiguous grid holding both."""
        if ext is None:
            return jnp.concatenate([eps, -eps_o[..., :g]], -1)
        below, above = ext
        return (k0 + shift - below + jnp.arange(below + n + above, dtype=jnp.float64)) * step

    def split(vals, k0, n, k0o, g, ext):
        """(values on the grid, values at the mirrored points) from :func:`args`' evaluation."""
        if ext is None:
            return vals[..., :n], vals[..., n:]
        below, _ = ext
        # −(k0o + shift + j) sits at index c − j of the extended grid (start k0 + shift − below)
        start = (-k0o - k0 - 2.0 * shift + below - (g - 1)).astype(jnp.int32)
        mir = jax.lax.dynamic_slice_in_dim(vals, start, g, axis=vals.ndim - 1)
        return vals[..., below:below + n], jnp.flip(mir, -1)

    if eps_a is None:  # symmetric: g(ε) = e^ε δ(−ε)
        d, _ = envelope(me, values, nvalues, q, args(k0r, nr, eps_r, k0r, gr, eps_r, mirror[0]), None,
                        pessimistic=pessimistic, plan=extra)
        d, dneg = split(d, k0r, nr, k0r, gr, mirror[0])
        return _grid.from_profile(d, gaps(d, eps_r, gr, dneg), k0r, step), None
    dr, da = envelope(me, values, nvalues, q, args(k0r, nr, eps_r, k0a, ga, eps_a, mirror[0]),
                      args(k0a, na, eps_a, k0r, gr, eps_r, mirror[1]), pessimistic=pessimistic, plan=extra)
    dr, dr_mir = split(dr, k0r, nr, k0a, ga, mirror[0])
    da, da_mir = split(da, k0a, na, k0r, gr, mirror[1])
    rem = _grid.from_profile(dr, gaps(dr, eps_r, gr, da_mir), k0r, step)
    add = _grid.from_profile(da, gaps(da, eps_a, ga, dr_mir), k0a, step)
    return rem, add


def identity(*, value_discretization_interval=DEFAULT_DISCRETIZATION, pessimistic=True):
    """The PLD of releasing nothing (loss 0 with probability 1)."""
    with jax.enable_x64(True):
        step = pow2_floor(float(value_discretization_interval))
        probs = jnp.asarray([1.0, 0.0, 0.0])
        pmf = _grid.GridPmf(probs, jnp.asarray(0.0), jnp.asarray(0.0), jnp.asarray(0.0), step)
        return PrivacyLossDistribution(pmf, None, None, jnp.asarray(0.0), pessimistic, step)


# ----------------------------------------------------------------------------------
# fused, memory-bounded batch queries
# ----------------------------------------------------------------------------------
def _element_plans(flat, sens, q, step, cells, extra):
    """Per-mechanism grid (k0, n, ng) arrays of each direction, from a coarse envelope mapped in chunks."""
    count = int(extra.get("count", 0))
    klo = extra.get("klo")
    rem, add = _coarse_map_jit(flat, sens, q, klo, jnp.asarray(_COARSE_BATCH), cells, count)
    rem = np.asarray(rem)
    add = None if add is None else np.asarray(add)
    other = {0: rem if add is None else add, 1: rem}
    out = []
    for i, d in enumerate((rem, add)):
        if d is None:
            out.append(None)
            continue
        lo, hi = _row_bounds(d, other[i][..., ::-1], _COARSE_BATCH)
        k0 = np.floor(lo / step)
        n = np.maximum(np.ceil(hi / step) - k0 + 1, 3)
        small = d < 0.25
        big = np.where(small.any(axis=1), _COARSE_BATCH[np.argmax(small, axis=1)], hi)
        ng = np.minimum(n, np.maximum(3, np.ceil(big / step) - k0 + 2))
        if np.max(n) > MAX_GRID:
            raise ValueError(
                f"value_discretization_interval: a loss range needs {int(np.max(n))} grid points at step {step:.3g}; "
                "use a coarser value_discretization_interval (or a less extreme mechanism)")
        out.append((k0, n.astype(np.int64), ng.astype(np.int64)))
    return out


@functools.partial(jax.jit, static_argnums=(5, 6))
def _coarse_map_jit(flat, sens, q, klo, coarse, cells, count):
    def one(m):
        values, nvalues = _pairs(m, sens)
        extra = {"cells": cells}
        if count:
            extra.update(count=count, klo=klo)
        return envelope(expand(m), values, nvalues, q, coarse, None if q is None else coarse, pessimistic=True,
                        plan=extra)

    return jax.lax.map(one, flat, batch_size=32)


def _pow2(n):
    return 1 << (max(int(n), 1) - 1).bit_length()


def _groups(dirs, step, cells, count, nklo):
    """Bucket the batch by (power-of-two) remove-grid length: {shape: indices}. One compile per
    bucket, no mechanism's remove grid padded beyond twice its own length."""
    rem, add = dirs
    keys = [_pow2(rem[1][i]) for i in range(rem[1].size)]  # the add grid follows (fewer compiles)
    out = {}
    for key in sorted(set(keys)):
        idx = np.asarray([i for i, k in enumerate(keys) if k == key])
        nr = key
        shp_r = (nr, int(min(nr, bucket_len(np.max(rem[2][idx])))))
        shp_a = None
        if add is not None:
            na = _pow2(np.max(add[1][idx]))
            shp_a = (na, int(min(na, bucket_len(np.max(add[2][idx])))))
        k0r = rem[0][idx]
        mir = (_mirror_ext(k0r, shp_r[0], k0r, shp_r[1]), None) if add is None else (
            _mirror_ext(k0r, shp_r[0], add[0][idx], shp_a[1]), _mirror_ext(add[0][idx], shp_a[0], k0r, shp_r[1]))
        out[(step, shp_r, shp_a, cells, count, nklo, mir)] = idx
    return out


def _chunk_for(n):
    return max(1, min(16, (1 << 20) // max(int(n), 1)))


@functools.partial(jax.jit, static_argnums=(6, 7, 8, 9))
def _window_map_jit(flat, sens, q, k0r, k0a, klo, shape, pessimistic, count, tail):
    def one(x):
        m, a, b = x
        rem, add = _build_core(m, sens, q, (a, b, klo), shape, pessimistic)
        return tuple(hi - lo + 1.0 for lo, hi, _ in
                     (_grid.chernoff_window(p, count, tail) for p in (rem, add) if p is not None))

    return jax.lax.map(one, (flat, k0r, k0a), batch_size=_chunk_for(max(shape[1][0], (shape[2] or (0,))[0])))


@functools.partial(jax.jit, static_argnums=(6, 7, 8, 9, 10, 11))
def _query_map_jit(flat, sens, q, k0r, k0a, klo, shape, pessimistic, count, sizes, tail, kind, arg):
    def one(x):
        m, a, b = x
        rem, add = _build_core(m, sens, q, (a, b, klo), shape, pessimistic)
        outs, ok = [], jnp.asarray(True)
        for i, pmf in enumerate(p for p in (rem, add) if p is not None):
            if count > 1:
                pmf, width = _grid.self_compose(pmf, count, sizes[i], tail, pessimistic, with_width=True)
                ok = ok & (width <= sizes[i])
            outs.append(_answer(pmf, kind, arg, pessimistic))
        return functools.reduce(jnp.maximum, outs), ok

    n = max(sizes) if count > 1 else max(shape[1][0], (shape[2] or (0,))[0])
    return jax.lax.map(one, (flat, k0r, k0a), batch_size=_chunk_for(2 * n))


def _sizes(widths, shape):
    out = []
    for w, s in zip(widths, [shape[1], shape[2]]):
        size = bucket_len(max(int(np.max(np.asarray(w))), s[0]))
        if size > MAX_GRID:
            raise ValueError(f"count: the composition needs an FFT of length {size}; use a coarser "
                             "value_discretization_interval")
        out.append(size)
    return tuple(out)


def _fused_batch(kind, mech, arg, count, sensitivity, sampling_prob, value_discretization_interval, pessimistic,
                 tail_mass_truncation, output_cells):
    """Batch query: mechanisms bucketed by their own grid length, each built once, mapped in chunks.

    FFT lengths per bucket come from the Chernoff windows of a few sampled members (grown by
    5 %); a member whose own window does not fit (checked inside the same pass) is recomputed
    with its exact length, so the sample only affects speed, never the answer.
    """
    _validate(mech, sensitivity, sampling_prob, value_discretization_interval)
    count = check_int("count", count, minimum=1)
    output_cells = check_int("output_cells", output_cells, minimum=16)
    step = pow2_floor(float(value_discretization_interval))
    m64 = jax.tree_util.tree_map(jnp.asarray, concrete(to64(mech)))
    shape_b = tuple(m64.batch_shape)
    flat = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, shape_b).reshape(-1), m64)
    sens = jnp.asarray(concrete(sensitivity), jnp.float64)
    q = _q(concrete(sampling_prob))
    extra = {"cells": output_cells}
    if source_kind(m64) == "discrete":
        values, nvalues = _pairs(m64, sens)
        extra.update(discrete_plan(expand(m64), values, nvalues))
    dirs = _element_plans(flat, sens, q, step, output_cells, extra)
    klo = jnp.asarray(np.atleast_1d(np.asarray(extra.get("klo", ()))), jnp.float64)
    nklo = int(klo.size)
    count_d = int(extra.get("count", 0))
    k0r = jnp.asarray(dirs[0][0])
    k0a = jnp.asarray(dirs[1][0] if dirs[1] is not None else np.zeros_like(dirs[0][0]))
    a = jnp.asarray(arg, jnp.float64).reshape(-1)
    tail = float(tail_mass_truncation)
    pess = bool(pessimistic)
    result = np.empty((k0r.shape[0], a.shape[0]))

    def take(idx):
        ix = jnp.asarray(idx)
        return jax.tree_util.tree_map(lambda x: x[ix], flat), k0r[ix], k0a[ix]

    for shape, idx in _groups(dirs, step, output_cells, count_d, nklo).items():
        fl, r0, a0 = take(idx)
        sizes = None
        if count > 1:
            pick = np.unique(np.linspace(0, idx.size - 1, min(idx.size, 5)).round().astype(int))
            sub = jax.tree_util.tree_map(lambda x: x[pick], fl)
            w = _window_map_jit(sub, sens, q, r0[pick], a0[pick], klo, shape, pess, count, tail)
            sizes = _sizes([np.ceil(np.max(np.asarray(x)) * 1.05) + 16 for x in w], shape)
        out, ok = _query_map_jit(fl, sens, q, r0, a0, klo, shape, pess, count, sizes, tail, kind, a)
        out, ok = np.asarray(out), np.asarray(ok)
        if not ok.all():  # exact windows for the members that did not fit
            bad = np.nonzero(~ok)[0]
            sub = jax.tree_util.tree_map(lambda x: x[jnp.asarray(bad)], fl)
            w = _window_map_jit(sub, sens, q, r0[bad], a0[bad], klo, shape, pess, count, tail)
            sizes = _sizes([np.max(np.asarray(x)) for x in w], shape)
            out[bad] = np.asarray(_query_map_jit(sub, sens, q, r0[bad], a0[bad], klo, shape, pess, count, sizes,
                                                 tail, kind, a)[0])
        result[idx] = out
        _trim_heap()
    return jnp.asarray(result).reshape(shape_b + jnp.shape(arg))


def _trim_heap():
    """Hand freed heap pages back to the OS between groups (glibc only; a no-op elsewhere).

    Each group compiles its own programs; XLA's compile-time scratch would otherwise stay
    in the allocator's free lists and add up across groups in the peak RSS."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except Exception:  # pragma: no cover - not glibc
        pass


@functools.partial(jax.jit, static_argnums=(4, 5, 6, 7))
def _build_windows_jit(mech, sensitivity, q, offsets, shape, pessimistic, count, tail):
    """Single-step pmfs and (count > 1) the Chernoff window width of their composition, one call."""
    rem, add = _build_core(mech, sensitivity, q, offsets, shape, pessimistic)
    widths = ()
    if count > 1:
        widths = tuple(jnp.max(hi - lo) + 1.0 for lo, hi, _ in
                       (_grid.chernoff_window(p, count, tail) for p in (rem, add) if p is not None))
    return rem, add, widths


def _answer(pmf, kind, arg, pessimistic):
    """ε at δ = ``arg`` (NaN below the round-off floor) or δ at ε = ``arg`` of one direction's
    grid PLD, with its accumulated round-off added on the pessimistic side."""
    r = pmf.roundoff[..., None]
    if kind == "epsilon":
        e = _grid.epsilon_for_delta(pmf, arg - r if pessimistic else arg + r)
        return jnp.where(arg < ROUNDOFF_FACTOR * r, jnp.nan, e)
    d = _grid.delta_for_epsilon(pmf, arg)
    return jnp.minimum(d + r, 1.0) if pessimistic else jnp.maximum(d - r, 0.0)


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5, 6))
def _compose_query_jit(rem, add, count, sizes, tail, pessimistic, kind, arg):
    """Self-compose both directions (FFT lengths ``sizes``) and answer the query, one call.
    Also returns the round-off floor (max over directions) for the host-side check."""
    outs, floors = [], []
    for i, pmf in enumerate(p for p in (rem, add) if p is not None):
        if count > 1:
            pmf = _grid.self_compose(pmf, count, sizes[i], tail, pessimistic)
        outs.append(_answer(pmf, kind, arg, pessimistic))
        floors.append(ROUNDOFF_FACTOR * pmf.roundoff[..., None])
    return functools.reduce(jnp.maximum, outs), functools.reduce(jnp.maximum, floors)


def _fused_small(kind, mech, arg, count, sensitivity, sampling_prob, value_discretization_interval, pessimistic,
                 tail_mass_truncation, output_cells):
    """Concrete, small batch: ``pld(...).self_compose(count).get_*`` in three compiled calls
    (plan; build + windows; compose + query) with the same answer, no autodiff wrappers."""
    count = check_int("count", count, minimum=1)
    check_positive("tail_mass_truncation", tail_mass_truncation)
    step = pow2_floor(float(value_discretization_interval))
    plan = make_plan(mech, sensitivity=sensitivity, sampling_prob=sampling_prob, value_discretization_interval=step,
                     pessimistic=pessimistic, output_cells=output_cells)
    tail = float(tail_mass_truncation)
    pess = bool(pessimistic)
    m64 = to64(mech)
    rem, add, widths = _build_windows_jit(m64, jnp.asarray(sensitivity, jnp.float64), _q(sampling_prob),
                                          plan.offsets, plan.shape, pess, count, tail)
    sizes = ()
    if count > 1:
        sizes = tuple(bucket_len(max(int(w), p.size)) for w, p in zip(widths, (rem, add) if add is not None else (rem,)))
        if max(sizes) > MAX_GRID:
            raise ValueError(f"count: the {count}-fold composition needs an FFT of length {max(sizes)}; use a coarser "
                             "value_discretization_interval")
    a = jnp.asarray(arg, jnp.float64)
    if kind == "delta" and np.isnan(np.asarray(a)).any():
        raise ValueError(f"epsilon must not be NaN, got {arg!r}")
    batch = tuple(rem.batch_shape)
    flat = jnp.broadcast_to(a.reshape(-1), batch + (max(a.size, 1),))[..., : a.size]
    out, floor = _compose_query_jit(rem, add, count, sizes, tail, pess, kind, flat)
    if kind == "epsilon":
        _check_floor(flat, floor)
    return out.reshape(batch + a.shape)


def _fused_query(kind, mech, arg, count, sensitivity, sampling_prob, value_discretization_interval, pessimistic,
                 tail_mass_truncation, output_cells, use_analytic):
    """Shared body of :func:`get_epsilon` / :func:`get_delta`."""
    if not isinstance(mech, Mechanism):
        raise ValueError(f"mech must be a dpjax Mechanism, got {type(mech).__name__}")
    q = _q(sampling_prob)
    batched = (concrete(mech) is not None and concrete(sensitivity) is not None
               and concrete(sampling_prob) is not None and not is_traced(sampling_prob)
               and not any(is_traced(x) for x in jax.tree_util.tree_leaves(mech)) and not is_traced(sensitivity))
    small = math.prod(mech.batch_shape) <= _SMALL_BATCH
    if batched and small and not (use_analytic and _is_plain_gaussian(mech, q)):
        return _fused_small(kind, mech, arg, count, sensitivity, sampling_prob, value_discretization_interval,
                            pessimistic, tail_mass_truncation, output_cells)
    if (use_analytic and _is_plain_gaussian(mech, q)) or small or not batched:
        p = pld(mech, sensitivity=sensitivity, sampling_prob=sampling_prob,
                value_discretization_interval=value_discretization_interval, pessimistic=pessimistic,
                output_cells=output_cells, use_analytic=use_analytic).self_compose(
            count, tail_mass_truncation=tail_mass_truncation)
        return p.get_epsilon_for_delta(arg) if kind == "epsilon" else p.get_delta_for_epsilon(arg)
    if jnp.ndim(sampling_prob) > 0:
        raise ValueError("sampling_prob: the batch query takes one sampling_prob for the whole batch "
                         "(use accounting.pld for per-mechanism rates)")
    return _fused_batch(kind, mech, arg, count, sensitivity, sampling_prob, value_discretization_interval,
                        pessimistic, tail_mass_truncation, output_cells)


@x64
def get_epsilon(mech, delta, *, count=1, sensitivity=1.0, sampling_prob=1.0,
                value_discretization_interval=DEFAULT_DISCRETIZATION, pessimistic=True,
                tail_mass_truncation=DEFAULT_TAIL_MASS, output_cells=DEFAULT_OUTPUT_CELLS, use_analytic=True):
    """ε at ``delta`` after ``count`` runs of ``mech``, for every mechanism of a batch.

    One jit-compiled call; large batches are processed in chunks (``lax.map``) so
    memory stays bounded whatever the batch size. Returns shape batch + δ.shape. NaN
    marks a ``delta`` below the round-off floor.
    """
    check_probability("delta", delta, high_open=True)
    return _fused_query("epsilon", mech, delta, count, sensitivity, sampling_prob, value_discretization_interval,
                        pessimistic, tail_mass_truncation, output_cells, use_analytic)


@x64
def get_delta(mech, epsilon, *, count=1, sensitivity=1.0, sampling_prob=1.0,
              value_discretization_interval=DEFAULT_DISCRETIZATION, pessimistic=True,
              tail_mass_truncation=DEFAULT_TAIL_MASS, output_cells=DEFAULT_OUTPUT_CELLS, use_analytic=True):
    """δ at ``epsilon`` after ``count`` runs of ``mech``, for every mechanism of a batch (see :func:`get_epsilon`)."""
    check_real("epsilon", epsilon)
    return _fused_query("delta", mech, epsilon, count, sensitivity, sampling_prob, value_discretization_interval,
                        pessimistic, tail_mass_truncation, output_cells, use_analytic)
