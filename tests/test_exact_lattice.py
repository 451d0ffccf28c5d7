"""The exact sampling tier (dpjax.exact): integer samplers' laws, lattice releases that defeat the
floating-point attack the float tier fails, honest accounting of the mechanism actually run."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import accounting
import dpjax
from dpjax.exact import HostBits, ThreefryWords, cks, table_samplers
from dpjax.exact.laws import boosted, discrete_gaussian, discrete_laplace, randomized_response

# -- the integer samplers: chi-square goodness of fit ------------------------------------------------


def _draw(fn, n, seed):
    with jax.enable_x64(True):
        return np.asarray(jax.jit(lambda key: fn(ThreefryWords(key, (n,)), (n,)))(jax.random.key(seed)))


def _chi2_pvalue(samples, support, pmf):
    p = pmf / pmf.sum()
    n = samples.size
    counts = np.array([(samples == z).sum() for z in support])
    keep = n * p >= 10  # bins of expected count ≥ 10 (below, the Poisson skew makes χ² anti-conservative)
    obs = np.append(counts[keep], n - counts[keep].sum())
    exp = np.append(n * p[keep], n - n * p[keep].sum())
    ok = exp > 0
    return stats.chisquare(obs[ok], exp[ok]).pvalue


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
    p = _chi2_pvalue(x, z, pmf(z.astype(float)))
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


@pytest.mark.parametrize("n", [100_000, pytest.param(1_000_000, marks=pytest.mark.slow)])
def test_randomized_response_by_integer_thresholds(n):
    rr = dpjax.RandomizedResponse(1.0, 3)
    lat = rr.exact_lattice()
    values = jnp.asarray(np.arange(n) % 3, jnp.int32)
    out = np.asarray(dpjax.release(jax.random.key(5), values, rr, numerics="exact"))
    keep = float(lat.param) / 2.0**64
    conf = np.array([[np.mean(out[np.asarray(values) == a] == b) for b in range(3)] for a in range(3)])
    expect = np.where(np.eye(3, dtype=bool), keep, (1 - keep) / 2)
    assert np.all(np.abs(conf - expect) < 5 * np.sqrt(expect * (1 - expect) / (n / 3)))
    # the accounting ε is the one the integer threshold achieves, never below it
    achieved = math.log(keep * 2 / (1 - keep))
    assert achieved <= float(lat.noise.epsilon) <= 1.0 + 1e-12


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


# -- lattice releases: the floating-point attack ---------------------------------------------------


def _float_reachable_fraction(mech):
    """Exhaustive over all 2^23 float32 uniforms of the float tier: the fraction of releases of value 1
    that are impossible outputs at value 0 (each such output reveals the bit with certainty)."""
    u = (np.arange(2**23, dtype=np.float32) + np.float32(0.5)) * np.float32(2.0**-23)
    noise = np.asarray(jax.jit(mech.noise_icdf)(jnp.asarray(u)), np.float32)
    out0 = np.float32(0.0) + noise
    out1 = np.float32(1.0) + noise
    return 1.0 - np.isin(out1, out0).mean()


@pytest.mark.slow
@pytest.mark.parametrize(
    "mech", [dpjax.Laplace(1.0), pytest.param(dpjax.Gaussian(2.0), marks=pytest.mark.slow)], ids=["laplace", "gaussian"]
)
def test_float_tier_fails_the_attack(mech):
    """float32 inverse-CDF noise: most releases of 1 are outputs that 0 can never produce."""
    assert _float_reachable_fraction(mech) > 0.5


MECHS = [dpjax.Laplace(0.5), dpjax.Laplace(1.0), dpjax.Laplace(3.0), dpjax.Gaussian(1.0), dpjax.Gaussian(4.0)]


@pytest.mark.parametrize(
    "mech",
    [pytest.param(m, marks=pytest.mark.slow) if isinstance(m, dpjax.Gaussian) else m for m in MECHS],
    ids=lambda m: repr(m),
)
def test_exact_tier_survives_the_attack(mech):
    """Releases of 0 and of 1 land on the same lattice gℤ (every point of which both can produce), and
    their frequencies over intervals differ by at most e^ε up to a binomial margin."""
    n = 40_000
    lat = mech.exact_lattice()
    g = float(lat.granularity)
    outs = []
    for value, seed in ((0.0, 1), (1.0, 2)):
        out = np.asarray(
            dpjax.release(jax.random.key(seed), jnp.full((n,), value, jnp.float32), mech, numerics="exact"), np.float64
        )
        k = out / g
        assert np.all(k == np.round(k))  # on gℤ, whatever the value
        outs.append(out)
    # the attack's distinguisher: the fraction of 1-releases impossible at 0 is zero (support gℤ for both)
    assert np.all(lat.noise.log_prob(jnp.asarray(np.round(outs[1][:1000] / g)), 0.0) > -np.inf)
    scale = float(np.std(outs[0]))
    edges = np.linspace(-3 * scale, 3 * scale + 1, 13)
    if lat.pure_epsilon is not None:  # Laplace: the lattice mechanism's pure ε, ⌈1/g⌉/t
        eps = np.full(12, float(lat.pure_epsilon(1.0)))
    else:  # Gaussian: the largest privacy loss inside each interval, (2|y|Δ' + Δ'²)/(2σ'²) at Δ' = ⌈1/g⌉ g
        d = math.ceil(1.0 / g) * g
        s2 = float(lat.param) * g * g
        eps = (2 * np.maximum(np.abs(edges[:-1]), np.abs(edges[1:])) * d + d * d) / (2 * s2)
    c0, _ = np.histogram(outs[0], edges)
    c1, _ = np.histogram(outs[1], edges)
    for a, b in ((c0, c1), (c1, c0)):
        # a ≤ e^ε b up to 5 standard deviations of the counts
        assert np.all(a <= np.exp(eps) * b + 5 * np.sqrt(a + np.exp(2 * eps) * b) + 5)


def test_exact_release_is_record_addressed_and_reproducible():
    mech = dpjax.Laplace(2.0)
    x = jnp.linspace(-5, 5, 300, dtype=jnp.float32)
    key = jax.random.key(7)
    whole = dpjax.release(key, x, mech, numerics="exact")
    parts = jnp.concatenate(
        [
            dpjax.release(key, x[:100], mech, numerics="exact"),
            dpjax.release(key, x[100:], mech, numerics="exact", start=100),
        ]
    )
    np.testing.assert_array_equal(np.asarray(whole), np.asarray(parts))
    np.testing.assert_array_equal(np.asarray(whole), np.asarray(dpjax.release(key, x, mech, numerics="exact")))


def test_host_bits_source_gives_the_same_law():
    mech = dpjax.DiscreteLaplace(2.0)
    n = 50_000
    out = np.asarray(dpjax.release(HostBits(), jnp.zeros(n, jnp.int32), mech, numerics="exact"))
    a = math.exp(-1 / 2.0)
    var = 2 * a / (1 - a) ** 2
    assert abs(out.mean()) < 5 * math.sqrt(var / n)
    assert abs(out.var() / var - 1) < 0.05


# -- accounting of the mechanism actually run ------------------------------------------------------


def test_lattice_accounting_charges_the_rounding():
    lat = dpjax.Laplace(1.0).exact_lattice()
    g, t = float(lat.granularity), float(lat.param)
    for delta in (1.0, 1.0 + 2.0**-25, 0.3):
        d_lat = math.ceil(delta / g)
        assert d_lat <= delta / g + 1  # the charge Δ + g
        eps = float(lat.pure_epsilon(delta))
        assert eps == pytest.approx(d_lat / t, rel=1e-6)
        assert eps >= delta / 1.0 * (1 - 1e-6)
    glat = dpjax.Gaussian(3.0).exact_lattice()
    gg = float(glat.granularity)
    v, nv = glat.neighbour_pairs(1.0)
    assert float(nv[0] - v[0]) == math.ceil(1.0 / gg)
    assert float(glat.noise.sigma) ** 2 <= float(glat.param)  # accounted σ never above the σ that ran


@pytest.mark.slow
def test_lattice_pld_is_the_noise_pld_at_the_lattice_sensitivity():
    glat = dpjax.Gaussian(3.0).exact_lattice()
    gg = float(glat.granularity)
    e1 = float(accounting.pld(glat, sensitivity=1.0).get_epsilon_for_delta(1e-6))
    e2 = float(accounting.pld(glat.noise, sensitivity=math.ceil(1.0 / gg)).get_epsilon_for_delta(1e-6))
    assert e1 == e2
    assert e1 >= float(accounting.pld(dpjax.Gaussian(3.0), sensitivity=1.0).get_epsilon_for_delta(1e-6)) * (1 - 1e-3)


def test_exact_refuses_what_it_cannot_run():
    boosted = dpjax.PrivacyBoosted(dpjax.Laplace(1.0), dpjax.AbsoluteError(1.0), 0.9)
    with pytest.raises(ValueError, match="PrivacyBoosted"):
        dpjax.release(jax.random.key(0), jnp.zeros(3), boosted, numerics="exact")
    with pytest.raises(ValueError, match="numerics"):
        dpjax.release(jax.random.key(0), jnp.zeros(3), dpjax.Laplace(1.0), numerics="fixed")


# -- the fixed-trip discrete Laplace (dpjax.exact.table_samplers): device = host, ties decided exactly ---------


@pytest.mark.parametrize("t,shift", [(3, 0), (7, 3), (5000, 0), (1 << 20, 0), (1 << 30, 0)])
def test_fast_laplace_device_equals_exact_host_path(t, shift):
    """The device output is the host's exact function of the same word stream (record by record)."""

    n = 64
    with jax.enable_x64(True):
        words = ThreefryWords(jax.random.key(3), (n,))
        z, flag = jax.jit(lambda: discrete_laplace.discrete_laplace_fast(words, n, t, shift))()
        k0, k1 = int(words._k0), int(words._k1)
    host = discrete_laplace.resolve_on_host(
        z, np.ones(n, bool), lambda i: lambda j: table_samplers.threefry_word(k0, k1, j, i), t, shift
    )
    np.testing.assert_array_equal(np.asarray(z), host)
    assert not np.asarray(flag).any()


def test_fast_laplace_tables_are_exact_floors():
    """Each threshold is ⌊2^63 P(J ≤ j)⌋ / ⌊2^64 F⌋ of the exact CDFs (checked against 300-digit decimal arithmetic),
    and J's table ends where P(J > j) < 2^-40."""
    import decimal

    ctx = decimal.Context(prec=300)
    floor = lambda x, bits: int((x * 2**bits).to_integral_value(rounding=decimal.ROUND_FLOOR))  # noqa: E731
    for t in (5, 5000):
        offsets, widths, m = discrete_laplace.chunk_layout(t, 0)
        q = ctx.exp(decimal.Decimal(-1) / t)
        R = ctx.exp(decimal.Decimal(-(2**m)) / t)
        tail = lambda j: 2 * q / (1 + q) * R**j  # noqa: E731  P(J > j) = P(Z ≠ 0) R^j
        table = discrete_laplace.dl_icdf(t, 0)
        for j in (0, 1, 7, len(table) - 2, len(table) - 1):
            assert int(table[j]) == floor(1 - tail(j), 63)
        assert tail(len(table) - 1) < decimal.Decimal(2) ** -40 <= tail(len(table) - 2)
        for (o, w), chunk in zip(zip(offsets, widths), discrete_laplace.dl_tables(t, 0)):
            r = q ** (2**o)
            for c in (0, 1, (1 << w) - 2):
                assert int(chunk[c]) == floor((1 - r ** (c + 1)) / (1 - r ** (1 << w)), 64)
    assert (
        discrete_laplace.chunk_layout(5000, 0)[2] == 3 and discrete_laplace.chunk_layout(5, 0)[2] == 0
    )  # one word per record for τ ≤ 2^10


def test_fast_laplace_tie_is_decided_by_further_words():
    """A word equal to a threshold T = ⌊2^64 F⌋ is decided by the next words: U = T/2^64 + 0 < F keeps
    the chunk at c; U just below (T+1)/2^64 > F moves it to c + 1 (F irrational)."""

    t, shift = 5000, 0
    (chunk,) = discrete_laplace.dl_tables(t, shift)
    jtab = discrete_laplace.dl_icdf(t, shift)
    c = 2
    tie = int(chunk[c])
    for ext, expect in ((0, c), ((1 << 64) - 1, c + 1)):

        def word(j, ext=ext):
            if j == 0:
                return int(jtab[0]) + 1  # sign +, J = 1: Z ≠ 0 and H = 0
            if j == 1:
                return tie
            return ext  # extension words of word 1

        assert discrete_laplace.exact_record(word, t, shift) == 1 + expect


# -- the CLI (its default release on the exact tier: tests/test_table_exact.py) ---------------------------------


@pytest.mark.slow
def test_cli_exact_refused_for_boosted_float_kept(capsys):
    from dpjax import cli

    assert (
        cli.main(["release", "--seed", "0", "--mechanism", "boosted", "--kernel", "laplace", "--scale", "20000"]) == 0
    )
    assert "numerics: float" in capsys.readouterr().out
    assert (
        cli.main(
            [
                "release",
                "--seed",
                "0",
                "--mechanism",
                "boosted",
                "--kernel",
                "laplace",
                "--scale",
                "20000",
                "--numerics",
                "exact",
            ]
        )
        == 2
    )
    assert "PrivacyBoosted" in capsys.readouterr().err


@pytest.mark.slow
def test_laplace_release_host_completion_is_the_same_release(monkeypatch):
    """Words past J's table go to the host (forced for P(J > K) ≥ 2^-3 here): the release is unchanged, the
    noise being a function of each record's words whichever route finished it."""

    mech = dpjax.DiscreteLaplace(3.0)
    x = jnp.arange(-1000, 1000, dtype=jnp.int32)
    key = jax.random.key(4)
    plain = np.asarray(dpjax.release(key, x, mech, numerics="exact"))
    caches = (discrete_laplace.dl_icdf, discrete_laplace.dl_guide)
    for f in caches:
        f.cache_clear()
    jax.clear_caches()  # the tables are constants of the compiled release
    monkeypatch.setattr(discrete_laplace, "_DL_TAIL", 3)
    try:
        lat = mech.exact_lattice()
        with jax.enable_x64(True):
            code = np.asarray(
                discrete_laplace.laplace_code(ThreefryWords(key, (x.size,)), x.size, int(lat.param), int(lat.shift))
            )
        assert (code & 1).sum() > 100  # the host path really runs
        forced = np.asarray(dpjax.release(key, x, mech, numerics="exact"))
    finally:
        for f in caches:
            f.cache_clear()
        jax.clear_caches()
    np.testing.assert_array_equal(plain, forced)


# -- the fixed-trip discrete Gaussian ----------------------------------------------------------------


@pytest.mark.parametrize("nvar", [5, 2**22 + 77])
def test_fast_gaussian_device_equals_exact_host_path(nvar):

    n = 40
    with jax.enable_x64(True):
        words = ThreefryWords(jax.random.key(6), (n,))
        code = np.asarray(jax.jit(lambda: discrete_gaussian.gaussian_code(words, n, nvar))())
        k0, k1 = int(words._k0), int(words._k1)
    assert not (code & 1).any()
    host = [
        discrete_gaussian.exact_gaussian_record(lambda j, i=i: table_samplers.threefry_word(k0, k1, j, i), nvar)
        for i in range(n)
    ]
    np.testing.assert_array_equal(code >> 8, host)


def test_fast_gaussian_icdf_table_is_exact():
    """T[k] = ⌊2^63 P(|Z| ≤ k)⌋ of the discrete Gaussian (pmf ∝ exp(−z²/(2n))), checked against 200-digit
    decimal sums, and the table ends where P(|Z| > K) < 2^-40."""
    import decimal

    nvar = 1000
    table = discrete_gaussian.dg_icdf(nvar)
    ctx = decimal.Context(prec=200)
    p = [ctx.exp(ctx.divide(decimal.Decimal(-k * k), decimal.Decimal(2 * nvar))) for k in range(3000)]
    s = ctx.add(p[0], ctx.multiply(decimal.Decimal(2), sum(p[1:], decimal.Decimal(0))))
    cum = [p[0]]
    for k in range(1, 3000):
        cum.append(ctx.add(cum[-1], ctx.multiply(decimal.Decimal(2), p[k])))
    for k in (0, 1, 17, 31, 100, len(table) - 2, len(table) - 1):
        want = int(
            ctx.multiply(ctx.divide(cum[k], s), decimal.Decimal(2**63)).to_integral_value(rounding=decimal.ROUND_FLOOR)
        )
        assert int(table[k]) == want
    tail = lambda k: ctx.divide(ctx.subtract(s, cum[k]), s)
    assert tail(len(table) - 1) < decimal.Decimal(2) ** -40 <= tail(len(table) - 2)


@pytest.mark.slow
def test_gaussian_release_host_completion_is_the_same_release(monkeypatch):
    """Words past the |Z| table go to the host (forced for P(|Z| > K) ≥ 2^-3 here): the same release."""

    mech = dpjax.Gaussian(3.0)
    x = jnp.linspace(-50, 50, 100, dtype=jnp.float32)
    key = jax.random.key(8)
    plain = np.asarray(dpjax.release(key, x, mech, numerics="exact"))
    discrete_gaussian.dg_icdf.cache_clear()
    discrete_gaussian.dg_guide.cache_clear()
    jax.clear_caches()  # the tables are constants of the compiled release
    monkeypatch.setattr(table_samplers, "ICDF_TAIL", 3)
    try:
        nvar = int(mech.exact_lattice().param)
        with jax.enable_x64(True):
            code = np.asarray(discrete_gaussian.gaussian_code(ThreefryWords(key, (100,)), 100, nvar))
        assert (code & 1).sum() > 5  # the host path really runs
        forced = np.asarray(dpjax.release(key, x, mech, numerics="exact"))
    finally:
        discrete_gaussian.dg_icdf.cache_clear()
        discrete_gaussian.dg_guide.cache_clear()
        jax.clear_caches()
    np.testing.assert_array_equal(plain, forced)


# -- scales the exact tier cannot carry are refused by name (issue 20) --------------------------------


@pytest.mark.parametrize(
    "mech,name",
    [(dpjax.Laplace(1e39), "scale"), (dpjax.DiscreteGaussian(1e39), "sigma"), (dpjax.Gaussian(1e39), "sigma")],
)
def test_exact_refuses_noise_that_overflows_the_output(mech, name):
    """float32 output: noise of scale 1e39 released ±inf entries; refused like the float tier refuses it."""
    with pytest.raises(ValueError, match=f"{name} must be at most .* float32 output"):
        dpjax.release(jax.random.key(0), jnp.zeros(4, jnp.float32), mech, numerics="exact")
    with jax.enable_x64(True):  # float64 output carries it
        out = np.asarray(dpjax.release(jax.random.key(0), jnp.zeros(4), mech, numerics="exact"))
    assert np.all(np.isfinite(out))


def test_exact_refuses_integer_noise_that_wraps():
    """int32 output of a discrete Laplace of scale 2^30: |noise| > 2^31 with probability e^-2 wrapped around."""
    with pytest.raises(ValueError, match="scale must be at most .* int32 output"):
        dpjax.release(jax.random.key(0), jnp.zeros(4, jnp.int32), dpjax.DiscreteLaplace(2.0**30), numerics="exact")
    out = dpjax.release(jax.random.key(0), jnp.zeros(4, jnp.float32), dpjax.DiscreteLaplace(2.0**30), numerics="exact")
    assert np.all(np.isfinite(np.asarray(out)))


@pytest.mark.parametrize("mech,name", [(dpjax.Laplace(1e-320), "scale"), (dpjax.Gaussian(1e-320), "sigma")])
def test_exact_refuses_scales_below_its_lattice(mech, name):
    """Laplace(1e-320) was refused as "scale must be finite, got inf" (its lattice granularity underflowed)."""
    with pytest.raises(ValueError, match=f"{name} must be at least .*granularity"):
        dpjax.release(jax.random.key(0), jnp.zeros(4), mech, numerics="exact")


# -- exact releases sharded over local devices ---------------------------------------------------------

_EXACT_SHARD_SCRIPT = """
import sys
import jax, jax.numpy as jnp, numpy as np
import dpjax
assert len(jax.devices()) == int(sys.argv[1]), jax.devices()
n = (1 << 16) + 3  # sharded above 2^16 records; not a multiple of 4: padded
x = jnp.linspace(-1000.0, 1000.0, n, dtype=jnp.float32)
xi = jnp.arange(n, dtype=jnp.int32) - n // 2
outs = [np.asarray(dpjax.release(jax.random.key(5), v, m, numerics="exact"), np.float64) for v, m in
        ((x, dpjax.Laplace(1.0)), (x, dpjax.Gaussian(2.0)), (xi, dpjax.DiscreteLaplace(0.5)),
         (xi, dpjax.DiscreteLaplace(5000.0)), (xi, dpjax.DiscreteGaussian(1.5)),
         (xi, dpjax.PrivacyBoosted(dpjax.DiscreteGaussian(10.0), dpjax.AbsoluteError(5.0), 0.9)))]
np.save(sys.argv[2], np.stack(outs))
"""


@pytest.mark.slow
def test_exact_release_is_identical_on_1_and_4_devices(tmp_path):
    import os
    import pathlib
    import subprocess
    import sys

    script = tmp_path / "exact_shard.py"
    script.write_text(_EXACT_SHARD_SCRIPT)
    root = str(pathlib.Path(__file__).resolve().parents[1])
    out = {}
    for n in (1, 4):
        env = dict(
            os.environ,
            XLA_FLAGS=f"--xla_force_host_platform_device_count={n}",
            JAX_PLATFORMS="cpu",
            PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
        )
        subprocess.run(
            [sys.executable, str(script), str(n), str(tmp_path / f"o{n}.npy")], check=True, env=env, timeout=600
        )
        out[n] = np.load(tmp_path / f"o{n}.npy")
    np.testing.assert_array_equal(out[1], out[4])


def test_randomized_response_host_completion_is_the_record_function(monkeypatch):
    """A rejected Lemire word (forced for about half the records here) is completed on the host with the
    record's next words: the release equals the host's exact function of every record's words."""
    from dpjax.exact.bits import key_pair

    rr = dpjax.RandomizedResponse(0.5, 5)
    n = 300
    values = jnp.asarray(np.arange(n) % 5, jnp.int32)
    monkeypatch.setattr(randomized_response, "rr_threshold", lambda k1: 1 << 63)
    jax.clear_caches()
    try:
        out = np.asarray(dpjax.release(jax.random.key(3), values, rr, numerics="exact"))
    finally:
        jax.clear_caches()
    keep = int(rr.exact_lattice().param)
    with jax.enable_x64(True):
        k0, k1 = (int(w) for w in np.asarray(key_pair(jax.random.key(3))))
    host = [
        randomized_response.exact_rr_record(
            lambda j, i=i: table_samplers.threefry_word(k0, k1, j, i), int(values[i]), keep, 4
        )
        for i in range(n)
    ]
    np.testing.assert_array_equal(out, host)
    assert (
        sum(
            table_samplers.threefry_word(k0, k1, 0, i) >= keep
            and table_samplers.threefry_word(k0, k1, 1, i) % (1 << 64) * 4 % (1 << 64) < (1 << 63)
            for i in range(n)
        )
        > 20
    )  # the host path really ran


def test_exact_refuses_answers_off_the_lattice_index_range():
    """|value| / granularity ≥ 2^62 (int64 lattice indices with room for the noise) is refused, nothing released."""
    x = jnp.asarray([0.0, 1e30, 2.0], jnp.float32)
    for mech in (dpjax.Laplace(1e-6), dpjax.Gaussian(1e-6)):
        with pytest.raises(ValueError, match="granularity must be below 2\\*\\*62"):
            dpjax.release(jax.random.key(0), x, mech, numerics="exact")


def _prefix_cases():
    boosted = dpjax.PrivacyBoosted(dpjax.DiscreteLaplace(7.5), dpjax.AbsoluteError(2.5), 0.8)
    return [
        dpjax.DiscreteLaplace(0.5),
        dpjax.DiscreteLaplace(3.0),
        dpjax.DiscreteLaplace(60.0),
        dpjax.DiscreteGaussian(3.0),
        dpjax.DiscreteGaussian(100.0),
        boosted,
    ]


def _prefix_args(mech):
    """(the one-scale sampler, its 63-bit thresholds T) of a one-scale mechanism's exact lattice."""

    lat = mech.exact_lattice()
    sampler = lat.sampler.one_scale(lat, int(lat.param), int(lat.shift))
    if isinstance(sampler, boosted.BoostedTable):
        return sampler, boosted.pb_icdf(sampler.spec)
    if isinstance(sampler, discrete_gaussian.DiscreteGaussianTable):
        return sampler, discrete_gaussian.dg_icdf(sampler.nvar)
    return sampler, discrete_laplace.dl_icdf(sampler.t, sampler.shift)


#: two of the six mechanisms (discrete Laplace 3, discrete Gaussian 100) in the default suite
@pytest.mark.parametrize(
    "mech",
    [m if i in (1, 4) else pytest.param(m, marks=pytest.mark.slow) for i, m in enumerate(_prefix_cases())],
    ids=repr,
)
def test_prefix_table_decides_only_prefixes_without_a_threshold(mech):
    """The 16-bit prefix table of HostBits releases, checked over all 2^16 prefixes against the samplers' thresholds
    directly: a prefix p holds the words whose low 63 bits lie in [v0, v1] = [(p mod 2^15) 2^48, v0 + 2^48 − 1], and
    the samplers' |Z| is #{k : T[k] ≤ v} (T nondecreasing: monotone in v), so the prefix decides Z exactly when no
    threshold lies in [v0, v1] (a threshold there splits it; one equal to v0 is a tie) and the count is inside the
    table; the entry is then ±count by the top bit, the sentinel otherwise. The device sampler on random completions
    of the decided prefixes gives the entry."""
    from dpjax.exact import lattice

    sampler, tab = _prefix_args(mech)
    table = lattice._prefix_table(sampler)
    assert table is not None and table.shape == (1 << 16,)
    assert np.all(np.diff(tab.astype(object)) >= 0)  # monotone: a count of thresholds below v
    p = np.arange(1 << 16, dtype=np.uint64)
    v0 = (p & np.uint64(0x7FFF)) << np.uint64(48)
    v1 = v0 | np.uint64((1 << 48) - 1)
    below, upto = np.searchsorted(tab, v0, side="left"), np.searchsorted(tab, v1, side="right")
    decided = (below == upto) & (upto < tab.size)
    want = np.where(decided, np.where(p >> np.uint64(15) == 1, -upto, upto), lattice._UNDECIDED)
    np.testing.assert_array_equal(table, want)
    assert decided.mean() >= lattice.PREFIX_MIN_DECIDED
    rng = np.random.default_rng(1)
    inner = np.repeat(p[decided], 4) << np.uint64(48) | (
        rng.integers(0, 1 << 48, 4 * int(decided.sum()), dtype=np.uint64)
    )
    with jax.enable_x64(True):
        z, flag = sampler.noise(lattice._WordTable(inner[None, :]), None, ())
    assert not np.asarray(flag).any()
    np.testing.assert_array_equal(np.asarray(z), np.repeat(table[decided], 4))


def test_prefix_table_serves_only_where_it_decides_most_records():
    """Several-word discrete Laplace scales and scales whose thresholds spread over most prefixes read whole words."""
    from dpjax.exact import lattice

    for mech in (dpjax.DiscreteLaplace(2000.0), dpjax.DiscreteGaussian(3000.0)):
        sampler, _ = _prefix_args(mech)
        assert lattice._prefix_table(sampler) is None


def _count_calls(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(name) or real(*a, **k))
    return calls


@pytest.mark.slow
@pytest.mark.parametrize("n", [1_000_000, pytest.param(10_000_000, marks=pytest.mark.slow)])
def test_host_bits_prefix_release_fits_the_law(monkeypatch, n):
    """HostBits releases by 16-bit prefixes (two bytes a record; the undecided records complete their word and run
    the sampler): χ² of the discrete Laplace, the discrete Gaussian and a boosted discrete law against their pmf,
    from a seeded source (deterministic)."""
    from dpjax.exact import lattice

    rng = np.random.default_rng(3)
    read = []
    bits = HostBits(lambda nbytes: read.append(nbytes) or rng.bytes(nbytes))
    prefix = _count_calls(monkeypatch, lattice, "_prefix_release")
    completed = _count_calls(monkeypatch, lattice, "_fast_lattice")
    boosted = dpjax.PrivacyBoosted(dpjax.DiscreteLaplace(7.5), dpjax.AbsoluteError(2.5), 0.8)
    for mech in (dpjax.DiscreteLaplace(3.0), dpjax.DiscreteGaussian(3.0), boosted):
        read.clear()
        out = np.asarray(dpjax.release(bits, jnp.zeros(n, jnp.int32), mech, numerics="exact"))
        assert read[0] == 2 * n and 0 < sum(read[1:]) < 8 * n // 200  # two bytes a record, 8 more for < 1/200 of them
        z = np.arange(-80, 81)
        with jax.enable_x64(True):
            pmf = np.exp(np.asarray(mech.exact_lattice().log_prob(jnp.asarray(z, jnp.float64), 0.0), np.float64))
        assert _chi2_pvalue(out, z, pmf) > 1e-4, mech
    assert len(prefix) == 3 and len(completed) == 3  # every release took the prefix path and completed some words


@pytest.mark.parametrize("tail,n,by_prefix", [(3, 20_000, False), (8, 200_000, True)])
def test_host_bits_release_with_host_completion(monkeypatch, tail, n, by_prefix):
    """``HostBits`` words run the same fixed-trip samplers: a table of whole words per record fed to the device (few
    records, or a table that leaves too many prefixes open), or 16-bit prefixes whose undecided records complete their
    word. Records past J's table (forced: P(J > K) ≥ 2^-tail) are flagged by the sampler and continue on the host
    from their words and further fresh words: the law is still the discrete Laplace (χ²)."""
    from dpjax.exact import lattice

    rng = np.random.default_rng(tail)  # a seeded source: deterministic test
    bits = HostBits(lambda nbytes: rng.bytes(nbytes))
    caches = (discrete_laplace.dl_icdf, discrete_laplace.dl_guide, lattice._prefix_table)
    for f in caches:
        f.cache_clear()
    jax.clear_caches()  # the tables are constants of the compiled release
    monkeypatch.setattr(discrete_laplace, "_DL_TAIL", tail)
    prefix = _count_calls(monkeypatch, lattice, "_prefix_release")
    host = _count_calls(monkeypatch, discrete_laplace, "exact_record")
    try:
        out = np.asarray(dpjax.release(bits, jnp.zeros(n, jnp.int32), dpjax.DiscreteLaplace(3.0), numerics="exact"))
    finally:
        for f in caches:
            f.cache_clear()
        jax.clear_caches()
    assert len(prefix) == by_prefix and len(host) > 200  # the host finished the records past the table
    z = np.arange(-60, 61)
    assert _chi2_pvalue(out, z, np.exp(-np.abs(z) / 3.0)) > 1e-4


@pytest.mark.parametrize(
    "mech", [dpjax.DiscreteLaplace(3.0), dpjax.DiscreteLaplace(2.0**20), dpjax.Laplace(1.0)], ids=repr
)
def test_host_bits_source_returning_the_wrong_length_is_refused(mech):
    """A source returning fewer (or more) bytes than asked is refused, on the prefix path and the whole-word ones."""
    for wrong in (lambda k: bytes(k - 1), lambda k: bytes(k + 8), lambda k: "x" * k):
        with pytest.raises(ValueError, match="source must return exactly"):
            dpjax.release(HostBits(wrong), jnp.zeros(1 << 16, jnp.float32), mech, numerics="exact")


def test_os_urandom_read_in_parallel_chunks_fills_every_byte(monkeypatch):
    """os.urandom is read in chunks on several threads into one buffer: every byte comes from a call, the calls ask
    for all of them, and an error in any thread is raised (no part of the buffer is left unfilled)."""
    import os
    import threading

    from dpjax.exact import bits

    asked = []

    def fake(k):
        asked.append(k)
        return b"\x01" * k

    monkeypatch.setattr(bits, "READ_THREADS", 2)
    monkeypatch.setattr(os, "urandom", fake)
    n = 3 * bits._READ_CHUNK + 5
    out = HostBits(os.urandom).prefixes(n)  # (the source is os.urandom: the parallel reader)
    assert len(asked) > 2 and sum(asked) == 2 * n and np.all(out == 0x0101)

    def failing(k):  # fails in the reading threads only: their error reaches the caller
        if threading.current_thread() is not threading.main_thread():
            raise OSError("no entropy")
        return fake(k)

    monkeypatch.setattr(os, "urandom", failing)
    with pytest.raises(OSError, match="no entropy"):
        HostBits(os.urandom).words((n,))


@pytest.mark.slow
def test_per_record_scales_with_few_distinct_values_run_the_one_scale_samplers():
    """Per-record parameters with a few distinct scales (or ε): each record's noise is that of the one-scale
    release of its own scale at the same record index (the fixed-trip samplers per group, record-addressed)."""
    n = 5000
    pick = np.arange(n) % 3 == 0
    x = jnp.linspace(-5, 5, n, dtype=jnp.float32)
    key = jax.random.key(1)
    for mixed, a, b in (
        (dpjax.Laplace(jnp.asarray(np.where(pick, 1.0, 2.5))), dpjax.Laplace(1.0), dpjax.Laplace(2.5)),
        (
            dpjax.DiscreteGaussian(jnp.asarray(np.where(pick, 0.5, 40.0))),
            dpjax.DiscreteGaussian(0.5),
            dpjax.DiscreteGaussian(40.0),
        ),
    ):
        got = np.asarray(dpjax.release(key, x, mixed, numerics="exact", start=7))
        want = np.where(
            pick,
            np.asarray(dpjax.release(key, x, a, numerics="exact", start=7)),
            np.asarray(dpjax.release(key, x, b, numerics="exact", start=7)),
        )
        np.testing.assert_array_equal(got, want)
    xi = jnp.asarray(np.arange(n) % 4, jnp.int32)
    rr = dpjax.RandomizedResponse(jnp.asarray(np.where(pick, 0.5, 2.0)), 4)
    want = np.where(
        pick,
        np.asarray(dpjax.release(key, xi, dpjax.RandomizedResponse(0.5, 4), numerics="exact")),
        np.asarray(dpjax.release(key, xi, dpjax.RandomizedResponse(2.0, 4), numerics="exact")),
    )
    np.testing.assert_array_equal(np.asarray(dpjax.release(key, xi, rr, numerics="exact")), want)


# -- per-record scales, any number of distinct values: the discrete Laplace's inverse CDF per record ------------


def _per_record_host(key, t, shift):
    from dpjax.exact.bits import key_pair

    with jax.enable_x64(True):
        k0, k1 = (int(w) for w in np.asarray(key_pair(key)))
    return [
        discrete_laplace.exact_per_record(
            lambda j, i=i: table_samplers.threefry_word(k0, k1, j, i), int(t[i]), int(shift[i])
        )
        for i in range(len(t))
    ]


def test_per_record_laplace_device_equals_exact_host_path():
    """Scales from 1/8 to 2^30 mixed record by record: the device's code is the host's exact function of each
    record's word stream (min{k : V < F(k)}, decided with further words against interval bounds of F)."""

    base = [(1, 3), (7, 3), (3, 0), (5000, 0), (1 << 20, 0), ((1 << 21) - 5, 0), (1 << 30, 0), (123456789, 10)]
    n = 400
    t = np.asarray([base[i % len(base)][0] for i in range(n)], np.uint64)
    shift = np.asarray([base[i % len(base)][1] for i in range(n)], np.uint64)
    with jax.enable_x64(True):
        words = ThreefryWords(jax.random.key(3), (n,))
        z, flag = (
            np.asarray(a)
            for a in jax.jit(
                lambda: discrete_laplace.laplace_noise_per_record(words, jnp.asarray(t), jnp.asarray(shift))
            )()
        )
    assert not flag.any()
    np.testing.assert_array_equal(z, _per_record_host(jax.random.key(3), t, shift))


def _per_record_discrete_laplace_fit(monkeypatch, n, scales, seed):
    """χ² p-value of a release of per-record discrete Laplace scales (``scales`` repeated over n records, zero
    answers) against the mixture of their pmfs at the scales that ran; asserts that it took the float32 decision."""
    from dpjax.exact import lattice

    calls = []
    real = lattice._per_record_lattice
    monkeypatch.setattr(
        lattice,
        "_per_record_lattice",
        lambda *a, **k: calls.append(getattr(k["sampler"], "narrow", False)) or real(*a, **k),
    )
    b = jnp.asarray(np.resize(scales, n))
    lat = dpjax.DiscreteLaplace(b).exact_lattice()
    assert lattice._scale_groups((n,), lat.param, lat.shift, lat.granularity) is None
    out = np.asarray(
        dpjax.release(jax.random.key(seed), jnp.zeros(n, jnp.int32), dpjax.DiscreteLaplace(b), numerics="exact")
    )
    assert calls[0] is True
    z = np.arange(-int(40 * max(scales)), int(40 * max(scales)) + 1)
    run = np.ldexp(np.asarray(lat.param, np.float64), -np.asarray(lat.shift, np.int64))[: len(scales)]  # as run
    pmf = sum(np.tanh(0.5 / s) * np.exp(-np.abs(z) / s) for s in run) / len(run)
    return _chi2_pvalue(out, z, pmf)


def test_per_record_discrete_laplace_with_many_distinct_scales_fits_its_law(monkeypatch):
    """40 distinct scales (past the per-scale tables' 16) through dpjax.release: the pooled output fits the
    mixture of the 40 discrete Laplace pmfs (χ²), and the release takes the per-record program (its float32
    decision)."""
    assert _per_record_discrete_laplace_fit(monkeypatch, 200_000, np.linspace(0.5, 6.0, 40), 11) > 1e-4


@pytest.mark.slow
def test_per_record_discrete_laplace_float32_range_fits_its_law_1e6(monkeypatch):
    """The float32 decision's whole range of scales, 2^-5 … 2^5 (40 of them, geometric), over 2·10^6 records."""
    assert _per_record_discrete_laplace_fit(monkeypatch, 2_000_000, np.geomspace(2.0**-5, 2.0**5, 40), 12) > 1e-4


@pytest.mark.slow
def test_per_record_host_completion_is_the_same_release(monkeypatch):
    """With an error bound 2^38 times the assumed one most records are flagged and completed on the host: the
    release equals the host's exact function of every record's words (device and host agree; the host path ran)."""

    n = 300
    b = jnp.asarray(np.linspace(0.7, 900.0, n))
    lat = dpjax.DiscreteLaplace(b).exact_lattice()
    monkeypatch.setattr(table_samplers, "TRANSCENDENTAL_ERROR", 2.0**-8)
    jax.clear_caches()
    try:
        with jax.enable_x64(True):
            words = ThreefryWords(jax.random.key(5), (n,))
            _, flag = discrete_laplace.laplace_noise_per_record(
                words, jnp.asarray(np.asarray(lat.param)), jnp.asarray(np.asarray(lat.shift))
            )
        out = np.asarray(
            dpjax.release(jax.random.key(5), jnp.zeros(n, jnp.int32), dpjax.DiscreteLaplace(b), numerics="exact")
        )
    finally:
        jax.clear_caches()
    assert np.asarray(flag).mean() > 0.3
    np.testing.assert_array_equal(
        out, _per_record_host(jax.random.key(5), np.asarray(lat.param), np.asarray(lat.shift))
    )


def test_laplace_lattice_parameters_built_on_the_device_are_the_hosts():
    """The per-record Laplace release builds t = ⌈b/g⌉ and g = 2^(⌊log2 b⌋ − 20) from the scales' bits in its
    device program: the same integers and powers of two as laplace_lattice's numpy, on random scales over the
    whole exponent range it takes and on the edges (powers of two and their neighbours, significands needing
    no rounding or all of it, the smallest scale it takes, the largest float)."""
    from dpjax.exact import lattice
    from dpjax.kernels.discrete_laplace import DiscreteLaplace

    rng = np.random.default_rng(7)
    exps = np.arange(-1002, 1024)
    edges = np.concatenate(
        [
            np.ldexp(1.0, exps),
            np.nextafter(np.ldexp(1.0, exps[1:]), 0.0),
            np.nextafter(np.ldexp(1.0, exps), np.inf),
            np.ldexp(1.0 + 2.0**-21, exps[:-1]),
            np.ldexp(1.0 + 2.0**-20, exps[:-1]),
            [np.finfo(np.float64).max, 1.0, 1.5, 3.0, 0.1],
        ]
    )
    b = np.concatenate([edges, np.ldexp(rng.uniform(1.0, 2.0, 20000), rng.integers(-1002, 1023, 20000))])
    assert b.min() >= discrete_laplace.DEVICE_LAPLACE_MIN
    integer = (b >= 2.0**-40) & (b < 2.0**31)  # the discrete Laplace's range
    for bs, host, flag in (
        (b, lattice.laplace_lattice(b, DiscreteLaplace), False),
        (b[integer], lattice.discrete_laplace_lattice(b[integer], DiscreteLaplace), True),
    ):
        with jax.enable_x64(True):
            t, shift, g = jax.jit(lambda x: discrete_laplace.laplace_lattice_bits(x, flag))(jnp.asarray(bs))
        np.testing.assert_array_equal(np.asarray(t), np.asarray(host.param))
        np.testing.assert_array_equal(np.asarray(shift), np.broadcast_to(host.shift, bs.shape))
        np.testing.assert_array_equal(np.asarray(g), np.broadcast_to(host.granularity, bs.shape))


@pytest.mark.slow
def test_per_record_laplace_release_builds_its_lattice_on_the_device(monkeypatch):
    """A Laplace (and a discrete Laplace) with many per-record scales (float32 and int32 answers, Threefry and
    os.urandom words) releases
    exactly what its host-built lattice releases (the same key: bitwise), without building that lattice; a
    scale too large for the output dtype is refused by the check of the largest scale, and tiny scales (a
    lattice granularity below float64's normals) take the host lattice."""
    from dpjax.exact import lattice

    n = 3000
    key = jax.random.key(4)
    for scale in (np.linspace(1.0, 2.0, n), np.geomspace(1e-3, 1e9, n)):
        with jax.enable_x64(True):
            mech = dpjax.Laplace(jnp.asarray(scale))
        calls = []
        real = lattice.laplace_lattice
        for x in (jnp.linspace(-50, 50, n, dtype=jnp.float32), jnp.arange(n, dtype=jnp.int32) - 1500):
            want = np.asarray(dpjax.release(key, x, mech.exact_lattice(), numerics="exact", start=3))
            with monkeypatch.context() as patch:
                patch.setattr(lattice, "laplace_lattice", lambda b, k: calls.append(np.size(b)) or real(b, k))
                got = np.asarray(dpjax.release(key, x, mech, numerics="exact", start=3))
            np.testing.assert_array_equal(got, want)
            assert max(calls) == 1  # only the largest scale's lattice was built on the host
    with jax.enable_x64(True):
        dmech = dpjax.DiscreteLaplace(jnp.asarray(np.geomspace(0.01, 1e6, n)))
        small = dpjax.DiscreteLaplace(jnp.asarray(np.linspace(300.0, 9000.0, n)))  # every 1/τ ≤ 2^-8
    for m, x in (
        (dmech, jnp.arange(n, dtype=jnp.int32)),
        (dmech, jnp.linspace(-50, 50, n, dtype=jnp.float32)),
        (small, jnp.arange(n, dtype=jnp.int32)),
    ):
        np.testing.assert_array_equal(
            np.asarray(dpjax.release(key, x, m, numerics="exact")),
            np.asarray(dpjax.release(key, x, m.exact_lattice(), numerics="exact")),
        )
    out = dpjax.release(HostBits(), jnp.zeros(n, jnp.float32), mech, numerics="exact")
    assert np.isfinite(np.asarray(out)).all()
    with pytest.raises(ValueError, match="scale must be at most"):
        dpjax.release(key, jnp.zeros(n, jnp.float32), dpjax.Laplace(jnp.linspace(1.0, 1e35, n)), numerics="exact")
    for bad, match in (
        (np.linspace(1.0, 2.0**32, n), "below 2\\*\\*31"),
        (np.linspace(2.0**-45, 1.0, n), "at least 2"),
    ):
        with jax.enable_x64(True), pytest.raises(ValueError, match=match):
            dpjax.release(key, jnp.zeros(n, jnp.int32), dpjax.DiscreteLaplace(jnp.asarray(bad)), numerics="exact")
    with jax.enable_x64(True):
        tiny = dpjax.Laplace(jnp.asarray(np.geomspace(2.0**-1010, 1.0, n)))
        np.testing.assert_array_equal(
            np.asarray(dpjax.release(key, jnp.zeros(n), tiny, numerics="exact")),
            np.asarray(dpjax.release(key, jnp.zeros(n), tiny.exact_lattice(), numerics="exact")),
        )


def test_per_record_randomized_response_with_many_distinct_epsilons():
    """Per-record ε (300 distinct values): each record's keep threshold is its own, the release is the host's
    exact record function."""
    from dpjax.exact.bits import key_pair

    n = 300
    values = jnp.asarray(np.arange(n) % 4, jnp.int32)
    rr = dpjax.RandomizedResponse(jnp.asarray(np.linspace(0.1, 3.0, n)), 4)
    out = np.asarray(dpjax.release(jax.random.key(2), values, rr, numerics="exact"))
    keep = np.asarray(rr.exact_lattice().param)
    with jax.enable_x64(True):
        k0, k1 = (int(w) for w in np.asarray(key_pair(jax.random.key(2))))
    host = [
        randomized_response.exact_rr_record(
            lambda j, i=i: table_samplers.threefry_word(k0, k1, j, i), int(values[i]), int(keep[i]), 3
        )
        for i in range(n)
    ]
    np.testing.assert_array_equal(out, host)


def test_per_record_keep_thresholds_are_the_exact_integers_once_per_distinct_epsilon(monkeypatch):
    """Per-record ε whose keep thresholds T = ⌊2^64 e^ε/(e^ε + k − 1)⌋ − 1 straddle 2^63: every record's T is the
    60-digit decimal integer itself (they were once stored through float64, rounded by up to 2^10 — upward
    too, above the T the reported ε was computed from), and the exact arithmetic runs once per distinct
    value, not per record (here: 7 values over 70 000 records; σ of a Gaussian likewise)."""
    import decimal

    from dpjax.exact import lattice

    distinct = np.asarray([0.05, 0.3, 1.0, 1.0986, 1.1, 2.5, 6.0])
    eps = np.resize(distinct, 70_000)
    rr = dpjax.RandomizedResponse(jnp.asarray(eps), 4)
    lat = rr.exact_lattice()
    ctx = decimal.Context(prec=60)
    for i in range(len(distinct)):
        e = float(np.asarray(rr.epsilon)[i])  # (as stored: float32 outside x64)
        ex = ctx.exp(decimal.Decimal(e))
        want = int(ctx.divide(ex * 2**64, ex + 3).to_integral_value(rounding=decimal.ROUND_FLOOR)) - 1
        got = np.asarray(lat.param)[i :: len(distinct)]
        assert got.dtype == np.uint64 and all(int(v) == want for v in got), (e, want, int(got[0]))
        achieved = float(np.asarray(lat.noise.epsilon)[i])
        assert achieved >= float(ctx.ln(decimal.Decimal(want * 3) / decimal.Decimal(2**64 - want)))
    assert int(lat.param.min()) < 2**63 < int(lat.param.max())
    calls = []
    real = lattice._sigma_below
    monkeypatch.setattr(lattice, "_sigma_below", lambda q: calls.append(q) or real(q))
    lat = dpjax.Gaussian(jnp.asarray(np.resize([0.5, 3.0, 70.0], 70_000))).exact_lattice()
    assert len(calls) == 3 and np.asarray(lat.param)[3] == np.asarray(lat.param)[0]


def test_float64_transcendentals_are_within_the_assumed_error():
    """The per-record discrete Laplace's decisions assume XLA's float64 log, exp and log1p within
    table_samplers.TRANSCENDENTAL_ERROR (2^-48) relative: measured against 60-digit mpmath on the arguments it
    uses, they are within 2^-50 here (the platform margin: 4× headroom)."""
    import mpmath

    rng = np.random.default_rng(0)
    s = np.concatenate(
        [rng.uniform(0, 1, 3000), 2.0 ** -rng.uniform(0, 63, 3000), 1 - 2.0 ** -rng.uniform(1, 52, 1000)]
    )
    lam = np.concatenate([2.0 ** rng.uniform(-41, 5, 3000), rng.uniform(0, 10, 1000)])
    with jax.enable_x64(True):
        e = np.asarray(jax.jit(lambda x: jnp.exp(-x))(lam))
        cases = (
            ("log", s, np.asarray(jax.jit(jnp.log)(s)), mpmath.log),
            ("exp", -lam, e, mpmath.exp),
            ("log1p", e, np.asarray(jax.jit(jnp.log1p)(e)), mpmath.log1p),
        )
    worst = 0.0
    with mpmath.workdps(60):
        for _, args, got, fn in cases:
            for a, g in zip(args, got):
                ref = fn(mpmath.mpf(float(a)))
                if ref != 0:
                    worst = max(worst, float(abs((mpmath.mpf(float(g)) - ref) / ref)))
    assert worst < 2.0**-50 and table_samplers.PLATFORM_MARGIN * table_samplers.TRANSCENDENTAL_ERROR >= 2.0**-50, worst


def test_float32_transcendentals_are_within_the_assumed_error():
    """The per-record discrete Laplace's float32 decision assumes XLA's float32 exp within
    table_samplers.TRANSCENDENTAL_ERROR32 (2^-18) relative and its log within that times |log r| + 1, on the
    arguments it uses (−λ for the scales 2^-5 … 2^5; r = q 2^32/((1 + q) W) from below e^-32 to 2^32, near 1 and
    near powers of two): measured against float64 (whose own error, ~2^-53, is negligible here), they are within
    2^-22 (16× headroom)."""

    rng = np.random.default_rng(0)
    f32 = np.float32
    lam = (2.0 ** rng.uniform(-5.01, 5.01, 300_000)).astype(f32)
    ones = 1.0 + np.arange(-(2**15), 2**15) * 2.0**-24
    pow2 = np.ldexp(1.0 + rng.integers(-8, 9, 20_000) * 2.0**-23, rng.integers(-48, 33, 20_000))
    r = np.concatenate([2.0 ** rng.uniform(-48, 32, 300_000), ones[ones != 1.0], pow2]).astype(f32)
    with jax.enable_x64(True):
        e = np.asarray(jax.jit(lambda x: jnp.exp(-x))(jnp.asarray(lam)), np.float64)
        lg = np.asarray(jax.jit(jnp.log)(jnp.asarray(r)), np.float64)
    ref_e, ref_l = np.exp(-lam.astype(np.float64)), np.log(r.astype(np.float64))
    worst = max(np.max(np.abs(e - ref_e) / ref_e), np.max(np.abs(lg - ref_l) / (np.abs(ref_l) + 1.0)))
    assert worst < table_samplers.TRANSCENDENTAL_ERROR32 / 16, np.log2(worst)


def _words_at_edges(taus, rng):
    """Word 0 of records placed around the float32 decision's edges for scales ``taus``: W/2^31 beside c q^k (where
    the floor of x = τ log(c/S) changes) at offsets from 0 to 2^20 of W, either side, and W = 1, 2, 3, 2^31; random
    low halves and signs. Returns (words uint64, the index of each word's scale)."""
    offsets = np.concatenate([[0, 1, 2, 3], 2 ** np.arange(4, 21)])
    offsets = np.concatenate([-offsets[::-1], offsets])
    ws, which = [], []
    for i, tau in enumerate(taus):
        q = math.exp(-1.0 / tau)
        c = 2 * q / (1 + q)
        k = np.arange(0, int(40 * tau) + 2)
        edge = np.round(c * q**k * 2.0**31)
        big = np.unique(
            np.concatenate([np.clip((edge[:, None] + offsets[None, :]).ravel(), 1, 2**31), [1, 2, 3, 2**31]])
        )
        big = big.astype(np.uint64)
        ws.append(big)
        which.append(np.full(big.size, i))
    big, which = np.concatenate(ws), np.concatenate(which)
    hi = (np.uint64(1 << 31) - big) | (rng.integers(0, 2, big.size).astype(np.uint64) << np.uint64(31))
    return (hi << np.uint64(32)) | rng.integers(0, 2**32, big.size, dtype=np.uint64), which


def test_float32_per_record_decision_equals_the_float64_and_host_decisions():
    """The discrete Laplace's float32 decision (per-record scales in [2^-5, 2^5], as the lattice builds them) decides
    |Z| exactly as the float64 program and the host's exact function do, on random words and on words placed at
    the edges of its decisions (beside every c q^k where the floor of x changes, W = 1, 2, 3, 2^31); it leaves open
    the words within its error bound of an edge (many of the placed ones) and fewer than 2·10^-3 of random ones."""
    from dpjax.exact import lattice
    from dpjax.kernels.discrete_laplace import DiscreteLaplace

    rng = np.random.default_rng(5)
    b = np.concatenate([[2.0**-5, 2.0**5, 0.5, 1.0, 3.0, 31.9], 2.0 ** rng.uniform(-5, 5, 10)])
    lat = lattice.discrete_laplace_lattice(b, DiscreteLaplace)
    taus = np.ldexp(np.asarray(lat.param, np.float64), -np.asarray(lat.shift, np.int64))
    assert taus.min() >= 2.0**table_samplers.NARROW_MIN_LOG2 and taus.max() <= 2.0**table_samplers.NARROW_MAX_LOG2
    edge, at = _words_at_edges(taus, rng)
    n_rand = 200_000
    rand = rng.integers(0, 2**64, n_rand, dtype=np.uint64)
    words = np.concatenate([edge, rand])
    which = np.concatenate([at, rng.integers(0, b.size, n_rand)])
    t, shift = np.asarray(lat.param)[which], np.asarray(lat.shift)[which]
    with jax.enable_x64(True):
        src = lattice._WordTable(jnp.asarray(words[None, :]))
        z32, open32 = (
            np.asarray(a)
            for a in jax.jit(
                lambda: discrete_laplace.laplace_noise_per_record32(src, jnp.asarray(t), jnp.asarray(shift))
            )()
        )
        z64, open64 = (
            np.asarray(a)
            for a in jax.jit(
                lambda: discrete_laplace.laplace_noise_per_record(src, jnp.asarray(t), jnp.asarray(shift))
            )()
        )
    both = ~open32 & ~open64
    assert both[: edge.size].sum() > 5000 and open32[: edge.size].sum() > 5000  # decided and open ones at the edges
    np.testing.assert_array_equal(z32[both], z64[both])
    assert not (~open32 & open64).any()  # what float32 decides, float64 decides (only W = 1 aside, open in both)
    assert open32[edge.size :].mean() < 2e-3  # 7·10^-4 here (scales up to 2^5)
    # the host's exact function on a sample of the float32-decided words at the edges and on every W ≤ 3
    near = np.flatnonzero(~open32[: edge.size])
    small = np.flatnonzero((words[: edge.size] >> np.uint64(32) & np.uint64(0x7FFFFFFF)) >= np.uint64(2**31 - 3))
    near = np.concatenate([near[:: max(1, near.size // 150)], small])
    ext = lambda i: lambda j: int(words[i]) if j == 0 else table_samplers.threefry_word(1, 2, j, int(i))
    host = [discrete_laplace.exact_per_record(ext(i), int(t[i]), int(shift[i])) for i in near]
    np.testing.assert_array_equal(np.where(open32[near], host, z32[near]), host)


@pytest.mark.slow
def test_per_record_discrete_laplace_takes_the_float32_decision_then_float64_then_host(monkeypatch):
    """A discrete Laplace with per-record scales in the float32 range releases through the float32 decision; its open
    records go through the float64 program on the device (their own records' words) and only that program's open ones
    to the host: with error bounds 2^8 (float32) and 2^38 (float64) times the assumed ones, all three stages run and
    the release is the host's exact function of every record's words. With the assumed bounds: bitwise the release of
    its host-built lattice (the float64 program on every record), Threefry and os.urandom words, int32 and float32
    answers."""
    from dpjax.exact import lattice

    calls = []
    real = lattice._per_record_lattice
    monkeypatch.setattr(
        lattice,
        "_per_record_lattice",
        lambda *a, **k: calls.append((getattr(k["sampler"], "narrow", False), a[2].shape[0])) or real(*a, **k),
    )
    n = 400
    b = jnp.asarray(np.linspace(0.04, 30.0, n))
    with jax.enable_x64(True):
        mech = dpjax.DiscreteLaplace(b)
        lat = mech.exact_lattice()
    monkeypatch.setattr(table_samplers, "TRANSCENDENTAL_ERROR32", 2.0**-10)
    monkeypatch.setattr(table_samplers, "TRANSCENDENTAL_ERROR", 2.0**-8)
    jax.clear_caches()
    host_runs = []
    real_host = discrete_laplace.exact_per_record
    monkeypatch.setattr(discrete_laplace, "exact_per_record", lambda *a: host_runs.append(1) or real_host(*a))
    try:
        out = np.asarray(dpjax.release(jax.random.key(5), jnp.zeros(n, jnp.int32), mech, numerics="exact"))
    finally:
        monkeypatch.undo()
        jax.clear_caches()
    assert calls[0] == (True, n) and calls[1][0] is False and 16 <= calls[1][1] < n  # float32, then a padded subset
    assert 0 < len(host_runs) < calls[1][1]
    np.testing.assert_array_equal(
        out, _per_record_host(jax.random.key(5), np.asarray(lat.param), np.asarray(lat.shift))
    )

    n = 20_000
    with jax.enable_x64(True):
        mech = dpjax.DiscreteLaplace(jnp.asarray(np.linspace(0.5, 5.0, n)))
    for x in (jnp.asarray(np.arange(n) % 97 - 40, jnp.int32), jnp.linspace(-50, 50, n, dtype=jnp.float32)):
        np.testing.assert_array_equal(
            np.asarray(dpjax.release(jax.random.key(9), x, mech, numerics="exact", start=5)),
            np.asarray(dpjax.release(jax.random.key(9), x, mech.exact_lattice(), numerics="exact", start=5)),
        )
    source = lambda: HostBits(np.random.default_rng(4).bytes)
    x = jnp.asarray(np.arange(n) % 97 - 40, jnp.int32)
    np.testing.assert_array_equal(
        np.asarray(dpjax.release(source(), x, mech, numerics="exact")),
        np.asarray(dpjax.release(source(), x, mech.exact_lattice(), numerics="exact")),
    )


def test_flagged_records_are_found_on_the_device():
    """The device search for the records awaiting the host (blocks of 32, then the rows of the flagged blocks) finds
    exactly the sentinels' indices below n: NaN in float outputs, the integer minimum in integer ones, none, all,
    n not a multiple of the block, an output padded past n (sharded releases)."""
    from dpjax.exact import lattice

    rng = np.random.default_rng(2)
    for n, rate, dtype, extra in (
        (1000, 0.01, np.float32, 0),
        (10_007, 0.001, np.int32, 0),
        (333, 0.0, np.float64, 0),
        (70, 1.0, np.float32, 0),
        (5000, 0.02, np.int64, 13),
        (100_000, 3e-5, np.float32, 40),
    ):
        with jax.enable_x64(True):
            mark = rng.random(n + extra) < rate
            sentinel = lattice._sentinel(np.dtype(dtype))
            out = np.where(mark, sentinel, rng.integers(-1000, 1000, n + extra)).astype(dtype)
            found = lattice._flagged(jnp.asarray(out), n)
        np.testing.assert_array_equal(found, np.flatnonzero(mark[:n]))


def test_lattice_value_of_float_noise_is_the_integer_sums():
    """The lattice value g·(⌊v/g + ½⌋ + z) from integer-valued float64 noise and v·(1/g) (the per-record Laplace
    program's) is bitwise the one from int64 noise and v/g: at ties v/g = k + ½, at sums past 2^53 (rounded once
    either way), for float32 and float64 answers (|v/g| < 2^62, as the releases check) and outputs, g from 2^-1000
    to 2^900."""
    from dpjax.exact import lattice

    rng = np.random.default_rng(8)
    n = 40_000
    with jax.enable_x64(True):
        k = np.concatenate([rng.integers(-(2**24), 2**24, n // 2), rng.integers(-(2**61), 2**61, n - n // 2)])
        half = rng.random(n) < 0.5
        x = k.astype(np.float64) + np.where(half, 0.5, rng.random(n))
        z = np.concatenate([rng.integers(-(2**40), 2**40, n // 2), rng.integers(-(2**30), 2**30, n - n // 2)])
        for dt, (lo, hi) in ((np.float32, (-120, 40)), (np.float64, (-1000, 900))):
            g = np.ldexp(1.0, rng.integers(lo, hi + 1, n))
            v = (x * g).astype(dt)
            assert np.all(np.abs(v.astype(np.float64) / g) < 2.0**62)
            for out_dt in (jnp.float32, jnp.float64):
                want = np.asarray(jax.jit(lambda v, z, g: lattice._lattice_value(v, z, g, False, out_dt))(v, z, g))
                got = np.asarray(
                    jax.jit(
                        lambda v, z, g: lattice._lattice_value(
                            v, z.astype(jnp.float64), g, False, out_dt, discrete_laplace.reciprocal_pow2(g)
                        )
                    )(v, z, g)
                )
                np.testing.assert_array_equal(got, want)


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
            assert _chi2_pvalue(out, z, pmf) > 1e-4, (sigma, dt)
    z = np.arange(-60, 61)
    pmf = np.exp(-(z.astype(float) ** 2) / (2 * 2.5**2))
    per = dpjax.DiscreteGaussian(jnp.full(n, 2.5))  # per-record σ: the fixed proposal tables
    out = np.asarray(dpjax.release(jax.random.key(2), jnp.zeros(n, jnp.int32), per, numerics="float"))
    assert _chi2_pvalue(out, z, pmf) > 1e-4


class _CraftedWords:
    """Word 0 of every record given (a uint64 array): ``halves`` as :class:`ThreefryWords` serves them."""

    def __init__(self, u):
        self.u = np.asarray(u, np.uint64)
        self.records = jnp.arange(self.u.size, dtype=jnp.uint32)

    def halves(self, j, records=None):
        assert j == 0
        return jnp.asarray((self.u >> np.uint64(32)).astype(np.uint32)), jnp.asarray(self.u.astype(np.uint32))


@pytest.mark.parametrize("nvar", [5, 2**22 + 77])
def test_device_search_on_32_bit_halves(nvar):
    """The one-word search compares 32-bit halves: words whose high half equals a threshold's (just below it, on it,
    just above it) are decided by the low halves in a long table (exactly: |Z| = #{T ≤ v}, open only on a tie) and
    left open for the host in a short one (≤ EXACT_LOW_ABOVE thresholds); every decided record is the host's exact
    value, and the host completes the open ones to the same function of the word."""

    tab = discrete_gaussian.dg_icdf(nvar)
    ks = np.linspace(0, tab.size - 1, 12).astype(np.int64)
    near = np.concatenate([tab[ks] - np.uint64(1), tab[ks], tab[ks] + np.uint64(1)])
    far = (tab[ks] & ~np.uint64(0xFFFFFFFF)) - np.uint64(1)  # below the threshold's high half: decided by it
    v = np.concatenate([near, far[far < tab[ks]]])
    u = np.concatenate([v, v | np.uint64(1 << 63)])  # both signs
    with jax.enable_x64(True):
        z, flag = (
            np.asarray(a)
            for a in table_samplers.symmetric_noise(_CraftedWords(u), tab, *discrete_gaussian.dg_guide(nvar))
        )
    host = np.array([discrete_gaussian.exact_gaussian_record(lambda j, w=int(w): w, nvar) for w in u])
    ties = np.isin(u & np.uint64((1 << 63) - 1), tab)  # (V against F: the further words decide)
    count = np.searchsorted(tab, u & np.uint64((1 << 63) - 1), side="right")
    np.testing.assert_array_equal(np.where(u >> np.uint64(63) == 1, -count, count)[~ties], host[~ties])
    np.testing.assert_array_equal(z[~flag], host[~flag])
    if tab.size > table_samplers.EXACT_LOW_ABOVE:
        np.testing.assert_array_equal(flag, ties | (count == tab.size))  # a tie, or past the table
    else:
        same_high = np.isin((u & np.uint64((1 << 63) - 1)) >> np.uint64(32), tab >> np.uint64(32))
        assert flag[same_high].all() and not flag[~same_high & (count < tab.size)].any()


def test_host_completion_compiles_once_per_size_class(monkeypatch):
    """Flagged records (forced: P(J > K) ≥ 2^-3) are completed on the host and written back by device steps padded
    to a size class: a second release with another count of flagged records in the same class compiles nothing
    (each count compiled its own small programs before, 0.1 s apiece: seconds per release)."""
    from jax._src import monitoring

    mech = dpjax.DiscreteLaplace(3.0)
    x = jnp.linspace(-100.0, 100.0, 1200, dtype=jnp.float32)  # float answers: the lattice value on the host side too
    caches = (discrete_laplace.dl_icdf, discrete_laplace.dl_guide)
    for f in caches:
        f.cache_clear()
    jax.clear_caches()
    monkeypatch.setattr(discrete_laplace, "_DL_TAIL", 3)
    compiled = []

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiled.append(event)

    try:
        first = np.asarray(dpjax.release(jax.random.key(1), x, mech, numerics="exact"))
        monitoring.register_event_duration_secs_listener(listen)
        try:
            second = np.asarray(dpjax.release(jax.random.key(2), x, mech, numerics="exact"))
        finally:
            monitoring.unregister_event_duration_listener(listen)
        lat = mech.exact_lattice()
        counts = [
            int(
                (
                    np.abs(np.round(o - np.round(x))) >= len(discrete_laplace.dl_icdf(int(lat.param), int(lat.shift)))
                ).sum()
            )
            for o in (first, second)
        ]
    finally:
        for f in caches:
            f.cache_clear()
        jax.clear_caches()
    assert counts[0] != counts[1] and all(64 < c <= 128 for c in counts), counts  # one size class, two counts
    assert compiled == []


def test_exact_lattice_hooks_belong_to_the_class_that_defines_the_lattice():
    """The per-record device routes are declared by the optional hooks ``exact_lattice_scale`` and
    ``exact_lattice_epsilon`` (``None`` where not offered): a subclass with its own ``exact_lattice`` does not inherit
    its parent's hooks (its release would build the parent's lattice in the device program), and a hook without the
    lattice it describes is refused when the class is defined."""
    from dpjax.exact import lattice

    assert dpjax.Gaussian.exact_lattice_scale is None and dpjax.Laplace.exact_lattice_scale is not None
    assert dpjax.RandomizedResponse.exact_lattice_epsilon is not None

    @dpjax.pytree_dataclass
    class Wider(dpjax.Laplace):
        def exact_lattice(self):
            return dpjax.Laplace(2 * self.scale).exact_lattice()

    b = jnp.linspace(1.0, 2.0, 100)
    assert Wider.exact_lattice_scale is None and lattice._device_laplace_scales(Wider(b)) is None
    assert lattice._device_laplace_scales(dpjax.Laplace(b)) is not None
    with pytest.raises(TypeError, match="exact_lattice_scale without the exact_lattice"):

        class Scaled(dpjax.Laplace):
            def exact_lattice_scale(self):
                return 2 * self.scale
