"""Rényi DP (accounting.rdp): the sampled Gaussian's RDP at fractional orders against quadrature, and its ε at least
as tight as dp_accounting's."""

import pytest


def test_sampled_gaussian_rdp_at_fractional_orders_matches_the_integral():
    """log A_α / (α − 1) against mpmath's quadrature of E_{μ0}[(μ/μ0)^α] (Mironov et al., Sec. 3.3)."""
    import mpmath as mp

    from accounting.rdp import sampled_gaussian_rdp_at

    mp.mp.dps = 30
    q, z = 256 / 60000, 1.1
    orders = [1.5, 2.0, 8.1, 12.35]
    got = sampled_gaussian_rdp_at(z, q, orders)
    for a, g in zip(orders, got):
        area = mp.quad(
            lambda x: mp.npdf(x, 0, z) * ((1 - q) + q * mp.exp((2 * x - 1) / (2 * z * z))) ** a,
            [-mp.inf, -10, 0, 0.5, 1, 10, mp.inf],
        )
        exact = float(mp.log(area) / (a - 1))
        assert g == pytest.approx(exact, rel=1e-9)


def test_rdp_epsilon_is_at_least_as_tight_as_dp_accountings():
    """z 1.1, q 256/60000, 14063 steps, δ 1e-5: dp_accounting's RDP accountant gives 2.5967 (main: 2.797)."""
    import dp_accounting

    from accounting.rdp import SAMPLED_GAUSSIAN_ORDERS, rdp_to_epsilon, sampled_gaussian_rdp_at

    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(256 / 60000, dp_accounting.GaussianDpEvent(1.1)), 14063
        )
    )
    ours = float(rdp_to_epsilon(SAMPLED_GAUSSIAN_ORDERS, 14063 * sampled_gaussian_rdp_at(1.1, 256 / 60000), 1e-5))
    assert ours <= acc.get_epsilon(1e-5)
    assert ours == pytest.approx(acc.get_epsilon(1e-5), rel=1e-6)
