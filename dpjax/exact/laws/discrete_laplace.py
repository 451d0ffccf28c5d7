r"""The discrete Laplace samplers of the exact tier (:mod:`dpjax.exact.sampler`).

* :class:`DiscreteLaplaceTable` — one scale τ = t/2^shift: the fixed-trip table sampler (:func:`laplace_noise`),
  completed on the host by :func:`exact_record`;
* :class:`DiscreteLaplaceScales` — per-record scales (t, shift): the inverse CDF evaluated per record with a
  rigorous float error bound (:func:`laplace_noise_per_record`, or its float32 decision), completed by
  :func:`exact_per_record`;
* :class:`LaplaceScales` — per-record Laplace or discrete Laplace scales b whose lattice is built in the device
  program, then run as :class:`DiscreteLaplaceScales`;
* :class:`DiscreteLaplaceSampler` — the law an :class:`~dpjax.exact.ExactLattice` holds.

The law. For τ = t/2^shift the discrete Laplace has pmf ∝ q^|z|, q = exp(−1/τ) (CKS Algorithm 2's
output law). It is drawn with no rejection: |Z| = 0 with probability p0 = (1 − q)/(1 + q), otherwise
|Z| = 1 + G with G ~ Geometric(q) (P(G = k) = (1 − q) q^k) and a fair sign (P(Z = ±k) = P(|Z| = k)/2).
The binary digits of a geometric variable are independent, so G splits into independent parts:

* H = G >> m ~ Geometric(R), R = q^(2^m), with m = max(0, ⌈log2 τ⌉ − ``DL_TABLE_LOG2``) (so that
  R ≤ exp(−2^-``DL_TABLE_LOG2``): H's table stays short);
* G mod 2^m as chunks of near-equal widths w_j ≤ ``CHUNK_BITS`` at bit offsets o_j
  (:func:`chunk_layout`): chunk j is c_j ∈ [0, 2^w_j) with P(c_j = c) ∝ r_j^c, r_j = q^(2^o_j)
  (a truncated geometric), so F_j(c) = P(c_j ≤ c) = (1 − r_j^(c+1)) / (1 − r_j^(2^w_j)).

The zero atom and H are one variable J (J = 0: Z = 0; J = h + 1: Z ≠ 0 and H = h), P(J > j) = (1 − p0) R^j,
drawn like the discrete Gaussian's |Z|: by inverse CDF from word 0 (the top bit the sign, the low 63 bits against
T[j] = ⌊2^63 P(J ≤ j)⌋, :func:`dl_icdf`, through the levelled guide of
:func:`~dpjax.exact.table_samplers.level_guide`); each chunk by inverse CDF from its own word (thresholds
⌊2^64 F_j(c)⌋, one guide-table look-up and a short bisection). One word per record for τ ≤ 2^``DL_TABLE_LOG2``
(every count at ε ≳ 10^-3), two at the Laplace lattice scales τ ∈ [2^20, 2^21]. Every comparison is exact
(:mod:`dpjax.exact.table_samplers`); the flagged records (ties, J past its table) are completed by
:func:`exact_record`, the same function of the record's word stream: the output law is exactly the discrete
Laplace — no truncation.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable, ClassVar

import jax
import jax.numpy as jnp
import mpmath
import numpy as np

from dpjax.exact import table_samplers
from dpjax.exact.sampler import IntegerSampler, LatticeSampler, padded, take
from dpjax.exact.table_samplers import (
    GUIDE_BITS,
    _Uniform,
    _count_le_guided,
    _ends,
    _ext_of,
    _icdf_on_host,
    _iv_floor,
    _level_search,
    _pack,
    _prec,
    _threefry_complete,
    _threshold,
    _word_halves,
    level_guide,
)

__all__ = [
    "DiscreteLaplaceTable",
    "DiscreteLaplaceScales",
    "LaplaceScales",
    "DiscreteLaplaceSampler",
    "LAPLACE_BITS",
    "DEVICE_LAPLACE_MIN",
    "laplace_lattice_bits",
    "reciprocal_pow2",
    "CHUNK_BITS",
    "DL_TABLE_LOG2",
    "chunk_layout",
    "discrete_laplace_fast",
    "dl_guide",
    "dl_icdf",
    "dl_tables",
    "exact_per_record",
    "exact_record",
    "guides",
    "laplace_code",
    "laplace_noise",
    "laplace_noise_dtype",
    "laplace_noise_per_record",
    "laplace_noise_per_record32",
    "resolve_on_host",
    "threefry_laplace",
]

#: bits per chunk of the geometric's low part (a table of 2^B − 1 thresholds per chunk)
CHUNK_BITS = 11
#: H = G >> m with m = max(0, ⌈log2 τ⌉ − this): J's table has about 28·2^this entries at most
DL_TABLE_LOG2 = 10
#: J's table stops where P(J > K) < 2^-this (the rest is resolved on the host)
_DL_TAIL = 40


class _Law:
    """Interval-valued CDFs of the parts of Z for τ = t/2^shift (exact rationals in, ``mpmath.iv`` out)."""

    def __init__(self, t, shift):
        self.t, self.shift = int(t), int(shift)

    def _r(self, power):  # exp(−2^power / τ) = exp(−2^(power + shift) / t)
        x = mpmath.iv.mpf(2) ** (power + self.shift) / self.t
        return mpmath.iv.exp(-x)

    def chunk_cdf(self, offset, c, width):  # chunk of bits offset .. offset + width − 1
        r = self._r(offset)
        return (1 - r ** (c + 1)) / (1 - r ** (1 << width))

    def j_tail0(self):  # P(J > 0) = P(Z ≠ 0) = 2q/(1 + q)
        q = self._r(0)
        return 2 * q / (1 + q)

    def j_cdf(self, m, j):  # P(J ≤ j) = 1 − P(Z ≠ 0) R^j
        return 1 - self.j_tail0() * self._r(m) ** j


@functools.lru_cache(maxsize=64)
def chunk_layout(t, shift, bits=CHUNK_BITS):
    """The chunks of G mod 2^m: ⌈m/bits⌉ chunks of near-equal widths, m = max(0, ⌈log2 τ⌉ − ``DL_TABLE_LOG2``).

    No chunk is wider than the law needs: short, well-spread tables.

    Args:
      t: the integer t of τ = t/2^shift.
      shift: the scale exponent.
      bits: the widest chunk.

    Returns:
      ``(offsets, widths, m)``.
    """
    t, shift = int(t), int(shift)
    m = max(0, (t - 1).bit_length() - shift - DL_TABLE_LOG2)  # ⌈log2 t⌉ − shift − DL_TABLE_LOG2
    k = -(-m // bits)
    widths = tuple(m // k + (1 if j < m % k else 0) for j in range(k)) if k else ()
    return tuple(sum(widths[:j]) for j in range(k)), widths, m


@functools.lru_cache(maxsize=64)
def dl_tables(t, shift, bits=CHUNK_BITS):
    """The chunk thresholds ⌊2^64 F_j(c)⌋ for τ = t/2^shift.

    Args:
      t: the integer t of τ = t/2^shift.
      shift: the scale exponent.
      bits: the widest chunk.

    Returns:
      A tuple of uint64 ``[2^w_j − 1]``, one per chunk.
    """
    t, shift = int(t), int(shift)
    law = _Law(t, shift)
    offsets, widths, _ = chunk_layout(t, shift, bits)
    return tuple(_chunk_thresholds(law, o, w) for o, w in zip(offsets, widths))


def _chunk_thresholds(law, offset, width):
    """⌊2^64 F(c)⌋ for c = 0 .. 2^width − 2, F(c) = (1 − r^(c+1))/(1 − r^(2^width)): the powers of r carried
    by one interval product per entry at 256 bits; an entry whose interval straddles an integer is recomputed
    by :func:`_threshold` (precision raised until certain)."""
    out = np.empty((1 << width) - 1, np.uint64)
    with _prec(256):
        r = law._r(offset)
        den, power = 1 - r ** (1 << width), r
        for c in range(out.size):
            v = _iv_floor((1 - power) / den, 64)
            if v is None:
                v = _threshold(lambda c=c: law.chunk_cdf(offset, c, width), 64)
            out[c] = min(max(v, 0), (1 << 64) - 1)
            power = power * r
    return out


def _dl_tail_chain(t, shift, m, prec):
    """Fixed-point bounds (scale 2^prec) of P(J > j) = P(Z ≠ 0) R^j for j = 0, 1, ... until the upper bound is
    below 2^-_DL_TAIL: floors for the lower chain, ceilings for the upper one (all factors positive)."""
    law = _Law(t, shift)
    with _prec(prec + 64):
        a_lo, a_hi = (math.floor(f * 2**prec) for f in _ends(law.j_tail0()))
        r_lo, r_hi = (math.floor(f * 2**prec) for f in _ends(law._r(m)))
    a_hi, r_hi = a_hi + 1, r_hi + 1
    lo, hi = [a_lo], [a_hi]
    while (hi[-1] << _DL_TAIL) >= (1 << prec) or len(hi) < 2:
        lo.append((lo[-1] * r_lo) >> prec)
        hi.append(-((-hi[-1] * r_hi) >> prec))
    return lo, hi


@functools.lru_cache(maxsize=64)
def dl_icdf(t, shift, bits=CHUNK_BITS):
    """J's inverse-CDF table: T[j] = ⌊2^63 P(J ≤ j)⌋ for j = 0 .. K − 1.

    J is 0 for Z = 0, H + 1 otherwise; K the first j with P(J > j) < 2^-_DL_TAIL. Each floor is certain
    (precision doubled where a bound straddles an integer).

    Args:
      t: the integer t of τ = t/2^shift.
      shift: the scale exponent.
      bits: the widest chunk.

    Returns:
      uint64 ``[K]``.
    """
    m = chunk_layout(t, shift, bits)[2]
    prec = 128
    while True:
        lo, hi = _dl_tail_chain(int(t), int(shift), m, prec)
        one = 1 << prec
        a = [((one - h) << 63) >> prec for h in hi]  # ⌊2^63 (1 − upper tail)⌋
        b = [((one - x) << 63) >> prec for x in lo]
        if a == [min(x, (1 << 63) - 1) for x in b]:
            return np.array(a, np.uint64)
        prec *= 2


def _dl_cdf_bounds(t, shift, m, j, prec):
    """Exact Fraction bounds of P(J ≤ j) at about ``prec`` bits."""
    with _prec(prec + 64):
        return tuple(_ends(_Law(t, shift).j_cdf(m, j)))


@functools.lru_cache(maxsize=64)
def guides(t, shift, bits=CHUNK_BITS):
    """The chunks' guide tables and search depths.

    guide[k] = #{c : T_c < k 2^(64 − GUIDE_BITS)} and, per chunk, the binary-search depth that covers its widest
    bucket (a few steps instead of ``bits``).

    Args:
      t: the integer t of τ = t/2^shift.
      shift: the scale exponent.
      bits: the widest chunk.

    Returns:
      ``(guide, depths)``: int32 ``[nchunks, 2^GUIDE_BITS + 1]`` and a tuple of ints.
    """
    ct = dl_tables(t, shift, bits)
    starts = np.arange(1 << GUIDE_BITS, dtype=np.uint64) << np.uint64(64 - GUIDE_BITS)
    g = np.array([np.append(np.searchsorted(row, starts, side="left"), row.size) for row in ct], np.int32)
    g = g.reshape(len(ct), (1 << GUIDE_BITS) + 1)
    return g, tuple(int(np.max(np.diff(row))).bit_length() for row in g)


def discrete_laplace_fast(words, n, t, shift, bits=CHUNK_BITS):
    """Discrete Laplace of scale t/2^shift for ``n`` records from ``words(j, records)``.

    Args:
      words: the records' word source (:class:`~dpjax.exact.bits.ThreefryWords` or alike).
      n: the number of records.
      t: the integer t of τ = t/2^shift.
      shift: the scale exponent.
      bits: the widest chunk.

    Returns:
      ``(z, flagged)``: int64 ``[n]`` and bool ``[n]``; the flagged records must be completed by
      :func:`resolve_on_host`.
    """
    code = laplace_code(words, n, t, shift, bits)
    return code >> 8, (code & 1) == 1


def laplace_code(words, n, t, shift, bits=CHUNK_BITS):
    """:func:`discrete_laplace_fast` packed in one int64 per record (one fused output).

    z = code >> 8, flagged = code & 1. Word 0 of a record gives the sign and J, word 1 + j chunk j (see the
    module docstring); no rejection, no loop.

    Args:
      words: the records' word source.
      n: the number of records (unused: the words' records say it).
      t: the integer t of τ = t/2^shift.
      shift: the scale exponent.
      bits: the widest chunk.

    Returns:
      int64 codes, one per record.
    """
    del n
    return _pack(*laplace_noise(words, t, shift, bits))


def laplace_noise_dtype(t, shift, bits=CHUNK_BITS):
    """The dtype of :func:`laplace_noise`'s z: int32 where every table-decided |Z| ≤ K 2^m is below 2^30.

    Args:
      t: the integer t of τ = t/2^shift.
      shift: the scale exponent.
      bits: the widest chunk.

    Returns:
      ``jnp.int32`` or ``jnp.int64``.
    """
    return jnp.int32 if dl_icdf(t, shift, bits).size << chunk_layout(t, shift, bits)[2] < 1 << 30 else jnp.int64


def laplace_noise(words, t, shift, bits=CHUNK_BITS):
    """:func:`discrete_laplace_fast` unpacked and in 32-bit lanes.

    z is int32 where |Z| < 2^30 certainly (every table-decided draw: J < K and the chunks below 2^m give
    |Z| ≤ K 2^m), else int64 (:func:`laplace_noise_dtype`).

    Args:
      words: the records' word source.
      t: the integer t of τ = t/2^shift.
      shift: the scale exponent.
      bits: the widest chunk.

    Returns:
      ``(z, flagged)``.
    """
    t, shift = int(t), int(shift)
    offsets, _, m = chunk_layout(t, shift, bits)
    jtab = dl_icdf(t, shift, bits)
    chunks = dl_tables(t, shift, bits)
    gd, depth = guides(t, shift, bits)
    records = words.records.reshape(-1)
    hi, lo = _word_halves(words, 0, records)
    j, flag = _level_search(jtab, *dl_guide(t, shift, bits), hi, lo)
    flag = flag | (j == jtab.shape[0])
    dt = laplace_noise_dtype(t, shift, bits)
    g = (j.astype(dt) - 1) << m
    for i in range(len(chunks)):
        c, undecided = _count_le_guided(chunks[i], gd[i], depth[i], *_word_halves(words, 1 + i, records))
        g = g + (c.astype(dt) << offsets[i])
        flag = flag | undecided
    a = jnp.where(j == 0, jnp.zeros((), dt), g + 1)
    return jnp.where((hi >> np.uint32(31)) == 1, -a, a), flag


def exact_record(word, t, shift, bits=CHUNK_BITS):
    """One discrete Laplace draw from a word stream, every comparison exact.

    The device's function of the stream (:func:`laplace_code`), without its ties/table limit.

    Args:
      word: ``word(j)``, the record's word j (ints in [0, 2^64)).
      t: the integer t of τ = t/2^shift.
      shift: the scale exponent.
      bits: the widest chunk.

    Returns:
      The noise, an int.
    """
    t, shift = int(t), int(shift)
    offsets, widths, m = chunk_layout(t, shift, bits)
    law = _Law(t, shift)
    u = word(0)
    neg = u >> 63
    v = u & ((1 << 63) - 1)
    j = _icdf_on_host(
        dl_icdf(t, shift, bits), v, _ext_of(word, 0), lambda prec, j: _dl_cdf_bounds(t, shift, m, j, prec)
    )
    if j == 0:
        return 0
    g = (j - 1) << m
    for i, tab in enumerate(dl_tables(t, shift, bits)):
        w = word(1 + i)
        c = int(np.searchsorted(tab, np.uint64(w), side="left"))  # #{T < u}: certain U ≥ F
        Uc = _Uniform(w, 64, _ext_of(word, 1 + i))
        while (
            c < len(tab) and int(tab[c]) == w and not Uc.less(lambda c=c, i=i: law.chunk_cdf(offsets[i], c, widths[i]))
        ):
            c += 1
        g += c << offsets[i]
    return -(g + 1) if neg else g + 1


def resolve_on_host(z, flag, word_of_record, t, shift, bits=CHUNK_BITS):
    """Complete the flagged records on the host.

    Args:
      z: the device's noise.
      flag: the flagged records.
      word_of_record: ``word_of_record(i)`` gives record i's ``word(j)``.
      t: the integer t of τ = t/2^shift.
      shift: the scale exponent.
      bits: the widest chunk.

    Returns:
      A numpy copy of ``z`` with the flagged records completed (:func:`exact_record`).
    """
    z = np.array(z)
    for i in np.nonzero(np.asarray(flag))[0]:
        z[i] = exact_record(word_of_record(int(i)), t, shift, bits)
    return z


def threefry_laplace(words, n, t, shift, bits=CHUNK_BITS):
    """:func:`discrete_laplace_fast` on :class:`~dpjax.exact.bits.ThreefryWords`, flagged records completed on the host.

    The host callback runs only when a record is flagged (jit-able).

    Args:
      words: the records' :class:`~dpjax.exact.bits.ThreefryWords`.
      n: the number of records.
      t: the integer t of τ = t/2^shift.
      shift: the scale exponent.
      bits: the widest chunk.

    Returns:
      int64 noise ``[n]``.
    """
    return _threefry_complete(words, laplace_code(words, n, t, shift, bits), lambda w: exact_record(w, t, shift, bits))


@functools.lru_cache(maxsize=64)
def dl_guide(t, shift, bits=CHUNK_BITS):
    """:func:`~dpjax.exact.table_samplers.level_guide` of :func:`dl_icdf`'s table.

    Args:
      t: the integer t of τ = t/2^shift.
      shift: the scale exponent.
      bits: the widest chunk.

    Returns:
      ``(guide, depth)``.
    """
    return level_guide(dl_icdf(t, shift, bits))


# -- per-record scales: the discrete Laplace's inverse CDF computed per record, checked with error bounds --------
def _uniform_top(words, records):
    """Word 0's sign bit (True: negative) and its 63 low bits v as (W, low): W = 2^31 − (v >> 32) ∈ [1, 2^31] and
    the low half, so that S = 1 − V ∈ ((w − 1)/2^63, w/2^63] with w = 2^63 − v = W·2^32 − low."""
    hi, lo = _word_halves(words, 0, records)
    return (hi >> np.uint32(31)) == 1, np.uint32(1 << 31) - (hi & np.uint32((1 << 31) - 1)), lo


def _open_floor(x, err, wide, top):
    """(|Z|, open): |Z| = max(0, ⌊x⌋ + 1) when every x' in [x − err, x + err + wide] has that value (one floor, or
    all below 0) and ``top`` (W > 1, so that the word's interval of S is bounded away from 0), else open."""
    lo, hi = jnp.floor(x - err), jnp.floor(x + err + wide)
    return jnp.maximum(hi + 1.0, 0.0), ~(((lo == hi) | (hi < 0)) & top)


def laplace_noise_per_record(words, t, shift, small=False):
    """Discrete Laplace of per-record scales τ = t/2^shift from one word per record, no table, no host work per scale.

    Any number of distinct scales.

    |Z| = min{k ≥ 0 : V < F(k)}, F(k) = P(|Z| ≤ k) = 1 − c q^k with c = 2q/(1 + q), q = e^{−1/τ}; with
    S = 1 − V that is |Z| = max(0, ⌊x⌋ + 1), x = τ (log c − log S) (the same function of V as the tables'
    inverse CDF with J = |Z|). Word 0: the sign (top bit; ignored for 0) and v, its low 63 bits, so that
    S ∈ ((w − 1)/2^63, w/2^63] with w = 2^63 − v (the extension words refine it). The device evaluates x in
    float64 at S = w/2^63 with a rigorous bound E of its rounding error (every operation's, the
    transcendentals' at :data:`~dpjax.exact.table_samplers.TRANSCENDENTAL_ERROR`, doubled), so the true x of every S in
    the word's interval
    lies in [x_f − E, x_f + E + τ/(w − 1)]; when that interval has one floor (or lies below 0) |Z| is decided
    exactly, otherwise the record is flagged (probability ≈ 2E + τ 2^-63/S: 10^-7 at τ ∈ [2^20, 2^21]) and
    :func:`exact_per_record` decides it from the record's further words against interval bounds of F.
    ``small`` (static: every 1/τ ≤ 2^-8, e.g. the Laplace lattice's): log c = −λ/2 − log cosh(λ/2), λ = 1/τ, by
    its series −λ/2 − λ²/8 + λ⁴/192 (truncation below λ^6/2880 ≤ 2^-59, in the bound) instead of exp and log1p.
    The word is read as its uint32 halves (w = W·2^32 − low: one rounding to float64, as w's own; τ/(w − 1) ≤
    τ 2^-32/(W − 1), a power of two from W's leading bit, W = 1 flagged): no 64-bit integer in the program.

    Args:
      words: the records' word source.
      t: uint64, one per record.
      shift: uint64, one per record.
      small: static: every 1/τ ≤ 2^-8 (the series of log c).

    Returns:
      ``(z, flagged)``: float64 (integer-valued) and bool; the flagged records are completed by
      :func:`exact_per_record`.
    """
    t = jnp.asarray(t, jnp.uint64)
    shift = jnp.asarray(shift, jnp.uint64)
    pow2 = jax.lax.bitcast_convert_type((np.uint64(1023) + shift) << np.uint64(52), jnp.float64)  # 2^shift, exactly
    tf = t.astype(jnp.float64)
    lam = pow2 / tf  # 1/τ (one rounding)
    tau = tf * jax.lax.bitcast_convert_type((np.uint64(1023) - shift) << np.uint64(52), jnp.float64)  # exact
    if small:
        lam2 = lam * lam
        lc = -0.5 * lam - lam2 * (0.125 - lam2 * (1.0 / 192.0))
    else:
        fns = table_samplers.TRANSCENDENTALS
        lc = math.log(2.0) - lam - fns["log1p"](fns["exp"](-lam))  # log c
    neg, big, low = _uniform_top(words, words.records.reshape(-1))
    w = big.astype(jnp.float64) * 2.0**-31 - low.astype(jnp.float64) * 2.0**-63
    ls = table_samplers.TRANSCENDENTALS["log"](w)  # log(w/2^63)
    x = (lc - ls) * tau
    d = table_samplers.TRANSCENDENTAL_ERROR
    err = 2.0 * (tau * (d * (jnp.abs(ls) + 3.0) + 2.0**-48) + jnp.abs(x) * 2.0**-49)
    lead = (np.uint32(31) - jax.lax.clz(jnp.maximum(big - np.uint32(1), np.uint32(1)))).astype(jnp.uint64)
    wide = tau * jax.lax.bitcast_convert_type((np.uint64(1023 - 32) - lead) << np.uint64(52), jnp.float64)
    a, flag = _open_floor(x, err, wide, big > np.uint32(1))
    return jnp.where(neg, -a, a), flag


def laplace_noise_per_record32(words, t, shift):
    """:func:`laplace_noise_per_record` decided in float32, for scales 2^NARROW_MIN_LOG2 ≤ τ ≤ 2^NARROW_MAX_LOG2.

    The same map V ↦ |Z| = max(0, ⌊x⌋ + 1) from word 0's high half only:
    S ∈ ((W − 1)/2^31, W/2^31] (:func:`_uniform_top`), x = τ log(c/S) at S = W/2^31 as
    r = q 2^32 / ((1 + q) W), one exp and one log in 32-bit lanes (twice the records per vector of float64).

    Error bound (u = 2^-24, D = TRANSCENDENTAL_ERROR32, λ = 1/τ ≤ 2^5 so λu ≤ 2^-19): λ_f = λ(1 + δ),
    q_f = q(1 + ε_q) with |ε_q| ≤ D + 1.01 λu; r_f (1 + q_f, W to float32, a product and a division) has relative
    error ≤ 1.5|ε_q| + 4u; log adds D(|log r| + 1) and x_f = τ log_f the rounding u|x_f|. With τλ ≤ 1 + u and
    τ|log_f| ≤ |x_f|(1 + u): |x_f − x| ≤ 3Dτ + 1.1D|x_f| + 2u ≤ E = 4Dτ + 2D|x_f| + 3u. The interval
    [x_f − 2E, x_f + 2E + τ/(W − 1)] then holds every x of the word's S: the second E covers the roundings of the
    bound and of the two sums (≤ 2u(|x_f| + 2E + τ), as τ/(W − 1) ≤ τ 2^-⌊log2(W − 1)⌋ ≤ τ). Open: probability
    about 28 D τ (2·10^-4 at τ = 2).

    Args:
      words: the records' word source.
      t: one per record, below 2^24 (exact in float32).
      shift: one per record.

    Returns:
      ``(z, open)``: int32 and bool; the open records are decided by the float64 program (then, rarely, the
      host).
    """
    f32 = jnp.float32
    s = jnp.asarray(shift).astype(jnp.uint32)
    tf = jnp.asarray(t).astype(jnp.uint32).astype(f32)  # exact: t < 2^24
    lam = jax.lax.bitcast_convert_type((np.uint32(127) + s) << np.uint32(23), f32) / tf  # 1/τ (one rounding)
    tau = tf * jax.lax.bitcast_convert_type((np.uint32(127) - s) << np.uint32(23), f32)  # exact
    q = table_samplers.TRANSCENDENTALS["exp"](-lam)
    neg, big, _ = _uniform_top(words, words.records.reshape(-1))
    x = tau * table_samplers.TRANSCENDENTALS["log"](q * f32(2.0**32) / ((1.0 + q) * big.astype(f32)))
    d, u = table_samplers.TRANSCENDENTAL_ERROR32, 2.0**-24
    err = 2.0 * (tau * f32(4 * d) + jnp.abs(x) * f32(2 * d) + f32(3 * u))
    lead = np.uint32(31) - jax.lax.clz(jnp.maximum(big - np.uint32(1), np.uint32(1)))
    wide = tau * jax.lax.bitcast_convert_type((np.uint32(127) - lead) << np.uint32(23), f32)
    a, flag = _open_floor(x, err, wide, big > np.uint32(1))
    a = a.astype(jnp.int32)
    return jnp.where(neg, -a, a), flag


def exact_per_record(word, t, shift):
    """:func:`laplace_noise_per_record` for one record's word stream on the host.

    min{k : V < F(k)} from a float candidate, every comparison of V with F decided by further words against
    interval bounds of F.

    Args:
      word: ``word(j)``, the record's word j (ints in [0, 2^64)).
      t: the record's integer t.
      shift: the record's scale exponent.

    Returns:
      The noise, an int.
    """
    t, shift = int(t), int(shift)
    u = word(0)
    v = u & ((1 << 63) - 1)
    tau = t / 2.0**shift
    lam = 2.0**shift / t
    s = max((2**63 - v) / 2.0**63, 2.0**-64)
    lc = math.log(2.0) - lam - math.log1p(math.exp(-lam))
    k = max(0, int(math.floor((lc - math.log(s)) * tau)) + 1)
    U = _Uniform(v, 63, _ext_of(word, 0))

    def less(k):
        return U.less_bounds(lambda prec: _dl_cdf_bounds(t, shift, 0, k, prec))

    while k > 0 and less(k - 1):
        k -= 1
    while not less(k):
        k += 1
    return -k if u >> 63 else k


#: the lattice scale of the Laplace noise is in [2^LAPLACE_BITS, 2^(LAPLACE_BITS+1)]
LAPLACE_BITS = 20
#: the smallest Laplace scale whose lattice :func:`laplace_lattice_bits` builds (b and g = 2^(⌊log2 b⌋ − 20)
#: normal floats: XLA may flush subnormals to zero); smaller ones are built on the host
DEVICE_LAPLACE_MIN = 2.0**-1002


@dataclasses.dataclass(frozen=True)
class DiscreteLaplaceTable(IntegerSampler):
    """The discrete Laplace of one scale τ = t/2^shift by exact threshold tables (one word, or one per chunk).

    Attributes:
      t: the integer t.
      shift: the scale exponent.
    """

    t: int
    shift: int

    def noise(self, words, values, params):
        return laplace_noise(words, self.t, self.shift)

    def complete(self, word, value, params):
        return exact_record(word, self.t, self.shift)

    @property
    def words_per_record(self):
        return 1 + len(chunk_layout(self.t, self.shift)[0])

    @property
    def prefixable(self):
        return self.words_per_record == 1


@dataclasses.dataclass(frozen=True)
class DiscreteLaplaceScales(IntegerSampler):
    """The discrete Laplace of per-record scales τ = t/2^shift (params: uint64 t, shift), one word per record.

    Attributes:
      small: every 1/τ ≤ 2^-8 (the series of log c).
      narrow: every τ in the float32 decision's range, decided in float32 first (its open records go to
        :meth:`fallback`, the float64 program).
    """

    small: bool = False
    narrow: bool = False

    transcendental: ClassVar[bool] = True

    def noise(self, words, values, params):
        t, shift = params
        if self.narrow:
            return laplace_noise_per_record32(words, t, shift)
        return laplace_noise_per_record(words, t, shift, self.small)

    def complete(self, word, value, params):
        t, shift = params[:2]
        return exact_per_record(word, int(t), int(shift))

    def fallback(self):
        return dataclasses.replace(self, narrow=False) if self.narrow else None


def laplace_lattice_bits(b, integer=False):
    """The (t, shift, g) of float64 scales b from their bits, in a device program.

    The Laplace lattice's (b ≥ :data:`DEVICE_LAPLACE_MIN`) or, ``integer``, the discrete Laplace's
    (2^-40 ≤ b < 2^31). With b = M 2^(E − 52), M its 53-bit significand: the lattice g = 2^(E − 20),
    t = ⌈b/g⌉ = ⌈M/2^32⌉; the integers g = 1, shift p = max(0, 20 − E), t = ⌈b 2^p⌉ = ⌈M/2^r⌉ with r = 32
    (p > 0) or 52 − E. The same integers as numpy's frexp/ldexp/ceil on the host
    (``tests/test_exact_laws_discrete_laplace.py``).

    Args:
      b: float64 scales (device array).
      integer: the discrete Laplace's lattice (g = 1) instead of the Laplace's.

    Returns:
      ``(t, shift, g)``: uint64, uint64 and float64 arrays of ``b``'s shape.
    """
    bits = jax.lax.bitcast_convert_type(b, jnp.uint64)
    m = (bits & jnp.uint64((1 << 52) - 1)) | jnp.uint64(1 << 52)
    biased = bits >> jnp.uint64(52)
    if integer:
        p = jnp.maximum(jnp.int64(1023 + LAPLACE_BITS) - biased.astype(jnp.int64), 0)
        r = jnp.where(p > 0, jnp.int64(32), jnp.int64(1023 + 52) - biased.astype(jnp.int64)).astype(jnp.uint64)
        return (m + (jnp.uint64(1) << r) - jnp.uint64(1)) >> r, p.astype(jnp.uint64), jnp.ones_like(b)
    t = (m + jnp.uint64((1 << 32) - 1)) >> jnp.uint64(32)
    g = jax.lax.bitcast_convert_type((biased - jnp.uint64(LAPLACE_BITS)) << jnp.uint64(52), jnp.float64)
    return t, jnp.zeros_like(t), g


def reciprocal_pow2(g):
    """1/g of float64 powers of two g whose reciprocals are normal, exactly, from the exponent bits.

    Args:
      g: float64 powers of two (device array).

    Returns:
      float64 ``1/g``.
    """
    return jax.lax.bitcast_convert_type(
        np.uint64(2046 << 52) - jax.lax.bitcast_convert_type(g, jnp.uint64), jnp.float64
    )


@dataclasses.dataclass(frozen=True)
class LaplaceScales(DiscreteLaplaceScales):
    """Per-record Laplace or discrete Laplace scales b whose lattice the device program builds.

    The params are the scales (any float dtype); the program builds their lattice parameters
    (:func:`laplace_lattice_bits`) before running :class:`DiscreteLaplaceScales`.

    Attributes:
      integer: discrete Laplace scales (``True``) or Laplace ones.
      lattice_of: ``lattice_of(b)``, the host lattice of scales b (float64), for the flagged records.
    """

    integer: bool = False
    lattice_of: Callable = dataclasses.field(default=None, compare=False)

    def prepare(self, params, g):
        (b,) = params
        t, shift, g = laplace_lattice_bits(b.astype(jnp.float64), integer=self.integer)
        # g and 1/g normal: b ≥ DEVICE_LAPLACE_MIN (Laplace), g = 1 (discrete)
        return DiscreteLaplaceScales(self.small, self.narrow), (t, shift), g, reciprocal_pow2(g)

    def at(self, params, g, idx, n):
        b = np.asarray(take(params[0], jnp.asarray(padded(idx))), np.float64)[: idx.size]
        lat = self.lattice_of(b)
        return (np.asarray(lat.param), np.broadcast_to(lat.shift, idx.shape)), np.asarray(lat.granularity)


def chunked(t, shift):
    """Whether any discrete Laplace scale τ = t/2^shift has chunked tables (τ above 2^DL_TABLE_LOG2).

    :func:`chunk_layout`'s m = ⌈log2 t⌉ − shift − DL_TABLE_LOG2 > 0; ⌈log2 t⌉ is the bit length of t − 1.

    Args:
      t: the integers t (numpy).
      shift: the scale exponents (numpy).

    Returns:
      A bool.
    """
    t = np.asarray(t, np.float64)
    return bool(np.any(np.frexp(t - 1.0)[1] - np.asarray(shift, np.int64) - DL_TABLE_LOG2 > 0))


def float32_range(t, shift):
    """Whether every scale τ = t/2^shift lies in the range of the float32 decision, with t exact in float32.

    The decision is :func:`laplace_noise_per_record32`; t must be below 2^24.

    Args:
      t: the integers t (numpy).
      shift: the scale exponents (numpy).

    Returns:
      A bool (``False`` for no scales).
    """
    t = np.asarray(t, np.float64)
    tau = np.ldexp(t, -np.asarray(shift, np.int64))
    return bool(
        tau.size
        and np.max(t) < 2.0**24
        and np.ldexp(1.0, table_samplers.NARROW_MIN_LOG2) <= np.min(tau)
        and np.max(tau) <= np.ldexp(1.0, table_samplers.NARROW_MAX_LOG2)
    )


class DiscreteLaplaceSampler(LatticeSampler):
    """The discrete Laplace of scale τ = param/2^shift on the lattice (the Laplace and discrete Laplace lattices).

    The table sampler at one scale of at most 2^DL_TABLE_LOG2, the per-record program otherwise.
    """

    for_tables = True
    #: the table of the boosted |N| has about 28 b entries, built on the host from about 61 b terms
    boost_max_scale = 2.0**13

    def noise_scale(self, param, shift):
        return np.ldexp(np.asarray(param, np.float64), -np.asarray(shift, np.int64))

    def per_record_only(self, param, shift):
        # a scale whose tables would be chunked (two or more words) runs the one-word inverse CDF of the per-record
        # program, whatever the layout: one word-to-noise map per law
        return chunked(param, shift)

    def one_scale(self, lat, param, shift):
        return DiscreteLaplaceTable(int(param), int(shift))

    def per_record(self, lat, param, shift, g, one_scale):
        params = tuple(
            np.asarray(a.flat[0]) if one_scale else np.ascontiguousarray(a).reshape(-1) for a in (param, shift)
        )
        g = np.asarray(g.flat[0]) if one_scale else np.ascontiguousarray(g).reshape(-1)
        small = bool(np.all(np.ldexp(1.0, params[1].astype(np.int64)) <= params[0] * 2.0**-8))
        narrow = float32_range(*params) and table_samplers.transcendentals_trusted("float32")
        return DiscreteLaplaceScales(small, narrow), params, g
