r"""The machinery the table samplers of :mod:`dpjax.exact.laws` share.

Exact thresholds, guided searches on 32-bit lanes, the host's exact uniform, the record-addressed Threefry word.

**Exact comparisons.** A 64-bit word u is the first 64 bits of a uniform U (further bits: further words). The host
computes, once per law, the integer thresholds T = ⌊2^64 F⌋ (⌊2^63 F⌋ for the inverse CDF of a symmetric law's |Z|)
from rigorous bounds (``mpmath.iv`` intervals or fixed-point chains with floors and ceilings, precision raised until
the floor is certain). Then ``u < T`` proves U < F and ``u > T`` proves U ≥ F (U < (u+1)/2^64 and U ≥ u/2^64): every
device decision is an integer comparison that is *correct*, not approximate. Only ``u == T`` (a tie, probability
≤ 2^-64 per threshold) leaves the comparison open, and so does a word past the table (probability < 2^−40). (The
device compares 32-bit halves — high, then low on equal highs — so that a CPU runs its vector lanes at 32 bits; a
table of at most :data:`EXACT_LOW_ABOVE` thresholds decides on the high halves alone and leaves equal highs open,
probability < 1.2·10^-7.) The device flags those records; the host recomputes each flagged record from its own words
(:class:`_Uniform`), deciding every open comparison with further words of the same record against interval bounds of
F at growing precision (terminates with probability 1). Device and host compute the same function of the record's
word stream, so the output law is exact — no truncation.

A symmetric law (the discrete Gaussian, the boosted laws) is drawn from one word per record: |Z| by inverse CDF of
the word's low 63 bits against its 63-bit table (:func:`symmetric_noise`, through the levelled guide of
:func:`level_guide`), the top bit the sign.
"""

from __future__ import annotations

import contextlib
from fractions import Fraction

import jax
import jax.numpy as jnp
import mpmath
import numpy as np

__all__ = [
    "DG_LEVEL_BITS",
    "EXACT_LOW_ABOVE",
    "EXT_BASE",
    "GUIDE_BITS",
    "ICDF_PREC",
    "ICDF_TAIL",
    "complete_codes",
    "icdf_noise_per_record",
    "level_guide",
    "symmetric_noise",
    "threefry_word",
    "NARROW_MAX_LOG2",
    "NARROW_MIN_LOG2",
    "PLATFORM_MARGIN",
    "TRANSCENDENTALS",
    "TRANSCENDENTAL_ERROR",
    "TRANSCENDENTAL_ERROR32",
    "transcendental_errors",
    "transcendentals_trusted",
]

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


def _scaled_floor(sign, man, exp, scale_bits):
    """⌊2^scale_bits · v⌋ of the binary float v = (−1)^sign · man · 2^exp, by an integer shift (floors)."""
    shift = exp + scale_bits
    v = -man if sign else man
    return v << shift if shift >= 0 else v >> -shift


def _iv_floor(x, scale_bits):
    """⌊2^scale_bits · x⌋ for an mpmath ``iv`` interval x, or None when the interval straddles an integer."""
    a, b = (_scaled_floor(sign, man, exp, scale_bits) for sign, man, exp, _ in x._mpi_)
    return a if a == b else None


@contextlib.contextmanager
def _prec(bits):
    old = mpmath.iv.prec
    mpmath.iv.prec = bits
    try:
        yield
    finally:
        mpmath.iv.prec = old


def _threshold(fn, scale_bits):
    """⌊2^scale_bits · fn()⌋ computed with ``mpmath.iv`` at precision raised until certain."""
    for prec in (256, 512, 1024, 4096, 16384):
        with _prec(prec):
            v = _iv_floor(fn(), scale_bits)
        if v is not None:
            return min(max(v, 0), (1 << scale_bits) - 1)
    raise ValueError("threshold undecidable at 16384 bits")  # F would have to be a dyadic rational


#: guide tables: bucket k of the top GUIDE_BITS bits of a word holds the thresholds [guide[k], guide[k+1])
GUIDE_BITS = 14


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


def _pack(z, flag):
    return z.astype(jnp.int64) * 256 + flag.astype(jnp.int64)


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


def threefry_word(k0, k1, j, i):
    """Word j of record i of :class:`~dpjax.exact.bits.ThreefryWords`, computed in numpy (the host path).

    Args:
      k0: the key pair's first word (int).
      k1: the key pair's second word (int).
      j: the word index.
      i: the record index.

    Returns:
      The word, an int in [0, 2^64).
    """
    from dpjax.random import threefry2x32

    with np.errstate(over="ignore"):
        w0, w1 = threefry2x32(
            np.asarray([k0], np.uint32),
            np.asarray([k1], np.uint32),
            np.asarray([j], np.uint32),
            np.asarray([i], np.uint32),
        )
    return (int(w0[0]) << 32) | int(w1[0])


def complete_codes(code, k0, k1, r0, record_fn):
    """The noise of packed codes, the flagged records recomputed exactly on the host from their Threefry words.

    Args:
      code: the device program's packed codes (``z·256 + flagged``), numpy int64.
      k0: the key pair's first word (int).
      k1: the key pair's second word (int).
      r0: the record index of ``code[0]``.
      record_fn: the host completion, ``record_fn(word_of) -> int`` (``word_of(j)``: the record's word j).

    Returns:
      int64 noise, one per code.
    """
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


#: the inverse-CDF tables (discrete Gaussian, boosted) stop where P(|Z| > K) < 2^-this (a word past it, or equal to a
#: threshold, goes to the host)
ICDF_TAIL = 40
#: fixed-point bits of the host's rigorous pmf sums (raised until every threshold is certain)
ICDF_PREC = 128


#: bits of leading ones per guide level: level l serves the words whose top ``DG_LEVEL_BITS``·l bits are all
#: ones (tail mass below 2^-3l), with buckets 2^-(3l) times finer, so a tail bucket holds as few thresholds as
#: a central one
DG_LEVEL_BITS = 3


def _dg_levels():
    return ICDF_TAIL // DG_LEVEL_BITS + 2


def level_guide(tab):
    """The levelled guide of a table of 63-bit thresholds T[k] = ⌊2^63 F(k)⌋.

    The row of level l holds #{k : T[k] < s} at the bucket starts
    s = 2^63 − 2^(63 − 3l) + i 2^(63 − GUIDE_BITS − 3l) (and the table size at the end).

    Args:
      tab: the sorted thresholds, numpy uint64.

    Returns:
      ``(guide, depth)``: int32 ``[levels·(2^GUIDE_BITS + 1)]``, and the search steps that cover the widest
      bucket a word can reach.
    """
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


def _symmetric_code(words, tab, gd, depth):
    """A symmetric integer law from one word per record: |Z| by the 63-bit inverse-CDF table ``tab`` of |Z|
    (guide ``gd``, ``depth`` steps: :func:`level_guide`), the word's top bit the sign; packed codes, flagged
    on an open comparison or past the table."""
    return _pack(*symmetric_noise(words, tab, gd, depth))


def symmetric_noise(words, tab, gd, depth):
    """A symmetric integer law from one word per record, in 32-bit lanes.

    |Z| by the 63-bit inverse-CDF table ``tab`` of |Z| (guide ``gd``, ``depth`` steps: :func:`level_guide`), the
    word's top bit the sign; flagged on an open comparison or past the table.

    Args:
      words: the records' word source (:class:`~dpjax.exact.bits.ThreefryWords` or alike).
      tab: the thresholds of |Z| (numpy uint64).
      gd: their guide (:func:`level_guide`).
      depth: the search steps (:func:`level_guide`).

    Returns:
      ``(z, flagged)``: int32 noise and the records the host must complete.
    """
    hi, lo = _word_halves(words, 0, words.records.reshape(-1))
    cnt, undecided = _level_search(tab, gd, depth, hi, lo)
    flag = undecided | (cnt == tab.shape[0])
    return jnp.where((hi >> np.uint32(31)) == 1, -cnt, cnt), flag


def icdf_noise_per_record(words, table, offset, length, depth):
    """:func:`symmetric_noise` with a table per record (any number of distinct tables, concatenated in ``table``).

    Record i's |Z| = #{k : T[k] < v} over its table T = table[offset_i : offset_i + length_i] (v its word's low 63
    bits), the word's top bit the sign; flagged on a tie (T[|Z|] = v) or past the table — the same map as the
    one-table search, every record it decides decided alike (the flagged ones completed by the same host
    function, :func:`_icdf_on_host`). 64-bit lanes (x64).

    Args:
      words: the records' word source.
      table: the concatenated thresholds (device uint64).
      offset: each record's table start.
      length: each record's table length.
      depth: the bisection steps, covering the longest table.

    Returns:
      ``(z, flagged)``: int64 noise and the records the host must complete.
    """
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


def _symmetric_record(word, tab, bounds):
    """:func:`_symmetric_code` for one record's word stream on the host, ``bounds(prec, k)`` deciding ties and
    the tail past ``tab`` exactly."""
    u = word(0)
    c = _icdf_on_host(tab, u & ((1 << 63) - 1), _ext_of(word, 0), bounds)
    return -c if u >> 63 else c


# -- the platform's transcendentals: the per-record decisions' error bounds, checked on each backend ---------------
#: assumed bound on the relative error of XLA's float64 ``log``, ``exp`` and ``log1p`` (16 ulp; checked by
#: ``tests/test_exact_table_samplers.py::test_float64_transcendentals_are_within_the_assumed_error``; a backend is
#: trusted only where its sweep stays within PLATFORM_MARGIN of it, 4 ulp). A looser bound flags more records for the
#: host (the same release, slower)
TRANSCENDENTAL_ERROR = 2.0**-48
#: assumed bound on the error of XLA's float32 ``exp`` (relative) and ``log`` (relative to |log r| + 1: near r = 1
#: an absolute error), 64 float32 ulp (checked by ``tests/test_exact_table_samplers.py::
#: test_float32_transcendentals_are_within_the_assumed_error``; a looser bound only flags more records)
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
    return {
        "exp": np.concatenate([dense, np.linspace(-708.0, 0.0, 1024)]),
        "log": np.concatenate([near_one, np.exp2(-np.linspace(0.0, 63.9, 2048)), 1.0 + np.zeros(1)]),
        "log1p": np.concatenate([np.exp2(-np.linspace(0.0, 1000.0, 2048)), np.logspace(-20, -1e-9, 1024)]),
    }


def _sweep32():
    """The float32 inputs: exp on [−2^5, −2^-5] (the −λ of the float32 decision's scales, with the range's ends) and
    log on [2^-48, 2^33] (its r = q 2^32/((1 + q) W), dense near 1)."""
    lam = np.concatenate(
        [
            np.exp2(np.linspace(NARROW_MIN_LOG2, NARROW_MAX_LOG2, 2048)),
            np.exp2(np.array([NARROW_MIN_LOG2, NARROW_MAX_LOG2], np.float64)),
        ]
    )
    r = np.concatenate([np.exp2(np.linspace(-48.0, 33.0, 2048)), 1.0 + np.linspace(-(2.0**-8), 2.0**-8, 1024)])
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
    """The observed errors of the device's transcendental functions (:data:`TRANSCENDENTALS`) on ``backend``.

    Per (function, dtype): each evaluated on the device over a fixed sweep of
    the inputs the per-record decisions give it (:func:`_sweep64`, :func:`_sweep32`) against the host's values
    (:func:`_reference`); the error measure is the one the decisions' bounds assume — relative for exp and log1p,
    relative to |log x| + 1 for log — compared with :data:`TRANSCENDENTAL_ERROR` (float64) and
    :data:`TRANSCENDENTAL_ERROR32` (float32). Computed once per backend (cached). Callable on its own, e.g. on an
    accelerator: ``transcendental_errors("gpu")``.

    Args:
      backend: a JAX backend name ("cpu", "gpu", "tpu"), or None for the default one.

    Returns:
      ``{(name, dtype): error}``, e.g. ``{("exp", "float32"): error, ...}``.
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
    """Whether every transcendental of ``dtype`` on ``backend`` is within :data:`PLATFORM_MARGIN` of its bound.

    The errors are :func:`transcendental_errors`'s; if not, a warning says once per backend and dtype that the
    decisions relying on them are disabled there (their records are decided by the float64 program or on the
    host: the same release, slower).

    Args:
      dtype: "float32" or "float64".
      backend: a JAX backend name, or None for the default one.

    Returns:
      True where the decisions of ``dtype`` may rely on the backend's functions.
    """
    backend = backend or jax.default_backend()
    bound = TRANSCENDENTAL_ERROR if dtype == "float64" else TRANSCENDENTAL_ERROR32
    bad = {
        k: e for k, e in transcendental_errors(backend).items() if k[1] == dtype and not e <= PLATFORM_MARGIN * bound
    }
    if bad and (backend, dtype) not in _warned:
        import warnings

        _warned.add((backend, dtype))
        route = "float64 program" if dtype == "float32" else "host"
        warnings.warn(
            f"dpjax exact tier: on backend {backend!r} XLA's {dtype} "
            + ", ".join(f"{name} errs up to {e:.3g}" for (name, _), e in sorted(bad.items()))
            + f", above {PLATFORM_MARGIN:g} of the assumed bound {bound:.3g}: the per-record decisions that "
            f"rely on it are disabled on this backend (the {route} decides those records: the same release, "
            "slower)",
            RuntimeWarning,
            stacklevel=3,
        )
    return not bad
