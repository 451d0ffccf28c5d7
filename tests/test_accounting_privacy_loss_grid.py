"""The adaptive loss grid (``value_discretization_interval=None``, the default): large finite losses
stay finite, tiny losses are resolved, and both stay at or above the truth (issue 20). Every route takes its step
rule: the batch queries (``accounting.get_epsilon`` / ``get_delta``), DP-SGD accounting and the ``Accountant``, so
tiny per-step losses are resolved there too (they were 10x+ loose on the fixed 2^-13 grid), never below an
independent reference, and the default cases keep their step."""

import math

import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from scipy import stats

import accounting
import dpjax


def _gaussian_truth(mu, delta):
    """ε of the Gaussian PLD of μ at δ (Balle & Wang 2018, Thm 8) at 50 digits."""
    mpmath.mp.dps = 50
    mu = mpmath.mpf(mu)
    d = lambda e: mpmath.ncdf(mu / 2 - e / mu) - mpmath.e**e * mpmath.ncdf(-mu / 2 - e / mu)  # noqa: E731
    x0 = mu * mu / 2 + mu * abs(float(stats.norm.ppf(delta)))
    return float(mpmath.findroot(lambda e: d(e) - mpmath.mpf(delta), x0))


@pytest.mark.slow
def test_large_losses_are_finite_and_sound():
    # μ = 1000: every loss lies near μ²/2 = 5·10⁵, far beyond e^700 (it read ∞)
    truth = _gaussian_truth(1000.0, 1e-6)  # 504 752.4267
    hi = float(accounting.pld(dpjax.Gaussian(1e-3), use_analytic=False).get_epsilon_for_delta(1e-6))
    lo = float(accounting.pld(dpjax.Gaussian(1e-3), use_analytic=False, pessimistic=False).get_epsilon_for_delta(1e-6))
    assert lo <= truth <= hi <= truth * (1 + 1e-5)
    # the analytic Gaussian meeting a grid PLD (it raised, then read ∞): at least both parts
    both = float(
        accounting.pld(dpjax.Gaussian(1e-3)).compose(accounting.pld(dpjax.Laplace(1.0))).get_epsilon_for_delta(1e-6)
    )
    assert truth <= both <= truth + 1.0 + 1e-3


def randomized_response_epsilon(eps0, k, delta):
    """ε(δ) of binary randomized response at ε₀ composed k times, exactly: the loss is (2j − k)ε₀ with
    j ~ Binomial(k, p), δ(ε) = Σ_j P(j)(1 − e^{ε − ℓ_j})_+ (bisection; the upper end, ≥ the truth)."""
    p = 1.0 / (1.0 + math.exp(-eps0))
    j = np.arange(k + 1)
    pmf, loss = stats.binom.pmf(j, k, p), (2.0 * j - k) * eps0

    def delta_at(e):
        return float(np.sum(pmf * -np.expm1(np.minimum(e - loss, 0.0))))

    lo, hi = 0.0, 0.1
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if delta_at(mid) > delta else (lo, mid)
    return hi


@pytest.mark.slow
def test_randomized_response_many_compositions_is_tight():
    got = float(accounting.pld(dpjax.RandomizedResponse(1e-6, 2)).self_compose(10**6).get_epsilon_for_delta(1e-6))
    truth = randomized_response_epsilon(1e-6, 10**6, 1e-6)
    assert truth <= got <= 1.02 * truth  # 0.0027182; the 2^-13 grid read 0.0375


@pytest.mark.slow
def test_accountant_resolves_tiny_losses_and_meets_on_one_grid():
    truth = randomized_response_epsilon(1e-6, 10**6, 1e-6)
    acc = accounting.Accountant(delta=1e-6)
    got = acc.record(dpjax.RandomizedResponse(1e-6, 2), count=10**6)
    assert truth <= got <= 1.02 * truth  # the 2^-13 grid read 0.0375
    # a kind on the default step: the two meet on the coarser grid, at least each part's ε and at most
    # the sum (Laplace(1) is pure 1-DP) plus the coarse grid's rounding
    both = acc.record(dpjax.Laplace(1.0))
    assert max(truth, 1.0 - 1e-5) <= both <= 1.0 + truth + 2 * accounting.DEFAULT_DISCRETIZATION
    p = acc.pld
    assert p.step == accounting.DEFAULT_DISCRETIZATION
    assert float(np.sum(np.asarray(p.remove.probs)) + float(p.remove.inf_mass)) <= 1.0 + 1e-9
    # recorded in the other order: the same composition
    other = accounting.Accountant(delta=1e-6)
    other.record(dpjax.Laplace(1.0))
    assert other.record(dpjax.RandomizedResponse(1e-6, 2), count=10**6) == pytest.approx(both, rel=1e-9)


def test_laplace_tiny_losses_are_tight():
    pytest.importorskip("dp_accounting")
    from dp_accounting.pld import privacy_loss_distribution as dpa

    got = float(accounting.pld(dpjax.Laplace(1e6)).self_compose(1000).get_epsilon_for_delta(1e-6))
    lower = (
        dpa.from_laplace_mechanism(1e6, sensitivity=1, pessimistic_estimate=False, value_discretization_interval=1e-8)
        .self_compose(1000)
        .get_epsilon_for_delta(1e-6)
    )
    assert lower <= got <= 1.02 * lower  # 4.6365e-5; the 2^-13 grid read 8.5e-4


@pytest.mark.slow
def test_subsampled_gaussian_small_rate_is_tight():
    got = float(accounting.pld(dpjax.Gaussian(1.0), sampling_prob=1e-6).self_compose(1000).get_epsilon_for_delta(1e-6))
    # dp_accounting's connect-the-dots PLD at interval 1e-8 (pessimistic, 131 s): 7.01796e-5;
    # its privacy-buckets (optimistic) 6.518e-5; the 2^-13 grid read 7.3e-4
    assert 6.5e-5 <= got <= 1.02 * 7.01796e-5


@pytest.mark.slow
def test_subsampled_gaussian_small_rate_against_dp_accounting():
    pytest.importorskip("dp_accounting")
    from dp_accounting.pld import privacy_loss_distribution as dpa

    got = float(accounting.pld(dpjax.Gaussian(1.0), sampling_prob=1e-6).self_compose(1000).get_epsilon_for_delta(1e-6))
    ref = (
        dpa.from_gaussian_mechanism(
            1.0, sensitivity=1, pessimistic_estimate=True, value_discretization_interval=1e-8, sampling_prob=1e-6
        )
        .self_compose(1000)
        .get_epsilon_for_delta(1e-6)
    )
    assert 0.98 * ref <= got <= 1.02 * ref


@pytest.mark.slow
def test_default_cases_keep_the_default_step():
    for p in (
        accounting.pld(dpjax.Gaussian(1.0), use_analytic=False),
        accounting.pld(dpjax.Laplace(1.0)),
        accounting.pld(dpjax.Gaussian(1.0), sampling_prob=0.01),
    ):
        assert p.step == accounting.DEFAULT_DISCRETIZATION
    # an explicit step is kept
    assert accounting.pld(dpjax.Laplace(1e6), value_discretization_interval=2.0**-10).step == 2.0**-10


def test_adaptive_composition_coarsens_the_finer_grid_soundly():
    fine = accounting.pld(dpjax.Laplace(1e3))  # losses ≤ 10⁻³: a fine adaptive step
    coarse = accounting.pld(dpjax.Laplace(1.0))
    assert fine.step < coarse.step
    both = fine.compose(coarse)
    assert both.step == coarse.step
    mass = float(np.sum(np.asarray(both.remove.probs)) + float(both.remove.inf_mass))
    assert mass <= 1.0 + 1e-9
    # at least Laplace(1)'s own ε, at most that plus the pure ε 10⁻³ of the other
    e1 = float(coarse.get_epsilon_for_delta(1e-6))
    assert e1 <= float(both.get_epsilon_for_delta(1e-6)) <= e1 + 1e-3 + 2 * coarse.step


dpa = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")


def _laplace_bracket(scale, count, delta=None, epsilon=None):
    """dp_accounting's optimistic and pessimistic PLDs of Laplace(scale) composed ``count`` times at a
    step 100x below the losses: (lower, upper) of ε(delta) or of δ(epsilon)."""
    out = []
    for pessimistic in (False, True):
        p = dpa.from_laplace_mechanism(
            scale, sensitivity=1, pessimistic_estimate=pessimistic, value_discretization_interval=0.01 / scale
        ).self_compose(count)
        out.append(p.get_epsilon_for_delta(delta) if epsilon is None else p.get_delta_for_epsilon(epsilon))
    return out


@pytest.mark.slow
def test_batch_queries_resolve_tiny_losses():
    # one mechanism (the small route): 8.5e-4 on the 2^-13 grid for the truth 4.6365e-5
    lower, upper = _laplace_bracket(1e6, 1000, delta=1e-6)
    got = float(accounting.get_epsilon(dpjax.Laplace(1e6), 1e-6, count=1000))
    assert lower <= got <= 1.001 * upper
    lower, upper = _laplace_bracket(1e6, 1000, epsilon=2e-5)
    assert lower <= float(accounting.get_delta(dpjax.Laplace(1e6), 2e-5, count=1000)) <= 1.001 * upper
    # a batch (the bucketed route): each member on its own adaptive step
    scales = np.asarray([1e6, 1.2e6, 1.4e6, 2e6, 2.5e6])  # two steps: 2^-26, 2^-27
    eps = np.asarray(accounting.get_epsilon(dpjax.Laplace(jnp.asarray(scales)), 1e-6, count=1000))
    for b, e in zip(scales, eps):
        lower, upper = _laplace_bracket(b, 1000, delta=1e-6)
        assert lower <= e <= 1.001 * upper


@pytest.mark.slow
def test_dpsgd_resolves_a_tiny_sampling_rate():
    # dp_accounting's connect-the-dots PLD at interval 1e-7 (pessimistic: above the truth): 7.0217e-5;
    # at 1e-8 (131 s) 7.01796e-5, its privacy buckets (optimistic, below the truth) 6.518e-5.
    # The 2^-13 grid read 7.30e-4.
    ref = (
        dpa.from_gaussian_mechanism(
            1.0, sensitivity=1, pessimistic_estimate=True, value_discretization_interval=1e-7, sampling_prob=1e-6
        )
        .self_compose(1000)
        .get_epsilon_for_delta(1e-6)
    )
    got = float(accounting.dpsgd_epsilon(1.0, 1e-6, 1000, 1e-6))
    assert 6.518e-5 <= got <= ref
    # the odometer (an Accountant underneath) and accounting.pld follow the same rule: the same figure
    odometer = accounting.DpsgdAccountant(1.0, 1e-6, delta=1e-6).step(1000)
    direct = float(
        accounting.pld(dpjax.Gaussian(1.0), sampling_prob=1e-6).self_compose(1000).get_epsilon_for_delta(1e-6)
    )
    assert odometer == pytest.approx(got, rel=1e-9)
    assert direct == pytest.approx(got, rel=1e-9)


@pytest.mark.slow
def test_default_cases_keep_the_default_step_in_the_batch_queries_and_the_accountant():
    step = accounting.DEFAULT_DISCRETIZATION
    assert float(accounting.get_epsilon(dpjax.Laplace(1.0), 1e-6, count=10)) == float(
        accounting.get_epsilon(dpjax.Laplace(1.0), 1e-6, count=10, value_discretization_interval=step)
    )
    acc = accounting.Accountant(delta=1e-6)
    acc.record(dpjax.Gaussian(1.0), sampling_prob=0.01, count=100)
    assert acc.pld.step == step
    # an explicit step is kept (and the tiny losses stay as loose as it makes them)
    fixed = accounting.Accountant(delta=1e-6, value_discretization_interval=step)
    assert fixed.record(dpjax.RandomizedResponse(1e-6, 2), count=10**6) > 0.03


@pytest.mark.slow
def test_batch_member_wider_than_the_sampled_windows():
    # FFT lengths come from 5 sampled members; member 3 (not sampled) composes to a wider window and is
    # recomputed with its own length (that path wrote into a read-only array and raised)
    scales = [2.0, 2.0, 2.0, 1.05, 2.0, 2.0]
    got = np.asarray(accounting.get_epsilon(dpjax.Laplace(jnp.asarray(scales)), 1e-6, count=100))
    for b in (1.05, 2.0):  # (the batch plans its grids on a coarser range-finding grid: a few 1e-8 apart)
        one = float(accounting.get_epsilon(dpjax.Laplace(b), 1e-6, count=100))
        assert np.allclose(got[np.asarray(scales) == b], one, rtol=1e-6, atol=0)


@pytest.mark.slow
def test_wide_adaptive_windows_coarsen_as_self_compose_does():
    # Laplace(1) x 10^4: a window of ~1.1e7 points at 2^-13, above AUTO_WINDOW (2^23): pld's
    # self_compose coarsens to 2^-12; the batch queries (alone and as a member of a batch), the
    # Accountant give the same figure
    ref = float(accounting.pld(dpjax.Laplace(1.0)).self_compose(10**4).get_epsilon_for_delta(1e-6))
    assert float(accounting.get_epsilon(dpjax.Laplace(1.0), 1e-6, count=10**4)) == pytest.approx(ref, rel=1e-9)
    batch = accounting.get_epsilon(dpjax.Laplace(jnp.asarray([1e6, 1.2e6, 1.4e6, 1.6e6, 1.0])), 1e-6, count=10**4)
    assert float(batch[-1]) == pytest.approx(ref, rel=1e-9)
    assert accounting.Accountant(delta=1e-6).record(dpjax.Laplace(1.0), count=10**4) == pytest.approx(ref, rel=1e-8)


def test_next_fast_len_is_the_least_5_smooth_length():
    from accounting._numerics import next_fast_len as smooth_len

    def smooth(m):
        for f in (2, 3, 5):
            while m % f == 0:
                m //= f
        return m == 1

    for n in list(range(1, 400)) + [46000, 53295, 65536, 65537, 2**20 + 1]:
        m = smooth_len(n)
        assert m >= n and smooth(m) and not any(smooth(k) for k in range(n, m)), n
