"""The exact tier's lattice releases (dpjax.exact.lattice): releases that defeat the floating-point attack the
float tier fails, honest accounting of the lattice mechanism actually run, refusals by name, sharding, the
prefix tables of ``HostBits`` releases, per-record parameters, the host completion of flagged records."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import accounting
import dpjax
from dpjax.exact import HostBits
from dpjax.exact.laws import boosted, discrete_gaussian, discrete_laplace
from goodness_of_fit import chi2_pvalue


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
    [m if i == 4 else pytest.param(m, marks=pytest.mark.slow) for i, m in enumerate(_prefix_cases())],
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
        assert chi2_pvalue(out, z, pmf) > 1e-4, mech
    assert len(prefix) == 3 and len(completed) == 3  # every release took the prefix path and completed some words


@pytest.mark.parametrize(
    "tail,n,by_prefix", [pytest.param(3, 20_000, False, marks=pytest.mark.slow), (8, 200_000, True)]
)
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
    assert chi2_pvalue(out, z, np.exp(-np.abs(z) / 3.0)) > 1e-4


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
