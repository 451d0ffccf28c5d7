"""Batch releases (dpjax.release): reproducibility under slicing and sharding, key handling, validation; at the edges,
integers stay integers, dtypes the engine cannot release exactly are refused or widened, scales the float cannot carry
are refused, sampler loops are bounded."""

import os
import subprocess
import sys
import textwrap
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import accounting
import dpjax
from dpjax.kernels import discrete_gaussian

MECHS = [
    dpjax.Laplace(scale=2.0),
    dpjax.Gaussian(sigma=1.5),
    dpjax.DiscreteLaplace(scale=3.0),
    dpjax.DiscreteGaussian(sigma=2.0),
    dpjax.RandomizedResponse(epsilon=1.0, num_categories=5),
]


def _values(mech, n):
    if isinstance(mech, dpjax.RandomizedResponse):
        return jnp.arange(n, dtype=jnp.int32) % 5
    return jnp.arange(n, dtype=jnp.int32 if mech.discrete else jnp.float32)


@pytest.mark.parametrize(
    "mech",
    [
        m if isinstance(m, (dpjax.Laplace, dpjax.DiscreteLaplace)) else pytest.param(m, marks=pytest.mark.slow)
        for m in MECHS
    ],
    ids=lambda m: type(m).__name__,
)
def test_release_is_identical_across_slices(mech):
    key = jax.random.key(11)
    x = _values(mech, 10_000)
    whole = np.asarray(dpjax.release(key, x, mech, numerics="float"))
    parts = [
        np.asarray(dpjax.release(jax.random.key(11), x[a:b], mech, start=a, numerics="float"))
        for a, b in [(0, 1), (1, 3333), (3333, 10_000)]
    ]
    np.testing.assert_array_equal(whole, np.concatenate(parts))
    assert np.isfinite(whole).all()


def test_release_matches_sample_and_is_deterministic():
    mech = dpjax.Laplace(scale=1.0)
    x = jnp.linspace(-5, 5, 101)
    a = dpjax.release(jax.random.key(3), x, mech, numerics="float")
    b = dpjax.release(jax.random.key(3), x, mech, numerics="float")
    c = mech.sample(jax.random.key(3), x)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, dpjax.release(jax.random.key(4), x, mech, numerics="float"))


def test_release_of_2d_values_and_per_query_parameters():
    x = jnp.zeros((4, 1000))
    sig = jnp.array([[0.1], [1.0], [10.0], [100.0]])
    y = np.asarray(dpjax.release(jax.random.key(0), x, dpjax.Gaussian(sigma=sig), numerics="float"))
    assert y.shape == (4, 1000)
    np.testing.assert_allclose(y.std(axis=1), [0.1, 1.0, 10.0, 100.0], rtol=0.1)
    per_record = dpjax.Gaussian(sigma=jnp.broadcast_to(sig, (4, 1000)))
    np.testing.assert_array_equal(y, np.asarray(dpjax.release(jax.random.key(0), x, per_record, numerics="float")))


def test_release_under_jit_and_vmap_over_keys():
    mech = dpjax.Gaussian(sigma=1.0)
    keys = jax.random.split(jax.random.key(0), 3)
    out = jax.jit(jax.vmap(lambda k: mech.sample(k, jnp.zeros(5))))(keys)
    assert out.shape == (3, 5) and len({tuple(np.asarray(r)) for r in out}) == 3


_SHARD_SCRIPT = textwrap.dedent(
    """
    import os, sys
    import jax, jax.numpy as jnp, numpy as np
    import dpjax
    assert len(jax.devices()) == int(sys.argv[1]), jax.devices()
    x = jnp.arange((1 << 17) + 3, dtype=jnp.float32) / 1000  # not a multiple of 4: padded when sharded
    outs = [np.asarray(dpjax.release(jax.random.key(7), x, m, numerics="float")) for m in
            (dpjax.Laplace(scale=1.0), dpjax.Gaussian(sigma=2.0), dpjax.DiscreteLaplace(scale=2.0),
             dpjax.Gaussian(sigma=jnp.linspace(1.0, 2.0, (1 << 17) + 3)),
             # per-record region masses (erf): a one-device program that fused the cut to the real records
             # into the draw differed from the sharded one in the last bit on a few hundred records
             dpjax.PrivacyBoosted(dpjax.Gaussian(sigma=3.0), dpjax.RelativeError(0.2, 2.0), 0.9))]
    np.save(sys.argv[2], np.stack(outs))
    """
)


def _run_with_devices(n, path, tmp_path):
    script = tmp_path / "shard.py"
    script.write_text(_SHARD_SCRIPT)
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={n}", JAX_PLATFORMS="cpu")
    subprocess.run([sys.executable, str(script), str(n), str(path)], check=True, env=env, timeout=300)
    return np.load(path)


@pytest.mark.slow
def test_release_is_identical_on_1_and_4_devices(tmp_path):
    one = _run_with_devices(1, tmp_path / "one.npy", tmp_path)
    four = _run_with_devices(4, tmp_path / "four.npy", tmp_path)
    np.testing.assert_array_equal(one, four)


@pytest.mark.slow
def test_key_reuse_is_caught():
    mech = dpjax.Laplace(scale=1.0)
    with jax.debug_key_reuse(True):
        key = jax.random.key(0)
        k1, k2 = jax.random.split(key)
        dpjax.release(k1, jnp.zeros(10), mech, numerics="float")  # our own code consumes each key exactly once
        mech.sample(k2, 0.0, (10,))
        with pytest.raises(Exception, match="consumed"):
            dpjax.release(k1, jnp.zeros(10), mech, numerics="float")


def test_secure_key_is_threefry_and_fresh():
    a, b = dpjax.random.secure_key(), dpjax.random.secure_key()
    assert "threefry" in str(jax.random.key_impl(a))
    assert not np.array_equal(jax.random.key_data(a), jax.random.key_data(b))


@pytest.mark.parametrize(
    "bad",
    [
        lambda: dpjax.Laplace(scale=0.0),
        lambda: dpjax.Laplace(scale=-1.0),
        lambda: dpjax.Laplace(scale=float("nan")),
        lambda: dpjax.Laplace(scale=float("inf")),
        lambda: dpjax.Laplace(scale="1"),
        lambda: dpjax.Laplace.from_epsilon(0.0),
        lambda: dpjax.Laplace.from_epsilon(-1.0),
        lambda: dpjax.Laplace.from_epsilon(1.0, sensitivity=float("nan")),
        lambda: dpjax.Gaussian(sigma=0.0),
        lambda: dpjax.Gaussian(sigma=jnp.array([1.0, -1.0])),
        lambda: dpjax.Gaussian.from_epsilon_delta(1.0, 0.0),
        lambda: dpjax.Gaussian.from_epsilon_delta(1.0, 1.0),
        lambda: dpjax.Gaussian.from_epsilon_delta(float("inf"), 1e-5),
        lambda: dpjax.DiscreteLaplace(scale=-2.0),
        lambda: dpjax.DiscreteGaussian(sigma=0.0),
        lambda: dpjax.RandomizedResponse(epsilon=1.0, num_categories=1),
        lambda: dpjax.RandomizedResponse(epsilon=0.0, num_categories=3),
        lambda: dpjax.RandomizedResponse(epsilon=1.0, num_categories=2.5),
    ],
)
def test_invalid_parameters_raise_value_error_naming_the_parameter(bad):
    with pytest.raises(ValueError, match="scale|sigma|epsilon|delta|sensitivity|num_categories"):
        bad()


@pytest.mark.parametrize(
    "values,match",
    [
        (jnp.array([1.0, jnp.nan]), "NaN or infinite"),
        (jnp.array([1.0, jnp.inf]), "NaN or infinite"),
        (jnp.zeros((0,)), "empty"),
        (np.array(["a", "b"]), "dtype"),
    ],
)
def test_release_refuses_bad_values(values, match):
    with pytest.raises(ValueError, match=match):
        dpjax.release(jax.random.key(0), values, dpjax.Laplace(scale=1.0))


def test_release_refuses_bad_keys_shapes_and_categories():
    mech = dpjax.Laplace(scale=1.0)
    with pytest.raises(ValueError, match="key"):
        dpjax.release(0, jnp.zeros(3), mech)
    with pytest.raises(ValueError, match="rbg"):
        dpjax.release(jax.random.key(0, impl="rbg"), jnp.zeros(3), mech)
    with pytest.raises(ValueError, match="batch shape"):
        dpjax.release(jax.random.key(0), jnp.zeros(3), dpjax.Laplace(scale=jnp.ones(4)))
    with pytest.raises(ValueError, match="start"):
        dpjax.release(jax.random.key(0), jnp.zeros(3), mech, start=-1)
    with pytest.raises(ValueError, match="values must lie in"):
        dpjax.release(jax.random.key(0), jnp.array([0, 7]), dpjax.RandomizedResponse(epsilon=1.0, num_categories=3))
    with pytest.raises(ValueError, match="mech"):
        dpjax.release(jax.random.key(0), jnp.zeros(3), "laplace")


def test_no_release_contains_nan_even_at_extreme_scales():
    x = jnp.full((100_000,), 1e6, jnp.float32)
    for mech in (
        dpjax.Laplace(scale=1e-30),
        dpjax.Laplace(scale=1e30),
        dpjax.Gaussian(sigma=1e-30),
        dpjax.Gaussian(sigma=1e30),
    ):
        assert np.isfinite(np.asarray(dpjax.release(jax.random.key(1), x, mech, numerics="float"))).all()


def test_threefry_hash_is_bit_identical_to_jax():
    from jax.extend.random import threefry2x32_p

    from dpjax.random import threefry2x32

    rng = np.random.default_rng(5)
    k0, k1 = (jnp.uint32(w) for w in rng.integers(0, 2**32, 2))
    x0 = jnp.asarray(rng.integers(0, 2**32, 4096), jnp.uint32)
    x1 = jnp.asarray(rng.integers(0, 2**32, 4096), jnp.uint32)
    want = threefry2x32_p.bind(jnp.broadcast_to(k0, x0.shape), jnp.broadcast_to(k1, x0.shape), x0, x1)
    got = jax.jit(threefry2x32)(k0, k1, x0, x1)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(np.asarray(w), np.asarray(g))


def test_default_tier_is_the_command_lines():
    """Like ``dpjax release``: the exact tier where the mechanism has an exact sampler, the float tier where it has
    none and under tracing (the exact tier draws on the host from concrete parameters)."""
    key, x, mech = jax.random.key(5), jnp.linspace(-3.0, 3.0, 64), dpjax.Laplace(1.0)
    default = dpjax.release(key, x, mech)
    np.testing.assert_array_equal(default, dpjax.release(key, x, mech, numerics="exact"))
    assert not np.array_equal(default, dpjax.release(key, x, mech, numerics="float"))
    mixture = dpjax.LaplaceMixture.from_epsilon(1.0, r=5.0, c=5.0)  # no exact sampler
    np.testing.assert_array_equal(dpjax.release(key, x, mixture), dpjax.release(key, x, mixture, numerics="float"))
    traced = jax.jit(lambda k, v: dpjax.release(k, v, mech))(key, x)
    np.testing.assert_array_equal(traced, dpjax.release(key, x, mech, numerics="float"))
    with pytest.raises(ValueError, match="numerics"):
        dpjax.release(key, x, mech, numerics="auto")
    with pytest.raises(ValueError, match="exact"):
        dpjax.release(key, x, mixture, numerics="exact")
    with pytest.raises(ValueError, match="NaN"):  # a refusal of the exact tier stands: no float fallback
        dpjax.release(key, jnp.array([1.0, jnp.nan]), mech)


@pytest.mark.parametrize(
    "mech",
    [dpjax.DiscreteLaplace(scale=10.0), pytest.param(dpjax.DiscreteGaussian(sigma=10.0), marks=pytest.mark.slow)],
)
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


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_release_widens_half_precision_jax_arrays(dtype):
    out = dpjax.release(jax.random.key(0), jnp.ones(4, dtype), dpjax.Laplace(1.0), numerics="float")
    assert out.dtype == jnp.float32
