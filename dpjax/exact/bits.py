"""Raw random words for the exact tier: record-addressed Threefry, or the operating system's CSPRNG.

Every integer sampler of :mod:`dpjax.exact.cks` is a state machine that consumes one
64-bit word per step. Word ``j`` of record ``i`` is either

* :class:`ThreefryWords`: both output words of the Threefry-2x32 hash of the counter
  ``(j, i)`` under the key's pair (:func:`dpjax.random.threefry2x32`, the hash of
  :class:`dpjax.random.UniformStream`), computed on the device next to its consumer: a
  function of ``(key, i, j)`` only, so a release is reproducible and identical whole or
  in slices; or
* :class:`HostBits`: words read from ``os.urandom`` on the host and fed to the device in
  blocks (for deployments that must not rely on a PRF; not reproducible by design).

:class:`GroupWords` addresses words by an entry's own key pair and element instead of a record
position (the exact tier of table releases, :mod:`dpjax.table.noise`): word ``j`` of an entry is
the same hash of the counter ``(j, element)`` under that entry's pair.

The samplers never see floats: only these words, compared with integer thresholds.
"""

from __future__ import annotations

import concurrent.futures
import os

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.random import threefry2x32

__all__ = ["ThreefryWords", "GroupWords", "HostBits", "key_pair", "mul_128"]

_M32 = np.uint64(0xFFFFFFFF)


def key_pair(key):
    """The key's Threefry pair (``jax.random.bits(key, (2,))``: consumes the key once).

    Args:
      key: a Threefry PRNG key.

    Returns:
      ``uint32[2]``.
    """
    return jax.random.bits(key, (2,), jnp.uint32)


def mul_128(u, q):
    """(hi, lo) of the 128-bit product of two uint64 arrays (32-bit limbs, no overflow).

    Args:
      u: uint64 array (numpy or jax).
      q: uint64 array broadcasting with ``u``.

    Returns:
      ``(hi, lo)``: the high and low 64 bits of ``u·q``.
    """
    u1, u0 = u >> np.uint64(32), u & _M32
    q1, q0 = q >> np.uint64(32), q & _M32
    p00, p01, p10, p11 = u0 * q0, u0 * q1, u1 * q0, u1 * q1
    mid = (p00 >> np.uint64(32)) + (p01 & _M32) + (p10 & _M32)
    lo = ((mid & _M32) << np.uint64(32)) | (p00 & _M32)
    hi = p11 + (p01 >> np.uint64(32)) + (p10 >> np.uint64(32)) + (mid >> np.uint64(32))
    return hi, lo


class _CounterWords:
    """Word ``j`` as one uint64 ``(w0 << 32) | w1`` from the subclass's ``halves(j, records)``."""

    def __call__(self, j, records=None):
        w0, w1 = self.halves(j, records)
        return (w0.astype(jnp.uint64) << np.uint64(32)) | w1.astype(jnp.uint64)


class ThreefryWords(_CounterWords):
    """Word ``j`` (traced or not) of every record: ``(w0 << 32) | w1`` of ``threefry2x32(key, (j, i))``.

    Args:
      key: a Threefry key, consumed once (ignored when ``pair`` is given).
      shape: the records' shape (row-major record indices).
      start: the record index of the first record.
      pair: the key's two words (:func:`key_pair`) instead of ``key``, for a caller that needs them again (the
        host completion of flagged records) without consuming the key twice.
    """

    def __init__(self, key, shape, start=0, *, pair=None):
        words = key_pair(key) if pair is None else pair
        self._k0, self._k1 = words[0], words[1]
        self.records = jnp.asarray(start, jnp.uint32) + jnp.arange(int(np.prod(shape)), dtype=jnp.uint32).reshape(shape)
        self.shape = tuple(shape)

    def halves(self, j, records=None):
        """Word ``j`` as its (high, low) uint32 halves ``(w0, w1)``, for samplers that compute in 32-bit lanes.

        Args:
          j: the word index (traced or not).
          records: the record counters (default: every record).

        Returns:
          ``(w0, w1)``, uint32 arrays of the records' shape.
        """
        r = self.records if records is None else records
        return threefry2x32(self._k0, self._k1, jnp.broadcast_to(jnp.asarray(j, jnp.uint32), jnp.shape(r)), r)


class GroupWords(_CounterWords):
    """Word ``j`` of every entry under its own key pair: ``(w0 << 32) | w1`` of ``threefry2x32((k0, k1), (j, e))``.

    :class:`ThreefryWords` addressed by (pair, element) instead of (key, record), for the table samplers of
    :mod:`dpjax.exact.laws` (``records``: the elements, the counter's second word). On the host, word ``j`` of
    entry ``i`` is ``table_samplers.threefry_word(k0[i], k1[i], j, elements[i])``.

    Args:
      k0: the entries' first key words, ``uint32``.
      k1: the entries' second key words, ``uint32`` of the same shape.
      elements: the entries' elements, ``uint32`` of the same shape.
    """

    def __init__(self, k0, k1, elements):
        self._k0, self._k1 = jnp.asarray(k0, jnp.uint32), jnp.asarray(k1, jnp.uint32)
        self.records = jnp.asarray(elements, jnp.uint32)
        self.shape = tuple(self.records.shape)

    def halves(self, j, records=None):
        """Word ``j`` as its (high, low) uint32 halves ``(w0, w1)``.

        Args:
          j: the word index (traced or not).
          records: the elements (default: every entry's).

        Returns:
          ``(w0, w1)``, uint32 arrays of the entries' shape.
        """
        r = self.records if records is None else records
        k0, k1 = self._k0.reshape(jnp.shape(r)), self._k1.reshape(jnp.shape(r))
        return threefry2x32(k0, k1, jnp.broadcast_to(jnp.asarray(j, jnp.uint32), jnp.shape(r)), r)


class HostBits:
    """Random words from ``os.urandom`` (or any ``source(nbytes) -> bytes``), made on the host.

    The exact release feeds them to the device and asks for more only for the records still running.
    ``os.urandom`` itself is read in chunks on up to :data:`READ_THREADS` threads (it releases the GIL while
    the kernel fills them); any other source is called once per request, so that a seeded one gives the same
    bytes in the same places.

    Args:
      source: ``source(nbytes) -> bytes``, returning exactly ``nbytes`` random bytes.

    Raises:
      ValueError: ``source`` not callable; later, a source that returns another number of bytes.
    """

    def __init__(self, source=os.urandom):
        if not callable(source):
            raise ValueError(f"source must be a callable returning random bytes, got {type(source).__name__}")
        self.source = source

    def _read(self, nbytes) -> np.ndarray:
        """``nbytes`` fresh bytes (uint8), refusing a source that returns another number of them."""
        if self.source is os.urandom and READ_THREADS > 1 and nbytes >= 2 * _READ_CHUNK:
            return _urandom_parallel(nbytes)
        raw = self.source(nbytes)
        if not isinstance(raw, (bytes, bytearray)) or len(raw) != nbytes:
            raise ValueError(f"source must return exactly {nbytes} bytes")
        return np.frombuffer(raw, dtype=np.uint8)

    def words(self, shape) -> np.ndarray:
        """``uint64`` fresh words of ``shape``.

        Args:
          shape: the words' shape.

        Returns:
          ``uint64`` array of ``shape``.

        Raises:
          ValueError: the source returned another number of bytes.
        """
        return self._read(8 * int(np.prod(shape))).view(np.uint64).reshape(shape)

    def prefixes(self, n) -> np.ndarray:
        """The top 16 bits of ``n`` fresh words (two bytes each).

        The exact release completes a word only where its prefix does not decide the sample: a word is then
        ``prefix << 48`` plus 48 fresh bits.

        Args:
          n: how many prefixes.

        Returns:
          ``uint16[n]``.

        Raises:
          ValueError: the source returned another number of bytes.
        """
        return self._read(2 * int(n)).view(np.uint16)


#: os.urandom is read in chunks of this many bytes, on up to READ_THREADS threads at once
_READ_CHUNK = 1 << 20
READ_THREADS = max(1, min(4, os.cpu_count() or 1))


def _urandom_parallel(nbytes) -> np.ndarray:
    """``nbytes`` bytes of ``os.urandom`` read in 1 MiB chunks by :data:`READ_THREADS` threads into one buffer (each
    thread its own contiguous part; the bytes are independent and uniform wherever they land): ``os.urandom``
    releases the GIL, so the threads read in parallel."""
    raw = np.empty(nbytes + 64, np.uint8)
    out = raw[-raw.ctypes.data % 64 :][:nbytes]  # 64-byte aligned: the device may alias it instead of copying
    parts = min(READ_THREADS, nbytes // _READ_CHUNK)
    cuts = [nbytes * k // parts for k in range(parts + 1)]

    def fill(a, b):
        for s in range(a, b, _READ_CHUNK):
            e = min(b, s + _READ_CHUNK)
            out[s:e] = np.frombuffer(os.urandom(e - s), np.uint8)

    with concurrent.futures.ThreadPoolExecutor(parts - 1) as pool:  # (an error in a thread is raised here: no
        others = [pool.submit(fill, a, b) for a, b in zip(cuts[1:-1], cuts[2:])]  # part of the buffer goes unfilled)
        fill(cuts[0], cuts[1])
        for f in others:
            f.result()
    return out
