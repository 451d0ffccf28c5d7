"""Standard additive noise kernels: Laplace, Gaussian, discrete Laplace, discrete Gaussian.

Each is a :class:`~dpjax.mechanism.AdditiveMechanism` whose one numeric
parameter (``scale`` or ``sigma``) is a pytree leaf: differentiable, and
batchable (an array of scales is a batch of mechanisms). These are also the
*kernels* that privacy boosting (:mod:`dpjax.boosting`) re-weights.

Calibration constructors use the ecosystem's words:
``Laplace.from_epsilon(ε, Δ)`` (scale Δ/ε), ``Gaussian.from_epsilon_delta(ε, δ, Δ)``
(the *analytic* Gaussian calibration of Balle & Wang, ICML 2018, which solves
δ_G(ε; Δ/σ) = δ exactly instead of the classical σ = √(2 ln(1.25/δ)) Δ/ε bound),
``DiscreteLaplace.from_epsilon(ε, Δ)``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, ndtr, ndtri

from dpjax.pytree import pytree_dataclass, static_field
from dpjax.validation import check_int, check_positive, check_probability, is_traced
from dpjax.mechanism import AdditiveMechanism

__all__ = [
    "Laplace",
    "Gaussian",
    "DiscreteLaplace",
    "DiscreteGaussian",
    "gaussian_privacy_profile",
    "analytic_gaussian_sigma",
]

_LOG_HALF = math.log(0.5)


def _floor(y):
    return jnp.floor(jnp.asarray(y))


def _round_up_to_default_float(x) -> jax.Array:
    """``x`` stored in the default float dtype, rounded towards +inf (more noise is the safe side)."""
    dt = jax.dtypes.canonicalize_dtype(jnp.float64)
    x64 = np.asarray(x, np.float64)
    y = x64.astype(dt)
    y = np.where(y.astype(np.float64) < x64, np.nextafter(y, np.asarray(np.inf, dt)), y)
    return jnp.asarray(y, dt)


class _LaplaceScale:
    """Calibration shared by the Laplace kernels (continuous and discrete): scale b, ε = Δ/b."""

    def __post_init__(self):
        check_positive("scale", self.scale)

    @classmethod
    def from_epsilon(cls, epsilon, sensitivity=1.0):
        """Pure ε-DP mechanism for a query of L1 sensitivity Δ: scale Δ/ε (rounded up)."""
        check_positive("epsilon", epsilon)
        check_positive("sensitivity", sensitivity)
        return cls(scale=_round_up_to_default_float(np.asarray(sensitivity, float) / np.asarray(epsilon, float)))

    def pure_epsilon(self, sensitivity=1.0):
        """The pure-DP ε = Δ/b of the pair (0, Δ)."""
        return jnp.asarray(sensitivity) / self.scale


# ----------------------------------------------------------------------------------
# Laplace
# ----------------------------------------------------------------------------------
@pytree_dataclass
class Laplace(_LaplaceScale, AdditiveMechanism):
    r"""Laplace noise, density :math:`e^{-|n|/b} / (2b)`; ε-DP with ε = Δ/b."""

    scale: jax.Array

    def hockey_stick(self, epsilon, value, neighbour_value):
        r"""δ(ε) of Lap(value, b) vs Lap(neighbour_value, b) with r = |value − neighbour_value|/b:
        1 − e^ε for ε ≤ −r, 1 − e^{(ε−r)/2} for |ε| < r, 0 for ε ≥ r."""
        eps = jnp.asarray(epsilon)
        r = jnp.abs(jnp.asarray(value) - jnp.asarray(neighbour_value)) / self.scale
        mid = -jnp.expm1(jnp.minimum(eps - r, 0.0) / 2.0)
        low = -jnp.expm1(jnp.minimum(eps, 0.0))
        return jnp.where(eps >= r, 0.0, jnp.where(eps <= -r, low, mid))

    def renyi_divergence(self, order, value, neighbour_value):
        r"""D_α of two Laplace laws r = |Δ|/b apart (Mironov 2017, α > 1):
        log(α/(2α−1) e^{(α−1)r} + (α−1)/(2α−1) e^{−αr}) / (α−1)."""
        a = jnp.asarray(order)
        r = jnp.abs(jnp.asarray(value) - jnp.asarray(neighbour_value)) / self.scale
        t = jnp.logaddexp(jnp.log(a / (2 * a - 1)) + (a - 1) * r, jnp.log((a - 1) / (2 * a - 1)) - a * r)
        return t / (a - 1)

    def noise_log_prob(self, n):
        return -jnp.abs(n) / self.scale - jnp.log(2.0 * self.scale)

    def noise_cdf(self, n):
        z = jnp.asarray(n) / self.scale
        return jnp.where(z < 0, 0.5 * jnp.exp(jnp.minimum(z, 0.0)), 1.0 - 0.5 * jnp.exp(-jnp.maximum(z, 0.0)))

    def noise_log_cdf(self, n):
        z = jnp.asarray(n) / self.scale
        return jnp.where(z < 0, _LOG_HALF + jnp.minimum(z, 0.0), jnp.log1p(-0.5 * jnp.exp(-jnp.maximum(z, 0.0))))

    def noise_icdf(self, u):
        v = jnp.asarray(u) - 0.5
        return -self.scale * jnp.sign(v) * jnp.log1p(-2.0 * jnp.abs(v))

    def _sample_noise(self, uniform):
        return self.noise_icdf(uniform(0)).astype(uniform.dtype)


# ----------------------------------------------------------------------------------
# Gaussian
# ----------------------------------------------------------------------------------
def gaussian_privacy_profile(epsilon, mu):
    r"""Hockey-stick divergence of N(0,1) vs N(μ,1) (Balle & Wang 2018, Thm 8).

    :math:`\delta_G(\varepsilon;\mu) = \Phi(\mu/2 - \varepsilon/\mu) - e^{\varepsilon}\Phi(-\mu/2 - \varepsilon/\mu)`,
    valid for every real ε. T-fold composition has μ_T = √T μ.
    """
    eps = jnp.asarray(epsilon)
    a = mu / 2.0 - eps / mu
    b = -mu / 2.0 - eps / mu
    # second term in log space: e^ε Φ(b) = exp(ε + log Φ(b)); both tails are stable.
    return ndtr(a) - jnp.exp(eps + log_ndtr(b))


def _delta_gaussian_np(eps: float, mu: float) -> float:
    a = mu / 2.0 - eps / mu
    b = -mu / 2.0 - eps / mu
    phi = lambda x: 0.5 * math.erfc(-x / math.sqrt(2.0))  # noqa: E731
    return phi(a) - math.exp(eps) * phi(b)


def analytic_gaussian_sigma(epsilon, delta, sensitivity=1.0):
    """Smallest σ with δ_G(ε; Δ/σ) ≤ δ (Balle & Wang 2018), rounded up (conservative).

    Solved by bisection on concrete float64 values; accepts arrays elementwise.
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


@pytree_dataclass
class Gaussian(AdditiveMechanism):
    r"""Gaussian noise N(0, σ²)."""

    sigma: jax.Array

    def __post_init__(self):
        check_positive("sigma", self.sigma)

    @classmethod
    def from_epsilon_delta(cls, epsilon, delta, sensitivity=1.0) -> "Gaussian":
        """(ε, δ)-DP Gaussian mechanism by the analytic calibration of Balle & Wang (2018)."""
        return cls(sigma=_round_up_to_default_float(analytic_gaussian_sigma(epsilon, delta, sensitivity)))

    def hockey_stick(self, epsilon, value, neighbour_value):
        """δ(ε) of N(value, σ²) vs N(neighbour_value, σ²): the Balle–Wang profile at μ = |Δ|/σ."""
        eps = jnp.asarray(epsilon)
        mu = jnp.abs(jnp.asarray(value) - jnp.asarray(neighbour_value)) / self.sigma
        safe = jnp.where(mu > 0, mu, 1.0)
        return jnp.where(mu > 0, gaussian_privacy_profile(eps, safe), -jnp.expm1(jnp.minimum(eps, 0.0)))

    def renyi_divergence(self, order, value, neighbour_value):
        """D_α(N(v, σ²)‖N(v', σ²)) = α (v − v')² / (2σ²)."""
        d = jnp.asarray(value) - jnp.asarray(neighbour_value)
        return jnp.asarray(order) * d * d / (2.0 * self.sigma**2)

    def noise_log_prob(self, n):
        z = jnp.asarray(n) / self.sigma
        return -0.5 * z * z - jnp.log(self.sigma) - 0.5 * math.log(2 * math.pi)

    def noise_cdf(self, n):
        return ndtr(jnp.asarray(n) / self.sigma)

    def noise_log_cdf(self, n):
        return log_ndtr(jnp.asarray(n) / self.sigma)

    def noise_icdf(self, u):
        return self.sigma * ndtri(u)

    def _sample_noise(self, uniform):
        return self.noise_icdf(uniform(0)).astype(uniform.dtype)


# ----------------------------------------------------------------------------------
# Discrete Laplace (two-sided geometric)
# ----------------------------------------------------------------------------------
@pytree_dataclass
class DiscreteLaplace(_LaplaceScale, AdditiveMechanism):
    r"""Two-sided geometric noise on the integers, pmf ∝ :math:`e^{-|k|/b}`.

    ε-DP with ε = Δ/b for an integer sensitivity Δ. Sampled exactly (in idealized
    arithmetic) as the difference of two geometric variables.
    """

    scale: jax.Array
    discrete = True

    def _log_a(self):
        return -1.0 / self.scale  # a = e^{-1/b}

    def noise_log_prob(self, n):
        n = jnp.asarray(n)
        la = self._log_a()
        # log((1-a)/(1+a)) + |k| log a, and -inf off the integers
        lp = jnp.log(-jnp.expm1(la)) - jnp.log1p(jnp.exp(la)) + jnp.abs(n) * la
        return jnp.where(n == jnp.round(n), lp, -jnp.inf)

    def noise_log_cdf(self, n):
        k = _floor(n)
        la = self._log_a()
        log1pa = jnp.log1p(jnp.exp(la))
        # k <= -1: a^{|k|}/(1+a);  k >= 0: 1 - a^{k+1}/(1+a)
        lower = -k * la - log1pa
        upper = jnp.log1p(-jnp.exp(jnp.maximum(k + 1.0, 0.0) * la - log1pa))
        return jnp.where(k < 0, lower, upper)

    def noise_cdf(self, n):
        return jnp.exp(self.noise_log_cdf(n))

    def _sample_noise(self, uniform):
        # G = floor(-b log U) is geometric with success prob 1 - e^{-1/b} on {0, 1, ...}.
        g1 = jnp.floor(-self.scale * jnp.log(uniform(0)))
        g2 = jnp.floor(-self.scale * jnp.log(uniform(1)))
        return g1 - g2


# ----------------------------------------------------------------------------------
# Discrete Gaussian
# ----------------------------------------------------------------------------------
def _dg_log_normalizer(sigma):
    """log Σ_k exp(-k²/(2σ²)), exact to float64 for all σ > 0 (fixed number of terms).

    For σ < 1 the direct sum over |k| ≤ 12 is used; otherwise the Poisson-summation
    (Jacobi theta) dual  σ√(2π) Σ_m exp(-2π²σ²m²)  over |m| ≤ 3.
    """
    k = jnp.arange(-12.0, 13.0)
    s = jnp.asarray(sigma)[..., None]
    direct = jax.nn.logsumexp(-(k**2) / (2.0 * jnp.maximum(s, 1e-3) ** 2), axis=-1)
    m = jnp.arange(-3.0, 4.0)
    dual = jnp.log(s[..., 0] * math.sqrt(2 * math.pi)) + jax.nn.logsumexp(-2.0 * math.pi**2 * s**2 * m**2, axis=-1)
    return jnp.where(jnp.asarray(sigma) < 1.0, direct, dual)


@pytree_dataclass
class DiscreteGaussian(AdditiveMechanism):
    r"""Discrete Gaussian noise on the integers, pmf ∝ :math:`e^{-k^2/(2σ^2)}` (Canonne, Kamath, Steinke 2020).

    Sampled exactly (idealized arithmetic) by the CKS rejection sampler from a
    discrete Laplace proposal with scale t = ⌊σ⌋ + 1, inside a ``while_loop``
    (vmap-safe: the loop runs until every record is accepted; expected < 2 trials).
    ``support_radius`` (static) bounds the table used by :meth:`cdf`; it defaults
    to ⌈14σ⌉ + 14, beyond which the mass is below 1e-40.
    """

    sigma: jax.Array
    support_radius: int | None = static_field(default=None)
    discrete = True

    def __post_init__(self):
        check_positive("sigma", self.sigma)
        if self.support_radius is None and not is_traced(self.sigma):
            object.__setattr__(self, "support_radius", int(math.ceil(14 * float(np.max(self.sigma)))) + 14)
        elif self.support_radius is not None:
            check_int("support_radius", self.support_radius, minimum=1)

    def noise_log_prob(self, n):
        n = jnp.asarray(n)
        lp = -(n**2) / (2.0 * self.sigma**2) - _dg_log_normalizer(self.sigma)
        return jnp.where(n == jnp.round(n), lp, -jnp.inf)

    def _table(self):
        if self.support_radius is None:
            raise ValueError("support_radius must be given for a DiscreteGaussian built from a traced sigma")
        r = self.support_radius
        k = jnp.arange(-r, r + 1, dtype=jnp.result_type(float))
        s = jnp.asarray(self.sigma)[..., None]
        logw = -(k**2) / (2.0 * s**2) - _dg_log_normalizer(self.sigma)[..., None]
        return r, jnp.cumsum(jnp.exp(logw), axis=-1)

    def noise_cdf(self, n):
        k = _floor(n)
        r, cum = self._table()
        idx = jnp.clip(k + r, 0, 2 * r).astype(jnp.int32)
        if cum.ndim == 1:
            vals = cum[idx]
        else:
            vals = jnp.take_along_axis(jnp.broadcast_to(cum, jnp.broadcast_shapes(idx.shape, cum.shape[:-1]) + cum.shape[-1:]), idx[..., None], axis=-1)[..., 0]
        return jnp.where(k < -r, 0.0, jnp.where(k >= r, 1.0, jnp.minimum(vals, 1.0)))

    def noise_log_cdf(self, n):
        return jnp.log(self.noise_cdf(n))

    def _sample_noise(self, uniform):
        sigma = jnp.broadcast_to(jnp.asarray(self.sigma, uniform.dtype), uniform.shape)
        t = jnp.floor(sigma) + 1.0
        def trial(j):
            # a discrete Laplace(t) candidate from two uniforms, one uniform to accept
            g1 = jnp.floor(-t * jnp.log(uniform(3 * j)))
            g2 = jnp.floor(-t * jnp.log(uniform(3 * j + 1)))
            y = g1 - g2
            accept_log = -((jnp.abs(y) - sigma**2 / t) ** 2) / (2.0 * sigma**2)
            return y, jnp.log(uniform(3 * j + 2)) < accept_log

        def cond(state):
            return ~jnp.all(state[2])

        def body(state):
            j, out, done = state
            y, ok = trial(j)
            newly = ok & ~done
            return j + 1, jnp.where(newly, y, out), done | ok

        y0, ok0 = trial(jnp.uint32(0))
        _, out, _ = jax.lax.while_loop(cond, body, (jnp.uint32(1), y0, ok0))
        return out
