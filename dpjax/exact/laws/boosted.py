"""The boosted sampler of the exact tier (:mod:`dpjax.exact.sampler`).

PB-DP over the discrete Gaussian or discrete Laplace with an absolute-error region: one word per record against
the exact inverse-CDF table of the boosted |N| (:func:`pb_icdf`), completed by :func:`exact_boosted_record`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import mpmath
import numpy as np

from dpjax.exact import table_samplers
from dpjax.exact.sampler import IntegerSampler, LatticeSampler
from dpjax.exact.table_samplers import _ends, _prec, _symmetric_code, _symmetric_record, level_guide

__all__ = [
    "BoostedTable",
    "BoostedSampler",
    "boosted_spec",
    "boosted_code",
    "exact_boosted_record",
    "pb_guide",
    "pb_icdf",
]

# -- PB-DP over the discrete kernels: one word per record, an exact inverse-CDF table of the boosted |N| ------


def _iv_fraction(x):
    return mpmath.iv.mpf(x.numerator) / x.denominator


def _pb_sums(spec, prec):
    """Rigorous fixed-point bounds of the boosted |N| law's unnormalised cumulative weights.

    ``spec = (squared, scale_num, scale_den, radius, keep_num, keep_log2den)``: the kernel's one-sided masses
    p_j = exp(−j²/(2v)) (``squared``, the discrete Gaussian: v = σ² = scale) or exp(−j/b) (the discrete Laplace:
    b = scale), weighted w_j = 2^E for j ≤ radius (inside the region) and M beyond it, keep = M/2^E (the
    accountant's keep probability 1 − q, a float64, exactly). C(k) = w_0 p_0 + 2 Σ_{1≤j≤k} w_j p_j at scale 2^prec
    (floors for the lower chain, ceilings for the upper; p_{j+1} = p_j a_j with a_{j+1} = a_j b when squared, a
    constant ratio otherwise), until the tail past the last term is below 2^-(prec − 40) of the total; its upper
    bound (Σ_{j>k} p_j ≤ p_k v/k squared, p_k q/(1 − q) ≤ p_k b otherwise) closes the total's. Returns
    (c_lo, c_hi, s_lo, s_hi)."""
    squared, sn, sd, radius, keep_m, keep_e = spec
    scale = Fraction(sn, sd)
    with _prec(prec + 64):
        if squared:
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
        tail = 2 * w_out * (p_hi * bound // max(k, 1) + 2) if squared else 2 * w_out * (p_hi * bound + 2)
        if k >= 1 and (tail << (prec - 40)) < c_lo[-1]:
            return c_lo, c_hi, c_lo[-1], c_hi[-1] + tail
        p_lo, p_hi = (p_lo * a_lo) >> prec, -((-p_hi * a_hi) >> prec)
        if squared:
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
    """The inverse-CDF table of the boosted |N|: T[k] = ⌊2^63 P(|N| ≤ k)⌋ for k = 0 .. K − 1.

    K is the first k with P(|N| > k) < 2^-40 certain (or with P(|N| ≤ k) = 1 exactly: T = 2^63, above every 63-bit
    word); each floor certain (precision doubled where a bound straddles an integer).

    Args:
      spec: the boosted law (:func:`boosted_spec`; its fields in :func:`_pb_sums`).

    Returns:
      uint64 ``[K]``.
    """
    prec = table_samplers.ICDF_PREC
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
            if ((s_hi - c_lo[k]) << table_samplers.ICDF_TAIL) < s_lo and k >= 1:
                break
        if ok:
            return np.array(out, np.uint64)
        prec *= 2


@functools.lru_cache(maxsize=16)
def pb_guide(spec):
    """:func:`~dpjax.exact.table_samplers.level_guide` of :func:`pb_icdf`'s table.

    Args:
      spec: the boosted law (:func:`boosted_spec`).

    Returns:
      ``(guide, depth)``.
    """
    return level_guide(pb_icdf(spec))


def boosted_code(words, n, spec):
    """PB-DP noise over a discrete kernel from one word per record, as packed codes (z = code >> 8, flagged = code & 1).

    The boosted law of N is symmetric (the region |N| ≤ radius and both kernels are), so |N| is one inverse-CDF
    look-up of the exact table :func:`pb_icdf` and the word's top bit the sign — the three-component mixture
    (below / inside / above, weights keep·P_lo, P_in, keep·P_hi) in one comparison chain, with no rejection. Ties
    and words past the table are flagged for :func:`exact_boosted_record`.

    Args:
      words: the records' word source (:class:`~dpjax.exact.bits.ThreefryWords` or alike).
      n: the number of records (unused: the words' records say it).
      spec: the boosted law (:func:`boosted_spec`).

    Returns:
      int64 codes, one per record.
    """
    del n
    return _symmetric_code(words, pb_icdf(spec), *pb_guide(spec))


def exact_boosted_record(word, spec):
    """The host's exact version of :func:`boosted_code` for one record's word stream.

    Args:
      word: ``word(j)``, the record's word j (ints in [0, 2^64)).
      spec: the boosted law (:func:`boosted_spec`).

    Returns:
      The noise, an int.
    """
    return _symmetric_record(word, pb_icdf(spec), lambda prec, k: _pb_cdf_bounds(spec, k, prec))


@dataclasses.dataclass(frozen=True)
class BoostedTable(IntegerSampler):
    """The boosted discrete law ``spec`` (:func:`boosted_spec`), one word per record.

    Attributes:
      spec: the boosted law.
    """

    spec: tuple

    def noise(self, words, values, params):
        return table_samplers.symmetric_noise(words, pb_icdf(self.spec), *pb_guide(self.spec))

    def complete(self, word, value, params):
        return exact_boosted_record(word, self.spec)

    @property
    def prefixable(self):
        return True


def boosted_spec(mech):
    """The static description of a boosted law for :func:`pb_icdf` (exact rationals from float64s).

    The keep probability is the float64 exp(log(1 − q)) of the accountant's formulas.

    Args:
      mech: a :class:`~dpjax.boosting.PrivacyBoosted` over a discrete kernel with an absolute-error region.

    Returns:
      ``(squared, scale_num, scale_den, radius, keep_num, keep_log2den)`` (:func:`_pb_sums`).
    """
    with jax.enable_x64(True):
        keep = float(jnp.exp(jnp.asarray(mech.log1m_boosting_rate, jnp.float64)))
    squared = mech.kernel.exact_lattice().sampler.squared
    s = Fraction(float(np.asarray(getattr(mech.kernel, mech.kernel.scale_name))))
    scale = s * s if squared else s
    k = Fraction(keep)
    radius = math.floor(float(np.asarray(mech.region.tau)))
    return squared, scale.numerator, scale.denominator, radius, k.numerator, k.denominator.bit_length() - 1


class BoostedSampler(LatticeSampler):
    """The boosted law of a PrivacyBoosted mechanism (the lattice's noise), at one scale.

    Its answers are checked by the mechanism (``validate_values``).
    """

    checks_values = True

    def one_scale(self, lat, param, shift):
        return BoostedTable(boosted_spec(lat.noise))
