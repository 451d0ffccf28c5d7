"""Issue 20 remainder: one route decides a composed PLD's flags (the odometer's count-traced
composition included), the mixture declares log-concavity where it holds, finer grids converge."""

import jax
import numpy as np
import pytest

import accounting
import dpjax
from accounting.accountant import self_compose_by_count


def test_odometer_composition_of_a_discrete_mechanism_refuses_to_be_differentiated():
    """The Accountant composes by a traced count (``self_compose_by_count``); its PLD lost the
    ``atomic`` flag, so a gradient through it was the grid's (wrong) one instead of a refusal."""
    def fn(b):
        return self_compose_by_count(accounting.pld(dpjax.DiscreteLaplace(b)), 10).get_epsilon_for_delta(1e-6)

    with jax.enable_x64(True):
        with pytest.raises(ValueError, match="composed PLD of a discrete .* cannot be differentiated"):
            jax.grad(fn)(2.4)
        single = accounting.pld(dpjax.DiscreteLaplace(2.4))
        assert float(fn(2.4)) == pytest.approx(float(single.self_compose(10).get_epsilon_for_delta(1e-6)), rel=1e-9)
    # a continuous kernel still differentiates through the same route
    def cont(b):
        return self_compose_by_count(accounting.pld(dpjax.Laplace(b)), 10).get_epsilon_for_delta(1e-6)

    with jax.enable_x64(True):
        g = float(jax.grad(cont)(2.0))
    assert np.isfinite(g) and g < 0
