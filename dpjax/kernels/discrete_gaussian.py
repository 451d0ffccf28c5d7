r"""The discrete Gaussian kernel on the integers, pmf ∝ :math:`e^{-k^2/(2σ^2)}` (Canonne, Kamath, Steinke 2020).

Closed forms: the normaliser (direct sum or its Jacobi-theta dual), the CDF from a static
table of the support (``support_radius``), the quantile by bisection on that table, the
float tier's sampler (blocks of |Z| by the inverse CDF of a 160-entry table, kept by rejection,
from whole hash words), the Gaussian pair loss threshold and the tilted sums of the Rényi closed
form (an exact sum over the support window).
"""

from __future__ import annotations

import copy
import math

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.kernels._gaussian_law import gaussian_loss_threshold, gaussian_tilted_exponent
from dpjax.kernels.base import AdditiveMechanism, safe_log
from dpjax.mechanism import default_float
from dpjax.pytree import pytree_dataclass, replace, static_field
from dpjax.validation import check_int, is_traced

__all__ = ["DiscreteGaussian"]

#: trials of the block sampler (each keeps with probability ≥ 0.398 for every σ, so all
#: 64 fail with probability < 1e-14 per record; such a record takes one fresh candidate of the
#: proposal, unconditioned — noise with the proposal's full support, never the bare answer — a
#: total-variation change below 1e-14 per record): a bounded loop, never a hang
MAX_TRIALS = 64
#: the block sampler's blocks (:func:`_block_rejection`): |Z| ∈ [qm, qm + m) for q < BLOCKS, m = 2^b ∈ (σ/16, σ/8]
#: (m = 1 below σ = 16), so that they reach 10σ (P(|Z| ≥ 10σ) < 10^-22)
BLOCKS = 160
#: the block table's length (BLOCKS thresholds padded with zeros)
TABLE_SIZE = 256
#: the block table's guide: buckets of relative width 2^-GUIDE_BITS of a word, each holding at most GUIDE_SPAN
#: thresholds (:func:`_guide`)
GUIDE_BITS = 5
GUIDE_SPAN = 2
#: the largest σ of the float tier, per float dtype: 2^(mantissa − 2) (float32: 2^21, where P(|Z| ≥ 2^24), the
#: noise a float32 cannot carry exactly, is below 10^-15), at most 2^34 (the block offset s is one 31-bit word)
MAX_SIGMA_BITS = 34


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


def _radius(max_sigma: float) -> int:
    """⌈14σ⌉ + 14: beyond it the mass is below 1e-40."""
    return int(math.ceil(14 * max_sigma)) + 14


def _exponent(sigma):
    """⌊log2 σ⌋ from σ's float32 exponent bits (σ ≥ 2^-20 is normal)."""
    return (jax.lax.bitcast_convert_type(jnp.asarray(sigma, jnp.float32), jnp.int32) >> 23) - 127


def _table(rho, m0):
    """The uint32 thresholds T[j] = ⌊2^32 A_j⌋ of the blocks' proposal law, A_j = Σ_{q ≥ j} M_q / Σ_q M_q for
    1 ≤ j < :data:`BLOCKS` (T[0] unused; 0 past the blocks, up to :data:`TABLE_SIZE`), M_q = 2 e^{−(qρ)²/2} for
    q ≥ 1 and M_0 = ``m0``; computed in float64 (relative error ~10^-15 against the thresholds' 2^-32) whatever the
    user's JAX config (ρ may be traced)."""
    with jax.enable_x64(True):
        x = jnp.arange(BLOCKS, dtype=jnp.float64) * jnp.asarray(rho, jnp.float64)
        weight = jnp.where(jnp.arange(BLOCKS) == 0, m0, 2.0 * jnp.exp(-0.5 * x * x))
        tail = jnp.cumsum(weight[::-1])[::-1]  # (summed from the smallest weight)
        t = jnp.minimum(jnp.floor(tail[1:] / tail[0] * 2.0**32), 2.0**32 - 1).astype(jnp.uint32)
        pad = jnp.zeros(TABLE_SIZE - BLOCKS, jnp.uint32)
        return jnp.concatenate([jnp.full(1, 2**32 - 1, jnp.uint32), t, pad])


def _block_params(sigma):
    r"""``(b, tables, index, gap, half)`` of the block sampler (:func:`_block_rejection`): the block width m = 2^b,
    b = max(0, ⌊log2 σ⌋ − 3) ≤ 31 (m ∈ (σ/16, σ/8], or m = 1 below σ = 16), so that ρ = m/σ ≥ 1/16 and the
    blocks reach 10σ; the proposal tables (:func:`_table`) and each record's ``index`` into them; the gap ρ² − ρ₀²
    between the target's and the proposal's block scale; ``half``: whether M_0 = 2 (k = 0 is kept with
    probability ½). The weight of |Z| is 1 at 0 and 2e^{−k²/(2σ²)} beyond, so M_q = 2e^{−(qρ₀)²/2} ≥ every weight
    of block q when ρ₀ ≤ ρ (M_0 = 1 when m = 1). One σ: its own table (ρ₀ = ρ, computed in float64 from σ, gap 0).
    Per-record σ: six fixed tables, ρ₀ = 1, ½, ¼, ⅛, 1/16 for σ < 1, [1, 2), [2, 4), [4, 8), [8, 16) (m = 1,
    ρ = 1/σ ∈ (ρ₀, 2ρ₀]) and ρ₀ = 1/16, M_0 = 2 from σ = 16 (ρ ∈ (1/16, 1/8]): a block kept with probability
    ≥ ρ₀/ρ ≥ ½ (≥ 0.398 below σ = 1)."""
    e = _exponent(sigma)
    b = jnp.clip(e - 3, 0, 31)
    if jnp.ndim(sigma) == 0:
        with jax.enable_x64(True):
            rho = _pow2(b, jnp.float64) / jnp.asarray(sigma, jnp.float64)
        return b, _table(rho, jnp.where(b == 0, 1.0, 2.0))[None], 0, jnp.float32(0), b > 0
    index = jnp.clip(e + 1, 0, 5)
    tables = jnp.stack([_table(2.0 ** -min(o, 4), 1.0 if o < 5 else 2.0) for o in range(6)])
    rho = _pow2(b, jnp.float32) / jnp.asarray(sigma, jnp.float32)
    rho0 = _pow2(4 - jnp.minimum(index, 4), jnp.float32) * jnp.float32(1 / 16)
    return b, tables, index, (rho - rho0) * (rho + rho0), index == 5


def _pow2(b, dt):
    """2^b in ``dt``, exactly, for 0 ≤ b ≤ 31."""
    return (jnp.uint32(1) << jnp.asarray(b, jnp.uint32)).astype(dt)


def _buckets():
    """(bases, rows): the guide's first row of each level l = 0 … 32 of a word w (l leading zeros: w ∈ [2^(31 − l),
    2^(32 − l)), l = 32 for w = 0), each level cut into 2^min(G, 31 − l) buckets of equal width
    (G = :data:`GUIDE_BITS`: relative width 2^-G, or single words), and the number of rows."""
    sizes = [1 << min(GUIDE_BITS, 31 - level) for level in range(32)] + [1]
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32), int(sum(sizes))


def _bucket(w):
    """The guide row of the uint32 words ``w`` (:func:`_buckets`)."""
    bases, _ = _buckets()
    level = jax.lax.clz(w).astype(jnp.int32)
    shift = jnp.maximum(31 - GUIDE_BITS - level, 0).astype(jnp.uint32)
    within = (w >> shift).astype(jnp.int32) & ((1 << jnp.minimum(GUIDE_BITS, jnp.maximum(31 - level, 0))) - 1)
    return jnp.asarray(bases)[level] + within


def _guide(tables):
    """Row r of each table: #{j ≥ 1 : T[j] > e_r}, the block of the largest word e_r of bucket r (:func:`_buckets`);
    the block of a word w of the bucket is that plus #{1 ≤ d ≤ :data:`GUIDE_SPAN` : w < T[row + d]} (no bucket
    holds more than GUIDE_SPAN thresholds: buckets of relative width 2^-5 and blocks whose law is log-concave, its
    hazard never below 1/30; tested for every table the sampler builds)."""
    bases, rows = _buckets()
    level = np.searchsorted(bases, np.arange(rows), side="right") - 1
    width = np.where(level < 32, 2.0 ** np.maximum(31 - GUIDE_BITS - level, 0), 1.0)
    start = np.where(level < 32, 2.0 ** (31 - level) + (np.arange(rows) - bases[level]) * width, 0.0)
    ends = jnp.asarray((start + width - 1).astype(np.uint32))
    return jnp.sum(ends[:, None] < tables[..., None, 1:], axis=-1, dtype=jnp.int32)


def _block_candidate(w0, w1, b, tables, index, dt):
    """(q, s, k, z): the block q = max{j : w0 < T[j]} of the record's table T = ``tables[index]`` (P(q ≥ j) = T[j]/2^32
    exactly), the offset s = the top b bits of w1, |Z|'s candidate k = q 2^b + s and z = ±k with the sign of w1's
    lowest bit (independent of s: b ≤ 31), in ``dt`` (exact: |k| < 2^(mantissa + 1) for σ within the float tier's
    bound)."""
    q0 = _guide(tables)[index, _bucket(w0)]
    q = q0 + sum((w0 < tables[index, q0 + d]).astype(jnp.int32) for d in range(1, GUIDE_SPAN + 1))
    s = jnp.where(b > 0, w1 >> (32 - b).astype(jnp.uint32), jnp.uint32(0))
    k = q.astype(dt) * _pow2(b, dt) + s.astype(dt)
    return q, s, k, jnp.where((w1 & 1) == 1, -k, k)


def _keep_threshold(q, s, b, sigma, gap, half, dt):
    """(always, threshold): the candidate of block q, offset s is kept when ``always`` or a uniform uint32 word is
    below ``threshold``: with probability p = w(k)/M_q (:func:`_block_params`) = e^{−s(2qm + s)/(2σ²) − q²·gap/2},
    and ½ at k = 0 when ``half``, computed in ``dt``; threshold = ⌊2^32 p⌋ (exact for p ≥ 2^-8: p has 24 bits)."""
    sf, qf = s.astype(dt), q.astype(dt)
    qm, sigma = qf * _pow2(b, dt), jnp.asarray(sigma, dt)
    p = jnp.exp(-(sf * (qm + qm + sf)) * (0.5 / (sigma * sigma)) - (qf * qf) * (0.5 * jnp.asarray(gap, dt)))
    p = jnp.where((q == 0) & (s == 0) & half, 0.5, p)
    return p >= 1.0, (p * 2.0**32).astype(jnp.uint32)


def _block_rejection(uniform, sigma):
    r"""The float tier's discrete Gaussian: |Z| proposed block by block and kept by rejection, from whole hash words
    (no float uniform: 23 bits cannot resolve its law). Trial j takes the hash words (w0, w1) of counter 2j: the
    block q of width m = 2^b by the inverse CDF of the blocks' proposal law (a 160-entry table, :func:`_block_params`),
    the offset s ∈ [0, m) uniform and the sign (:func:`_block_candidate`); the first word of counter 2j + 1 keeps the
    candidate with probability w(k)/M_q (:func:`_keep_threshold`), so that P(k) ∝ e^{−k²/(2σ²)}. One σ: a trial is
    kept with probability > 0.95, and below σ = 16 (m = 1) every candidate is kept: one hash per record, no loop;
    per-record σ: kept with probability ≥ 0.398."""
    dt = jnp.promote_types(uniform.dtype, jnp.float32)
    b, tables, index, gap, half = _block_params(sigma)

    def trial(stream, j, keep):
        w0, w1 = stream.words(2 * j)
        q, s, _, z = _block_candidate(w0, w1, b, tables, index, dt)
        if not keep:
            return z
        always, threshold = _keep_threshold(q, s, b, sigma, gap, half, dt)
        return jnp.where(always | (stream.words(2 * j + 1)[0] < threshold), z, jnp.nan)

    def rejection():
        stream = _uncached(uniform)
        return _first_kept(
            lambda j: trial(stream, j, True), lambda: trial(_uncached(uniform), jnp.uint32(MAX_TRIALS), False)
        )

    if jnp.ndim(sigma):
        return rejection().astype(uniform.dtype)
    # (each branch with its own copy of the stream: its cached hash words must not leak from one traced branch
    # into the other)
    return jax.lax.cond(b == 0, lambda: trial(_uncached(uniform), 0, False), rejection).astype(uniform.dtype)


def _uncached(uniform):
    """A copy of the uniform stream with an empty cache of hash words (see :func:`_guided_noise`)."""
    fresh = copy.copy(uniform)
    fresh._cache = {}
    return fresh


def _first_kept(trial, fallback):
    """Each record's first kept candidate of ``trial(j)`` (the candidates, NaN where a record keeps none: one output,
    which XLA fuses into one loop, where a (candidates, kept) pair would not) over j = 0, 1, … until every record has
    one or :data:`MAX_TRIALS` trials ran; a record with none takes ``fallback()``'s (a fresh proposal candidate from
    uniforms past the trials', unconditioned: computed only when some record needs it)."""

    def cond(state):
        j, out = state
        return jnp.any(jnp.isnan(out)) & (j < MAX_TRIALS)

    def body(state):
        j, out = state
        return j + 1, jnp.where(jnp.isnan(out), trial(j), out)

    _, out = jax.lax.while_loop(cond, body, (jnp.uint32(1), trial(jnp.uint32(0))))
    return jax.lax.cond(jnp.any(jnp.isnan(out)), lambda o: jnp.where(jnp.isnan(o), fallback(), o), lambda o: o, out)


def max_float_sigma(dtype) -> float:
    """The largest σ the float tier samples with noise of ``dtype``: 2^(mantissa − 2), at most 2^34
    (:data:`MAX_SIGMA_BITS`)."""
    return 2.0 ** min(np.finfo(jnp.promote_types(dtype, jnp.float32)).nmant - 2, MAX_SIGMA_BITS)


def _stream_dtype(values):
    """The float dtype of a release's uniforms (and noise) for ``values``: theirs, or the default float."""
    dt = jnp.result_type(values)
    return dt if jnp.issubdtype(dt, jnp.floating) else default_float()


@pytree_dataclass
class DiscreteGaussian(AdditiveMechanism):
    r"""Discrete Gaussian noise on the integers, pmf ∝ :math:`e^{-k^2/(2σ^2)}`.

    The float tier (``numerics="float"``) samples by the block sampler (:func:`_block_rejection`),
    from whole 32-bit hash words, not float uniforms (whose 23 bits cannot resolve the law): |Z| is
    proposed as k = q·2^b + s, 2^b ∈ (σ/16, σ/8] (1 below σ = 16), the block q by the inverse CDF of
    a 160-entry table of a proposal law over blocks (thresholds T_j = ⌊2^32 A_j⌋ computed in float64,
    against one uint32 word; for one σ the table is σ's own, per-record σ pick one of six fixed tables,
    :func:`_block_params`), the offset s uniform on [0, 2^b) (b bits of a second word, whose lowest bit
    is the sign), and k is kept when a third word is below κ(q, s) = ⌊2^32 p̃⌋, p̃ the float32 keep
    probability, the ratio of |Z|'s weight at k to the proposal's in block q (:func:`_keep_threshold`;
    one σ below 16: every candidate kept). Its law is exactly
    P(|Z| = k) ∝ (T_q − T_{q+1}) κ(q, s) (the sign exactly fair), which differs from the discrete
    Gaussian by the 2^-32 rounding of the thresholds (total variation below 10^-7), the float32
    rounding of p̃ (relative error a few 10^-7 at most, the total variation below it), the blocks'
    end at 10σ and the 64-trial bound (below 10^-20): within total variation 10^-6 of the discrete
    Gaussian at every σ the float tier serves, σ ≤ 2^21 for float32 noise, 2^34 for float64
    (:func:`max_float_sigma`; a larger σ is refused: float32 noise could not carry the integers).
    The rejection runs inside a ``while_loop`` (vmap-safe: until every record keeps a candidate, at
    most :data:`MAX_TRIALS`; a trial keeps with probability > 0.95 for one σ, ≥ 0.398 per record).
    ``support_radius`` (static) bounds the table used by :meth:`cdf`; it defaults to ⌈14σ⌉ + 14,
    beyond which the mass is below 1e-40. The exact tier (``numerics="exact"``, :meth:`exact_lattice`)
    samples with integers only (Canonne, Kamath, Steinke 2020, Algorithm 3).

    Args:
      sigma: σ > 0, one for the batch or one per record.
      support_radius: the CDF table's radius (static); default ⌈14σ⌉ + 14.

    Returns:
      The mechanism (a pytree: ``sigma`` its leaf).

    Raises:
      ValueError: a σ that is not positive and finite; at release, a σ beyond the float tier's bound for
        the release's float dtype.

    References:
      Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020
      (Algorithm 3: the exact tier's sampler; Prop. 5: the Rényi bound).
    """

    sigma: jax.Array
    support_radius: int | None = static_field(default=None)
    discrete = True
    scale_name = "sigma"

    def __post_init__(self):
        super().__post_init__()
        if self.support_radius is None and not is_traced(self.sigma):
            object.__setattr__(self, "support_radius", _radius(float(np.max(self.sigma))))
        elif self.support_radius is not None:
            check_int("support_radius", self.support_radius, minimum=1)

    def validate_values(self, values) -> None:
        """Also refuses a σ beyond the float tier's bound for the release's float dtype (:func:`max_float_sigma`).

        Args:
          values: the values to release (their dtype sets the float tier's bound).

        Raises:
          ValueError: σ exceeds the float tier's bound for the values' dtype (and the base class's checks).
        """
        super().validate_values(values)
        limit = max_float_sigma(_stream_dtype(values))
        if not is_traced(self.sigma) and np.any(np.asarray(self.sigma, np.float64) > limit):
            raise ValueError(
                f"sigma must be at most {limit:.0f} for a float release in {_stream_dtype(values)} (its "
                f"integer noise must stay exact there), got {self.sigma!r}; the exact tier "
                "(numerics='exact') samples any σ"
            )

    def traced_checks(self, values):
        limit = max_float_sigma(_stream_dtype(values))
        return super().traced_checks(values) + [
            (jnp.all(jnp.asarray(self.sigma) <= limit), f"sigma must be at most {limit:.0f} for a float release")
        ]

    def with_scale(self, scale, *, max_scale=None):
        """The kernel at σ = ``scale``; the support table sized for ``max_scale`` (or for
        ``scale`` itself when it is concrete; otherwise the current table is kept).

        Args:
          scale: the new σ (array, may be traced).
          max_scale: the largest σ later given under tracing (concrete), or None.

        Returns:
          A :class:`DiscreteGaussian` at σ = ``scale``.
        """
        radius = self.support_radius
        if max_scale is not None:
            radius = _radius(float(np.max(max_scale)))
        elif not is_traced(scale):
            radius = _radius(float(np.max(scale)))
        return replace(self, sigma=scale, support_radius=radius)

    def _radius_or_raise(self) -> int:
        if self.support_radius is None:
            raise ValueError("support_radius must be given for a DiscreteGaussian built from a traced sigma")
        return self.support_radius

    def noise_log_prob(self, n):
        n = jnp.asarray(n)
        lp = -(n**2) / (2.0 * self.sigma**2) - _dg_log_normalizer(self.sigma)
        return jnp.where(n == jnp.round(n), lp, -jnp.inf)

    def _table(self):
        r = self._radius_or_raise()
        k = jnp.arange(-r, r + 1, dtype=jnp.result_type(float))
        s = jnp.asarray(self.sigma)[..., None]
        logw = -(k**2) / (2.0 * s**2) - _dg_log_normalizer(self.sigma)[..., None]
        return r, jnp.cumsum(jnp.exp(logw), axis=-1)

    def noise_cdf(self, n):
        k = jnp.floor(jnp.asarray(n))
        r, cum = self._table()
        idx = jnp.clip(k + r, 0, 2 * r).astype(jnp.int32)
        if cum.ndim == 1:
            vals = cum[idx]
        else:
            vals = jnp.take_along_axis(
                jnp.broadcast_to(cum, jnp.broadcast_shapes(idx.shape, cum.shape[:-1]) + cum.shape[-1:]),
                idx[..., None],
                axis=-1,
            )[..., 0]
        return jnp.where(k < -r, 0.0, jnp.where(k >= r, 1.0, jnp.minimum(vals, 1.0)))

    def noise_log_cdf(self, n):
        # log of a table (0 beyond the support): gradient-safe at 0
        return safe_log(self.noise_cdf(n))

    def noise_icdf(self, u):
        """Smallest integer k with F(k) ≥ u: bisection on the CDF table (⌈log2(2r + 2)⌉ + 1 steps).

        Args:
          u: probabilities in [0, 1].

        Returns:
          The integer quantiles (as floats of ``u``'s dtype).

        Raises:
          ValueError: ``support_radius`` is unset (σ was traced at construction).
        """
        r = float(self._radius_or_raise())
        steps = int(math.ceil(math.log2(2 * r + 2))) + 1
        lo = jnp.full(jnp.shape(u), -r - 1.0, jnp.result_type(u))
        hi = jnp.full(jnp.shape(u), r, jnp.result_type(u))

        def body(_, state):
            lo, hi = state
            mid = jnp.floor((lo + hi) / 2.0)
            ok = self.noise_cdf(mid) >= u
            active = hi - lo > 1.0
            return jnp.where(active & ~ok, mid, lo), jnp.where(active & ok, mid, hi)

        _, hi = jax.lax.fori_loop(0, steps, body, (lo, hi))
        return hi

    def sample_noise(self, uniform):
        # the block sampler, within total variation 10^-6 of the law (class docstring)
        return _block_rejection(
            uniform, jnp.broadcast_to(self.sigma, uniform.shape) if jnp.ndim(self.sigma) else self.sigma
        )

    def renyi_divergence_bound(self, order, value, neighbour_value):
        """An upper bound on D_α of the discrete Gaussians at integer shifts: α‖v − v'‖²/(2σ²), the
        continuous Gaussian's value (Canonne, Kamath, Steinke 2020, Prop. 5: the theta-function sum
        is largest at an integer centre), coordinate by coordinate in any dimension (L2 norm).

        Args:
          order: the Rényi order α > 1.
          value: the answer (integer-valued).
          neighbour_value: the neighbouring answer (integer-valued).

        Returns:
          The bound α (v − v')²/(2σ²), broadcast over the arguments.

        References:
          Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020
          (arXiv:2004.00010), Proposition 5.
        """
        d = jnp.asarray(value) - jnp.asarray(neighbour_value)
        return jnp.asarray(order) * d * d / (2.0 * self.sigma**2)

    def noise_reach(self):
        return 8.6 * jnp.asarray(self.sigma) + 1.0

    def noise_far(self):
        return 40.0 * jnp.asarray(self.sigma)

    def noise_loss_threshold(self, t, v, nv, lo, hi, decreasing):
        y = gaussian_loss_threshold(self.sigma, t, v, nv)
        return jnp.where(v < nv, jnp.ceil(y) - 0.5, jnp.floor(y) + 0.5)

    def noise_tilted_log_integral(self, lo, hi, v, nv, alpha):
        """Exact sum over the support window around the tilted centre m = αv + (1−α)v'.

        Args:
          lo: the piece's lower end (exclusive).
          hi: its upper end (inclusive).
          v: the answer.
          nv: the neighbouring answer.
          alpha: the Rényi order α > 1.

        Returns:
          The log of the sum over the integers in (lo, hi]; −∞ for an empty piece.

        Raises:
          ValueError: ``support_radius`` is unset (σ was traced at construction).
        """
        r = self._radius_or_raise()
        m, expo = gaussian_tilted_exponent(self.sigma, v, nv, alpha)
        k = jnp.round(m)[..., None] + jnp.arange(-r, r + 1, dtype=jnp.result_type(m))
        inside = (k > lo[..., None]) & (k <= hi[..., None])
        sig = jnp.asarray(self.sigma)[..., None]
        lt = self.noise_log_prob(0.0)[..., None] - (k - m[..., None]) ** 2 / (2.0 * sig**2)
        some = jnp.any(inside, axis=-1)
        # an empty piece: −inf, with a zero gradient (all −inf would make logsumexp's NaN)
        lse = jax.nn.logsumexp(jnp.where(inside | ~some[..., None], lt, -jnp.inf), axis=-1)
        return jnp.where(some, expo + lse, -jnp.inf)

    def exact_lattice(self):
        """The exact tier's mechanism (:mod:`dpjax.exact.lattice`): this law sampled with integers only
        (σ² rounded up to an integer; on 2^jℤ for σ > 2^12)."""
        from dpjax.exact.lattice import gaussian_lattice

        return gaussian_lattice(self.sigma, type(self), integer=True)
