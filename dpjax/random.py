"""Keys and record-addressed randomness.

All randomness in dpjax comes from an explicit key. A key passed to
:func:`dpjax.release` or :meth:`Mechanism.sample` is *consumed* once (so JAX's
``jax_debug_key_reuse`` checker flags a second use by the caller) and turned into
a Threefry-2x32 key pair. The ``j``-th uniform of record ``i`` is then taken from
the Threefry hash of a counter made of ``j`` and ``i`` under that pair (see
:class:`UniformStream`): it depends only on the key and on ``(i, j)``, never on how many records are
processed together, in which slice, or on which device. This is what makes a release bitwise identical whether
it runs whole, in slices (``start=``) or sharded over several devices.

Counter-based generation needs one hash per uniform, the same work
``jax.random.uniform`` does. The hash is written out as plain integer operations
(:func:`threefry2x32`, the same 20 rounds and bits as JAX's ``threefry2x32``
primitive) so that XLA fuses it with the sampler that consumes it; JAX's own CPU
lowering of the primitive is a rolled loop that writes every intermediate state to
memory.
"""

from __future__ import annotations

import math
import os

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["secure_key", "check_key", "UniformStream", "MAX_RECORDS", "threefry2x32"]

#: A key addresses at most 2**32 records (the record counter is one uint32 word).
MAX_RECORDS = 2**32


def secure_key() -> jax.Array:
    """A fresh Threefry key seeded from ``os.urandom``.

    128 bits of operating-system entropy are mixed into the key: the first 64
    bits seed it, the next two 32-bit words are folded in. (A Threefry-2x32 key
    has 64 bits of state, so 64 bits is the key space; the extra entropy guards
    against a weak first draw.) ``rbg`` keys are never produced: they give wrong
    results under ``vmap`` over per-record keys.

    Returns:
      A typed Threefry-2x32 key of shape ``()``.
    """
    words = np.frombuffer(os.urandom(16), dtype=np.uint32)
    key = jax.random.wrap_key_data(jnp.asarray(words[:2]), impl="threefry2x32")
    key = jax.random.fold_in(key, int(words[2]))
    return jax.random.fold_in(key, int(words[3]))


def check_key(key) -> jax.Array:
    """Validate a PRNG key and return it as a typed Threefry key.

    Accepts ``jax.random.key(...)`` (typed, Threefry) and legacy raw
    ``jax.random.PRNGKey(...)`` arrays (``uint32[2]``). Refuses ``rbg`` and
    ``unsafe_rbg`` keys and batches of keys.

    Args:
      key: the key to check.

    Returns:
      A typed Threefry key of shape ``()``.

    Raises:
      ValueError: an int, a non-array, a typed key of another implementation or of shape other than
        ``()``, a ``uint32[4]`` (rbg) array, or any other array than ``uint32[2]``.
    """
    if isinstance(key, (int, np.integer)):
        raise ValueError("key must be a JAX PRNG key (e.g. jax.random.key(0) or dpjax.random.secure_key()), got an int")
    if not isinstance(key, jax.Array) and not isinstance(key, np.ndarray):
        raise ValueError(f"key must be a JAX PRNG key, got {type(key).__name__}")
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        impl = str(jax.random.key_impl(key))
        if "threefry" not in impl:
            raise ValueError(
                f"key must be a threefry2x32 key, got impl {impl!r}: rbg keys break under vmap over per-record keys"
            )
        if key.shape != ():
            raise ValueError(f"key must be a single key (shape ()), got a key array of shape {key.shape}")
        return key
    if key.dtype == jnp.uint32 and key.shape == (2,):
        return jax.random.wrap_key_data(key, impl="threefry2x32")
    if key.dtype == jnp.uint32 and key.shape == (4,):
        raise ValueError("key looks like an rbg key (uint32[4]); rbg keys are refused: use jax.random.key(seed)")
    raise ValueError(f"key must be a JAX PRNG key, got an array of dtype {key.dtype} and shape {key.shape}")


_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry2x32(k0, k1, x0, x1):
    """The Threefry-2x32 hash (20 rounds) of counters ``(x0, x1)`` under key ``(k0, k1)``.

    Bit-identical to JAX's ``threefry2x32`` primitive (tested), written as unrolled
    ``uint32`` arithmetic so that XLA can fuse it into its consumers on every backend.

    Args:
      k0: the key's first uint32 word.
      k1: the key's second uint32 word.
      x0: the counters' first uint32 words (array).
      x1: the counters' second uint32 words (broadcasting with ``x0``).

    Returns:
      ``(y0, y1)``, the two uint32 hash words of each counter.

    References:
      Salmon, Moraes, Dror, Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3", SC 2011.
    """
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = x0 ^ ((x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r)))
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def _bits_to_uniform(w0, w1, dtype):
    """Map hash words to a uniform in the open interval (0, 1) of ``dtype``."""
    if jnp.dtype(dtype) == jnp.float64:
        hi = (w0 >> 6).astype(jnp.uint64)  # 26 bits
        lo = (w1 >> 6).astype(jnp.uint64)  # 26 bits
        k = (hi << 26) | lo  # 52 bits
        return (k.astype(jnp.float64) + 0.5) * (2.0**-52)
    # 23 bits: (k + 1/2) 2^-23 is exact in float32 and never 0 or 1.
    u = ((w0 >> 9).astype(jnp.float32) + 0.5) * jnp.float32(2.0**-23)
    return u.astype(dtype) if jnp.dtype(dtype) != jnp.float32 else u


class UniformStream:
    """Uniforms addressed by (stream, record): ``stream(j)`` returns U(0,1) per record.

    Built from a consumed key and a contiguous range of record indices
    ``start, start+1, …`` laid out row-major in ``shape``. Mechanisms draw their
    ``j``-th uniform per record with ``stream(j)``; ``j`` may be traced (rejection
    samplers use it as the trial counter).

    float32 (and narrower): uniform ``j`` of record ``i`` is word ``j mod 2`` of the
    Threefry hash of the counter ``(⌊j/2⌋, i)``, so one hash serves two streams of a
    record (a mechanism drawing two uniforms per record pays one hash). float64: both
    words of the hash of ``(j, i)`` give 52 random bits. Either way a uniform depends
    only on (key, j, i), and the hash is computed element-wise next to its consumer:
    no record's randomness is shared with, or laid out next to, another's.

    Args:
      key: a Threefry key, consumed once here.
      shape: the records' shape (row-major layout of the record indices).
      dtype: the uniforms' float dtype.
      start: the record index of the first record.
    """

    def __init__(self, key, shape, dtype, start=0):
        words = jax.random.bits(key, (2,), jnp.uint32)  # consumes the key once
        self._k0, self._k1 = words[0], words[1]
        self.shape = tuple(shape)
        self.size = math.prod(self.shape)
        self.start = jnp.asarray(start, jnp.uint32)
        self.dtype = jnp.dtype(dtype)
        self._cache = {}

    def __call__(self, j) -> jax.Array:
        """The j-th uniform of every record (hashes are computed once per Python-int j).

        Args:
          j: the stream index (a Python int or a traced integer).

        Returns:
          Uniforms in (0, 1) of the stream's shape and dtype.
        """
        if self.dtype == jnp.float64:
            w0, w1 = self._words(j)
            return _bits_to_uniform(w0, w1, self.dtype)
        if isinstance(j, int):
            word = self._words(j // 2)[j % 2]
        else:
            j = jnp.asarray(j, jnp.uint32)
            w0, w1 = self._words(j >> 1)
            word = jnp.where((j & 1) == 1, w1, w0)
        return _bits_to_uniform(word, None, self.dtype)

    def words(self, j):
        """Both uint32 words of the hash of counter ``(j, i)`` for every record i, whatever the stream's dtype.

        Float32 uniforms ``2j`` and ``2j + 1`` are their top 23 bits: for samplers that need more bits than a float
        uniform carries.

        Args:
          j: the counter's first word (traced or not).

        Returns:
          ``(w0, w1)``: uint32 arrays of the records' shape.
        """
        return self._words(j)

    def _words(self, j):
        """Both hash words of counter ``(j, i)`` for every record i (cached for a Python-int j)."""
        if isinstance(j, int) and j in self._cache:
            return self._cache[j]
        counter = (self.start + jnp.arange(self.size, dtype=jnp.uint32)).reshape(self.shape)
        words = threefry2x32(self._k0, self._k1, jnp.broadcast_to(jnp.asarray(j, jnp.uint32), counter.shape), counter)
        if isinstance(j, int):
            self._cache[j] = words
        return words
