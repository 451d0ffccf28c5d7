"""PrivacyBoosted: regions, boosting rate, output law, both samplers, coverage, hooks."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

import dpjax
from dpjax import AbsoluteError, FixedInterval, PrivacyBoosted, RelativeError

ALPHA = 1e-3  # fixed seeds: deterministic p-values; the threshold only guards regressions

CONTINUOUS = [dpjax.Gaussian(3.0), dpjax.Laplace(2.0)]
DISCRETE = [dpjax.DiscreteGaussian(3.0), dpjax.DiscreteLaplace(2.0)]
REGIONS = [(AbsoluteError(2.5), 1.0), (RelativeError(0.2, 2.5), 7.0), (FixedInterval(-5.0, 5.0), 2.0)]
SLOW = pytest.mark.slow


def _matrix(kernels, samplers=(None,), fast=()):
    """(kernel, region, value[, sampler]) cases; those not in ``fast`` are marked slow.

    Each case compiles its own program, so the default run keeps a covering subset
    (every kernel, region and sampler at least once) and the full matrix runs with -m slow.
    """
    out = []
    for k in kernels:
        for region, value in REGIONS:
            for smp in samplers:
                key = (type(k).__name__, type(region).__name__) + ((smp,) if smp else ())
                args = (k, region, value) + ((smp,) if smp else ())
                marks = () if key in fast else (SLOW,)
                out.append(pytest.param(*args, marks=marks, id="-".join(key)))
    return out


def _name(x):
    return type(x).__name__


# jitted entry points: eager dispatch of the many small ops would dominate the test time
_coverage = jax.jit(lambda m, v: m.coverage(v))
_cdf = jax.jit(lambda m, y, v: m.cdf(y, v))
_log_prob = jax.jit(lambda m, y, v: m.log_prob(y, v))
_draw = jax.jit(lambda m, key, v, n: m.sample(key, v, (n,)), static_argnums=3)


# ----------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "build,param",
    [
        (lambda: PrivacyBoosted(dpjax.Gaussian(1.0), AbsoluteError(1.0), 0.0), "rho"),
        (lambda: PrivacyBoosted(dpjax.Gaussian(1.0), AbsoluteError(1.0), 1.5), "rho"),
        (lambda: PrivacyBoosted(dpjax.Gaussian(1.0), AbsoluteError(1.0), float("nan")), "rho"),
        (lambda: AbsoluteError(0.0), "tau"),
        (lambda: AbsoluteError(-1.0), "tau"),
        (lambda: AbsoluteError(float("nan")), "tau"),
        (lambda: RelativeError(0.1, 0.0), "tau"),
        (lambda: RelativeError(-0.1, 1.0), "theta"),
        (lambda: RelativeError(float("nan"), 1.0), "theta"),
        (lambda: FixedInterval(1.0, 1.0), "high"),
        (lambda: FixedInterval(2.0, 1.0), "high"),
        (lambda: FixedInterval(float("nan"), 1.0), "low"),
        (lambda: FixedInterval(0.0, float("inf")), "high"),
        (lambda: PrivacyBoosted(dpjax.RandomizedResponse(1.0), AbsoluteError(1.0), 0.9), "kernel"),
        (lambda: PrivacyBoosted(dpjax.Gaussian(1.0), 1.0, 0.9), "region"),
        (lambda: PrivacyBoosted(dpjax.Gaussian(1.0), AbsoluteError(1.0), 0.9, sampler="inverse"), "sampler"),
    ],
)
def test_validation_names_the_parameter(build, param):
    with pytest.raises(ValueError, match=param):
        build()


def test_fixed_region_refuses_answers_outside():
    mech = PrivacyBoosted(dpjax.Gaussian(1.0), FixedInterval(0.0, 10.0), 0.9)
    with pytest.raises(ValueError, match="fixed region"):
        dpjax.release(jax.random.key(0), jnp.array([1.0, 11.0]), mech)


# ----------------------------------------------------------------------------------
# boosting rate (eq. 3) and the law
# ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_boosting_rate_reference_values():
    # σ=7, τ=5, ρ=0.9 ⇒ p_S=0.524949, q=0.877218, coverage 0.9
    with jax.enable_x64(True):
        mech = PrivacyBoosted(dpjax.Gaussian(7.0), AbsoluteError(5.0), 0.9)
        p_s = float(mech.region_mass(0.0))
        q = float(mech.boosting_rate)
        assert p_s == pytest.approx(0.524949, abs=1e-6)
        assert q == pytest.approx(0.877218, abs=1e-6)
        # both printed forms of eq. (3)
        pbar = 1 - p_s
        assert q == pytest.approx(1 / 0.9 + 1 / pbar - 1 / (0.9 * pbar), rel=1e-12)
        assert q == pytest.approx((0.9 - p_s) / (0.9 * (1 - p_s)), rel=1e-12)
        assert float(mech.coverage(0.0)) == pytest.approx(0.9, abs=1e-12)
        # handy identity 1 − p̄ q = p_S/ρ
        assert math.exp(float(mech.log_normalizer(0.0))) == pytest.approx(p_s / 0.9, rel=1e-12)


@pytest.mark.slow
def test_boosting_rate_clipped_at_zero_and_one():
    with jax.enable_x64(True):
        k = dpjax.Gaussian(1.0)
        p_s = float(PrivacyBoosted(k, AbsoluteError(2.0), 0.5).region_mass(0.0))
        assert float(PrivacyBoosted(k, AbsoluteError(2.0), p_s - 1e-9).boosting_rate) == 0.0
        assert float(PrivacyBoosted(k, AbsoluteError(2.0), p_s + 1e-6).boosting_rate) > 0.0
        assert float(PrivacyBoosted(k, AbsoluteError(2.0), 1.0).boosting_rate) == 1.0
        # q = 0 is the kernel itself
        mech = PrivacyBoosted(k, AbsoluteError(2.0), 0.5)
        y = np.linspace(-5, 5, 11)
        np.testing.assert_allclose(mech.log_prob(y, 0.3), k.log_prob(y, 0.3), rtol=1e-12)
        # q monotone in ρ
        qs = [float(PrivacyBoosted(k, AbsoluteError(2.0), r).boosting_rate) for r in (0.96, 0.97, 0.99, 0.999)]
        assert np.all(np.diff(qs) > 0)


@pytest.mark.slow
@pytest.mark.parametrize(
    "region,hardest,other",
    [
        (AbsoluteError(2.0), [0.0], [3.0, -40.0]),
        (RelativeError(0.1, 2.0), [0.0], [1.0, -5.0, 30.0]),
        pytest.param(FixedInterval(-3.0, 5.0), [-3.0, 5.0], [0.0, 1.0, 4.0], marks=pytest.mark.slow),
    ],
)
def test_coverage_exact_at_hardest_and_larger_elsewhere(region, hardest, other):
    with jax.enable_x64(True):
        for kernel in (dpjax.Gaussian(3.0), dpjax.DiscreteLaplace(2.0)):
            mech = PrivacyBoosted(kernel, region, 0.9)
            cov_h = np.asarray(_coverage(mech, jnp.asarray(hardest, float)))
            assert np.min(cov_h) == pytest.approx(0.9, abs=1e-12), _name(kernel)
            assert np.all(np.asarray(_coverage(mech, jnp.asarray(other, float))) >= 0.9 - 1e-12), _name(kernel)


@pytest.mark.parametrize("kernel,region,value", _matrix(CONTINUOUS, fast={("Laplace", "FixedInterval")}))
def test_continuous_density_normalised_and_cdf_matches_quadrature(kernel, region, value):
    with jax.enable_x64(True):
        mech = PrivacyBoosted(kernel, region, 0.95)
        lo, hi = (float(x) for x in mech.interval(value))
        f = lambda y: float(jnp.exp(_log_prob(mech, y, value)))  # noqa: E731
        pieces = [(-np.inf, lo), (lo, hi), (hi, np.inf)]
        total = sum(integrate.quad(f, a, b, epsabs=1e-14, epsrel=1e-12)[0] for a, b in pieces)
        assert total == pytest.approx(1.0, abs=1e-9)
        for y in [lo - 3.0, lo + 0.2, value, hi + 0.7]:
            ref = sum(integrate.quad(f, a, min(b, y), epsabs=1e-14)[0] for a, b in pieces if a < y)
            assert float(_cdf(mech, y, value)) == pytest.approx(ref, abs=1e-9)
        inside = integrate.quad(f, lo, hi, epsabs=1e-14)[0]
        assert inside == pytest.approx(float(_coverage(mech, value)), abs=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize(
    "kernel,region,value",
    _matrix(DISCRETE, fast={("DiscreteLaplace", "RelativeError"), ("DiscreteGaussian", "AbsoluteError")}),
)
def test_discrete_pmf_normalised_and_cdf_is_its_cumsum(kernel, region, value):
    with jax.enable_x64(True):
        mech = PrivacyBoosted(kernel, region, 0.95)
        ys = np.arange(-120, 121)
        pmf = np.exp(np.asarray(_log_prob(mech, ys, value)))
        assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose(np.cumsum(pmf), _cdf(mech, ys, value), atol=1e-12)
        np.testing.assert_allclose(_cdf(mech, ys + 0.5, value), _cdf(mech, ys, value), atol=1e-15)
        assert np.all(np.exp(np.asarray(_log_prob(mech, ys + 0.5, value))) == 0.0)
        lo, hi = mech.interval(value)
        assert pmf[(ys >= lo) & (ys <= hi)].sum() == pytest.approx(float(_coverage(mech, value)), abs=1e-12)


# ----------------------------------------------------------------------------------
# samplers
# ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kernel,region,value,sampler",
    _matrix(
        CONTINUOUS,
        ("mixture", "rejection"),
        fast={
            ("Laplace", "AbsoluteError", "mixture"),
            ("Laplace", "RelativeError", "rejection"),
        },
    ),
)
def test_samplers_ks_against_exact_cdf(kernel, region, value, sampler):
    mech = PrivacyBoosted(kernel, region, 0.95, sampler=sampler)
    x = np.asarray(_draw(mech, jax.random.key(11), jnp.float32(value), 100_000))
    assert x.dtype == np.float32
    with jax.enable_x64(True):
        assert stats.kstest(x, lambda y: np.asarray(_cdf(mech, y, value))).pvalue > ALPHA


@pytest.mark.parametrize(
    "kernel,region,value,sampler",
    _matrix(DISCRETE, ("mixture", "rejection"), fast={("DiscreteLaplace", "FixedInterval", "mixture")}),
)
def test_discrete_samplers_chi_square(kernel, region, value, sampler):
    mech = PrivacyBoosted(kernel, region, 0.95, sampler=sampler)
    x = np.asarray(_draw(mech, jax.random.key(12), jnp.int32(round(value)), 100_000))
    assert np.issubdtype(x.dtype, np.integer)
    with jax.enable_x64(True):
        ys = np.arange(-80, 81)
        expected = np.exp(np.asarray(_log_prob(mech, ys, float(round(value))))) * len(x)
    counts = np.bincount(x - ys[0], minlength=len(ys))[: len(ys)] if x.min() >= ys[0] else None
    assert counts is not None
    keep = expected >= 5
    obs = np.append(counts[keep], len(x) - counts[keep].sum())
    exp = np.append(expected[keep], len(x) - expected[keep].sum())
    assert stats.chisquare(obs, exp).pvalue > ALPHA


COVERAGE_CASES = [
    # (kernel, region, hardest answers, other answers, sampler); the slow ones run with -m slow
    (dpjax.Gaussian(3.0), AbsoluteError(2.5), [0.0], [5.0], "mixture"),
    (dpjax.Gaussian(3.0), RelativeError(0.2, 2.5), [0.0], [3.0, -10.0], "mixture"),
    (dpjax.Gaussian(3.0), FixedInterval(-5.0, 5.0), [-5.0, 5.0], [0.0, 3.0], "mixture"),
    (dpjax.Gaussian(3.0), RelativeError(0.2, 2.5), [0.0], [3.0], "rejection"),
    pytest.param(dpjax.Gaussian(3.0), AbsoluteError(2.5), [0.0], [5.0], "rejection", marks=SLOW),
    pytest.param(dpjax.Gaussian(3.0), FixedInterval(-5.0, 5.0), [-5.0, 5.0], [0.0, 3.0], "rejection", marks=SLOW),
    pytest.param(dpjax.Laplace(2.0), RelativeError(0.2, 2.5), [0.0], [3.0, -10.0], "mixture", marks=SLOW),
    pytest.param(dpjax.DiscreteLaplace(2.0), RelativeError(0.2, 2.5), [0], [4, -12], "mixture", marks=SLOW),
    pytest.param(dpjax.DiscreteGaussian(2.0), FixedInterval(-5.0, 5.0), [-5, 5], [0, 2], "mixture", marks=SLOW),
    pytest.param(dpjax.DiscreteGaussian(2.0), AbsoluteError(2.5), [0], [7], "rejection", marks=SLOW),
]


@pytest.mark.slow
@pytest.mark.parametrize("kernel,region,hardest,others,sampler", COVERAGE_CASES)
def test_coverage_one_million_draws(kernel, region, hardest, others, sampler):
    """Issue acceptance: 10^6 draws land in S with frequency ρ ± 0.002 at the hardest
    answer and ≥ ρ − 0.002 elsewhere (one program per case: answers batched)."""
    rho = 0.9
    mech = PrivacyBoosted(kernel, region, rho, sampler=sampler)
    dtype = jnp.int32 if kernel.discrete else jnp.float32
    values = jnp.asarray(hardest + others, dtype)
    x = _draw(mech, jax.random.key(100), values, 1_000_000)  # (10^6, answers)
    lo, hi = mech.interval(values)
    freq = np.asarray(jnp.mean((x >= lo) & (x <= hi), axis=0))
    for value, f in zip(hardest + others, freq):
        if value in hardest:
            assert abs(f - rho) <= 0.002, (value, f)
        else:
            assert f >= rho - 0.002, (value, f)


TAIL_CASES = [
    (dpjax.Gaussian(1e4), AbsoluteError(1.0), 0.9, "mixture"),  # p_S ~ 1e-4: q within 1e-5 of 1
    (dpjax.Gaussian(1.0), AbsoluteError(0.01), 0.999, "mixture"),
    (dpjax.Gaussian(1.0), AbsoluteError(30.0), 0.5, "mixture"),  # q = 0; coverage 1
    pytest.param(dpjax.Laplace(1e3), RelativeError(0.1, 1.0), 0.99, "mixture", marks=SLOW),
    pytest.param(dpjax.DiscreteLaplace(1e3), AbsoluteError(3.0), 0.9, "mixture", marks=SLOW),
    pytest.param(dpjax.DiscreteGaussian(50.0), FixedInterval(0.0, 10.0), 1.0, "mixture", marks=SLOW),  # q = 1
    pytest.param(dpjax.Gaussian(1.0), AbsoluteError(0.5), 0.99, "rejection", marks=SLOW),
    pytest.param(dpjax.DiscreteGaussian(50.0), FixedInterval(0.0, 60.0), 1.0, "rejection", marks=SLOW),
]


@pytest.mark.parametrize("kernel,region,rho,sampler", TAIL_CASES)
def test_sampler_tail_stability_and_extremes(kernel, region, rho, sampler):
    # (the rejection sampler needs ρ/p_S trials per record: only mild cases for it)
    mech = PrivacyBoosted(kernel, region, rho, sampler=sampler)
    v = jnp.int32(0) if kernel.discrete else jnp.float32(0.0)
    x = np.asarray(_draw(mech, jax.random.key(5), v, 100_000))
    assert np.isfinite(x).all()
    lo, hi = mech.interval(0.0)
    freq = np.mean((x >= np.asarray(lo)) & (x <= np.asarray(hi)))
    cov = float(_coverage(mech, 0.0))
    assert cov == pytest.approx(max(rho, cov), abs=2e-6)  # float32 coverage is still ρ
    assert abs(freq - cov) < 5 * math.sqrt(cov * (1 - cov) / 1e5) + 1e-6, freq


@pytest.mark.slow
def test_mixture_far_tail_in_float64():
    # the far lower tail is inverted from log-CDF targets: no 1 − F cancellation
    with jax.enable_x64(True):
        mech = PrivacyBoosted(dpjax.Gaussian(1.0), AbsoluteError(20.0), 0.5)
        x = np.asarray(mech.sample(jax.random.key(0), 0.0, (1000,)))
        assert np.isfinite(x).all()
        mech = PrivacyBoosted(dpjax.Gaussian(1.0), FixedInterval(-1.0, 1.0), 0.99)
        x = np.asarray(_draw(mech, jax.random.key(1), 1.0, 200_000))
        assert x.dtype == np.float64
        assert stats.kstest(x, lambda y: np.asarray(_cdf(mech, y, 1.0))).pvalue > ALPHA


NARROW_CASES = [
    # (kernel, region, value): a region ~1e-6 of the kernel's scale around the answer, float32
    pytest.param(dpjax.Gaussian(1.0), RelativeError(0.01, 1e-6), 0.0, id="Gaussian-RelativeError"),
    pytest.param(dpjax.Laplace(1.0), FixedInterval(-1e-6, 1e-6), 5e-7, id="Laplace-FixedInterval"),
    pytest.param(dpjax.Gaussian(1.0), FixedInterval(-1e-6, 1e-6), -5e-7, marks=SLOW, id="Gaussian-FixedInterval"),
    pytest.param(dpjax.Laplace(1.0), RelativeError(1e-4, 1e-6), 0.01, marks=SLOW, id="Laplace-RelativeError"),
    pytest.param(dpjax.Gaussian(1.0), AbsoluteError(1e-6), 0.0, marks=SLOW, id="Gaussian-AbsoluteError"),
    pytest.param(dpjax.Laplace(1.0), AbsoluteError(1e-6), 0.0, marks=SLOW, id="Laplace-AbsoluteError"),
]


@pytest.mark.slow
@pytest.mark.parametrize("kernel,region,value", NARROW_CASES)
def test_mixture_narrow_region_float32(kernel, region, value):
    """A region ~1e-6 of the scale still holds ρ = 0.9 of the draws. Its quantile target
    F(lo) + u1·P_in sits within 1e-6 of 1/2, where float32 resolves only a few dozen
    values (the draws were a lattice of 21–34 points): the sampler carries the target
    as its offset from the median instead. Coverage, and the law overall and inside S
    (conditional CDF), match the exact float64 CDF."""
    mech = PrivacyBoosted(kernel, region, 0.9)
    v32 = np.float32(value)
    x = np.asarray(_draw(mech, jax.random.key(21), jnp.float32(v32), 100_000))
    assert x.dtype == np.float32
    with jax.enable_x64(True):
        v = float(v32)
        cdf = lambda y: np.asarray(_cdf(mech, np.asarray(y, np.float64), v))  # noqa: E731
        lo, hi = (float(t) for t in mech.interval(v))
        cov = float(_coverage(mech, v))
        inside = x[(x >= lo) & (x <= hi)].astype(np.float64)
        assert abs(len(inside) / len(x) - cov) < 5 * math.sqrt(cov * (1 - cov) / len(x))
        # distinct draws: most of them, or of the float32 values S holds
        grid = (hi - lo) / float(np.spacing(np.float32(max(abs(lo), abs(hi)))))
        assert len(np.unique(inside)) > 0.5 * min(len(inside), grid)
        assert stats.kstest(x.astype(np.float64), cdf).pvalue > ALPHA
        c_lo, c_hi = cdf(lo), cdf(hi)
        assert stats.kstest(inside, lambda y: (cdf(y) - c_lo) / (c_hi - c_lo)).pvalue > ALPHA


def test_mixture_quantile_exact_at_both_ends():
    """The continuous mixture's quantile in float32: at tail probabilities p from the
    smallest normal float to 1/2 it agrees with scipy's float64 ndtri / Laplace quantile
    to a few ulps (as jax's ndtri does), and at offsets w from the median down to 1e-30
    with sqrt(2)·erfinv(2w) / −log1p(−2|w|) — no cancellation at 1/2."""
    from scipy.special import erfinv, ndtri

    quantile = jax.jit(lambda kernel, p, w, side: kernel.noise_split_icdf(p, w, side))
    gauss, lap = dpjax.Gaussian(jnp.float32(1.0)), dpjax.Laplace(jnp.float32(1.0))
    p = np.logspace(np.log10(1.2e-38), np.log10(0.5), 20_001).astype(np.float32)
    p = p[p <= 0.5]
    w = (p.astype(np.float64) - 0.5).astype(np.float32)
    for s in (-1.0, 1.0):
        side = np.float32(s)
        for kernel, ref in ((gauss, -ndtri(p.astype(np.float64))), (lap, -np.log(2.0 * p.astype(np.float64)))):
            n = np.asarray(quantile(kernel, p, -side * w, side)).astype(np.float64)
            ok = ref != 0
            np.testing.assert_allclose(n[ok], s * ref[ok], rtol=5e-7)
            assert np.all(n[~ok] == 0.0)
    w = np.logspace(-30, np.log10(0.35), 4_001)
    w = np.concatenate([-w, w]).astype(np.float32)
    p = (0.5 - np.abs(w.astype(np.float64))).astype(np.float32)
    s = np.sign(w).astype(np.float32)
    w64 = w.astype(np.float64)
    np.testing.assert_allclose(np.asarray(quantile(gauss, p, w, s)), np.sqrt(2.0) * erfinv(2.0 * w64), rtol=5e-7)
    np.testing.assert_allclose(
        np.asarray(quantile(lap, p, w, s)), -np.sign(w64) * np.log1p(-2.0 * np.abs(w64)), rtol=5e-7
    )


@pytest.mark.parametrize(
    "mech",
    [
        pytest.param(PrivacyBoosted(dpjax.Gaussian(3.0), RelativeError(0.01, 5.0), 0.9), marks=pytest.mark.slow),
        PrivacyBoosted(dpjax.Laplace(3.0), FixedInterval(-10.0, 1010.0), 0.9),
    ],
    ids=["Gaussian-RelativeError", "Laplace-FixedInterval"],
)
def test_mixture_per_record_regions_slice_like_the_whole_release(mech):
    values = jnp.linspace(0.0, 1000.0, 64, dtype=jnp.float32)
    whole = dpjax.release(jax.random.key(4), values, mech)
    part = dpjax.release(jax.random.key(4), values[40:], mech, start=40)
    np.testing.assert_array_equal(whole[40:], part)


# ----------------------------------------------------------------------------------
# pytree behaviour and release
# ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_release_batch_jit_vmap_grad():
    mech = PrivacyBoosted(
        dpjax.Gaussian(jnp.array([1.0, 2.0, 3.0])), AbsoluteError(jnp.array([1.0, 2.0, 0.5])), jnp.full(3, 0.9)
    )
    assert mech.batch_shape == (3,)
    values = jnp.array([1.0, 2.0, 3.0])
    out = dpjax.release(jax.random.key(1), values, mech)
    assert out.shape == (3,)
    # slices reproduce the whole release
    whole = dpjax.release(
        jax.random.key(2), jnp.arange(10.0), PrivacyBoosted(dpjax.Gaussian(1.0), AbsoluteError(1.0), 0.9)
    )
    part = dpjax.release(
        jax.random.key(2), jnp.arange(5.0, 10.0), PrivacyBoosted(dpjax.Gaussian(1.0), AbsoluteError(1.0), 0.9), start=5
    )
    np.testing.assert_array_equal(whole[5:], part)
    # a batch of mechanisms under vmap agrees with the batched properties
    np.testing.assert_allclose(jax.vmap(lambda m: m.boosting_rate)(mech), mech.boosting_rate, rtol=1e-6)
    # jit with the mechanism as an argument
    f = jax.jit(lambda m, v: m.cdf(v + 0.5, v))
    assert f(mech, values).shape == (3,)
    # gradients through q, the law and the (reparameterised) mixture sampler
    q = lambda s: PrivacyBoosted(dpjax.Gaussian(s), AbsoluteError(1.0), 0.9).boosting_rate  # noqa: E731
    g = jax.grad(q)(2.0)
    assert np.isfinite(g) and g > 0
    lp = lambda t: PrivacyBoosted(dpjax.Gaussian(2.0), RelativeError(0.1, t), 0.9).log_prob(3.0, 1.0)  # noqa: E731
    assert np.isfinite(jax.grad(lp)(1.0))
    draws = lambda s: jnp.mean(
        PrivacyBoosted(dpjax.Gaussian(s), AbsoluteError(1.0), 0.9).sample(jax.random.key(0), 0.0, (1000,)) ** 2
    )  # noqa: E731
    assert np.isfinite(jax.grad(draws)(2.0))


def test_regions_are_pytrees():
    for region in (AbsoluteError(1.0), RelativeError(0.1, 2.0), FixedInterval(-1.0, 1.0)):
        leaves, tree = jax.tree_util.tree_flatten(region)
        assert len(leaves) >= 1
        again = jax.tree_util.tree_unflatten(tree, leaves)
        np.testing.assert_allclose(again.interval(0.5), region.interval(0.5))
    batch = RelativeError(jnp.array([0.0, 0.1]), jnp.array([1.0, 2.0]))
    lo, hi = batch.interval(10.0)
    np.testing.assert_allclose(lo, [9.0, 7.0])
    np.testing.assert_allclose(hi, [11.0, 13.0])


# ----------------------------------------------------------------------------------
# accounting hooks
# ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_neighbour_pairs_and_breakpoints():
    with jax.enable_x64(True):
        g = dpjax.Gaussian(3.0)
        v, w = PrivacyBoosted(g, AbsoluteError(2.0), 0.9).neighbour_pairs(2.0)
        np.testing.assert_array_equal(v, [0.0])
        np.testing.assert_array_equal(w, [2.0])
        rel = PrivacyBoosted(g, RelativeError(0.2, 2.5), 0.9, num_pairs=101)
        v, w = rel.neighbour_pairs(1.0)
        assert v.shape == w.shape == (101,)
        np.testing.assert_allclose(w - v, 1.0)
        assert v[0] == -0.5 and v[-1] > 15.0  # covers the worst pair near Q ≈ 15
        fixed = PrivacyBoosted(g, FixedInterval(-10.0, 10.0), 0.9, num_pairs=21)
        v, w = fixed.neighbour_pairs(1.0)
        assert v.min() == -10.0 and w.max() == 10.0
        dv, dw = PrivacyBoosted(dpjax.DiscreteGaussian(3.0), RelativeError(0.2, 2.5), 0.9).neighbour_pairs(1)
        np.testing.assert_array_equal(dv, np.round(dv))
        with pytest.raises(ValueError, match="sensitivity"):
            rel.neighbour_pairs(0.0)
        # breakpoints: the loss is kernel loss + a constant between them
        bp = rel.output_breakpoints(15.0, 16.0)
        assert bp.shape == (4,) and np.all(np.diff(bp) >= 0)
        pts = np.concatenate([[-30.0], np.asarray(bp), [60.0]])
        for a, b in zip(pts[:-1], pts[1:]):
            y = np.linspace(a, b, 7)[1:-1]
            extra = rel.privacy_loss(y, 15.0, 16.0) - g.privacy_loss(y, 15.0, 16.0)
            np.testing.assert_allclose(extra, extra[0], atol=1e-12)
        np.testing.assert_allclose(
            rel.privacy_loss(3.0, 15.0, 16.0), rel.log_prob(3.0, 15.0) - rel.log_prob(3.0, 16.0), rtol=1e-12
        )
        dbp = PrivacyBoosted(dpjax.DiscreteLaplace(2.0), AbsoluteError(2.5), 0.9).output_breakpoints(0, 1)
        np.testing.assert_allclose(dbp, [-2.5, -1.5, 2.5, 3.5])
