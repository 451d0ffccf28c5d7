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
