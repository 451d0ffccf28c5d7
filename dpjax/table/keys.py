"""Keyed randomness of the table layer: what every draw depends on, and nothing else.

The bounding draw of a row and the noise of a released value are functions of
``(key, what they are about)`` only — never of row order, partitioning or which backend
ran — so a run on pyarrow and a run on Spark give bitwise the same table:

* a *value hash*: 64 bits (two ``uint32`` words) of a unit or group key, from its
  canonical bytes (:func:`canonical_bytes`; integers also hashed vectorised, :func:`hash_int64`);
* the *bounding priorities*: the Threefry hash (:func:`dpjax.random.threefry2x32`, the
  engine's counter-based hash) of ``(unit, group, rank)`` under a key derived from the
  release key — a unit's choice of groups and rows is uniformly random and depends on the
  unit's own rows only;
* the *noise* of statistic component ``c`` for group ``g``: its element ``e`` draws its
  ``j``-th uniform from the hash of ``(j, e)`` under the pair ``H(H(key, c), g)``
  (:class:`GroupStream`, a :class:`dpjax.random.UniformStream` addressed by group instead
  of record position).
"""

from __future__ import annotations

import hashlib
import math

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.random import UniformStream, threefry2x32

__all__ = ["KeyWords", "canonical_bytes", "hash_values", "hash_int64", "GroupStream"]

# domain separators: the first counter word of each use of the release key
_BOUNDING, _NOISE, _INT_HASH = np.uint32(0x7AB1E001), np.uint32(0x7AB1E002), np.uint32(0x7AB1E003)


#: from this many entries the hash runs as one fused XLA loop (instead of numpy's 60 array passes)
_JIT_MIN = 1 << 16
#: entries per call of the jitted hash: a large input is hashed in chunks of this size into its
#: output (never a padded copy of the whole input; the last chunk is padded to a power of two,
#: so one compilation per size class up to this one)
_JIT_CHUNK = 1 << 20
_threefry_jit = jax.jit(threefry2x32)


@jax.jit
def _threefry_gathered_jit(k0, k1, x0, x1, i, j):
    return threefry2x32(k0[i], k1[i], x0[j], x1[j])


def _chunked(fn, tables, rows, n):
    """``fn(*tables, *rows)`` for ``rows`` of ``n`` entries (``None``: a scalar argument, passed as
    is), in chunks of ``_JIT_CHUNK`` entries written into two ``uint32[n]`` outputs; the last chunk
    is padded to a power of two (one compilation per size class)."""
    out0, out1 = np.empty(n, np.uint32), np.empty(n, np.uint32)
    for start in range(0, n, _JIT_CHUNK):
        stop = min(start + _JIT_CHUNK, n)
        pad = (1 << (stop - start - 1).bit_length()) - (stop - start)

        def part(x):
            return np.pad(x[start:stop], (0, pad)) if x.ndim else x

        a, b = fn(*tables, *(part(x) for x in rows))
        out0[start:stop], out1[start:stop] = np.asarray(a)[: stop - start], np.asarray(b)[: stop - start]
    return out0, out1


def _h(k0, k1, x0, x1):
    """threefry2x32 on ``uint32`` arrays (numpy in, numpy out, wrapping arithmetic). Large inputs
    go through the jitted hash in chunks of ``_JIT_CHUNK`` entries; the bits are the same either way."""
    k0, k1 = np.asarray(k0, np.uint32), np.asarray(k1, np.uint32)
    x0, x1 = np.broadcast_arrays(np.asarray(x0, np.uint32), np.asarray(x1, np.uint32))
    if x0.ndim == 1 and x0.size >= _JIT_MIN and k0.ndim <= 1 and k1.ndim <= 1:
        return _chunked(_threefry_jit, (), (k0, k1, x0, x1), x0.size)
    with np.errstate(over="ignore"):
        return threefry2x32(k0, k1, x0, x1)


def _h_gathered(k0, k1, x0, x1, i, j):
    """``_h(k0[i], k1[i], x0[j], x1[j])`` (``uint32`` tables, integer indices): for large inputs the
    gathers run inside the jitted hash (one pass, no gathered copies; each table padded to a power of
    two, so that tables of nearby sizes share a compilation); the bits are the same either way."""
    if len(i) < _JIT_MIN:
        return _h(k0[i], k1[i], x0[j], x1[j])

    def padded(t):
        t = np.asarray(t, np.uint32)
        return np.pad(t, (0, (1 << max(len(t) - 1, 1).bit_length()) - len(t)))

    return _chunked(
        _threefry_gathered_jit,
        (padded(k0), padded(k1), padded(x0), padded(x1)),
        (np.asarray(i, np.int32), np.asarray(j, np.int32)),
        len(i),
    )


class KeyWords:
    """The release key consumed once, as two ``uint32`` words, and the sub-keys derived from it.

    Args:
      key: a Threefry PRNG key, consumed here (``jax.random.bits``).
    """

    def __init__(self, key):
        words = np.asarray(jax.random.bits(key, (2,), jnp.uint32))
        self.k0, self.k1 = np.uint32(words[0]), np.uint32(words[1])

    def bounding(self):
        """The key pair of the contribution-bounding draws.

        Returns:
          ``(k0, k1)``, two ``uint32`` scalars.
        """
        a, b = _h(self.k0, self.k1, _BOUNDING, np.uint32(0))
        return np.uint32(a), np.uint32(b)

    def component(self, name: str):
        """The key pair of the noise of the statistic component called ``name``.

        Args:
          name: the component's name (:attr:`dpjax.table.statistics.Component.name`, or ``"units"``).

        Returns:
          ``(k0, k1)``, two ``uint32`` scalars.
        """
        w = hash_values([name])[0]
        a, b = _h(*_h(self.k0, self.k1, _NOISE, np.uint32(0)), w[0], w[1])
        return np.uint32(a), np.uint32(b)


def canonical_bytes(value) -> bytes:
    """A value's bytes, the same whichever backend produced it (numpy/pandas/Python scalars).

    A type tag, then an integer's decimal digits, a float's ``hex`` (an integral float is an integer, so
    ``-0.0`` is ``0``; NaN its own ``Fnan``, not null), a string's UTF-8; ``None``/NaT is the null key; a tuple
    (a key of several columns) its parts length-prefixed. The table layer refuses NaN keys before hashing
    (:func:`dpjax.table.data.canonical_keys`).

    Args:
      value: a key value (scalar, ``None`` or a tuple of them).

    Returns:
      The canonical bytes.
    """
    if value is None:
        return b"N"
    if isinstance(value, tuple):  # a group key of several columns: length-prefixed parts
        return b"T" + b"".join(len(b).to_bytes(4, "little") + b for b in map(canonical_bytes, value))
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, bool):
        return b"B1" if value else b"B0"
    if isinstance(value, int):
        return b"I" + str(value).encode()
    if isinstance(value, float):
        return b"I" + str(int(value)).encode() if value.is_integer() else b"F" + value.hex().encode()
    if isinstance(value, str):
        return b"S" + value.encode("utf-8")
    if isinstance(value, bytes):
        return b"Y" + value
    try:
        import pandas as pd

        if value is pd.NaT or value is pd.NA:
            return b"N"
    except ImportError:  # pragma: no cover
        pass
    return b"O" + str(value).encode("utf-8")


def hash_values(values) -> np.ndarray:
    """64-bit hashes (BLAKE2b) of the canonical bytes of each value.

    One per *distinct* value: callers hash a dictionary, never every row.

    Args:
      values: a sequence of key values (:func:`canonical_bytes`).

    Returns:
      ``uint32[n, 2]``, the two words of each hash.
    """
    digests = b"".join(hashlib.blake2b(canonical_bytes(v), digest_size=8).digest() for v in values)
    return np.frombuffer(digests, np.uint32).reshape(len(values), 2).copy()


def hash_int64(values: np.ndarray) -> np.ndarray:
    """64-bit hashes of integers, vectorised (Threefry of the two words of the int64 under a fixed key).

    Used for integer unit ids, whose canonical form is the integer.

    Args:
      values: integers (cast to int64).

    Returns:
      ``uint32[n, 2]``, the two words of each hash.
    """
    v = np.asarray(values, np.int64).view(np.uint64)
    lo, hi = (v & np.uint64(0xFFFFFFFF)).astype(np.uint32), (v >> np.uint64(32)).astype(np.uint32)
    a, b = _h(_INT_HASH, _INT_HASH, lo, hi)
    return np.stack([a, b], axis=-1)


def derive(pair, words: np.ndarray):
    """Per-entry key pairs ``H(pair, words)``.

    Args:
      pair: a key pair ``(k0, k1)`` of ``uint32``.
      words: ``uint32[n, 2]``, one hash per entry.

    Returns:
      ``(k0, k1)``: two ``uint32[n]`` arrays.
    """
    return _h(pair[0], pair[1], words[:, 0], words[:, 1])


class GroupStream(UniformStream):
    """Uniforms addressed by (group key pair, element).

    Uniform ``j`` of element ``e`` of a group is drawn like :class:`~dpjax.random.UniformStream`'s record ``e``,
    under the group's own pair.

    Args:
      k0: the groups' first key words, ``uint32`` broadcasting against ``elements``.
      k1: the groups' second key words, likewise.
      elements: the element index of each entry (``uint32``).
      dtype: the uniforms' float dtype.
    """

    def __init__(self, k0, k1, elements, dtype):
        self._k0, self._k1 = jnp.asarray(k0, jnp.uint32), jnp.asarray(k1, jnp.uint32)
        self._elements = jnp.asarray(elements, jnp.uint32)
        self.shape = tuple(self._elements.shape)
        self.size = math.prod(self.shape)
        self.dtype = jnp.dtype(dtype)
        self._cache = {}

    def _words(self, j):
        if isinstance(j, int) and j in self._cache:
            return self._cache[j]
        words = threefry2x32(
            self._k0, self._k1, jnp.broadcast_to(jnp.asarray(j, jnp.uint32), self.shape), self._elements
        )
        if isinstance(j, int):
            self._cache[j] = words
        return words
