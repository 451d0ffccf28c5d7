"""Releases at the edges: integers stay integers, dtypes the engine cannot release exactly are
refused or widened, scales the float cannot carry are refused, sampler loops are bounded."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import accounting
import dpjax
from dpjax.kernels import discrete_gaussian


@pytest.mark.parametrize("mech", [dpjax.DiscreteLaplace(scale=10.0), dpjax.DiscreteGaussian(sigma=10.0)])
def test_integer_release_adds_integer_noise_exactly(mech):
    """1,000,000,032 and its neighbour went through float32 (outputs all multiples of 64)."""
    key = jax.random.key(3)
    for v in (1_000_000_032, 1_000_000_033, 16_777_217):
        out = np.asarray(dpjax.release(key, np.full(20000, v, np.int32), mech, numerics="float"))
        assert out.dtype == np.int32
        noise = out.astype(np.int64) - v
        assert abs(noise.mean()) < 0.5 and (out % 64 != 0).mean() > 0.9
        # the noise does not depend on the value: the same key gives the same noise
        ref = np.asarray(dpjax.release(key, np.zeros(20000, np.int32), mech, numerics="float"))
        np.testing.assert_array_equal(noise, ref)


def test_integer_release_saturates_instead_of_wrapping():
    out = np.asarray(
        dpjax.release(
            jax.random.key(0), np.full(1000, 2**31 - 3, np.int32), dpjax.DiscreteLaplace(50.0), numerics="float"
        )
    )
    assert out.min() > 2**31 - 2000 and out.max() == 2**31 - 1


@pytest.mark.slow
def test_int64_under_x64_stays_int64():
    with jax.enable_x64(True):
        out = np.asarray(
            dpjax.release(
                jax.random.key(0),
                np.full(100, 3 * 10**12, np.int64),
                dpjax.DiscreteGaussian(sigma=3.0),
                numerics="float",
            )
        )
    assert out.dtype == np.int64 and np.abs(out - 3 * 10**12).max() < 40


def test_dtypes_refused_widened_or_warned():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="values: int64 values"):
        dpjax.release(key, np.full(2, 2**40, np.int64), dpjax.DiscreteLaplace(1.0), numerics="float")
    assert dpjax.release(key, np.ones(2, np.int64), dpjax.DiscreteLaplace(1.0), numerics="float").dtype == jnp.int32
    out = dpjax.release(key, np.ones(3, np.float16), dpjax.Laplace(1e-3), numerics="float")
    assert out.dtype == jnp.float32 and np.all(np.isfinite(out)) and np.all(np.abs(np.asarray(out) - 1) < 0.1)
    with pytest.warns(UserWarning, match="rounded to float32"):
        dpjax.release(key, np.full(2, 1e9 + 0.3), dpjax.Laplace(1.0), numerics="float")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dpjax.release(key, np.full(2, 0.5), dpjax.Laplace(1.0), numerics="float")  # exact in float32: no warning


@pytest.mark.parametrize(
    "ctor, name",
    [
        (lambda: dpjax.Laplace(scale=1e-300), "scale"),
        (lambda: dpjax.Laplace(scale=1e38), "scale"),
        (lambda: dpjax.Gaussian(sigma=1e-300), "sigma"),
        (lambda: dpjax.DiscreteGaussian(sigma=1e-20), "sigma"),
        (lambda: dpjax.DiscreteGaussian(sigma=1e20), "sigma"),
        (lambda: dpjax.DiscreteLaplace(scale=1e9), "scale"),
        (lambda: dpjax.RandomizedResponse(epsilon=1.0, num_categories=2**24), "num_categories"),
        (
            lambda: dpjax.BoostedRandomizedResponse(epsilon=1.0, epsilon0=0.5, domain_size=2**24, block_size=2),
            "domain_size",
        ),
    ],
)
def test_scales_and_sizes_the_float_cannot_carry_are_refused(ctor, name):
    """At release (a kernel of any positive scale can still be accounted, in float64)."""
    with pytest.raises(ValueError, match=name):
        mech = ctor()
        dpjax.release(jax.random.key(0), np.zeros(2, np.int32), mech, numerics="float")


def test_a_list_of_scales_is_a_batch():
    m = dpjax.Laplace(scale=[1.0, 2.0])
    assert m.batch_shape == (2,)
    assert dpjax.release(jax.random.key(0), np.zeros(2, np.float32), m, numerics="float").shape == (2,)


def test_discrete_gaussian_sampler_loop_is_bounded():
    """With every trial rejected (a keep word that never passes), the loop still ends."""
    mech = dpjax.DiscreteGaussian(sigma=100.0)

    class Never:
        """A stream whose every word is 2^32 − 1: the first block, the largest offset, a keep word above every
        threshold."""

        dtype, shape, _cache = jnp.float32, (4,), None

        def words(self, j):
            return jnp.full((4,), 2**32 - 1, jnp.uint32), jnp.full((4,), 2**32 - 1, jnp.uint32)

    out = jax.jit(lambda: mech.sample_noise(Never()))()
    assert out.shape == (4,) and discrete_gaussian.MAX_TRIALS == 64


@pytest.mark.slow
def test_huge_discrete_support_is_refused_naming_the_sensitivity():
    with pytest.raises(ValueError, match="sensitivity"):
        accounting.pld(dpjax.DiscreteGaussian(sigma=2.0), sensitivity=1e8)
    # the discrete Laplace has a closed-form profile: any support
    eps = float(accounting.pld(dpjax.DiscreteLaplace(scale=1e6), sensitivity=1e6).get_epsilon_for_delta(1e-6))
    assert 0.99 < eps <= 1.0 + 1e-6


def test_checked_release_refuses_under_jit():
    from jax.experimental import checkify

    f = jax.jit(checkify.checkify(dpjax.checked_release))
    err, _ = f(jax.random.key(0), jnp.array([1.0, jnp.nan]), dpjax.Laplace(1.0))
    with pytest.raises(Exception, match="NaN or infinite"):
        err.throw()
    g = jax.jit(checkify.checkify(lambda k, v, s: dpjax.checked_release(k, v, dpjax.Gaussian(s))))
    err, _ = g(jax.random.key(0), jnp.ones(2), -1.0)
    with pytest.raises(Exception, match="sigma must be positive"):
        err.throw()
    boosted = lambda k, v, r: dpjax.checked_release(  # noqa: E731
        k, v, dpjax.PrivacyBoosted(dpjax.Gaussian(1.0), dpjax.AbsoluteError(2.0), r)
    )
    err, _ = jax.jit(checkify.checkify(boosted))(jax.random.key(0), jnp.ones(2), 1.5)
    with pytest.raises(Exception, match="rho"):
        err.throw()
    err, out = f(jax.random.key(0), jnp.ones(3), dpjax.Laplace(1.0))
    err.throw()
    assert out.shape == (3,)
