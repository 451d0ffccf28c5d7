"""The CKS samplers (dpjax.exact.cks: Canonne, Kamath and Steinke's integer-only discrete Laplace,
discrete Gaussian and Bernoulli(exp(−x)), each as a state machine over 64-bit words): χ² goodness of fit against
their pmf, and the exact lazy comparison that decides each Bernoulli step."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax.exact import ThreefryWords, cks
from dpjax.exact.laws import discrete_gaussian
from goodness_of_fit import chi2_pvalue


# -- the integer samplers: chi-square goodness of fit ------------------------------------------------


def _draw(fn, n, seed):
    with jax.enable_x64(True):
        return np.asarray(jax.jit(lambda key: fn(ThreefryWords(key, (n,)), (n,)))(jax.random.key(seed)))


CASES = {
    "discrete_laplace(t=3)": (lambda w, s: cks.discrete_laplace(w, s, 3), lambda z: np.exp(-np.abs(z) / 3.0)),
    "discrete_laplace(t/s=7/4)": (
        lambda w, s: cks.discrete_laplace(w, s, 7, 2),
        lambda z: np.exp(-np.abs(z) * 4 / 7.0),
    ),
    "discrete_laplace(t/s=1/8)": (lambda w, s: cks.discrete_laplace(w, s, 1, 3), lambda z: np.exp(-np.abs(z) * 8.0)),
    # the state machine (the per-record route)
    "machine_laplace(t=3)": (lambda w, s: cks.discrete_laplace(w, s, 3, budget=16), lambda z: np.exp(-np.abs(z) / 3.0)),
    "discrete_gaussian(n=5)": (lambda w, s: cks.discrete_gaussian(w, s, 5), lambda z: np.exp(-z * z / 10.0)),
    "discrete_gaussian(n=1)": (lambda w, s: cks.discrete_gaussian(w, s, 1), lambda z: np.exp(-z * z / 2.0)),
    # the one-word inverse-CDF discrete Gaussian of the releases (flagged records are < 2^-40 per record: none here)
    "fast_gaussian(n=5)": (lambda w, s: _fast_gauss(w, s, 5), lambda z: np.exp(-z * z / 10.0)),
    "fast_gaussian(n=200)": (lambda w, s: _fast_gauss(w, s, 200), lambda z: np.exp(-z * z / 400.0)),
}


def _fast_gauss(words, shape, nvar):

    code = discrete_gaussian.gaussian_code(words, shape[0], nvar)
    return jnp.where((code & 1) == 1, 10**6, code >> 8)  # a flagged record would fail the fit


def _check_sampler(name, n, seed):
    fn, pmf = CASES[name]
    z = np.arange(-60, 61)
    x = _draw(fn, n, seed)
    assert x.dtype == np.int64
    p = chi2_pvalue(x, z, pmf(z.astype(float)))
    assert p > 1e-4, (name, p)


@pytest.mark.parametrize(
    "name", ["discrete_laplace(t=3)", "discrete_laplace(t/s=1/8)", "discrete_gaussian(n=5)", "fast_gaussian(n=200)"]
)
def test_integer_samplers_fit_their_pmf(name):
    _check_sampler(name, 100_000, 11)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_integer_samplers_fit_their_pmf_1e6(name):
    _check_sampler(name, 1_000_000, 12)


@pytest.mark.slow
@pytest.mark.parametrize(
    "num,den,n",
    [
        (3, 2, 100_000),
        pytest.param(1, 3, 1_000_000, marks=pytest.mark.slow),
        pytest.param(7, 1, 1_000_000, marks=pytest.mark.slow),
    ],
)
def test_bernoulli_exp_is_exp_minus_x(num, den, n):
    x = _draw(lambda w, s: cks.bernoulli_exp(w, s, num, den), n, 3)
    p = math.exp(-num / den)
    assert set(np.unique(x)) <= {0, 1}
    assert abs(x.mean() - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_bernoulli_step_decides_exactly():
    """The lazy comparison U < p/q with U's first 64 bits u: decided 1 iff (u+1)q ≤ p 2^64, 0 iff uq ≥ p 2^64."""
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        for _ in range(200):
            q = int(rng.integers(1, 2**62))
            p = int(rng.integers(0, q))
            u = int(rng.integers(0, 2**63)) * 2 + int(rng.integers(0, 2))
            one, zero, res = cks.bernoulli_step(jnp.uint64(u), jnp.uint64(p), jnp.uint64(q))
            assert bool(one) == ((u + 1) * q <= p * 2**64)
            assert bool(zero) == (u * q >= p * 2**64)
            if not (bool(one) or bool(zero)):
                assert int(res) == p * 2**64 - u * q
