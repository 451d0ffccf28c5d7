r"""The pair that dominates every ε-bounded-range mechanism, the exponential mechanism among them.

A mechanism is ε-bounded-range (ε-BR) when, for every pair of neighbouring inputs, its privacy loss lies in an
interval ``[t − ε, t]`` (Durfee & Rogers, "Practical differentially private top-k selection with pay-what-you-get
composition", NeurIPS 2019). The exponential mechanism with utilities moving by at most Δ either
way and weights ``exp(u/β)`` — report-noisy-max with Gumbel noise of scale β — is ε-BR with ε = 2Δ/β.

Every pair with losses in ``[t − ε, t]`` is dominated (in every hockey-stick divergence) by the two-point pair
with losses ``{t − ε, t}``: δ(ε′) = E_P[(1 − e^{ε′}e^{−L})_+] is the mean of a convex function of ``e^{−L}``
under ``E_P[e^{−L}] = 1``, largest at the ends of the range (Dong, Durfee & Rogers, "Optimal differential privacy
composition for exponential mechanisms", ICML 2020). Maximising that pair's δ(ε′) =
(e^ε − e^t)(1 − e^{ε′−t})/(e^ε − 1) over ``t ∈ [0, ε]`` gives ``t = (ε + ε′)/2`` and the upper envelope

.. math:: δ(ε′) = \frac{(e^{ε/2} − e^{ε′/2})^2}{e^ε − 1}, \qquad |ε′| ≤ ε,

(1 − e^{ε′} below −ε, 0 above ε), the profile of the pair realised here: on answer 0 the output has density
``c·e^{y/2}`` on ``[−ε, ε]``, on answer 1 ``c·e^{−y/2}`` (``c = 1/(4 sinh(ε/2))``), so that the privacy loss of
an output is the output itself. Its PLD dominates each use of an ε-BR mechanism, and a composition of such uses
is dominated by the composition of their PLDs. At ε′ = 0 it gives δ = tanh(ε/4), where pure ε-DP alone allows
tanh(ε/2) (randomized response).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax.mechanism import Mechanism
from dpjax.pytree import pytree_dataclass
from dpjax.validation import check_index_values, check_positive

__all__ = ["BoundedRange"]


def _upper(epsilon, y):
    """``Pr[Y > y]`` on answer 0, ``(1 − e^{(y−ε)/2})/(1 − e^{−ε})`` clipped to ``[0, 1]`` (no overflow at large ε)."""
    y = jnp.clip(y, -epsilon, epsilon)
    return jnp.expm1((y - epsilon) / 2) / jnp.expm1(-epsilon)


def _log_sinh(x):
    """``log sinh(x) = x + log(1 − e^{−2x}) − log 2`` for ``x > 0`` (no overflow at large x)."""
    return x + jnp.log(-jnp.expm1(-2 * x)) - jnp.log(2.0)


@pytree_dataclass
class BoundedRange(Mechanism):
    r"""The worst ε-bounded-range pair as a mechanism on the answers 0 and 1.

    On answer ``v`` the output has density ``c·e^{(1/2 − v)·y}`` on ``[−ε, ε]``, ``c = 1/(4 sinh(ε/2))``: the
    privacy loss between the answers is the output (module docstring). Its accountant bounds every
    ε-bounded-range mechanism — the exponential mechanism at ε = 2Δ/β — and their compositions.

    Args:
      epsilon: the range ε > 0 (scalar or array: a batch; differentiable).

    Raises:
      ValueError: ``epsilon`` not positive.

    References:
      Durfee & Rogers, "Practical differentially private top-k selection with pay-what-you-get composition",
      NeurIPS 2019. Dong, Durfee & Rogers, "Optimal differential privacy composition for exponential
      mechanisms", ICML 2020.
    """

    epsilon: jax.Array

    def __post_init__(self):
        check_positive("epsilon", self.epsilon)

    def _sample(self, uniform, value):
        # inverse cdf of answer 0, y = ε + 2·log(u + (1 − u)e^{−ε}); answer 1 is its mirror image
        u = uniform(0)
        y = self.epsilon + 2 * jnp.log(u + (1 - u) * jnp.exp(-self.epsilon))
        return jnp.where(value == 0, y, -y)

    def log_prob(self, y, value):
        """The output's log density.

        Args:
          y: outputs (array).
          value: the answers (0 or 1).

        Returns:
          ``log p(y | value)`` (``−inf`` outside ``[−ε, ε]``).
        """
        y = jnp.asarray(y)
        log_c = -jnp.log(4.0) - jnp.log(jnp.sinh(self.epsilon / 2))
        lp = log_c + (0.5 - jnp.asarray(value)) * y
        return jnp.where(jnp.abs(y) <= self.epsilon, lp, -jnp.inf)

    def cdf(self, y, value):
        """The output's cumulative distribution function.

        Args:
          y: outputs (array).
          value: the answers (0 or 1).

        Returns:
          ``Pr[M(value) <= y]``.
        """
        y = jnp.asarray(y)
        return jnp.where(jnp.asarray(value) == 0, 1 - _upper(self.epsilon, y), _upper(self.epsilon, -y))

    def sf(self, y, value):
        """The output's survival function (accurate in both tails).

        Args:
          y: outputs (array).
          value: the answers (0 or 1).

        Returns:
          ``Pr[M(value) > y]``.
        """
        y = jnp.asarray(y)
        return jnp.where(jnp.asarray(value) == 0, _upper(self.epsilon, y), 1 - _upper(self.epsilon, -y))

    def neighbour_pairs(self, sensitivity=None):
        """The one pair of answers, 0 and 1.

        Args:
          sensitivity: ignored (the answers are 0 and 1).

        Returns:
          ``(values, neighbour_values)`` = ``([0], [1])``.
        """
        return jnp.zeros((1,)), jnp.ones((1,))

    symmetric_pairs = True

    def hockey_stick(self, epsilon, value, neighbour_value):
        r"""δ(ε′) of the two answers' laws: :math:`(e^{ε/2} − e^{ε′/2})^2/(e^ε − 1)` for ``|ε′| ≤ ε``.

        Written ``(1 − e^{(ε′−ε)/2})²/(1 − e^{−ε})`` (no overflow); ``1 − e^{ε′}`` below −ε, 0 above ε, and
        ``(1 − e^{ε′})_+`` when the answers coincide.

        Args:
          epsilon: ε′, any real (array broadcasting with the answers and the parameters).
          value: the answer.
          neighbour_value: the neighbouring answer.

        Returns:
          δ(ε′), of the broadcast shape.
        """
        eps = jnp.asarray(epsilon)
        e = self.epsilon
        inside = jnp.expm1((jnp.clip(eps, -e, e) - e) / 2) ** 2 / -jnp.expm1(-e)
        below = -jnp.expm1(jnp.minimum(eps, 0.0))
        diff = jnp.where(eps < -e, below, inside)
        return jnp.where(jnp.asarray(value) == jnp.asarray(neighbour_value), below, diff)

    def output_breakpoints(self, value, neighbour_value):
        """The ends ±ε of the support, where the density jumps.

        Args:
          value: the answer.
          neighbour_value: the neighbouring answer.

        Returns:
          ``[−ε, ε]``, of shape ``(..., 2)``.
        """
        e = jnp.broadcast_to(self.epsilon, jnp.broadcast_shapes(jnp.shape(value), jnp.shape(self.epsilon)))
        return jnp.stack([-e, e], axis=-1)

    def renyi_divergence(self, order, value, neighbour_value):
        r"""D_α between the two answers' laws: :math:`\log\frac{\sinh((2α − 1)ε/2)}{(2α − 1)\sinh(ε/2)}/(α − 1)`.

        Args:
          order: α > 1 (array broadcasting with the answers and the parameters).
          value: the answer.
          neighbour_value: the neighbouring answer.

        Returns:
          D_α, of the broadcast shape (0 when the answers coincide).
        """
        a = jnp.asarray(order)
        k = 2 * a - 1
        e = self.epsilon
        d = (_log_sinh(k * e / 2) - jnp.log(k) - _log_sinh(e / 2)) / (a - 1)
        return jnp.where(jnp.asarray(value) == jnp.asarray(neighbour_value), 0.0, d)

    def pure_epsilon(self, sensitivity=None):
        """ε, the largest privacy loss of the pair.

        Args:
          sensitivity: ignored.

        Returns:
          ε, of the batch shape.
        """
        return jnp.asarray(self.epsilon)

    def validate_values(self, values) -> None:
        """Refuse answers other than 0 and 1.

        Args:
          values: the answers.

        Raises:
          ValueError: an answer not 0 or 1.
        """
        check_index_values("values", values, 2, "the answers 0 and 1")

    def traced_checks(self, values):
        v = jnp.asarray(values)
        return super().traced_checks(values) + [
            (jnp.all((v == 0) | (v == 1)), "values must be the answers 0 or 1"),
            (jnp.all(self.epsilon > 0), "epsilon must be positive"),
        ]
