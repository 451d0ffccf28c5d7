"""k-ary (generalized) randomized response for local DP.

A record holding category ``x ∈ {0, …, k−1}`` reports ``x`` with probability
``p = e^ε / (e^ε + k − 1)`` and each other category with probability
``q = 1 / (e^ε + k − 1)`` (Warner 1965; Kairouz, Oh, Viswanath 2016). It is pure
ε-LDP: the likelihood ratio of any two inputs is at most p/q = e^ε.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax.pytree import pytree_dataclass, static_field
from dpjax.validation import check_categories, check_index_values, check_int, check_positive
from dpjax.mechanism import Mechanism

__all__ = ["RandomizedResponse"]


@pytree_dataclass
class RandomizedResponse(Mechanism):
    """Generalized randomized response over ``num_categories`` categories.

    Args:
      epsilon: ε > 0 (scalar or array: a batch of mechanisms; differentiable).
      num_categories: k ≥ 2 (static).

    Raises:
      ValueError: ``epsilon`` not positive; ``num_categories`` not an integer ≥ 2.

    References:
      Warner, "Randomized Response: A Survey Technique for Eliminating Evasive Answer Bias", JASA
      1965. Kairouz, Oh, Viswanath, "Extremal Mechanisms for Local Differential Privacy", JMLR 2016.
    """

    epsilon: jax.Array
    num_categories: int = static_field(default=2)
    discrete = True

    def __post_init__(self):
        check_positive("epsilon", self.epsilon)
        check_int("num_categories", self.num_categories, minimum=2)

    @property
    def keep_probability(self):
        """p = e^ε / (e^ε + k − 1): probability of reporting the true category.

        Returns:
          p, of the batch shape.
        """
        return jax.nn.sigmoid(self.epsilon - jnp.log(self.num_categories - 1.0))

    @property
    def flip_probability(self):
        """q = 1 / (e^ε + k − 1): probability of reporting one given other category.

        Computed as σ(log(k − 1) − ε)/(k − 1), not (1 − p)/(k − 1): at large ε, 1 − p cancels, and
        the accountant's δ(ε) = p − e^ε q would come out too small.

        Returns:
          q, of the batch shape.
        """
        k1 = self.num_categories - 1.0
        return jax.nn.sigmoid(jnp.log(k1) - self.epsilon) / k1

    def pure_epsilon(self, sensitivity=None):
        """ε of the local-DP guarantee (the likelihood ratio p/q).

        Args:
          sensitivity: ignored (any two categories are neighbours).

        Returns:
          ε, of the batch shape.
        """
        return jnp.asarray(self.epsilon)

    def confusion_matrix(self):
        """``P[y | x]`` as a k×k matrix (rows: true category).

        Returns:
          An array ``batch_shape + (k, k)``.
        """
        k = self.num_categories
        eye = jnp.eye(k)
        p = jnp.asarray(self.keep_probability)[..., None, None]
        q = jnp.asarray(self.flip_probability)[..., None, None]
        return eye * p + (1 - eye) * q

    def validate_values(self, values) -> None:
        """Refuse values that are not category indices.

        Args:
          values: the true categories.

        Raises:
          ValueError: a value not an integer in ``[0, num_categories)``, or more categories than the
            uniform stream can address.
        """
        check_categories(self.num_categories)
        check_index_values("values", values, self.num_categories, "num_categories")

    def traced_checks(self, values):
        v = jnp.asarray(values)
        ok = (v == jnp.round(v)) & (v >= 0) & (v < self.num_categories)
        return super().traced_checks(values) + [
            (jnp.all(ok), f"values must be integer indices in [0, num_categories) = [0, {self.num_categories})"),
            (jnp.all(self.epsilon > 0), "epsilon must be positive"),
        ]

    def _sample(self, uniform, value):
        keep = uniform(0) < self.keep_probability
        r = jnp.floor(uniform(1) * (self.num_categories - 1))
        r = jnp.minimum(r, self.num_categories - 2).astype(value.dtype)
        other = r + (r >= value).astype(value.dtype)
        return jnp.where(keep, value, other)

    def log_prob(self, y, value):
        """The report's log pmf.

        Args:
          y: reports (array).
          value: the true categories.

        Returns:
          ``log P[y | value]`` (``−inf`` off the categories).
        """
        y = jnp.asarray(y)
        inside = (y == jnp.round(y)) & (y >= 0) & (y <= self.num_categories - 1)
        lp = jnp.where(y == value, jnp.log(self.keep_probability), jnp.log(self.flip_probability))
        return jnp.where(inside, lp, -jnp.inf)

    def cdf(self, y, value):
        """The report's CDF over the category indices.

        Args:
          y: reports (array).
          value: the true categories.

        Returns:
          ``Pr[M(value) <= y]``.
        """
        k = jnp.clip(jnp.floor(jnp.asarray(y)) + 1.0, 0.0, self.num_categories)
        p, q = self.keep_probability, self.flip_probability
        return q * k + (p - q) * (jnp.floor(jnp.asarray(y)) >= value)

    symmetric_pairs = True

    def hockey_stick(self, epsilon, value, neighbour_value):
        """δ(ε) of the report laws of two categories, in closed form.

        δ(ε) of the reports of two categories: (p − e^ε q)_+ + (q − e^ε p)_+ + (k−2) q (1 − e^ε)_+
        (or (1 − e^ε)_+ when the categories coincide), the first two as p (1 − e^(ε − ε_RR))_+ and
        q (1 − e^(ε + ε_RR))_+ (p/q = e^ε_RR): no e^ε to overflow or clamp, so δ stays exact at any ε and ε_RR.

        Args:
          epsilon: ε, any real (array broadcasting with the answers and the parameters).
          value: the answer v.
          neighbour_value: the neighbouring answer v'.

        Returns:
          δ(ε) = ∫ (p(y|v) − e^ε p(y|v'))_+ dy, of the broadcast shape.
        """
        eps = jnp.asarray(epsilon)
        p, q = self.keep_probability, self.flip_probability
        same = -jnp.expm1(jnp.minimum(eps, 0.0))
        diff = (
            -p * jnp.expm1(jnp.minimum(eps - self.epsilon, 0.0))
            - q * jnp.expm1(jnp.minimum(eps + self.epsilon, 0.0))
            + (self.num_categories - 2) * q * same
        )
        return jnp.where(jnp.asarray(value) == jnp.asarray(neighbour_value), same, diff)

    def renyi_divergence(self, order, value, neighbour_value):
        """D_α between the report laws of two distinct categories (0 if they coincide).

        Args:
          order: the order α > 1 (array broadcasting with the answers and the parameters).
          value: the answer v.
          neighbour_value: the neighbouring answer v'.

        Returns:
          D_α(P_v‖P_v'), of the broadcast shape.
        """
        a = jnp.asarray(order)
        lp, lq = jnp.log(self.keep_probability), jnp.log(self.flip_probability)
        k = self.num_categories
        terms = [a * lp + (1 - a) * lq, a * lq + (1 - a) * lp]
        if k > 2:
            terms.append(jnp.log(k - 2.0) + lq)
        d = jax.nn.logsumexp(jnp.stack(jnp.broadcast_arrays(*terms)), axis=0) / (a - 1)
        return jnp.where(jnp.asarray(value) == jnp.asarray(neighbour_value), 0.0, d)

    def neighbour_pairs(self, sensitivity=None):
        """Any two distinct categories are a worst pair (the law is symmetric).

        Args:
          sensitivity: ignored.

        Returns:
          ``(values, neighbour_values)`` = ``([0], [1])``.
        """
        return jnp.zeros((1,)), jnp.ones((1,))

    def exact_lattice(self):
        """The exact tier's mechanism (:mod:`dpjax.exact.lattice`): integer keep threshold, achieved ε.

        Returns:
          The lattice mechanism that ``numerics="exact"`` runs; account that one for the privacy of what ran.

        Raises:
          ValueError: parameters the exact tier cannot represent (see :mod:`dpjax.exact.lattice`).
        """
        from dpjax.exact.lattice import rr_lattice

        return rr_lattice(self)

    def exact_lattice_epsilon(self):
        """The ε :meth:`exact_lattice` builds its keep thresholds from.

        The ε :meth:`exact_lattice` builds its keep thresholds from, record by record: an exact release with
        per-record ε looks the same thresholds up in its device program (:func:`dpjax.exact.lattice.release_exact`).

        Returns:
          The ε leaf.
        """
        return self.epsilon
