"""The PLD's construction: what a grid PLD holds (mass ≤ 1, the rest at +∞), where its grid sits,
and the inputs it refuses by name."""

import jax.numpy as jnp
import numpy as np
import pytest

import accounting
import dpjax


# ----------------------------------------------------------------------------------
# refused by name (main: a reshape TypeError, an error inside a reduction)
# ----------------------------------------------------------------------------------
def test_array_sensitivity_refused_by_name():
    for call in (lambda: accounting.pld(dpjax.Laplace(1.0), sensitivity=jnp.array([1.0, 2.0])),
                 lambda: accounting.get_epsilon(dpjax.Laplace(1.0), 1e-6, sensitivity=np.array([1.0, 2.0]))):
        with pytest.raises(ValueError, match="sensitivity"):
            call()


@pytest.mark.parametrize("cls", [dpjax.DiscreteGaussian, dpjax.Laplace, dpjax.DiscreteLaplace])
def test_empty_batch_refused_by_name(cls):
    with pytest.raises(ValueError, match=cls.scale_name + " must not be empty"):
        cls(jnp.array([]))
