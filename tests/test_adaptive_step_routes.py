"""The adaptive loss-grid step in every route (issue 20): the batch queries (``accounting.get_epsilon`` /
``get_delta``), DP-SGD accounting and the ``Accountant`` (tests/test_accounting_privacy_loss_grid.py) take
``accounting.pld``'s rule, so tiny per-step losses are resolved there too (they were 10x+ loose on the
fixed 2^-13 grid), never below an independent reference, and the default cases keep their step."""

import jax.numpy as jnp
import numpy as np
import pytest

import accounting
import dpjax

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
def test_default_cases_keep_the_default_step():
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
