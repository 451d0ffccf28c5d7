"""DP-SGD accounting (accounting.dpsgd): ε against dp_accounting and prv brackets, calibration and the odometer;
the optax plug-in is tested in test_optimize_dpsgd.py."""

from __future__ import annotations

import concurrent.futures
import logging

import jax
import numpy as np
import pytest

import accounting
import dpjax
from accounting import dpsgd as acc_dpsgd
from accounting.dpsgd import calibration


logging.getLogger("absl").setLevel(logging.ERROR)

# Poisson-subsampled Gaussian, δ = 1e-5. (q, z, T): (dp_accounting 0.6.0 pessimistic PLD at Δ = 1e-5,
# prv_accountant 0.2.0 (lower, upper) bracket). q = 0.01: anchors report §3.1 (PRV eps_error 1e-3);
# the others: PRV eps_error 0.01, delta_error 1e-9 (recomputed by test_references_live, slow).
REFERENCE = {
    (0.01, 1.0, 1000): (1.828236736, (1.827105, 1.829369)),
    (0.01, 1.0, 10000): (6.187712707, (6.186385, 6.189040)),
    (0.001, 0.8, 100000): (2.574965225, (2.564946, 2.584977)),
    (0.05, 2.0, 10000): (14.384004836, (14.373938, 14.394062)),
}


def _f(x):
    return float(np.asarray(x))


# ----------------------------------------------------------------------------------
# accounting
# ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_dpsgd_epsilon_matches_dp_accounting_and_prv_brackets():
    eps = np.asarray(accounting.dpsgd_epsilon(1.0, 0.01, np.asarray([1000, 10000]), 1e-5))
    for e, key in zip(eps, [(0.01, 1.0, 1000), (0.01, 1.0, 10000)]):
        fine, (lo, hi) = REFERENCE[key]
        assert fine - 1e-7 <= e <= fine + 1e-4  # never below the fine-grid PLD, within the grid's slack
        assert lo <= e <= hi
    # the same numbers as the generic accountant (pld(...).self_compose(T))
    ref = _f(
        accounting.pld(dpjax.Gaussian(sigma=1.0), sampling_prob=0.01).self_compose(1000).get_epsilon_for_delta(1e-5)
    )
    assert eps[0] == pytest.approx(ref, rel=1e-8)


# T = 1e5 compositions is slow (the default suite keeps the large rate and T = 1e4)
@pytest.mark.slow
@pytest.mark.parametrize("case", [pytest.param((0.001, 0.8, 100000), marks=pytest.mark.slow), (0.05, 2.0, 10000)])
def test_dpsgd_epsilon_small_and_large_rates(case):
    q, z, t = case
    e = _f(accounting.dpsgd_epsilon(z, q, t, 1e-5))
    fine, (lo, hi) = REFERENCE[case]
    # the loss grid's slack grows with the number of compositions: 3.4e-4 relative at T = 1e5
    assert fine - 1e-7 <= e <= fine * (1 + 5e-4) and lo <= e <= hi


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(REFERENCE))
def test_references_live(case):
    """Recompute the reference table with dp_accounting (Δ = 1e-5) and prv_accountant."""
    pld_mod = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    prv = pytest.importorskip("prv_accountant")
    from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism

    q, z, t = case
    fine = (
        pld_mod.from_gaussian_mechanism(z, sampling_prob=q, value_discretization_interval=1e-5)
        .self_compose(t)
        .get_epsilon_for_delta(1e-5)
    )
    lo, _, hi = prv.PRVAccountant(
        prvs=[PoissonSubsampledGaussianMechanism(q, z)], max_self_compositions=[t], eps_error=0.01, delta_error=1e-9
    ).compute_epsilon(1e-5, [t])
    ref_fine, (ref_lo, ref_hi) = REFERENCE[case]
    assert fine == pytest.approx(ref_fine, abs=1e-6)
    assert lo <= ref_fine <= hi and ref_lo - 0.01 <= lo and hi <= ref_hi + 0.01
    e = _f(accounting.dpsgd_epsilon(z, q, t, 1e-5))
    assert fine - 1e-7 <= e and lo <= e <= hi


@pytest.mark.slow
def test_dpsgd_epsilon_batched_over_settings_and_delta():
    z = np.asarray([1.0, 1.0, 1.1])  # one rung of plans: one compiled call for the batch
    eps = np.asarray(accounting.dpsgd_epsilon(z, 0.01, np.asarray([1000, 10000, 1000]), 1e-5))
    ref = _f(
        accounting.pld(dpjax.Gaussian(sigma=1.0), sampling_prob=0.01).self_compose(1000).get_epsilon_for_delta(1e-5)
    )
    assert eps[0] == pytest.approx(ref, rel=1e-8) and eps[1] > eps[0] > eps[2]
    d = _f(accounting.dpsgd_delta(1.0, 0.01, 1000, eps[0]))
    assert d == pytest.approx(1e-5, rel=1e-6) and d <= 1e-5 * (1 + 1e-9)


@pytest.mark.slow
@pytest.mark.parametrize(
    "setting", [(3.0, 1.0, 10), (1.0, 0.01, 1000), (0.5, 0.05, 100), (2.0, 0.001, 100000), (8.0, 0.1, 2000)]
)
def test_calibration_sweep(setting):
    target, q, t = setting
    for mech in (None, dpjax.Laplace):
        z = _f(accounting.calibrate_noise_multiplier(target, 1e-5, q, t, mechanism=mech))
        assert target * (1 - 1e-3) <= _f(accounting.dpsgd_epsilon(z, q, t, 1e-5, mechanism=mech)) <= target


@pytest.mark.slow
def test_dpsgd_epsilon_gradients_match_central_differences():
    gz = _f(jax.grad(lambda z: accounting.dpsgd_epsilon(z, 0.01, 1000, 1e-5))(1.3))
    gq = _f(jax.grad(lambda q: accounting.dpsgd_epsilon(1.3, q, 1000, 1e-5))(0.01))
    hz, hq = 1e-3, 1e-5
    fz = _f(accounting.dpsgd_epsilon(1.3 + hz, 0.01, 1000, 1e-5)) - _f(
        accounting.dpsgd_epsilon(1.3 - hz, 0.01, 1000, 1e-5)
    )
    fq = _f(accounting.dpsgd_epsilon(1.3, 0.01 + hq, 1000, 1e-5)) - _f(
        accounting.dpsgd_epsilon(1.3, 0.01 - hq, 1000, 1e-5)
    )
    assert gz == pytest.approx(fz / (2 * hz), rel=2e-3) and gz < 0
    assert gq == pytest.approx(fq / (2 * hq), rel=2e-3) and gq > 0
    gd = _f(jax.grad(lambda z: accounting.dpsgd_epsilon(z, 0.01, 1000, 1e-5, mechanism=dpjax.DiscreteGaussian))(1.3))
    assert gd < 0


@pytest.mark.slow
def test_calibrate_noise_multiplier_from_above():
    z = _f(accounting.calibrate_noise_multiplier(1.0, 1e-5, 0.01, 1000))
    eps = _f(accounting.dpsgd_epsilon(z, 0.01, 1000, 1e-5))
    assert 1.0 * (1 - 1e-3) <= eps <= 1.0
    assert z == pytest.approx(1.41463, rel=2e-3)  # dp_accounting's calibrate_dp_mechanism (its Δ = 1e-4)


def _synthetic_epsilon(calls):
    """A smooth decreasing ε(z) (0.9 times the unsampled Gaussian's Rényi-like figure) standing in for the
    exact evaluation: the calibration's search, without the cost of a PLD."""

    def eps(kind, z, sampling_prob, steps, delta, step):
        calls.append(float(z))
        return np.asarray(0.9 * (0.5 * steps / z**2 + np.sqrt(2.0 * steps * np.log(1.0 / delta)) / z))

    return eps


def test_a_new_target_on_a_remembered_event_takes_one_exact_evaluation(monkeypatch):
    """After a first calibration, a new target whose z lies in the same lattice cell meets the remembered nodes:
    one exact evaluation (the answer), inside the window (the search took three or more for every target)."""
    calls = []
    monkeypatch.setattr(calibration, "_POINTS", {}, raising=False)
    monkeypatch.setattr(calibration, "_eps", _synthetic_epsilon(calls))
    eps = _synthetic_epsilon([])
    accounting.calibrate_noise_multiplier(2.5, 1e-5, 1.0, 10)
    for target in (2.4, 2.45):  # z in the lattice cell of 2.5's
        calls.clear()
        z = _f(accounting.calibrate_noise_multiplier(target, 1e-5, 1.0, 10))
        assert calls == [z]
        assert target * (1 - 1e-3) <= _f(eps(None, z, 1.0, 10, 1e-5, None)) <= target


def test_calibration_does_not_depend_on_what_was_asked_before(monkeypatch):
    """The remembered evaluations only skip work: a target asked first, after others or alongside others in
    threads gives the same z."""
    monkeypatch.setattr(calibration, "_eps", _synthetic_epsilon([]))
    got = []
    for before in ((), (2.5,), (0.5, 9.0, 2.41)):
        monkeypatch.setattr(calibration, "_POINTS", {}, raising=False)
        for target in before:
            accounting.calibrate_noise_multiplier(target, 1e-5, 1.0, 10)
        got.append(_f(accounting.calibrate_noise_multiplier(2.4, 1e-5, 1.0, 10)))
    assert got[0] == got[1] == got[2]
    # threads sharing the cache: each answer is the one asked alone
    targets = (2.4, 2.45, 2.6, 3.1, 0.7, 2.41)
    alone = []
    for t in targets:
        monkeypatch.setattr(calibration, "_POINTS", {})
        alone.append(_f(accounting.calibrate_noise_multiplier(t, 1e-5, 1.0, 10)))
    monkeypatch.setattr(calibration, "_POINTS", {})
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        shared = list(pool.map(lambda t: _f(accounting.calibrate_noise_multiplier(t, 1e-5, 1.0, 10)), targets))
    assert shared == alone


@pytest.mark.slow
def test_a_new_target_of_the_issue_event_takes_one_exact_evaluation(monkeypatch):
    """ε 2.5, δ 1e-5, q 0.004, T 15000, then 2.4 and 2.6: one exact PLD evaluation each, in the window."""
    calls = []
    exact = calibration._eps
    monkeypatch.setattr(calibration, "_eps", lambda *a: calls.append(a[1]) or exact(*a))
    accounting.calibrate_noise_multiplier(2.5, 1e-5, 0.004, 15000)
    for target in (2.4, 2.6):
        calls.clear()
        z = _f(accounting.calibrate_noise_multiplier(target, 1e-5, 0.004, 15000))
        assert calls == [z]
        assert target * (1 - 1e-3) <= _f(accounting.dpsgd_epsilon(z, 0.004, 15000, 1e-5)) <= target


@pytest.mark.slow
def test_calibrators_return_the_largest_feasible_integer_rdp_path():
    dg = dpjax.DiscreteGaussian
    t = int(accounting.calibrate_num_steps(1.0, 1e-5, 1.25, 0.01, mechanism=dg))
    e = np.asarray(accounting.dpsgd_epsilon(1.25, 0.01, np.asarray([t, t + 1]), 1e-5, mechanism=dg))
    assert e[0] <= 1.0 < e[1]
    b = int(accounting.calibrate_batch_size(1.0, 1e-5, 1.25, 300, 10000, mechanism=dg))
    e = np.asarray(accounting.dpsgd_epsilon(1.25, np.asarray([b, b + 1]) / 10000, 300, 1e-5, mechanism=dg))
    assert e[0] <= 1.0 < e[1]
    z = _f(accounting.calibrate_noise_multiplier(1.0, 1e-5, 0.01, 1000, mechanism=dg))
    assert 1.0 - 1e-6 <= _f(accounting.dpsgd_epsilon(z, 0.01, 1000, 1e-5, mechanism=dg)) <= 1.0


@pytest.mark.slow
def test_calibrate_steps_and_batch_size_are_the_largest_feasible():
    z = 1.25
    t = int(accounting.calibrate_num_steps(1.0, 1e-5, z, 0.01))
    e = np.asarray(accounting.dpsgd_epsilon(z, 0.01, np.asarray([t, t + 1]), 1e-5))
    assert e[0] <= 1.0 < e[1]
    b = int(accounting.calibrate_batch_size(1.0, 1e-5, z, 300, 10000))
    e = [_f(accounting.dpsgd_epsilon(z, bb / 10000, 300, 1e-5)) for bb in (b, b + 1)]
    assert e[0] <= 1.0 < e[1]
    assert int(accounting.calibrate_num_steps(1e-3, 1e-5, 0.5, 0.5)) == 0


@pytest.mark.slow
def test_laplace_accounting_lies_between_the_laplace_pair_and_its_bound():
    # the randomized-response dominating pair at ε₀ = 1/z, never below the 1-D Laplace pair (a lower bound)
    lap = _f(accounting.dpsgd_epsilon(1.0, 0.01, 200, 1e-5, mechanism=dpjax.Laplace))
    one_d = _f(accounting.get_epsilon(dpjax.Laplace(scale=1.0), 1e-5, count=200, sampling_prob=0.01))
    assert one_d <= lap <= 1.25 * one_d


@pytest.mark.slow
def test_discrete_gaussian_accounting_is_a_sound_bound():
    # the Rényi bound lies above the exact (continuous) Gaussian PLD ...
    dg = _f(accounting.dpsgd_epsilon(1.0, 0.01, 1000, 1e-5, mechanism=dpjax.DiscreteGaussian))
    assert dg >= REFERENCE[(0.01, 1.0, 1000)][0]
    # ... and Zhu-Wang's subsampled bound lies above the exact subsampled-Gaussian RDP (dp_accounting)
    rdp_mod = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")
    exact = np.asarray(
        [rdp_mod._compute_rdp_poisson_subsampled_gaussian(0.01, 1.0, [a]) for a in acc_dpsgd.RDP_ORDERS[:20]]
    ).ravel()
    with jax.enable_x64(True):
        dg_noise = acc_dpsgd.noise._noise(dpjax.DiscreteGaussian)
        bound = np.asarray(acc_dpsgd.subsampled_rdp(acc_dpsgd.noise._renyi_bound(dg_noise, 1.0), 0.01))[:20]
    assert np.all(bound >= exact * (1 - 1e-12))


@pytest.mark.slow
def test_dpsgd_accountant_per_step_and_budget():
    acc = accounting.DpsgdAccountant(1.0, 0.01, delta=1e-5, epsilon_budget=1.0)
    for _ in range(3):
        e = acc.step()
    ref = _f(accounting.pld(dpjax.Gaussian(sigma=1.0), sampling_prob=0.01).self_compose(3).get_epsilon_for_delta(1e-5))
    assert e == pytest.approx(ref, rel=1e-9) and acc.steps == 3
    left = acc.remaining_steps()
    e_all = acc.step(left)
    assert e_all <= 1.0
    with pytest.raises(ValueError, match="epsilon_budget"):
        acc.step()
    assert acc.steps == 3 + left
    dg = accounting.DpsgdAccountant(1.0, 0.01, delta=1e-5, mechanism=dpjax.DiscreteGaussian)
    dg.step(1000)
    assert dg.epsilon() == pytest.approx(
        _f(accounting.dpsgd_epsilon(1.0, 0.01, 1000, 1e-5, mechanism=dpjax.DiscreteGaussian)), rel=1e-9
    )


def test_accounting_validation():
    with pytest.raises(ValueError, match="noise_multiplier"):
        accounting.dpsgd_epsilon(0.0, 0.01, 10, 1e-5)
    with pytest.raises(ValueError, match="sampling_prob"):
        accounting.dpsgd_epsilon(1.0, 1.5, 10, 1e-5)
    with pytest.raises(ValueError, match="steps"):
        accounting.dpsgd_epsilon(1.0, 0.01, 0, 1e-5)
    with pytest.raises(ValueError, match="delta"):
        accounting.dpsgd_epsilon(1.0, 0.01, 10, float("nan"))
    with pytest.raises(ValueError, match="mechanism"):
        accounting.dpsgd_epsilon(1.0, 0.01, 10, 1e-5, mechanism=dpjax.Gaussian(sigma=1.0))
    with pytest.raises(ValueError, match="target_epsilon"):
        accounting.calibrate_noise_multiplier(-1.0, 1e-5, 0.01, 10)


# ----------------------------------------------------------------------------------
# the odometer (issue 15): composition by count
# ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_accountant_composes_by_count_and_keeps_one_entry_per_kind():
    acc = accounting.Accountant(delta=1e-5)
    g = dpjax.Gaussian(sigma=1.0)
    for _ in range(4):
        acc.record(g, sampling_prob=0.01)
    acc.record(dpjax.Laplace(scale=2.0))
    e = acc.record(g, sampling_prob=0.01, count=3)
    assert len(acc.releases) == 2 and acc.releases[0].count == 7 and acc.releases[1].count == 1
    p = accounting.pld(g, sampling_prob=0.01).self_compose(7).compose(accounting.pld(dpjax.Laplace(scale=2.0)))
    assert e == pytest.approx(_f(p.get_epsilon_for_delta(1e-5)), rel=1e-8)
    assert acc.spent_delta(e) == pytest.approx(1e-5, rel=1e-6)


@pytest.mark.slow
def test_self_compose_by_count_matches_static_count():
    p = accounting.pld(dpjax.Gaussian(sigma=1.0), sampling_prob=0.01)
    static = _f(p.self_compose(1000).get_epsilon_for_delta(1e-5))
    traced = accounting.accountant.self_compose_by_count(p, 1000)
    assert _f(traced.get_epsilon_for_delta(1e-5)) == pytest.approx(static, rel=1e-8)  # FFT lengths differ
    assert _f(traced.roundoff) < 1e-12


@pytest.mark.slow
def test_accountant_thousand_spends_under_a_minute_and_500mb():
    import subprocess
    import sys

    # VmHWM (the peak RSS of this process image): ru_maxrss would carry the forking parent's peak
    code = (
        "import time, accounting, dpjax\n"
        "acc = accounting.Accountant(epsilon_budget=10.0, delta=1e-5); m = dpjax.Gaussian(sigma=1.0)\n"
        "t = time.time()\n"
        "for _ in range(1000): e = acc.record(m, sampling_prob=0.01)\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
        "print(time.time() - t, int(hwm) / 1024, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    seconds, rss_mb, eps = map(float, out[-3:])
    assert seconds < 60 and rss_mb < 500
    assert eps == pytest.approx(REFERENCE[(0.01, 1.0, 1000)][0], abs=2e-5)
