"""The float discrete Gaussian's inverse-CDF samplers: the guided search is exactly the map
|Z| = max{j : u < a[j]} of the tail table (the full search's), the short table's count the same, and the
draws fit pmf ∝ exp(−z²/(2σ²)) at large σ (χ²)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import dpjax
from dpjax.kernels import discrete_gaussian as dgk
from dpjax.random import UniformStream


class _Uniforms:
    """A stream whose uniform 0 is given (uniform 1, the sign, is ¾: +|Z|)."""

    def __init__(self, u):
        self.u = jnp.asarray(u)
        self.dtype, self.shape = self.u.dtype, self.u.shape

    def __call__(self, j):
        return self.u if j == 0 else jnp.full(self.u.shape, 0.75, self.dtype)


def _reference(a, u):
    """max{j : u < a[j]} by numpy's search on the same table."""
    a = np.asarray(a)
    return a.size - 1 - np.searchsorted(a[::-1], np.asarray(u), side="right")


def _crafted(a, r, dt, n):
    """Uniforms at every place the map can go wrong: each threshold a[j] and its neighbouring floats, each guide
    bucket's start and the float below it, the smallest uniform of dpjax.random and its neighbours, the floats
    just below 1, u = 0, and uniforms at random."""
    nmant = np.finfo(dt).nmant
    umin = dt.type(2.0 ** -(nmant + 1))  # (0 + ½)·2^-nmant: the smallest uniform of dpjax.random
    a = np.asarray(a)
    bits, _ = dgk._guide_shape(r, dt, n)
    _, bias, levels, ut = dgk._guide_layout(dt)
    starts = ((np.arange(1, levels << bits, dtype=np.uint64) + np.uint64((bias - levels) << bits))
              << np.uint64(nmant - bits)).astype(ut).view(dt)
    below_one = np.nextafter(dt.type(1), dt.type(0))
    near_one = [below_one]
    for _ in range(64):
        near_one.append(np.nextafter(near_one[-1], dt.type(0)))
    pts = np.concatenate([a, starts, [umin], near_one])
    pts = np.concatenate([pts, np.nextafter(pts, dt.type(0)), np.nextafter(pts, dt.type(1)),
                          np.random.default_rng(0).random(100_000).astype(dt)])
    pts = pts[(pts >= umin) & (pts < 1)]
    return np.append(np.unique(pts), dt.type(0))


@pytest.mark.parametrize("sigma,dtype,n", [pytest.param(5.9, np.float32, 10**7, marks=pytest.mark.slow), pytest.param(30.0, np.float32, 10**7, marks=pytest.mark.slow), pytest.param(100.0, np.float32, 10**7, marks=pytest.mark.slow),
                                           pytest.param(1e4, np.float32, 10**7, marks=pytest.mark.slow), pytest.param(1e4, np.float32, 10**3, marks=pytest.mark.slow), pytest.param(7e4, np.float32, 10**7, marks=pytest.mark.slow),
                                           pytest.param(7e4, np.float32, 10**5, marks=pytest.mark.slow), (7.5, np.float64, 10**7),
                                           pytest.param(1000.0, np.float64, 10**7, marks=pytest.mark.slow), pytest.param(7e4, np.float64, 10**7, marks=pytest.mark.slow)])
def test_guided_search_is_the_inverse_cdf_map(sigma, dtype, n):
    """The guide (sized for ``n`` records) settles every bucket at the default radius (no full search), and its
    count is max{j : u < a[j]} exactly — numpy's search on the same table — at every threshold, its neighbouring
    floats, every bucket edge, the smallest uniform, the floats below 1, u = 0 and 10^5 random uniforms."""
    dt = np.dtype(dtype)
    mech = dpjax.DiscreteGaussian(sigma)
    r = mech.support_radius
    assert dgk.LINEAR_MAX_RADIUS < r <= dgk.ICDF_MAX_RADIUS
    with jax.enable_x64(dt == np.float64):
        a = dgk._tail_table(sigma, r, dt)
        rows, ok = dgk._guide(a, r, sigma, dt, n)
        assert bool(ok)
        u = _crafted(a, r, dt, n)
        got = np.asarray(jax.jit(lambda rows, u: dgk._guided_count(rows, u, r, n))(rows, u))
        np.testing.assert_array_equal(got, _reference(a, u))
        # the sampler itself (the branch taken, the sign) on the same uniforms
        out = np.asarray(jax.jit(lambda m, u: m.sample_noise(_Uniforms(u)))(mech, u))
        np.testing.assert_array_equal(out, _reference(a, u).astype(dt))


@pytest.mark.slow
def test_full_search_when_the_guide_cannot_settle():
    """A support radius below the default for σ (a truncated table: the guide is sized for a smaller σ) takes the
    full search, with the same map; so does a float16 uniform."""
    mech = dpjax.DiscreteGaussian(9.0, support_radius=40)
    dt = np.dtype(np.float32)
    a = dgk._tail_table(9.0, 40, dt)
    assert not bool(dgk._guide(a, 40, 9.0, dt, 10**6)[1])
    u = _crafted(a, 40, dt, 10**6)
    out = np.asarray(jax.jit(lambda m, u: m.sample_noise(_Uniforms(u)))(mech, u))
    np.testing.assert_array_equal(out, _reference(a, u).astype(dt))
    u16 = np.linspace(0.001, 0.999, 999).astype(np.float16)
    a16 = dgk._tail_table(100.0, dpjax.DiscreteGaussian(100.0).support_radius, np.dtype(np.float16))
    out = np.asarray(dpjax.DiscreteGaussian(100.0).sample_noise(_Uniforms(u16)))
    np.testing.assert_array_equal(out, _reference(a16, u16).astype(np.float16))


@pytest.mark.parametrize("sigma", [3.0, pytest.param(100.0, marks=pytest.mark.slow), pytest.param(7e4, marks=pytest.mark.slow)])
def test_release_draws_are_the_full_search_of_the_stream(sigma):
    """Through the stream (its two uniforms per hash, the branches' own copies of it, the sign), under jit and
    vmap over keys: each draw is ±max{j : u < a[j]} of the record's uniform 0, negative when uniform 1 < ½."""
    mech = dpjax.DiscreteGaussian(sigma)
    r, n = mech.support_radius, 50_000
    keys = jax.random.split(jax.random.key(5), 3)
    out = np.asarray(jax.jit(jax.vmap(lambda k: mech.sample_noise(UniformStream(k, (n,), jnp.float32))))(keys))
    a = dgk._tail_table(sigma, r, np.dtype(np.float32))
    for k, o in zip(keys, out):
        s = UniformStream(k, (n,), jnp.float32)
        mag = _reference(a, s(0)).astype(np.float32)
        np.testing.assert_array_equal(o, np.where(np.asarray(s(1)) < 0.5, -mag, mag))


def test_guided_search_vmaps_over_sigma():
    """Several σ of one table radius under vmap (a batched check: both branches, selected): each row is the
    draw of its own σ."""
    n, r = 2_000, dpjax.DiscreteGaussian(50.0).support_radius
    sigmas = jnp.asarray([20.0, 35.0, 50.0])
    draw = jax.jit(lambda m: m.sample_noise(UniformStream(jax.random.key(2), (n,), jnp.float32)))
    out = jax.jit(jax.vmap(lambda s: draw(dpjax.DiscreteGaussian(s, support_radius=r))))(sigmas)
    for s, o in zip(sigmas, np.asarray(out)):
        np.testing.assert_array_equal(o, np.asarray(draw(dpjax.DiscreteGaussian(s, support_radius=r))))


@pytest.mark.parametrize("sigma,width,radius", [(100.0, 5, None), pytest.param(1000.0, 50, None, marks=pytest.mark.slow), (1e5, 2000, None),
                                          (100.0, 5, 2**21), pytest.param(4e5, 8000, None, marks=pytest.mark.slow)])
def test_large_sigma_release_fits_its_law(sigma, width, radius):
    """χ² of 10^6 float32 draws of the public release against pmf ∝ exp(−z²/(2σ²)), in bins of ``width``
    integers (exact bin masses from the pmf in float64): the guided inverse CDF (σ 100, 1000), the rounded Gaussians
    beyond its table (σ 10^5, 4·10^5), and CKS rejection for a σ below :data:`ROUNDED_MIN_SIGMA` whose support
    table is too wide for the inverse CDF."""
    n = 1_000_000
    mech = dpjax.DiscreteGaussian(sigma, support_radius=radius)
    out = np.asarray(dpjax.release(jax.random.key(11), jnp.zeros(n, jnp.int32), mech, numerics="float"))
    z = np.arange(-int(7 * sigma), int(7 * sigma) + 1)
    pmf = np.exp(-z.astype(float) ** 2 / (2 * sigma**2))
    pmf /= pmf.sum()
    edges = np.arange(z[0], z[-1] + width + 1, width)
    exp = np.add.reduceat(pmf, edges[:-1] - z[0]) * n
    obs = np.histogram(out, bins=edges - 0.5)[0]
    keep = exp >= 10
    obs = np.append(obs[keep], n - obs[keep].sum())
    exp = np.append(exp[keep], n - exp[keep].sum())
    assert stats.chisquare(obs[exp > 0], exp[exp > 0]).pvalue > 1e-4


@pytest.mark.slow
def test_beyond_the_table_the_route_follows_sigma():
    """One σ beyond the inverse CDF's table draws the rounded Gaussians from :data:`ROUNDED_MIN_SIGMA` up and CKS
    rejection below it (a table sized for a larger σ); per-record σ draws CKS rejection."""
    key = jax.random.key(2)

    def stream():
        return UniformStream(key, (4000,), jnp.float32)

    for sigma, sampler in ((2e5, dgk._rounded_gaussian), (50.0, dgk._cks_rejection),
                           (jnp.full(4000, 2e5, jnp.float32), dgk._cks_rejection)):
        mech = dpjax.DiscreteGaussian(sigma, support_radius=3 * 10**6)
        got = np.asarray(jax.jit(lambda m: m.sample_noise(stream()))(mech))
        want = np.asarray(jax.jit(lambda s: sampler(stream(), s))(jnp.asarray(sigma, jnp.float32)))
        np.testing.assert_array_equal(got, want)
        assert np.all(got == np.round(got)) and 0.9 < np.std(got) / np.mean(sigma) < 1.1


def test_rounded_gaussian_completes_every_record():
    """At σ = :data:`ROUNDED_MIN_SIGMA` a record keeps neither candidate of a trial with probability about (20/σ)²
    (10^6 records: a few); the loop completes them all: integers, no NaN, standard deviation σ."""
    u = UniformStream(jax.random.key(5), (10**6,), jnp.float32)
    out = np.asarray(jax.jit(lambda s: dgk._rounded_gaussian(u, s))(jnp.float32(dgk.ROUNDED_MIN_SIGMA)))
    assert not np.isnan(out).any() and np.all(out == np.round(out))
    assert abs(np.std(out) / dgk.ROUNDED_MIN_SIGMA - 1) < 0.01
