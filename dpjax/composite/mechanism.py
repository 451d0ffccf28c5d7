"""``dpjax.Composite``: the bounded, unbiased composite mechanism (Zhang et al., S&P 2024).

The query value ``f`` in a public input window ``[lo, hi]`` (width ``W``, the paper's Δf)
is mapped affinely to ``C_p = (f − mid)·C`` in ``[−C_p^max, C_p^max] ⊂ [−L, L]``
(Definitions 3.2/3.4, eq. 10–13, in a centred form, Remark 3.1); a point ``x`` is drawn
from ``P = H + G`` (Definition 3.3: an activation bump ``H`` of height ``k``, width ``m``,
placed at ``a = C_p/S1 − m/2`` so that ``E[x] = C_p`` — Theorem 3.1 — over a base ``G`` of
height ``y``) and released as ``mid + x/C`` ∈ ``[mid − L/C, mid + L/C]``. ``L`` follows from
``∫P = 1`` (Table 4 "Integral Value"), ``C = 2C_p^max/W`` with ``C_p^max = S1(L − m/2)``
(Table 4 Constraint-2).

It is not additive noise: the output law depends on where ``f`` sits in the window, so
the mechanism is a :class:`dpjax.Mechanism` with its own accounting hooks
(:mod:`dpjax.composite.privacy`): ε-DP holds between *any* two inputs of the window, and
the true worst-case loss ε* (docs/composite.md) can be below the nominal ε.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.composite import _laws, privacy
from dpjax.mechanism import Mechanism
from dpjax.pytree import pytree_dataclass, replace, static_field
from dpjax.validation import check_positive, check_real, concrete, is_traced

__all__ = ["Composite"]

#: relative slack on the DP constraint k ≤ y(e^ε − 1) for parameters rounded to float32
#: (the accountant always uses the true ε* of the parameters given, never the nominal ε).
DP_TOLERANCE = 1e-6


@pytree_dataclass
class Composite(Mechanism):
    """Composite DP mechanism ``activation × base`` on the input window ``(lo, hi)``.

    Args:
      activation: ``"rectangle"`` (A1), ``"half_sine"`` (A2) or ``"triangle"`` (A3).
      base: ``"uniform"`` (B1) or ``"quartic"`` (B2).
      epsilon: the nominal privacy budget ε (> 0).
      k: the activation height (> 0). B1 requires ``k ≤ y(e^ε − 1)`` (Table 4 Constraint-4); B2
        sets ``t = (y + k)e^{−ε}`` and requires ``t ≤ y`` (``t = y`` is B1). Also
        ``S1 = s·k·m < 1`` (Constraint-1). :func:`optimize.tune_composite` finds k, m and y.
      m: the activation width (> 0), with ``m < 2L`` (the bump fits, Constraint-2; ``L`` is derived).
      y: the base height (> 0).
      window: ``(lo, hi)``, the public, data-independent interval every query value lies in.
        Any two values of the window are neighbours for the guarantee (the paper's Definition 3.3);
        the noise scales with its width, so it should be the sensitivity's width (the paper's design).
      clip: clip values into the window instead of refusing them (keeps DP; a clipped value
        is released unbiasedly for the *clipped* value, i.e. biased for the true one).

    All numeric parameters are differentiable, batchable leaves.

    Raises:
      ValueError: an unknown ``activation`` or ``base``; ``clip`` not a bool; ``window`` not a pair
        of finite numbers with lo < hi; ``epsilon``, ``k``, ``m`` or ``y`` not positive; S1 ≥ 1
        (Constraint-1); ``k`` above y(e^ε − 1) (Constraint-4); ``m ≥ 2L`` (Constraint-2).

    References:
      Zhang et al., "Bounded and Unbiased Composite Differential Privacy", IEEE S&P 2024,
      Definitions 3.2–3.4, Theorem 3.1 and Table 4.
    """

    activation: str = static_field()
    base: str = static_field()
    epsilon: jax.Array
    k: jax.Array
    m: jax.Array
    y: jax.Array
    window: tuple
    clip: bool = static_field(default=False)

    def __post_init__(self):
        object.__setattr__(self, "activation", _laws.canonical_activation(self.activation))
        object.__setattr__(self, "base", _laws.canonical_base(self.base))
        if not isinstance(self.clip, bool):
            raise ValueError(f"clip must be True or False, got {self.clip!r}")
        try:
            lo, hi = self.window
        except (TypeError, ValueError):
            raise ValueError(f"window must be a pair (lo, hi), got {self.window!r}") from None
        object.__setattr__(self, "window", (lo, hi))
        for name in ("epsilon", "k", "m", "y"):
            check_positive(name, getattr(self, name))
        check_real("window", lo)
        check_real("window", hi)
        # under eager jax.grad the parameters are tracers with known values: check those (an invalid
        # m = 2L returned a gradient of 0); under jit they are unknown (dpjax.checked_release)
        vals = [concrete(x) for x in (self.epsilon, self.k, self.m, self.y, lo, hi)]
        if any(v is None for v in vals):
            return
        eps, k, m, y, lo_c, hi_c = (np.asarray(v, np.float64) for v in vals)
        if np.any(hi_c <= lo_c):
            raise ValueError(f"window must have lo < hi, got {self.window!r}")
        s1 = _laws.area_factor(self.activation) * k * m
        if np.any(s1 >= 1.0):
            raise ValueError(
                f"k: the activation's area S1 = s·k·m must be < 1 (Constraint-1), got k={self.k!r}, m={self.m!r}"
            )
        kmax = y * np.expm1(eps)
        if np.any(k > kmax * (1.0 + DP_TOLERANCE)):
            raise ValueError(
                f"k must satisfy the DP constraint k ≤ y(e^ε − 1) (Constraint-4"
                f"{'; B2: t ≤ y' if self.base == 'quartic' else ''}), got k={self.k!r} with "
                f"y={self.y!r}, epsilon={self.epsilon!r} (bound {kmax!r})"
            )
        with jax.enable_x64(True):
            L = np.asarray(replace(self, epsilon=eps, k=k, m=m, y=y, window=(lo_c, hi_c))._derived(jnp.float64)["L"])
        if np.any(m >= 2.0 * L):
            raise ValueError(
                f"m: the activation must fit inside [−L, L] (m < 2L, Constraint-2), got m={self.m!r} with L={L!r}"
            )

    # -- derived constants ---------------------------------------------------------
    def _derived(self, dtype=None):
        """``dict``: s1, t, L, cp_max, C (scale), mid, width — in ``dtype`` (default: the leaves')."""
        cast = (lambda x: jnp.asarray(x)) if dtype is None else (lambda x: jnp.asarray(x, dtype))
        eps, k, m, y = cast(self.epsilon), cast(self.k), cast(self.m), cast(self.y)
        lo, hi = cast(self.window[0]), cast(self.window[1])
        s1 = _laws.area_factor(self.activation) * k * m
        if self.base == "uniform":
            t = y
            L = (1.0 - s1) / (2.0 * y)
        else:
            t = (y + k) * jnp.exp(-eps)
            L = 5.0 * (1.0 - s1) / (2.0 * (4.0 * y + t))
        cp_max = s1 * (L - 0.5 * m)
        width = hi - lo
        scale = 2.0 * cp_max / width
        return dict(
            eps=eps,
            k=k,
            m=m,
            y=y,
            s1=s1,
            t=t,
            L=L,
            cp_max=cp_max,
            C=scale,
            mid=lo + 0.5 * width,
            width=width,
            lo=lo,
            hi=hi,
        )

    @property
    def s1(self):
        """``S1 = ∫H = s·k·m`` (s = 1, 2/π, 1/2 for A1–A3).

        Returns:
          S1, of the batch shape.
        """
        return self._derived()["s1"]

    @property
    def t(self):
        """Base value at ±L: ``y`` for B1, ``(y + k)e^{−ε}`` for B2.

        Returns:
          t, of the batch shape.
        """
        return self._derived()["t"]

    @property
    def half_domain(self):
        """``L``, from ``∫P = 1``: ``(1 − S1)/(2y)`` (B1), ``5(1 − S1)/(2(4y + t))`` (B2).

        Returns:
          L, of the batch shape.
        """
        return self._derived()["L"]

    @property
    def cp_max(self):
        """``C_p^max = S1(L − m/2)``: the mapped window's half-width in 𝓛.

        Returns:
          C_p^max, of the batch shape.
        """
        return self._derived()["cp_max"]

    @property
    def scale_factor(self):
        """``C = 2C_p^max/W`` (Definition 3.2).

        Returns:
          C, of the batch shape.
        """
        return self._derived()["C"]

    @property
    def h1_rate(self):
        """H1 = S2/S1 = (1 − S1)/S1 (Definition 4.2).

        Returns:
          H1, of the batch shape.
        """
        s1 = self.s1
        return (1.0 - s1) / s1

    @property
    def label(self) -> str:
        """The paper's name of the mechanism, e.g. ``"A1B1"``.

        Returns:
          The label.
        """
        return _laws.LABELS[self.activation] + _laws.LABELS[self.base]

    def output_range(self):
        """``(l, u) = (mid − L/C, mid + L/C)``: every output lies in it (Definitions 3.2, 3.4).

        Returns:
          ``(l, u)``, of the batch shape.
        """
        d = self._derived()
        half = d["L"] / d["C"]
        return d["mid"] - half, d["mid"] + half

    def _offset(self, value, d):
        """``f − mid`` (computed before any scaling), clipped into the window on request."""
        off = jnp.asarray(value) - d["mid"]
        if self.clip:
            off = jnp.clip(off, -0.5 * d["width"], 0.5 * d["width"])
        return off

    def bump_start(self, value, *, _d=None):
        """``a = C_p/S1 − m/2`` (Table 1 "Unbiased Output") for the answer ``value``.

        Args:
          value: the query value(s) f (array).

        Returns:
          ``a``, of the broadcast shape.
        """
        d = self._derived() if _d is None else _d
        cp = self._offset(value, d) * d["C"]
        return cp / d["s1"] - 0.5 * d["m"]

    # -- output law ------------------------------------------------------------------
    def density_x(self, x, value, *, _d=None):
        """``P(x) = H(x − a) + G(x)`` on 𝓛 (0 outside [−L, L]).

        Args:
          x: points of 𝓛 (array).
          value: the query value(s).

        Returns:
          ``P(x)``, of the broadcast shape.
        """
        d = self._derived() if _d is None else _d
        a = self.bump_start(value, _d=d)
        x = jnp.asarray(x)
        p = _laws.base(self.base, x, d["y"], d["t"], d["L"]) + _laws.bump(self.activation, x - a, d["k"], d["m"])
        return jnp.where(jnp.abs(x) <= d["L"], p, 0.0)

    def cdf_x(self, x, value, *, _d=None):
        """``∫_{−L}^{x} P`` (closed form).

        Args:
          x: points of 𝓛 (array).
          value: the query value(s).

        Returns:
          The CDF on 𝓛, of the broadcast shape.
        """
        d = self._derived() if _d is None else _d
        a = self.bump_start(value, _d=d)
        xc = jnp.clip(jnp.asarray(x), -d["L"], d["L"])
        f = _laws.base_cdf(self.base, xc, d["y"], d["t"], d["L"]) + _laws.bump_cdf(
            self.activation, xc - a, d["k"], d["m"]
        )
        # exactly 0 and 1 at the range ends (the closed forms' round-off would leave 1 − 1e-16)
        return jnp.where(xc >= d["L"], 1.0, jnp.where(xc <= -d["L"], 0.0, jnp.clip(f, 0.0, 1.0)))

    def _to_x(self, out, d):
        return (jnp.asarray(out) - d["mid"]) * d["C"]

    def log_prob(self, y, value):
        """Log density of the output ``y``: ``log(C·P((y − mid)C))``; ``−inf`` outside ``[l, u]``.

        Args:
          y: outputs (array).
          value: the query value(s).

        Returns:
          The log density, of the broadcast shape.
        """
        d = self._derived()
        p = self.density_x(self._to_x(y, d), value, _d=d)
        return jnp.where(p > 0, jnp.log(jnp.where(p > 0, p, 1.0)) + jnp.log(d["C"]), -jnp.inf)

    def cdf(self, y, value):
        """The output's CDF.

        Args:
          y: outputs (array).
          value: the query value(s).

        Returns:
          ``Pr[M(value) <= y]``, of the broadcast shape.
        """
        d = self._derived()
        return self.cdf_x(self._to_x(y, d), value, _d=d)

    def mean(self, value):
        """``E[M(value)] = value`` inside the window (Theorem 3.1); the clipped value with ``clip``.

        Args:
          value: the query value(s) f (array).

        Returns:
          ``E[M(value)]``, of the broadcast shape.
        """
        d = self._derived()
        return d["mid"] + self._offset(value, d) + 0.0 * d["C"]

    def variance(self, value):
        """The release's variance at an answer.

        ``Var[M(value)] = (M2_G + S1·c_σ·m² + C_p²(1/S1 − 1))/C²`` (the paper's variance, Table 1;
        the corrected Table 1/4 rows of §2.3) = Var(centre) + W²·H1·ρ²/4, ρ = C_p/C_p^max.

        Args:
          value: the query value(s) f (array).

        Returns:
          The variance, of the broadcast shape.
        """
        d = self._derived()
        cp = self._offset(value, d) * d["C"]
        m2g = _laws.base_second_moment(self.base, d["y"], d["t"], d["L"])
        var_l = m2g + d["s1"] * _laws.shape_variance(self.activation) * d["m"] ** 2 + cp * cp * (1.0 / d["s1"] - 1.0)
        return var_l / d["C"] ** 2

    def worst_variance(self):
        """Largest variance over the window (at its ends).

        Returns:
          The variance at the window's ends, of the batch shape.
        """
        return self.variance(self.window[1])

    def average_variance(self):
        """Variance averaged uniformly over the window: Var(centre) + W²·H1/12.

        Returns:
          The average variance, of the batch shape.
        """
        d = self._derived()
        return self.variance(d["mid"]) + d["width"] ** 2 * (1.0 - d["s1"]) / (12.0 * d["s1"])

    # -- sampling ----------------------------------------------------------------------
    def _sample(self, uniform, value):
        """Exact, rejection-free mixture sampler: with probability S1 the bump
        (uniform, inverse CDF of the half-sine, or a sum of two uniforms), otherwise the base
        (uniform; B2: its flat part of mass 2Lt or the quartic cap by ``±L·U·U'^{1/5}``).
        Mutually exclusive branches share uniforms."""
        dt = uniform.dtype
        d = self._derived(dt)
        v = jnp.asarray(value)
        off = v - d["mid"].astype(v.dtype) if jnp.issubdtype(v.dtype, jnp.floating) else v.astype(dt) - d["mid"]
        off = off.astype(dt)
        if self.clip:
            off = jnp.clip(off, -0.5 * d["width"], 0.5 * d["width"])
        m, L, s1 = d["m"], d["L"], d["s1"]
        a = off * (d["C"] / s1) - 0.5 * m
        u0, u1 = uniform(0), uniform(1)
        if self.activation == "rectangle":
            xb = a + m * u1
        elif self.activation == "half_sine":
            xb = a + (m / math.pi) * jnp.arccos(1.0 - 2.0 * u1)
        else:
            xb = a + 0.5 * m * (u1 + uniform(2))
        flat = L * (2.0 * u1 - 1.0)
        if self.base == "uniform":
            xg = flat
        else:
            w_flat = 2.0 * L * d["t"] / (1.0 - s1)
            sign = jnp.where(uniform(3) < 0.5, -1.0, 1.0).astype(dt)
            cap = sign * L * u1 * uniform(4) ** 0.2
            xg = jnp.where(uniform(2) < w_flat, flat, cap)
        x = jnp.where(u0 < s1, xb, xg)
        x = jnp.clip(x, -L, L)
        return d["mid"] + x * (1.0 / d["C"])

    # -- validation --------------------------------------------------------------------
    def validate_values(self, values) -> None:
        """Refuse values outside the window (unless ``clip``).

        Refuse values outside the window (unless ``clip``): the bump would leave [−L, L]
        and the release would be neither unbiased nor private (Definitions 3.2, 3.4).

        Args:
          values: the query values.

        Raises:
          ValueError: a value outside the window (without ``clip``).
        """
        if self.clip or is_traced(values) or any(is_traced(x) for x in self.window):
            return
        v = np.asarray(values, np.float64)
        lo, hi = (np.asarray(x, np.float64) for x in self.window)
        if np.any(v < lo) or np.any(v > hi):
            bad = v[(v < np.broadcast_to(lo, v.shape)) | (v > np.broadcast_to(hi, v.shape))]
            raise ValueError(
                f"values must lie in the window [lo, hi] = [{lo}, {hi}] (or build the mechanism with "
                f"clip=True, which biases the clipped values); got e.g. {bad.ravel()[:3]}"
            )

    # -- privacy -----------------------------------------------------------------------
    def pure_epsilon(self, sensitivity=None):
        """The true worst-case loss ε* over the neighbouring pairs of the window.

        Never below the truth, never above the nominal sup/inf bound: see
        :func:`dpjax.composite.privacy.epsilon_star`.

        Args:
          sensitivity: the largest distance of neighbouring values (default: the window's width).

        Returns:
          ε*, of the batch shape.
        """
        return privacy.epsilon_star(self, sensitivity)

    @property
    def symmetric_pairs(self) -> bool:
        """B1: δ(P_v‖P_v') = δ(P_v'‖P_v) (reflection and translation of the flat base).

        Returns:
          True for the uniform base (B1).
        """
        return self.base == "uniform"

    def neighbour_pairs(self, sensitivity=None):
        """The neighbouring pairs the accountant examines: edge pairs of the window.

        Edge pairs ``(lo, lo + s)``: A1 the single pair at ``s = min(Δ, W)`` (every pair with
        disjoint bump supports dominates; nearer bumps only lose mass, and the flat base makes the
        position irrelevant, B2's quartic base makes the edge the worst); A2/A3 eight shifts
        ``s ∈ (0, min(Δ, W)]`` at the edge and the centred pair
        (:func:`dpjax.composite.privacy.neighbour_pairs`).

        Args:
          sensitivity: Δ; ``None``: the window's width.

        Returns:
          ``(values, neighbour_values)``.
        """
        return privacy.neighbour_pairs(self, sensitivity)

    def privacy_loss(self, y, value, neighbour_value):
        """The privacy loss of an output between two query values, finite everywhere.

        ``log P_value − log P_neighbour_value`` at the output ``y``; both laws share the support
        ``[l, u]``, outside which neither has mass: there the loss of the nearest end (finite, so an
        output-grid accountant's cell bounds stay defined).

        Args:
          y: outputs (array).
          value: the query value.
          neighbour_value: the neighbouring value.

        Returns:
          The loss, finite everywhere.
        """
        d = self._derived()
        x = jnp.clip(self._to_x(y, d), -d["L"], d["L"])
        return jnp.log(self.density_x(x, value, _d=d)) - jnp.log(self.density_x(x, neighbour_value, _d=d))

    def output_breakpoints(self, value, neighbour_value):
        """Outputs where a pair's privacy loss jumps or turns.

        Outputs where the pair's loss jumps or turns (for the output-grid accountant): both bumps'
        ends and peaks, the centre (B2's base turns there) and the range ends ``l, u`` — (..., 9).

        Args:
          value: the query value.
          neighbour_value: the neighbouring value.

        Returns:
          Outputs of shape ``(..., 9)``.
        """
        d = self._derived()
        a, a2 = self.bump_start(value, _d=d), self.bump_start(neighbour_value, _d=d)
        L, m = d["L"], d["m"]
        pts = [-L, a, a + 0.5 * m, a + m, a2, a2 + 0.5 * m, a2 + m, 0.0 * L, L]
        shape = jnp.broadcast_shapes(*[jnp.shape(p) for p in pts])
        x = jnp.stack([jnp.broadcast_to(p, shape) for p in pts], -1)
        return d["mid"][..., None] + x / d["C"][..., None]

    def hockey_stick(self, epsilon, value, neighbour_value):
        """δ(ε) of one pair: exact for A1B1, an upper bound otherwise.

        δ(ε) of one pair: exact for A1B1 (piecewise constant laws: a 3-atom PLD),
        an upper bound from cells with pessimistic loss rounding otherwise
        (:func:`dpjax.composite.privacy.hockey_stick`).

        Args:
          epsilon: ε, any real (array broadcasting with the answers and the parameters).
          value: the answer v.
          neighbour_value: the neighbouring answer v'.

        Returns:
          δ(ε) = ∫ (p(y|v) − e^ε p(y|v'))_+ dy, of the broadcast shape.
        """
        return privacy.hockey_stick(self, epsilon, value, neighbour_value)
