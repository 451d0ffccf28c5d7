"""Poisson subsampling: every example enters a batch independently, with probability q.

This is the sampling that the subsampled-Gaussian accountant (``accounting.pld(...,
sampling_prob=q)``) assumes: a Bernoulli(q) draw per example and step, so batch sizes
vary (Binomial(n, q)). Shuffling into fixed-size batches, or sampling a fixed number of
examples, is a different mechanism with a different (larger) privacy loss.

Randomness is record-addressed (:mod:`dpjax.random`): example ``i``'s draw at step ``t``
depends only on ``(key, t, i)``, so a step's batch is reproducible from the key and the
step alone. Draws compare a float32 uniform ``(k + ½)·2⁻²³`` with ``q`` rounded *down* to a
multiple of 2⁻²³, so the realised rate is exactly that rounded value, never above the
``q`` an accountant is given.

:class:`PoissonSampler` turns a step's draws into fixed-shape micro-batches (index and
mask arrays of a static ``batch_size``), padded with masked entries, as many as the
sampled set needs: no example is dropped (a truncated batch would be another mechanism),
and every micro-batch has the same shape, so one compiled training step serves them all.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.random import MAX_RECORDS, UniformStream, check_key
from dpjax.validation import check_int, check_probability

__all__ = ["poisson_mask", "PoissonSampler", "realized_sampling_prob"]

#: domain-separation tag folded into the key before the step (the noise of a DP-SGD step folds
#: another), so that one key given to both never makes a batch draw and a noise draw coincide.
SAMPLING_TAG = 0x5A3B1E01

_RESOLUTION = 2.0**23  # float32 uniforms take the values (k + 1/2) / 2**23


def realized_sampling_prob(sampling_prob) -> float:
    """The rate the sampler realises for ``sampling_prob``: q rounded down to a multiple of 2⁻²³.

    Args:
      sampling_prob: q, in (0, 1].

    Returns:
      The realised rate, a float.

    Raises:
      ValueError: ``sampling_prob`` outside (0, 1].
    """
    check_probability("sampling_prob", sampling_prob)
    return math.floor(float(sampling_prob) * _RESOLUTION) / _RESOLUTION


@functools.partial(jax.jit, static_argnums=(2,))
def _mask(key, step, num_examples, threshold):
    k = jax.random.fold_in(jax.random.fold_in(key, SAMPLING_TAG), step)
    return UniformStream(k, (num_examples,), jnp.float32)(0) < threshold


def poisson_mask(key, num_examples, sampling_prob, *, step=0) -> jax.Array:
    """Bernoulli(q) membership of each of ``num_examples`` examples at ``step``.

    Example ``i``'s draw depends only on ``(key, step, i)``. The key is not consumed (a step's key is folded
    from it), so pass the same key with successive steps; never give it to another random function. Jit-able
    (``num_examples`` static). The rate realised is :func:`realized_sampling_prob`'s.

    Args:
      key: a Threefry PRNG key.
      num_examples: the dataset size n, at most 2**32.
      sampling_prob: q, in (0, 1].
      step: the training step.

    Returns:
      bool ``[num_examples]``.

    Raises:
      ValueError: ``key`` not a Threefry key; ``num_examples`` not a positive integer or above 2**32;
        ``sampling_prob`` outside (0, 1].
    """
    key = check_key(key)
    num_examples = check_int("num_examples", num_examples, minimum=1)
    if num_examples > MAX_RECORDS:
        raise ValueError(f"num_examples must be at most 2**32, got {num_examples}")
    realized = realized_sampling_prob(sampling_prob)
    return _mask(key, jnp.asarray(step, jnp.uint32), num_examples, jnp.float32(realized))


class PoissonSampler:
    """Poisson batches of a dataset of ``num_examples`` examples, as fixed-shape micro-batches.

    >>> sampler = PoissonSampler(key, num_examples=60000, sampling_prob=256 / 60000, batch_size=128)
    >>> for idx, mask in zip(*sampler.batches(step)):   # idx: int32[128], mask: bool[128]
    ...     grads_sum += clipped_grad_sum(params, x[idx], y[idx], mask)   # masked entries add nothing

    ``batch_size`` is the physical (micro-)batch shape. A step yields ``max(1, ⌈|B|/batch_size⌉)``
    micro-batches covering the sampled set B exactly once; the padding entries have mask
    False (index 0). Normalise by :attr:`expected_batch_size` (q·n), never by |B|: the actual
    size depends on who is in the data.

    Args:
      key: a Threefry PRNG key, folded per step (never consumed; never give it to another random function).
      num_examples: the dataset size n.
      sampling_prob: q, in (0, 1], at least 2**-23.
      batch_size: the physical (micro-)batch shape.

    Raises:
      ValueError: ``key`` not a Threefry key; ``num_examples`` or ``batch_size`` not a positive integer;
        ``sampling_prob`` outside (0, 1] or below 2**-23.
    """

    def __init__(self, key, num_examples, sampling_prob, batch_size):
        self._key = check_key(key)
        self.num_examples = check_int("num_examples", num_examples, minimum=1)
        self.sampling_prob = float(check_probability("sampling_prob", sampling_prob))
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.realized_sampling_prob = realized_sampling_prob(sampling_prob)
        if self.realized_sampling_prob == 0.0:
            raise ValueError(f"sampling_prob must be at least 2**-23 (float32 uniforms), got {sampling_prob}")

    @property
    def expected_batch_size(self) -> float:
        """q·n: the normaliser of a DP-SGD step under Poisson sampling."""
        return self.sampling_prob * self.num_examples

    def mask(self, step) -> jax.Array:
        """Membership of every example at ``step``.

        Args:
          step: the training step.

        Returns:
          bool ``[num_examples]``.
        """
        return poisson_mask(self._key, self.num_examples, self.sampling_prob, step=step)

    def batches(self, step):
        """The sampled set of ``step`` as fixed-shape micro-batches.

        Args:
          step: the training step (a non-negative integer).

        Returns:
          ``(indices, mask)``: int32 and bool arrays of shape ``(k, batch_size)``.

        Raises:
          ValueError: ``step`` not a non-negative integer.
        """
        members = np.flatnonzero(np.asarray(self.mask(check_int("step", step, minimum=0))))
        k = max(1, -(-members.size // self.batch_size))
        idx = np.zeros(k * self.batch_size, np.int32)
        idx[: members.size] = members
        mask = np.arange(k * self.batch_size) < members.size
        return jnp.asarray(idx.reshape(k, self.batch_size)), jnp.asarray(mask.reshape(k, self.batch_size))
