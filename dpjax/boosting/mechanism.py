"""The privacy-boosted mechanism ``PrivacyBoosted(kernel, region, rho)``: boosting rate, output law, hooks."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax.boosting import closed_forms, sampler
from dpjax.kernels.base import AdditiveMechanism, sort_small
from dpjax.mechanism import Mechanism
from dpjax.pytree import pytree_dataclass, static_field
from dpjax.regions import Region
from dpjax.validation import check_int, check_positive, check_probability, is_traced

__all__ = ["PrivacyBoosted"]

_SAMPLERS = ("mixture", "rejection")


@pytree_dataclass
class PrivacyBoosted(Mechanism):
    """A kernel re-weighted to land in ``region`` with probability at least ``rho`` (PB-DP eq. 2).

    Args:
      kernel: any additive noise kernel (:class:`dpjax.AdditiveMechanism`): the built-in Laplace,
        Gaussian, DiscreteLaplace, DiscreteGaussian, or one written outside the package.
      region: ``AbsoluteError(tau)``, ``RelativeError(theta, tau)`` or ``FixedInterval(low, high)``.
      rho: required coverage ``Pr[M(Q) ∈ S(Q)]``, in (0, 1].
      sampler: ``"mixture"`` (exact, default) or ``"rejection"`` (the paper's).
      num_pairs: number of answer pairs :meth:`neighbour_pairs` returns for regions that
        move non-rigidly with the answer (relative, fixed). Default: 201 answers of a grid,
        or for a relative region with a discrete kernel every distinct pair (6 per region
        width up to the kernel's reach; a smaller value is refused).

    Raises:
      ValueError: ``kernel`` not an additive kernel; ``region`` not a region, or holding no answer
        the kernel can take; ``rho`` outside (0, 1]; an unknown ``sampler``; ``num_pairs`` not an
        integer or below the pairs the region needs.

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, §3.1, eqs. (2)–(3), and §4 (the regions).
    """

    kernel: AdditiveMechanism
    region: Region
    rho: jax.Array
    sampler: str = static_field(default="mixture")
    num_pairs: int | None = static_field(default=None)

    def __post_init__(self):
        if not isinstance(self.kernel, AdditiveMechanism):
            raise ValueError(
                "kernel must be an additive noise kernel (a dpjax.AdditiveMechanism: Laplace, Gaussian, "
                f"DiscreteLaplace, DiscreteGaussian or your own), got {type(self.kernel).__name__}"
            )
        if not isinstance(self.region, Region):
            raise ValueError(
                "region must be AbsoluteError(tau), RelativeError(theta, tau) or FixedInterval(low, high), "
                f"got {type(self.region).__name__}"
            )
        check_probability("rho", self.rho)
        if self.sampler not in _SAMPLERS:
            raise ValueError(f"sampler must be one of {_SAMPLERS}, got {self.sampler!r}")
        self.region.check_answers(self.discrete)
        need = self.region.required_pairs(self.kernel.noise_reach(), self.discrete)
        if self.num_pairs is None and need != 0:
            object.__setattr__(self, "num_pairs", need or 201)
        if self.num_pairs is not None:
            check_int("num_pairs", self.num_pairs, minimum=max(need or 2, 2))

    @property
    def discrete(self) -> bool:
        """Returns:

        The kernel's ``discrete``.
        """
        return self.kernel.discrete

    @property
    def lattice_step(self):
        """The kernel's: the output is the unrounded answer plus the kernel's noise.

        Returns:
          The kernel's ``lattice_step``.
        """
        return self.kernel.lattice_step

    # -- region and boosting ----------------------------------------------------
    def interval(self, value):
        """``(lo, hi)``: the preferred region ``S(value)``.

        Args:
          value: the true answer(s) Q (array).

        Returns:
          ``(lo, hi)``, of the broadcast shape.
        """
        return self.region.interval(value)

    def _masses(self, value):
        v = jnp.asarray(value)
        lo, hi = self.region.interval(v)
        return self.kernel.noise_region_log_masses(*self._edges(lo - v, hi - v))

    def _edges(self, a, b):
        """Noise-coordinate edges of the region ``[a, b]``: (last noise below, last noise inside).

        Continuous kernels: ``(a, b)``. Integer noise: the region holds the integers
        ``ceil(a) … floor(b)``, so the edges are ``ceil(a) − 1`` and ``floor(b)``.
        """
        if self.discrete:
            return jnp.ceil(a) - 1.0, jnp.floor(b)
        return a, b

    def region_mass(self, value):
        """``p_S(value)``: the kernel's mass in ``S(value)``.

        Args:
          value: the true answer(s) Q (array).

        Returns:
          ``p_S``, of the broadcast shape.
        """
        return jnp.exp(self._masses(value)[1])

    @property
    def log1m_boosting_rate(self):
        """``log(1 − q)``, accurate when q is within float eps of 1.

        ``log(1 − q)``, computed directly as ``min_h log[p_S (1 − ρ) / (ρ p̄_S)]`` over the
        hardest answers h (clipped at 0): accurate when q is within float eps of 1.

        Returns:
          ``log(1 − q)``, of the batch shape.
        """
        out = None
        for h in self.region.hardest_answers(self.discrete):
            log_lo, log_in, log_hi = self._masses(h)
            r = log_in + jnp.log1p(-self.rho) - jnp.log(self.rho) - jnp.logaddexp(log_lo, log_hi)
            out = r if out is None else jnp.minimum(out, r)
        return jnp.minimum(jnp.where(jnp.isnan(out), 0.0, out), 0.0)

    @property
    def boosting_rate(self):
        """``q`` of eq. (3), clipped at 0: max over the hardest answers of ``(ρ − p_S)/(ρ(1 − p_S))``.

        Returns:
          ``q`` in [0, 1], of the batch shape.
        """
        return 0.0 - jnp.expm1(self.log1m_boosting_rate)

    def log_normalizer(self, value, *, _l1mq=None):
        """``log(1 − p̄_S(value) q)``, the log of the normaliser of eq. (2).

        Args:
          value: the true answer(s) Q (array).

        Returns:
          ``log(1 − p̄_S q)``, of the broadcast shape.
        """
        log_lo, log_in, log_hi = self._masses(value)
        l1mq = self.log1m_boosting_rate if _l1mq is None else _l1mq
        return jnp.logaddexp(log_in, l1mq + jnp.logaddexp(log_lo, log_hi))

    def coverage(self, value):
        """``Pr[M(value) ∈ S(value)] = p_S/(1 − p̄_S q)``; equals ``rho`` at the hardest answer.

        Args:
          value: the true answer(s) Q (array).

        Returns:
          The coverage, of the broadcast shape.
        """
        return jnp.exp(self._masses(value)[1] - self.log_normalizer(value))

    def log_boost(self, y, value, *, _l1mq=None):
        """``log w(y) − log(1 − p̄_S q)``: ``log_prob`` minus the kernel's log density.

        Constant between :meth:`output_breakpoints`.

        Args:
          y: outputs (array).
          value: the true answer(s).

        Returns:
          ``log w(y) − log(1 − p̄_S q)``, of the broadcast shape.
        """
        l1mq = self.log1m_boosting_rate if _l1mq is None else _l1mq
        lo, hi = self.region.interval(value)
        y = jnp.asarray(y)
        inside = (y >= lo) & (y <= hi)
        log_w = jnp.where(inside, 0.0, l1mq)
        return log_w - self.log_normalizer(value, _l1mq=l1mq)

    # -- output law -------------------------------------------------------------
    def log_prob(self, y, value):
        """The boosted law's log density (log pmf for a discrete kernel), eq. (2).

        Args:
          y: outputs (array).
          value: the true answer(s).

        Returns:
          ``log f_pb(y | value)``, of the broadcast shape.
        """
        y = jnp.asarray(y)
        return self.kernel.noise_log_prob(y - value) + self.log_boost(y, value)

    def cdf(self, y, value):
        """The boosted law's CDF.

        Args:
          y: outputs (array).
          value: the true answer(s).

        Returns:
          ``Pr[M(value) <= y]``, of the broadcast shape.
        """
        v = jnp.asarray(value)
        n = jnp.asarray(y) - v
        if self.discrete:
            n = jnp.floor(n)
        lo, hi = self.region.interval(v)
        e_lo, e_hi = self._edges(lo - v, hi - v)
        l1mq = self.log1m_boosting_rate
        keep = jnp.exp(l1mq)
        z = jnp.exp(self.log_normalizer(v, _l1mq=l1mq))
        p_lo = jnp.exp(self.kernel.noise_log_cdf(e_lo))
        f = jnp.exp(self.kernel.noise_log_cdf(n))
        sf = jnp.exp(self.kernel.noise_log_sf(n))
        below = keep * f / z
        inside = (f - p_lo + keep * p_lo) / z
        above = 1.0 - keep * sf / z
        out = jnp.where(n <= e_lo, below, jnp.where(n <= e_hi, inside, above))
        return jnp.clip(out, 0.0, 1.0)

    def sf(self, y, value):
        """The boosted law's survival function, accurate in the upper tail.

        ``Pr[M(value) > y]``: ``(1−q)·Pr[N > y − value]/Z`` above the region (tail-accurate), else
        ``1 − cdf``.

        Args:
          y: outputs (array).
          value: the true answer(s).

        Returns:
          ``Pr[M(value) > y]``, of the broadcast shape.
        """
        v = jnp.asarray(value)
        n = jnp.asarray(y) - v
        if self.discrete:
            n = jnp.floor(n)
        lo, hi = self.region.interval(v)
        _, e_hi = self._edges(lo - v, hi - v)
        l1mq = self.log1m_boosting_rate
        above = jnp.exp(l1mq + self.kernel.noise_log_sf(n) - self.log_normalizer(v, _l1mq=l1mq))
        return jnp.where(n > e_hi, jnp.clip(above, 0.0, 1.0), 1.0 - self.cdf(y, value))

    def privacy_loss(self, y, value, neighbour_value):
        """``log p(y|value) − log p(y|neighbour_value)``: kernel loss + ``log_boost`` difference.

        Args:
          y: outputs (array).
          value: the answer.
          neighbour_value: the neighbouring answer.

        Returns:
          The privacy loss, of the broadcast shape.
        """
        y = jnp.asarray(y)
        kernel_loss = self.kernel.noise_log_prob(y - value) - self.kernel.noise_log_prob(y - neighbour_value)
        l1mq = self.log1m_boosting_rate
        boost = self.log_boost(y, value, _l1mq=l1mq) - self.log_boost(y, neighbour_value, _l1mq=l1mq)
        # (an output outside both supports, possible only when q = 1, gets the kernel loss)
        return kernel_loss + jnp.where(jnp.isnan(boost), 0.0, boost)

    # -- sampling ---------------------------------------------------------------
    def _sample(self, uniform, value):
        """Exact mixture (default) or the paper's rejection sampler (:mod:`dpjax.boosting.sampler`).

        The region relative to the answer is answer-free for translation-invariant regions,
        so the masses are computed once per batch instead of once per record."""
        dt = uniform.dtype
        mech = jax.tree_util.tree_map(lambda p: jnp.asarray(p, dt), self)
        kernel = mech.kernel
        v = jnp.asarray(value, dt)
        e_lo, e_hi = mech._edges(*mech.region.noise_interval(v))
        log1mq = mech.log1m_boosting_rate
        if self.sampler == "rejection":
            return v + sampler.rejection_noise(kernel, uniform, e_lo, e_hi, jnp.exp(log1mq))
        if kernel.discrete:
            return v + sampler.mixture_noise_discrete(kernel, uniform, e_lo, e_hi, log1mq)
        keep = jnp.exp(log1mq).astype(dt)  # (the hardest answers may be float64)
        return v + sampler.mixture_noise_continuous(kernel, uniform, e_lo, e_hi, keep, mech.region.symmetric_noise)

    def exact_lattice(self):
        """The exact tier's mechanism (:mod:`dpjax.exact.lattice`).

        Over a discrete Gaussian or discrete Laplace kernel with an absolute-error region, this boosted
        law sampled with integers only (one exact inverse-CDF table of the boosted |N|, the keep
        probability that of the accountant); other kernels and regions refuse.

        Returns:
          The lattice mechanism that ``numerics="exact"`` runs; account that one for the privacy of what ran.

        Raises:
          ValueError: parameters the exact tier cannot represent (see :mod:`dpjax.exact.lattice`).
        """
        from dpjax.exact.lattice import boosted_lattice

        return boosted_lattice(self)

    # -- accounting hooks -----------------------------------------------------
    def neighbour_pairs(self, sensitivity=1.0):
        """``(values, neighbour_values)``: answer pairs (trailing axis) containing the worst pair.

        Absolute error: ``(0, Δ)`` (translation invariant). Relative error: ``(Q, Q + Δ)``
        for ``num_pairs`` answers ``Q`` from ``−Δ/2`` to where both strips leave the
        kernel's support (the mirror half is the reversed direction); with a discrete
        kernel, one pair per distinct pair of region widths instead. Fixed region:
        ``(Q, Q + Δ)`` for ``Q ∈ [low, high − Δ]`` (integer answers for discrete kernels).
        Each pair is to be examined in both directions.

        Args:
          sensitivity: Δ (positive).

        Returns:
          ``(values, neighbour_values)``.

        Raises:
          ValueError: ``sensitivity`` not positive; ``num_pairs`` unknown (a discrete kernel's
            relative region built from traced parameters).
        """
        if not is_traced(sensitivity):
            check_positive("sensitivity", sensitivity)
        if self.num_pairs is None:
            raise ValueError(
                "num_pairs must be given for a relative region with a discrete kernel built from traced "
                "parameters (6 per region width up to the kernel's reach: build it from concrete values "
                "once to see the default)"
            )
        return self.region.neighbour_pairs(sensitivity, self.kernel.noise_reach(), self.num_pairs, self.discrete)

    def output_breakpoints(self, value, neighbour_value):
        """Sorted region boundaries of both laws, shape ``broadcast + (4,)``.

        Between consecutive breakpoints ``privacy_loss(y, value, neighbour_value)``
        is the kernel's loss plus a constant, hence monotone in ``y``. For discrete
        kernels the boundaries are placed at half-integers (``ceil(lo) − ½``,
        ``floor(hi) + ½``) so that no output sits on one.

        Args:
          value: the answer.
          neighbour_value: the neighbouring answer.

        Returns:
          The sorted boundaries, shape ``broadcast + (4,)``.
        """
        lo, hi = self.region.interval(value)
        lo2, hi2 = self.region.interval(neighbour_value)
        pts = [lo, hi, lo2, hi2]
        if self.discrete:
            pts = [jnp.ceil(lo) - 0.5, jnp.floor(hi) + 0.5, jnp.ceil(lo2) - 0.5, jnp.floor(hi2) + 0.5]
        shape = jnp.broadcast_shapes(*[jnp.shape(p) for p in pts])
        return sort_small(jnp.stack([jnp.broadcast_to(p, shape) for p in pts], axis=-1))

    @property
    def symmetric_pairs(self) -> bool:
        """Whether the declared pairs' divergences are symmetric.

        δ(P_v‖P_v') = δ(P_v'‖P_v) for the declared pairs: true for the absolute-error
        region (reflection y → v + v' − y swaps the two laws), not for the others.

        Returns:
          True for the absolute-error region.
        """
        return self.region.translation_invariant

    def path_kink(self, values, nvalues):
        """An answer on the pair path where the two laws' region edges cross.

        An answer on the pair path (nodes ``values``/``nvalues``, trailing axis) where the
        divergence has a kink off the grid (relative region: S(Q)'s upper edge on S(Q + Δ)'s
        lower), searched besides the best node; ``None`` where the region declares none.

        Args:
          values: the path's answers (trailing axis).
          nvalues: their neighbours.

        Returns:
          The kink's answer, or ``None``.
        """
        kink = getattr(self.region, "path_kink", None)
        return None if kink is None or self.discrete else kink(values, nvalues)

    def path_variation(self, epsilon, start, end):
        r"""A bound of how much a pair's δ(ε) changes along a segment of the pair path.

        ``|δ_ε(P_v‖P_v') − δ_ε(P_u‖P_u')| ≤ V`` (either order of every pair) for every pair (u, u') on the
        segment from ``start`` = (v_a, v'_a) to ``end`` = (v_b, v'_b), both answers moving monotonically
        (linear or rounded-linear), and V proportional along the segment (a Lipschitz constant V / length).

        Proof. δ_ε(P‖P') is invariant under shifting both laws, so a pair's divergence is that of its noise
        laws N_Q (the output minus Q), N_{Q'} shifted by Q' − Q. N_Q has density g_Q / Z_Q with
        g_Q(x) = f(x)·(1 on S(Q) − Q, 1 − q outside) and Z_Q = ∫ g_Q: it depends on Q only through the
        edges e_lo(Q), e_hi(Q) of S(Q) − Q, moving at speed at most s (:meth:`dpjax.regions.Region
        .noise_edge_speed`: θ for the relative region, 1 for the fixed one). ∂_Q g_Q = q (f(e_hi) e_hi' δ_{e_hi}
        − f(e_lo) e_lo' δ_{e_lo}), of mass ≤ q s (f(e_lo) + f(e_hi)), and |∂_Q Z_Q| is at most the same, so
        the total variation TV(N_Q, N_R) = ½‖g_Q/Z_Q − g_R/Z_R‖₁ ≤ |Q − R|·q s (f(d_lo) + f(d_hi)) / min Z,
        d the least distances from the answer to the edges over the answers between Q and R
        (:meth:`dpjax.regions.Region.nearest_noise_edges`; f is largest there for a symmetric unimodal
        kernel) and min Z the normaliser at the hardest answers (every answer's region holds at least their
        kernel mass). A discrete kernel's unit shift moves one point across each edge: the same bound with f
        at the distance less one. Finally δ_ε(P‖P') − δ_ε(R‖R') ≤ sup_A (P − R)(A) + e^ε sup_A (R' − P')(A)
        = TV(P, R) + e^ε TV(P', R'), so V = max(T + e^ε T', T' + e^ε T) (both orders), T and T' the bounds
        for the two answers' moves.

        Args:
          epsilon: ε (array broadcasting with the answers).
          start: ``(v_a, v'_a)``, the segment's first pair (arrays).
          end: ``(v_b, v'_b)``, its last pair.

        Returns:
          V, of the broadcast shape; ``None`` where the region declares no noise edge speed.
        """
        speed = self.region.noise_edge_speed()
        if speed is None:
            return None
        l1mq = self.log1m_boosting_rate
        log_z = None
        for h in self.region.hardest_answers(self.discrete):
            lz = self.log_normalizer(h, _l1mq=l1mq)
            log_z = lz if log_z is None else jnp.minimum(log_z, lz)
        coef = -jnp.expm1(l1mq) * speed * jnp.exp(-log_z)

        def move(a, b):
            d_lo, d_hi = self.region.nearest_noise_edges(jnp.minimum(a, b), jnp.maximum(a, b))
            if self.discrete:
                d_lo, d_hi = (jnp.maximum(jnp.floor(d) - 1.0, 0.0) for d in (d_lo, d_hi))
            f = jnp.exp(self.kernel.noise_log_prob(-d_lo)) + jnp.exp(self.kernel.noise_log_prob(d_hi))
            return coef * f * jnp.abs(b - a)

        t, t2 = move(start[0], end[0]), move(start[1], end[1])
        e = jnp.exp(jnp.minimum(jnp.asarray(epsilon), 700.0))
        return jnp.maximum(t + e * t2, t2 + e * t)

    @property
    def pair_path(self) -> bool:
        """Whether the declared pairs sample a continuum of answers.

        Relative and fixed regions' pairs sample the answers' continuum (Q, Q + Δ): the
        accountant bounds the supremum between them (the divergence peaks between grid
        answers). Not for a relative region with a discrete kernel, whose pairs are listed
        exhaustively (:meth:`dpjax.RelativeError.neighbour_pairs`).

        Returns:
          The region's ``pair_path(discrete)``.
        """
        return self.region.pair_path(self.discrete)

    def boost_parts(self, value, neighbour_value):
        """``(log(1−q), log Z(value), log Z(neighbour_value))`` from one fused mass evaluation.

        The same formulas as :attr:`log1m_boosting_rate` and :meth:`log_normalizer`
        (hardest answers and the pair stacked into one ``noise_region_log_masses`` call).

        Args:
          value: the answer.
          neighbour_value: the neighbouring answer.

        Returns:
          ``(log(1−q), log Z(value), log Z(neighbour_value))``.
        """
        hard = [jnp.asarray(h) for h in self.region.hardest_answers(self.discrete)]
        vals = hard + [jnp.asarray(value), jnp.asarray(neighbour_value)]
        # the stacking axis leads the parameters' batch axes too
        shape = jnp.broadcast_shapes(*[jnp.shape(x) for x in vals + jax.tree_util.tree_leaves(self)])
        answers = jnp.stack([jnp.broadcast_to(x, shape) for x in vals])
        lo, hi = self.region.interval(answers)
        log_lo, log_in, log_hi = self.kernel.noise_region_log_masses(*self._edges(lo - answers, hi - answers))
        n = len(hard)
        r = log_in[:n] + jnp.log1p(-self.rho) - jnp.log(self.rho) - jnp.logaddexp(log_lo[:n], log_hi[:n])
        out = jnp.min(r, axis=0)
        l1mq = jnp.minimum(jnp.where(jnp.isnan(out), 0.0, out), 0.0)
        log_z = jnp.logaddexp(log_in[n:], l1mq + jnp.logaddexp(log_lo[n:], log_hi[n:]))
        return l1mq, log_z[0], log_z[1]

    def hockey_stick(self, epsilon, value, neighbour_value):
        """Exact δ(ε) of a pair, for every kernel and any real ε.

        Exact δ(ε) = ∫ (p(y|value) − e^ε p(y|neighbour_value))_+ dy, every kernel, any real ε
        (:func:`dpjax.boosting.closed_forms.hockey_stick`); broadcasts ε (..., m) against the
        pair and the parameters (..., 1); differentiable in every parameter.

        Args:
          epsilon: ε, any real (array broadcasting with the answers and the parameters).
          value: the answer v.
          neighbour_value: the neighbouring answer v'.

        Returns:
          δ(ε) = ∫ (p(y|v) − e^ε p(y|v'))_+ dy, of the broadcast shape.
        """
        return closed_forms.hockey_stick(self, epsilon, value, neighbour_value)

    def renyi_divergence(self, order, value, neighbour_value):
        """Exact D_α(P_value‖P_neighbour_value), α > 1 (:func:`dpjax.boosting.closed_forms.renyi_divergence`).

        Args:
          order: the order α > 1 (array broadcasting with the answers and the parameters).
          value: the answer v.
          neighbour_value: the neighbouring answer v'.

        Returns:
          D_α(P_v‖P_v'), of the broadcast shape.
        """
        return closed_forms.renyi_divergence(self, order, value, neighbour_value)

    def validate_values(self, values) -> None:
        """Refuse values outside the kernel's and the region's domains.

        Args:
          values: the true answers.

        Raises:
          ValueError: a scale the default float cannot carry for a release, or an answer outside a
            fixed region.
        """
        self.kernel.validate_values(values)
        self.region.validate_values(values)

    def traced_checks(self, values):
        rho = jnp.asarray(self.rho)
        # the kernel's own checks (its scale > 0) less its first, the values' check already made
        return (
            super().traced_checks(values)
            + self.kernel.traced_checks(values)[1:]
            + [(jnp.all((rho > 0) & (rho <= 1)), "rho must lie in (0, 1]")]
        )
