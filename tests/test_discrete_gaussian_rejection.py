"""The float tier's discrete Gaussian rejection samplers after :data:`MAX_TRIALS` rejected trials."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import dpjax
from dpjax.kernels import discrete_gaussian


class _Rejecting:
    """Uniforms whose every trial is rejected (both proposal uniforms ½: candidate 0, kept only by a uniform below
    its acceptance), then 0.1 and 0.9 past the trials (the fresh candidate's)."""

    dtype = jnp.float32
    _cache = None

    def __call__(self, j):
        j = jnp.asarray(j, jnp.uint32)
        past = 3 * discrete_gaussian.MAX_TRIALS
        u = jnp.where(j == past, 0.1, jnp.where(j == past + 1, 0.9, jnp.where(j % 3 == 2, 0.999999, 0.5)))
        return jnp.broadcast_to(u.astype(jnp.float32), (4,))


def test_a_record_whose_trials_all_fail_takes_a_fresh_candidate_not_zero():
    """docs/threat-model.md: such a record takes a fresh unconditioned proposal candidate (noise), never 0 (the bare
    answer): here the discrete Laplace(t) candidate ⌊−t log 0.1⌋ − ⌊−t log 0.9⌋ of each record's t = ⌊σ⌋ + 1."""
    sigma = np.array([2.0, 3.0, 4.0, 5.0], np.float32)
    out = np.asarray(jax.jit(lambda: dpjax.DiscreteGaussian(sigma=sigma).sample_noise(_Rejecting()))())
    t = np.floor(sigma) + 1
    want = np.floor(-t * np.log(np.float32(0.1))) - np.floor(-t * np.log(np.float32(0.9)))
    np.testing.assert_array_equal(out, want)
    assert np.all(out != 0)
