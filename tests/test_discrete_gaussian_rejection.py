"""The float tier's discrete Gaussian (the block sampler) after :data:`MAX_TRIALS` rejected trials."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import dpjax
from dpjax.kernels import discrete_gaussian


class _Rejecting:
    """Words whose every trial is rejected (w0 = 0: the last block, kept with probability < 1; the keep word
    2^32 − 1), then the candidate words (2^30, 3) past the trials (the fresh candidate's)."""

    dtype = jnp.float32
    shape = (4,)
    _cache = None

    def words(self, j):
        j = jnp.asarray(j, jnp.uint32)
        past = 2 * discrete_gaussian.MAX_TRIALS
        w0 = jnp.where(j == past, jnp.uint32(1 << 30), jnp.where(j % 2 == 1, jnp.uint32(2**32 - 1), jnp.uint32(0)))
        w1 = jnp.where(j == past, jnp.uint32(3), jnp.uint32(0))
        return jnp.broadcast_to(w0, self.shape), jnp.broadcast_to(w1, self.shape)


def test_a_record_whose_trials_all_fail_takes_a_fresh_candidate_not_zero():
    """docs/threat-model.md: such a record takes a fresh unconditioned proposal candidate (noise), never 0 (the bare
    answer): here −q for the block q = #{j : 2^30 < T[j]} of each record's proposal table (sign bit 1, b = 0)."""
    sigma = np.array([2.0, 3.0, 4.0, 5.0], np.float32)
    out = np.asarray(jax.jit(lambda: dpjax.DiscreteGaussian(sigma=sigma).sample_noise(_Rejecting()))())
    _, tables, index, _, _ = discrete_gaussian._block_params(jnp.asarray(sigma))
    t = np.asarray(tables)[np.asarray(index)]
    want = -np.sum((1 << 30) < t[:, 1:].astype(np.int64), axis=1).astype(np.float32)
    np.testing.assert_array_equal(out, want)
    assert np.all(out != 0)
