r"""Privacy-boosted generalized randomized response (PB-GRR) for local DP (PB-DP §4.4).

The domain ``{0, …, d−1}`` is partitioned into consecutive *categories* (blocks) of
``block_size = |S|`` values; ``S(x)`` is the block holding ``x``. The kernel is GRR with
budget ``ε0`` and every output outside ``S(x)`` is down-weighted by ``1 − q_b`` with
``q_b = 1 − e^{ε0 − ε}`` (App. H, sign typo fixed), which makes the mechanism pure
ε-LDP (Prop. 7). With ``Den = e^ε + (|S|−1) e^{ε−ε0} + d − |S|``:

* ``p   = Pr[y = x]                    = e^ε / Den``        (keep)
* ``p_s = Pr[y = y'], y' ∈ S(x) \ {x}  = e^{ε−ε0} / Den``   (each other value of the block)
* ``p̄   = Pr[y = y'], y' ∉ S(x)        = 1 / Den``          (each value outside the block)

The largest likelihood ratio is ``p/p̄ = e^ε`` (exactly; ``e^{ε0}`` if there is a single
block), the others ``p/p_s = e^{ε0}`` and ``p_s/p̄ = e^{ε−ε0}``. ``ε0 = ε`` is plain GRR,
``ε0 = 0`` block randomized response. The report lands in the true category with
probability ``ρ = p + (|S|−1) p_s`` (Remark 5).

Frequency estimation from N reports (eqs. 10–11, reports ``y_i`` in place of the
printed ``x_i``), both unbiased (Prop. 8):

* ``F̂_S = (C_S − N |S| p̄) / (p + (|S|−1) p_s − |S| p̄)``                (category counts)
* ``F̂_x = (C_x − F̂_{S(x)} (p_s − p̄) − N p̄) / (p − p_s)``              (value counts)

with closed-form variances given the true counts. ``F̂_x`` needs ``ε0 > 0`` (``p = p_s`` at
``ε0 = 0``: its variance is infinite).

Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting Approach",
IEEE S&P 2025, §4.4 (§4.4.2, eqs. (10)–(11), Prop. 7, Prop. 8, Remark 5, App. H).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.pytree import pytree_dataclass, static_field
from dpjax.validation import check_categories, check_index_values, check_int, check_positive, check_real, is_traced
from dpjax.mechanism import Mechanism

__all__ = ["BoostedRandomizedResponse"]


@pytree_dataclass
class BoostedRandomizedResponse(Mechanism):
    """PB-GRR over ``domain_size`` values in categories of ``block_size`` consecutive values.

    Args:
      epsilon: the pure ε-LDP guarantee (ε > 0).
      epsilon0: the GRR kernel's budget, ``0 ≤ ε0 ≤ ε`` (``ε0 = ε``: plain GRR).
      domain_size: d, a multiple of ``block_size`` (static).
      block_size: |S|, the category size (static).

    Raises:
      ValueError: ``epsilon`` not positive; ``epsilon0`` not real or outside [0, ε]; ``domain_size``
        not an integer ≥ 2; ``block_size`` not an integer ≥ 1 or not dividing ``domain_size``.

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, §4.4, Proposition 7 and Appendix H.
    """

    epsilon: jax.Array
    epsilon0: jax.Array
    domain_size: int = static_field(default=2)
    block_size: int = static_field(default=1)
    discrete = True
    symmetric_pairs = True  # block-preserving relabelings swap any declared pair

    def __post_init__(self):
        check_positive("epsilon", self.epsilon)
        check_real("epsilon0", self.epsilon0)
        if not is_traced((self.epsilon, self.epsilon0)):
            e0, e = np.asarray(self.epsilon0), np.asarray(self.epsilon)
            if np.any(e0 < 0) or np.any(e0 > e):
                raise ValueError(
                    f"epsilon0 must lie in [0, epsilon], got epsilon0={self.epsilon0!r}, epsilon={self.epsilon!r}"
                )
        check_int("domain_size", self.domain_size, minimum=2)
        check_int("block_size", self.block_size, minimum=1)
        if self.domain_size % self.block_size:
            raise ValueError(
                f"block_size must divide domain_size (categories are consecutive blocks), "
                f"got domain_size={self.domain_size}, block_size={self.block_size}"
            )

    # -- probabilities --------------------------------------------------------------
    @property
    def num_blocks(self) -> int:
        """Returns:

        d/|S|.
        """
        return self.domain_size // self.block_size

    def _log_den(self):
        e, e0 = jnp.asarray(self.epsilon), jnp.asarray(self.epsilon0)
        d, s = self.domain_size, self.block_size
        terms = [e]
        if s > 1:
            terms.append(np.log(s - 1.0) + e - e0)
        if d > s:
            terms.append(np.log(float(d - s)) + jnp.zeros_like(e))
        return jax.nn.logsumexp(jnp.stack(jnp.broadcast_arrays(*terms)), axis=0)

    @property
    def keep_probability(self):
        """p = e^ε / Den: the true value is reported.

        Returns:
          p, of the batch shape.
        """
        return jnp.exp(self.epsilon - self._log_den())

    @property
    def block_probability(self):
        """p_s = e^{ε−ε0} / Den: each other value of the true category.

        Returns:
          p_s, of the batch shape.
        """
        return jnp.exp(self.epsilon - self.epsilon0 - self._log_den())

    @property
    def other_probability(self):
        """p̄ = 1 / Den: each value outside the true category.

        Returns:
          p̄, of the batch shape.
        """
        return jnp.exp(-self._log_den())

    @property
    def boosting_rate(self):
        """q_b = 1 − e^{ε0 − ε}: the down-weighting of outputs outside S(x).

        Returns:
          q_b, of the batch shape.
        """
        return -jnp.expm1(self.epsilon0 - self.epsilon)

    @property
    def coverage(self):
        """ρ = p + (|S|−1) p_s: the report lies in the true category (Remark 5).

        Returns:
          ρ, of the batch shape.
        """
        return self.keep_probability + (self.block_size - 1) * self.block_probability

    def pure_epsilon(self, sensitivity=None):
        """The exact pure ε of the LDP guarantee: max log-likelihood ratio (ε; ε0 if one block).

        Args:
          sensitivity: ignored (any two values are neighbours).

        Returns:
          The pure ε, of the batch shape.
        """
        return jnp.asarray(self.epsilon) if self.domain_size > self.block_size else jnp.asarray(self.epsilon0)

    def confusion_matrix(self):
        """``P[y | x]`` as a d×d matrix (rows: true value).

        Returns:
          An array ``batch_shape + (d, d)``.
        """
        x = jnp.arange(self.domain_size)
        return jnp.exp(self.log_prob(x[None, :], x[:, None]))

    def _log_probs(self, value):
        """Log report law of ``value`` over all d outputs (trailing axis)."""
        ys = jnp.arange(self.domain_size, dtype=jnp.result_type(float))
        mech = jax.tree_util.tree_map(lambda p: jnp.asarray(p)[..., None], self)
        return mech.log_prob(ys, jnp.asarray(value)[..., None])

    # -- output law -----------------------------------------------------------------
    def validate_values(self, values) -> None:
        """Refuse values that are not indices of the domain.

        Args:
          values: the true values.

        Raises:
          ValueError: a value not an integer in ``[0, domain_size)``, or a domain larger than the
            uniform stream can address.
        """
        check_categories(self.domain_size, "domain_size")
        check_index_values("values", values, self.domain_size, "domain_size")

    def _sample(self, uniform, value):
        d, s = self.domain_size, self.block_size
        dt = uniform.dtype
        p = jnp.asarray(self.keep_probability, dt)
        ps = jnp.asarray(self.block_probability, dt)
        t_keep, t_block = p, p + (s - 1) * ps
        u0, u1 = uniform(0), uniform(1)
        x = value.astype(jnp.int32) if jnp.issubdtype(value.dtype, jnp.integer) else jnp.round(value).astype(jnp.int32)
        start = (x // s) * s
        # another value of the same block, uniformly
        r = jnp.minimum(jnp.floor(u1 * max(s - 1, 1)).astype(jnp.int32), max(s - 2, 0))
        same = start + r + (r >= x - start).astype(jnp.int32)
        # a value outside the block, uniformly
        r2 = jnp.minimum(jnp.floor(u1 * max(d - s, 1)).astype(jnp.int32), max(d - s - 1, 0))
        outside = r2 + s * (r2 >= start).astype(jnp.int32)
        y = jnp.where(u0 < t_keep, x, jnp.where(u0 < t_block, same, outside))
        return y.astype(value.dtype)

    def log_prob(self, y, value):
        """The report's log pmf.

        Args:
          y: reports (array).
          value: the true values.

        Returns:
          ``log P[y | value]`` (``−inf`` off the domain).
        """
        y = jnp.asarray(y)
        v = jnp.asarray(value)
        s = self.block_size
        inside = (y == jnp.round(y)) & (y >= 0) & (y <= self.domain_size - 1)
        log_den = self._log_den()
        same_block = jnp.floor(y / s) == jnp.floor(v / s)
        lp = jnp.where(
            y == v, self.epsilon - log_den, jnp.where(same_block, self.epsilon - self.epsilon0 - log_den, -log_den)
        )
        return jnp.where(inside, lp, -jnp.inf)

    def cdf(self, y, value):
        """The report's CDF over the domain's indices.

        Args:
          y: reports (array).
          value: the true values.

        Returns:
          ``Pr[M(value) <= y]``.
        """
        yf = jnp.floor(jnp.asarray(y))
        v = jnp.asarray(value)
        s = self.block_size
        start = jnp.floor(v / s) * s
        total = jnp.clip(yf + 1.0, 0.0, self.domain_size)
        in_block = jnp.clip(yf - start + 1.0, 0.0, s)
        self_in = (yf >= v).astype(total.dtype)
        return (
            self.keep_probability * self_in
            + self.block_probability * (in_block - self_in)
            + self.other_probability * (total - in_block)
        )

    # -- accounting hooks -------------------------------------------------------------
    def neighbour_pairs(self, sensitivity=None):
        """Two values in different blocks (ratio e^ε) and, if |S| > 1, two in one block (e^{ε0}).

        Args:
          sensitivity: ignored.

        Returns:
          ``(values, neighbour_values)``.
        """
        s, d = self.block_size, self.domain_size
        pairs = []
        if d > s:
            pairs.append((0.0, float(s)))
        if s > 1:
            pairs.append((0.0, 1.0))
        v, w = zip(*pairs)
        return jnp.asarray(v), jnp.asarray(w)

    def hockey_stick(self, epsilon, value, neighbour_value):
        """δ(ε) = Σ_y (P(y|value) − e^ε P(y|neighbour_value))_+, summed over the d outputs.

        Args:
          epsilon: ε, any real (array broadcasting with the answers and the parameters).
          value: the answer v.
          neighbour_value: the neighbouring answer v'.

        Returns:
          δ(ε) = ∫ (p(y|v) − e^ε p(y|v'))_+ dy, of the broadcast shape.
        """
        eps = jnp.asarray(epsilon)[..., None]
        lp = self._log_probs(value)[..., None, :]
        lq = self._log_probs(neighbour_value)[..., None, :]
        # P (1 − e^{ε + log Q − log P})_+ in log space: exactly 0 where the ratio is e^ε
        out = jnp.sum(-jnp.exp(lp) * jnp.expm1(jnp.minimum(eps + lq - lp, 0.0)), axis=-1)
        return out[..., 0] if jnp.ndim(epsilon) == 0 else out

    def renyi_divergence(self, order, value, neighbour_value):
        """D_α of the two report laws (exact sum over the d outputs).

        Args:
          order: the order α > 1 (array broadcasting with the answers and the parameters).
          value: the answer v.
          neighbour_value: the neighbouring answer v'.

        Returns:
          D_α(P_v‖P_v'), of the broadcast shape.
        """
        a = jnp.asarray(order)[..., None]
        lp = self._log_probs(value)[..., None, :]
        lq = self._log_probs(neighbour_value)[..., None, :]
        out = jax.nn.logsumexp(a * lp + (1.0 - a) * lq, axis=-1) / (a[..., 0] - 1.0)
        out = jnp.maximum(out, 0.0)
        return out[..., 0] if jnp.ndim(order) == 0 else out

    # -- frequency estimation (eqs. 10–11) ---------------------------------------------
    def _ab(self):
        p, ps, pn = self.keep_probability, self.block_probability, self.other_probability
        s = self.block_size
        return p + (s - 1) * ps, s * pn

    def report_counts(self, reports):
        """Counts ``C_x`` of each output value (trailing axis d) from reports (trailing axis N).

        Args:
          reports: the reports (trailing axis N; integer values in [0, d)).

        Returns:
          The counts, trailing axis d.
        """
        reports = jnp.asarray(reports).astype(jnp.int32)
        return jnp.sum(jax.nn.one_hot(reports, self.domain_size, dtype=jnp.result_type(float)), axis=-2)

    def estimate_category_counts(self, reports):
        """Unbiased F̂_S of eq. (10) for every category (trailing axis d/|S|).

        Args:
          reports: the reports (trailing axis N; integer values in [0, d)).

        Returns:
          F̂_S, trailing axis d/|S|.

        References:
          Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
          Approach", IEEE S&P 2025, §4.4.2, eq. (10), Proposition 8.
        """
        c_x = self.report_counts(reports)
        return self._category_estimates(c_x)

    def _category_estimates(self, c_x):
        n = jnp.sum(c_x, axis=-1, keepdims=True)
        c_s = c_x.reshape(c_x.shape[:-1] + (self.num_blocks, self.block_size)).sum(-1)
        a, b = self._ab()
        return (c_s - n * b) / (a - b)

    def estimate_value_counts(self, reports):
        """Unbiased F̂_x of eq. (11) for every value (trailing axis d); needs ε0 > 0.

        Args:
          reports: the reports (trailing axis N; integer values in [0, d)).

        Returns:
          F̂_x, trailing axis d.

        References:
          Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
          Approach", IEEE S&P 2025, §4.4.2, eq. (11), Proposition 8.
        """
        c_x = self.report_counts(reports)
        n = jnp.sum(c_x, axis=-1, keepdims=True)
        f_s = jnp.repeat(self._category_estimates(c_x), self.block_size, axis=-1)
        p, ps, pn = self.keep_probability, self.block_probability, self.other_probability
        return (c_x - f_s * (ps - pn) - n * pn) / (p - ps)

    def category_count_variance(self, value_counts):
        """The variance of each category's count estimate F̂_S.

        Var(F̂_S) per category given the true value counts (trailing axis d):
        ``[F_S a(1−a) + (N − F_S) b(1−b)] / (a − b)²`` with a = p + (|S|−1)p_s, b = |S| p̄.

        Args:
          value_counts: the true value counts (trailing axis d).

        Returns:
          Var(F̂_S), trailing axis d/|S|.
        """
        f = jnp.asarray(value_counts, jnp.result_type(float))
        n = jnp.sum(f, axis=-1, keepdims=True)
        f_s = f.reshape(f.shape[:-1] + (self.num_blocks, self.block_size)).sum(-1)
        a, b = self._ab()
        return (f_s * a * (1 - a) + (n - f_s) * b * (1 - b)) / (a - b) ** 2

    def value_count_variance(self, value_counts):
        """The variance of each value's count estimate F̂_x.

        Var(F̂_x) per value given the true value counts (trailing axis d): a sum over users of
        Var(g(y_i)), g(y) = [1{y=x} − c 1{y∈S(x)}]/(p − p_s), c = (p_s − p̄)/(a − b).

        Args:
          value_counts: the true value counts (trailing axis d).

        Returns:
          Var(F̂_x), trailing axis d.
        """
        f = jnp.asarray(value_counts, jnp.result_type(float))
        n = jnp.sum(f, axis=-1, keepdims=True)
        f_s = jnp.repeat(f.reshape(f.shape[:-1] + (self.num_blocks, self.block_size)).sum(-1), self.block_size, -1)
        p, ps, pn = self.keep_probability, self.block_probability, self.other_probability
        a, b = self._ab()
        c = (ps - pn) / (a - b)
        scale = 1.0 / (p - ps) ** 2

        def var(pv, pset):
            mean = pv - c * pset
            second = (1 - 2 * c) * pv + c * c * pset
            return (second - mean**2) * scale

        out = f * var(p, a) + (f_s - f) * var(ps, a) + (n - f_s) * var(pn, b)
        return jnp.where(p > ps, out, jnp.inf)  # ε0 = 0: p = p_s, F̂_x is undefined
