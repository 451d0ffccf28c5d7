"""The privacy odometer, and composition of a PLD by a traced count.

:class:`Accountant` records releases and reports the privacy spent, refusing a release
that would take ε past its budget. Its memory does not grow with the number of
releases: it keeps one entry per *distinct* (mechanism, sensitivity, sampling
probability), that entry's run count and the single-run PLD built once for it.
The privacy spent is the composition over entries of each single-run PLD composed
``count`` times: one FFT power per direction (:func:`self_compose_by_count`), whose
count is a traced argument, so that recording the same mechanism again — a DP-SGD
step — re-runs compiled code instead of compiling a program per count. FFT lengths
are the powers of two holding the composition window, so a growing count recompiles
only when its window crosses one.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading

import jax
import jax.numpy as jnp
import numpy as np

from accounting.privacy_loss import grid as _grid
from accounting._numerics import as64, host_leaves, jax_leaves, leaf64, x64, x64_vjp
from accounting.privacy_loss.construction import DEFAULT_TAIL_MASS, MAX_GRID
from accounting.privacy_loss.distribution import PrivacyLossDistribution, pld
from dpjax.mechanism import Mechanism
from dpjax.validation import check_int, check_positive, check_probability, is_traced

__all__ = ["Accountant", "Release", "self_compose_by_count"]

#: static bit counts of the square-and-multiply loop (a fixed trip count keeps it reverse-differentiable)
_COUNT_BITS = (8, 16, 24, 32, 48)


def _bits(count) -> int:
    """Smallest rung of :data:`_COUNT_BITS` holding the (concrete) largest count."""
    need = int(np.max(np.asarray(count))).bit_length()
    for b in _COUNT_BITS:
        if need <= b:
            return b
    raise ValueError(f"count must be below 2**{_COUNT_BITS[-1]}, got {int(np.max(np.asarray(count)))}")


# ----------------------------------------------------------------------------------
# composition by a traced count
# ----------------------------------------------------------------------------------
def _compose_core(p, count, sizes, bits, tail, xp=jnp):
    if xp is np:  # concrete: the FFT powers on the host (numpy), nothing compiled
        count = np.broadcast_to(np.asarray(count, np.float64), p.batch_shape)
        dirs = [
            _grid.on_host(_grid.self_compose, pmf, count, s, tail, p.pessimistic, bits=bits)
            for pmf, s in zip(p._directions(), sizes)
        ]
        with jax.enable_x64(True):
            pure = leaf64(np.asarray(p.pure_bound()) * count)
            count = as64(count)
        return p.composed_as(dirs[0], dirs[1] if len(dirs) > 1 else None, pure, count=count)
    count = jnp.broadcast_to(jnp.asarray(count, jnp.float64), p.batch_shape)
    dirs = [_grid.self_compose(pmf, count, s, tail, p.pessimistic, bits=bits) for pmf, s in zip(p._directions(), sizes)]
    return p.composed_as(dirs[0], dirs[1] if len(dirs) > 1 else None, p.pure_bound() * count, count=count)


@functools.partial(jax.jit, static_argnames=("sizes", "bits", "tail"))
def _compose_jit(p, count, sizes, bits, tail):
    return x64_vjp(functools.partial(_compose_core, sizes=sizes, bits=bits, tail=tail))(p, count)


@functools.partial(jax.jit, static_argnames=("tail",))
def _widths_jit(p, count, tail):
    count = jnp.broadcast_to(jnp.asarray(count, jnp.float64), p.batch_shape)
    return [
        jnp.max(hi - lo) + 1.0 for lo, hi, _ in (_grid.chernoff_window(pmf, count, tail) for pmf in p._directions())
    ]


def _widths(p, count, tail, on_host=True):
    """The widest Chernoff window of each direction of ``p``'s ``count``-fold composition (concrete), on
    the host or (``on_host`` False: a count that keeps growing) by one compiled program."""
    if on_host:
        return [_grid.required_window(pmf, count, tail) for pmf in p._directions()]
    with jax.enable_x64(True):
        return [int(w) for w in _widths_jit(p, jnp.asarray(count, jnp.float64), float(tail))]


def composition_grid(p: PrivacyLossDistribution, count, tail=DEFAULT_TAIL_MASS):
    """The grid PLD and static FFT lengths of the ``count``-fold composition of a concrete grid PLD.

    One power of two for both directions: a count that grows step by step (the odometer of a
    training loop) meets only a few distinct lengths. The windows are planned on the host.

    Args:
      p: a (concrete) grid :class:`PrivacyLossDistribution`.
      count: an integer, or an integer array over the batch.
      tail: the mass cut from the composition's tails.

    Returns:
      ``(grid PLD, sizes)``: ``p`` itself — or, adaptive, ``p`` coarsened until the widest window fits
      AUTO_WINDOW (:meth:`PrivacyLossDistribution.fitted_to_window`) — and the FFT lengths, one per
      direction, holding the composition of every member.

    Raises:
      ValueError: the composition needs an FFT beyond the largest grid, or ``p`` is traced inside ``jit``.
    """
    return _composition_grid(p, count, tail, True)


def _composition_grid(p, count, tail, on_host):
    """:func:`composition_grid`, its windows on the host or (``on_host`` False) by a compiled program."""
    count = np.broadcast_to(np.asarray(count, np.float64), p.batch_shape)
    widths = _widths(p, count, float(tail), on_host)
    fit = p.fitted_to_window(max(widths))
    if fit is not p:
        widths = _widths(fit, count, float(tail), on_host)
    size = 1 << (max(max(int(w), pmf.size) for w, pmf in zip(widths, fit._directions())) - 1).bit_length()
    sizes = (size,) * len(widths)
    if size > MAX_GRID:
        raise ValueError(
            f"count: the composition needs an FFT of length {max(sizes)}; use a coarser value_discretization_interval"
        )
    return fit, sizes


@x64
def self_compose_by_count(p: PrivacyLossDistribution, count, *, sizes=None, bits=None, tail=DEFAULT_TAIL_MASS):
    """The PLD of ``count`` independent runs of ``p``, the count an array instead of configuration.

    :meth:`PrivacyLossDistribution.self_compose` with the same window, tail bounds (+∞ atom) and
    round-off estimate; the power is taken by square-and-multiply. A concrete PLD and count are
    composed on the host (numpy), traced ones by one compiled program for every count. An analytic
    Gaussian PLD stays analytic (μ·√count).

    Args:
      p: the single-run PLD.
      count: an integer or an integer-valued array broadcasting to ``p.batch_shape`` (each member
        composed its own number of times).
      sizes: static FFT lengths per direction (from :func:`composition_grid` on concrete values, with
        the grid PLD to compose); ``None`` plans them here. Given ``sizes``, ``p`` is composed on its
        own grid. Pass it inside ``jit``.
      bits: static bound on the counts (below 2**bits), from the concrete count when ``None``; pass
        it inside ``jit``.
      tail: the mass cut from the tails.

    Returns:
      The composed :class:`PrivacyLossDistribution`.

    Raises:
      ValueError: a count of 2**48 or more, ``bits`` not a positive integer, or an FFT beyond the
        largest grid.
    """
    return _by_count(p, count, sizes, bits, tail, None)


def _by_count(p, count, sizes, bits, tail, on_host):
    """:func:`self_compose_by_count`, on the host (``on_host`` True), by the compiled program (False) or,
    ``None``, on the host where ``p`` and ``count`` are concrete."""
    p = p.resolved()
    if p.is_analytic:
        mu = jnp.asarray(p.gaussian_mu, jnp.float64) * jnp.sqrt(jnp.asarray(count, jnp.float64))
        return PrivacyLossDistribution(gaussian_mu=mu, pessimistic=p.pessimistic, step=p.step, adaptive=p.adaptive)
    if on_host is None:
        on_host = not (is_traced(p) or is_traced(count))
    if sizes is None:
        p, sizes = _composition_grid(p, count, tail, on_host)
    bits = _bits(count) if bits is None else check_int("bits", bits, minimum=1)
    sizes = tuple(int(s) for s in sizes)
    if on_host:
        return _compose_core(p, count, sizes, bits, float(tail), np)
    return _compose_jit(p, jnp.asarray(count, jnp.float64), sizes, bits, float(tail))


# ----------------------------------------------------------------------------------
# the odometer
# ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Release:
    """``count`` runs of ``mechanism`` on a query of ``sensitivity`` (Poisson rate ``sampling_prob``).

    Args:
      mechanism: the mechanism.
      sensitivity: the query's sensitivity.
      count: the number of runs recorded.
      sampling_prob: the Poisson sampling rate.
    """

    mechanism: Mechanism
    sensitivity: float
    count: int
    sampling_prob: float


def _key(mech, sensitivity, sampling_prob):
    """Identity of a release kind: mechanism type and static configuration, parameter values."""
    leaves, treedef = jax.tree_util.tree_flatten(mech)
    vals = tuple((np.asarray(x).dtype.str, np.asarray(x).shape, np.asarray(x).tobytes()) for x in leaves)
    return treedef, vals, float(sensitivity), float(sampling_prob)


class _Entry:
    """One distinct release kind: its single-run PLD (built once) and its current count."""

    def __init__(self, release: Release, step_pld: PrivacyLossDistribution):
        self.release = release
        self.step_pld = step_pld
        self._composed = (0, None)  # (count, PLD of count runs)

    def composed(self, count: int) -> PrivacyLossDistribution:
        """The PLD of ``count`` runs: the first composition of this kind on the host (nothing compiled),
        later ones — a repeated spend, a DP-SGD step — by the compiled program of a traced count, which
        every later count re-runs."""
        if self._composed[0] != count:
            hot = self._composed[0] > 1
            with jax.enable_x64(True):
                composed = (
                    self.step_pld
                    if count == 1
                    else _by_count(self.step_pld, count, None, None, DEFAULT_TAIL_MASS, False if hot else None)
                )
            self._composed = (count, composed)
        return self._composed[1]


class Accountant:
    """Records releases and reports the privacy spent, refusing what would exceed a budget.

    >>> import dpjax
    >>> acc = Accountant(epsilon_budget=3.0, delta=1e-5)
    >>> round(acc.record(dpjax.Gaussian(sigma=4.0), sensitivity=1.0, count=4), 2)  # ε spent so far
    1.99
    >>> round(acc.record(dpjax.Gaussian(sigma=1.0), sampling_prob=0.01), 2)  # one DP-SGD step
    1.99
    >>> acc.record(dpjax.Gaussian(sigma=1.0), count=10)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: epsilon_budget: this release would bring ε to 18.1... > budget 3 (δ=1e-05); it was refused ...
    >>> round(acc.spent_epsilon(), 2)  # nothing was recorded
    1.99

    Composition is exact (pessimistic PLD): releases of the same kind are composed by count
    (one FFT power), kinds are composed with each other by convolution. Memory is one entry
    per distinct kind — never per release — and recording a kind already seen costs one
    composition and one query of compiled code (milliseconds). Single mechanisms only (no
    batched parameters). ``value_discretization_interval=None`` (default): each kind's PLD takes
    the adaptive step of :func:`accounting.pld` (tiny per-release losses get a grid fine enough
    to resolve them), and kinds on different steps meet on the coarser grid.

    Thread-safe: one lock serialises every check-and-record and every read, so threads
    recording concurrently can never together pass the budget (each :meth:`record` sees the
    ledger as every earlier record left it) and reads see a state between records, never
    during one.

    Args:
      epsilon_budget: the budget in ε (``None``: none; needs ``delta``).
      delta: the δ at which ε is measured (``None``: give it to each query).
      value_discretization_interval: the loss-grid step, ``None`` (default) adaptive.

    Raises:
      ValueError: a budget without ``delta``, or a parameter out of range.
    """

    def __init__(self, *, epsilon_budget=None, delta=None, value_discretization_interval=None):
        if epsilon_budget is not None:
            check_positive("epsilon_budget", epsilon_budget, allow_inf=True)
            if delta is None:
                raise ValueError("delta: a budget in ε needs the δ at which it is measured")
        if delta is not None:
            check_probability("delta", delta, high_open=True)
        if value_discretization_interval is not None:
            check_positive("value_discretization_interval", value_discretization_interval)
            value_discretization_interval = float(value_discretization_interval)
        self.epsilon_budget = None if epsilon_budget is None else float(epsilon_budget)
        self.delta = None if delta is None else float(delta)
        # None: every kind's PLD takes the adaptive step of accounting.pld, and kinds of different steps
        # meet on the coarser grid when composed (PrivacyLossDistribution.compose)
        self.value_discretization_interval = value_discretization_interval
        self._entries: dict = {}
        # composition of every entry except one (key, PLD): what a repeated record of that key reuses
        self._rest = (None, None)
        self._total = None
        self._lock = threading.RLock()

    @property
    def releases(self) -> tuple[Release, ...]:
        """One :class:`Release` per distinct kind recorded (counts summed), in order of first record.

        Returns:
          A tuple of :class:`Release`.
        """
        with self._lock:
            return tuple(e.release for e in self._entries.values())

    @property
    def pld(self) -> PrivacyLossDistribution | None:
        """The composed PLD of everything recorded.

        Returns:
          A :class:`PrivacyLossDistribution`, ``None`` before the first record.
        """
        with self._lock:
            total = self._resolved_total()
            return None if total is None else jax_leaves(total)

    def _resolved_total(self):
        """The composed PLD of everything recorded, leaves as :func:`accounting._numerics.host_leaves` keeps
        them (the ledger's PLDs are read only here, under float64)."""
        with host_leaves():
            if self._total is None and self._entries:
                self._total = self._compose(next(reversed(self._entries)), None)
            if self._total is not None:
                self._total = self._total.resolved()
            return self._total

    def _rest_of(self, key):
        """Composition of every entry but ``key`` (None if there is none), cached for repeated records.
        A kind not recorded yet composes onto the running total: recording distinct kinds one by one
        is one composition each, not a recomposition of every earlier one."""
        if key not in self._entries:
            return self._total
        if self._rest[0] != key:
            rest = None
            for k, e in self._entries.items():
                if k != key:
                    c = e.composed(e.release.count)
                    rest = c if rest is None else rest.compose(c)
            self._rest = (key, rest)
        return self._rest[1]

    def _compose(self, key, extra):
        """Total PLD if entry ``key`` had ``extra`` = (count, step PLD) instead of its own state."""
        rest = self._rest_of(key)
        if extra is None:
            e = self._entries[key]
            mine = e.composed(e.release.count)
        else:
            count, step, entry = extra
            mine = (
                entry.composed(count)
                if entry is not None
                else (step if count == 1 else self_compose_by_count(step, count))
            )
        return mine if rest is None else rest.compose(mine)

    def _candidate(self, mech, sensitivity, count, sampling_prob):
        if not isinstance(mech, Mechanism):
            raise ValueError(f"mech must be a dpjax Mechanism, got {type(mech).__name__}")
        if mech.batch_shape != ():
            raise ValueError(f"mech: the accountant records single mechanisms, got batch shape {mech.batch_shape}")
        check_positive("sensitivity", sensitivity)
        count = check_int("count", count, minimum=1)
        check_probability("sampling_prob", sampling_prob)
        key = _key(mech, sensitivity, sampling_prob)
        entry = self._entries.get(key)
        if entry is None:
            step = pld(
                mech,
                sensitivity=sensitivity,
                sampling_prob=sampling_prob,
                value_discretization_interval=self.value_discretization_interval,
            )
            total_count = count
        else:
            step, total_count = entry.step_pld, entry.release.count + count
        new = self._compose(key, (total_count, step, entry))
        rel = Release(mech, float(sensitivity), total_count, float(sampling_prob))
        return key, step, rel, new

    def _epsilon_of(self, p, delta):
        d = self.delta if delta is None else delta
        if d is None:
            raise ValueError("delta: give a δ (here or in Accountant(delta=...))")
        return float(np.asarray(p.get_epsilon_for_delta(d)))

    def would_exceed(self, mech, *, sensitivity=1.0, count=1, sampling_prob=1.0) -> bool:
        """Whether recording this release would take ε past the budget.

        Args:
          mech: a single (unbatched) mechanism.
          sensitivity: the query's sensitivity.
          count: the number of runs.
          sampling_prob: the Poisson sampling rate.

        Returns:
          ``True`` if it would (always ``False`` without a budget).

        Raises:
          ValueError: ``mech`` not a single mechanism, or a parameter out of range.
        """
        if self.epsilon_budget is None:
            return False
        with self._lock, host_leaves():
            new = self._candidate(mech, sensitivity, count, sampling_prob)[3]
            return self._epsilon_of(new, None) > self.epsilon_budget

    def record(self, mech, *, sensitivity=1.0, count=1, sampling_prob=1.0) -> float:
        """Record ``count`` runs of ``mech``; the check and the record are one step under the lock.

        Args:
          mech: a single (unbatched) mechanism.
          sensitivity: the query's sensitivity.
          count: the number of runs.
          sampling_prob: the Poisson sampling rate.

        Returns:
          The ε spent so far at the accountant's δ (NaN without one).

        Raises:
          ValueError: the budget would be exceeded (nothing is recorded), ``mech`` not a single
            mechanism, or a parameter out of range.
        """
        with self._lock, host_leaves():
            key, step, rel, new = self._candidate(mech, sensitivity, count, sampling_prob)
            if self.delta is not None:  # read now: kept with its analytic Gaussian part discretised
                new = new.resolved()
                # a repeated spend queries a total of the same shape again: by the compiled program
                new = dataclasses.replace(new, host_queries=key not in self._entries)
            eps = self._epsilon_of(new, None) if self.delta is not None else math.nan
            if self.epsilon_budget is not None and eps > self.epsilon_budget:
                raise ValueError(
                    f"epsilon_budget: this release would bring ε to {eps:.6g} > budget {self.epsilon_budget:.6g} "
                    f"(δ={self.delta:g}); it was refused and nothing was recorded"
                )
            entry = self._entries.get(key)
            if entry is None:
                # everything before this kind is the rest of its repeated records
                self._rest = (key, self._total)
                entry = self._entries[key] = _Entry(rel, step)
            entry.release = rel
            self._total = new
            return eps

    def spent_epsilon(self, delta=None) -> float:
        """ε spent so far.

        Args:
          delta: the δ (default: the accountant's).

        Returns:
          ε, 0 before any release.

        Raises:
          ValueError: no δ given here or at construction, or below the PLD's round-off floor.
        """
        with self._lock:
            if not self._entries:
                return 0.0
            total = self._resolved_total()
            with host_leaves():
                return self._epsilon_of(total, delta)

    def spent_delta(self, epsilon) -> float:
        """δ spent so far.

        Args:
          epsilon: ε ≥ 0.

        Returns:
          δ at ``epsilon``, 0 before any release.

        Raises:
          ValueError: ``epsilon`` negative.
        """
        check_positive("epsilon", epsilon, allow_zero=True)
        with self._lock:
            if not self._entries:
                return 0.0
            total = self._resolved_total()
            with host_leaves():
                return float(np.asarray(total.get_delta_for_epsilon(epsilon)))

    def remaining_epsilon(self, delta=None) -> float:
        """The budget minus the ε spent.

        Args:
          delta: the δ (default: the accountant's).

        Returns:
          The remaining ε (``inf`` without a budget).
        """
        if self.epsilon_budget is None:
            return math.inf
        return self.epsilon_budget - self.spent_epsilon(delta)
