r"""Fixed-trip discrete Laplace and Gaussian: a few table look-ups per record, exact integer comparisons only.

The law. For τ = t/2^shift the discrete Laplace has pmf ∝ q^|z|, q = exp(−1/τ) (CKS Algorithm 2's
output law). It is drawn as Z = ±G with a fair sign and G ~ Geometric(q) (P(G = k) = (1 − q) q^k),
rejecting (−, 0) and drawing again (CKS's own sign step). The binary digits of a geometric
variable are independent, so G splits into independent parts:

* G mod 2^m, m = ⌈log2 τ + 1⌉, as chunks of near-equal widths w_j ≤ ``CHUNK_BITS`` at bit offsets
  o_j (:func:`chunk_layout`): chunk j is c_j ∈ [0, 2^w_j) with P(c_j = c) ∝ r_j^c,
  r_j = q^(2^o_j) (a truncated geometric), so F_j(c) = P(c_j ≤ c) = (1 − r_j^(c+1)) / (1 − r_j^(2^w_j));
* H = G >> m ~ Geometric(R), R = q^(2^m) ≤ e^−2: P(H ≥ k) = R^k.

Each part is an inverse-CDF draw from one uniform U ∈ [0, 1): c_j = min{c : U < F_j(c)}, and
H = #{k ≥ 1 : U₂ < R^k} where the H word's top bit is the sign and its other 63 bits start U₂.

**Exact comparisons.** A 64-bit word u is the first 64 bits of U (further bits: further words).
The host computes, once per (t, shift), the integer thresholds T = ⌊2^64 F⌋ (⌊2^63 R^k⌋ for H)
in rigorous interval arithmetic (``mpmath.iv``, precision raised until the floor is certain).
Then ``u < T`` proves U < F and ``u > T`` proves U ≥ F (U < (u+1)/2^64 and U ≥ u/2^64): every
device decision is an integer comparison that is *correct*, not approximate. Only ``u == T`` (a
tie, probability ≤ 2^w·2^−64 per word) leaves the comparison open, and so does H ≥ K (past the
table, probability ≤ 2^−40). The device flags those records; :func:`resolve_on_host` recomputes
each flagged record from its own words, deciding every open comparison with further words of
the same record against interval bounds of F at growing precision (terminates with probability
1). Device and host compute the same function of the record's word stream, so the output law is
exactly the discrete Laplace — no truncation. (Word indices are 32-bit: a record would need
more than 2^25 words, after millions of rejected tries at probability ≤ 1/2 each, before any word
were reused — a deviation below 2^(−10^6), not representable in any reported δ.)

**Cost.** ``nchunks + 1`` words per record and, per chunk, one guide-table look-up (bucket of the
word's top 14 bits) plus a binary search as deep as the widest bucket — one step at the lattice
scales (τ ∈ [2^20, 2^21]: chunks of 11 and 10 bits, three words); rejected records (probability (1 − q)/2) run again with their
next words in a ``lax.while_loop`` over the few stragglers (τ < 2^11), or, where a rejection is
as rare as a tie (τ ≥ 2^11, probability < 2^-12), on the host with the flagged records.

**Discrete Gaussian** (:func:`gaussian_code`): one word per record and no rejection. The law
pmf ∝ exp(−z²/(2n)) of CKS's discrete Gaussian is drawn by inverse CDF of |Z| on the word's low 63
bits against T[k] = ⌊2^63 P(|Z| ≤ k)⌋ (:func:`dg_icdf`: rigorous fixed-point bounds of the pmf sums,
every floor certain), the top bit the sign (P(Z = ±k) = P(|Z| = k)/2 for k > 0). A guide indexed by the
word's leading ones (the tail level) and the next ``GUIDE_BITS`` bits leaves two bisection steps. Ties and words past the table (P(|Z| > K) < 2^-40) go to the host, whose
:func:`exact_gaussian_record` decides them with further words against bounds of P(|Z| ≤ k) at growing
precision. (The previous version, CKS Algorithm 3 — a discrete Laplace proposal and an acceptance
word — needed ≈ 1.3 tries of four words per record: 3× slower.)
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

__all__ = ["CHUNK_BITS", "EXT_BASE", "chunk_layout", "dg_guide", "dg_icdf", "discrete_laplace_fast", "dl_tables",
           "exact_gaussian_record", "exact_record", "gaussian_code", "laplace_code", "resolve_on_host",
           "threefry_gaussian", "threefry_laplace"]

#: bits per chunk of the geometric's low part (a table of 2^B − 1 thresholds per chunk)
CHUNK_BITS = 11
#: H table stops where P(H ≥ K) = R^K < 2^-40 (the rest is resolved on the host)
_H_TAIL = 40
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
    """Interval-valued CDFs of the parts of G for τ = t/2^shift (exact rationals in, ``mpmath.iv`` out)."""

    def __init__(self, t, shift):
        self.t, self.shift = int(t), int(shift)

    def _r(self, power):  # exp(−2^power / τ) = exp(−2^(power + shift) / t)
        x = mpmath.iv.mpf(2) ** (power + self.shift) / self.t
        return mpmath.iv.exp(-x)

    def chunk_cdf(self, offset, c, width):  # chunk of bits offset .. offset + width − 1
        r = self._r(offset)
        return (1 - r ** (c + 1)) / (1 - r ** (1 << width))

    def h_tail(self, m, k):  # P(H ≥ k) = R^k
        return self._r(m) ** k


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
    """(offsets, widths) of the chunks of G mod 2^m: m = ⌈log2 τ + 1⌉ bits (so R = q^(2^m) ≤ e^-2) split into
    ⌈m/bits⌉ chunks of near-equal widths (no chunk wider than the law needs: short, well-spread tables)."""
    m = max(0, math.ceil(math.log2(int(t)) - int(shift) + 1))
    k = -(-m // bits)
    widths = tuple(m // k + (1 if j < m % k else 0) for j in range(k)) if k else ()
    return tuple(sum(widths[:j]) for j in range(k)), widths


@functools.lru_cache(maxsize=64)
def dl_tables(t, shift, bits=CHUNK_BITS):
    """(chunk thresholds: a tuple of uint64 [2^w_j − 1], H thresholds uint64 [K] (63-bit), m) for τ = t/2^shift."""
    t, shift = int(t), int(shift)
    law = _Law(t, shift)
    offsets, widths = chunk_layout(t, shift, bits)
    m = sum(widths)
    chunks = tuple(np.array([_threshold(lambda o=o, c=c, w=w: law.chunk_cdf(o, c, w), 64) for c in range((1 << w) - 1)],
                            dtype=_U64) for o, w in zip(offsets, widths))
    h = []
    for k in range(1, 200):
        h.append(_threshold(lambda k=k: law.h_tail(m, k), 63))
        if h[-1] < (1 << (63 - _H_TAIL)):
            break
    return chunks, np.array(h, dtype=_U64), m


#: guide tables: bucket k of the top GUIDE_BITS bits of a word holds the thresholds [guide[k], guide[k+1])
GUIDE_BITS = 14


@functools.lru_cache(maxsize=64)
def guides(t, shift, bits=CHUNK_BITS):
    """(guide int32 [nchunks, 2^GUIDE_BITS + 1], depths): guide[k] = #{c : T_c < k 2^(64 − GUIDE_BITS)} and,
    per chunk, the binary-search depth that covers its widest bucket (a few steps instead of ``bits``)."""
    ct, _, _ = dl_tables(t, shift, bits)
    starts = np.arange(1 << GUIDE_BITS, dtype=np.uint64) << np.uint64(64 - GUIDE_BITS)
    g = np.array([np.append(np.searchsorted(row, starts, side="left"), row.size) for row in ct], np.int32)
    g = g.reshape(len(ct), (1 << GUIDE_BITS) + 1)
    return g, tuple(int(np.max(np.diff(row))).bit_length() for row in g)


def _count_le_guided(table, guide, depth, u):
    """#{i : table[i] ≤ u} and the tie flag, searching only u's guide bucket (same result as
    :func:`_count_le`: every threshold below the bucket is < u, every one past it is > u).

    Two look-ups fewer than a plain bounded bisection: a probe past the bucket's end reads a threshold
    ≥ the next bucket's start > u, so only the table's end needs a guard; and u ties the count's last
    threshold iff a successful probe read a threshold equal to u (that is the last successful probe's
    threshold; with none, the bucket's lower neighbour is below the bucket start ≤ u)."""
    k = (u >> _U64(64 - GUIDE_BITS)).astype(jnp.int32)
    return _probe(table, u, guide[k], depth)


def _probe(table, u, lo, depth):
    """``depth`` unrolled bisection steps from a guide's bucket start ``lo``: (#{i : table[i] ≤ u},
    whether a successful probe read a threshold equal to u — a tie)."""
    tie = jnp.zeros(u.shape, bool)
    for b in reversed(range(depth)):
        mid = lo + (1 << b)
        t = table[jnp.minimum(mid, table.shape[0]) - 1]
        ok = (mid <= table.shape[0]) & (t <= u)
        tie = tie | (ok & (t == u))
        lo = jnp.where(ok, mid, lo)
    return lo, tie


def _count_le(table, u):
    """#{i : table[i] ≤ u} for a sorted table of 2^B − 1 entries (unrolled binary search), and whether
    u equals table[count − 1] (a tie)."""
    size = table.shape[0] + 1
    bits = size.bit_length() - 1
    lo = jnp.zeros(u.shape, jnp.int32)
    for b in reversed(range(bits)):
        mid = lo + (1 << b)
        lo = jnp.where(table[mid - 1] <= u, mid, lo)
    tie = (lo > 0) & (table[jnp.maximum(lo - 1, 0)] == u)
    return lo, tie


#: τ ≥ 2^this: rejected records go to the host instead of a device while loop
_HOST_REJECT_LOG2_TAU = 11
_MAX_ATTEMPT = 63  # a record rejected this many times goes to the host (probability ≤ 2^-63)


def _attempt(words, chunks, htab, m, offsets, attempt, old_flag, guide, depth):
    """One try from the words ``words(w)`` (w = 0 sign/H word, 1.. chunks), packed in one int64 so that
    XLA fuses the whole try into one loop: ``z·256 + attempt·4 + rejected·2 + flagged``."""
    u = words(0)
    neg = (u >> _U64(63)) == _U64(1)
    v = u & _U64((1 << 63) - 1)
    # H = #{k : v < S_k} (S decreasing); ties v == S_k and H = K go to the host
    # unrolled over the short table: a [records, K] broadcast-and-reduce ran 5x slower on XLA CPU
    h = jnp.zeros(v.shape, jnp.int64)
    flag = old_flag
    for k in range(htab.shape[0]):
        h = h + (v < htab[k]).astype(jnp.int64)
        flag = flag | (v == htab[k])
    flag = flag | (h == htab.shape[0])
    g = h << m
    for j in range(len(chunks)):
        c, tie = _count_le_guided(chunks[j], guide[j], depth[j], words(1 + j))
        g = g + (c.astype(jnp.int64) << offsets[j])
        flag = flag | tie
    rejected = neg & (g == 0)
    flag = flag | (rejected & (attempt >= _MAX_ATTEMPT))
    rejected = rejected & ~flag
    z = jnp.where(neg, -g, g)
    return z * 256 + attempt.astype(jnp.int64) * 4 + rejected.astype(jnp.int64) * 2 + flag.astype(jnp.int64)


def discrete_laplace_fast(words, n, t, shift, bits=CHUNK_BITS):
    """Discrete Laplace of scale t/2^shift for ``n`` records from ``words(j, records)``: (z int64 [n],
    flagged bool [n]); the flagged records must be completed by :func:`resolve_on_host`."""
    code = laplace_code(words, n, t, shift, bits)
    return code >> 8, (code & 1) == 1


def laplace_code(words, n, t, shift, bits=CHUNK_BITS):
    """:func:`discrete_laplace_fast` packed in one int64 per record (one fused output): z = code >> 8,
    flagged = code & 1.

    Word ``attempt·(1 + nchunks) + w`` of a record feeds word w of its try number ``attempt``; a
    rejected record tries again with its next words (the while loop gathers the rejected records,
    a 64th of the batch at a time), so a record's output depends on its own words only."""
    ct, ht, m = dl_tables(int(t), int(shift), bits)
    offsets = chunk_layout(int(t), int(shift), bits)[0]
    chunks, htab = tuple(jnp.asarray(r) for r in ct), jnp.asarray(ht)
    gd, depth = guides(int(t), int(shift), bits)
    gd = jnp.asarray(gd)
    width = 1 + len(ct)
    records = words.records.reshape(-1)
    zero = jnp.zeros((), jnp.int64)
    code = _attempt(lambda w: words(w, records), chunks, htab, m, offsets, zero, jnp.zeros((), bool), gd, depth)
    if int(t) >> int(shift) >= 1 << _HOST_REJECT_LOG2_TAU:
        # a rejection ((1 − q)/2 < 2^-12 per record) is as rare as a tie: the host completes it (exact_record
        # runs the same tries), and no while loop holds the batch
        return code | ((code & 2) >> 1)
    size = min(n, max(n // 64, 256))

    def body(code):
        (idx,) = jnp.nonzero((code & 2) == 2, size=size, fill_value=n)
        safe = jnp.where(idx < n, idx, 0)
        old = code[safe]
        a = ((old >> 2) & 63) + 1
        new = _attempt(lambda w: words(a.astype(jnp.uint32) * width + w, records[safe]), chunks, htab, m, offsets, a,
                       (old & 1) == 1, gd, depth)
        return code.at[idx].set(new, mode="drop")

    return jax.lax.while_loop(lambda c: jnp.any((c & 2) == 2), body, code)


# -- the host path: the same function of the word stream, every comparison decided exactly ----------
class _Uniform:
    """U = 0.(prefix of ``nbits`` bits = v)(extension words...) ; ``less(fn)`` decides U < fn() exactly."""

    def __init__(self, v, nbits, ext):
        self.v, self.nbits, self.ext, self.words = v, nbits, ext, []

    def less(self, fn):
        d = 0
        while True:
            num, den_bits = self.v, self.nbits
            for w in self.words[:d]:
                num, den_bits = (num << 64) | w, den_bits + 64
            with _prec(den_bits + 64):
                p_lo, p_hi = _ends(fn())
            if Fraction(num + 1, 1 << den_bits) <= p_lo:  # U < (num+1)/2^den_bits ≤ p
                return True
            if Fraction(num, 1 << den_bits) >= p_hi:  # U ≥ num/2^den_bits ≥ p
                return False
            d += 1
            if d > len(self.words):
                self.words.append(self.ext(len(self.words)))


def _ext_of(word, j):
    return lambda d: word(EXT_BASE + 64 * j + d)


def _exact_try(word, base, t, shift, bits):
    """One discrete Laplace try from words base, base + 1, ...: (z, rejected), every comparison exact."""
    ct, ht, m = dl_tables(int(t), int(shift), bits)
    offsets, widths = chunk_layout(int(t), int(shift), bits)
    law = _Law(t, shift)
    u = word(base)
    neg = u >> 63
    v = u & ((1 << 63) - 1)
    U2 = _Uniform(v, 63, _ext_of(word, base))
    h = 0
    while True:  # H = #{k ≥ 1 : U₂ < R^k}, R^k decreasing
        k = h + 1
        if k <= len(ht) and v != int(ht[k - 1]):
            less = v < int(ht[k - 1])
        else:
            less = U2.less(lambda k=k: law.h_tail(m, k))
        if not less:
            break
        h = k
    g = h << m
    for j in range(len(ct)):
        w = word(base + 1 + j)
        tab = ct[j]
        c = int(np.searchsorted(tab, np.uint64(w), side="left"))  # #{T < u}: certain U ≥ F
        Uc = _Uniform(w, 64, _ext_of(word, base + 1 + j))
        while c < len(tab) and int(tab[c]) == w and not Uc.less(lambda c=c, j=j: law.chunk_cdf(offsets[j], c, widths[j])):
            c += 1
        g += c << offsets[j]
    return (-g if neg else g), bool(neg and g == 0)


def exact_record(word, t, shift, bits=CHUNK_BITS):
    """One discrete Laplace draw from the word stream ``word(j)`` (ints in [0, 2^64)), every comparison
    exact: the device's function of the stream, without its ties/table limit."""
    width = 1 + len(dl_tables(int(t), int(shift), bits)[0])
    a = 0
    while True:
        z, rejected = _exact_try(word, a * width, t, shift, bits)
        if not rejected:
            return z
        a += 1


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


@functools.lru_cache(maxsize=16)
def dg_guide(nvar):
    """(guide int32 [levels·(2^GUIDE_BITS + 1)], depth) for :func:`dg_icdf`'s table: the row of level l holds
    #{k : T[k] < s} at the bucket starts s = 2^63 − 2^(63 − 3l) + i 2^(63 − GUIDE_BITS − 3l) (and the table
    size at the end); ``depth`` search steps cover the widest bucket a word can reach."""
    tab = dg_icdf(int(nvar))
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


def _dg_search(tab, guide, depth, v):
    """(#{k : T[k] ≤ v}, tie): the level of v (its leading ones), its bucket, ``depth`` bisection steps.
    Thresholds are strictly increasing, so v ties the count's last threshold iff some successful step
    loaded a threshold equal to v (the bucket's lower neighbour is below the bucket start ≤ v)."""
    levels, b, lb = _dg_levels(), GUIDE_BITS, DG_LEVEL_BITS
    ones = jax.lax.clz(~v & _U64((1 << 63) - 1)).astype(jnp.int32) - 1  # leading ones of the 63-bit v
    lev = jnp.minimum(ones // lb, levels - 1)
    i = ((v >> (_U64(63 - b) - lev.astype(jnp.uint64) * _U64(lb))) & _U64((1 << b) - 1)).astype(jnp.int32)
    g = lev * ((1 << b) + 1) + i
    # a probe past the bucket reads a threshold > v (see :func:`_count_le_guided`)
    return _probe(tab, v, guide[g], depth)


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
    tab = jnp.asarray(dg_icdf(int(nvar)))
    gd, depth = dg_guide(int(nvar))
    u = words(0, words.records.reshape(-1))
    neg = (u >> _U64(63)) == _U64(1)
    cnt, tie = _dg_search(tab, jnp.asarray(gd), depth, u & _U64((1 << 63) - 1))
    flag = tie | (cnt == tab.shape[0])
    return jnp.where(neg, -cnt, cnt).astype(jnp.int64) * 256 + flag.astype(jnp.int64)


class _UniformBounds(_Uniform):
    """:class:`_Uniform` against a target given as ``bounds(prec) -> (lo, hi)`` Fractions."""

    def less_bounds(self, bounds):
        d = 0
        while True:
            num, den_bits = self.v, self.nbits
            for w in self.words[:d]:
                num, den_bits = (num << 64) | w, den_bits + 64
            p_lo, p_hi = bounds(den_bits + 96)
            if Fraction(num + 1, 1 << den_bits) <= p_lo:
                return True
            if Fraction(num, 1 << den_bits) >= p_hi:
                return False
            d += 1
            if d > len(self.words):
                self.words.append(self.ext(len(self.words)))


def exact_gaussian_record(word, nvar, bits=CHUNK_BITS):
    """The host's exact version of :func:`gaussian_code` for one record's word stream: every comparison of
    V with F(k) decided with further words (``EXT_BASE + d``) against rigorous bounds of F(k)."""
    del bits
    tab = dg_icdf(int(nvar))
    u = word(0)
    neg = u >> 63
    v = u & ((1 << 63) - 1)
    c = int(np.searchsorted(tab, np.uint64(v), side="left"))  # #{T < v}: V ≥ F(k) certain for those
    U = _UniformBounds(v, 63, _ext_of(word, 0))
    while True:
        if c < tab.size and int(tab[c]) != v:
            less = v < int(tab[c])
        else:
            less = U.less_bounds(lambda prec, c=c: _dg_cdf_bounds(nvar, c, prec))
        if less:
            break
        c += 1
    return -c if neg else c
