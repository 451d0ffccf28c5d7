"""Privacy-loss distributions (PLDs) of dpjax mechanisms: build, compose, query.

Names follow Google's dp_accounting. A :class:`PrivacyLossDistribution` keeps the
*remove* and *add* directions separately (they differ under Poisson subsampling) and
reports the max. It is a pytree: a mechanism with batched parameters gives a batch of
PLDs, and every query returns an array over that batch.

Construction (see docs/accounting.md): for every neighbouring pair the mechanism
declares (``mech.neighbour_pairs(sensitivity)``), in both orders, the privacy profile
δ(ε) is evaluated on a power-of-two loss grid — closed form where the mechanism has
one (``hockey_stick``), exact atoms for discrete mechanisms, an output-space grid
otherwise — Poisson subsampling is applied per pair, the pointwise max is taken, and
connect-the-dots turns it into a dominating PLD (pessimistic; an optimistic estimate
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
from accounting._numerics import concrete, implicit_root, next_fast_len, pow2_floor, to64, x64, x64_vjp
from accounting._profiles import discrete_plan, envelope, expand, source_kind
from dpjax._pytree import pytree_dataclass, static_field
from dpjax._validation import check_int, check_positive, check_probability, check_real, is_traced
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


def _coarse_eps():
    u = np.linspace(-7.0, 7.0, 8193)
    return np.sign(u) * np.expm1(np.abs(u))


_COARSE = _coarse_eps()


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


def _bounds(d, d_other_neg, eps):
    """(ε_lo, ε_hi) of one direction from the envelope on the coarse (symmetric) grid.

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
    return float(np.min(eps[lo_idx])), float(np.max(eps[hi_idx]))


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
        n = max(k1 - k0 + 1, 3)
        dd = np.asarray(d).reshape(-1, _COARSE.size)
        big = _COARSE[np.argmax(np.all(dd < 0.25, axis=0))] if np.any(np.all(dd < 0.25, axis=0)) else hi
        ng = int(min(n, max(3, math.ceil(big / step) - k0 + 2)))
        if n > MAX_GRID:
            raise ValueError(
                f"value_discretization_interval: the loss range [{lo:.4g}, {hi:.4g}] needs {n} grid points at step "
                f"{step:.3g}; use a coarser value_discretization_interval (or a less extreme mechanism)"
            )
        dirs.append((k0, n, ng))
    klo = tuple(float(x) for x in np.atleast_1d(np.asarray(extra.get("klo", ()))))
    return Plan(step, dirs[0], dirs[1], output_cells, int(extra.get("count", 0)), klo)


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
    size = next_fast_len(max(need, pmf.size))
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
    if start == 0 and stop >= out.size:
        return out
    return _grid.trim(out, start, stop, pessimistic)


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


@functools.partial(jax.jit, static_argnums=(3, 4))
def _build(mech, sensitivity, q, plan, pessimistic):
    values, nvalues = _pairs(mech, sensitivity)
    me = expand(mech)
    shift = 0.0 if pessimistic else 1.0
    eps_r = (plan.remove[0] + shift + jnp.arange(plan.remove[1], dtype=jnp.float64)) * plan.step
    eps_a = None
    if plan.add is not None:
        eps_a = (plan.add[0] + shift + jnp.arange(plan.add[1], dtype=jnp.float64)) * plan.step
    extra = {"cells": plan.cells}
    if plan.count:
        extra["count"] = plan.count
        extra["klo"] = jnp.asarray(plan.klo)
    # the gap g(ε) = e^ε δ_other(−ε) is needed only where δ may exceed 1/2 (the first ng points)
    nr, gr = eps_r.shape[0], plan.remove[2]

    def gaps(d, eps, ng, dother):
        g = jnp.exp(eps[:ng]) * dother
        rest = d[..., ng:] - (1.0 - jnp.exp(eps[ng:]))  # unused by connect_the_dots (δ ≤ 1/2 there)
        return jnp.concatenate([jnp.broadcast_to(g, d.shape[:-1] + (ng,)), rest], -1)

    if eps_a is None:  # symmetric: g(ε) = e^ε δ(−ε)
        d, _ = envelope(me, values, nvalues, q, jnp.concatenate([eps_r, -eps_r[:gr]]), None,
                        pessimistic=pessimistic, plan=extra)
        d, dneg = d[..., :nr], d[..., nr:]
        return _grid.from_profile(d, gaps(d, eps_r, gr, dneg), plan.remove[0], plan.step), None
    na, ga = eps_a.shape[0], plan.add[2]
    dr, da = envelope(me, values, nvalues, q, jnp.concatenate([eps_r, -eps_a[:ga]]),
                      jnp.concatenate([eps_a, -eps_r[:gr]]), pessimistic=pessimistic, plan=extra)
    rem = _grid.from_profile(dr[..., :nr], gaps(dr[..., :nr], eps_r, gr, da[..., na:]), plan.remove[0], plan.step)
    add = _grid.from_profile(da[..., :na], gaps(da[..., :na], eps_a, ga, dr[..., nr:]), plan.add[0], plan.step)
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
def _fused_common(mech, sensitivity, sampling_prob, count, value_discretization_interval, pessimistic,
                  tail_mass_truncation, output_cells):
    _validate(mech, sensitivity, sampling_prob, value_discretization_interval)
    count = check_int("count", count, minimum=1)
    step = pow2_floor(float(value_discretization_interval))
    plan = make_plan(mech, sensitivity=sensitivity, sampling_prob=sampling_prob, value_discretization_interval=step,
                     pessimistic=pessimistic, output_cells=output_cells)
    m64 = to64(mech)
    shape = tuple(m64.batch_shape)
    flat = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, shape).reshape(-1), m64)
    sens = jnp.asarray(sensitivity, jnp.float64)
    q = _q(sampling_prob)
    sizes = None
    if count > 1:
        need = _map_window(flat, sens, q, plan, bool(pessimistic), count, float(tail_mass_truncation))
        n_max = max(plan.remove[1], plan.add[1] if plan.add else 0)
        sizes = next_fast_len(max(int(np.max(np.asarray(need))) + 1, n_max))
        if sizes > MAX_GRID:
            raise ValueError(f"count: the composition needs an FFT of length {sizes}; use a coarser "
                             "value_discretization_interval")
    return flat, sens, q, plan, count, sizes, shape


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _map_window_jit(flat, sens, plan, pessimistic, count, tail, q):
    def one(m):
        rem, add = _build(m, sens, q, plan, pessimistic)
        ws = [_grid.chernoff_window(p, count, tail) for p in (rem, add) if p is not None]
        return functools.reduce(jnp.maximum, [hi - lo for lo, hi, _ in ws])

    return jax.lax.map(one, flat, batch_size=_chunk(plan))


def _map_window(flat, sens, q, plan, pessimistic, count, tail):
    return _map_window_jit(flat, sens, plan, pessimistic, count, tail, q)


def _chunk(plan):
    n = max(plan.remove[1], plan.add[1] if plan.add else 0)
    return max(1, min(16, (1 << 20) // max(n, 1)))


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5, 6, 7))
def _map_query(flat, sens, plan, pessimistic, count, size, tail, kind, q, arg):
    def one(m):
        rem, add = _build(m, sens, q, plan, pessimistic)
        p = PrivacyLossDistribution(rem, add, None, None, pessimistic, plan.step)
        outs = []
        for pmf in p._directions():
            if count > 1:
                pmf = _grid.self_compose(pmf, count, size, tail, pessimistic)
            r = pmf.roundoff[..., None]
            if kind == "epsilon":
                e = _grid.epsilon_for_delta(pmf, arg - r if pessimistic else arg + r)
                outs.append(jnp.where(arg < ROUNDOFF_FACTOR * r, jnp.nan, e))
            else:
                d = _grid.delta_for_epsilon(pmf, arg)
                outs.append(jnp.minimum(d + r, 1.0) if pessimistic else jnp.maximum(d - r, 0.0))
        return functools.reduce(jnp.maximum, outs)

    return jax.lax.map(one, flat, batch_size=_chunk(plan) if count == 1 else max(1, min(4, (1 << 20) // size)))


def _fused_query(kind, mech, arg, count, sensitivity, sampling_prob, value_discretization_interval, pessimistic,
                 tail_mass_truncation, output_cells, use_analytic):
    """Shared body of :func:`get_epsilon` / :func:`get_delta`."""
    if not isinstance(mech, Mechanism):
        raise ValueError(f"mech must be a dpjax Mechanism, got {type(mech).__name__}")
    q = _q(sampling_prob)
    if (use_analytic and _is_plain_gaussian(mech, q)) or math.prod(mech.batch_shape) <= _SMALL_BATCH:
        p = pld(mech, sensitivity=sensitivity, sampling_prob=sampling_prob,
                value_discretization_interval=value_discretization_interval, pessimistic=pessimistic,
                output_cells=output_cells, use_analytic=use_analytic).self_compose(
            count, tail_mass_truncation=tail_mass_truncation)
        return p.get_epsilon_for_delta(arg) if kind == "epsilon" else p.get_delta_for_epsilon(arg)
    flat, sens, q, plan, count, size, shape = _fused_common(
        mech, sensitivity, sampling_prob, count, value_discretization_interval, pessimistic,
        tail_mass_truncation, output_cells)
    a = jnp.asarray(arg, jnp.float64).reshape(-1)
    out = _map_query(flat, sens, plan, bool(pessimistic), count, size, float(tail_mass_truncation), kind, q, a)
    return out.reshape(shape + jnp.shape(arg))


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
