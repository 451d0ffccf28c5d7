"""The accountant compiles per shape bucket, not per parameter value (issue 30): a new scale, a new
mechanism in a composition, a new DP-SGD setting or calibration target meets programs already
compiled; the Accountant composes a new kind onto its running total."""

import contextlib
import functools
import itertools

import dp_accounting
import jax
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant

import accounting
import dpjax
from accounting.privacy_loss import distribution

_COMPILE = "/jax/core/compile/backend_compile_duration"


@contextlib.contextmanager
def counting_compiles():
    """Yields a list holding the names of the XLA programs compiled inside the block."""
    names = []

    def listener(event, secs, **kwargs):
        if event == _COMPILE:
            names.append(kwargs.get("fun_name"))

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield names
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def _epsilon(mechs):
    total = functools.reduce(lambda a, b: a.compose(b), [accounting.pld(m) for m in mechs])
    return float(total.get_epsilon_for_delta(1e-5))


def test_a_new_laplace_scale_reuses_the_compiled_build():
    # grids of 819 and 637 points: one power-of-two length (the old ladder gave them 960 and 640)
    _epsilon([dpjax.Laplace(20.0)])
    with counting_compiles() as names:
        eps = _epsilon([dpjax.Laplace(25.7)])
    assert names == [] and eps == pytest.approx(1 / 25.7, rel=1e-3)


@pytest.mark.slow
def test_composing_distinct_mechanisms_reuses_programs():
    """A chain of distinct Gaussians and Laplaces compiles per grid length; a second chain of other
    scales in the same octaves builds on compiled programs (each new scale had a build of its own
    length, and each composition programs of its pair of sizes and trim window)."""
    first = [
        dpjax.Gaussian(sigma=21.0),
        dpjax.Laplace(23.0),
        dpjax.Gaussian(sigma=25.0),
        dpjax.Laplace(27.0),
        dpjax.Gaussian(sigma=23.0),
        dpjax.Laplace(25.0),
    ]
    _epsilon(first)
    second = [
        dpjax.Gaussian(sigma=22.0),
        dpjax.Laplace(24.0),
        dpjax.Gaussian(sigma=26.0),
        dpjax.Laplace(28.0),
        dpjax.Gaussian(sigma=24.0),
        dpjax.Laplace(26.0),
    ]
    with counting_compiles() as names:
        eps = _epsilon(second)
    # no build; at most the programs of one new total length (composition, trim, pad, query)
    assert "jit(_build_jit)" not in names and len(names) <= 5, names
    # dp_accounting's PLD accountant on the same events (its default grid, 1e-4)
    ref = pld_privacy_accountant.PLDAccountant()
    for m in second:
        ref.compose(
            dp_accounting.GaussianDpEvent(m.sigma)
            if isinstance(m, dpjax.Gaussian)
            else dp_accounting.LaplaceDpEvent(m.scale)
        )
    assert eps == pytest.approx(ref.get_epsilon(1e-5), rel=1e-3)


def test_accountant_composes_a_new_kind_onto_its_total(monkeypatch):
    """n distinct kinds recorded one by one: n − 1 compositions of grid PLDs (the rest was recomposed
    for every new kind: quadratic), and the same ε as composing them in one expression."""
    calls = []
    compose = distribution.PrivacyLossDistribution.compose

    def counted(self, other, **kw):
        calls.append(1)
        return compose(self, other, **kw)

    mechs = [dpjax.Laplace(float(b)) for b in np.linspace(20.0, 26.0, 6)]
    monkeypatch.setattr(distribution.PrivacyLossDistribution, "compose", counted)
    acc = accounting.Accountant(delta=1e-5)
    eps = [acc.record(m) for m in mechs]
    assert len(calls) == len(mechs) - 1
    monkeypatch.undo()
    assert eps[-1] == pytest.approx(_epsilon(mechs), rel=1e-9)
    assert all(a < b for a, b in itertools.pairwise(eps))


@pytest.mark.slow
def test_accountant_repeated_spend_of_a_new_kind_reuses_the_total():
    """After a new kind, its repeated spends compose onto the total before it (no recomposition) and
    still refuse past the budget, as a fresh accountant recording the same releases does."""
    acc = accounting.Accountant(epsilon_budget=1.0, delta=1e-5)
    acc.record(dpjax.Laplace(20.0))
    acc.record(dpjax.Laplace(30.0), count=3)
    acc.record(dpjax.Laplace(30.0), count=2)
    fresh = accounting.Accountant(delta=1e-5)
    fresh.record(dpjax.Laplace(20.0))
    assert acc.spent_epsilon() == pytest.approx(fresh.record(dpjax.Laplace(30.0), count=5), rel=1e-9)
    with pytest.raises(ValueError, match="epsilon_budget"):
        acc.record(dpjax.Laplace(30.0), count=100)
    assert acc.releases[1].count == 5


@pytest.mark.slow
def test_dpsgd_settings_of_one_octave_and_step_share_programs():
    """z = 1.2 after z = 1.0 (q = 0.01, one grid step): one plan for the octave, nothing compiled (each
    quarter-octave rung had its own plan, hence its own build, composition and query programs)."""
    accounting.dpsgd_epsilon(1.0, 0.01, 1000, 1e-5)
    with counting_compiles() as names:
        eps = float(accounting.dpsgd_epsilon(1.2, 0.01, 1000, 1e-5))
    assert names == []
    ref = float(accounting.pld(dpjax.Gaussian(1.2), sampling_prob=0.01).self_compose(1000).get_epsilon_for_delta(1e-5))
    assert eps == pytest.approx(ref, rel=1e-8)


@pytest.mark.slow
def test_calibration_compiles_a_handful_and_a_new_target_nothing():
    with counting_compiles() as first:
        z = float(accounting.calibrate_noise_multiplier(2.5, 1e-5, 0.004, 15000))
    big = [n for n in first if n in ("jit(_build_jit)", "jit(_compose_jit)", "jit(_epsilon_core)")]
    assert len(big) <= 6, first
    with counting_compiles() as warm:
        z2 = float(accounting.calibrate_noise_multiplier(2.4, 1e-5, 0.004, 15000))
    assert warm == [] and z2 > z
    assert 2.4 * (1 - 1e-3) <= float(accounting.dpsgd_epsilon(z2, 0.004, 15000, 1e-5)) <= 2.4


def test_gaussians_composed_onto_a_grid_are_discretised_once(monkeypatch):
    """Analytic Gaussians composed onto a grid PLD stay analytic (μ as √Σμ²) until the PLD is read: one
    Gaussian grid for the chain (each was discretised at its own composition, a build and a composition
    per Gaussian), the same ε as the one Gaussian of that μ composed explicitly, and dp_accounting's
    figure on the same events."""
    grids = []
    to_grid = distribution.PrivacyLossDistribution.to_grid

    def counted(self, *args, **kw):
        if self.is_analytic:
            grids.append(float(self.gaussian_mu))
        return to_grid(self, *args, **kw)

    sigmas = (1.5, 3.0, 6.0)
    monkeypatch.setattr(distribution.PrivacyLossDistribution, "to_grid", counted)
    eps = _epsilon([dpjax.Laplace(2.0)] + [dpjax.Gaussian(sigma=s) for s in sigmas])
    mu = float(np.sqrt(sum(1.0 / s**2 for s in sigmas)))
    assert grids == [pytest.approx(mu, rel=1e-15)]
    monkeypatch.undo()
    assert eps == pytest.approx(_epsilon([dpjax.Laplace(2.0), dpjax.Gaussian(sigma=1.0 / mu)]), rel=1e-12)
    ref = pld_privacy_accountant.PLDAccountant()
    ref.compose(dp_accounting.LaplaceDpEvent(2.0))
    for s in sigmas:
        ref.compose(dp_accounting.GaussianDpEvent(s))
    assert eps == pytest.approx(ref.get_epsilon(1e-5), rel=1e-3)


@pytest.mark.slow
def test_gaussians_of_several_octaves_compile_one_gaussian_build():
    """Gaussians of four octaves of σ composed onto a Laplace grid: one Gaussian build program, that of
    their composed μ (one per octave of σ: each Gaussian was discretised at its composition)."""
    _epsilon([dpjax.Laplace(20.0)])
    with counting_compiles() as names:
        eps = _epsilon([dpjax.Laplace(20.0)] + [dpjax.Gaussian(sigma=s) for s in (2.0, 5.0, 11.0, 23.0)])
    assert names.count("jit(_build_jit)") <= 1, names
    ref = pld_privacy_accountant.PLDAccountant()
    ref.compose(dp_accounting.LaplaceDpEvent(20.0))
    for s in (2.0, 5.0, 11.0, 23.0):
        ref.compose(dp_accounting.GaussianDpEvent(s))
    assert eps == pytest.approx(ref.get_epsilon(1e-5), rel=1e-3)


def test_queries_of_a_concrete_grid_pld_compile_nothing():
    """ε(δ) and δ(ε) of a concrete grid PLD are read on the host (numpy): no query program per grid
    length and argument shape (each was a compiled program, traced again by every new process)."""
    p = accounting.pld(dpjax.Laplace(3.3)).compose(accounting.pld(dpjax.Gaussian(sigma=2.9), sampling_prob=0.07))
    p = p.self_compose(13)
    with counting_compiles() as names:
        eps = np.asarray(p.get_epsilon_for_delta(np.array([1e-5, 1e-6, 1e-7])))
        delta = np.asarray(p.get_delta_for_epsilon(np.array([0.5, 1.5, 2.5, 3.5])))
    assert names == []
    # the host answers are the compiled, differentiable route's to its summation round-off
    traced = jax.jit(lambda q, d: q.get_epsilon_for_delta(d))(p, np.array([1e-5, 1e-6, 1e-7]))
    np.testing.assert_allclose(eps, np.asarray(traced), rtol=1e-8)  # (A − B cancels: the sums' order)
    assert np.all(np.diff(eps) > 0) and np.all(np.diff(delta) < 0)


def test_a_new_dpsgd_setting_compiles_at_most_its_mu():
    """A Gaussian DP-SGD setting is built, composed and read on the host: nothing is compiled but the
    mechanism's μ = Δ/σ (a division), where a first call compiled a build, a composition and a query."""
    with counting_compiles() as names:
        eps = float(accounting.dpsgd_epsilon(1.37, 0.0123, 777, 1e-6))
    assert [n for n in names if n != "jit(true_divide)"] == []
    ref = pld_privacy_accountant.PLDAccountant().compose(
        dp_accounting.PoissonSampledDpEvent(0.0123, dp_accounting.GaussianDpEvent(1.37)), 777
    )
    assert eps == pytest.approx(ref.get_epsilon(1e-6), rel=1e-3)


def test_a_concrete_laplace_pld_compiles_nothing():
    """A Laplace PLD of concrete parameters is built on the host (its numpy profile and pure ε), composed
    and read there: nothing compiled, where each new grid length compiled a build program (2-4 s)."""
    with counting_compiles() as names:
        p = accounting.pld(dpjax.Laplace(0.731)).compose(accounting.pld(dpjax.Laplace(23.9), sampling_prob=0.3))
        eps = float(p.get_epsilon_for_delta(1e-6))
    assert names == []
    ref = pld_privacy_accountant.PLDAccountant()
    ref.compose(dp_accounting.LaplaceDpEvent(0.731))
    ref.compose(dp_accounting.PoissonSampledDpEvent(0.3, dp_accounting.LaplaceDpEvent(23.9)))
    assert eps == pytest.approx(ref.get_epsilon(1e-6), rel=1e-3)


def test_an_accountant_recording_a_gaussian_compiles_nothing():
    """The first record of a Gaussian reads the analytic Gaussian's ε on the host (bisection of its
    profile, μ = Δ/σ in numpy): nothing compiled, where the compiled root finder took 2-3 s."""
    with counting_compiles() as names:
        eps = accounting.Accountant(delta=1e-5).record(dpjax.Gaussian(sigma=3.17))
    assert names == []
    ref = pld_privacy_accountant.PLDAccountant().compose(dp_accounting.GaussianDpEvent(3.17)).get_epsilon(1e-5)
    assert eps == pytest.approx(ref, rel=1e-3)


def _three_records():
    acc = accounting.Accountant(delta=1e-5)
    for m in (dpjax.Laplace(3.3), dpjax.Gaussian(sigma=2.9), dpjax.Laplace(4.1)):
        acc.record(m)
    return acc


def test_the_accountants_pld_is_handed_out_with_jax_float64_leaves():
    """The ledger keeps numpy leaves (no transfer per leaf); the PLD it hands out has float64 JAX leaves, so
    that ``jit`` outside ``jax.enable_x64`` reads it in float64 (numpy float64 leaves would read as float32)."""
    p = _three_records().pld
    leaves = [x for x in jax.tree_util.tree_leaves(p) if isinstance(x, np.ndarray | jax.Array)]
    assert leaves and all(isinstance(x, jax.Array) for x in leaves if np.asarray(x).dtype == np.float64)


@pytest.mark.slow
def test_the_accountants_pld_reads_the_same_under_jit():
    """ε of the handed-out PLD by the compiled query under ``jit`` (outside x64) is the ledger's (numpy
    float64 leaves read as float32 put it ~1e-7 relative off)."""
    acc = _three_records()
    traced = float(jax.jit(lambda q: q.get_epsilon_for_delta(1e-5))(acc.pld))
    assert traced == pytest.approx(acc.spent_epsilon(), rel=1e-9)
