r"""The discrete Gaussian samplers of the exact tier (:mod:`dpjax.exact.sampler`).

* :class:`DiscreteGaussianTable` — one lattice variance n: one word per record against the exact inverse-CDF table
  of |Z| (:func:`dg_icdf`), completed by :func:`exact_gaussian_record`;
* :class:`DiscreteGaussianTables` — per-record variances: each record searches its own variance's table in the
  concatenated tables (:func:`~dpjax.exact.table_samplers.icdf_noise_per_record`);
* :class:`DiscreteGaussianSampler` — the law an :class:`~dpjax.exact.ExactLattice` holds.

**The table sampler** (:func:`gaussian_code`): one word per record and no rejection. The law pmf ∝ exp(−z²/(2n))
of CKS's discrete Gaussian is drawn by inverse CDF of |Z| on the word's low 63 bits against T[k] = ⌊2^63 P(|Z| ≤ k)⌋
(:func:`dg_icdf`: rigorous fixed-point bounds of the pmf sums, every floor certain), the top bit the sign
(P(Z = ±k) = P(|Z| = k)/2 for k > 0). A guide indexed by the word's leading ones (the tail level) and the next
``GUIDE_BITS`` bits leaves two bisection steps. Ties and words past the table (P(|Z| > K) < 2^-40) go to the host,
whose :func:`exact_gaussian_record` decides them with further words against bounds of P(|Z| ≤ k) at growing
precision. (CKS Algorithm 3 — a discrete Laplace proposal and an acceptance word — needs ≈ 1.3 tries of four words
per record.)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction

import mpmath
import numpy as np

from dpjax.exact import table_samplers
from dpjax.exact.sampler import IntegerSampler, LatticeSampler
from dpjax.exact.table_samplers import _ends, _prec, _symmetric_code, _symmetric_record, _threefry_complete, level_guide

__all__ = [
    "DiscreteGaussianTable",
    "DiscreteGaussianTables",
    "DiscreteGaussianSampler",
    "DG_TABLES_MAX",
    "dg_guide",
    "dg_icdf",
    "exact_gaussian_record",
    "gaussian_code",
    "threefry_gaussian",
]


def threefry_gaussian(words, n, nvar, bits=None):
    """:func:`gaussian_code` on :class:`~dpjax.exact.bits.ThreefryWords`, the flagged records completed on the host.

    Completed like :func:`~dpjax.exact.laws.discrete_laplace.threefry_laplace` (jit-able).

    Args:
      words: the records' :class:`~dpjax.exact.bits.ThreefryWords`.
      n: the number of records.
      nvar: the integer variance parameter n of pmf ∝ exp(−z²/(2n)).
      bits: unused (the discrete Laplace's signature).

    Returns:
      int64 noise ``[n]``.
    """
    return _threefry_complete(
        words, gaussian_code(words, n, nvar, bits), lambda w: exact_gaussian_record(w, nvar, bits)
    )


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
    """The inverse-CDF table of |Z|: T[k] = ⌊2^63 P(|Z| ≤ k)⌋ for k = 0 .. K − 1.

    Z the discrete Gaussian with pmf ∝ exp(−z²/(2n)), n = nvar, K the first k with P(|Z| > k) < 2^-ICDF_TAIL; each
    floor certain (bounds of :func:`_dg_sums`, precision doubled where an interval straddles an integer).

    Args:
      nvar: the integer variance parameter n.

    Returns:
      uint64 ``[K]``.
    """
    n = int(nvar)
    prec = table_samplers.ICDF_PREC
    while True:
        c_lo, c_hi, s_lo, s_hi = _dg_sums_cached(n, prec)
        out, ok = [], True
        for k in range(len(c_lo)):
            a, b = (c_lo[k] << 63) // s_hi, min((c_hi[k] << 63) // s_lo, (1 << 63) - 1)
            if a != b:
                ok = False
                break
            out.append(a)
            if (((s_hi - c_lo[k]) << table_samplers.ICDF_TAIL) < s_lo) and k >= 1:  # P(|Z| > k) < 2^-tail, certain
                break
        if ok:
            return np.array(out, np.uint64)
        prec *= 2


@functools.lru_cache(maxsize=16)
def dg_guide(nvar):
    """:func:`~dpjax.exact.table_samplers.level_guide` of :func:`dg_icdf`'s table.

    Args:
      nvar: the integer variance parameter n.

    Returns:
      ``(guide, depth)``.
    """
    return level_guide(dg_icdf(int(nvar)))


def gaussian_code(words, n, nvar, bits=None):
    """Discrete Gaussian (pmf ∝ exp(−z²/(2·nvar))) from one word per record, as packed codes.

    Packed like :func:`~dpjax.exact.laws.discrete_laplace.laplace_code` (z = code >> 8, flagged = code & 1).

    Word 0 of a record: top bit s, low 63 bits v (the start of a uniform V ∈ [0, 1)). |Z| = min{k : V <
    F(k)}, F(k) = P(|Z| ≤ k), decided by v against T[k] = ⌊2^63 F(k)⌋ (:func:`dg_icdf`: v < T proves V < F,
    v > T proves V ≥ F); Z = −|Z| when s = 1. P(Z = ±k) = P(|Z| = k)/2 for k > 0: the exact law, with no
    rejection and no loop. Open cases (v equal to a threshold, or past the table, probability < 2^-40) are
    flagged for :func:`exact_gaussian_record`. A levelled guide (:func:`dg_guide`) leaves a few bisection
    steps (two at the release's lattice variances 2^22 … 2^24).

    Args:
      words: the records' word source (:class:`~dpjax.exact.bits.ThreefryWords` or alike).
      n: the number of records (unused: the words' records say it).
      nvar: the integer variance parameter n.
      bits: unused (the discrete Laplace's signature).

    Returns:
      int64 codes, one per record.
    """
    del bits
    return _symmetric_code(words, dg_icdf(int(nvar)), *dg_guide(int(nvar)))


def exact_gaussian_record(word, nvar, bits=None):
    """The host's exact version of :func:`gaussian_code` for one record's word stream.

    Every comparison of V with F(k) is decided with further words (``EXT_BASE + d``) against rigorous bounds of
    F(k).

    Args:
      word: ``word(j)``, the record's word j (ints in [0, 2^64)).
      nvar: the integer variance parameter n.
      bits: unused (the discrete Laplace's signature).

    Returns:
      The noise, an int.
    """
    del bits
    return _symmetric_record(word, dg_icdf(int(nvar)), lambda prec, k: _dg_cdf_bounds(nvar, k, prec))


#: a discrete Gaussian release with per-record σ builds one exact inverse-CDF table per distinct lattice variance
#: (7.4σ words each at the Gaussian lattice's σ ≤ 2^12): at most this many distinct values
DG_TABLES_MAX = 1024


@dataclasses.dataclass(frozen=True)
class DiscreteGaussianTable(IntegerSampler):
    """The discrete Gaussian of one variance parameter ``nvar`` (pmf ∝ exp(−z²/(2·nvar))), one word per record.

    Attributes:
      nvar: the integer variance parameter n.
    """

    nvar: int

    def noise(self, words, values, params):
        return table_samplers.symmetric_noise(words, dg_icdf(self.nvar), *dg_guide(self.nvar))

    def complete(self, word, value, params):
        return exact_gaussian_record(word, self.nvar)

    @property
    def prefixable(self):
        return True


@dataclasses.dataclass(frozen=True)
class DiscreteGaussianTables(IntegerSampler):
    """The discrete Gaussian of per-record variances, each record searching its own exact table.

    The params are (offset, length, table): record i's table is ``table[offset_i : offset_i + length_i]``.

    Attributes:
      depth: the bisection steps, covering the longest table.
      nvar: the records' variances on the host (for the flagged records).
    """

    depth: int
    nvar: np.ndarray = dataclasses.field(default=None, compare=False)

    def noise(self, words, values, params):
        offset, length, table = params
        return table_samplers.icdf_noise_per_record(words, table, offset, length, self.depth)

    def complete(self, word, value, params):
        return exact_gaussian_record(word, int(params[0]))

    def at(self, params, g, idx, n):
        return (self.nvar[idx],), np.broadcast_to(g, (n,))[idx]


class DiscreteGaussianSampler(LatticeSampler):
    """The discrete Gaussian of variance ``param`` on the lattice (the Gaussian and discrete Gaussian lattices)."""

    for_tables = True
    #: the table of the boosted |N| has about 7.4σ entries, built on the host from about 12σ terms
    boost_max_scale = 2.0**17
    squared = True

    def noise_scale(self, param, shift):
        return np.sqrt(np.asarray(param, np.float64))

    def one_scale(self, lat, param, shift):
        return DiscreteGaussianTable(int(param))

    def per_record(self, lat, param, shift, g, one_scale):
        """Each record's |Z| by the exact table of its own variance (the one-scale release's), searched per record.

        The tables are concatenated: the one-scale map, whatever the other records' scales.

        Args:
          lat: the :class:`~dpjax.exact.ExactLattice`.
          param: the lattice variances (numpy, the records' shape).
          shift: unused (0).
          g: the granularities (numpy, the records' shape).
          one_scale: unused (every layout searches per record).

        Returns:
          ``(sampler, (offsets, lengths, table), g)``.

        Raises:
          ValueError: more than :data:`DG_TABLES_MAX` distinct variances.
        """
        nvar, g = np.ascontiguousarray(param).reshape(-1), np.ascontiguousarray(g).reshape(-1)
        distinct, inverse = np.unique(nvar, return_inverse=True)
        if distinct.size > DG_TABLES_MAX:
            raise ValueError(
                f"sigma: numerics='exact' runs at most {DG_TABLES_MAX} distinct per-record sigma (one "
                f"exact table each), got {distinct.size}; round sigma to fewer values or release them in "
                "batches"
            )
        tables = [dg_icdf(int(v)) for v in distinct]
        sizes = np.asarray([tab.size for tab in tables], np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        sampler = DiscreteGaussianTables(int(sizes.max()).bit_length(), nvar)
        return sampler, (offsets[inverse], sizes[inverse], np.concatenate(tables)), g
