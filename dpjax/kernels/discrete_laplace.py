r"""The discrete Laplace (two-sided geometric) kernel on the integers, pmf ∝ :math:`e^{-|k|/b}`.

ε-DP with ε = Δ/b for an integer sensitivity Δ. Closed forms: CDF and quantile (also from
a log-space target), the sampler as the difference of two geometric variables, the pair
loss threshold and the tilted sums of the Laplace family (:mod:`dpjax.kernels.laplace`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax.kernels._laplace_law import LaplaceScale, laplace_tilted_log_integral
from dpjax.kernels.base import AdditiveMechanism
from dpjax.pytree import pytree_dataclass

__all__ = ["DiscreteLaplace"]


@pytree_dataclass
class DiscreteLaplace(LaplaceScale, AdditiveMechanism):
    r"""Two-sided geometric noise on the integers, pmf ∝ :math:`e^{-|k|/b}`.

    ε-DP with ε = Δ/b for an integer sensitivity Δ. Sampled exactly (in idealized
    arithmetic) as the difference of two geometric variables.

    Args:
      scale: the scale b > 0 (scalar or array: a batch of kernels; differentiable).

    Raises:
      ValueError: an empty or non-positive ``scale``.
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
        k = jnp.floor(jnp.asarray(n))
        la = self._log_a()
        log1pa = jnp.log1p(jnp.exp(la))
        # k <= -1: a^{|k|}/(1+a);  k >= 0: 1 - a^{k+1}/(1+a)
        lower = -k * la - log1pa
        upper = jnp.log1p(-jnp.exp(jnp.maximum(k + 1.0, 0.0) * la - log1pa))
        return jnp.where(k < 0, lower, upper)

    def noise_icdf(self, u):
        return self.noise_log_icdf(jnp.log(u))

    def as_mixture(self):
        """The same law as a :class:`~dpjax.kernels.mixture.GeometricMixture` (r = 1, c = 0).

        Returns:
          A :class:`~dpjax.kernels.mixture.GeometricMixture` with r = 1, c = 0.
        """
        from dpjax.kernels.mixture import GeometricMixture

        return GeometricMixture._unchecked(self.scale, self.scale, 0)

    def hockey_stick(self, epsilon, value, neighbour_value):
        r"""δ(ε) of two discrete Laplace laws an integer shift apart, in closed form.

        δ(ε) of DL(value, b) vs DL(neighbour_value, b) for an integer shift k, r = k/b: 0 for
        ε ≥ r, 1 − e^ε for ε ≤ −r, and between them, with the loss (k − 2y)/b above ε exactly
        for y ≤ y* = ⌈(k − εb)/2⌉ − 1 (and a = e^{−1/b}),
        1 − (a^{y*+1} + e^ε a^{k−y*}) / (1 + a). A shift off the integers separates the
        supports: δ = 1. Any integer support size (the summing source is bounded).

        Args:
          epsilon: ε, any real (array broadcasting with the answers and the parameters).
          value: the answer v.
          neighbour_value: the neighbouring answer v'.

        Returns:
          δ(ε) = ∫ (p(y|v) − e^ε p(y|v'))_+ dy, of the broadcast shape.
        """
        eps = jnp.asarray(epsilon)
        k = jnp.abs(jnp.asarray(value) - jnp.asarray(neighbour_value))
        la = self._log_a()
        r = k / self.scale
        ystar = jnp.clip(jnp.ceil((k - eps * self.scale) / 2.0) - 1.0, 0.0, jnp.maximum(k - 1.0, 0.0))
        log_mass = jnp.logaddexp((ystar + 1.0) * la, jnp.minimum(eps, r) + (k - ystar) * la)
        mid = jnp.maximum(-jnp.expm1(log_mass - jnp.log1p(jnp.exp(la))), 0.0)
        low = -jnp.expm1(jnp.minimum(eps, 0.0))
        out = jnp.where(eps >= r, 0.0, jnp.where(eps <= -r, low, mid))
        return jnp.where(k != jnp.round(k), 1.0, out)

    def noise_log_icdf(self, log_u):
        """Smallest integer k with ``log F(k) ≥ log_u``, in closed form on both sides of 0.

        Args:
          log_u: log probabilities (array).

        Returns:
          The integer quantiles, as floats.
        """
        la = self._log_a()
        log1pa = jnp.log1p(jnp.exp(la))
        # lower part (k <= -1): log F(k) = |k| la - log(1+a)
        inv_la = 1.0 / la
        lower = -jnp.floor((log_u + log1pa) * inv_la)
        # upper part (k >= 0): log SF(k) = (k+1) la - log(1+a)
        u = jnp.exp(log_u)
        log_1mu = jnp.log1p(-jnp.minimum(u, 1.0 - 1e-16))
        upper = jnp.maximum(jnp.ceil((log_1mu + log1pa) * inv_la) - 1.0, 0.0)
        return jnp.where(log_u <= la - log1pa, jnp.minimum(lower, -1.0), upper)

    def sample_noise(self, uniform):
        # G = floor(-b log U) is geometric with success prob 1 - e^{-1/b} on {0, 1, ...}.
        g1 = jnp.floor(-self.scale * jnp.log(uniform(0)))
        g2 = jnp.floor(-self.scale * jnp.log(uniform(1)))
        return g1 - g2

    def noise_kinks(self):
        # g(k) = α log f(k − v) + (1 − α) log f(k − v') turns at k = v: pieces cut at v + ½
        return jnp.full(jnp.shape(self.scale) + (1,), 0.5)

    def noise_tilted_log_integral(self, lo, hi, v, nv, alpha):
        return laplace_tilted_log_integral(self, lo, hi, v, nv, alpha)

    def exact_lattice(self):
        """The exact tier's mechanism (:mod:`dpjax.exact.lattice`): this law sampled with integers only.

        Returns:
          The lattice mechanism that ``numerics="exact"`` runs; account that one for the privacy of what ran.

        Raises:
          ValueError: parameters the exact tier cannot represent (see :mod:`dpjax.exact.lattice`).
        """
        from dpjax.exact.lattice import discrete_laplace_lattice

        return discrete_laplace_lattice(self.scale, type(self))

    def exact_lattice_scale(self):
        """The scales :meth:`exact_lattice` builds its lattice from.

        The scales :meth:`exact_lattice` builds its lattice from, record by record: an exact release with many
        per-record scales builds the same lattice parameters from them inside its device program
        (:func:`dpjax.exact.lattice.release_exact`).

        Returns:
          The scale leaf.
        """
        return self.scale
