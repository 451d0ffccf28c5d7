"""Preferred output regions for privacy boosting (PB-DP, Jiang et al., S&P 2025, §4).

A region maps a true answer ``Q`` to an interval ``S(Q) = [lo(Q), hi(Q)]`` of the
output space. Regions are pytree dataclasses: their numeric parameters are leaves,
so a region can be batched (an array of ``tau`` is a batch of regions) and
differentiated like any mechanism parameter.

* :class:`AbsoluteError` ``(tau)`` — ``S(Q) = [Q − τ, Q + τ]``: the release is within
  ``τ`` of the truth (data-independent region, paper §4.3).
* :class:`RelativeError` ``(theta, tau)`` — ``S(Q) = [Q − θ|Q| − τ, Q + θ|Q| + τ]``:
  relative error ``θ`` with an absolute offset ``τ > 0`` (pure relative error is
  impossible at Q = 0) (data-dependent region, paper §4.1).
* :class:`FixedInterval` ``(low, high)`` — ``S = [low, high]`` for every answer: the
  release lands in a known valid range (paper §4.2). The true answers are assumed
  to lie in ``[low, high]`` (without that assumption no finite boosting rate meets
  the constraint); :meth:`PrivacyBoosted.validate_values` enforces it on releases.

Intervals are closed. Every region also says which true answers are *hardest*
for utility (smallest kernel mass inside the region) and which neighbouring
pairs an accountant must examine (:meth:`Region.neighbour_pairs`).

Answer domain (our choice, documented): answers range over the reals (the
integers for discrete kernels) for the absolute and relative regions, and over
``[low, high]`` for the fixed region. For the relative region the hardest answer
is therefore ``Q = 0`` (narrowest region); a query known to stay away from 0 is
still calibrated at 0, which over-delivers utility elsewhere and never weakens
privacy.
"""

from __future__ import annotations

from typing import ClassVar

import abc
import jax
import jax.numpy as jnp
import numpy as np

from dpjax.pytree import pytree_dataclass
from dpjax.validation import check_positive, check_real, is_traced

__all__ = ["Region", "AbsoluteError", "RelativeError", "FixedInterval"]

#: Largest |Q| the relative-error pair grid reaches, in units of the kernel's reach.
_RELATIVE_GRID_CAP = 1e4


class Region(abc.ABC):
    """Base class of preferred regions (subclasses are ``@pytree_dataclass``).

    Subclasses define :meth:`interval`, :meth:`hardest_answers` and :meth:`neighbour_pairs`.

    Attributes:
      translation_invariant: ``S(Q) − Q`` does not depend on Q.
      symmetric_noise: ``S(Q) − Q`` is symmetric about 0.
    """

    #: ``S(Q) − Q`` does not depend on Q (the law moves rigidly with the answer: every pair at
    #: distance Δ is the same, and reflection swaps a pair's two laws).
    translation_invariant: ClassVar[bool] = False
    #: ``S(Q) − Q`` is symmetric about 0 (samplers compute one edge's masses).
    symmetric_noise: ClassVar[bool] = False

    def check_answers(self, discrete: bool = False) -> None:
        """Refuse an empty answer domain (e.g. no integer answer in a fixed interval for a discrete kernel).

        Args:
          discrete: whether the kernel's answers are integers.

        Raises:
          ValueError: the answer domain is empty.
        """

    @abc.abstractmethod
    def interval(self, value):
        """The closed preferred interval ``S(value)`` in output coordinates.

        Args:
          value: the true answer(s) Q (array).

        Returns:
          ``(lo, hi)``, arrays of the broadcast shape of ``value`` and the region's parameters.
        """

    def noise_interval(self, value):
        """``S(value) − value``: the interval the *noise* must fall in (samplers use it).

        Regions whose width does not depend on the answer return it without ``value``'s
        shape, so a sampler computes the kernel masses once per batch, not per record.

        Args:
          value: the true answer(s) Q.

        Returns:
          ``(lo − value, hi − value)``.
        """
        v = jnp.asarray(value)
        lo, hi = self.interval(v)
        return lo - v, hi - v

    @abc.abstractmethod
    def hardest_answers(self, discrete: bool = False):
        """Tuple of candidate answers whose kernel mass in ``S`` is smallest.

        For symmetric unimodal kernels the minimum of ``p_S`` over the answer
        domain is attained at one of these; the boosting rate takes the max of
        eq. (3) over all of them.

        Args:
          discrete: whether the answers are integers.

        Returns:
          A tuple of arrays of the region's batch shape.
        """

    @abc.abstractmethod
    def neighbour_pairs(self, sensitivity, reach, num: int, discrete: bool = False):
        """``(values, neighbour_values)`` with a trailing axis of pairs to examine.

        Args:
          sensitivity: the neighbouring answers' distance Δ.
          reach: a distance beyond which the kernel puts negligible mass (< 1e-17).
          num: the (static) grid size.
          discrete: whether the answers are integers.

        Returns:
          ``(values, neighbour_values)``, arrays with a trailing axis of pairs.
        """

    def validate_values(self, values) -> None:
        """Refuse answers outside the region's answer domain.

        Args:
          values: the true answers (concrete; traced values pass).

        Raises:
          ValueError: an answer outside the domain.
        """

    def noise_edge_speed(self):
        """The largest rate at which an edge of ``S(Q) − Q`` (noise coordinates) moves with the answer Q.

        A pair (Q, Q') of answers has the divergence of its noise laws shifted by Q' − Q: along a path of
        pairs those laws change only as their regions' edges move in noise coordinates, at this speed
        (:meth:`dpjax.PrivacyBoosted.path_variation`).

        Returns:
          ``max(|d(lo − Q)/dQ|, |d(hi − Q)/dQ|)``; ``None`` where the region does not declare it (its
          pair path is then searched but not certified).
        """
        return None

    def nearest_noise_edges(self, low, high):
        """The least distances from the answer to the lower and upper edges of ``S(Q)`` over ``Q ∈ [low, high]``.

        Args:
          low: the answers' lower end (array).
          high: their upper end (array, ``>= low``).

        Returns:
          ``(d_lo, d_hi)``: lower bounds of ``Q − lo(Q)`` and ``hi(Q) − Q`` on ``[low, high]`` (at least 0).

        Raises:
          NotImplementedError: a region that does not declare :meth:`noise_edge_speed`.
        """
        raise NotImplementedError(f"{type(self).__name__} declares no noise edges")

    def required_pairs(self, reach, discrete: bool = False):
        """The smallest grid size for which :meth:`neighbour_pairs` holds every distinct pair.

        Args:
          reach: the kernel's reach (a distance beyond which it puts negligible mass).
          discrete: whether the answers are integers.

        Returns:
          The smallest ``num``; ``None`` when any ``num`` ≥ 2 will do (a grid sampling a path of
          pairs); 0 when it depends on traced parameters (then the caller must be given ``num``).
        """
        return None

    def pair_path(self, discrete: bool = False) -> bool:
        """Whether :meth:`neighbour_pairs` samples a continuum of pairs.

        The accountant then bounds the supremum between samples, rather than taking the listed pairs.

        Args:
          discrete: whether the answers are integers.

        Returns:
          True for a path of pairs, False for a list of every distinct pair.
        """
        return True


def _batch(*xs):
    return jnp.broadcast_shapes(*[jnp.shape(x) for x in xs])


def _grid(start, stop, num, discrete):
    """``num`` points from ``start`` to ``stop`` (trailing axis), rounded for discrete answers."""
    t = jnp.linspace(0.0, 1.0, num)
    g = jnp.asarray(start)[..., None] + (jnp.asarray(stop) - jnp.asarray(start))[..., None] * t
    return jnp.round(g) if discrete else g


@pytree_dataclass
class AbsoluteError(Region):
    """Absolute error at most ``tau``: ``S(Q) = [Q − τ, Q + τ]``.

    A data-independent region.

    Args:
      tau: τ > 0 (scalar or array: a batch of regions).

    Raises:
      ValueError: ``tau`` not positive and finite.

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, §4.3.
    """

    tau: jax.Array
    translation_invariant = True
    symmetric_noise = True

    def __post_init__(self):
        check_positive("tau", self.tau)

    def interval(self, value):
        v = jnp.asarray(value)
        return v - self.tau, v + self.tau

    def noise_interval(self, value):
        return -jnp.asarray(self.tau), jnp.asarray(self.tau)

    def hardest_answers(self, discrete=False):
        # p_S is the same for every answer (translation invariance).
        return (jnp.zeros(jnp.shape(self.tau)),)

    def pair_path(self, discrete=False):
        return False

    def noise_edge_speed(self):
        return 0.0

    def nearest_noise_edges(self, low, high):
        tau = jnp.broadcast_to(self.tau, _batch(self.tau, low, high))
        return tau, tau

    def neighbour_pairs(self, sensitivity, reach, num, discrete=False):
        # Translation invariant: only the distance d = Q' − Q matters and d = Δ is
        # the worst (checked against d < Δ in the tests); the mirror pair is the
        # reversed direction, which the accountant examines anyway.
        s = jnp.asarray(sensitivity, jnp.result_type(float))
        shape = _batch(self.tau, s, reach)
        return jnp.zeros(shape + (1,), s.dtype), jnp.broadcast_to(s, shape)[..., None]


@pytree_dataclass
class RelativeError(Region):
    """Relative error ``theta`` plus an offset ``tau``: ``S(Q) = [Q − θ|Q| − τ, Q + θ|Q| + τ]``.

    A data-dependent region (pure relative error is impossible at Q = 0, hence τ > 0).

    Args:
      theta: θ ≥ 0 (scalar or array).
      tau: τ > 0 (scalar or array).

    Raises:
      ValueError: ``theta`` negative or ``tau`` not positive (or either not finite).

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, §4.1.
    """

    theta: jax.Array
    tau: jax.Array
    symmetric_noise = True

    def __post_init__(self):
        check_positive("theta", self.theta, allow_zero=True)
        check_positive("tau", self.tau)

    def interval(self, value):
        v = jnp.asarray(value)
        half = self.theta * jnp.abs(v) + self.tau
        return v - half, v + half

    def noise_interval(self, value):
        half = self.theta * jnp.abs(jnp.asarray(value)) + self.tau
        return -half, half

    def hardest_answers(self, discrete=False):
        # The region is narrowest at Q = 0 (answer domain: all reals / integers).
        return (jnp.zeros(_batch(self.theta, self.tau)),)

    def pair_path(self, discrete=False):
        return not discrete

    def noise_edge_speed(self):
        return jnp.asarray(self.theta)

    def nearest_noise_edges(self, low, high):
        # S(Q) − Q = [−h, h], h = θ|Q| + τ: least at the answer nearest 0
        nearest = jnp.maximum(jnp.maximum(low, -high), 0.0)
        half = self.theta * nearest + self.tau
        return half, half

    def path_kink(self, values, nvalues):
        """The answer Q where the upper edge of S(Q) meets the lower edge of S(Q + Δ).

        Solves Q + θQ + τ = Q + Δ − θ(Q + Δ) − τ: a kink of the pairs' divergence along the path,
        often its peak, between grid answers.

        Args:
          values: the path's answers (trailing axis).
          nvalues: their neighbours (trailing axis).

        Returns:
          The kink's answer Q, of the leading shape.
        """
        s = nvalues[..., 0] - values[..., 0]
        theta = jnp.asarray(self.theta, s.dtype)
        return (s * (1.0 - theta) - 2.0 * self.tau) / (2.0 * jnp.maximum(theta, 1e-300))

    def required_pairs(self, reach, discrete=False):
        if not discrete:
            return None
        if is_traced((reach, self.tau)):
            return 0
        levels = np.max(np.ceil(np.asarray(reach)) - np.floor(np.asarray(self.tau))) + 2
        return int(6 * max(levels, 2))

    def neighbour_pairs(self, sensitivity, reach, num, discrete=False):
        if discrete:
            return self._level_pairs(sensitivity, num)
        # Pairs (Q, Q + Δ) on a grid of Q. The worst pair is NOT (0, Δ):
        # the lower strip of S(Q) sits at θQ + τ below Q, where the kernel loss is
        # large. Beyond Q_max = (reach − τ)/θ + Δ both strips lie where the kernel
        # has no mass and the pair behaves like the kernel's own (0, Δ) pair.
        # Q < −Δ/2 is the mirror image (y → −y) of a pair with Q > −Δ/2 taken in
        # the reverse direction, which the accountant examines anyway.
        s = jnp.asarray(sensitivity, jnp.result_type(float))
        theta = jnp.asarray(self.theta, s.dtype)
        cap = _RELATIVE_GRID_CAP * (reach + self.tau + s)
        q_max = jnp.minimum((jnp.maximum(reach - self.tau, 0.0) + s) / jnp.maximum(theta, 1e-300), cap)
        q_max = jnp.maximum(q_max, s)
        # Q = 0 is a kink of every pair's divergence (|Q| in the region) and often its peak:
        # it is the second answer, after −Δ/2
        values = _grid(jnp.zeros_like(q_max), q_max, num - 1, False)
        values = jnp.concatenate([jnp.broadcast_to(-s / 2.0, values.shape[:-1] + (1,)), values], -1)
        shape = _batch(values[..., 0], s)
        values = jnp.broadcast_to(values, shape + (num,))
        return values, values + jnp.asarray(s)[..., None]

    def _level_pairs(self, sensitivity, num):
        """Every distinct pair of integer answers (Q, Q + Δ), ``num // 6`` region widths deep.

        For an integer answer, S(Q) − Q holds the integers of [−W(Q), W(Q)] with
        W(Q) = ⌊θ|Q| + τ⌋, so a pair's laws depend only on (W(Q), W(Q + Δ)) and the shift Δ.
        That pair of widths changes only where Q or Q + Δ reaches a new width w, at
        Q_w = ⌈(w − τ)/θ⌉: the answers Q_w − Δ and Q_w (one below each, against float
        rounding at the boundary) and the mirrors 1 − Q_w, −Q_w (Q < 0) stand for every
        pair exactly. Widths run from ⌊τ⌋ past the kernel's reach (where the pair is the
        kernel's own): :meth:`required_pairs`. The divergence jumps between widths, so a
        grid of answers would not do (it can miss the worst width pair entirely).
        """
        s = jnp.asarray(sensitivity, jnp.result_type(float))
        theta, tau = (jnp.asarray(x, s.dtype)[..., None] for x in (self.theta, self.tau))
        w = jnp.floor(tau) + jnp.arange(num // 6, dtype=s.dtype)
        qw = jnp.where(theta > 0, jnp.maximum(jnp.ceil((w - tau) / jnp.where(theta > 0, theta, 1.0)), 0.0), 0.0)
        sv = s[..., None]
        cand = jnp.stack([qw - sv - 1.0, qw - sv, qw - 1.0, qw, -qw, 1.0 - qw], axis=-1)
        cand = jnp.floor(cand.reshape(cand.shape[:-2] + (-1,)))
        values = jnp.concatenate([cand, jnp.zeros(cand.shape[:-1] + (num - cand.shape[-1],), s.dtype)], -1)
        shape = _batch(values[..., 0], s)
        values = jnp.broadcast_to(values, shape + (num,))
        return values, values + s[..., None]


@pytree_dataclass
class FixedInterval(Region):
    """A fixed interval ``S = [low, high]`` for every answer; the answers lie in ``[low, high]``.

    Without that assumption no finite boosting rate meets the constraint:
    :meth:`validate_values` enforces it on releases.

    Args:
      low: the interval's lower end (scalar or array).
      high: its upper end (> ``low``).

    Raises:
      ValueError: ``low`` or ``high`` not finite, or ``high <= low``.

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, §4.2.
    """

    low: jax.Array
    high: jax.Array

    def __post_init__(self):
        check_real("low", self.low)
        check_real("high", self.high)
        if not is_traced((self.low, self.high)) and np.any(np.asarray(self.low) >= np.asarray(self.high)):
            raise ValueError(f"high must be greater than low, got low={self.low!r}, high={self.high!r}")

    def noise_edge_speed(self):
        return 1.0

    def nearest_noise_edges(self, low, high):
        # Q − low grows and high − Q falls with Q
        return jnp.maximum(low - self.low, 0.0), jnp.maximum(self.high - high, 0.0)

    def interval(self, value):
        shape = _batch(value, self.low, self.high)
        return jnp.broadcast_to(self.low, shape), jnp.broadcast_to(self.high, shape)

    def _domain(self, discrete):
        lo, hi = jnp.asarray(self.low), jnp.asarray(self.high)
        return (jnp.ceil(lo), jnp.floor(hi)) if discrete else (lo, hi)

    def check_answers(self, discrete=False):
        if discrete and not is_traced((self.low, self.high)):
            lo, hi = self._domain(True)
            if np.any(np.asarray(hi) < np.asarray(lo)):
                raise ValueError(f"region must hold an integer answer for a discrete kernel, got {self!r}")

    def hardest_answers(self, discrete=False):
        # Kernel mass in S is smallest at the edges of the answer domain.
        return self._domain(discrete)

    def neighbour_pairs(self, sensitivity, reach, num, discrete=False):
        # Both answers inside [low, high]: Q ∈ [low, high − Δ], Q' = Q + Δ. If the
        # interval is narrower than Δ, the farthest pair is (low, high).
        s = jnp.asarray(sensitivity, jnp.result_type(float))
        lo, hi = self._domain(discrete)
        stop = jnp.maximum(hi - s, lo)
        values = _grid(lo, stop, num, discrete)
        return values, jnp.minimum(values + jnp.asarray(s)[..., None], jnp.asarray(hi)[..., None])

    def validate_values(self, values) -> None:
        if is_traced((values, self.low, self.high)):
            return
        arr = np.asarray(values)
        if arr.size and (np.any(arr < np.asarray(self.low)) or np.any(arr > np.asarray(self.high))):
            raise ValueError(
                f"values must lie in the fixed region [low, high] = [{self.low!r}, {self.high!r}]: "
                "the boosting rate (and the privacy accounting) assume answers inside it"
            )
