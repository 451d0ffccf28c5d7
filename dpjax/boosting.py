r"""Privacy-boosted mechanisms (PB-DP; Jiang, Zhang et al., IEEE S&P 2025).

``PrivacyBoosted(kernel, region, rho)`` re-weights an additive kernel (Laplace,
Gaussian, DiscreteLaplace, DiscreteGaussian) so that its output lands in the
preferred region ``S(Q)`` of the true answer ``Q`` with probability at least
``rho`` (eq. 2 of the paper):

.. math::
   f_{pb}(y\mid Q) = \frac{f(y-Q)\,w(y)}{1-\bar p_S(Q)\,q},\qquad
   w(y) = 1 \text{ on } S(Q),\; 1-q \text{ outside},

where ``p_S(Q)`` is the kernel mass of ``S(Q)``, ``p̄_S = 1 − p_S`` and the
*boosting rate* ``q`` (eq. 3, clipped at 0) is

.. math:: q = \max\Big(0,\; \max_Q \frac{\rho - p_S(Q)}{\rho\,(1-p_S(Q))}\Big).

The max sits at the hardest answer (smallest ``p_S``; see
:meth:`dpjax.regions.Region.hardest_answers`), where the coverage
``Pr[M(Q) ∈ S(Q)] = p_S/(1 − p̄_S q)`` equals ``rho`` exactly; at every other
answer it is larger. ``rho = 1`` gives ``q = 1``: the kernel truncated to ``S``.

Samplers (static field ``sampler``):

* ``"mixture"`` (default): exact, branch-free three-component mixture (below /
  inside / above the region). One uniform picks the component, a second inverts
  the kernel CDF restricted to it, never through ``1 − F``. Continuous kernels work
  in linear space (:func:`_mixture_noise`): region masses from half-masses and tails,
  the quantile target carried both as its tail probability and as its offset from
  the median, so that far tails and regions narrow against the scale are exact to
  the float. Discrete kernels invert log-CDF targets with a discrete inverse CDF
  (closed form for the discrete Laplace, bisection on the CDF for the discrete
  Gaussian). Reparameterisable in the kernel's scale within each component.
* ``"rejection"``: the paper's sampler — propose from the kernel, accept if the
  proposal is in ``S`` or with probability ``1 − q`` otherwise — inside a
  ``lax.while_loop`` whose trial ``j`` uses the uniform streams ``2j`` (proposal,
  by inverse CDF) and ``2j + 1`` (acceptance). Expected trials ``1/(1 − p̄_S q)``
  (``rho/p_S`` at the hardest answer). Kept for parity with the paper's runtime
  experiment.

Accounting hooks (used by :mod:`accounting`; the mechanism's law is not
shift-invariant): :meth:`PrivacyBoosted.neighbour_pairs` (a grid of answer pairs
containing the worst one), :meth:`PrivacyBoosted.output_breakpoints` (the region
boundaries of both laws: between consecutive breakpoints the privacy loss is the
kernel's loss plus a constant, hence monotone), :meth:`PrivacyBoosted.log_boost`
(that constant's two parts). Exact closed forms for Gaussian kernels live in
:mod:`accounting.pbdp_exact`, the paper's (uncertified) formulas in
:mod:`accounting.pbdp_paper`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from dpjax.pytree import pytree_dataclass, static_field
from dpjax.validation import check_int, check_positive, check_probability, is_traced
from dpjax.kernels import DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace
from dpjax.mechanism import Mechanism
from dpjax.regions import AbsoluteError, FixedInterval, Region, RelativeError

__all__ = ["PrivacyBoosted", "AbsoluteError", "RelativeError", "FixedInterval", "Region"]

_KERNELS = (Laplace, Gaussian, DiscreteLaplace, DiscreteGaussian)
_SAMPLERS = ("mixture", "rejection")


# ----------------------------------------------------------------------------------
# kernel helpers
# ----------------------------------------------------------------------------------
def kernel_reach(kernel):
    """A distance beyond which the kernel's two tails hold < 1e-17 of mass."""
    if isinstance(kernel, (Gaussian, DiscreteGaussian)):
        return 8.6 * jnp.asarray(kernel.sigma) + 1.0
    return 40.0 * jnp.asarray(kernel.scale) + 1.0


def _edges(kernel, a, b):
    """Noise-coordinate edges of the region ``[a, b]``: (last noise below, last noise inside).

    Continuous kernels: ``(a, b)``. Discrete kernels (integer noise): the region
    holds the integers ``ceil(a) … floor(b)``, so the edges are ``ceil(a) − 1`` and ``floor(b)``.
    """
    if kernel.discrete:
        return jnp.ceil(a) - 1.0, jnp.floor(b)
    return a, b


def _log_sf(kernel, n):
    """``log Pr[N > n]`` (tail-stable, by symmetry)."""
    return kernel.noise_log_sf(n)


def _sf_arg(kernel, n):
    """``m`` with ``Pr[N > n] = F(m)`` (symmetric kernel): ``−n``, or ``−⌊n⌋ − 1`` on the integers."""
    return -jnp.floor(n) - 1.0 if kernel.discrete else -n


def _kernel_param(kernel):
    return kernel.sigma if isinstance(kernel, (Gaussian, DiscreteGaussian)) else kernel.scale


def _safe_log(x):
    """``log x`` for ``x >= 0`` (``−inf`` at 0) with a finite gradient at 0 (double ``where``)."""
    pos = x > 0
    return jnp.where(pos, jnp.log(jnp.where(pos, x, 1.0)), -jnp.inf)


def _log_cdf(kernel, *ns):
    """``log F`` of the kernel at several arrays in one (stacked) call; gradient-safe.

    Compile time and per-iteration cost grow with the number of ``log_ndtr``-like calls,
    not with their size, so the hooks stack their arguments. The discrete Gaussian's
    log-CDF is ``log`` of a table (0 beyond its support): taken with :func:`_safe_log`.
    """
    shape = jnp.broadcast_shapes(jnp.shape(_kernel_param(kernel)), *[jnp.shape(n) for n in ns])
    stacked = jnp.stack([jnp.broadcast_to(n, shape) for n in ns])
    if isinstance(kernel, DiscreteGaussian):
        out = _safe_log(kernel.noise_cdf(stacked))
    else:
        out = kernel.noise_log_cdf(stacked)
    return tuple(out[i] for i in range(len(ns)))


def _interval_masses(kernel, e_lo, e_hi):
    """``(log P_lo, log P_in, log P_hi)``: kernel mass below, inside and above the region.

    ``P_lo = F(e_lo)``, ``P_hi = Pr[N > e_hi]`` in log space; ``P_in`` as the
    difference of whichever tail is smaller (no ``1 − F`` cancellation). One fused
    log-CDF call; finite gradients (also for an empty region).
    """
    log_lo, log_hi, log_f_hi, log_sf_lo = _log_cdf(kernel, e_lo, _sf_arg(kernel, e_hi), e_hi, _sf_arg(kernel, e_lo))
    f_hi = jnp.exp(log_f_hi)
    sf_lo = jnp.exp(log_sf_lo)
    left = f_hi - jnp.exp(log_lo)  # accurate when the interval's centre is <= 0
    right = sf_lo - jnp.exp(log_hi)  # accurate when it is > 0
    p_in = jnp.where(e_lo + e_hi <= 0, left, right)
    if isinstance(kernel, (Gaussian, Laplace)):
        # an interval around 0 as two half-masses P(0 < N < x): no cancellation at 1/2
        # even when the interval is tiny against the scale (p_S ≪ 1)
        shape = jnp.broadcast_shapes(jnp.shape(_kernel_param(kernel)), jnp.shape(e_lo), jnp.shape(e_hi))
        halves = _half_mass(kernel, jnp.stack([jnp.broadcast_to(jnp.maximum(e_hi, 0.0), shape),
                                               jnp.broadcast_to(jnp.maximum(-e_lo, 0.0), shape)]))
        p_in = jnp.where((e_lo < 0) & (e_hi > 0), halves[0] + halves[1], p_in)
    p_in = jnp.where(e_hi > e_lo, jnp.maximum(p_in, 0.0), 0.0)
    return log_lo, _safe_log(p_in), log_hi


def _half_mass(kernel, x):
    """P(0 < N < x) for x >= 0 (Gaussian: erf; Laplace: expm1)."""
    if isinstance(kernel, Gaussian):
        return 0.5 * jax.scipy.special.erf(x / (kernel.sigma * math.sqrt(2.0)))
    return -0.5 * jnp.expm1(-x / kernel.scale)


def _far(kernel):
    """Width of the two outer output pieces beyond every region edge and centre: the
    kernel's mass beyond it underflows float64 (Gaussian Φ(−40) ≈ 1e−349; Laplace
    e^{−750}), so finite edges there give the values of ±∞ edges with finite gradients."""
    if isinstance(kernel, (Gaussian, DiscreteGaussian)):
        return 40.0 * jnp.asarray(kernel.sigma)
    return 750.0 * jnp.asarray(kernel.scale)


def _log_piece_mass(kernel, lo, hi, centres):
    """log of the kernel mass (centred at each of ``centres``) of the output piece (lo, hi].

    Returns one array per centre, from one fused log-CDF call. The piece is reflected
    (symmetric kernel) so that its centre is <= 0, where ``F(b) − F(a)`` has no
    cancellation. Empty pieces give ``−inf`` with a zero (not NaN) gradient.
    """
    ends, oks = [], []
    for centre in centres:
        a, b = lo - centre, hi - centre
        one = 0.0
        if kernel.discrete:
            a, b, one = jnp.floor(a), jnp.floor(b), 1.0
        b = jnp.maximum(a, b)
        flip = a + b > 0
        a, b = jnp.where(flip, -b - one, a), jnp.where(flip, -a - one, b)
        ok = b > a
        ends += [jnp.where(ok, a, b - 1.0), b]
        oks.append(ok)
    logs = _log_cdf(kernel, *ends)
    out = []
    for i, ok in enumerate(oks):
        la, lb = logs[2 * i], logs[2 * i + 1]
        good = ok & (lb > -jnp.inf) & (la < lb)
        la_s, lb_s = jnp.where(good, la, -1.0), jnp.where(good, lb, 0.0)
        out.append(jnp.where(good, lb_s + jnp.log1p(-jnp.exp(la_s - lb_s)), -jnp.inf))
    return out


def _discrete_icdf(kernel, u, log_u):
    """Smallest integer ``k`` with ``F(k) >= u`` for a discrete kernel."""
    if isinstance(kernel, DiscreteLaplace):
        la = -1.0 / jnp.asarray(kernel.scale)  # log a
        log1pa = jnp.log1p(jnp.exp(la))
        # lower part (k <= -1): log F(k) = |k| la - log(1+a)
        lower = -jnp.floor((log_u + log1pa) / la)
        # upper part (k >= 0): log SF(k) = (k+1) la - log(1+a)
        log_1mu = jnp.log1p(-jnp.minimum(u, 1.0 - 1e-16))
        upper = jnp.maximum(jnp.ceil((log_1mu + log1pa) / la) - 1.0, 0.0)
        return jnp.where(log_u <= la - log1pa, jnp.minimum(lower, -1.0), upper)
    if isinstance(kernel, DiscreteGaussian):
        if kernel.support_radius is None:
            raise ValueError("support_radius must be set on a DiscreteGaussian kernel built from a traced sigma")
        r = float(kernel.support_radius)
        steps = int(math.ceil(math.log2(2 * r + 2))) + 1
        lo = jnp.full(jnp.shape(u), -r - 1.0, jnp.result_type(u))
        hi = jnp.full(jnp.shape(u), r, jnp.result_type(u))

        def body(_, state):
            lo, hi = state
            mid = jnp.floor((lo + hi) / 2.0)
            ok = kernel.noise_cdf(mid) >= u
            active = hi - lo > 1.0
            return jnp.where(active & ~ok, mid, lo), jnp.where(active & ok, mid, hi)

        _, hi = jax.lax.fori_loop(0, steps, body, (lo, hi))
        return hi
    raise NotImplementedError(f"no discrete inverse CDF for {type(kernel).__name__}")


# ----------------------------------------------------------------------------------
# the continuous mixture sampler (linear space)
# ----------------------------------------------------------------------------------
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_EXP_M2 = math.exp(-2.0)
# Cephes' rational approximations of the normal quantile, the ones jax.scipy.special.ndtri
# evaluates (highest degree first). Central (exp(−2) < p < 1 − exp(−2)): a function of
# w = p − 1/2, so a target given as its offset w from 1/2 keeps its precision however small;
# tails: functions of z = sqrt(−2 log p) (P1/Q1 for z < 8, P2/Q2 beyond).
_NDTRI_P0 = (-5.99633501014107895267e1, 9.80010754185999661536e1, -5.66762857469070293439e1,
             1.39312609387279679503e1, -1.23916583867381258016e0)
_NDTRI_Q0 = (1.0, 1.95448858338141759834e0, 4.67627912898881538453e0, 8.63602421390890590575e1,
             -2.25462687854119370527e2, 2.00260212380060660359e2, -8.20372256168333339912e1,
             1.59056225126211695515e1, -1.18331621121330003142e0)
_NDTRI_P1 = (4.05544892305962419923e0, 3.15251094599893866154e1, 5.71628192246421288162e1,
             4.40805073893200834700e1, 1.46849561928858024014e1, 2.18663306850790267539e0,
             -1.40256079171354495875e-1, -3.50424626827848203418e-2, -8.57456785154685413611e-4)
_NDTRI_Q1 = (1.0, 1.57799883256466749731e1, 4.53907635128879210584e1, 4.13172038254672030440e1,
             1.50425385692907503408e1, 2.50464946208309415979e0, -1.42182922854787788574e-1,
             -3.80806407691578277194e-2, -9.33259480895457427372e-4)
_NDTRI_P2 = (3.23774891776946035970e0, 6.91522889068984211695e0, 3.93881025292474443415e0,
             1.33303460815807542389e0, 2.01485389549179081538e-1, 1.23716634817820021358e-2,
             3.01581553508235416007e-4, 2.65806974686737550832e-6, 6.23974539184983293730e-9)
_NDTRI_Q2 = (1.0, 6.02427039364742014255e0, 3.67983563856160859403e0, 1.37702099489081330271e0,
             2.16236993594496635890e-1, 1.34204006088543189037e-2, 3.28014464682127739104e-4,
             2.89247864745380683936e-6, 6.79019408009981274425e-9)


def _horner(coeffs, x):
    out = coeffs[0]
    for c in coeffs[1:]:
        out = out * x + c
    return out


def _side_masses(kernel, x):
    """``(P(0 < N < x), P(N > x))`` for ``x >= 0``: the half-mass and the tail beyond ``x``,
    each to the float's relative precision (erf / erfc, expm1 / exp: no ``1 − F``)."""
    if isinstance(kernel, Gaussian):
        z = x / (kernel.sigma * math.sqrt(2.0))
        return 0.5 * jax.scipy.special.erf(z), 0.5 * jax.scipy.special.erfc(z)
    z = x / kernel.scale
    return -0.5 * jnp.expm1(-z), 0.5 * jnp.exp(-z)


def _split_quantile(kernel, p, w, s):
    """The noise ``n`` with ``min(F(n), 1 − F(n)) = p`` on the side ``s`` (−1 below 0, +1 above),
    where ``w = F(n) − 1/2`` is also given.

    Each of ``p`` (accurate where it is small: tails) and ``w`` (accurate where it is small: a
    target near the median, e.g. inside a region narrow against the scale) is used where it
    carries the precision, so the quantile is exact to the float at both ends.
    Gaussian: Cephes' ``ndtri`` (as in jax.scipy.special), its central rational evaluated
    at ``w`` (``p > e^{−2}``), its tail expansion at ``p``.
    Laplace: ``|n| = −b log(2p) = −b log1p(−2|w|)``, evaluated as Kahan's
    ``log1p(x) = x log(y)/(y − 1)`` with ``x = −2|w|`` and ``y = 2p ≈ 1 + x``: one log.
    """
    p = jnp.where(p > 0, p, 0.5)  # p = 0 only in a component of zero weight: keep it finite
    if isinstance(kernel, Gaussian):
        central = p > _EXP_M2
        ww = w * w
        n_c = _SQRT_2PI * (w + w * ww * (_horner(_NDTRI_P0, ww) / _horner(_NDTRI_Q0, ww)))
        z = jnp.sqrt(-2.0 * jnp.log(jnp.where(central, _EXP_M2, p)))
        iz = 1.0 / z
        far = z >= 8.0
        dt = jnp.result_type(z)
        pick = lambda a, b: jnp.where(far, jnp.asarray(a, dt), jnp.asarray(b, dt))  # noqa: E731
        num = _horner([pick(a, b) for a, b in zip(_NDTRI_P2, _NDTRI_P1)], iz)
        den = _horner([pick(a, b) for a, b in zip(_NDTRI_Q2, _NDTRI_Q1)], iz)
        n_t = s * (z - (jnp.log(z) + num / den) * iz)
        return kernel.sigma * jnp.where(central, n_c, n_t)
    x = -2.0 * jnp.abs(w)
    y = 2.0 * p
    near = y == 1.0
    ratio = jnp.where(near, 1.0, jnp.log(y) / jnp.where(near, -1.0, y - 1.0))
    return -s * kernel.scale * x * ratio


def _mixture_noise(kernel, uniform, e_lo, e_hi, keep, symmetric):
    """Noise of the exact three-component mixture for a continuous kernel and a region
    ``[e_lo, e_hi] ∋ 0`` in noise coordinates (per record or per batch); ``keep = 1 − q``.

    Masses in linear space from two half-masses and two tails (one of each when the region
    is symmetric, ``e_lo = −e_hi``): ``P_in = H_lo + H_hi`` has no cancellation however
    narrow the region. ``u0`` picks the component against the unnormalised weights
    ``(keep·P_lo, P_in, keep·P_hi)``; ``u1`` gives the quantile target as both
    ``p = min(F, 1 − F)`` and ``w = F − 1/2``:

    * below: ``p = u1 P_lo``; above: ``p = u1 P_hi`` (mirrored);
    * inside: ``w = u1 H_hi − (1 − u1) H_lo`` (exact relative to ``P_in``),
      ``p = P_lo + u1 P_in`` or ``P_hi + (1 − u1) P_in`` (exact in the tails).

    A weight below the float's range belongs to a component ``u0`` cannot select anyway
    (``u0`` is a multiple of 2^-23 or 2^-52). ``1 − u1`` is exact on the uniforms' grid.
    (For an interval not holding 0 — a fixed region's answer outside it, which
    :func:`dpjax.release` refuses — the formulas stay right but ``P_in`` loses precision.)
    """
    h_lo, p_lo = _side_masses(kernel, -e_lo)
    h_hi, p_hi = (h_lo, p_lo) if symmetric else _side_masses(kernel, e_hi)
    p_in = h_lo + h_hi
    w_lo, w_hi = keep * p_lo, keep * p_hi
    u0, u1 = uniform(0), uniform(1)
    c = u0 * (w_lo + p_in + w_hi)
    below = c < w_lo
    inside = ~below & (c < w_lo + p_in)
    v1 = 1.0 - u1
    w_in = u1 * h_hi - v1 * h_lo
    p_in_lo, p_in_hi = p_lo + u1 * p_in, p_hi + v1 * p_in
    one = jnp.ones((), u1.dtype)
    s = jnp.where(inside, jnp.sign(w_in), jnp.where(below, -one, one))
    p = jnp.where(inside, jnp.where(w_in < 0, p_in_lo, p_in_hi), u1 * jnp.where(below, p_lo, p_hi))
    w = jnp.where(inside, w_in, s * (0.5 - p))
    n = _split_quantile(kernel, p, w, s)
    # clamp to the component's range; bounds selected first so that n has a single use (with
    # n inside three selects XLA's CPU fusion materialises the masses and re-hashes per fusion)
    lower = jnp.where(inside, e_lo, jnp.where(below, -jnp.inf, e_hi))
    upper = jnp.where(inside, e_hi, jnp.where(below, e_lo, jnp.inf))
    return jnp.minimum(jnp.maximum(n, lower), upper)


# ----------------------------------------------------------------------------------
# the mechanism
# ----------------------------------------------------------------------------------
@pytree_dataclass
class PrivacyBoosted(Mechanism):
    """A kernel re-weighted to land in ``region`` with probability at least ``rho`` (PB-DP eq. 2).

    Args:
      kernel: ``Laplace``, ``Gaussian``, ``DiscreteLaplace`` or ``DiscreteGaussian``.
      region: ``AbsoluteError(tau)``, ``RelativeError(theta, tau)`` or ``FixedInterval(low, high)``.
      rho: required coverage ``Pr[M(Q) ∈ S(Q)]``, in (0, 1].
      sampler: ``"mixture"`` (exact, default) or ``"rejection"`` (the paper's).
      num_pairs: number of answer pairs :meth:`neighbour_pairs` returns for regions that
        move non-rigidly with the answer (relative, fixed). Default: 201 answers of a grid,
        or for a relative region with a discrete kernel every distinct pair (6 per region
        width up to the kernel's reach; a smaller value is refused).
    """

    kernel: Mechanism
    region: Region
    rho: jax.Array
    sampler: str = static_field(default="mixture")
    num_pairs: int | None = static_field(default=None)

    def __post_init__(self):
        if not isinstance(self.kernel, _KERNELS):
            raise ValueError(
                "kernel must be a Laplace, Gaussian, DiscreteLaplace or DiscreteGaussian mechanism, "
                f"got {type(self.kernel).__name__}"
            )
        if not isinstance(self.region, Region):
            raise ValueError(
                "region must be AbsoluteError(tau), RelativeError(theta, tau) or FixedInterval(low, high), "
                f"got {type(self.region).__name__}"
            )
        check_probability("rho", self.rho)
        if self.sampler not in _SAMPLERS:
            raise ValueError(f"sampler must be one of {_SAMPLERS}, got {self.sampler!r}")
        need = self.region.required_pairs(kernel_reach(self.kernel), self.discrete)
        if self.num_pairs is None and need != 0:
            object.__setattr__(self, "num_pairs", need or 201)
        if self.num_pairs is not None:
            check_int("num_pairs", self.num_pairs, minimum=max(need or 2, 2))

    @property
    def discrete(self) -> bool:
        return self.kernel.discrete

    # -- region and boosting ----------------------------------------------------
    def interval(self, value):
        """``(lo, hi)``: the preferred region ``S(value)``."""
        return self.region.interval(value)

    def _masses(self, value):
        v = jnp.asarray(value)
        lo, hi = self.region.interval(v)
        return _interval_masses(self.kernel, *_edges(self.kernel, lo - v, hi - v))

    def region_mass(self, value):
        """``p_S(value)``: the kernel's mass in ``S(value)``."""
        return jnp.exp(self._masses(value)[1])

    @property
    def log1m_boosting_rate(self):
        """``log(1 − q)``, computed directly as ``min_h log[p_S (1 − ρ) / (ρ p̄_S)]`` over the
        hardest answers h (clipped at 0): accurate when q is within float eps of 1."""
        out = None
        for h in self.region.hardest_answers(self.discrete):
            log_lo, log_in, log_hi = self._masses(h)
            r = log_in + jnp.log1p(-self.rho) - jnp.log(self.rho) - jnp.logaddexp(log_lo, log_hi)
            out = r if out is None else jnp.minimum(out, r)
        return jnp.minimum(jnp.where(jnp.isnan(out), 0.0, out), 0.0)

    @property
    def boosting_rate(self):
        """``q`` of eq. (3), clipped at 0: max over the hardest answers of ``(ρ − p_S)/(ρ(1 − p_S))``."""
        return 0.0 - jnp.expm1(self.log1m_boosting_rate)

    def log_normalizer(self, value, *, _l1mq=None):
        """``log(1 − p̄_S(value) q)``, the log of the normaliser of eq. (2)."""
        log_lo, log_in, log_hi = self._masses(value)
        l1mq = self.log1m_boosting_rate if _l1mq is None else _l1mq
        return jnp.logaddexp(log_in, l1mq + jnp.logaddexp(log_lo, log_hi))

    def coverage(self, value):
        """``Pr[M(value) ∈ S(value)] = p_S/(1 − p̄_S q)``; equals ``rho`` at the hardest answer."""
        return jnp.exp(self._masses(value)[1] - self.log_normalizer(value))

    def log_boost(self, y, value, *, _l1mq=None):
        """``log w(y) − log(1 − p̄_S q)``: ``log_prob`` minus the kernel's log density.

        Constant between :meth:`output_breakpoints`.
        """
        l1mq = self.log1m_boosting_rate if _l1mq is None else _l1mq
        lo, hi = self.region.interval(value)
        y = jnp.asarray(y)
        inside = (y >= lo) & (y <= hi)
        log_w = jnp.where(inside, 0.0, l1mq)
        return log_w - self.log_normalizer(value, _l1mq=l1mq)

    # -- output law -------------------------------------------------------------
    def log_prob(self, y, value):
        y = jnp.asarray(y)
        return self.kernel.noise_log_prob(y - value) + self.log_boost(y, value)

    def cdf(self, y, value):
        v = jnp.asarray(value)
        n = jnp.asarray(y) - v
        if self.discrete:
            n = jnp.floor(n)
        lo, hi = self.region.interval(v)
        e_lo, e_hi = _edges(self.kernel, lo - v, hi - v)
        l1mq = self.log1m_boosting_rate
        keep = jnp.exp(l1mq)
        z = jnp.exp(self.log_normalizer(v, _l1mq=l1mq))
        p_lo = jnp.exp(self.kernel.noise_log_cdf(e_lo))
        f = jnp.exp(self.kernel.noise_log_cdf(n))
        sf = jnp.exp(_log_sf(self.kernel, n))
        below = keep * f / z
        inside = (f - p_lo + keep * p_lo) / z
        above = 1.0 - keep * sf / z
        out = jnp.where(n <= e_lo, below, jnp.where(n <= e_hi, inside, above))
        return jnp.clip(out, 0.0, 1.0)

    def privacy_loss(self, y, value, neighbour_value):
        """``log p(y|value) − log p(y|neighbour_value)``: kernel loss + ``log_boost`` difference."""
        y = jnp.asarray(y)
        kernel_loss = self.kernel.noise_log_prob(y - value) - self.kernel.noise_log_prob(y - neighbour_value)
        l1mq = self.log1m_boosting_rate
        boost = self.log_boost(y, value, _l1mq=l1mq) - self.log_boost(y, neighbour_value, _l1mq=l1mq)
        # (an output outside both supports, possible only when q = 1, gets the kernel loss)
        return kernel_loss + jnp.where(jnp.isnan(boost), 0.0, boost)

    # -- sampling ---------------------------------------------------------------
    def _sample(self, uniform, value):
        if self.sampler == "rejection":
            return self._sample_rejection(uniform, value)
        return self._sample_mixture(uniform, value)

    def _noise_edges(self, value):
        # the region relative to the answer: answer-free for absolute error, so the
        # masses below are computed once per batch instead of once per record
        return _edges(self.kernel, *self.region.noise_interval(value))

    def _sample_mixture(self, uniform, value):
        """Exact three-component mixture: below / inside / above the region, chosen with
        ``u0``; the component's kernel quantile at ``u1`` (one inverse CDF per record).

        Continuous kernels (Gaussian, Laplace): :func:`_mixture_noise`, in linear space and
        exact to the float for every region holding the answer (narrow ones included).
        Discrete kernels: quantile targets in log space so that far tails stay exact."""
        dt = uniform.dtype
        mech = jax.tree_util.tree_map(lambda p: jnp.asarray(p, dt), self)
        kernel = mech.kernel
        v = jnp.asarray(value, dt)
        e_lo, e_hi = mech._noise_edges(v)
        if isinstance(kernel, (Gaussian, Laplace)):
            symmetric = isinstance(mech.region, (AbsoluteError, RelativeError))
            keep = jnp.exp(mech.log1m_boosting_rate).astype(dt)  # (the hardest answers may be float64)
            return v + _mixture_noise(kernel, uniform, e_lo, e_hi, keep, symmetric)
        # discrete kernels: integer noise, so the region's edges are the last noise values
        # below / inside it and the reflected interval is shifted by one
        one = 1.0
        log_lo, log_in, log_hi = _interval_masses(kernel, e_lo, e_hi)
        log1mq = mech.log1m_boosting_rate
        lw_lo, lw_hi = log1mq + log_lo, log1mq + log_hi
        log_z = jnp.logaddexp(jnp.logaddexp(lw_lo, log_in), lw_hi)
        t_lo = jnp.exp(lw_lo - log_z)
        t_in = jnp.exp(jnp.logaddexp(lw_lo, log_in) - log_z)
        # inside: reflect so that the interval's centre is <= 0 (small CDF values)
        flip = e_lo + e_hi > 0
        r_lo = jnp.where(flip, -e_hi - one, e_lo)  # last noise value below the reflected interval
        r_hi = jnp.where(flip, -e_lo - one, e_hi)
        u0, u1 = uniform(0), uniform(1)
        below = u0 < t_lo
        inside = ~below & (u0 < t_in)
        # below: F(n) = u1 F(e_lo); above: by symmetry −N below −e_hi; inside: F(n) = F(r_lo) + u1 P_in
        log_u1 = jnp.log(u1)
        log_target = jnp.where(inside, jnp.logaddexp(kernel.noise_log_cdf(r_lo), log_u1 + log_in),
                               log_u1 + jnp.where(below, log_lo, log_hi))
        n = _discrete_icdf(kernel, jnp.exp(log_target), log_target)
        n_in = jnp.clip(n, r_lo + one, r_hi)
        n_in = jnp.where(flip, -n_in, n_in)
        noise = jnp.where(inside, n_in, jnp.where(below, jnp.minimum(n, e_lo), jnp.maximum(-n, e_hi + one)))
        return v + noise

    def _kernel_icdf(self, kernel, u):
        if kernel.discrete:
            return _discrete_icdf(kernel, u, jnp.log(u))
        return kernel.noise_icdf(u)

    def _sample_rejection(self, uniform, value):
        dt = uniform.dtype
        mech = jax.tree_util.tree_map(lambda p: jnp.asarray(p, dt), self)
        kernel = mech.kernel
        v = jnp.broadcast_to(jnp.asarray(value, dt), uniform.shape)
        e_lo, e_hi = mech._noise_edges(v)
        keep_out = jnp.exp(mech.log1m_boosting_rate)

        def trial(j):
            n = self._kernel_icdf(kernel, uniform(2 * j))
            inside = (n > e_lo) & (n <= e_hi) if kernel.discrete else (n >= e_lo) & (n <= e_hi)
            return n, inside | (uniform(2 * j + 1) < keep_out)

        def cond(state):
            return ~jnp.all(state[2])

        def body(state):
            j, out, done = state
            n, ok = trial(j)
            return j + 1, jnp.where(ok & ~done, n, out), done | ok

        n0, ok0 = trial(jnp.uint32(0))
        _, noise, _ = jax.lax.while_loop(cond, body, (jnp.uint32(1), n0, ok0))
        return v + noise

    # -- accounting hooks -----------------------------------------------------
    def neighbour_pairs(self, sensitivity=1.0):
        """``(values, neighbour_values)``: answer pairs (trailing axis) containing the worst pair.

        Absolute error: ``(0, Δ)`` (translation invariant). Relative error: ``(Q, Q + Δ)``
        for ``num_pairs`` answers ``Q`` from ``−Δ/2`` to where both strips leave the
        kernel's support (the mirror half is the reversed direction); with a discrete
        kernel, one pair per distinct pair of region widths instead. Fixed region:
        ``(Q, Q + Δ)`` for ``Q ∈ [low, high − Δ]`` (integer answers for discrete kernels).
        Each pair is to be examined in both directions.
        """
        if not is_traced(sensitivity):
            check_positive("sensitivity", sensitivity)
        if self.num_pairs is None:
            raise ValueError("num_pairs must be given for a relative region with a discrete kernel built from traced "
                             "parameters (6 per region width up to the kernel's reach: build it from concrete values "
                             "once to see the default)")
        return self.region.neighbour_pairs(sensitivity, kernel_reach(self.kernel), self.num_pairs, self.discrete)

    def output_breakpoints(self, value, neighbour_value):
        """Sorted region boundaries of both laws, shape ``broadcast + (4,)``.

        Between consecutive breakpoints ``privacy_loss(y, value, neighbour_value)``
        is the kernel's loss plus a constant, hence monotone in ``y``. For discrete
        kernels the boundaries are placed at half-integers (``ceil(lo) − ½``,
        ``floor(hi) + ½``) so that no output sits on one.
        """
        lo, hi = self.region.interval(value)
        lo2, hi2 = self.region.interval(neighbour_value)
        pts = [lo, hi, lo2, hi2]
        if self.discrete:
            pts = [jnp.ceil(lo) - 0.5, jnp.floor(hi) + 0.5, jnp.ceil(lo2) - 0.5, jnp.floor(hi2) + 0.5]
        shape = jnp.broadcast_shapes(*[jnp.shape(p) for p in pts])
        return jnp.sort(jnp.stack([jnp.broadcast_to(p, shape) for p in pts], axis=-1), axis=-1)

    @property
    def symmetric_pairs(self) -> bool:
        """δ(P_v‖P_v') = δ(P_v'‖P_v) for the declared pairs: true for the absolute-error
        region (reflection y → v + v' − y swaps the two laws), not for the others."""
        return isinstance(self.region, AbsoluteError)

    @property
    def pair_path(self) -> bool:
        """Relative and fixed regions' pairs sample the answers' continuum (Q, Q + Δ): the
        accountant bounds the supremum between them (the divergence peaks between grid
        answers). Not for a relative region with a discrete kernel, whose pairs are listed
        exhaustively (:meth:`dpjax.RelativeError.neighbour_pairs`)."""
        return self.region.pair_path(self.discrete)

    def _boost_parts(self, value, neighbour_value):
        """``(log(1−q), log Z(value), log Z(neighbour_value))`` from one fused mass evaluation.

        The same formulas as :attr:`log1m_boosting_rate` and :meth:`log_normalizer`
        (hardest answers and the pair stacked into one ``_interval_masses`` call).
        """
        hard = [jnp.asarray(h) for h in self.region.hardest_answers(self.discrete)]
        vals = hard + [jnp.asarray(value), jnp.asarray(neighbour_value)]
        shape = jnp.broadcast_shapes(*[jnp.shape(x) for x in vals])
        answers = jnp.stack([jnp.broadcast_to(x, shape) for x in vals])
        lo, hi = self.region.interval(answers)
        log_lo, log_in, log_hi = _interval_masses(self.kernel, *_edges(self.kernel, lo - answers, hi - answers))
        n = len(hard)
        r = log_in[:n] + jnp.log1p(-self.rho) - jnp.log(self.rho) - jnp.logaddexp(log_lo[:n], log_hi[:n])
        out = jnp.min(r, axis=0)
        l1mq = jnp.minimum(jnp.where(jnp.isnan(out), 0.0, out), 0.0)
        log_z = jnp.logaddexp(log_in[n:], l1mq + jnp.logaddexp(log_lo[n:], log_hi[n:]))
        return l1mq, log_z[0], log_z[1]

    def _pieces(self, value, neighbour_value, kinks: bool, spread=0.0):
        """Piece edges ``(lo, hi)`` (trailing axis) between which both boost weights are
        constant, and those constants ``(c, c')`` (``log_boost`` of each law on the piece);
        with ``kinks`` also cut at the Laplace kernels' kinks (v, v').

        The two outer pieces end at finite edges :func:`_far` beyond every breakpoint,
        both answers and ``spread`` (a further distance, e.g. to a tilted centre), where the
        kernel's mass underflows: the values of ±∞ edges, with finite gradients.
        ``value``/``neighbour_value`` and the parameters must already broadcast with a
        trailing piece axis of length 1.
        """
        v, nv = value, neighbour_value
        lo1, hi1 = self.region.interval(v)
        lo2, hi2 = self.region.interval(nv)
        cuts = [lo1, hi1, lo2, hi2]
        if self.discrete:  # as output_breakpoints: half-integers, no output on a boundary
            cuts = [jnp.ceil(lo1) - 0.5, jnp.floor(hi1) + 0.5, jnp.ceil(lo2) - 0.5, jnp.floor(hi2) + 0.5]
        if kinks and isinstance(self.kernel, (Laplace, DiscreteLaplace)):
            off = 0.5 if self.discrete else 0.0
            cuts += [v + off, nv + off]
        shape = jnp.broadcast_shapes(*[jnp.shape(x) for x in cuts])
        cuts = [jnp.broadcast_to(x, shape) for x in cuts]
        inner = jnp.sort(jnp.concatenate(cuts, axis=-1), axis=-1)
        far = _far(self.kernel) + spread
        first = jnp.minimum(jnp.minimum(inner[..., :1], v), nv) - far
        last = jnp.maximum(jnp.maximum(inner[..., -1:], v), nv) + far
        shape = jnp.broadcast_shapes(first.shape, inner.shape[:-1] + (1,))
        first, last = jnp.broadcast_to(first, shape), jnp.broadcast_to(last, shape)
        inner = jnp.broadcast_to(inner, shape[:-1] + inner.shape[-1:])
        lo = jnp.concatenate([first, inner], axis=-1)
        hi = jnp.concatenate([inner, last], axis=-1)
        l1mq, log_z, log_z2 = self._boost_parts(v, nv)
        mid = 0.5 * (lo + hi)

        def const(answer, lz):
            a, b = self.region.interval(answer)
            return jnp.where((mid >= a) & (mid <= b), 0.0, l1mq) - lz

        return lo, hi, const(v, log_z), const(nv, log_z2)

    def _loss_threshold(self, t, v, nv):
        """y* with {y : kernel loss log f(y−v) − log f(y−nv) > t} = {y < y*} (v < nv) or {y > y*} (v > nv)."""
        d = v - nv
        safe = jnp.where(d == 0, 1.0, d)
        if isinstance(self.kernel, (Gaussian, DiscreteGaussian)):
            return 0.5 * (v + nv) + self.kernel.sigma**2 * t / safe
        b = self.kernel.scale
        r = jnp.abs(d) / b
        y = 0.5 * (v + nv) + jnp.sign(d) * t * b / 2.0
        none = jnp.where(d < 0, -jnp.inf, jnp.inf)
        return jnp.where(t >= r, none, jnp.where(t < -r, -none, y))

    def hockey_stick(self, epsilon, value, neighbour_value):
        """Exact δ(ε) = ∫ (p(y|value) − e^ε p(y|neighbour_value))_+ dy (spec §3.8).

        On each piece j between :meth:`output_breakpoints` the loss is the kernel's
        loss Z(y) plus the constant ``c_j − c'_j`` (``log_boost``); Z is monotone, so
        {loss > ε} ∩ piece is an interval cut at the kernel's loss threshold, and the
        piece contributes ``e^{c_j} P_v(·) − e^{ε + c'_j} P_v'(·)`` (kernel CDF differences,
        tail-stable). Closed form for every kernel (Gaussian: y*_j of §3.8; Laplace:
        clipped linear loss; discrete kernels: integer pieces). Any real ε; broadcasts
        ε (..., m) against the pair and the parameters (..., 1).

        Differentiable in ε, the answers and every parameter (kernel scale, region,
        ``rho``): the outer pieces end at finite edges far in the tails and empty
        pieces have zero gradient. Three fused special-function calls in all.
        """
        v = jnp.asarray(value)[..., None]
        nv = jnp.asarray(neighbour_value)[..., None]
        mech = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[..., None], self)
        lo, hi, c, c2 = mech._pieces(v, nv, kinks=False)  # (..., P)
        eps = jnp.asarray(epsilon)[..., None]  # (..., m, 1)
        lo, hi, c, c2 = lo[..., None, :], hi[..., None, :], c[..., None, :], c2[..., None, :]
        mech = jax.tree_util.tree_map(lambda x: x[..., None], mech)
        v3, nv3 = v[..., None], nv[..., None]
        t = eps - (c - c2)
        t = jnp.where(jnp.isnan(t), jnp.inf, t)
        ystar = mech._loss_threshold(t, v3, nv3)
        if self.discrete:
            ystar = jnp.where(v3 < nv3, jnp.ceil(ystar) - 0.5, jnp.floor(ystar) + 0.5)
        ystar = jnp.clip(ystar, lo, hi)
        u = jnp.where(v3 < nv3, lo, ystar)
        w = jnp.where(v3 < nv3, ystar, hi)
        same = v3 == nv3
        u = jnp.where(same, jnp.where(t < 0, lo, hi), u)
        w = jnp.where(same, hi, w)
        lp, lq = _log_piece_mass(mech.kernel, u, w, (v3, nv3))
        term = jnp.exp(c + lp) - jnp.exp(jnp.minimum(eps + c2 + lq, 700.0))
        out = jnp.sum(jnp.maximum(jnp.where(jnp.isnan(term), 0.0, term), 0.0), axis=-1)
        return out[..., 0] if jnp.ndim(epsilon) == 0 else out

    def _log_tilted_integral(self, lo, hi, v, nv, a):
        """log ∫_(lo,hi] f(y−v)^α f(y−nv)^{1−α} dy (a sum on the integers for discrete kernels)."""
        kernel = self.kernel
        if isinstance(kernel, Gaussian):
            m = a * v + (1.0 - a) * nv
            big_k = a * (a - 1.0) * (v - nv) ** 2 / (2.0 * kernel.sigma**2)
            return big_k + _log_piece_mass(kernel, lo, hi, (m,))[0]
        if isinstance(kernel, DiscreteGaussian):
            if kernel.support_radius is None:
                raise ValueError("support_radius must be set on a DiscreteGaussian kernel built from a traced sigma")
            r = kernel.support_radius
            m = a * v + (1.0 - a) * nv
            k = jnp.round(m)[..., None] + jnp.arange(-r, r + 1, dtype=jnp.result_type(m))
            inside = (k > lo[..., None]) & (k <= hi[..., None])
            sig = jnp.asarray(kernel.sigma)[..., None]
            expo = a * (a - 1.0) * (v - nv) ** 2 / (2.0 * kernel.sigma**2)
            lt = kernel.noise_log_prob(0.0)[..., None] - (k - m[..., None]) ** 2 / (2.0 * sig**2)
            some = jnp.any(inside, axis=-1)
            # an empty piece: −inf, with a zero gradient (all −inf would make logsumexp's NaN)
            lse = jax.nn.logsumexp(jnp.where(inside | ~some[..., None], lt, -jnp.inf), axis=-1)
            return jnp.where(some, expo + lse, -jnp.inf)
        # Laplace kernels: g(y) = α log f(y−v) + (1−α) log f(y−nv) is linear on each piece
        # (the pieces are cut at the kinks), so the integral / sum is geometric.
        b = kernel.scale
        if self.discrete:
            k1, k2 = jnp.floor(lo) + 1.0, jnp.floor(hi)
            mid = 0.5 * (k1 + k2)
            sv, snv = jnp.sign(mid - v - 0.5), jnp.sign(mid - nv - 0.5)
        else:
            k1, k2 = lo, hi
            mid = 0.5 * (lo + hi)
            sv, snv = jnp.sign(mid - v), jnp.sign(mid - nv)
        slope = -(a * sv + (1.0 - a) * snv) / b
        end = jnp.where(slope > 0, k2, k1)
        g_end = a * kernel.noise_log_prob(end - v) + (1.0 - a) * kernel.noise_log_prob(end - nv)
        s = jnp.abs(slope)
        s_safe = jnp.where(s > 0, s, 1.0)
        empty = (k2 < k1) if self.discrete else (hi <= lo)
        if self.discrete:
            n = jnp.where(empty, 1.0, k2 - k1 + 1.0)
            geo = jnp.log(-jnp.expm1(-s_safe * n)) - jnp.log(-jnp.expm1(-s_safe))
            flat = jnp.log(n)
        else:
            length = jnp.where(empty, 1.0, hi - lo)
            geo = jnp.log(-jnp.expm1(-s_safe * length)) - jnp.log(s_safe)
            flat = jnp.log(length)
        out = g_end + jnp.where(s > 0, geo, flat)
        return jnp.where(empty, -jnp.inf, out)

    def renyi_divergence(self, order, value, neighbour_value):
        """Exact D_α(P_value‖P_neighbour_value), α > 1 (spec §3.8).

        Σ over pieces of ``e^{α c_j + (1−α) c'_j} ∫_piece f(y−v)^α f(y−v')^{1−α}``:
        Gaussian kernel e^K Φ-differences around m = αv + (1−α)v'; Laplace kernels
        geometric integrals/sums on pieces also cut at the kinks v, v'; discrete
        Gaussian an exact sum over its support window. Evaluated in log space;
        differentiable like :meth:`hockey_stick` (the outer edges also clear m).
        """
        v = jnp.asarray(value)[..., None, None]
        nv = jnp.asarray(neighbour_value)[..., None, None]
        a = jnp.asarray(order)[..., None]  # (..., k, 1)
        mech = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[..., None, None], self)
        lo, hi, c, c2 = mech._pieces(v, nv, kinks=True, spread=a * jnp.abs(v - nv))  # (..., k, P)
        log_int = mech._log_tilted_integral(lo, hi, v, nv, a)
        weight = jnp.where(jnp.isneginf(c), -jnp.inf, a * c + (1.0 - a) * c2)
        term = jnp.where(jnp.isneginf(log_int) | jnp.isneginf(c), -jnp.inf, weight + log_int)
        out = jnp.maximum(jax.nn.logsumexp(term, axis=-1) / (a[..., 0] - 1.0), 0.0)
        return out[..., 0] if jnp.ndim(order) == 0 else out

    def validate_values(self, values) -> None:
        self.region.validate_values(values)
