r"""Piecewise mixture kernels (Lap_m, Geom_m).

Li et al., "More Flexible Differential Privacy: The Application of Piecewise Mixture Distributions
in Query Release", arXiv:1707.01189v3.

Two Laplace (or two two-sided geometric) laws fused into one continuous, symmetric law:
scale ``b2`` (the *inner* scale, the paper's Δ/ε) on ``|n| ≤ c`` and ``b1`` (the *outer*
scale, Δ/(rε)) beyond the breakpoint ``c``, with the weights of eqs. (10)/(18) that make
the density continuous at ±c. Everything is written in a *potential form*
(§1.2): with ``λ2 = 1/b2``, ``λ1 = 1/b1``,

.. math::  f(n) = e^{-φ(|n|)}/Z,\qquad φ(t) = λ_2\min(t, c) + λ_1 (t - c)_+ ,

``Z/2 = −expm1(−λ2 c)/λ2 + e^{−λ2 c}/λ1`` (continuous) or
``Z_d = 1 + 2 q2 (1 − q2^c)/(1 − q2) + 2 q2^c q1/(1 − q1)`` (integers, ``q = e^{−λ}``), so
that the paper's a1 = a2 e^{(r−1)εc}/r is never formed (it overflows).

What is not in the paper, or corrected from it (docs/mixture.md):

* the inverse-CDF sampler is one uniform through the symmetric quantile (Algorithm 1's
  line 9 misses a minus sign), branch-free (both branches computed, one
  selected), continuous in the parameters;
* the Geom_m moments are verified sums (the printed eqs. 20–22 are wrong);
* privacy is **exact**: the pure ε is ``max(λ1 Δ, φ(Δ))`` (Theorems 1/3 give max(ε, rε),
  which is not tight for r < 1 and c < Δ; docs/mixture.md), the hockey-stick and Rényi
  divergences are closed forms (piecewise exponential integrals between the six kinks
  of the pair loss), and because the law is *not* log-concave for r < 1 the accountant
  examines every shift up to Δ there (``log_concave``, decided per instance: see
  :func:`log_concave_at`).

The paper's own quantities (the general privacy budget ζ, Proposition 1, Theorems 2 and 4)
live in :mod:`accounting.papers.mixture`, labelled NOT CERTIFIED.
"""

from __future__ import annotations

import abc
import math

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.kernels.base import AdditiveMechanism, round_up_to_default_float, safe_log, sort_small
from dpjax.pytree import pytree_dataclass, static_field
from dpjax.validation import check_positive, concrete

__all__ = ["LaplaceMixture", "GeometricMixture", "piecewise_log_integral"]

_LOG_HALF = math.log(0.5)
#: segments of a pair: the pair loss y ↦ φ(|y − d|) − φ(|y|) has six kinks (−c, 0, c, d−c, d, d+c).
_SEGMENTS = 7


def piecewise_log_integral(g_ref, slope, ref, lo, hi, discrete):
    """The log integral (or sum) of an exponential-linear function over a range.

    ``log ∫_lo^hi e^{g_ref + slope·(y − ref)} dy`` (continuous) or ``log Σ_{k=lo}^{hi}`` of the
    same on the integers (``lo``/``hi`` integers, inclusive); ``−inf`` for an empty range.

    ``lo`` may be ``−inf`` where ``slope > 0`` and ``hi`` ``+inf`` where ``slope < 0`` (a decaying
    tail). Evaluated at the end where the exponent is largest with ``expm1``: no overflow, no
    cancellation; finite gradients also for empty ranges (double ``where``).

    Args:
      g_ref: the exponent at ``ref``.
      slope: the exponent's slope.
      ref: the reference point.
      lo: the lower end.
      hi: the upper end.
      discrete: sum over the integers ``lo..hi`` instead of integrating.

    Returns:
      The log integral (or sum), ``−inf`` over an empty range.
    """
    empty = (hi < lo) if discrete else (hi <= lo)
    up = slope > 0
    end = jnp.where(up, hi, lo)
    end = jnp.where(jnp.isfinite(end), end, ref)
    g_end = g_ref + slope * (end - ref)
    s = jnp.abs(slope)
    flat = s == 0
    s_safe = jnp.where(flat, 1.0, s)
    length = (hi - lo + 1.0) if discrete else (hi - lo)
    length = jnp.where(empty, 1.0, length)
    length_fin = jnp.where(jnp.isfinite(length), length, 1.0)
    decay = jnp.where(jnp.isfinite(length), -jnp.expm1(-s_safe * length_fin), 1.0)
    norm = jnp.log(-jnp.expm1(-s_safe)) if discrete else jnp.log(s_safe)
    geo = g_end + jnp.log(decay) - norm
    flat_val = g_ref + jnp.log(length_fin)
    return jnp.where(empty, -jnp.inf, jnp.where(flat, flat_val, geo))


def log_concave_at(inner_scale, outer_scale, breakpoint) -> bool:
    """Whether the mixture's noise law is log-concave, on concrete parameters.

    Whether the mixture's noise law is log-concave, decided on concrete parameters (every member
    of a batch); traced ones (inside ``jit``) give ``False``, the sound default (every shift is examined).

    log f(n) = −φ(|n|) − log Z with φ(t) = λ2·min(t, c) + λ1·(t − c)_+ piecewise linear, slopes λ2 on
    [0, c] and λ1 beyond. −φ(|n|) is concave iff φ is convex on [0, ∞) (the kink at 0 is concave
    for λ2 > 0), i.e. iff its slopes do not decrease: λ1 ≥ λ2 (outer scale ≤ inner scale, the
    paper's r ≥ 1), or c = 0 (one Laplace law). On the integers (Geom_m) the same: sampled at the
    integers a convex φ stays discrete-convex, and for λ1 < λ2, c > 0, the second difference of φ at
    the integer n = ⌈c⌉ ≥ 1 is λ1 − λ2(c − n + 1) − λ1(n − c) = (λ1 − λ2)(c − n + 1) < 0.

    Args:
      inner_scale: b2 (concrete).
      outer_scale: b1 (concrete).
      breakpoint: c (concrete).

    Returns:
      True when every member of the batch is log-concave.
    """
    vals = concrete((inner_scale, outer_scale, breakpoint))
    if vals is None:
        return False
    b2, b1, c = (np.asarray(v, float) for v in vals)
    return bool(np.all((b1 <= b2) | (c == 0)))


class _Piecewise(AdditiveMechanism):
    """Shared law of the mixtures: parameters, potential, pair segments, closed-form privacy."""

    scale_name = "inner_scale"
    symmetric_pairs = True

    # -- construction ----------------------------------------------------------------
    def __post_init__(self):
        check_positive("inner_scale", self.inner_scale)
        check_positive("outer_scale", self.outer_scale)
        check_positive("breakpoint", self.breakpoint, allow_zero=True)
        if self.discrete:
            c = np.asarray(self.breakpoint, float)
            if c.ndim or c != np.round(c):
                raise ValueError(
                    f"breakpoint of GeometricMixture must be one integer >= 0 (static), got {self.breakpoint!r}"
                )
            object.__setattr__(self, "breakpoint", int(c))
        object.__setattr__(self, "log_concave", log_concave_at(self.inner_scale, self.outer_scale, self.breakpoint))

    @classmethod
    def from_epsilon(cls, epsilon, r, c, sensitivity=1.0):
        """The paper's Lap_m(ε, rε) / Geom_m(e^{ε/Δ}, e^{rε/Δ}) with breakpoint ``c``.

        ``c`` is in output units, not rescaled by Δ: inner scale Δ/ε, outer scale Δ/(rε), both
        rounded up (more noise).

        Args:
          epsilon: the inner ε > 0 (scalar or array).
          r: the ratio of the outer ε to the inner one (> 0).
          c: the breakpoint ≥ 0 (one integer for Geom_m).
          sensitivity: Δ > 0.

        Returns:
          The mixture kernel.

        Raises:
          ValueError: ``epsilon``, ``r`` or ``sensitivity`` not positive; ``c`` negative, or not one
            integer for Geom_m.

        References:
          Li et al., "More Flexible Differential Privacy: The Application of Piecewise Mixture
          Distributions in Query Release", arXiv:1707.01189v3, Definitions 3 and 4.
        """
        check_positive("epsilon", epsilon)
        check_positive("r", r)
        check_positive("c", c, allow_zero=True)
        check_positive("sensitivity", sensitivity)
        d = np.asarray(sensitivity, float)
        e = np.asarray(epsilon, float)
        inner = round_up_to_default_float(d / e)
        outer = round_up_to_default_float(d / (np.asarray(r, float) * e))
        c = np.asarray(c, float)
        if cls.discrete:
            if c.ndim or c != np.round(c):
                raise ValueError(f"c of GeometricMixture must be one integer (a static breakpoint), got {c!r}")
            return cls(inner_scale=inner, outer_scale=outer, breakpoint=int(c))
        return cls(inner_scale=inner, outer_scale=outer, breakpoint=jnp.asarray(c, inner.dtype))

    def paper_parameters(self, sensitivity=1.0):
        """``(ε, r, c)`` of the paper's parametrisation: ε = Δ/b2, r = b2/b1.

        Args:
          sensitivity: Δ.

        Returns:
          ``(ε, r, c)``.
        """
        return jnp.asarray(sensitivity) / self.inner_scale, self.inner_scale / self.outer_scale, self.breakpoint

    def with_scale(self, scale, *, max_scale=None):
        """The law scaled by ``scale / inner_scale`` (Lap_m: both scales and the breakpoint — a scale
        family; Geom_m: both scales, the integer breakpoint kept).

        Args:
          scale: the new inner scale (may be traced).
          max_scale: unused (no static configuration depends on the scale).

        Returns:
          The scaled kernel (no validation).
        """
        k = scale / self.inner_scale
        c = self.breakpoint if self.discrete else self.breakpoint * k
        return type(self)._unchecked(scale, self.outer_scale * k, c)

    @classmethod
    def _unchecked(cls, inner, outer, c):
        obj = object.__new__(cls)
        object.__setattr__(obj, "inner_scale", inner)
        object.__setattr__(obj, "outer_scale", outer)
        object.__setattr__(obj, "breakpoint", c)
        object.__setattr__(obj, "log_concave", log_concave_at(inner, outer, c))
        return obj

    def as_mixture(self):
        """This kernel (the paper-mode functions take any kernel with a mixture form).

        Returns:
          ``self``.
        """
        return self

    # -- potential -------------------------------------------------------------------
    @property
    def _l2(self):
        return 1.0 / jnp.asarray(self.inner_scale)

    @property
    def _l1(self):
        return 1.0 / jnp.asarray(self.outer_scale)

    def _phi(self, t):
        """φ(t) = λ2 min(t, c) + λ1 (t − c)_+ for t ≥ 0."""
        c = self.breakpoint
        return self._l2 * jnp.minimum(t, c) + self._l1 * jnp.maximum(t - c, 0.0)

    def _slope(self, x):
        """d/dx log f at a point that is not a kink (per unit step on the integers)."""
        return -jnp.sign(x) * jnp.where(jnp.abs(x) < self.breakpoint, self._l2, self._l1)

    @abc.abstractmethod
    def _log_norm(self):
        """log of the density's normalising constant."""

    def _log_density(self, x):
        """log f(x) ignoring the integer support (the potential form on the real line)."""
        return -self._log_norm() - self._phi(jnp.abs(x))

    # -- exact privacy ---------------------------------------------------------------
    def pure_epsilon(self, sensitivity=1.0):
        r"""Tight pure ε of shifts up to Δ: sup_{t ≥ 0} φ(t + Δ) − φ(t) = max(λ1 Δ, φ(Δ)),
        i.e. rε for r ≥ 1 (Theorems 1/3) and [ε·min(c, Δ) + rε·(Δ − c)_+]/Δ for r < 1 (ours: Theorems 1/3 do
        not cover it; below max(ε, rε) when c < Δ). ∞ where a discrete kernel's shift Δ leaves the
        integers (disjoint supports).

        Args:
          sensitivity: the shift Δ.

        Returns:
          The pure ε of a shift by Δ (``inf`` where the kernel is not pure-DP there).
        """
        d = jnp.asarray(sensitivity)
        return jnp.where(self.off_lattice(d), jnp.inf, jnp.maximum(self._l1 * d, self._phi(d)))

    def _segments(self, d):
        """The pair (N, N + d), d ≥ 0, cut at the six kinks of its loss: per segment (trailing
        axis of 7) the range [lo, hi], a reference point ``ref`` inside it, log p and log q there
        and their slopes. On the integers the ranges are integer and inclusive."""
        c = self.breakpoint
        shape = jnp.broadcast_shapes(
            jnp.shape(d), jnp.shape(c), jnp.shape(self.inner_scale), jnp.shape(self.outer_scale)
        )
        d = jnp.broadcast_to(d, shape)
        c = jnp.broadcast_to(c, shape)
        b = sort_small(jnp.stack([-c, jnp.zeros_like(c), c, d - c, d, d + c], -1))
        inf = jnp.full(shape + (1,), jnp.inf, b.dtype)
        if self.discrete:
            lo = jnp.concatenate([-inf, b], -1)
            hi = jnp.concatenate([b[..., :1] - 1.0, b[..., 1:] - 1.0, inf], -1)
            at = jnp.concatenate([b[..., :1] - 0.5, 0.5 * (b[..., :-1] + b[..., 1:]), b[..., -1:] + 0.5], -1)
            ref = jnp.concatenate([b[..., :1] - 1.0, b], -1)
        else:
            lo = jnp.concatenate([-inf, b], -1)
            hi = jnp.concatenate([b, inf], -1)
            at = jnp.concatenate([b[..., :1] - 1.0, 0.5 * (b[..., :-1] + b[..., 1:]), b[..., -1:] + 1.0], -1)
            ref = at
        me = jax.tree_util.tree_map(lambda p: jnp.asarray(p)[..., None], self)
        dd = d[..., None]
        lp, lq = me._log_density(ref), me._log_density(ref - dd)
        sp, sq = me._slope(at), me._slope(at - dd)
        return lo, hi, ref, lp, lq, sp, sq

    def _pair(self, value, neighbour_value):
        d = jnp.abs(jnp.asarray(neighbour_value) - jnp.asarray(value))
        apart = (d != jnp.round(d)) if self.discrete else jnp.zeros(jnp.shape(d), bool)
        return d, apart

    def hockey_stick(self, epsilon, value, neighbour_value):
        r"""Exact δ(ε) = ∫ (p − e^ε q)_+ of the pair (value, neighbour_value): on each of the seven
        segments between the loss's kinks the loss is linear and p, q are exponential, so the
        set {loss > ε} is an interval and both integrals are closed forms (geometric sums on
        the integers). Any real ε; both orders agree (symmetric law).

        Args:
          epsilon: ε, any real (array broadcasting with the answers and the parameters).
          value: the answer v.
          neighbour_value: the neighbouring answer v'.

        Returns:
          δ(ε) = ∫ (p(y|v) − e^ε p(y|v'))_+ dy, of the broadcast shape.
        """
        eps = jnp.asarray(epsilon)
        d, apart = self._pair(value, neighbour_value)
        shape = jnp.broadcast_shapes(eps.shape, d.shape, self.batch_shape)
        eps = jnp.broadcast_to(eps, shape)
        lo, hi, ref, lp, lq, sp, sq = self._segments(jnp.broadcast_to(d, shape))
        e = eps[..., None]
        lm, sl = lp - lq, sp - sq
        sl_safe = jnp.where(sl == 0, 1.0, sl)
        ystar = ref + (e - lm) / sl_safe
        if self.discrete:
            first_above, last_below = jnp.floor(ystar) + 1.0, jnp.ceil(ystar) - 1.0
        else:
            first_above, last_below = ystar, ystar
        a = jnp.where(sl > 0, jnp.maximum(lo, first_above), lo)
        b = jnp.where(sl < 0, jnp.minimum(hi, last_below), hi)
        none = (sl == 0) & ~(lm > e)  # a flat loss at or below ε: empty
        a, b = jnp.where(none, 1.0, a), jnp.where(none, 0.0, b)
        log_p = piecewise_log_integral(lp, sp, ref, a, b, self.discrete)
        log_q = piecewise_log_integral(lq, sq, ref, a, b, self.discrete)
        ok = log_p > -jnp.inf
        gap = jnp.where(ok, e + jnp.where(ok, log_q, 0.0) - jnp.where(ok, log_p, 0.0), 0.0)
        part = jnp.where(ok, jnp.exp(jnp.where(ok, log_p, 0.0)) * -jnp.expm1(jnp.minimum(gap, 0.0)), 0.0)
        delta = jnp.clip(jnp.sum(part, -1), 0.0, 1.0)
        return jnp.where(jnp.broadcast_to(apart, shape), 1.0, delta)

    def renyi_divergence(self, order, value, neighbour_value):
        r"""Exact D_α(P‖Q) = log(Σ_segments ∫ p^α q^{1−α}) / (α − 1), α > 1 (geometric pieces).

        Args:
          order: the order α > 1 (array broadcasting with the answers and the parameters).
          value: the answer v.
          neighbour_value: the neighbouring answer v'.

        Returns:
          D_α(P_v‖P_v'), of the broadcast shape.
        """
        a = jnp.asarray(order)
        d, apart = self._pair(value, neighbour_value)
        shape = jnp.broadcast_shapes(a.shape, d.shape, self.batch_shape)
        a = jnp.broadcast_to(a, shape)
        lo, hi, ref, lp, lq, sp, sq = self._segments(jnp.broadcast_to(d, shape))
        al = a[..., None]
        logs = piecewise_log_integral(al * lp + (1 - al) * lq, al * sp + (1 - al) * sq, ref, lo, hi, self.discrete)
        out = jax.nn.logsumexp(logs, axis=-1) / (a - 1.0)
        return jnp.where(jnp.broadcast_to(apart, shape), jnp.inf, out)

    def output_breakpoints(self, value, neighbour_value):
        """The kinks ±c, 0 of both laws: the pair loss is monotone between them.

        Args:
          value: the answer v.
          neighbour_value: the neighbouring answer v'.

        Returns:
          The outputs ``v ± c``, ``v``, ``v' ± c``, ``v'`` (trailing axis of 6).
        """
        k = jnp.stack([-self.breakpoint, jnp.zeros_like(jnp.asarray(self.breakpoint)), self.breakpoint], -1)
        v, nv = jnp.asarray(value)[..., None], jnp.asarray(neighbour_value)[..., None]
        return jnp.concatenate([v + k, nv + k], -1)

    def noise_kinks(self):
        c = jnp.asarray(self.breakpoint)
        shape = jnp.broadcast_shapes(jnp.shape(c), jnp.shape(self.inner_scale), jnp.shape(self.outer_scale))
        c = jnp.broadcast_to(c, shape)
        k = jnp.stack([-c, jnp.zeros_like(c), c], -1)
        return k + 0.5 if self.discrete else k

    def noise_tilted_log_integral(self, lo, hi, v, nv, alpha):
        """``log ∫`` (``Σ`` on the integers) of ``f(y−v)^α f(y−nv)^{1−α}`` over (lo, hi], a piece
        without kinks of either law: the exponent is linear there (geometric closed form).

        Args:
          lo: the piece's lower end.
          hi: its upper end.
          v: the answer.
          nv: the neighbouring answer.
          alpha: the order α > 1.

        Returns:
          The log integral (or sum).
        """
        a = jnp.asarray(alpha)
        if self.discrete:
            k1, k2 = jnp.floor(lo) + 1.0, jnp.floor(hi)
        else:
            k1, k2 = lo, hi
        mid = 0.5 * (k1 + k2)
        slope = a * self._slope(mid - v) + (1.0 - a) * self._slope(mid - nv)
        g_mid = a * self._log_density(mid - v) + (1.0 - a) * self._log_density(mid - nv)
        return piecewise_log_integral(g_mid, slope, mid, k1, k2, self.discrete)

    @abc.abstractmethod
    def tail_mass(self):
        """P(|N| > c), the paper's P_out.

        Returns:
          P(|N| > c), of the batch shape.
        """

    def variance(self):
        """E N² (the mean is 0).

        Returns:
          E N², of the batch shape.
        """
        return self.second_moment()


@pytree_dataclass
class LaplaceMixture(_Piecewise):
    r"""The Laplace mixture Lap_m: two Laplace scales fused at the breakpoint c.

    Lap_m (Definition 3, eqs. 9–10): density ∝ e^{−|n|/b2} on |n| ≤ c, ∝ e^{−|n|/b1} beyond,
    continuous at ±c. ``LaplaceMixture.from_epsilon(ε, r, c, Δ)`` is the paper's Lap_m(ε, rε).

    Leaves ``inner_scale`` (b2), ``outer_scale`` (b1), ``breakpoint`` (c ≥ 0), all differentiable.
    Exactly ``pure_epsilon(Δ)``-DP (tight); the PLD is built from the closed-form hockey stick
    along every shift up to Δ.

    Args:
      inner_scale: b2 > 0, the scale on ``|n| ≤ c`` (scalar or array; differentiable).
      outer_scale: b1 > 0, the scale beyond ``c`` (default 0.2).
      breakpoint: c ≥ 0 (default 1; differentiable).

    Raises:
      ValueError: a scale not positive, a negative breakpoint.

    References:
      Li et al., "More Flexible Differential Privacy: The Application of Piecewise Mixture
      Distributions in Query Release", arXiv:1707.01189v3, Definition 3, eqs. (9)–(10).
    """

    inner_scale: jax.Array
    outer_scale: jax.Array = 0.2  # defaults: the paper's headline shape (r = 5, c = b2) at b2 = 1
    breakpoint: jax.Array = 1.0
    #: the law is log-concave (:func:`log_concave_at`): the worst shift is Δ itself
    log_concave: bool = static_field(default=False, init=False)

    # -- constants -------------------------------------------------------------------
    def _half_z(self):
        """Z/2 = −expm1(−λ2 c)/λ2 + e^{−λ2 c}/λ1."""
        l2, l1, c = self._l2, self._l1, self.breakpoint
        return -jnp.expm1(-l2 * c) / l2 + jnp.exp(-l2 * c) / l1

    def _log_norm(self):
        return jnp.log(2.0 * self._half_z())

    def tail_mass(self):
        """P_out = P(|N| > c) = e^{−λ2 c} / (λ1 Z/2) (= a1 e^{−c/b1} of eq. 10).

        Returns:
          P_out, of the batch shape.
        """
        return jnp.exp(-self._l2 * self.breakpoint) / (self._l1 * self._half_z())

    def weights(self):
        """The paper's ``(a1, a2)`` of eq. (10) (a1 may overflow: it is never used internally).

        Returns:
          ``(a1, a2)``, of the batch shape.
        """
        l2, l1, c = self._l2, self._l1, self.breakpoint
        a2 = 1.0 / (self._half_z() * l2)
        return a2 * (l2 / l1) * jnp.exp((l1 - l2) * c), a2

    def _log_sf_abs(self, t):
        """log P(|N| > t), t ≥ 0 (no cancellation: the survival form of eqs. (9)–(10))."""
        l2, l1, c = self._l2, self._l1, self.breakpoint
        zh = self._half_z()
        outer = jnp.log(self.tail_mass()) - l1 * jnp.maximum(t - c, 0.0)
        ti = jnp.minimum(t, c)
        inner_part = -l2 * ti + safe_log(-jnp.expm1(-l2 * (c - ti))) - jnp.log(l2)
        inner = jnp.logaddexp(inner_part, -l2 * c - jnp.log(l1)) - jnp.log(zh)
        return jnp.where(t > c, outer, inner)

    # -- the law ---------------------------------------------------------------------
    def noise_log_prob(self, n):
        return self._log_density(jnp.asarray(n))

    def noise_log_cdf(self, n):
        n = jnp.asarray(n)
        ls = self._log_sf_abs(jnp.abs(n))
        return jnp.where(n <= 0, _LOG_HALF + ls, jnp.log1p(-0.5 * jnp.exp(ls)))

    def noise_cdf(self, n):
        n = jnp.asarray(n)
        half_tail = 0.5 * jnp.exp(self._log_sf_abs(jnp.abs(n)))
        return jnp.where(n <= 0, half_tail, 1.0 - half_tail)

    def noise_side_masses(self, x):
        """(P(0 < N < x), P(N > x)), the first relative-accurate for small x: −expm1(−λ2 x)/(λ2 Z) inside.

        Args:
          x: non-negative offsets.

        Returns:
          ``(P(0 < N < x), P(N > x))``.
        """
        l2, l1, c = self._l2, self._l1, self.breakpoint
        x = jnp.asarray(x)
        zh = self._half_z()
        xi = jnp.minimum(x, c)
        inner = -jnp.expm1(-l2 * xi) / (2.0 * l2 * zh)
        outer_in = -0.5 * self.tail_mass() * jnp.expm1(-l1 * jnp.maximum(x - c, 0.0))
        near = jnp.where(x > c, inner + outer_in, inner)
        return near, 0.5 * jnp.exp(self._log_sf_abs(x))

    def _abs_quantile(self, p, w):
        """t ≥ 0 with P(|N| > t) = 2p, given also w = ½ − p (exact near the median): the outer
        branch t = c − b1 log(2p/P_out) where 2p < P_out, else t = −b2 log1p(−2w·λ2 Z/2)
        (Algorithm 1 of the paper with its line-9 sign fixed, in one symmetric formula).

        One ``log`` per draw for both branches: the selected argument's log, with Kahan's
        ``log1p(x) = x log(1 + x)/((1 + x) − 1)`` on the inner branch (exact near t = 0)."""
        l2, c = self._l2, self.breakpoint
        use_outer = 2.0 * p < self.tail_mass()
        x = jnp.maximum(-2.0 * w * (l2 * self._half_z()), -1.0)
        z = jnp.where(use_outer, (2.0 * p) * (1.0 / self.tail_mass()), 1.0 + x)
        lz = jnp.log(z)
        near = z == 1.0
        log1p_x = jnp.where(near, x, x * lz / jnp.where(near, 1.0, z - 1.0))
        t_out = c - lz * self.outer_scale
        t_in = jnp.minimum(-log1p_x * self.inner_scale, c)
        return jnp.where(use_outer, t_out, t_in)

    def noise_icdf(self, u):
        """Branch-free inverse CDF of one uniform: sign(u − ½)·|N|-quantile at survival 2 min(u, 1 − u).

        Args:
          u: probabilities in (0, 1).

        Returns:
          The quantiles.
        """
        u = jnp.asarray(u)
        w = u - 0.5
        p = 0.5 - jnp.abs(w)
        return jnp.sign(w) * self._abs_quantile(p, jnp.abs(w))

    def noise_split_icdf(self, p, w, side):
        p = jnp.where(p > 0, p, 0.5)
        return side * self._abs_quantile(p, jnp.abs(w))

    def noise_reach(self):
        # one tail beyond c holds P_out/2·e^{−λ1(t−c)}: below 1e-17/2 from c + b1·log(P_out/1e-17)_+
        lp = jnp.log(self.tail_mass()) - math.log(1e-17)
        return self.breakpoint + self.outer_scale * jnp.maximum(lp, 0.0) + 1.0

    def noise_far(self):
        lp = jnp.log(self.tail_mass()) + 800.0
        return self.breakpoint + self.outer_scale * jnp.maximum(lp, 0.0) + 1.0

    # -- moments (eqs. 12–14, potential form) ------------------------------------------
    def _inner_integrals(self):
        """I_n = ∫_0^c t^n e^{−λ2 t} dt = n!/λ2^{n+1}·P(n+1, λ2 c), n = 0, 1, 2 (regularised gamma:
        no cancellation at small λ2 c)."""
        l2, c = self._l2, self.breakpoint
        x = l2 * c
        return tuple(math.factorial(n) / l2 ** (n + 1) * jax.scipy.special.gammainc(n + 1.0, x) for n in (0, 1, 2))

    def mean_abs(self):
        """E|N| (eq. 12): (I1 + e^{−λ2 c}(c/λ1 + 1/λ1²)) / (Z/2).

        Returns:
          E|N|, of the batch shape.
        """
        l2, l1, c = self._l2, self._l1, self.breakpoint
        _, i1, _ = self._inner_integrals()
        return (i1 + jnp.exp(-l2 * c) * (c / l1 + 1.0 / l1**2)) / self._half_z()

    def second_moment(self):
        """E N² (eq. 13): (I2 + e^{−λ2 c}(c²/λ1 + 2c/λ1² + 2/λ1³)) / (Z/2).

        Returns:
          E N², of the batch shape.
        """
        l2, l1, c = self._l2, self._l1, self.breakpoint
        _, _, i2 = self._inner_integrals()
        return (i2 + jnp.exp(-l2 * c) * (c * c / l1 + 2.0 * c / l1**2 + 2.0 / l1**3)) / self._half_z()

    def entropy(self):
        """Differential entropy (eq. 14) = log Z + E φ(|N|) = log(2 Z/2) + λ2 (I1/(Z/2) + c P_out) + P_out.

        Returns:
          The differential entropy in nats, of the batch shape.
        """
        _, i1, _ = self._inner_integrals()
        zh, p_out = self._half_z(), self.tail_mass()
        return jnp.log(2.0 * zh) + self._l2 * (i1 / zh + self.breakpoint * p_out) + p_out


@pytree_dataclass
class GeometricMixture(_Piecewise):
    r"""The geometric mixture Geom_m on the integers: two geometric scales fused at c.

    Geom_m (Definition 4, eqs. 17–18) on the integers: pmf ∝ e^{−|k|/b2} for |k| ≤ c,
    ∝ e^{−|k|/b1} beyond, with the weights a1,g, a2,g of eq. (18) (continuity at ±c).
    ``GeometricMixture.from_epsilon(ε, r, c, Δ)`` is the paper's Geom_m(e^{ε/Δ}, e^{rε/Δ}), c an
    integer. Exactly ``pure_epsilon(Δ)``-DP for an integer Δ (tight); exact four-atom PLD at Δ = 1.

    Args:
      inner_scale: b2 > 0, the scale on ``|n| ≤ c`` (scalar or array; differentiable).
      outer_scale: b1 > 0, the scale beyond ``c`` (default 0.2).
      breakpoint: c ≥ 0, one integer (static; default 1).

    Raises:
      ValueError: a scale not positive, a negative breakpoint, or a breakpoint that is not one
        integer.

    References:
      Li et al., "More Flexible Differential Privacy: The Application of Piecewise Mixture
      Distributions in Query Release", arXiv:1707.01189v3, Definition 4, eqs. (17)–(18).
    """

    inner_scale: jax.Array
    outer_scale: jax.Array = 0.2  # defaults: the paper's headline shape (r = 5, c = b2) at b2 = 1
    breakpoint: int = static_field(default=1)  # an integer: static (the law is not differentiable in c)
    #: the law is log-concave (:func:`log_concave_at`): the worst shift is Δ itself
    log_concave: bool = static_field(default=False, init=False)
    discrete = True

    # -- constants (Definition 4, eqs. (17)–(18)) ------------------------------------------------------
    def _t0(self):
        return 1.0 / jnp.expm1(self._l1)  # q1/(1 − q1)

    def _s0(self):
        l2, c = self._l2, self.breakpoint
        return jnp.exp(-l2) * jnp.expm1(-l2 * c) / jnp.expm1(-l2)  # Σ_{t=1..c} q2^t

    def _z(self):
        """Z_d = 1 + 2 S0 + 2 q2^c T0."""
        return 1.0 + 2.0 * self._s0() + 2.0 * jnp.exp(-self._l2 * self.breakpoint) * self._t0()

    def _log_norm(self):
        return jnp.log(self._z())

    def tail_mass(self):
        """P_out = P(|N| > c) = 2 q2^c T0 / Z_d.

        Returns:
          P_out, of the batch shape.
        """
        return 2.0 * jnp.exp(-self._l2 * self.breakpoint) * self._t0() / self._z()

    def weights(self):
        """The paper's ``(a1,g, a2,g)`` of eq. (18).

        Returns:
          ``(a1,g, a2,g)``, of the batch shape.
        """
        l2, l1 = self._l2, self._l1
        a2 = jnp.tanh(l2 / 2.0) ** -1 / self._z()  # p(0) = a2,g (α2−1)/(α2+1) = 1/Z_d
        a1 = a2 * jnp.tanh(l2 / 2.0) / jnp.tanh(l1 / 2.0) * jnp.exp((l1 - l2) * self.breakpoint)
        return a1, a2

    def _log_tail(self, m):
        """log T(m) = log P(|N| ≥ m)/2 for integers m ≥ 1."""
        l2, l1, c = self._l2, self._l1, self.breakpoint
        lz = jnp.log(self._z())
        outer = -l2 * c + jnp.log(self._t0()) - l1 * jnp.maximum(m - c - 1.0, 0.0) - lz
        mi = jnp.minimum(m, c)
        inner_sum = -l2 * mi + safe_log(jnp.expm1(-l2 * (c - mi + 1.0)) / jnp.expm1(-l2))
        inner = jnp.logaddexp(inner_sum, -l2 * c + jnp.log(self._t0())) - lz
        return jnp.where(m > c, outer, inner)

    def _magnitude(self, x):
        """The largest integer m ≥ 0 with T(m) ≥ x (x ∈ (0, ½]), in closed form on both pieces."""
        l2, l1, c = self._l2, self._l1, self.breakpoint
        t_c1 = self._log_tail(c + 1.0)
        lx = jnp.log(x)
        outer = c + 1.0 + jnp.floor(jnp.maximum(t_c1 - lx, 0.0) / l1)
        q2c_t0 = jnp.exp(-l2 * c) * self._t0()
        big_a = (x * self._z() - q2c_t0) * -jnp.expm1(-l2) + jnp.exp(-l2 * (c + 1.0))
        inner = jnp.floor(-jnp.log(jnp.maximum(big_a, 1e-300)) / l2)
        inner = jnp.clip(inner, 0.0, c)
        return jnp.where(lx <= t_c1, outer, inner)

    # -- the law ---------------------------------------------------------------------
    def noise_log_prob(self, n):
        n = jnp.asarray(n)
        return jnp.where(n == jnp.round(n), self._log_density(n), -jnp.inf)

    def noise_log_cdf(self, n):
        k = jnp.floor(jnp.asarray(n))
        below = self._log_tail(jnp.maximum(-k, 1.0))
        above = jnp.log1p(-jnp.exp(self._log_tail(jnp.maximum(k + 1.0, 1.0))))
        return jnp.where(k <= -1, below, above)

    def noise_icdf(self, u):
        """The noise's quantile, branch-free.

        Smallest k with F(k) ≥ u, branch-free: −M(u) for u ≤ ½, M(1 − u) above (M: the tail
        magnitude, geometric on each piece; Algorithm 2 of the paper, rewritten symmetrically).

        Args:
          u: probabilities in (0, 1).

        Returns:
          The integer quantiles, as floats.
        """
        u = jnp.asarray(u)
        lower = u <= 0.5
        x = jnp.where(lower, u, 1.0 - u)
        m = self._magnitude(x)
        return jnp.where(lower, -m, m)

    def noise_reach(self):
        lp = jnp.log(self.tail_mass()) - math.log(1e-17)
        return self.breakpoint + self.outer_scale * jnp.maximum(lp, 0.0) + 2.0

    def noise_far(self):
        lp = jnp.log(self.tail_mass()) + 800.0
        return self.breakpoint + self.outer_scale * jnp.maximum(lp, 0.0) + 2.0

    # -- moments (the printed eqs. 20–22 are wrong; these are the sums) ------------------------------
    def _sums(self):
        l2, l1, c = self._l2, self._l1, self.breakpoint
        q2, q1 = jnp.exp(-l2), jnp.exp(-l1)
        qc = jnp.exp(-l2 * c)
        om = -jnp.expm1(-l2)  # 1 − q2
        s1 = q2 * (1.0 - (c + 1.0) * qc + c * qc * q2) / om**2
        s2 = q2 * (1.0 + q2 - (c + 1.0) ** 2 * qc + (2 * c * c + 2 * c - 1.0) * qc * q2 - c * c * qc * q2 * q2) / om**3
        om1 = -jnp.expm1(-l1)
        t0, t1, t2 = q1 / om1, q1 / om1**2, q1 * (1.0 + q1) / om1**3
        return qc, s1, s2, t0, t1, t2

    def mean_abs(self):
        """E|N| = 2 (S1 + q2^c (c T0 + T1)) / Z_d.

        Returns:
          E|N|, of the batch shape.
        """
        qc, s1, _, t0, t1, _ = self._sums()
        c = self.breakpoint
        return 2.0 * (s1 + qc * (c * t0 + t1)) / self._z()

    def second_moment(self):
        """E N² = 2 (S2 + q2^c (c² T0 + 2c T1 + T2)) / Z_d.

        Returns:
          E N², of the batch shape.
        """
        qc, _, s2, t0, t1, t2 = self._sums()
        c = self.breakpoint
        return 2.0 * (s2 + qc * (c * c * t0 + 2.0 * c * t1 + t2)) / self._z()

    def entropy(self):
        """Shannon entropy = ln Z_d + λ2·2(S1 + c q2^c T0)/Z_d + λ1·2 q2^c T1/Z_d (nats).

        Returns:
          The Shannon entropy in nats, of the batch shape.
        """
        qc, s1, _, t0, t1, _ = self._sums()
        c, z = self.breakpoint, self._z()
        return jnp.log(z) + self._l2 * 2.0 * (s1 + c * qc * t0) / z + self._l1 * 2.0 * qc * t1 / z
