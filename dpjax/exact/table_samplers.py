r"""The table samplers: fixed-trip discrete Laplace and Gaussian, a few table look-ups per record,
exact integer comparisons only.

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
drawn like the discrete Gaussian's |Z| below: by inverse CDF from word 0 (the top bit the sign, the low 63
bits against T[j] = ⌊2^63 P(J ≤ j)⌋, :func:`dl_icdf`, through the levelled guide of :func:`level_guide`);
each chunk by inverse CDF from its own word (thresholds ⌊2^64 F_j(c)⌋, one guide-table look-up and a
short bisection). One word per record for τ ≤ 2^``DL_TABLE_LOG2`` (every count at ε ≳ 10^-3), two at the
Laplace lattice scales τ ∈ [2^20, 2^21].

**Exact comparisons.** A 64-bit word u is the first 64 bits of U (further bits: further words).
The host computes, once per (t, shift), the integer thresholds T = ⌊2^64 F⌋ (⌊2^63 F⌋ for J) from
rigorous bounds (``mpmath.iv`` intervals or fixed-point chains with floors and ceilings, precision raised
until the floor is certain). Then ``u < T`` proves U < F and ``u > T`` proves U ≥ F (U < (u+1)/2^64 and
U ≥ u/2^64): every device decision is an integer comparison that is *correct*, not approximate. Only
``u == T`` (a tie, probability ≤ 2^-64 per threshold) leaves the comparison open, and so does J ≥ K
(past the table, probability < 2^−40). (The device compares 32-bit halves — high, then low on equal
highs — so that a CPU runs its vector lanes at 32 bits; a table of at most :data:`EXACT_LOW_ABOVE`
thresholds decides on the high halves alone and leaves equal highs open, probability < 1.2·10^-7.) The device flags those records; :func:`resolve_on_host`
recomputes each flagged record from its own words, deciding every open comparison with further words
of the same record against interval bounds of F at growing precision (terminates with probability 1).
Device and host compute the same function of the record's word stream, so the output law is exactly
the discrete Laplace — no truncation.

**Discrete Gaussian** (:func:`gaussian_code`): one word per record and no rejection. The law
pmf ∝ exp(−z²/(2n)) of CKS's discrete Gaussian is drawn by inverse CDF of |Z| on the word's low 63
bits against T[k] = ⌊2^63 P(|Z| ≤ k)⌋ (:func:`dg_icdf`: rigorous fixed-point bounds of the pmf sums,
every floor certain), the top bit the sign (P(Z = ±k) = P(|Z| = k)/2 for k > 0). A guide indexed by the
word's leading ones (the tail level) and the next ``GUIDE_BITS`` bits leaves two bisection steps. Ties and words past the table (P(|Z| > K) < 2^-40) go to the host, whose
:func:`exact_gaussian_record` decides them with further words against bounds of P(|Z| ≤ k) at growing
precision. (CKS Algorithm 3 — a discrete Laplace proposal and an acceptance word — needs ≈ 1.3
tries of four words per record.)
"""

from __future__ import annotations

import contextlib
import functools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import mpmath
import numpy as np

__all__ = ["CHUNK_BITS", "DL_TABLE_LOG2", "EXACT_LOW_ABOVE", "EXT_BASE", "PB_MAX_SCALE", "boosted_code",
           "chunk_layout", "dg_guide", "dg_icdf", "discrete_laplace_fast", "dl_guide", "exact_per_record",
           "laplace_noise_per_record", "laplace_noise_per_record32", "NARROW_MAX_LOG2", "NARROW_MIN_LOG2",
           "PLATFORM_MARGIN", "TRANSCENDENTALS", "TRANSCENDENTAL_ERROR", "TRANSCENDENTAL_ERROR32",
           "transcendental_errors", "transcendentals_trusted", "dl_icdf", "dl_tables", "exact_boosted_record",
           "exact_gaussian_record", "exact_record", "gaussian_code", "icdf_noise_per_record", "laplace_code",
           "laplace_noise", "laplace_noise_dtype", "exact_rr_record", "level_guide", "pb_icdf", "resolve_on_host",
           "rr_code", "rr_threshold", "symmetric_noise", "threefry_gaussian", "threefry_laplace"]

#: bits per chunk of the geometric's low part (a table of 2^B − 1 thresholds per chunk)
CHUNK_BITS = 11
#: H = G >> m with m = max(0, ⌈log2 τ⌉ − this): J's table has about 28·2^this entries at most
DL_TABLE_LOG2 = 10
#: J's table stops where P(J > K) < 2^-this (the rest is resolved on the host)
_DL_TAIL = 40
#: word index of the first extension word of word j: EXT_BASE + 64 j + d (d = 0, 1, ...)
EXT_BASE = 1 << 31
_U64 = np.uint64


def _ends(x):
    """The endpoints of an ``mpmath.iv`` interval as exact Fractions (from the raw binary mantissas)."""
    out = []
    for sign, man, exp, _ in x._mpi_:
        v = Fraction(man) * (Fraction(2) ** exp)
        out.append(-v if sign else v)
    return out


def _iv_floor(x, scale_bits):
    """⌊2^scale_bits · x⌋ for an mpmath ``iv`` interval x, or None when the interval straddles an integer."""
    lo, hi = _ends(x)
    a, b = math.floor(lo * 2**scale_bits), math.floor(hi * 2**scale_bits)
    return a if a == b else None


@contextlib.contextmanager
def _prec(bits):
    old = mpmath.iv.prec
    mpmath.iv.prec = bits
    try:
        yield
    finally:
        mpmath.iv.prec = old


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


def _threshold(fn, scale_bits):
    """⌊2^scale_bits · fn()⌋ computed with ``mpmath.iv`` at precision raised until certain."""
    for prec in (256, 512, 1024, 4096, 16384):
        with _prec(prec):
            v = _iv_floor(fn(), scale_bits)
        if v is not None:
            return min(max(v, 0), (1 << scale_bits) - 1)
    raise ValueError("threshold undecidable at 16384 bits")  # F would have to be a dyadic rational


@functools.lru_cache(maxsize=64)
def chunk_layout(t, shift, bits=CHUNK_BITS):
    """(offsets, widths, m) of the chunks of G mod 2^m, m = max(0, ⌈log2 τ⌉ − ``DL_TABLE_LOG2``), split into
    ⌈m/bits⌉ chunks of near-equal widths (no chunk wider than the law needs: short, well-spread tables)."""
    t, shift = int(t), int(shift)
    m = max(0, (t - 1).bit_length() - shift - DL_TABLE_LOG2)  # ⌈log2 t⌉ − shift − DL_TABLE_LOG2
    k = -(-m // bits)
    widths = tuple(m // k + (1 if j < m % k else 0) for j in range(k)) if k else ()
    return tuple(sum(widths[:j]) for j in range(k)), widths, m


@functools.lru_cache(maxsize=64)
def dl_tables(t, shift, bits=CHUNK_BITS):
    """The chunk thresholds ⌊2^64 F_j(c)⌋ for τ = t/2^shift: a tuple of uint64 [2^w_j − 1], one per chunk."""
    t, shift = int(t), int(shift)
    law = _Law(t, shift)
    offsets, widths, _ = chunk_layout(t, shift, bits)
    return tuple(np.array([_threshold(lambda o=o, c=c, w=w: law.chunk_cdf(o, c, w), 64) for c in range((1 << w) - 1)],
                          dtype=_U64) for o, w in zip(offsets, widths))


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
    """T[j] = ⌊2^63 P(J ≤ j)⌋ for j = 0 .. K − 1 (J: 0 for Z = 0, H + 1 otherwise), K the first j with
    P(J > j) < 2^-_DL_TAIL; each floor certain (precision doubled where a bound straddles an integer)."""
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


#: guide tables: bucket k of the top GUIDE_BITS bits of a word holds the thresholds [guide[k], guide[k+1])
GUIDE_BITS = 14


@functools.lru_cache(maxsize=64)
def guides(t, shift, bits=CHUNK_BITS):
    """(guide int32 [nchunks, 2^GUIDE_BITS + 1], depths): guide[k] = #{c : T_c < k 2^(64 − GUIDE_BITS)} and,
    per chunk, the binary-search depth that covers its widest bucket (a few steps instead of ``bits``)."""
    ct = dl_tables(t, shift, bits)
    starts = np.arange(1 << GUIDE_BITS, dtype=np.uint64) << np.uint64(64 - GUIDE_BITS)
    g = np.array([np.append(np.searchsorted(row, starts, side="left"), row.size) for row in ct], np.int32)
    g = g.reshape(len(ct), (1 << GUIDE_BITS) + 1)
    return g, tuple(int(np.max(np.diff(row))).bit_length() for row in g)


def _word_halves(words, j, records):
    """Word ``j`` of the records as its (high, low) uint32 halves. The searches compare 32-bit lanes: on a CPU a
    program with 64-bit integers runs half as many records per vector instruction (and the gathers dominate)."""
    halves = getattr(words, "halves", None)
    if halves is not None:
        return halves(j, records)
    u = words(j, records)
    return (u >> _U64(32)).astype(jnp.uint32), u.astype(jnp.uint32)


#: tables with more thresholds than this compare the words' low halves too; a shorter one decides on the high halves
#: alone, an equal high half leaving the record to the host (probability below size·2^-31 per record: < 1.2·10^-7)
EXACT_LOW_ABOVE = 256


def _probe(tab, guide, depth, k, vh, vl):
    """#{i : T[i] ≤ v} and whether the record is open (for the host), for words v = (vh, vl) (uint32 halves: high,
    low) in guide bucket ``k`` of the numpy thresholds ``tab`` (guide: the bucket starts, int32): ``depth``
    unrolled bisection steps from the bucket's start. Every threshold below the bucket is < v and a probe past
    the bucket's end reads a threshold ≥ the next bucket's start > v, so only the table's end needs a guard.
    The comparisons run on 32-bit halves: high[i] < vh proves T[i] < v, high[i] > vh proves T[i] > v; on equal
    high halves the low halves decide (a tie T[i] = v is open), or, for a table of at most
    :data:`EXACT_LOW_ABOVE` thresholds, the record is open. The first step's threshold is looked up at the
    bucket's own index, beside its start, instead of after it."""
    tab = np.asarray(tab, np.uint64)
    size = tab.size
    high = (tab >> np.uint64(32)).astype(np.uint32)
    low = (tab & np.uint64(0xFFFFFFFF)).astype(np.uint32) if size > EXACT_LOW_ABOVE else None
    first = np.maximum(np.minimum(np.asarray(guide, np.int64) + (1 << max(depth - 1, 0)), size) - 1, 0)
    lo = jnp.asarray(guide)[k]
    undecided = jnp.zeros(vh.shape, bool)
    for b in reversed(range(depth)):
        mid = lo + (1 << b)
        at = k if b == depth - 1 else jnp.minimum(mid, size) - 1
        t = jnp.asarray(high[first] if b == depth - 1 else high)[at]
        inside = mid <= size
        if low is None:
            undecided = undecided | (inside & (t == vh))
            ok = inside & (t < vh)
        else:
            tl = jnp.asarray(low[first] if b == depth - 1 else low)[at]
            ok = inside & ((t < vh) | ((t == vh) & (tl <= vl)))
            undecided = undecided | (ok & (t == vh) & (tl == vl))
        lo = jnp.where(ok, mid, lo)
    return lo, undecided


def _count_le_guided(table, guide, depth, hi, lo):
    """#{i : table[i] ≤ u} for 64-bit words u = (hi, lo) and whether the record is open, searching only u's guide
    bucket (:func:`_probe`)."""
    return _probe(table, guide, depth, (hi >> np.uint32(32 - GUIDE_BITS)).astype(jnp.int32), hi, lo)


def discrete_laplace_fast(words, n, t, shift, bits=CHUNK_BITS):
    """Discrete Laplace of scale t/2^shift for ``n`` records from ``words(j, records)``: (z int64 [n],
    flagged bool [n]); the flagged records must be completed by :func:`resolve_on_host`."""
    code = laplace_code(words, n, t, shift, bits)
    return code >> 8, (code & 1) == 1


def laplace_code(words, n, t, shift, bits=CHUNK_BITS):
    """:func:`discrete_laplace_fast` packed in one int64 per record (one fused output): z = code >> 8,
    flagged = code & 1. Word 0 of a record gives the sign and J, word 1 + j chunk j (see the module
    docstring); no rejection, no loop."""
    del n
    return _pack(*laplace_noise(words, t, shift, bits))


def _pack(z, flag):
    return z.astype(jnp.int64) * 256 + flag.astype(jnp.int64)


def laplace_noise_dtype(t, shift, bits=CHUNK_BITS):
    """The dtype of :func:`laplace_noise`'s z: int32 where every table-decided |Z| ≤ K 2^m is below 2^30."""
    return jnp.int32 if dl_icdf(t, shift, bits).size << chunk_layout(t, shift, bits)[2] < 1 << 30 else jnp.int64


def laplace_noise(words, t, shift, bits=CHUNK_BITS):
    """:func:`discrete_laplace_fast` unpacked and in 32-bit lanes: (z, flagged), z int32 where |Z| < 2^30
    certainly (every table-decided draw: J < K and the chunks below 2^m give |Z| ≤ K 2^m), else int64."""
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


# -- the host path: the same function of the word stream, every comparison decided exactly ----------
class _Uniform:
    """U = 0.(prefix of ``nbits`` bits = v)(extension words...) ; ``less(fn)`` decides U < fn() exactly."""

    def __init__(self, v, nbits, ext):
        self.v, self.nbits, self.ext, self.words = v, nbits, ext, []

    def less(self, fn):
        return self.less_bounds(lambda prec: _ends_at(fn, prec - 32))

    def less_bounds(self, bounds):
        """Decide U < p for p given as ``bounds(prec) -> (lo, hi)`` Fractions, reading extension words
        until the prefix of U lies on one side of [lo, hi]."""
        d = 0
        while True:
            num, den_bits = self.v, self.nbits
            for w in self.words[:d]:
                num, den_bits = (num << 64) | w, den_bits + 64
            p_lo, p_hi = bounds(den_bits + 96)
            if Fraction(num + 1, 1 << den_bits) <= p_lo:  # U < (num+1)/2^den_bits ≤ p
                return True
            if Fraction(num, 1 << den_bits) >= p_hi:  # U ≥ num/2^den_bits ≥ p
                return False
            d += 1
            if d > len(self.words):
                self.words.append(self.ext(len(self.words)))


def _ends_at(fn, prec):
    with _prec(prec):
        return _ends(fn())


def _ext_of(word, j):
    return lambda d: word(EXT_BASE + 64 * j + d)


def exact_record(word, t, shift, bits=CHUNK_BITS):
    """One discrete Laplace draw from the word stream ``word(j)`` (ints in [0, 2^64)), every comparison
    exact: the device's function of the stream (:func:`laplace_code`), without its ties/table limit."""
    t, shift = int(t), int(shift)
    offsets, widths, m = chunk_layout(t, shift, bits)
    law = _Law(t, shift)
    u = word(0)
    neg = u >> 63
    v = u & ((1 << 63) - 1)
    j = _icdf_on_host(dl_icdf(t, shift, bits), v, _ext_of(word, 0), lambda prec, j: _dl_cdf_bounds(t, shift, m, j, prec))
    if j == 0:
        return 0
    g = (j - 1) << m
    for i, tab in enumerate(dl_tables(t, shift, bits)):
        w = word(1 + i)
        c = int(np.searchsorted(tab, np.uint64(w), side="left"))  # #{T < u}: certain U ≥ F
        Uc = _Uniform(w, 64, _ext_of(word, 1 + i))
        while c < len(tab) and int(tab[c]) == w and not Uc.less(lambda c=c, i=i: law.chunk_cdf(offsets[i], c, widths[i])):
            c += 1
        g += c << offsets[i]
    return -(g + 1) if neg else g + 1


def resolve_on_host(z, flag, word_of_record, t, shift, bits=CHUNK_BITS):
    """Complete the flagged records on the host: ``word_of_record(i)`` gives record i's ``word(j)``."""
    z = np.array(z)
    for i in np.nonzero(np.asarray(flag))[0]:
        z[i] = exact_record(word_of_record(int(i)), t, shift, bits)
    return z


def threefry_word(k0, k1, j, i):
    """Word j of record i of :class:`~dpjax.exact.bits.ThreefryWords`, computed in numpy (the host path)."""
    from dpjax.random import threefry2x32

    with np.errstate(over="ignore"):
        w0, w1 = threefry2x32(np.asarray([k0], np.uint32), np.asarray([k1], np.uint32), np.asarray([j], np.uint32),
                              np.asarray([i], np.uint32))
    return (int(w0[0]) << 32) | int(w1[0])


def threefry_laplace(words, n, t, shift, bits=CHUNK_BITS):
    """:func:`discrete_laplace_fast` on :class:`~dpjax.exact.bits.ThreefryWords`, the flagged records
    completed on the host by a callback that runs only when a record is flagged (jit-able)."""
    return _threefry_complete(words, laplace_code(words, n, t, shift, bits), lambda w: exact_record(w, t, shift, bits))


def threefry_gaussian(words, n, nvar, bits=CHUNK_BITS):
    """:func:`gaussian_code` on :class:`~dpjax.exact.bits.ThreefryWords`, completed like :func:`threefry_laplace`."""
    return _threefry_complete(words, gaussian_code(words, n, nvar, bits), lambda w: exact_gaussian_record(w, nvar, bits))


def complete_codes(code, k0, k1, r0, record_fn):
    """z of packed codes, the flagged records recomputed exactly on the host from their Threefry words."""
    code = np.asarray(code)
    z = code >> 8
    for i in np.nonzero((code & 1) == 1)[0]:
        z[i] = record_fn(lambda j, i=int(i): threefry_word(k0, k1, j, r0 + i))
    return z


def _threefry_complete(words, code, record_fn):
    code = jax.lax.optimization_barrier(code)  # computed once, read twice
    r0 = words.records.reshape(-1)[0]  # ThreefryWords' records are r0, r0 + 1, ...

    def host(code, k0, k1, r0):
        out = complete_codes(code, int(k0), int(k1), int(r0), record_fn).astype(np.int64).view(np.uint64)
        # two uint32 halves: the callback thread may run without x64, where an int64 result would be narrowed
        return (out >> np.uint64(32)).astype(np.uint32), (out & np.uint64(0xFFFFFFFF)).astype(np.uint32)

    def fix(code):
        half = jax.ShapeDtypeStruct(code.shape, jnp.uint32)
        hi, lo = jax.pure_callback(host, (half, half), code, words._k0, words._k1, r0)
        return ((hi.astype(jnp.uint64) << _U64(32)) | lo.astype(jnp.uint64)).astype(jnp.int64)

    return jax.lax.cond(jnp.any((code & 1) == 1), fix, lambda code: code >> 8, code)


# -- the discrete Gaussian: one word per record, an exact inverse-CDF table of |Z| ---------------------
#: the |Z| table stops where P(|Z| > K) < 2^-this (a word past it, or equal to a threshold, goes to the host)
_DG_TAIL = 40
#: fixed-point bits of the host's rigorous pmf sums (raised until every threshold is certain)
_DG_PREC = 128


def _dg_sums(nvar, prec):
    """Rigorous fixed-point bounds (scale 2^prec) of the discrete Gaussian's unnormalised |Z| masses.

    p_k = exp(−k²/(2n)) by the recurrence p_{k+1} = p_k a_k, a_{k+1} = a_k b (a_0 = e^{−1/(2n)},
    b = e^{−1/n}), floors for the lower and ceilings for the upper chain (all terms positive, so the
    bounds stay bounds); C(k) = 1 + 2 Σ_{1≤j≤k} p_j (|Z| ≤ k) and S = C(∞), whose tail past the last
    term M (p_M ≤ n + 2 ulp) is at most p_M n/M (Σ_{k>M} e^{−k²/2n} ≤ p_M Σ_j e^{−jM/n} ≤ p_M n/M).
    Returns (c_lo, c_hi: lists of C(k) bounds for k = 0..M, s_lo, s_hi)."""
    n = int(nvar)
    with _prec(prec + 64):
        a_lo, a_hi = (math.floor(f * 2**prec) for f in _ends(mpmath.iv.exp(-mpmath.iv.mpf(1) / (2 * n))))
        b_lo, b_hi = (math.floor(f * 2**prec) for f in _ends(mpmath.iv.exp(-mpmath.iv.mpf(1) / n)))
    a_hi, b_hi = a_hi + 1, b_hi + 1
    one = 1 << prec
    p_lo, p_hi = one, one
    c_lo, c_hi = [one], [one]
    k = 0
    while p_hi > n + 2 or k < 2:  # stop at terms below n ulp (the ceilings would stall near 1 ulp)
        p_lo, p_hi = (p_lo * a_lo) >> prec, -((-p_hi * a_hi) >> prec)
        a_lo, a_hi = (a_lo * b_lo) >> prec, -((-a_hi * b_hi) >> prec)
        k += 1
        c_lo.append(c_lo[-1] + 2 * p_lo)
        c_hi.append(c_hi[-1] + 2 * p_hi)
    s_hi = c_hi[-1] + 2 * (p_hi * n // k + 2)
    return c_lo, c_hi, c_lo[-1], s_hi


def _dg_cdf_bounds(nvar, k, prec):
    """Exact Fraction bounds of P(|Z| ≤ k) for the discrete Gaussian of variance parameter nvar."""
    c_lo, c_hi, s_lo, s_hi = _dg_sums_cached(int(nvar), int(prec))
    if k >= len(c_lo):
        return Fraction(c_lo[-1], s_hi), Fraction(1)
    return Fraction(c_lo[k], s_hi), min(Fraction(c_hi[k], s_lo), Fraction(1))


_dg_sums_cached = functools.lru_cache(maxsize=8)(_dg_sums)


@functools.lru_cache(maxsize=16)
def dg_icdf(nvar):
    """T[k] = ⌊2^63 P(|Z| ≤ k)⌋ for k = 0 .. K − 1, Z the discrete Gaussian with pmf ∝ exp(−z²/(2n)), n = nvar,
    K the first k with P(|Z| > k) < 2^-_DG_TAIL; each floor certain (bounds of :func:`_dg_sums`, precision
    doubled where an interval straddles an integer)."""
    n = int(nvar)
    prec = _DG_PREC
    while True:
        c_lo, c_hi, s_lo, s_hi = _dg_sums_cached(n, prec)
        out, ok = [], True
        for k in range(len(c_lo)):
            a, b = (c_lo[k] << 63) // s_hi, min((c_hi[k] << 63) // s_lo, (1 << 63) - 1)
            if a != b:
                ok = False
                break
            out.append(a)
            if (((s_hi - c_lo[k]) << _DG_TAIL) < s_lo) and k >= 1:  # P(|Z| > k) < 2^-tail, certain
                break
        if ok:
            return np.array(out, np.uint64)
        prec *= 2


#: bits of leading ones per guide level: level l serves the words whose top ``DG_LEVEL_BITS``·l bits are all
#: ones (tail mass below 2^-3l), with buckets 2^-(3l) times finer, so a tail bucket holds as few thresholds as
#: a central one
DG_LEVEL_BITS = 3


def _dg_levels():
    return _DG_TAIL // DG_LEVEL_BITS + 2


def level_guide(tab):
    """(guide int32 [levels·(2^GUIDE_BITS + 1)], depth) for a table of 63-bit thresholds T[k] = ⌊2^63 F(k)⌋: the
    row of level l holds #{k : T[k] < s} at the bucket starts s = 2^63 − 2^(63 − 3l) + i 2^(63 − GUIDE_BITS − 3l)
    (and the table size at the end); ``depth`` search steps cover the widest bucket a word can reach."""
    levels, b, lb = _dg_levels(), GUIDE_BITS, DG_LEVEL_BITS
    rows, widest = [], 0
    for lev in range(levels):
        base = (1 << 63) - (1 << (63 - lb * lev))
        starts = np.uint64(base) + (np.arange(1 << b, dtype=np.uint64) << np.uint64(63 - b - lb * lev))
        row = np.append(np.searchsorted(tab, starts, side="left"), tab.size)
        used = (1 << b) if lev == levels - 1 else (1 << b) - (1 << (b - lb))  # the rest belongs to level l + 1
        widest = max(widest, int(np.max(np.diff(row)[:used])))
        rows.append(row)
    return np.concatenate(rows).astype(np.int32), widest.bit_length()


@functools.lru_cache(maxsize=16)
def dg_guide(nvar):
    """:func:`level_guide` of :func:`dg_icdf`'s table."""
    return level_guide(dg_icdf(int(nvar)))


@functools.lru_cache(maxsize=64)
def dl_guide(t, shift, bits=CHUNK_BITS):
    """:func:`level_guide` of :func:`dl_icdf`'s table."""
    return level_guide(dl_icdf(t, shift, bits))


def _level_search(tab, guide, depth, hi, lo):
    """(#{k : T[k] ≤ v}, open) for v the low 63 bits of the word (``hi``, ``lo``: uint32 halves), ``tab`` the numpy
    table and ``guide`` its levelled guide: the level of v (its leading ones), its bucket, ``depth`` bisection
    steps on 32-bit halves (:func:`_probe`)."""
    levels, b, lb = _dg_levels(), GUIDE_BITS, DG_LEVEL_BITS
    vh = hi & np.uint32((1 << 31) - 1)
    ones = jax.lax.clz(~(vh << np.uint32(1))).astype(jnp.int32)  # leading ones of v's top 31 bits (at most 31)
    ones = jnp.where(ones == 31, 31 + jax.lax.clz(~lo).astype(jnp.int32), ones)
    lev = jnp.minimum(ones // lb, levels - 1)
    s = (63 - b) - lb * lev  # the bucket index is (v >> s) mod 2^b, from the halves
    su = s.astype(jnp.uint32)
    top = jnp.where(s >= 32, vh >> (su - np.uint32(32)), (vh << (np.uint32(32) - su)) | (lo >> su))
    g = lev * ((1 << b) + 1) + (top & np.uint32((1 << b) - 1)).astype(jnp.int32)
    return _probe(tab, guide, depth, g, vh, lo)


def gaussian_code(words, n, nvar, bits=CHUNK_BITS):
    """Discrete Gaussian (pmf ∝ exp(−z²/(2·nvar))) for ``n`` records, packed like :func:`laplace_code`
    (z = code >> 8, flagged = code & 1), from one word per record.

    Word 0 of a record: top bit s, low 63 bits v (the start of a uniform V ∈ [0, 1)). |Z| = min{k : V <
    F(k)}, F(k) = P(|Z| ≤ k), decided by v against T[k] = ⌊2^63 F(k)⌋ (:func:`dg_icdf`: v < T proves V < F,
    v > T proves V ≥ F); Z = −|Z| when s = 1. P(Z = ±k) = P(|Z| = k)/2 for k > 0: the exact law, with no
    rejection and no loop. Open cases (v equal to a threshold, or past the table, probability < 2^-40) are
    flagged for :func:`exact_gaussian_record`. A levelled guide (:func:`dg_guide`) leaves a few bisection
    steps (two at the release's lattice variances 2^22 … 2^24)."""
    del bits
    return _symmetric_code(words, dg_icdf(int(nvar)), *dg_guide(int(nvar)))


def _symmetric_code(words, tab, gd, depth):
    """A symmetric integer law from one word per record: |Z| by the 63-bit inverse-CDF table ``tab`` of |Z|
    (guide ``gd``, ``depth`` steps: :func:`level_guide`), the word's top bit the sign; packed codes, flagged
    on an open comparison or past the table."""
    return _pack(*symmetric_noise(words, tab, gd, depth))


def symmetric_noise(words, tab, gd, depth):
    """:func:`_symmetric_code` unpacked, in 32-bit lanes: (z int32, flagged)."""
    hi, lo = _word_halves(words, 0, words.records.reshape(-1))
    cnt, undecided = _level_search(tab, gd, depth, hi, lo)
    flag = undecided | (cnt == tab.shape[0])
    return jnp.where((hi >> np.uint32(31)) == 1, -cnt, cnt), flag


def icdf_noise_per_record(words, table, offset, length, depth):
    """:func:`symmetric_noise` with a table per record (any number of distinct tables, concatenated in ``table``):
    record i's |Z| = #{k : T[k] < v} over its table T = table[offset_i : offset_i + length_i] (v its word's low 63
    bits, ``depth`` bisection steps cover the longest table), the word's top bit the sign; flagged on a tie
    (T[|Z|] = v) or past the table — the same map as the one-table search, every record it decides decided alike
    (the flagged ones completed by the same host function, :func:`_icdf_on_host`). 64-bit lanes (x64)."""
    u = words(0, words.records.reshape(-1))
    v = u & _U64((1 << 63) - 1)
    off, size = offset.astype(jnp.int64), length.astype(jnp.int64)
    cnt = jnp.zeros(v.shape, jnp.int64)
    for b in reversed(range(depth)):
        mid = cnt + (1 << b)
        cnt = jnp.where((mid <= size) & (table[off + jnp.minimum(mid, size) - 1] < v), mid, cnt)
    flag = (cnt == size) | (table[off + jnp.minimum(cnt, size - 1)] == v)
    return jnp.where((u >> _U64(63)) == 1, -cnt, cnt), flag


def _icdf_on_host(tab, v, ext, bounds):
    """min{k : V < F(k)} for V = 0.(63-bit v)(extension words ``ext(d)``...), F's floors ``tab`` deciding every
    comparison they can and ``bounds(prec, k)`` (Fraction bounds of F(k)) the ties and the tail past the table."""
    c = int(np.searchsorted(tab, np.uint64(v), side="left"))  # #{T < v}: V ≥ F(k) certain for those
    U = _Uniform(v, 63, ext)
    while True:
        if c < tab.size and int(tab[c]) != v:
            less = v < int(tab[c])
        else:
            less = U.less_bounds(lambda prec, c=c: bounds(prec, c))
        if less:
            return c
        c += 1


def exact_gaussian_record(word, nvar, bits=CHUNK_BITS):
    """The host's exact version of :func:`gaussian_code` for one record's word stream: every comparison of
    V with F(k) decided with further words (``EXT_BASE + d``) against rigorous bounds of F(k)."""
    del bits
    return _symmetric_record(word, dg_icdf(int(nvar)), lambda prec, k: _dg_cdf_bounds(nvar, k, prec))


def _symmetric_record(word, tab, bounds):
    """:func:`_symmetric_code` for one record's word stream on the host, ``bounds(prec, k)`` deciding ties and
    the tail past ``tab`` exactly."""
    u = word(0)
    c = _icdf_on_host(tab, u & ((1 << 63) - 1), _ext_of(word, 0), bounds)
    return -c if u >> 63 else c


# -- PB-DP over the discrete kernels: one word per record, an exact inverse-CDF table of the boosted |N| ------
#: the largest kernel scale of an exact boosted release, σ of the discrete Gaussian or b of the discrete Laplace:
#: the table of |N| has about 7.4σ (28 b) entries, built on the host from about 12σ (61 b) terms
PB_MAX_SCALE = {"dg": 2.0**17, "dl": 2.0**13}


def _iv_fraction(x):
    return mpmath.iv.mpf(x.numerator) / x.denominator


def _pb_sums(spec, prec):
    """Rigorous fixed-point bounds of the boosted |N| law's unnormalised cumulative weights.

    ``spec = (kind, scale_num, scale_den, radius, keep_num, keep_log2den)``: the kernel's one-sided masses
    p_j = exp(−j²/(2v)) (kind "dg", v = σ² = scale) or exp(−j/b) (kind "dl", b = scale), weighted w_j = 2^E
    for j ≤ radius (inside the region) and M beyond it, keep = M/2^E (the accountant's keep probability 1 − q,
    a float64, exactly). C(k) = w_0 p_0 + 2 Σ_{1≤j≤k} w_j p_j at scale 2^prec (floors for the lower chain,
    ceilings for the upper; p_{j+1} = p_j a_j with a_{j+1} = a_j b for "dg", a constant ratio for "dl"), until the
    tail past the last term is below 2^-(prec − 40) of the total; its upper bound (Σ_{j>k} p_j ≤ p_k v/k for
    "dg", p_k q/(1 − q) ≤ p_k b for "dl") closes the total's. Returns (c_lo, c_hi, s_lo, s_hi)."""
    kind, sn, sd, radius, keep_m, keep_e = spec
    scale = Fraction(sn, sd)
    with _prec(prec + 64):
        if kind == "dg":
            a = mpmath.iv.exp(-1 / (2 * _iv_fraction(scale)))
            b = mpmath.iv.exp(-1 / _iv_fraction(scale))
        else:
            a = b = mpmath.iv.exp(-1 / _iv_fraction(scale))
        a_lo, a_hi = (math.floor(f * 2**prec) for f in _ends(a))
        b_lo, b_hi = (math.floor(f * 2**prec) for f in _ends(b))
    a_hi, b_hi = a_hi + 1, b_hi + 1
    one, w_in = 1 << prec, 1 << keep_e
    p_lo = p_hi = one
    c_lo, c_hi = [one * w_in], [one * w_in]
    bound = math.ceil(scale) + 1  # v or b, rounded up
    k = 0
    while True:
        w_out = keep_m if k >= radius else w_in
        tail = 2 * w_out * (p_hi * bound // max(k, 1) + 2) if kind == "dg" else 2 * w_out * (p_hi * bound + 2)
        if k >= 1 and (tail << (prec - 40)) < c_lo[-1]:
            return c_lo, c_hi, c_lo[-1], c_hi[-1] + tail
        p_lo, p_hi = (p_lo * a_lo) >> prec, -((-p_hi * a_hi) >> prec)
        if kind == "dg":
            a_lo, a_hi = (a_lo * b_lo) >> prec, -((-a_hi * b_hi) >> prec)
        k += 1
        w = w_in if k <= radius else keep_m
        c_lo.append(c_lo[-1] + 2 * w * p_lo)
        c_hi.append(c_hi[-1] + 2 * w * p_hi)


_pb_sums_cached = functools.lru_cache(maxsize=8)(_pb_sums)


def _pb_cdf_bounds(spec, k, prec):
    """Exact Fraction bounds of P(|N| ≤ k) for the boosted law ``spec`` (1 exactly where only the region's
    weights remain: keep = 0 and k ≥ radius)."""
    if spec[4] == 0 and k >= spec[3]:
        return Fraction(1), Fraction(1)
    c_lo, c_hi, s_lo, s_hi = _pb_sums_cached(spec, int(prec))
    if k >= len(c_lo):
        return Fraction(c_lo[-1], s_hi), Fraction(1)
    return Fraction(c_lo[k], s_hi), min(Fraction(c_hi[k], s_lo), Fraction(1))


@functools.lru_cache(maxsize=16)
def pb_icdf(spec):
    """T[k] = ⌊2^63 P(|N| ≤ k)⌋ of the boosted discrete law ``spec`` (:func:`_pb_sums`) for k = 0 .. K − 1, K the
    first k with P(|N| > k) < 2^-40 certain (or with P(|N| ≤ k) = 1 exactly: T = 2^63, above every 63-bit word);
    each floor certain (precision doubled where a bound straddles an integer)."""
    prec = _DG_PREC
    while True:
        c_lo, c_hi, s_lo, s_hi = _pb_sums_cached(spec, prec)
        out, ok = [], True
        for k in range(len(c_lo)):
            if spec[4] == 0 and k >= spec[3]:
                out.append(1 << 63)
                break
            a, b = (c_lo[k] << 63) // s_hi, min((c_hi[k] << 63) // s_lo, (1 << 63) - 1)
            if a != b:
                ok = False
                break
            out.append(a)
            if ((s_hi - c_lo[k]) << _DG_TAIL) < s_lo and k >= 1:
                break
        if ok:
            return np.array(out, np.uint64)
        prec *= 2


@functools.lru_cache(maxsize=16)
def pb_guide(spec):
    """:func:`level_guide` of :func:`pb_icdf`'s table."""
    return level_guide(pb_icdf(spec))


def boosted_code(words, n, spec):
    """PB-DP noise over a discrete kernel (``spec``: :func:`_pb_sums`) for ``n`` records, packed like
    :func:`laplace_code`, from one word per record: the boosted law of N is symmetric (the region |N| ≤ radius
    and both kernels are), so |N| is one inverse-CDF look-up of the exact table :func:`pb_icdf` and the word's
    top bit the sign — the three-component mixture (below / inside / above, weights keep·P_lo, P_in,
    keep·P_hi) in one comparison chain, with no rejection. Ties and words past the table are flagged for
    :func:`exact_boosted_record`."""
    del n
    return _symmetric_code(words, pb_icdf(spec), *pb_guide(spec))


def exact_boosted_record(word, spec):
    """The host's exact version of :func:`boosted_code` for one record's word stream."""
    return _symmetric_record(word, pb_icdf(spec), lambda prec, k: _pb_cdf_bounds(spec, k, prec))


# -- per-record scales: the discrete Laplace's inverse CDF computed per record, checked with error bounds --------
#: assumed bound on the relative error of XLA's float64 ``log``, ``exp`` and ``log1p`` (16 ulp; they are within
#: 1–2 ulp: ``tests/test_exact.py::test_float64_transcendentals_are_within_the_assumed_error``; a backend is trusted
#: only where its sweep stays within PLATFORM_MARGIN of it, 4 ulp). A looser bound flags more records for the host
#: (the same release, slower): τ = 2^30 flags about 2.8·10^-4 of the records at 2^-46, 9·10^-5 at this one
TRANSCENDENTAL_ERROR = 2.0**-48
#: assumed bound on the error of XLA's float32 ``exp`` (relative) and ``log`` (relative to |log r| + 1: near r = 1
#: an absolute error), 64 float32 ulp; they are within 2^-22 (``tests/test_exact.py::
#: test_float32_transcendentals_are_within_the_assumed_error``: 16× headroom; a looser bound only flags more records)
TRANSCENDENTAL_ERROR32 = 2.0**-18
#: the scales τ of the float32 decision (:func:`laplace_noise_per_record32`): 2^-5 ≤ τ ≤ 2^NARROW_MAX_LOG2
NARROW_MIN_LOG2, NARROW_MAX_LOG2 = -5, 5


#: the transcendental functions the per-record decisions evaluate on the device (their error bounds above are checked
#: on each backend before a decision relies on them: :func:`transcendental_errors`)
TRANSCENDENTALS = {"exp": jnp.exp, "log": jnp.log, "log1p": jnp.log1p}
#: a decision relies on a function only where its observed error is at most this fraction of the assumed bound
PLATFORM_MARGIN = 0.25


def _sweep64():
    """The float64 inputs of the platform check, per function: exp on [−708, 0] (the −λ of every scale whose
    q = e^−λ is normal, dense near 0; a subnormal q moves log c by less than 2^-1022), log on (2^-64, 1] (the
    word's w/2^63, dense near 1, where log is smallest) and log1p on (2^-1000, 1) (q)."""
    dense = -np.logspace(-12, np.log10(708.0), 2048)
    near_one = 1.0 - np.logspace(-16, -1, 1024)
    return {"exp": np.concatenate([dense, np.linspace(-708.0, 0.0, 1024)]),
            "log": np.concatenate([near_one, np.exp2(-np.linspace(0.0, 63.9, 2048)), 1.0 + np.zeros(1)]),
            "log1p": np.concatenate([np.exp2(-np.linspace(0.0, 1000.0, 2048)), np.logspace(-20, -1e-9, 1024)])}


def _sweep32():
    """The float32 inputs: exp on [−2^5, −2^-5] (the −λ of the float32 decision's scales, with the range's ends) and
    log on [2^-48, 2^33] (its r = q 2^32/((1 + q) W), dense near 1)."""
    lam = np.concatenate([np.exp2(np.linspace(NARROW_MIN_LOG2, NARROW_MAX_LOG2, 2048)),
                          np.exp2(np.array([NARROW_MIN_LOG2, NARROW_MAX_LOG2], np.float64))])
    r = np.concatenate([np.exp2(np.linspace(-48.0, 33.0, 2048)), 1.0 + np.linspace(-2.0**-8, 2.0**-8, 1024)])
    return {"exp": (-lam).astype(np.float32), "log": r.astype(np.float32)}


def _reference(name, x):
    """The function at the float64 inputs ``x`` on the host, within 2^-62 relative: numpy's extended precision where
    it has a 64-bit significand (x86), else mpmath at 40 digits."""
    if np.finfo(np.longdouble).nmant >= 63:
        return getattr(np, name)(x.astype(np.longdouble))
    import mpmath

    f = {"exp": mpmath.exp, "log": mpmath.log, "log1p": mpmath.log1p}[name]
    with mpmath.workdps(40):
        return np.asarray([f(mpmath.mpf(float(v))) for v in x], dtype=object).astype(np.float64)


_platform_errors: dict = {}


def transcendental_errors(backend=None):
    """The observed errors of the device's transcendental functions (:data:`TRANSCENDENTALS`) on ``backend``
    (default: JAX's default backend), per (function, dtype): each evaluated on the device over a fixed sweep of
    the inputs the per-record decisions give it (:func:`_sweep64`, :func:`_sweep32`) against the host's values
    (:func:`_reference`); the error measure is the one the decisions' bounds assume — relative for exp and log1p,
    relative to |log x| + 1 for log — compared with :data:`TRANSCENDENTAL_ERROR` (float64) and
    :data:`TRANSCENDENTAL_ERROR32` (float32). Computed once per backend (cached). Callable on its own, e.g. on an
    accelerator: ``transcendental_errors("gpu")``.

    Args:
      backend: a JAX backend name ("cpu", "gpu", "tpu"), or None for the default one.

    Returns:
      ``{(name, dtype): error}``, e.g. ``{("exp", "float32"): 5.9e-08, ...}``.
    """
    backend = backend or jax.default_backend()
    if backend not in _platform_errors:
        device = jax.local_devices(backend=backend)[0]
        out = {}
        with jax.enable_x64(True):
            for dtype, sweep in (("float64", _sweep64()), ("float32", _sweep32())):
                for name, x in sweep.items():
                    x = np.asarray(x, dtype)
                    got = np.asarray(jax.jit(TRANSCENDENTALS[name])(jax.device_put(x, device))).astype(np.longdouble)
                    ref = _reference(name, x.astype(np.float64))
                    scale = np.abs(ref) + 1.0 if name == "log" else np.maximum(np.abs(ref), np.finfo(np.float64).tiny)
                    err = (np.abs(got - ref) / scale).astype(np.float64)
                    out[(name, dtype)] = float(np.max(np.where(np.isfinite(err), err, np.inf)))
        _platform_errors[backend] = out
    return _platform_errors[backend]


_warned: set = set()


def transcendentals_trusted(dtype, backend=None):
    """Whether every transcendental of ``dtype`` ("float32" or "float64") on ``backend`` is within
    :data:`PLATFORM_MARGIN` of its assumed bound (:func:`transcendental_errors`); if not, a warning says once per
    backend and dtype that the decisions relying on them are disabled there (their records are decided by the
    float64 program or on the host: the same release, slower).

    Args:
      dtype: "float32" or "float64".
      backend: a JAX backend name, or None for the default one.

    Returns:
      True where the decisions of ``dtype`` may rely on the backend's functions.
    """
    backend = backend or jax.default_backend()
    bound = TRANSCENDENTAL_ERROR if dtype == "float64" else TRANSCENDENTAL_ERROR32
    bad = {k: e for k, e in transcendental_errors(backend).items()
           if k[1] == dtype and not e <= PLATFORM_MARGIN * bound}
    if bad and (backend, dtype) not in _warned:
        import warnings

        _warned.add((backend, dtype))
        route = "float64 program" if dtype == "float32" else "host"
        warnings.warn(f"dpjax exact tier: on backend {backend!r} XLA's {dtype} "
                      + ", ".join(f"{name} errs up to {e:.3g}" for (name, _), e in sorted(bad.items()))
                      + f", above {PLATFORM_MARGIN:g} of the assumed bound {bound:.3g}: the per-record decisions that "
                      f"rely on it are disabled on this backend (the {route} decides those records: the same release, "
                      "slower)", RuntimeWarning, stacklevel=3)
    return not bad


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
    r"""Discrete Laplace of per-record scales τ = t/2^shift (uint64 arrays, one per record, any number of
    distinct values) from one word per record with no table and no host work per scale: (z float64, integer
    valued; flagged bool), the flagged records to be completed by :func:`exact_per_record`.

    |Z| = min{k ≥ 0 : V < F(k)}, F(k) = P(|Z| ≤ k) = 1 − c q^k with c = 2q/(1 + q), q = e^{−1/τ}; with
    S = 1 − V that is |Z| = max(0, ⌊x⌋ + 1), x = τ (log c − log S) (the same function of V as the tables'
    inverse CDF with J = |Z|). Word 0: the sign (top bit; ignored for 0) and v, its low 63 bits, so that
    S ∈ ((w − 1)/2^63, w/2^63] with w = 2^63 − v (the extension words refine it). The device evaluates x in
    float64 at S = w/2^63 with a rigorous bound E of its rounding error (every operation's, the
    transcendentals' at :data:`TRANSCENDENTAL_ERROR`, doubled), so the true x of every S in the word's interval
    lies in [x_f − E, x_f + E + τ/(w − 1)]; when that interval has one floor (or lies below 0) |Z| is decided
    exactly, otherwise the record is flagged (probability ≈ 2E + τ 2^-63/S: 10^-7 at τ ∈ [2^20, 2^21]) and
    :func:`exact_per_record` decides it from the record's further words against interval bounds of F.
    ``small`` (static: every 1/τ ≤ 2^-8, e.g. the Laplace lattice's): log c = −λ/2 − log cosh(λ/2), λ = 1/τ, by
    its series −λ/2 − λ²/8 + λ⁴/192 (truncation below λ^6/2880 ≤ 2^-59, in the bound) instead of exp and log1p.
    The word is read as its uint32 halves (w = W·2^32 − low: one rounding to float64, as w's own; τ/(w − 1) ≤
    τ 2^-32/(W − 1), a power of two from W's leading bit, W = 1 flagged): no 64-bit integer in the program."""
    t = jnp.asarray(t, jnp.uint64)
    shift = jnp.asarray(shift, jnp.uint64)
    pow2 = jax.lax.bitcast_convert_type((_U64(1023) + shift) << _U64(52), jnp.float64)  # 2^shift, exactly
    tf = t.astype(jnp.float64)
    lam = pow2 / tf  # 1/τ (one rounding)
    tau = tf * jax.lax.bitcast_convert_type((_U64(1023) - shift) << _U64(52), jnp.float64)  # exact
    if small:
        lam2 = lam * lam
        lc = -0.5 * lam - lam2 * (0.125 - lam2 * (1.0 / 192.0))
    else:
        lc = math.log(2.0) - lam - TRANSCENDENTALS["log1p"](TRANSCENDENTALS["exp"](-lam))  # log c
    neg, big, low = _uniform_top(words, words.records.reshape(-1))
    ls = TRANSCENDENTALS["log"](big.astype(jnp.float64) * 2.0**-31 - low.astype(jnp.float64) * 2.0**-63)  # log(w/2^63)
    x = (lc - ls) * tau
    d = TRANSCENDENTAL_ERROR
    err = 2.0 * (tau * (d * (jnp.abs(ls) + 3.0) + 2.0**-48) + jnp.abs(x) * 2.0**-49)
    lead = (np.uint32(31) - jax.lax.clz(jnp.maximum(big - np.uint32(1), np.uint32(1)))).astype(jnp.uint64)
    wide = tau * jax.lax.bitcast_convert_type((_U64(1023 - 32) - lead) << _U64(52), jnp.float64)
    a, flag = _open_floor(x, err, wide, big > np.uint32(1))
    return jnp.where(neg, -a, a), flag


def laplace_noise_per_record32(words, t, shift):
    r""":func:`laplace_noise_per_record` decided in float32, for scales 2^NARROW_MIN_LOG2 ≤ τ ≤ 2^NARROW_MAX_LOG2
    (t < 2^24, exact in float32): (z int32, open bool), the open records to be decided by the float64 program
    (then, rarely, the host). The same map V ↦ |Z| = max(0, ⌊x⌋ + 1) from word 0's high half only:
    S ∈ ((W − 1)/2^31, W/2^31] (:func:`_uniform_top`), x = τ log(c/S) at S = W/2^31 as
    r = q 2^32 / ((1 + q) W), one exp and one log in 32-bit lanes (twice the records per vector of float64).

    Error bound (u = 2^-24, D = :data:`TRANSCENDENTAL_ERROR32`, λ = 1/τ ≤ 2^5 so λu ≤ 2^-19): λ_f = λ(1 + δ),
    q_f = q(1 + ε_q) with |ε_q| ≤ D + 1.01 λu; r_f (1 + q_f, W to float32, a product and a division) has relative
    error ≤ 1.5|ε_q| + 4u; log adds D(|log r| + 1) and x_f = τ log_f the rounding u|x_f|. With τλ ≤ 1 + u and
    τ|log_f| ≤ |x_f|(1 + u): |x_f − x| ≤ 3Dτ + 1.1D|x_f| + 2u ≤ E = 4Dτ + 2D|x_f| + 3u. The interval
    [x_f − 2E, x_f + 2E + τ/(W − 1)] then holds every x of the word's S: the second E covers the roundings of the
    bound and of the two sums (≤ 2u(|x_f| + 2E + τ), as τ/(W − 1) ≤ τ 2^-⌊log2(W − 1)⌋ ≤ τ). Open: probability
    about 28 D τ (2·10^-4 at τ = 2)."""
    f32 = jnp.float32
    s = jnp.asarray(shift).astype(jnp.uint32)
    tf = jnp.asarray(t).astype(jnp.uint32).astype(f32)  # exact: t < 2^24
    lam = jax.lax.bitcast_convert_type((np.uint32(127) + s) << np.uint32(23), f32) / tf  # 1/τ (one rounding)
    tau = tf * jax.lax.bitcast_convert_type((np.uint32(127) - s) << np.uint32(23), f32)  # exact
    q = TRANSCENDENTALS["exp"](-lam)
    neg, big, _ = _uniform_top(words, words.records.reshape(-1))
    x = tau * TRANSCENDENTALS["log"](q * f32(2.0**32) / ((1.0 + q) * big.astype(f32)))
    d, u = TRANSCENDENTAL_ERROR32, 2.0**-24
    err = 2.0 * (tau * f32(4 * d) + jnp.abs(x) * f32(2 * d) + f32(3 * u))
    lead = np.uint32(31) - jax.lax.clz(jnp.maximum(big - np.uint32(1), np.uint32(1)))
    wide = tau * jax.lax.bitcast_convert_type((np.uint32(127) - lead) << np.uint32(23), f32)
    a, flag = _open_floor(x, err, wide, big > np.uint32(1))
    a = a.astype(jnp.int32)
    return jnp.where(neg, -a, a), flag


def exact_per_record(word, t, shift):
    """:func:`laplace_noise_per_record` for one record's word stream on the host: min{k : V < F(k)} from a float
    candidate, every comparison of V with F decided by further words against interval bounds of F."""
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


# -- k-ary randomized response: one keep word, one 64-bit Lemire word for another category -------------
def rr_threshold(k1):
    """2^64 mod k1: Lemire's rejection threshold for a uniform index in [0, k1) from a 64-bit word."""
    return (1 << 64) % int(k1)


def rr_code(words, values, keep, k1):
    """Randomized response over k1 + 1 categories for the records' ``values``, packed like :func:`laplace_code`
    (category = code >> 8, flagged = code & 1): word 0 keeps the value iff it is below ``keep`` (probability
    keep/2^64 exactly); otherwise word 1 picks another category uniformly by Lemire's multiply-shift on 64
    bits (index ⌊w·k1/2^64⌋, skipping the value), whose rejection (low half below 2^64 mod k1, probability
    < k1/2^64) is flagged for :func:`exact_rr_record`."""
    from dpjax.exact.bits import mul_128

    records = words.records.reshape(-1)
    u = words(0, records)
    hi, lo = mul_128(words(1, records), jnp.full(records.shape, k1, jnp.uint64))
    r = hi.astype(jnp.int64)
    v = values.astype(jnp.int64)
    kept = u < (keep if isinstance(keep, jax.Array) else _U64(keep))  # (a per-record array of thresholds, or one)
    out = jnp.where(kept, v, r + (r >= v))
    flag = ~kept & (lo < _U64(rr_threshold(k1)))
    return out * 256 + flag.astype(jnp.int64)


def exact_rr_record(word, value, keep, k1):
    """:func:`rr_code` for one record's word stream, a rejected Lemire word retried with words 2, 3, ..."""
    if word(0) < keep:
        return int(value)
    j = 1
    while True:
        m = word(j) * int(k1)
        if m % (1 << 64) >= rr_threshold(k1):
            r = m >> 64
            return r + (r >= value)
        j += 1
