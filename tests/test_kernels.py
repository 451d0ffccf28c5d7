"""Goodness of fit of every sampler against its exact CDF / pmf, with fixed seeds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import dpjax

N = 200_000
ALPHA = 1e-3  # fixed seeds: these p-values are deterministic, the threshold only guards regressions


def _draws(mech, value=0.0, n=N, seed=0):
    return np.asarray(mech.sample(jax.random.key(seed), value, (n,)))


@pytest.mark.parametrize("scale,value", [(1.0, 0.0), (0.3, 5.0), (40.0, -7.0)])
def test_laplace_ks_against_exact_cdf(scale, value):
    mech = dpjax.Laplace(scale=scale)
    x = _draws(mech, value)
    res = stats.kstest(x, lambda y: np.asarray(mech.cdf(y, value)))
    assert res.pvalue > ALPHA
    ref = stats.kstest(x, stats.laplace(loc=value, scale=scale).cdf)
    assert abs(res.statistic - ref.statistic) < 1e-5  # our cdf is the Laplace cdf


@pytest.mark.slow
@pytest.mark.parametrize("sigma,value", [(1.0, 0.0), (3.7, 2.0), (1e3, 0.0)])
def test_gaussian_ks_against_exact_cdf(sigma, value):
    mech = dpjax.Gaussian(sigma=sigma)
    x = _draws(mech, value, seed=1)
    assert stats.kstest(x, stats.norm(loc=value, scale=sigma).cdf).pvalue > ALPHA
    y = np.linspace(value - 3 * sigma, value + 3 * sigma, 7)
    np.testing.assert_allclose(np.asarray(mech.cdf(y, value)), stats.norm(value, sigma).cdf(y), atol=1e-6)


def _chi_square_pvalue(x, pmf, support):
    counts = np.array([(x == k).sum() for k in support])
    expected = np.array([pmf(k) for k in support]) * len(x)
    rest = len(x) - counts.sum()
    rest_expected = len(x) - expected.sum()
    # pool cells with small expectation into the remainder
    keep = expected >= 5
    obs = np.append(counts[keep], rest + counts[~keep].sum())
    exp = np.append(expected[keep], rest_expected + expected[~keep].sum())
    if exp[-1] < 5:
        obs[-2] += obs[-1]
        exp[-2] += exp[-1]
        obs, exp = obs[:-1], exp[:-1]
    return stats.chisquare(obs, exp).pvalue


@pytest.mark.slow
@pytest.mark.parametrize("scale", [0.5, 2.0, 10.0])
def test_discrete_laplace_chi_square(scale):
    mech = dpjax.DiscreteLaplace(scale=scale)
    x = _draws(mech, jnp.int32(0), seed=2)
    assert np.issubdtype(x.dtype, np.integer)
    a = np.exp(-1 / scale)
    pmf = lambda k: (1 - a) / (1 + a) * a ** abs(k)  # noqa: E731
    support = range(-int(12 * scale) - 3, int(12 * scale) + 4)
    assert _chi_square_pvalue(x, pmf, support) > ALPHA
    ks = np.arange(-5, 6)
    np.testing.assert_allclose(np.exp(np.asarray(mech.log_prob(ks, 0))), [pmf(k) for k in ks], rtol=1e-5)
    np.testing.assert_allclose(
        np.asarray(mech.cdf(ks, 0)), np.cumsum([pmf(k) for k in range(-200, 6)])[-11:], rtol=1e-5
    )


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.4, 1.0, 3.0, 25.0])
def test_discrete_gaussian_chi_square(sigma):
    mech = dpjax.DiscreteGaussian(sigma=sigma)
    x = _draws(mech, jnp.int32(0), seed=3)
    assert np.issubdtype(x.dtype, np.integer)
    support = np.arange(-int(12 * sigma) - 3, int(12 * sigma) + 4)
    w = np.exp(-(support.astype(float) ** 2) / (2 * sigma**2))
    pmf_table = dict(zip(support.tolist(), w / w.sum()))
    assert _chi_square_pvalue(x, lambda k: pmf_table[k], support) > ALPHA
    np.testing.assert_allclose(np.exp(np.asarray(mech.log_prob(support, 0))), w / w.sum(), rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(np.asarray(mech.cdf(support, 0)), np.cumsum(w / w.sum()), rtol=1e-5, atol=1e-12)


@pytest.mark.slow
def test_discrete_outputs_are_integer_valued_for_float_inputs():
    for mech in (dpjax.DiscreteLaplace(scale=3.0), dpjax.DiscreteGaussian(sigma=2.5)):
        y = np.asarray(dpjax.release(jax.random.key(4), jnp.arange(1000.0), mech, numerics="float"))
        assert np.all(y == np.round(y))


@pytest.mark.parametrize("epsilon,k", [(1.0, 2), (0.5, 4), (2.0, 10)])
def test_randomized_response_confusion_matrix(epsilon, k):
    mech = dpjax.RandomizedResponse(epsilon=epsilon, num_categories=k)
    n = 100_000
    truth = np.repeat(np.arange(k), n // k)
    y = np.asarray(dpjax.release(jax.random.key(5), truth.astype(np.int32), mech, numerics="float"))
    assert y.min() >= 0 and y.max() < k
    p = np.exp(epsilon) / (np.exp(epsilon) + k - 1)
    np.testing.assert_allclose(float(mech.keep_probability), p, rtol=1e-6)
    emp = np.zeros((k, k))
    np.add.at(emp, (truth, y), 1)
    emp /= emp.sum(axis=1, keepdims=True)
    expected = np.full((k, k), (1 - p) / (k - 1))
    np.fill_diagonal(expected, p)
    np.testing.assert_allclose(np.asarray(mech.confusion_matrix()), expected, rtol=1e-6)
    per_row = n // k
    assert np.max(np.abs(emp - expected)) < 5 * np.sqrt(0.25 / per_row)
    counts = np.array([(y[truth == 0] == j).sum() for j in range(k)])
    assert stats.chisquare(counts, expected[0] * counts.sum()).pvalue > ALPHA


def test_gaussian_analytic_calibration_reference_values():
    # the analytic Gaussian mechanism (Balle & Wang, ICML 2018, Theorem 8)
    assert dpjax.Gaussian.from_epsilon_delta(1.0, 1e-5).sigma == pytest.approx(3.73063, abs=1e-5)
    assert dpjax.Gaussian.from_epsilon_delta(0.1, 1e-5).sigma == pytest.approx(30.74957, abs=1e-4)
    g = dpjax.Gaussian(sigma=4.0)
    assert float(g.hockey_stick(1.0, 0.0, 1.0)) == pytest.approx(2.92427e-6, rel=1e-4)
    # the calibrated sigma meets delta (rounded to the private side)
    s = dpjax.Gaussian.from_epsilon_delta(0.7, 1e-6, sensitivity=3.0)
    mu = 3.0 / float(s.sigma)
    exact = stats.norm.cdf(mu / 2 - 0.7 / mu) - np.exp(0.7) * stats.norm.cdf(-mu / 2 - 0.7 / mu)
    assert exact <= 1e-6


def test_laplace_from_epsilon_and_gradients():
    mech = dpjax.Laplace.from_epsilon(0.5, sensitivity=2.0)
    assert float(mech.scale) == pytest.approx(4.0)
    g = jax.grad(lambda s: dpjax.Gaussian(sigma=s).cdf(1.0, 0.0))(2.0)
    assert float(g) == pytest.approx(-stats.norm.pdf(0.5) * 0.5 / 2.0, rel=1e-5)


@pytest.mark.slow
def test_batched_parameters_give_a_batch_of_mechanisms():
    mech = dpjax.Gaussian(sigma=jnp.array([1.0, 10.0, 100.0]))
    assert mech.batch_shape == (3,)
    x = np.asarray(mech.sample(jax.random.key(6), 0.0, (50_000,)))
    assert x.shape == (50_000, 3)
    np.testing.assert_allclose(x.std(axis=0), [1.0, 10.0, 100.0], rtol=0.02)
    lp = jax.vmap(lambda m: m.log_prob(0.0, 0.0))(mech)
    np.testing.assert_allclose(np.asarray(lp), stats.norm.logpdf(0, scale=[1, 10, 100]), rtol=1e-5)


def test_pure_epsilon_hooks_are_infinite_off_the_lattice():
    """A discrete kernel shifted off the integers has disjoint output supports: the public hooks read
    0.25 (DiscreteLaplace(2), Δ 0.5) and 0.5 (GeometricMixture(2, 1, 1)) where every accountant says ∞."""
    assert float(dpjax.DiscreteLaplace(2.0).pure_epsilon(0.5)) == np.inf
    assert float(dpjax.GeometricMixture(2, 1, 1).pure_epsilon(0.5)) == np.inf
    assert float(dpjax.DiscreteLaplace(2.0).pure_epsilon(1.0)) == pytest.approx(0.5)
    assert float(dpjax.GeometricMixture(2, 1, 1).pure_epsilon(1.0)) == pytest.approx(1.0)
    assert float(dpjax.Laplace(2.0).pure_epsilon(0.5)) == pytest.approx(0.25)
