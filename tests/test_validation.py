"""Half-precision parameters: bfloat16 accepted like float16 (a wider float holds them exactly)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=lambda d: d.__name__)
def test_half_precision_scale_and_epsilon_are_accepted(dtype):
    key = jax.random.key(2)
    scales = jnp.asarray([1.0, 2.0, 3.0, 1.5], dtype)
    out = dpjax.release(key, jnp.zeros(4, jnp.int32), dpjax.DiscreteLaplace(scales), numerics="exact")
    want = dpjax.release(
        key, jnp.zeros(4, jnp.int32), dpjax.DiscreteLaplace(scales.astype(jnp.float32)), numerics="exact"
    )
    np.testing.assert_array_equal(np.asarray(out), np.asarray(want))
    rr = dpjax.RandomizedResponse(jnp.asarray(1.0, dtype), num_categories=3)
    assert float(rr.exact_lattice().noise.epsilon) <= 1.0 + 1e-12
    assert np.isfinite(np.asarray(dpjax.release(key, jnp.zeros(3), dpjax.Laplace(jnp.asarray(2.0, dtype))))).all()
    with pytest.raises(ValueError, match="scale must have a real numeric dtype"):
        dpjax.Laplace(np.asarray(["1"]))
