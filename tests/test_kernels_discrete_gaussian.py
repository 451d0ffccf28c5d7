"""The float discrete Gaussian (the block sampler, one σ or per-record σ): its exact law, from all its words,
within total variation 10^-6 of pmf ∝ exp(−z²/(2σ²)); the release's draws are exactly that map of the stream's
words; no guide bucket holds more thresholds than it checks; its draws fit the law (χ²); a σ the float dtype
cannot carry is refused; a record whose :data:`MAX_TRIALS` trials are all rejected takes a fresh candidate."""

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from scipy import stats

import dpjax
from dpjax.kernels import discrete_gaussian as dgk
from dpjax.random import UniformStream
from goodness_of_fit import chi2_pvalue

_block_params = jax.jit(dgk._block_params)


def _params(sigma, per_record):
    """The block sampler's (b, table, gap, half) for σ, one for the batch or as a record's own."""
    b, tables, index, gap, half = _block_params(jnp.full(1, sigma, jnp.float32) if per_record else jnp.float32(sigma))
    first = (lambda x: np.asarray(x).reshape(-1)[0]) if per_record else np.asarray
    return int(first(b)), np.asarray(tables)[int(first(index))], first(gap), bool(first(half))


def _true_abs_law(sigma, k):
    """P(|Z| = k) of the discrete Gaussian, its normaliser in 40-digit mpmath (the direct sum below σ = 2, the
    Jacobi-theta dual above)."""
    mpmath.mp.dps = 40
    s = mpmath.mpf(sigma)
    if sigma < 2:
        norm = 1 + 2 * mpmath.nsum(lambda j: mpmath.exp(-(j**2) / (2 * s**2)), [1, mpmath.inf])
    else:
        norm = (
            s
            * mpmath.sqrt(2 * mpmath.pi)
            * (1 + 2 * mpmath.nsum(lambda j: mpmath.exp(-2 * mpmath.pi**2 * s**2 * j**2), [1, mpmath.inf]))
        )
    p = np.exp(-0.5 * (k.astype(np.float64) / sigma) ** 2) / float(norm)
    return np.where(k == 0, p, 2 * p)


def _sampler_abs_law(sigma, per_record):
    """P(|Z| = k), k = q 2^b + s < BLOCKS·2^b, of the sampler, exactly from its words: the block q from the first
    uint32 word (P(q ≥ j) = T[j]/2^32, the table it computes), s from b bits of the second (uniform on [0, 2^b)), a
    candidate kept by a third word below its threshold (κ(q, s)/2^32, the threshold it computes for every (q, s)),
    every candidate kept for one σ below 16; conditioned on a keep (the sign, one more bit, is exactly fair)."""
    b, t, gap, half = _params(sigma, per_record)
    m = 1 << b
    ge = t[: dgk.BLOCKS + 1].astype(np.float64)
    ge[0] = 2.0**32
    pq = (ge[:-1] - ge[1:]) / 2.0**32
    if b == 0 and not per_record:
        return pq
    keep = jax.jit(lambda q, s: dgk._keep_threshold(q, s, b, jnp.float32(sigma), gap, half, jnp.float32))
    parts, s, step = [], np.arange(m, dtype=np.uint32), max(1, (1 << 20) // m)
    for q0 in range(0, dgk.BLOCKS, step):
        q = np.arange(q0, min(q0 + step, dgk.BLOCKS), dtype=np.int32)
        always, thr = (np.asarray(x) for x in keep(np.repeat(q, m), np.tile(s, q.size)))
        parts.append(np.repeat(pq[q], m) * np.where(always, 2.0**32, thr.astype(np.float64)))
    law = np.concatenate(parts)
    return law / law.sum()


@pytest.mark.parametrize("per_record", [False, True])
@pytest.mark.parametrize("sigma", [0.3, 1.0, 5.0, 16.0, 100.0, 1e4, pytest.param(1e6, marks=pytest.mark.slow)])
def test_float_law_within_tv_1e6(sigma, per_record):
    """Total variation between the sampler's exact law (all its words) and the discrete Gaussian ≤ 10^-6, for one σ
    and as a record's own σ (the float-uniform samplers it replaces were at 1.9e-7, 1.0e-5 and 8.9e-4 at σ 1, 100,
    10^4 and 0.10 at 10^6)."""
    law = _sampler_abs_law(sigma, per_record)
    true = _true_abs_law(sigma, np.arange(law.size))
    tv = 0.5 * (np.abs(law - true).sum() + max(0.0, 1.0 - true.sum()))
    assert tv <= 1e-6, tv


def test_no_guide_bucket_holds_more_than_it_checks():
    """Every table the sampler builds: one σ from 2^-20 to 16 and over [16, 32) (beyond, its table depends on σ only
    through ρ = 2^b/σ, which [16, 32) sweeps), and the per-record tables: no guide bucket holds more than
    GUIDE_SPAN thresholds (the block of a word is its row's plus at most GUIDE_SPAN comparisons)."""
    bases, rows = dgk._buckets()
    level = np.searchsorted(bases, np.arange(rows), side="right") - 1
    width = np.where(level < 32, 2.0 ** np.maximum(31 - dgk.GUIDE_BITS - level, 0), 1.0)
    start = np.where(level < 32, 2.0 ** (31 - level) + (np.arange(rows) - bases[level]) * width, 0.0)
    sigmas = np.concatenate(
        [
            2.0 ** np.linspace(-20, 4, 150),
            np.linspace(16, 32, 200, endpoint=False),
            np.nextafter(16 * 2.0 ** np.arange(8), 0),
        ]
    ).astype(np.float32)
    tables = np.concatenate(
        [
            np.asarray(jax.vmap(lambda s: _block_params(s)[1][0])(sigmas)),
            np.asarray(_block_params(jnp.ones(2, jnp.float32))[1]),
        ]
    )
    for t in tables:
        desc = np.sort(t[1:].astype(np.int64))

        def block(w):
            return desc.size - np.searchsorted(desc, w, side="right")

        assert (block(start) - block(start + width - 1)).max() <= dgk.GUIDE_SPAN


def _reference(stream, sigma, n):
    """The draws by the documented map, in numpy, from the stream's words: trial j, words (w0, w1) of counter 2j,
    q = max{j' : w0 < T[j']}, s = w1 >> (32 − b), sign w1 & 1, kept when the first word of counter 2j + 1 is below
    the keep threshold (one σ below 16: always)."""
    per_record = np.ndim(sigma) > 0
    b, t, gap, half = _params(float(np.max(sigma)), per_record)
    out, todo = np.zeros(n), np.ones(n, bool)
    for j in range(dgk.MAX_TRIALS):
        w0, w1 = (np.asarray(w) for w in stream.words(2 * j))
        q = np.sum(w0[:, None] < t[None, 1:], axis=1, dtype=np.int32)  # (T is non-increasing)
        s = (w1 >> np.uint32(32 - b)) if b else np.zeros(n, np.uint32)
        k = q.astype(np.float64) * 2.0**b + s
        z = np.where(w1 & 1, -k, k)
        kept = np.ones(n, bool)
        if b or per_record:
            always, thr = (
                np.asarray(x) for x in dgk._keep_threshold(q, s, b, jnp.float32(np.max(sigma)), gap, half, jnp.float32)
            )
            kept = always | (np.asarray(stream.words(2 * j + 1)[0]) < thr)
        out = np.where(todo & kept, z, out)
        todo &= ~kept
        if not todo.any():
            return out
    raise AssertionError("records left after MAX_TRIALS trials")


@pytest.mark.parametrize(
    "sigma",
    [
        3.0,
        pytest.param(100.0, marks=pytest.mark.slow),
        pytest.param(1e6, marks=pytest.mark.slow),
        pytest.param(np.full(20_000, 40.0, np.float32), marks=pytest.mark.slow),
    ],
)
def test_release_draws_are_the_block_map_of_the_stream(sigma):
    """Through the stream, under jit and vmap over keys: each draw is the documented map of the record's words."""
    mech, n = dpjax.DiscreteGaussian(sigma), 20_000
    keys = jax.random.split(jax.random.key(5), 2)
    out = np.asarray(jax.jit(jax.vmap(lambda k: mech.sample_noise(UniformStream(k, (n,), jnp.float32))))(keys))
    for k, o in zip(keys, out):
        np.testing.assert_array_equal(o, _reference(UniformStream(k, (n,), jnp.float32), sigma, n))


@pytest.mark.slow
def test_vmaps_over_sigma():
    """Several σ under vmap (σ < 16, every candidate kept, and σ ≥ 16, rejection: both branches, selected): each
    row is the draw of its own σ, and float64 uniforms give the same draws (the same words)."""
    n = 2_000
    sigmas = jnp.asarray([3.0, 20.0, 5000.0])
    draw = jax.jit(lambda m: m.sample_noise(UniformStream(jax.random.key(2), (n,), jnp.float32)))
    out = jax.jit(jax.vmap(lambda s: draw(dpjax.DiscreteGaussian(s, support_radius=10))))(sigmas)
    for s, o in zip(sigmas, np.asarray(out)):
        np.testing.assert_array_equal(o, np.asarray(draw(dpjax.DiscreteGaussian(s, support_radius=10))))
    with jax.enable_x64(True):
        wide = np.asarray(
            dpjax.DiscreteGaussian(5000.0).sample_noise(UniformStream(jax.random.key(2), (n,), jnp.float64))
        )
    np.testing.assert_array_equal(wide, np.asarray(out)[2])


@pytest.mark.slow
@pytest.mark.parametrize(
    "sigma,width,per_record",
    [
        (2.0, 1, False),
        pytest.param(100.0, 5, False, marks=pytest.mark.slow),
        pytest.param(1e5, 2000, False, marks=pytest.mark.slow),
        pytest.param(30.0, 2, True, marks=pytest.mark.slow),
    ],
)
def test_release_fits_its_law(sigma, width, per_record):
    """χ² of 10^6 float32 draws of the public release against pmf ∝ exp(−z²/(2σ²)), in bins of ``width``
    integers (exact bin masses from the pmf in float64)."""
    n = 1_000_000
    mech = dpjax.DiscreteGaussian(np.full(n, sigma) if per_record else sigma)
    out = np.asarray(dpjax.release(jax.random.key(11), jnp.zeros(n, jnp.int32), mech, numerics="float"))
    z = np.arange(-int(7 * sigma), int(7 * sigma) + 1)
    pmf = np.exp(-(z.astype(float) ** 2) / (2 * sigma**2))
    pmf /= pmf.sum()
    edges = np.arange(z[0], z[-1] + width + 1, width)
    exp = np.add.reduceat(pmf, edges[:-1] - z[0]) * n
    obs = np.histogram(out, bins=edges - 0.5)[0]
    keep = exp >= 10
    obs = np.append(obs[keep], n - obs[keep].sum())
    exp = np.append(exp[keep], n - exp[keep].sum())
    assert stats.chisquare(obs[exp > 0], exp[exp > 0]).pvalue > 1e-4


def test_sigma_beyond_the_float_bound_is_refused():
    """A float release refuses σ above 2^21 in float32 (noise beyond 2^24 would not be an integer), naming sigma,
    eagerly and under checked_release; 2^21 itself is served."""
    values = jnp.zeros(4, jnp.int32)
    with pytest.raises(ValueError, match="sigma must be at most 2097152"):
        dpjax.release(jax.random.key(0), values, dpjax.DiscreteGaussian(2.0**21 + 1), numerics="float")
    dpjax.DiscreteGaussian(2.0**21).validate_values(values)
    checks = dpjax.DiscreteGaussian(jnp.float32(2.0**21 + 1)).traced_checks(values)
    assert [m for ok, m in checks if not bool(ok)] == ["sigma must be at most 2097152 for a float release"]


@pytest.mark.slow
def test_float_discrete_gaussian_block_sampler_fits_its_law():
    """The float tier's discrete Gaussian, the block sampler: one σ (float32 and float64 releases) and per-record σ
    each fit pmf ∝ exp(−z²/(2σ²)) (χ²)."""
    n = 200_000
    for sigma in (2.5, 20.0):
        z = np.arange(-int(8 * sigma), int(8 * sigma) + 1)
        pmf = np.exp(-(z.astype(float) ** 2) / (2 * sigma**2))
        for dt in (jnp.float32, jnp.float64):
            with jax.enable_x64(dt == jnp.float64):
                out = np.asarray(
                    dpjax.release(jax.random.key(1), jnp.zeros(n, dt), dpjax.DiscreteGaussian(sigma), numerics="float")
                )
            assert chi2_pvalue(out, z, pmf) > 1e-4, (sigma, dt)
    z = np.arange(-60, 61)
    pmf = np.exp(-(z.astype(float) ** 2) / (2 * 2.5**2))
    per = dpjax.DiscreteGaussian(jnp.full(n, 2.5))  # per-record σ: the fixed proposal tables
    out = np.asarray(dpjax.release(jax.random.key(2), jnp.zeros(n, jnp.int32), per, numerics="float"))
    assert chi2_pvalue(out, z, pmf) > 1e-4


class _Rejecting:
    """Words whose every trial is rejected (w0 = 0: the last block, kept with probability < 1; the keep word
    2^32 − 1), then the candidate words (2^30, 3) past the trials (the fresh candidate's)."""

    dtype = jnp.float32
    shape = (4,)
    _cache = None

    def words(self, j):
        j = jnp.asarray(j, jnp.uint32)
        past = 2 * dgk.MAX_TRIALS
        w0 = jnp.where(j == past, jnp.uint32(1 << 30), jnp.where(j % 2 == 1, jnp.uint32(2**32 - 1), jnp.uint32(0)))
        w1 = jnp.where(j == past, jnp.uint32(3), jnp.uint32(0))
        return jnp.broadcast_to(w0, self.shape), jnp.broadcast_to(w1, self.shape)


def test_a_record_whose_trials_all_fail_takes_a_fresh_candidate_not_zero():
    """docs/threat-model.md: such a record takes a fresh unconditioned proposal candidate (noise), never 0 (the bare
    answer): here −q for the block q = #{j : 2^30 < T[j]} of each record's proposal table (sign bit 1, b = 0)."""
    sigma = np.array([2.0, 3.0, 4.0, 5.0], np.float32)
    out = np.asarray(jax.jit(lambda: dpjax.DiscreteGaussian(sigma=sigma).sample_noise(_Rejecting()))())
    _, tables, index, _, _ = dgk._block_params(jnp.asarray(sigma))
    t = np.asarray(tables)[np.asarray(index)]
    want = -np.sum((1 << 30) < t[:, 1:].astype(np.int64), axis=1).astype(np.float32)
    np.testing.assert_array_equal(out, want)
    assert np.all(out != 0)
