"""Exact PB-DP over the discrete kernels (``PrivacyBoosted(DiscreteGaussian/DiscreteLaplace, AbsoluteError,
rho).exact_lattice()``): the boosted law itself, drawn by one exact inverse-CDF table of |N| with the
accountant's keep probability; ties and the tail completed on the host from the record's own words."""

from fractions import Fraction

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from scipy import stats

import dpjax
from dpjax.exact import ThreefryWords, table_samplers
from dpjax.exact.laws import boosted

MECHS = {
    "dg(10) tau 5 rho .9": dpjax.PrivacyBoosted(dpjax.DiscreteGaussian(10.0), dpjax.AbsoluteError(5.0), 0.9),
    "dl(7.5) tau 2.5 rho .8": dpjax.PrivacyBoosted(dpjax.DiscreteLaplace(7.5), dpjax.AbsoluteError(2.5), 0.8),
    "dl(4) tau 3 rho 1": dpjax.PrivacyBoosted(dpjax.DiscreteLaplace(4.0), dpjax.AbsoluteError(3.0), 1.0),
}


def _pmf(mech, z):
    with jax.enable_x64(True):
        return np.exp(np.asarray(mech.log_prob(jnp.asarray(z, jnp.float64), 0.0)))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MECHS))
def test_exact_boosted_release_fits_the_boosted_law(name):
    """χ² of the release's noise against the boosted pmf (the accountant's law), and the coverage event
    Pr[|N| ≤ τ] = ρ at the hardest answer (every answer: the region is translation invariant)."""
    mech = MECHS[name]
    n = 200_000
    out = np.asarray(dpjax.release(jax.random.key(7), jnp.zeros(n, jnp.int32), mech, numerics="exact"))
    assert out.dtype == np.int32
    z = np.arange(-200, 201)
    p = _pmf(mech, z)
    counts = np.array([(out == k).sum() for k in z])
    keep = n * p >= 10
    obs = np.append(counts[keep], n - counts[keep].sum())
    exp = np.append(n * p[keep], n * (1.0 - p[keep].sum()))
    ok = exp > 0
    assert stats.chisquare(obs[ok], exp[ok] * obs[ok].sum() / exp[ok].sum()).pvalue > 1e-4
    cover = float(np.asarray(mech.coverage(0.0)))
    inside = (np.abs(out) <= float(mech.region.tau)).mean()
    assert abs(inside - cover) < 5 * np.sqrt(cover * (1 - cover) / n) + 1e-9, (inside, cover)
    assert cover >= float(mech.rho) - 1e-6


@pytest.mark.slow
def test_exact_boosted_table_floors_are_exact():
    """T[k] = ⌊2^63 P(|N| ≤ k)⌋ against a 400-digit evaluation of the boosted law with the same keep."""
    mech = MECHS["dg(10) tau 5 rho .9"]
    spec = boosted.boosted_spec(mech.exact_lattice().noise)
    keep = mpmath.mpf(spec[4]) / 2 ** spec[5]
    with mpmath.workdps(400):
        w = [mpmath.exp(-(mpmath.mpf(k) ** 2) / 200) * (1 if k <= 5 else keep) for k in range(2000)]
        total = w[0] + 2 * mpmath.fsum(w[1:])
        cum = w[0]
        tab = boosted.pb_icdf(spec)
        for k, t in enumerate(tab):
            if k:
                cum += 2 * w[k]
            assert int(t) == int(mpmath.floor(cum / total * 2**63)), k
    assert 0 < keep < 1


@pytest.mark.parametrize(
    "name", [pytest.param("dg(10) tau 5 rho .9", marks=pytest.mark.slow), "dl(7.5) tau 2.5 rho .8"]
)
def test_exact_boosted_device_equals_host_record_function(name):
    """The device's code is the host's exact function of each record's word stream."""
    spec = boosted.boosted_spec(MECHS[name].exact_lattice().noise)
    n = 300
    with jax.enable_x64(True):
        words = ThreefryWords(jax.random.key(3), (n,))
        code = np.asarray(jax.jit(lambda: boosted.boosted_code(words, n, spec))())
        k0, k1 = int(words._k0), int(words._k1)
    host = [
        boosted.exact_boosted_record(lambda j, i=i: table_samplers.threefry_word(k0, k1, j, i), spec) for i in range(n)
    ]
    assert not (code & 1).any()
    np.testing.assert_array_equal(code >> 8, host)


@pytest.mark.slow
def test_exact_boosted_host_completion_is_the_same_release(monkeypatch):
    """With the table cut where P(|N| > k) < 2^-2 a quarter of the records are completed on the host (further
    words against interval bounds): the release equals the host's exact record function everywhere."""
    mech = MECHS["dl(7.5) tau 2.5 rho .8"]
    spec = boosted.boosted_spec(mech.exact_lattice().noise)
    caches = (boosted.pb_icdf, boosted.pb_guide)
    for f in caches:
        f.cache_clear()
    jax.clear_caches()
    monkeypatch.setattr(table_samplers, "ICDF_TAIL", 2)
    try:
        n = 400
        out = np.asarray(dpjax.release(jax.random.key(4), jnp.zeros(n, jnp.int32), mech, numerics="exact"))
        cut = len(boosted.pb_icdf(spec))
        with jax.enable_x64(True):
            k0, k1 = (int(w) for w in np.asarray(jax.random.bits(jax.random.key(4), (2,), jnp.uint32)))
        host = [
            boosted.exact_boosted_record(lambda j, i=i: table_samplers.threefry_word(k0, k1, j, i), spec)
            for i in range(n)
        ]
    finally:
        for f in caches:
            f.cache_clear()
        jax.clear_caches()
    assert (np.abs(out) >= cut).mean() > 0.1  # the host path ran
    np.testing.assert_array_equal(out, host)


@pytest.mark.slow
def test_exact_boosted_accounts_the_mechanism_run():
    """The accounting view is the boosted mechanism itself (float64 parameters, the law the table draws),
    answers rounded to ℤ; the keep probability drawn is the accountant's float64 exp(log(1 − q)) exactly."""
    mech = MECHS["dg(10) tau 5 rho .9"]
    lat = mech.exact_lattice()
    assert float(np.asarray(lat.granularity)) == 1.0
    z = np.arange(-60.0, 61.0)
    with jax.enable_x64(True):
        np.testing.assert_allclose(np.asarray(lat.log_prob(z, 0.0)), np.asarray(mech.log_prob(z, 0.0)), rtol=1e-6)
        np.testing.assert_array_equal(np.asarray(lat.neighbour_pairs(1.0)[1]), np.asarray(mech.neighbour_pairs(1.0)[1]))
        spec = boosted.boosted_spec(lat.noise)
        assert Fraction(spec[4], 1 << spec[5]) == Fraction(float(jnp.exp(lat.noise.log1m_boosting_rate)))


def test_exact_boosted_refusals():
    with pytest.raises(ValueError, match="RelativeError"):
        dpjax.PrivacyBoosted(dpjax.DiscreteGaussian(3.0), dpjax.RelativeError(0.1, 2.0), 0.9).exact_lattice()
    with pytest.raises(ValueError, match="DiscreteGaussian or DiscreteLaplace kernels, got Gaussian"):
        dpjax.PrivacyBoosted(dpjax.Gaussian(3.0), dpjax.AbsoluteError(2.0), 0.9).exact_lattice()
    with pytest.raises(ValueError, match="sigma must be at most"):
        dpjax.PrivacyBoosted(dpjax.DiscreteGaussian(1e6), dpjax.AbsoluteError(2.0), 0.9).exact_lattice()
    # per-record kernel scales (a batch of boosted laws, each its own table) are refused before anything is drawn,
    # naming the parameter: the one-scale release is the only exact route of a boosted mechanism
    with pytest.raises(ValueError, match="needs one sigma for all records, got shape"):
        dpjax.release(
            jax.random.key(0),
            jnp.zeros(64, jnp.int32),
            dpjax.PrivacyBoosted(dpjax.DiscreteGaussian(1.0 + np.arange(64.0)), dpjax.AbsoluteError(5.0), 0.9),
            numerics="exact",
        )


@pytest.mark.slow
def test_cli_boosted_discrete_gaussian_runs_exact(capsys):
    from dpjax import cli

    assert (
        cli.main(
            [
                "release",
                "--seed",
                "0",
                "--mechanism",
                "boosted",
                "--kernel",
                "discrete-gaussian",
                "--clip",
                "100",
                "--region",
                "absolute",
                "--tau",
                "150",
                "--rho",
                "0.9",
                "--numerics",
                "exact",
            ]
        )
        == 0
    )
    assert "numerics: exact" in capsys.readouterr().out
