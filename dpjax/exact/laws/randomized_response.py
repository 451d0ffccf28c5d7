"""The randomized response samplers of the exact tier (:mod:`dpjax.exact.sampler`).

k-ary randomized response with keep probability T/2^64 for an integer threshold T (:func:`rr_keep`), one keep
word and one 64-bit Lemire word for another category (:func:`rr_code`), completed by :func:`exact_rr_record`.

* :class:`RandomizedResponseThreshold` — one ε (one threshold);
* :class:`RandomizedResponseThresholds` — per-record thresholds;
* :class:`RandomizedResponseLookup` — per-record ε whose thresholds the device program looks up in a perfect hash
  table of their distinct values (:class:`RRTable`), the records it misses flagged;
* :class:`RandomizedResponseSampler` — the law an :class:`~dpjax.exact.ExactLattice` holds.

References:
  Warner, "Randomized Response: A Survey Technique for Eliminating Evasive Answer Bias", JASA 1965;
  Lemire, "Fast Random Integer Generation in an Interval", ACM TOMACS 2019.
"""

from __future__ import annotations

import dataclasses
import decimal
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.exact.sampler import IntegerSampler, LatticeSampler, padded, take


__all__ = [
    "RandomizedResponseThreshold",
    "RandomizedResponseThresholds",
    "RandomizedResponseLookup",
    "RandomizedResponseSampler",
    "RRTable",
    "TableMiss",
    "RR_TABLE_MAX",
    "rr_keep",
    "sample_positions",
    "exact_rr_record",
    "rr_code",
    "rr_threshold",
]


# -- k-ary randomized response: one keep word, one 64-bit Lemire word for another category -------------
def rr_threshold(k1):
    """2^64 mod k1: Lemire's rejection threshold for a uniform index in [0, k1) from a 64-bit word.

    Args:
      k1: the number of other categories.

    Returns:
      The threshold, an int.
    """
    return (1 << 64) % int(k1)


def rr_code(words, values, keep, k1):
    """Randomized response over k1 + 1 categories from two words per record, as packed codes.

    Packed like :func:`~dpjax.exact.laws.discrete_laplace.laplace_code` (category = code >> 8, flagged =
    code & 1): word 0 keeps the value iff it is below ``keep`` (probability keep/2^64 exactly); otherwise word 1
    picks another category uniformly by Lemire's multiply-shift on 64 bits (index ⌊w·k1/2^64⌋, skipping the
    value), whose rejection (low half below 2^64 mod k1, probability < k1/2^64) is flagged for
    :func:`exact_rr_record`.

    Args:
      words: the records' word source (:class:`~dpjax.exact.bits.ThreefryWords` or alike).
      values: the true categories.
      keep: the keep threshold T (an int, or a uint64 array, one per record).
      k1: the number of other categories.

    Returns:
      int64 codes, one per record.
    """
    from dpjax.exact.bits import mul_128

    records = words.records.reshape(-1)
    u = words(0, records)
    hi, lo = mul_128(words(1, records), jnp.full(records.shape, k1, jnp.uint64))
    r = hi.astype(jnp.int64)
    v = values.astype(jnp.int64)
    kept = u < (keep if isinstance(keep, jax.Array) else np.uint64(keep))  # (a per-record array of thresholds, or one)
    out = jnp.where(kept, v, r + (r >= v))
    flag = ~kept & (lo < np.uint64(rr_threshold(k1)))
    return out * 256 + flag.astype(jnp.int64)


def exact_rr_record(word, value, keep, k1):
    """:func:`rr_code` for one record's word stream, a rejected Lemire word retried with words 2, 3, ...

    Args:
      word: ``word(j)``, the record's word j (ints in [0, 2^64)).
      value: the record's true category.
      keep: its keep threshold T.
      k1: the number of other categories.

    Returns:
      The released category, an int.
    """
    if word(0) < keep:
        return int(value)
    j = 1
    while True:
        m = word(j) * int(k1)
        if m % (1 << 64) >= rr_threshold(k1):
            r = m >> 64
            return r + (r >= value)
        j += 1


def _unpack(code):
    """(category, flagged) of packed codes (category = code >> 8, flagged = code & 1)."""
    return code >> 8, (code & 1) == 1


@dataclasses.dataclass(frozen=True)
class RandomizedResponseThreshold(IntegerSampler):
    """Randomized response over ``k1`` + 1 categories keeping the answer iff word 0 is below ``keep``.

    Attributes:
      keep: the keep threshold T.
      k1: the number of other categories.
    """

    keep: int
    k1: int

    categorical = True

    def noise(self, words, values, params):
        return _unpack(rr_code(words, values, self.keep, self.k1))

    def complete(self, word, value, params):
        return exact_rr_record(word, value, self.keep, self.k1)

    @property
    def words_per_record(self):
        return 2


@dataclasses.dataclass(frozen=True)
class RandomizedResponseThresholds(IntegerSampler):
    """Randomized response over ``k1`` + 1 categories with per-record keep thresholds (params: uint64 keep).

    Attributes:
      k1: the number of other categories.
    """

    k1: int

    categorical = True

    def noise(self, words, values, params):
        return _unpack(rr_code(words, values, params[0], self.k1))

    def complete(self, word, value, params):
        return exact_rr_record(word, value, int(params[0]), self.k1)

    @property
    def words_per_record(self):
        return 2


@dataclasses.dataclass(frozen=True)
class RandomizedResponseLookup(RandomizedResponseThresholds):
    """Randomized response with per-record ε whose keep thresholds the device program looks up in a table.

    The params are the ε, the :class:`RRTable`'s slots and hash multiplier: each record's keep threshold is looked
    up in the table (:func:`rr_lookup`), the records whose ε it misses flagged.

    Attributes:
      k1: the number of other categories.
      table: the :class:`RRTable` on the host, which gives the flagged records' thresholds.
    """

    table: "RRTable" = dataclasses.field(default=None, compare=False)

    def noise(self, words, values, params):
        keep, missing = rr_lookup(*params)
        code = rr_code(words, values, keep, self.k1)
        return _unpack(code | missing.astype(jnp.int64))

    def at(self, params, g, idx, n):
        return (self.table.thresholds_at(params[0], idx),), 1.0


class RandomizedResponseSampler(LatticeSampler):
    """Randomized response's law: categories, not lattice points.

    The lattice's ``param`` holds the keep thresholds; the number of other categories comes from the lattice's
    mechanism.
    """

    categorical = True
    checks_values = True

    def one_scale(self, lat, param, shift):
        return RandomizedResponseThreshold(int(param), lat.noise.num_categories - 1)

    def per_record(self, lat, param, shift, g, one_scale):
        keep = np.asarray(param.flat[0]) if one_scale else np.ascontiguousarray(param).reshape(-1)
        return RandomizedResponseThresholds(lat.noise.num_categories - 1), (keep,), 1.0


#: decimal digits of the randomized response's thresholds and achieved ε (the achieved ε is 0 or at least about
#: 2^-64/k: its relative error stays below 10^-60, far inside the float64 ulp the report is rounded up by)
RR_DIGITS = 80


@functools.lru_cache(maxsize=4096)
def rr_keep(x, k):
    """The integer keep threshold T of randomized response over ``k`` categories at ε = ``x``, and the ε it achieves.

    T = ⌊2^64 e^ε/(e^ε + k − 1)⌋ − 1, at least ⌈2^64/k⌉ (keep at least as likely as each other category: the law
    the accountant's randomized response has) and at most 2^64 − 1, in :data:`RR_DIGITS`-digit decimal
    arithmetic; the ε its law has, ln(T (k − 1)/(2^64 − T)) (≥ 0), at the same precision, rounded up to a
    float64 (the smallest positive float where it is 0). Cached: privacy tiers repeat their few values release
    after release.

    Args:
      x: ε, a float.
      k: the number of categories.

    Returns:
      ``(T, ε achieved)``: an int and a float.
    """
    ctx = decimal.Context(prec=RR_DIGITS)
    ex = ctx.exp(decimal.Decimal(x))
    t = int(ctx.divide(ex * (2**64), ex + (k - 1)).to_integral_value(rounding=decimal.ROUND_FLOOR)) - 1
    t = max(-(-(2**64) // k), min(t, 2**64 - 1))
    kept, other = t * (k - 1), 2**64 - t  # the law's ratio kept/other ≥ 1 (T ≥ 2^64/k)
    achieved = float(ctx.ln(ctx.add(1, ctx.divide(kept - other, other)))) if kept > other else 0.0
    return t, math.nextafter(achieved, math.inf)


def rr_lookup(eps, table, multiplier):
    """The keep thresholds of the records' ε from an :class:`RRTable`'s slots, and the records the table misses.

    Slot h = (bits · multiplier mod 2^w) >> (w − b) of the ε's w-bit pattern (one multiply, one shift, two
    gathers).

    Args:
      eps: the records' ε (float32 or float64, device array).
      table: the slots, uint64 ``[2, 2^b]``: the ε bits, their T.
      multiplier: the hash multiplier.

    Returns:
      ``(thresholds, missing)``: uint64 thresholds and the records whose slot holds another ε (flagged).
    """
    width = jnp.dtype(eps.dtype).itemsize * 8
    u = jnp.uint64 if width == 64 else jnp.uint32
    bits = jax.lax.bitcast_convert_type(eps, u)
    h = (bits * multiplier.astype(u)) >> u(width - (table.shape[1].bit_length() - 1))
    return table[1][h], table[0][h] != bits.astype(jnp.uint64)


#: per-record ε with at most this many distinct values look their keep thresholds up in a table (:class:`RRTable`)
RR_TABLE_MAX = 1024
#: records whose ε the table misses are completed on the host up to this many (one by one); beyond, the missed
#: values join the table and the release runs again
RR_HOST_MISSES = 64


def _perfect_hash(keys, width):
    """(multiplier a, b, slots) of a multiply-shift hash slot = (key · a mod 2^w) >> (w − b) that sends the distinct
    ``width``-bit ``keys`` to distinct slots of 2^b ≥ n²/4 (n keys; 4 MB of table for 1024 values): a random odd a
    does with probability about e^-2; the first of 64 deterministic candidates (SplitMix64 of 1, 2, ...) that does
    is taken, else b grows (at b = w every odd a is a bijection)."""
    mask = (1 << 64) - 1
    keys = keys.astype(np.uint64)
    b = max(4, (-(-(keys.size**2) // 4) - 1).bit_length())
    while True:  # (ends by b = w)
        for i in range(1, 65):
            z = i * 0x9E3779B97F4A7C15 & mask
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 & mask
            z = (z ^ (z >> 27)) * 0x94D049BB133111EB & mask
            a = ((z ^ (z >> 31)) | 1) & ((1 << width) - 1)
            slots = ((keys * np.uint64(a)) & np.uint64((1 << width) - 1)) >> np.uint64(width - b)
            if np.unique(slots).size == keys.size:
                return a, b, slots
        b += 1


class RRTable:
    """The keep thresholds of randomized response for distinct ε in a perfect hash table, for :func:`rr_lookup`.

    The table is built by :func:`_perfect_hash`. An empty slot holds the ε of the first slot in use, whose hash is
    not that slot: no record can match it.

    Args:
      bits: the ε's w-bit patterns (w = 32 or 64; duplicates allowed).
      k: the number of categories.
    """

    def __init__(self, bits, k):
        self.bits = np.unique(bits)
        self.k = k
        width = self.bits.dtype.itemsize * 8
        a, b, slots = _perfect_hash(self.bits, width)
        table = np.zeros((2, 1 << b), np.uint64)
        table[0] = self.bits[0]
        table[0, slots] = self.bits
        table[1, slots] = [rr_keep(float(v), k)[0] for v in self.bits.view(np.float32 if width == 32 else np.float64)]
        self.table, self.multiplier = table, np.uint64(a)

    def thresholds_at(self, eps, idx):
        """The keep thresholds of the flagged records ``idx``, their ε gathered from the device array ``eps``.

        Args:
          eps: the records' ε (device array).
          idx: the flagged records' indices (numpy ints, at least one).

        Returns:
          uint64 thresholds, one per record of ``idx``.

        Raises:
          TableMiss: more than :data:`RR_HOST_MISSES` of them have an ε the table misses.
        """
        e = np.asarray(take(eps, jnp.asarray(padded(idx))))[: idx.size]
        missed = ~np.isin(e.view(self.bits.dtype), self.bits)
        if np.count_nonzero(missed) > RR_HOST_MISSES:
            raise TableMiss(e[missed].view(self.bits.dtype))
        return np.asarray([rr_keep(float(v), self.k)[0] for v in e], np.uint64)


class TableMiss(Exception):
    """Raised by :meth:`RRTable.thresholds_at` with the ε bits its table missed (the release adds them and runs again).

    Args:
      bits: the missed ε's bit patterns.
    """

    def __init__(self, bits):
        super().__init__(f"{bits.size} records with an ε out of the table")
        self.bits = bits


@functools.lru_cache(maxsize=64)
def _sample_step(size):
    """The first integer from max(⌊size/φ⌋, 4097) (φ the golden ratio) with no prime factor up to 4096 (one lies
    within 1024: prime gaps below 2^32 are at most 336)."""
    sieve = np.ones(4097, bool)
    sieve[:2] = False
    for p in range(2, 65):
        if sieve[p]:
            sieve[p * p :: p] = False
    primes = np.flatnonzero(sieve)
    cand = max(int(size * 0.6180339887498949), 4097) + np.arange(64, dtype=np.int64)
    while True:  # (64 candidates at a time: about 4 of them qualify)
        ok = np.all(cand[:, None] % primes != 0, axis=1)
        if ok.any():
            return int(cand[ok][0])
        cand += 64


def sample_positions(size):
    """The records whose ε the table starts from: j s mod ``size`` for j < 4096 (all the records when fewer).

    s is :func:`_sample_step`'s. Spread over the records (s/size near 1/φ: the golden-ratio sequence), and over
    the residues modulo every period L ≤ 4096 that divides ``size`` (s is prime to L, so any L consecutive j hit
    every residue): ε assigned in tiers that repeat record by record (record i in tier i mod L) shows the sample
    every tier, where a stride sharing a factor with L sees some of them only.

    Args:
      size: the number of records.

    Returns:
      int64 record indices.
    """
    if size <= 4096:
        return np.arange(size)
    return np.arange(4096, dtype=np.int64) * _sample_step(size) % size
