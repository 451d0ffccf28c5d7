r"""The Gaussian kernel N(0, σ²) and its privacy profile.

Closed forms (overrides of the kernel protocol, :mod:`dpjax.kernels.base`): the
Balle–Wang hockey-stick divergence (:func:`gaussian_privacy_profile`, on ``erfc`` only),
the Rényi divergence, the analytic PLD (``gaussian_pld_mu``: the privacy loss of a shift
Δ is N(μ²/2, μ²) with μ = Δ/σ, composing as √Σμ²), linear-space side masses (erf/erfc)
and a split quantile exact at both ends (Cephes' ``ndtri`` rationals), the linear pair
loss threshold and the tilted integrals of the Rényi closed form. The calibration
``from_epsilon_delta`` is the analytic one of Balle & Wang (ICML 2018), which solves
δ_G(ε; Δ/σ) = δ exactly instead of the classical σ = √(2 ln(1.25/δ)) Δ/ε bound.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, ndtr, ndtri

from dpjax.kernels._gaussian_law import gaussian_loss_threshold, gaussian_tilted_exponent
from dpjax.kernels.base import AdditiveMechanism, round_up_to_default_float
from dpjax.pytree import pytree_dataclass
from dpjax.validation import check_positive, check_probability

__all__ = [
    "Gaussian",
    "gaussian_privacy_profile",
    "analytic_gaussian_sigma",
    "gaussian_loss_threshold",
    "gaussian_tilted_exponent",
]

_HALF_SQRT2 = 0.5 * math.sqrt(2.0)  # rounds to the nearest double of 1/√2 (1/math.sqrt(2) does not)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _ndtr(x):
    """Φ(x) = erfc(−x/√2)/2: jax's ndtr to the last bit, without its (slow, float64) erf branch."""
    return 0.5 * jax.lax.erfc(-x * _HALF_SQRT2)


def _log_ndtr(x):
    """log Φ(x): log of :func:`_ndtr` down to x = −37 (erfc is relative-accurate there), the
    asymptotic series below (relative error < 1e-16 at |x| > 37). Abs. error ≤ 6e-14 for x > −30
    (jax's log_ndtr: 4e-9 near x = −20), and cheaper."""
    big = x < -37.0
    core = jnp.log(_ndtr(jnp.where(big, -1.0, x)))
    xb = jnp.where(big, x, -40.0)
    z = 1.0 / (xb * xb)
    series = 1.0 + z * (-1.0 + z * (3.0 + z * (-15.0 + z * (105.0 + z * (-945.0 + z * 10395.0)))))
    asym = -0.5 * xb * xb - jnp.log(-xb) - _LOG_SQRT_2PI + jnp.log(series)
    return jnp.where(big, asym, core)


def gaussian_privacy_profile(epsilon, mu):
    r"""Hockey-stick divergence of N(0,1) vs N(μ,1).

    :math:`\delta_G(\varepsilon;\mu) = \Phi(\mu/2 - \varepsilon/\mu) - e^{\varepsilon}\Phi(-\mu/2 - \varepsilon/\mu)`,
    valid for every real ε, on ``erfc`` only (the accountant's hot loop); the second term in
    log space. T-fold composition has μ_T = √T μ.

    Args:
      epsilon: ε, any real (array).
      mu: μ > 0, the shift over σ (array broadcasting with ``epsilon``).

    Returns:
      δ_G(ε; μ), of the broadcast shape.

    References:
      Balle, Wang, "Improving the Gaussian Mechanism for Differential Privacy: Analytical
      Calibration and Optimal Denoising", ICML 2018, Theorem 8.
    """
    eps = jnp.asarray(epsilon)
    a = mu / 2.0 - eps / mu
    b = -mu / 2.0 - eps / mu
    return _ndtr(a) - jnp.exp(eps + _log_ndtr(b))


def _delta_gaussian_np(eps: float, mu: float) -> float:
    a = mu / 2.0 - eps / mu
    b = -mu / 2.0 - eps / mu
    phi = lambda x: 0.5 * math.erfc(-x / math.sqrt(2.0))  # noqa: E731
    pb = phi(b)
    # e^ε Φ(b) in log space (e^ε alone overflows at ε ≳ 710); where Φ(b) underflows the term
    # drops, which can only over-state δ (a larger, safe σ)
    return phi(a) - (math.exp(eps + math.log(pb)) if pb > 0.0 else 0.0)


def analytic_gaussian_sigma(epsilon, delta, sensitivity=1.0):
    """Smallest σ with δ_G(ε; Δ/σ) ≤ δ, rounded up (conservative).

    Solved by bisection on concrete float64 values; accepts arrays elementwise.

    Args:
      epsilon: ε > 0 (scalar or array).
      delta: δ in (0, 1).
      sensitivity: Δ > 0.

    Returns:
      σ as a float, or a float64 numpy array of the broadcast shape.

    Raises:
      ValueError: ``epsilon`` or ``sensitivity`` not positive; ``delta`` outside (0, 1).

    References:
      Balle, Wang, "Improving the Gaussian Mechanism for Differential Privacy: Analytical
      Calibration and Optimal Denoising", ICML 2018, Theorem 8 and Algorithm 1.
    """
    check_positive("epsilon", epsilon)
    check_probability("delta", delta, high_open=True)
    check_positive("sensitivity", sensitivity)
    eps_a, delta_a, sens_a = np.broadcast_arrays(
        np.asarray(epsilon, float), np.asarray(delta, float), np.asarray(sensitivity, float)
    )
    out = np.empty(eps_a.shape)
    for idx in np.ndindex(eps_a.shape):
        eps, dlt = float(eps_a[idx]), float(delta_a[idx])
        # δ_G increases with μ. Bracket μ in log space, then bisect.
        lo, hi = 1e-12, 1.0
        while _delta_gaussian_np(eps, hi) < dlt:
            hi *= 2.0
        for _ in range(200):
            mid = math.sqrt(lo * hi)
            if _delta_gaussian_np(eps, mid) <= dlt:
                lo = mid
            else:
                hi = mid
            if hi / lo - 1.0 < 1e-15:
                break
        out[idx] = float(sens_a[idx]) / lo  # lo satisfies δ_G ≤ δ: σ rounded up
    return out if out.shape else float(out)


# Cephes' rational approximations of the normal quantile, the ones jax.scipy.special.ndtri
# evaluates (highest degree first). Central (exp(−2) < p < 1 − exp(−2)): a function of
# w = p − 1/2, so a target given as its offset w from 1/2 keeps its precision however small;
# tails: functions of z = sqrt(−2 log p) (P1/Q1 for z < 8, P2/Q2 beyond).
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_EXP_M2 = math.exp(-2.0)
_NDTRI_P0 = (
    -5.99633501014107895267e1,
    9.80010754185999661536e1,
    -5.66762857469070293439e1,
    1.39312609387279679503e1,
    -1.23916583867381258016e0,
)
_NDTRI_Q0 = (
    1.0,
    1.95448858338141759834e0,
    4.67627912898881538453e0,
    8.63602421390890590575e1,
    -2.25462687854119370527e2,
    2.00260212380060660359e2,
    -8.20372256168333339912e1,
    1.59056225126211695515e1,
    -1.18331621121330003142e0,
)
_NDTRI_P1 = (
    4.05544892305962419923e0,
    3.15251094599893866154e1,
    5.71628192246421288162e1,
    4.40805073893200834700e1,
    1.46849561928858024014e1,
    2.18663306850790267539e0,
    -1.40256079171354495875e-1,
    -3.50424626827848203418e-2,
    -8.57456785154685413611e-4,
)
_NDTRI_Q1 = (
    1.0,
    1.57799883256466749731e1,
    4.53907635128879210584e1,
    4.13172038254672030440e1,
    1.50425385692907503408e1,
    2.50464946208309415979e0,
    -1.42182922854787788574e-1,
    -3.80806407691578277194e-2,
    -9.33259480895457427372e-4,
)
_NDTRI_P2 = (
    3.23774891776946035970e0,
    6.91522889068984211695e0,
    3.93881025292474443415e0,
    1.33303460815807542389e0,
    2.01485389549179081538e-1,
    1.23716634817820021358e-2,
    3.01581553508235416007e-4,
    2.65806974686737550832e-6,
    6.23974539184983293730e-9,
)
_NDTRI_Q2 = (
    1.0,
    6.02427039364742014255e0,
    3.67983563856160859403e0,
    1.37702099489081330271e0,
    2.16236993594496635890e-1,
    1.34204006088543189037e-2,
    3.28014464682127739104e-4,
    2.89247864745380683936e-6,
    6.79019408009981274425e-9,
)


def _horner(coeffs, x):
    out = coeffs[0]
    for c in coeffs[1:]:
        out = out * x + c
    return out


@pytree_dataclass
class Gaussian(AdditiveMechanism):
    r"""Gaussian noise N(0, σ²).

    Args:
      sigma: the standard deviation σ > 0 (scalar or array: a batch of kernels; differentiable).

    Raises:
      ValueError: an empty or non-positive ``sigma``.
    """

    sigma: jax.Array
    scale_name = "sigma"

    @classmethod
    def from_epsilon_delta(cls, epsilon, delta, sensitivity=1.0) -> "Gaussian":
        """(ε, δ)-DP Gaussian mechanism by the analytic calibration.

        Args:
          epsilon: ε > 0 (scalar or array).
          delta: δ in (0, 1).
          sensitivity: the L2 sensitivity Δ > 0.

        Returns:
          A ``Gaussian`` whose σ (rounded up to the default float) meets (ε, δ) exactly.

        Raises:
          ValueError: ``epsilon`` or ``sensitivity`` not positive; ``delta`` outside (0, 1).

        References:
          Balle, Wang, "Improving the Gaussian Mechanism for Differential Privacy: Analytical
          Calibration and Optimal Denoising", ICML 2018, Theorem 8 and Algorithm 1.
        """
        return cls(sigma=round_up_to_default_float(analytic_gaussian_sigma(epsilon, delta, sensitivity)))

    # -- accounting closed forms --------------------------------------------------------
    def hockey_stick(self, epsilon, value, neighbour_value):
        """δ(ε) of N(value, σ²) vs N(neighbour_value, σ²): the Balle–Wang profile at μ = |Δ|/σ.

        Args:
          epsilon: ε, any real (array broadcasting with the answers and the parameters).
          value: the answer v.
          neighbour_value: the neighbouring answer v'.

        Returns:
          δ(ε) = ∫ (p(y|v) − e^ε p(y|v'))_+ dy, of the broadcast shape.

        References:
          Balle, Wang, "Improving the Gaussian Mechanism for Differential Privacy: Analytical
          Calibration and Optimal Denoising", ICML 2018, Theorem 8.
        """
        eps = jnp.asarray(epsilon)
        mu = jnp.abs(jnp.asarray(value) - jnp.asarray(neighbour_value)) / self.sigma
        safe = jnp.where(mu > 0, mu, 1.0)
        return jnp.where(mu > 0, gaussian_privacy_profile(eps, safe), -jnp.expm1(jnp.minimum(eps, 0.0)))

    def renyi_divergence(self, order, value, neighbour_value):
        """D_α(N(v, σ²)‖N(v', σ²)) = α (v − v')² / (2σ²).

        Args:
          order: the order α > 1 (array broadcasting with the answers and the parameters).
          value: the answer v.
          neighbour_value: the neighbouring answer v'.

        Returns:
          D_α(P_v‖P_v'), of the broadcast shape.
        """
        d = jnp.asarray(value) - jnp.asarray(neighbour_value)
        return jnp.asarray(order) * d * d / (2.0 * self.sigma**2)

    def gaussian_pld_mu(self, sensitivity=1.0):
        """μ = Δ/σ: the pair's privacy loss is exactly N(μ²/2, μ²) (the analytic PLD; numpy or JAX arithmetic, as
        given).

        Args:
          sensitivity: the shift Δ.

        Returns:
          μ = Δ/σ, broadcast with the batch.
        """
        return sensitivity / self.sigma

    # -- the noise law ----------------------------------------------------------------
    def noise_log_prob(self, n):
        z = jnp.asarray(n) * (1.0 / self.sigma)
        return -0.5 * z * z - jnp.log(self.sigma) - 0.5 * math.log(2 * math.pi)

    def noise_cdf(self, n):
        return ndtr(jnp.asarray(n) * (1.0 / self.sigma))

    def noise_log_cdf(self, n):
        return log_ndtr(jnp.asarray(n) * (1.0 / self.sigma))

    def noise_icdf(self, u):
        return self.sigma * ndtri(u)

    def noise_side_masses(self, x):
        z = x * (1.0 / (self.sigma * math.sqrt(2.0)))
        return 0.5 * jax.scipy.special.erf(z), 0.5 * jax.scipy.special.erfc(z)

    def noise_split_icdf(self, p, w, side):
        """The split quantile, exact to the float at both ends.

        Cephes' ``ndtri`` (as in jax.scipy.special): its central rational evaluated at ``w``
        (``p > e^{−2}``), its tail expansion at ``p``: exact to the float at both ends.

        Args:
          p: ``min(F(n), 1 − F(n))``.
          w: ``F(n) − ½``.
          side: −1 below 0, +1 above.

        Returns:
          The noise ``n``.
        """
        p = jnp.where(p > 0, p, 0.5)  # p = 0 only in a component of zero weight: keep it finite
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
        n_t = side * (z - (jnp.log(z) + num / den) * iz)
        return self.sigma * jnp.where(central, n_c, n_t)

    def noise_reach(self):
        return 8.6 * jnp.asarray(self.sigma) + 1.0

    def noise_far(self):
        # Φ(−40) ≈ 1e−349 underflows float64
        return 40.0 * jnp.asarray(self.sigma)

    def noise_loss_threshold(self, t, v, nv, lo, hi, decreasing):
        return gaussian_loss_threshold(self.sigma, t, v, nv)

    def noise_tilted_log_integral(self, lo, hi, v, nv, alpha):
        m, big_k = gaussian_tilted_exponent(self.sigma, v, nv, alpha)
        return big_k + self.log_interval_masses(lo, hi, (m,))[0]

    def exact_lattice(self):
        """The exact tier's mechanism (:mod:`dpjax.exact.lattice`): discrete Gaussian noise on a lattice.

        Returns:
          The lattice mechanism that ``numerics="exact"`` runs; account that one for the privacy of what ran.

        Raises:
          ValueError: parameters the exact tier cannot represent (see :mod:`dpjax.exact.lattice`).
        """
        from dpjax.exact.lattice import gaussian_lattice
        from dpjax.kernels.discrete_gaussian import DiscreteGaussian

        return gaussian_lattice(self.sigma, DiscreteGaussian)
