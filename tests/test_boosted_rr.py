"""PB-GRR (PB-DP §4.4): probabilities, exact pure ε, sampling, unbiased estimators, Table G variances."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import dpjax
from dpjax import BoostedRandomizedResponse

N_ADULT = 45_222


@pytest.mark.parametrize(
    "build,param",
    [
        (lambda: BoostedRandomizedResponse(0.0, 0.0, 90, 10), "epsilon"),
        (lambda: BoostedRandomizedResponse(5.0, 6.0, 90, 10), "epsilon0"),
        (lambda: BoostedRandomizedResponse(5.0, -1.0, 90, 10), "epsilon0"),
        (lambda: BoostedRandomizedResponse(5.0, float("nan"), 90, 10), "epsilon0"),
        (lambda: BoostedRandomizedResponse(5.0, 1.0, 90, 7), "block_size"),
        (lambda: BoostedRandomizedResponse(5.0, 1.0, 1, 1), "domain_size"),
    ],
)
def test_validation(build, param):
    with pytest.raises(ValueError, match=param):
        build()


@pytest.mark.slow
def test_reference_probabilities_and_special_cases():
    # ε=5, d=90, |S|=10
    refs = {
        0.0: (0.094885, 0.094885, 0.000639, 0.948853),
        2.5: (0.439020, 0.036037, 0.002958, 0.763353),
        5.0: (0.625126, 0.004212, 0.004212, 0.663035),
    }
    with jax.enable_x64(True):
        for e0, (p, ps, pn, rho) in refs.items():
            m = BoostedRandomizedResponse(5.0, e0, 90, 10)
            got = [float(x) for x in (m.keep_probability, m.block_probability, m.other_probability, m.coverage)]
            np.testing.assert_allclose(got, [p, ps, pn, rho], atol=1e-6)
            assert float(m.keep_probability + 9 * m.block_probability + 80 * m.other_probability) == pytest.approx(
                1.0, abs=1e-15
            )
            assert float(m.boosting_rate) == pytest.approx(1 - math.exp(e0 - 5.0), abs=1e-15)
            # rows of the confusion matrix are laws
            np.testing.assert_allclose(m.confusion_matrix().sum(1), 1.0, atol=1e-14)
        # ε0 = ε is plain GRR
        grr = dpjax.RandomizedResponse(5.0, 90)
        m = BoostedRandomizedResponse(5.0, 5.0, 90, 10)
        np.testing.assert_allclose(m.confusion_matrix(), grr.confusion_matrix(), atol=1e-15)
        # ε0 = 0 is block randomized response
        m = BoostedRandomizedResponse(5.0, 0.0, 90, 10)
        e = math.exp(5.0)
        assert float(m.keep_probability) == pytest.approx(e / (10 * e + 80), rel=1e-14)
        assert float(m.other_probability) == pytest.approx(1 / (10 * e + 80), rel=1e-14)


@pytest.mark.slow
@pytest.mark.parametrize("e0", [0.0, 1.3, 5.0])
def test_pure_epsilon_is_exact(e0):
    with jax.enable_x64(True):
        m = BoostedRandomizedResponse(5.0, e0, 30, 5)
        lp = np.log(np.asarray(m.confusion_matrix()))
        worst = np.max(lp[:, None, :] - lp[None, :, :])  # max over x, x', y
        assert worst == pytest.approx(5.0, abs=1e-12)
        assert float(m.pure_epsilon()) == pytest.approx(worst, abs=1e-12)
        # the closed-form hooks: δ(ε) = 0 exactly at ε, > 0 just below; pairs as declared
        v, w = m.neighbour_pairs()
        prof = jax.vmap(lambda a, b: m.hockey_stick(jnp.array([5.0 - 1e-6, 5.0]), a, b))(v, w)
        assert np.max(prof[:, 1]) == 0.0 and np.max(prof[:, 0]) > 0.0
        # Rényi against the direct sum for a cross-block pair
        ref = np.log(np.sum(np.exp(2.0 * lp[0] - lp[5]))) / 1.0
        assert float(m.renyi_divergence(2.0, 0.0, 5.0)) == pytest.approx(ref, rel=1e-12)
        # a single block: only the kernel's ε0 remains
        one = BoostedRandomizedResponse(5.0, e0, 5, 5)
        assert float(one.pure_epsilon()) == pytest.approx(e0)


@pytest.mark.slow
def test_sampler_matches_confusion_matrix_and_cdf():
    m = BoostedRandomizedResponse(2.0, 1.0, 12, 4)
    values = jnp.array([0, 5, 11], jnp.int32)
    x = np.asarray(jax.jit(lambda k: m.sample(k, values, (60_000,)))(jax.random.key(3)))
    assert np.issubdtype(x.dtype, np.integer)
    with jax.enable_x64(True):
        mm = BoostedRandomizedResponse(2.0, 1.0, 12, 4)
        probs = np.asarray(mm.confusion_matrix())
        for j, v in enumerate([0, 5, 11]):
            counts = np.bincount(x[:, j], minlength=12)
            assert stats.chisquare(counts, probs[v] * len(x)).pvalue > 1e-3
            np.testing.assert_allclose(mm.cdf(np.arange(-1, 13), v), np.r_[0.0, np.cumsum(probs[v]), 1.0], atol=1e-14)
    out = dpjax.release(jax.random.key(4), jnp.arange(12, dtype=jnp.int32), m, numerics="float")
    assert out.shape == (12,) and int(out.min()) >= 0 and int(out.max()) < 12
    with pytest.raises(ValueError, match="values"):
        dpjax.release(jax.random.key(5), jnp.array([12]), m, numerics="float")


@pytest.mark.slow
def test_estimators_unbiased_with_the_stated_variances():
    d, s, n, reps = 20, 5, 4000, 400
    rng = np.random.default_rng(0)
    truth = rng.multinomial(n, rng.dirichlet(np.ones(d) * 0.7))
    users = jnp.asarray(np.repeat(np.arange(d), truth), jnp.int32)
    m = BoostedRandomizedResponse(2.0, 1.0, d, s)
    reports = jax.jit(lambda k: m.sample(k, users, (reps,)))(jax.random.key(7))  # (reps, n)
    with jax.enable_x64(True):
        mm = BoostedRandomizedResponse(2.0, 1.0, d, s)
        f_s = np.asarray(mm.estimate_category_counts(reports))
        f_x = np.asarray(mm.estimate_value_counts(reports))
        var_s = np.asarray(mm.category_count_variance(truth))
        var_x = np.asarray(mm.value_count_variance(truth))
    cat_truth = truth.reshape(-1, s).sum(1)
    # unbiased: mean within 4 standard errors
    assert np.all(np.abs(f_s.mean(0) - cat_truth) < 4 * np.sqrt(var_s / reps))
    assert np.all(np.abs(f_x.mean(0) - truth) < 4 * np.sqrt(var_x / reps))
    # variances: the sample variance matches the closed form (sum over bins, ~5 % MC error)
    assert f_s.var(0, ddof=1).sum() == pytest.approx(var_s.sum(), rel=0.15)
    assert f_x.var(0, ddof=1).sum() == pytest.approx(var_x.sum(), rel=0.15)


# Table G: mean Var per category (F̂_S) and per value (F̂_x); N = 45,222, d = 90, ε = 5
TABLE_G = [
    (0.0, 562.02, math.inf, 614.83, math.inf),
    (0.5, 887.74, 142595.0, 924.10, 41153.84),
    (1.0, 1367.73, 26182.47, 1327.28, 8974.13),
    (2.0, 2873.87, 4174.26, 2292.64, 2092.65),
    (3.0, 4784.90, 1573.31, 3111.60, 1120.21),
    (4.0, 6299.58, 973.11, 3575.60, 871.12),
    (5.0, 7118.52, 791.93, 3781.71, 791.93),
]


@pytest.mark.slow
def test_table_g_variances_histogram_independent():
    rng = np.random.default_rng(1)
    uniform = np.full(90, N_ADULT / 90)
    skewed = rng.multinomial(N_ADULT, rng.dirichlet(np.ones(90) * 0.3)).astype(float)
    with jax.enable_x64(True):
        for e0, cat10, val10, cat5, val5 in TABLE_G:
            for s, cat, val in ((10, cat10, val10), (5, cat5, val5)):
                m = BoostedRandomizedResponse(5.0, e0, 90, s)
                for hist in (uniform, skewed):
                    assert float(jnp.mean(m.category_count_variance(hist))) == pytest.approx(cat, rel=1e-5)
                    got = float(jnp.mean(m.value_count_variance(hist)))
                    if math.isinf(val):
                        assert math.isinf(got)
                    else:
                        assert got == pytest.approx(val, rel=1e-5)
