r"""The Laplace kernel, density :math:`e^{-|n|/b}/(2b)`: ε-DP with ε = Δ/b.

Closed forms (overrides of the kernel protocol, :mod:`dpjax.kernels.base`): the
hockey-stick and Rényi divergences of a pair, linear-space side masses and the split
quantile (``expm1``/``log1p``: exact near the median and in the tails), the pair loss
threshold (the loss is linear between the kink at 0 of both laws, clipped outside), and
the tilted integrals of the Rényi closed form (geometric, the log density being linear
between kinks). :class:`LaplaceScale` (:mod:`dpjax.kernels._laplace_law`) is the calibration the
discrete Laplace shares.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from dpjax.kernels._laplace_law import LaplaceScale, laplace_loss_threshold, laplace_tilted_log_integral
from dpjax.kernels.base import AdditiveMechanism
from dpjax.pytree import pytree_dataclass

__all__ = ["Laplace", "LaplaceScale", "laplace_loss_threshold", "laplace_tilted_log_integral"]

_LOG_HALF = math.log(0.5)


@pytree_dataclass
class Laplace(LaplaceScale, AdditiveMechanism):
    r"""Laplace noise, density :math:`e^{-|n|/b} / (2b)`; ε-DP with ε = Δ/b.

    Args:
      scale: the scale b > 0 (scalar or array: a batch of kernels; differentiable).

    Raises:
      ValueError: an empty or non-positive ``scale``.
    """

    scale: jax.Array

    def as_mixture(self):
        """The same law as a :class:`~dpjax.kernels.mixture.LaplaceMixture` (r = 1, c = 0).

        Returns:
          A :class:`~dpjax.kernels.mixture.LaplaceMixture` with r = 1, c = 0.
        """
        from dpjax.kernels.mixture import LaplaceMixture

        return LaplaceMixture._unchecked(self.scale, self.scale, jnp.zeros_like(self.scale))

    def hockey_stick(self, epsilon, value, neighbour_value):
        r"""δ(ε) of two Laplace laws, in closed form.

        δ(ε) of Lap(value, b) vs Lap(neighbour_value, b) with r = |value − neighbour_value|/b:
        1 − e^ε for ε ≤ −r, 1 − e^{(ε−r)/2} for |ε| < r, 0 for ε ≥ r.

        Args:
          epsilon: ε, any real (array broadcasting with the answers and the parameters).
          value: the answer v.
          neighbour_value: the neighbouring answer v'.

        Returns:
          δ(ε) = ∫ (p(y|v) − e^ε p(y|v'))_+ dy, of the broadcast shape.
        """
        eps = jnp.asarray(epsilon)
        r = jnp.abs(jnp.asarray(value) - jnp.asarray(neighbour_value)) / self.scale
        mid = -jnp.expm1(jnp.minimum(eps - r, 0.0) / 2.0)
        low = -jnp.expm1(jnp.minimum(eps, 0.0))
        return jnp.where(eps >= r, 0.0, jnp.where(eps <= -r, low, mid))

    def laplace_pld_ratio(self, sensitivity=1.0):
        """r = |Δ|/b: the pair Lap(0, b) vs Lap(Δ, b) is the Laplace pair of r (numpy or JAX arithmetic, as given).

        Args:
          sensitivity: the shift Δ.

        Returns:
          r = |Δ|/b, broadcast with the batch.
        """
        return abs(sensitivity) / self.scale

    def renyi_divergence(self, order, value, neighbour_value):
        r"""The Rényi divergence of two Laplace laws, in closed form.

        D_α of two Laplace laws r = |Δ|/b apart (Mironov 2017, α > 1):
        log(α/(2α−1) e^{(α−1)r} + (α−1)/(2α−1) e^{−αr}) / (α−1).

        Args:
          order: the order α > 1 (array broadcasting with the answers and the parameters).
          value: the answer v.
          neighbour_value: the neighbouring answer v'.

        Returns:
          D_α(P_v‖P_v'), of the broadcast shape.

        References:
          Mironov, "Rényi Differential Privacy", IEEE CSF 2017, Table II.
        """
        a = jnp.asarray(order)
        r = jnp.abs(jnp.asarray(value) - jnp.asarray(neighbour_value)) / self.scale
        t = jnp.logaddexp(jnp.log(a / (2 * a - 1)) + (a - 1) * r, jnp.log((a - 1) / (2 * a - 1)) - a * r)
        return t / (a - 1)

    def noise_log_prob(self, n):
        return -jnp.abs(n) * (1.0 / self.scale) - jnp.log(2.0 * self.scale)

    def noise_cdf(self, n):
        z = jnp.asarray(n) * (1.0 / self.scale)
        return jnp.where(z < 0, 0.5 * jnp.exp(jnp.minimum(z, 0.0)), 1.0 - 0.5 * jnp.exp(-jnp.maximum(z, 0.0)))

    def noise_log_cdf(self, n):
        z = jnp.asarray(n) * (1.0 / self.scale)
        return jnp.where(z < 0, _LOG_HALF + jnp.minimum(z, 0.0), jnp.log1p(-0.5 * jnp.exp(-jnp.maximum(z, 0.0))))

    def noise_icdf(self, u):
        v = jnp.asarray(u) - 0.5
        return -self.scale * jnp.sign(v) * jnp.log1p(-2.0 * jnp.abs(v))

    def noise_side_masses(self, x):
        z = x * (1.0 / self.scale)
        return -0.5 * jnp.expm1(-z), 0.5 * jnp.exp(-z)

    def noise_split_icdf(self, p, w, side):
        """The split quantile, exact at both ends.

        ``|n| = −b log(2p) = −b log1p(−2|w|)``, evaluated as Kahan's ``log1p(x) = x log(y)/(y − 1)``
        with ``x = −2|w|`` and ``y = 2p ≈ 1 + x``: one log, exact at both ends.

        Args:
          p: ``min(F(n), 1 − F(n))``.
          w: ``F(n) − ½``.
          side: −1 below 0, +1 above.

        Returns:
          The noise ``n``.
        """
        p = jnp.where(p > 0, p, 0.5)  # p = 0 only in a component of zero weight: keep it finite
        x = -2.0 * jnp.abs(w)
        y = 2.0 * p
        near = y == 1.0
        ratio = jnp.where(near, 1.0, jnp.log(y) / jnp.where(near, -1.0, y - 1.0))
        return -side * self.scale * x * ratio

    def noise_kinks(self):
        return jnp.zeros(jnp.shape(self.scale) + (1,))

    def noise_tilted_log_integral(self, lo, hi, v, nv, alpha):
        return laplace_tilted_log_integral(self, lo, hi, v, nv, alpha)

    def exact_lattice(self):
        """The exact tier's mechanism (:mod:`dpjax.exact.lattice`): discrete Laplace noise on a lattice.

        Returns:
          The lattice mechanism that ``numerics="exact"`` runs; account that one for the privacy of what ran.

        Raises:
          ValueError: parameters the exact tier cannot represent (see :mod:`dpjax.exact.lattice`).
        """
        from dpjax.exact.lattice import laplace_lattice
        from dpjax.kernels.discrete_laplace import DiscreteLaplace

        return laplace_lattice(self.scale, DiscreteLaplace)

    def exact_lattice_scale(self):
        """The scales :meth:`exact_lattice` builds its lattice from.

        The scales :meth:`exact_lattice` builds its lattice from, record by record: an exact release with many
        per-record scales builds the same lattice parameters from them inside its device program
        (:func:`dpjax.exact.lattice.release_exact`).

        Returns:
          The scale leaf.
        """
        return self.scale
