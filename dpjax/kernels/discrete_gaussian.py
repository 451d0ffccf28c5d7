r"""The discrete Gaussian kernel on the integers, pmf ∝ :math:`e^{-k^2/(2σ^2)}` (Canonne, Kamath, Steinke 2020).

Closed forms: the normaliser (direct sum or its Jacobi-theta dual), the CDF from a static
table of the support (``support_radius``), the quantile by bisection on that table, the
samplers (one σ: the inverse CDF of the |Z| tail table, counted or through a guide indexed by
the uniform's float bits; one σ beyond the table: rejection from rounded continuous Gaussians;
per-record σ: CKS rejection), the Gaussian pair loss threshold and the tilted sums of the Rényi
closed form (an exact sum over the support window).
"""

from __future__ import annotations

import copy
import functools
import math

import jax
import jax.numpy as jnp
import jax.scipy.special
import numpy as np

from dpjax.kernels._gaussian_law import gaussian_loss_threshold, gaussian_tilted_exponent
from dpjax.kernels.base import AdditiveMechanism, safe_log
from dpjax.pytree import pytree_dataclass, replace, static_field
from dpjax.validation import check_int, is_traced

__all__ = ["DiscreteGaussian"]

#: trials of the rejection samplers (each accepts with probability > 0.4 for every σ, so all
#: 64 fail with probability < 1e-14 per record; such a record takes one fresh candidate of the
#: proposal, unconditioned — noise with the proposal's full support, never the bare answer — a
#: total-variation change below 1e-14 per record): a bounded loop, never a hang
MAX_TRIALS = 64
#: one σ whose support table has at most this radius (σ ≲ 75 000) is sampled by inverse CDF instead
ICDF_MAX_RADIUS = 1 << 20
#: a support table of at most this radius (σ ≲ 5.8) is searched by counting: one comparison per entry, no look-up
LINEAR_MAX_RADIUS = 95
#: the float inverse CDF's guide (:func:`_guide_shape`): rows of at most GUIDE_STEPS − 1 thresholds where at most
#: GUIDE_MAX_ROWS rows allow it (σ ≲ 3·10^4 for float32 uniforms), more beyond
GUIDE_STEPS = 3
GUIDE_MAX_ROWS = 1 << 20
#: one σ beyond the inverse CDF's table and at least this large draws rounded continuous Gaussians (two per trial,
#: each kept with probability ≥ 0.9993: :func:`_rounded_gaussian`); smaller σ, and per-record σ, CKS rejection
ROUNDED_MIN_SIGMA = 6.0e4


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


def _tail_table(sigma, r, dt):
    """a[j] = P(|Z| ≥ j), j = 0 … r + 2, in ``dt`` (a[0] = 1, a[r + 2] = 0; the tail summed from its smallest term):
    |Z| = max{j : u < a[j]} for a uniform u."""
    sigma = jnp.asarray(sigma, dt)
    k = jnp.arange(1, r + 2, dtype=dt)
    tail = jnp.cumsum(jnp.exp(-(k * k) * (0.5 / sigma**2))[::-1])[::-1]  # Σ_{i ≥ j} w_i
    return jnp.concatenate([jnp.ones(1, dt), 2.0 * tail / (1.0 + 2.0 * tail[0]), jnp.zeros(1, dt)])


def _signed(uniform, c):
    """±|Z| from the count ``c`` = |Z| and the sign uniform ``uniform(1)``."""
    mag = c.astype(uniform.dtype)
    return jnp.where(uniform(1) < 0.5, -mag, mag)


def _full_count(a, u):
    """max{j : u < a[j]} for the non-increasing table ``a`` (a[0] = 1 > u, a[-1] = 0), by a full search."""
    return (a.shape[0] - 1 - jnp.searchsorted(a[::-1], u, side="right")).astype(jnp.int32)


def _guide_layout(dtype):
    """(mantissa bits, exponent bias, levels L, unsigned integer type) of a float32/float64 uniform: the guide's
    levels cover [2^-L, 1), L = mantissa bits + 2, so that the smallest uniform of :mod:`dpjax.random`,
    (0 + ½)·2^-(mantissa bits) = 2^-(L − 1), lies in a bucket above the first."""
    fi = jnp.finfo(dtype)
    return fi.nmant, fi.maxexp - 1, fi.nmant + 2, jnp.dtype(f"uint{fi.bits}")


@functools.lru_cache(maxsize=64)
def _guide_shape(r, dtype, n):
    """(G, steps) for a table of radius ``r`` and ``n`` records: buckets of G mantissa bits and the
    thresholds a row holds to settle every bucket. A bucket of the level [2^-(l + 1), 2^-l) is 2^-(l + 1 + G) wide;
    its thresholds' gaps P(|Z| = j) = h_j P(|Z| ≥ j) ≥ h 2^-(l + 1), h the hazard at the level's top (it does not
    decrease: the law is log-concave), so it holds at most ⌊2^-G/h⌋ + 1 of them; 1/h ≤ σΦ̄(x)/φ(x) ≤ 0.78σ for the
    two top levels (x ≈ 0 … 0.67; less below), 0.85σ with a margin for the discrete table and its rounding;
    σ ≤ (r − 14)/14 at the default radius. The L·2^G rows cost about what a record's comparisons cost, so they are
    kept near √(L n σ/4), the fewest rows plus comparisons (n·L·0.85σ/2^G), and at most :data:`GUIDE_MAX_ROWS`."""
    sigma = max((r - 14) / 14, 1.0)
    levels = _guide_layout(dtype)[2]
    most = int(math.log2(max(min(GUIDE_MAX_ROWS, math.sqrt(levels * n * sigma / 4)), levels) // levels))
    bits = min(max(math.ceil(math.log2(0.85 * sigma / (GUIDE_STEPS - 1))), 0), most)
    return bits, int(0.85 * sigma / 2.0**bits) + 1


def _guide(a, r, sigma, dtype, n):
    """(rows, ok) of the guide of the table ``a`` (radius ``r``, σ = ``sigma``) for ``n`` ``dtype`` uniforms
    (:func:`_guided_count`): row q holds c(s_q) = max{j : s_q < a[j]} for s_q the smallest float of bucket q (bucket
    0's start is 0: it takes every u below 2^-L too) and the thresholds a[c(s_q)], a[c(s_q) − 1], …; ``ok`` when
    every bucket q ≥ 1 spans at most as many thresholds as a row holds."""
    bits, steps = _guide_shape(r, dtype, n)
    nmant, bias, levels, ut = _guide_layout(dtype)
    shift, base, size = nmant - bits, (bias - levels) << bits, levels << bits
    starts = ((np.arange(1, size, dtype=np.uint64) + np.uint64(base)) << np.uint64(shift)).astype(ut).view(dtype)
    # c(s) for the starts of buckets 1 …, then for the largest float below 1 (no u is above it)
    first = _answers(a, jnp.asarray(np.append(starts, np.nextafter(dtype.type(1), dtype.type(0)))), sigma)
    # a u of bucket q ≥ 1 has c(s_q) ≥ c(u) ≥ c(s_(q+1)): settled when those differ by at most `steps`
    ok = jnp.max(first[:-1] - first[1:]) <= steps
    first = jnp.concatenate([_full_count(a, jnp.zeros(1, dtype)), first[:-1]])  # and c(0) for bucket 0
    rows = jnp.concatenate([first[:, None].astype(dtype), a[jnp.maximum(first[:, None] - np.arange(steps), 0)]], axis=1)
    return rows, ok


def _answers(a, s, sigma):
    """c(s) = max{j : s < a[j]} for 0 < s < 1: the continuous guess ⌊½ − σΦ⁻¹(s/2)⌋ (P(|Z| ≥ j) ≈ 2Φ(−(j − ½)/σ))
    moved by two steps against the table, checked, and the full search when one is not settled."""
    top = a.shape[0] - 1  # c(s) ∈ [0, top − 1]
    guess = jnp.floor(0.5 - jnp.asarray(sigma, s.dtype) * jax.scipy.special.ndtri(0.5 * s))
    c = jnp.clip(jnp.where(jnp.isfinite(guess), guess, 0), 0, top - 1).astype(jnp.int32)
    for _ in range(2):
        c = jnp.where(s < a[c + 1], jnp.minimum(c + 1, top - 1), jnp.where(s >= a[c], jnp.maximum(c - 1, 0), c))
    done = jnp.all((s < a[c]) & (s >= a[c + 1]))
    return jax.lax.cond(done, lambda: c, lambda: _full_count(a, s))


def _guided_count(rows, u, r, n):
    """max{j : u < a[j]} from the guide's ``rows`` (:func:`_guide` for ``n`` records), for the u of buckets q ≥ 1 and
    u = 0 (the uniforms of :mod:`dpjax.random`): c(s_q) − #{i : u ≥ a[c(s_q) − i]}."""
    bits, _ = _guide_shape(r, u.dtype, n)
    nmant, bias, levels, ut = _guide_layout(u.dtype)
    shift, base, size = nmant - bits, (bias - levels) << bits, levels << bits
    bucket = jax.lax.bitcast_convert_type(u, ut) >> ut.type(shift)
    bucket = bucket.astype(jnp.int32 if ut.itemsize == 4 else jnp.int64)
    row = rows[jnp.clip(bucket - base, 0, size - 1)]
    return row[..., 0].astype(jnp.int32) - jnp.sum(u[..., None] >= row[..., 1:], axis=-1, dtype=jnp.int32)


def _guided_noise(uniform, a, r, sigma):
    """±|Z|, |Z| = max{j : u < a[j]} for u = ``uniform(0)`` and the non-increasing table ``a`` (a[0] = 1, a[-1] = 0):
    the same map as :func:`_full_count`, through a guide indexed by u's float bits — the exponent and the top G
    mantissa bits (:func:`_guide_shape`): buckets of one relative width, like the Gaussian tail's — each row the
    bucket's largest answer and the thresholds below it (:func:`_guide`, :func:`_guided_count`). A table whose
    buckets span more thresholds than a row holds (a ``support_radius`` below the default for σ), and uniforms other
    than float32/float64, take the full search."""
    dt = jnp.dtype(uniform.dtype)
    if dt not in (jnp.float32, jnp.float64):
        return _signed(uniform, _full_count(a, uniform(0)))
    n = math.prod(uniform.shape)
    rows, ok = _guide(a, r, sigma, dt, n)
    # each branch draws its own uniforms (a fresh copy of the stream: its cached hash words must not leak from one
    # traced branch into the other); the guided count inside the branch stays one fused pass over the records (a
    # whole-batch check of the records after it would cost a second pass)
    def guided():
        stream = _uncached(uniform)
        return _signed(stream, _guided_count(rows, stream(0), r, n))

    def full():
        stream = _uncached(uniform)
        return _signed(stream, _full_count(a, stream(0)))

    return jax.lax.cond(ok, guided, full)


def _uncached(uniform):
    """A copy of the uniform stream with an empty cache of hash words (see :func:`_guided_noise`)."""
    fresh = copy.copy(uniform)
    fresh._cache = {}
    return fresh


def _cks_rejection(uniform, sigma):
    """Canonne, Kamath, Steinke (2020), Algorithm 3: discrete Laplace(⌊σ⌋ + 1) candidates, each kept with probability
    exp(−(|y| − σ²/t)²/(2σ²)), trial after trial until every record has one (at most :data:`MAX_TRIALS`)."""
    t = jnp.floor(sigma) + 1.0
    centre, inv_two_var = sigma**2 * (1.0 / t), 1.0 / (2.0 * sigma**2)  # no per-record division

    def candidate(stream, j):  # a discrete Laplace(t) candidate from two uniforms
        return jnp.floor(-t * jnp.log(stream(3 * j))) - jnp.floor(-t * jnp.log(stream(3 * j + 1)))

    def trial(j):
        y = candidate(uniform, j)
        accept_log = -((jnp.abs(y) - centre) ** 2) * inv_two_var
        return jnp.where(jnp.log(uniform(3 * j + 2)) < accept_log, y, jnp.nan)

    return _first_kept(trial, lambda: candidate(_uncached(uniform), jnp.uint32(MAX_TRIALS)))


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


def _rounded_gaussian(uniform, sigma):
    r"""The discrete Gaussian of one large σ by rejection from the rounded continuous Gaussian: x ~ N(0, σ²), k = ⌊x + ½⌋,
    d = x − k ∈ [−½, ½), kept with probability exp(−(k² − x²)/(2σ²))/C. Then P(k, kept) = ∫ over k's cell of
    φ_σ(x) e^{−(k² − x²)/(2σ²)} dx / C = e^{−k²/(2σ²)} / (σ√(2π) C): in exact arithmetic proportional to the pmf
    for |k| ≤ 40σ (beyond, mass below e^{−800}: rejected). Run on float uniforms it is only an approximation: x takes
    one value per uniform (2^23 of them for float32), so at large σ some integers are never drawn and the law's
    total-variation distance from the discrete Gaussian grows with σ (the exact tier, ``numerics="exact"``, has no
    such error). C = exp((40σ + ¼)/(2σ²)) bounds x² − k² = 2kd + d² ≤ |k| + ¼ there, so
    a candidate is kept with probability ≥ exp(−(40σ + ¼)/σ²) (≥ 0.9993 at σ ≥ :data:`ROUNDED_MIN_SIGMA`), that is
    e^a with a ∈ [−7·10^-4, 0], taken as 1 + a + a²/2 (off by |a|³/6 < 6·10^-11, far below a float32 uniform's
    resolution; no logarithm per candidate). One trial is two candidates, each from one hash (the inverse normal CDF
    of one uniform, its keep decided by the other; no trigonometry, which costs twice the inverse error function on a
    CPU), the first kept one taken: records with both rejected (probability ≤ 5·10^-7) take further trials."""
    inv_two_var = 0.5 / (sigma * sigma)
    log_c = (40.0 * sigma + 0.25) * inv_two_var

    def trial(j):
        out = jnp.nan
        for i in (4 * j + 2, 4 * j):  # candidate i: x = σ √2 erf⁻¹(2u_i − 1) (u = 0: x = −∞, rejected), kept by u_{i+1}
            x = (sigma * math.sqrt(2.0)) * jax.lax.erf_inv(2.0 * uniform(i) - 1.0)
            k = jnp.floor(x + 0.5)
            d = x - k  # (exact: x and k within ½)
            a = d * (k + k + d) * inv_two_var - log_c  # log of the keep probability, in [−2 log C, 0]
            out = jnp.where((jnp.abs(k) <= 40.0 * sigma) & (uniform(i + 1) < 1.0 + a * (1.0 + a * 0.5)), k, out)
        return out

    def fallback():  # the rounded Gaussian itself, from a uniform past the trials'
        stream = _uncached(uniform)
        x = (sigma * math.sqrt(2.0)) * jax.lax.erf_inv(2.0 * stream(4 * jnp.uint32(MAX_TRIALS)) - 1.0)
        return jnp.clip(jnp.floor(x + 0.5), -40.0 * sigma, 40.0 * sigma)

    return _first_kept(trial, fallback)


@pytree_dataclass
class DiscreteGaussian(AdditiveMechanism):
    r"""Discrete Gaussian noise on the integers, pmf ∝ :math:`e^{-k^2/(2σ^2)}` (Canonne, Kamath, Steinke 2020).

    Sampled exactly (idealized arithmetic): one σ with a support table of radius at most
    :data:`ICDF_MAX_RADIUS` (σ ≲ 75 000) by the inverse CDF of |Z|'s tail table (one uniform and a
    sign per record, no rejection); one larger σ by rejection from rounded continuous Gaussians
    (:func:`_rounded_gaussian`, from :data:`ROUNDED_MIN_SIGMA`); per-record σ, and a σ below that
    whose table is too wide, by the CKS rejection sampler from a discrete Laplace proposal with
    scale t = ⌊σ⌋ + 1; both rejections inside a ``while_loop`` (vmap-safe: the loop runs until every record is accepted, expected < 2 trials, at most
    :data:`MAX_TRIALS`).
    ``support_radius`` (static) bounds the table used by :meth:`cdf`; it defaults
    to ⌈14σ⌉ + 14, beyond which the mass is below 1e-40.
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

    def with_scale(self, scale, *, max_scale=None):
        """The kernel at σ = ``scale``; the support table sized for ``max_scale`` (or for
        ``scale`` itself when it is concrete; otherwise the current table is kept)."""
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
            vals = jnp.take_along_axis(jnp.broadcast_to(cum, jnp.broadcast_shapes(idx.shape, cum.shape[:-1]) + cum.shape[-1:]), idx[..., None], axis=-1)[..., 0]
        return jnp.where(k < -r, 0.0, jnp.where(k >= r, 1.0, jnp.minimum(vals, 1.0)))

    def noise_log_cdf(self, n):
        # log of a table (0 beyond the support): gradient-safe at 0
        return safe_log(self.noise_cdf(n))

    def noise_icdf(self, u):
        """Smallest integer k with F(k) ≥ u: bisection on the CDF table (⌈log2(2r + 2)⌉ + 1 steps)."""
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
        r = self.support_radius
        if r is not None and r <= ICDF_MAX_RADIUS and jnp.ndim(self.sigma) == 0:
            # one σ for the batch: |Z| by the inverse of its tail table, one hash per record (no rejection)
            a = _tail_table(self.sigma, r, uniform.dtype)
            if r <= LINEAR_MAX_RADIUS:  # a is non-increasing: |Z| = #{j ≥ 1 : u < a[j]}, counted (faster than the search)
                u = uniform(0)
                c = jnp.zeros(jnp.shape(u), jnp.int32)
                for j in range(1, r + 2):
                    c = c + (u < a[j]).astype(jnp.int32)
                return _signed(uniform, c)
            return _guided_noise(uniform, a, r, self.sigma)
        if jnp.ndim(self.sigma) == 0:  # one σ beyond the table: rounded Gaussians where σ is large enough
            sigma = jnp.asarray(self.sigma, uniform.dtype)
            return jax.lax.cond(sigma >= ROUNDED_MIN_SIGMA, lambda: _rounded_gaussian(_uncached(uniform), sigma),
                                lambda: _cks_rejection(_uncached(uniform), sigma))
        return _cks_rejection(uniform, jnp.asarray(self.sigma, uniform.dtype))

    def renyi_divergence_bound(self, order, value, neighbour_value):
        """An upper bound on D_α of the discrete Gaussians at integer shifts: α‖v − v'‖²/(2σ²), the
        continuous Gaussian's value (Canonne, Kamath, Steinke 2020, Prop. 5: the theta-function sum
        is largest at an integer centre), coordinate by coordinate in any dimension (L2 norm)."""
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
        """Exact sum over the support window around the tilted centre m = αv + (1−α)v'."""
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
