"""The host-side scale solver shared by the DP-SGD calibrators and ``dpjax calibrate plan``."""

import math

import pytest

from accounting._root import log_bisect


@pytest.mark.parametrize("root", [1e-3, 0.7, 1.0, 3.3e4])
def test_log_bisect_returns_the_feasible_end_within_rtol(root):
    calls = []

    def fn(x):  # decreasing, crosses the target 1.0 at ``root``
        calls.append(x)
        return root / x

    x = log_bisect(fn, root / 10.0, root * 10.0, 1.0, rtol=1e-6)
    assert fn(x) <= 1.0 and root <= x <= root * (1 + 1e-6)
    assert len(calls) <= math.ceil(math.log2(math.log(100.0) / 1e-6)) + 2


def test_epsilon_near_delta_one_is_rounded_up():
    """Near δ = 1 the profiles are flat: the analytic Gaussian at μ 20, δ 1 − 1e-9 read 1.4e-9 relative
    low, exact.epsilon(Laplace(0.02)) 1.3e-8 (closed form ε = r + 2 log(1 − δ))."""
    import accounting
    import dpjax

    delta = 1 - 1e-9
    laplace = 50.0 + 2.0 * math.log1p(-delta)
    assert float(accounting.exact.epsilon(dpjax.Laplace(0.02), delta)) >= laplace
    # mpmath root of the Balle–Wang profile at μ 20 (50 digits): 78.857087234797190536...
    assert float(accounting.pld(dpjax.Gaussian(1 / 20)).get_epsilon_for_delta(delta)) >= 78.8570872347972
