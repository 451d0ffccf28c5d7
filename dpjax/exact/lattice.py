r"""Exact releases on a data-independent lattice (the float attack of Mironov 2012 closed).

``dpjax.release(key, values, mech, numerics="exact")`` runs ``mech.exact_lattice()``, the
*discrete mechanism actually run*:

1. the answer x is rounded to the lattice gℤ, g a power of two chosen from the scale alone
   (never from the data): k = ⌊x/g + ½⌋, computed exactly (x/g is a power-of-two scaling);
2. integer noise N is drawn by an integer-only sampler (:mod:`dpjax.exact.table_samplers`) from raw
   words (Threefry from the key, or ``os.urandom`` through :class:`~dpjax.exact.bits.HostBits`);
3. the output is g·(k + N), an exact point of gℤ (converted once to the output float dtype, a
   post-processing of k + N; in float32 large lattice indices round to coarser points of gℤ).

The set of possible outputs is gℤ whatever the data, so no output can rule out an input (the
attack on float samplers: Mironov, "On Significance of the Least Significant Bits for Differential Privacy", ACM CCS 2012). Rounding moves two
answers at distance ≤ Δ to lattice indices at distance ≤ ⌈Δ/g⌉ (≤ Δ/g + 1, i.e. the
sensitivity is charged as Δ + g, exactly Δ/g when g divides Δ), and the integer noise is
run at a scale rounded *up* to integers. :class:`ExactLattice` reports both: its accounting
view is the integer kernel (``noise``) at the lattice sensitivity ⌈Δ/g⌉, so
``accounting.pld(mech.exact_lattice(), sensitivity=Δ)`` is the privacy of what ran.

Granularities: Laplace(b): g = 2^(⌊log2 b⌋ − 20), noise DiscreteLaplace(t), t = ⌈b/g⌉ ∈ [2^20, 2^21];
Gaussian(σ): g = 2^(⌈log2 σ⌉ − 12), noise DiscreteGaussian(√n), n = ⌈(σ/g)²⌉ ≤ 2^24 (the
lattice sensitivity costs ⌈Δ/g⌉/(Δ/g) − 1 ≤ g/Δ ≈ 2^-11.5 σ/Δ relative, e.g. ≤ 0.3 % of the
mechanism's sensitivity at σ ≤ 10 Δ); the discrete kernels keep g = 1 (g = 2^j for σ > 2^12)
and run their scale rounded up to t/2^p with t < 2^32 (discrete Laplace) or σ² rounded up to an
integer (discrete Gaussian); randomized response keeps with probability T/2^64 (T an integer
≤ 2^64 e^ε/(e^ε + k − 1)) and reports the ε those thresholds achieve, rounded up.
"""

from __future__ import annotations

import decimal
import functools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.exact import table_samplers
from dpjax.exact.bits import HostBits, ThreefryWords, key_pair
from dpjax.mechanism import LANE_BLOCK, Mechanism, as_records, check_batch_shape, default_float
from dpjax.pytree import pytree_dataclass, static_field
from dpjax.random import MAX_RECORDS, check_key
from dpjax._draw import SHARD_MIN_RECORDS, _shard
from dpjax.validation import check_finite_values, check_int, is_traced

__all__ = ["ExactLattice", "laplace_lattice", "discrete_laplace_lattice", "gaussian_lattice", "rr_lattice",
           "boosted_lattice", "release_exact", "check_index_range", "LAPLACE_BITS", "GAUSSIAN_BITS"]

#: the lattice scale of the Laplace noise is in [2^LAPLACE_BITS, 2^(LAPLACE_BITS+1)]
LAPLACE_BITS = 20
#: the lattice σ of the Gaussian noise is in (2^(GAUSSIAN_BITS−1), 2^GAUSSIAN_BITS] (σ² ≤ 2^24)
GAUSSIAN_BITS = 12
#: lattice indices |x/g| must stay below this (int64 arithmetic with room for the noise)
_INDEX_MAX = 2.0**62



def _concrete(name, x):
    if is_traced(x):
        raise ValueError(f"numerics='exact' needs concrete parameters: {name} is traced (build the mechanism outside jit)")
    return np.asarray(x, np.float64)


@pytree_dataclass
class ExactLattice(Mechanism):
    """The discrete mechanism an exact release runs: integer noise ``noise`` on the lattice gℤ.

    Releases (``dpjax.release(key, values, lat)``, ``sample``) take and return real values: the
    answer rounded to gℤ plus g × integer noise. The output law and every accounting hook
    (``log_prob``, ``cdf``, ``hockey_stick``, ``pure_epsilon``, …) are those of ``noise`` in
    *lattice units* (outputs y/g, answers ⌊x/g + ½⌋), and ``neighbour_pairs(Δ)`` turns the
    sensitivity Δ of the real answers into the lattice sensitivity ⌈Δ/g⌉: the accountant
    reports the privacy of the mechanism actually run, rounding included.
    Built by ``mech.exact_lattice()``; not meant to be constructed by hand.
    """

    noise: Mechanism
    granularity: jax.Array
    param: jax.Array
    shift: jax.Array
    sampler: str = static_field(default="dl")

    discrete = True

    @property
    def symmetric_pairs(self):
        return self.noise.symmetric_pairs

    # the optional hooks are the noise's (None where the noise has none), in lattice units
    @property
    def hockey_stick(self):
        return self.noise.hockey_stick

    @property
    def renyi_divergence(self):
        return self.noise.renyi_divergence

    @property
    def output_breakpoints(self):
        return self.noise.output_breakpoints

    @property
    def renyi_divergence_bound(self):
        return self.noise.renyi_divergence_bound

    @property
    def pure_epsilon(self):
        pure = self.noise.pure_epsilon
        return None if pure is None else lambda sensitivity=1.0: pure(self.lattice_sensitivity(sensitivity))

    def _sample(self, uniform, value):
        raise TypeError("an exact lattice draws integer words (sample_records), never float uniforms")

    def lattice_sensitivity(self, sensitivity):
        """⌈Δ/g⌉ (exact: g is a power of two); the sensitivity itself for randomized response."""
        if self.sampler == "rr":
            return sensitivity
        return jnp.ceil(jnp.asarray(sensitivity) / jnp.asarray(self.granularity))

    def neighbour_pairs(self, sensitivity=1.0):
        return self.noise.neighbour_pairs(self.lattice_sensitivity(sensitivity))

    def log_prob(self, y, value):
        return self.noise.log_prob(y, value)

    def cdf(self, y, value):
        return self.noise.cdf(y, value)

    def sf(self, y, value):
        return self.noise.sf(y, value)

    def privacy_loss(self, y, value, neighbour_value):
        return self.noise.privacy_loss(y, value, neighbour_value)

    def validate_values(self, values):
        if self.sampler in ("rr", "pb"):
            self.noise.validate_values(values)

    def sample_records(self, key, value, start=0):
        return release_exact(key, value, self, start=start, flat=True)

    def exact_lattice(self):
        return self


def check_index_range(lat, values) -> None:
    """Refuse values whose lattice index |value| / granularity reaches 2**62 (the int64 arithmetic of an
    exact release) before anything is drawn: the multi-process release validates each shard with it, so
    that the processes agree on the refusal (:mod:`dpjax.multihost`)."""
    values = np.asarray(values)
    g = np.asarray(lat.granularity, np.float64)
    if lat.sampler == "rr" or not values.size or (np.issubdtype(values.dtype, np.integer) and np.all(g == 1.0)):
        return
    if np.max(np.abs(values.astype(np.float64)) / g) >= _INDEX_MAX:
        raise ValueError(f"values: |value| / granularity must be below 2**62 for numerics='exact' "
                         f"(granularity {g.min()}), got {np.abs(values).max()}")


def _make(noise, granularity, param, shift, sampler):
    return ExactLattice(noise=noise, granularity=np.asarray(granularity, np.float64), param=np.asarray(param, np.uint64),
               shift=np.asarray(shift, np.uint64), sampler=sampler)


def _elementwise(fn, x):
    """The results of ``fn`` (a tuple of numbers) for every element of ``x``, as a tuple of arrays of x's shape:
    ``fn`` (exact arithmetic in Python) runs once per *distinct* value of x, so per-record
    parameters cost their number of distinct values, not of records."""
    x = np.asarray(x)
    flat = x.reshape(-1)
    if np.unique(flat[:: max(1, flat.size >> 12)]).size <= 64:  # few distinct values (on a strided sample): a sort
        distinct = np.unique(flat)  # and a search in them, cheaper than the argsort of return_inverse
        inverse = np.searchsorted(distinct, flat)
    else:  # (a search in many values is the slower)
        distinct, inverse = np.unique(flat, return_inverse=True)
    out = [fn(v) for v in distinct]
    return tuple(np.asarray([o[j] for o in out])[inverse].reshape(x.shape) for j in range(len(out[0]))) if out else ()


#: float64's smallest power of two, 2^-1074 (a subnormal)
_MIN_EXPONENT = -1074


def _check_granularity(name, scale, exponent):
    """Refuse a scale whose lattice granularity 2^exponent is below float64's smallest power of two."""
    if np.any(exponent < _MIN_EXPONENT):
        low = float(np.ldexp(1.0, int(_MIN_EXPONENT - np.min(exponent - np.frexp(scale)[1]))))
        raise ValueError(f"{name} must be at least {low:.3g} for numerics='exact' (its lattice granularity would "
                         f"underflow float64), got {np.min(scale)!r}")


def laplace_lattice(scale, lattice_kernel):
    """Laplace(b) → discrete Laplace ``lattice_kernel(scale=t)`` on gℤ, g = 2^(⌊log2 b⌋ − 20), t = ⌈b/g⌉."""
    b = _concrete("scale", scale)
    _, e = np.frexp(b)  # b = m 2^e, m in [1/2, 1)
    _check_granularity("scale", b, e - 1 - LAPLACE_BITS)
    g = np.ldexp(1.0, e - 1 - LAPLACE_BITS)
    t = np.ceil(b / g)
    return _make(lattice_kernel(scale=t), g, t, 0, "dl")


def discrete_laplace_lattice(scale, kernel_cls):
    """Discrete Laplace(b) on the integers → scale rounded up to t/2^p (t < 2^32, 2^p ≤ 2^20)."""
    b = _concrete("scale", scale)
    if np.any(b >= 2.0**31):
        raise ValueError(f"scale must be below 2**31 for numerics='exact', got {b.max()}")
    _, e = np.frexp(b)
    p = np.clip(LAPLACE_BITS + 1 - e, 0, LAPLACE_BITS + 1 + 1074).astype(np.int64)
    if np.any(p > 60):
        raise ValueError(f"scale must be at least 2**-40 for numerics='exact', got {b.min()}")
    t = np.ceil(np.ldexp(b, p))
    return _make(kernel_cls(scale=np.ldexp(t, -p)), np.ones_like(b), t, p, "dl")


def _sigma_below(n):
    """Largest float64 σ with σ² ≤ n (the accounting σ is never above the σ that ran)."""
    s = math.sqrt(n)
    while Fraction(s) ** 2 > n:
        s = math.nextafter(s, 0.0)
    return s


def gaussian_lattice(sigma, lattice_kernel, integer=False):
    """Gaussian(σ) → discrete Gaussian on gℤ with g = 2^(⌈log2 σ⌉ − 12) (at least 1 for an integer
    kernel) and lattice variance n = ⌈(σ/g)²⌉ ≤ 2^24; accounted at σ' = the largest float with σ'² ≤ n."""
    s = _concrete("sigma", sigma)
    _, e = np.frexp(s)  # s = m 2^e: ⌈log2 s⌉ = e, or e − 1 when s is a power of two
    e = np.where(np.ldexp(0.5, e) == s, e - 1, e)
    shift = e - GAUSSIAN_BITS
    if integer:
        shift = np.maximum(shift, 0)
    _check_granularity("sigma", s, shift)
    g = np.ldexp(1.0, shift)
    n, sig = _elementwise(lambda x: (lambda q: (q, _sigma_below(q)))(math.ceil(Fraction(float(x)) ** 2)), s / g)
    return _make(lattice_kernel(sigma=np.asarray(sig, np.float64)), g, n, 0, "dg")


#: decimal digits of the randomized response's thresholds and achieved ε (the achieved ε is 0 or at least about
#: 2^-64/k: its relative error stays below 10^-60, far inside the float64 ulp the report is rounded up by)
_RR_DIGITS = 80


@functools.lru_cache(maxsize=4096)
def _rr_keep(x, k):
    """(T, ε achieved) of randomized response over ``k`` categories at ε = ``x`` (a float): the integer keep
    threshold T = ⌊2^64 e^ε/(e^ε + k − 1)⌋ − 1, at least ⌈2^64/k⌉ (keep at least as likely as each other
    category: the law the accountant's randomized response has) and at most 2^64 − 1, in
    :data:`_RR_DIGITS`-digit decimal arithmetic, and the ε its law has, ln(T (k − 1)/(2^64 − T)) (≥ 0) at the
    same precision, rounded up to a float64 (the smallest positive float where it is 0). Cached: privacy
    tiers repeat their few values release after release."""
    ctx = decimal.Context(prec=_RR_DIGITS)
    ex = ctx.exp(decimal.Decimal(x))
    t = int(ctx.divide(ex * (2**64), ex + (k - 1)).to_integral_value(rounding=decimal.ROUND_FLOOR)) - 1
    t = max(-(-(2**64) // k), min(t, 2**64 - 1))
    kept, other = t * (k - 1), 2**64 - t  # the law's ratio kept/other ≥ 1 (T ≥ 2^64/k)
    achieved = float(ctx.ln(ctx.add(1, ctx.divide(kept - other, other)))) if kept > other else 0.0
    return t, math.nextafter(achieved, math.inf)


def rr_lattice(mech):
    """k-ary randomized response with keep probability T/2^64 for the integer T ≤ 2^64 e^ε/(e^ε + k − 1),
    accounted at the ε it achieves, ln(T (k − 1)/(2^64 − T)), rounded up."""
    eps = _concrete("epsilon", mech.epsilon)
    k = mech.num_categories
    t, achieved = _elementwise(lambda x: (lambda r: (np.uint64(r[0]), r[1]))(_rr_keep(float(x), k)), eps)
    from dpjax.pytree import replace

    noise = replace(mech, epsilon=np.asarray(achieved, np.float64))
    return _make(noise, np.ones_like(eps), t, 0, "rr")


def _integer_kernel_sampler(kernel):
    """"dl" or "dg": the exact sampler of an integer-noise kernel (discrete Laplace or discrete Gaussian, as
    its own :meth:`exact_lattice` declares), or None for any other kernel. Asked of the kernel, not of its
    class (the kernels import this module)."""
    if not kernel.discrete:
        return None
    try:
        kind = kernel.exact_lattice().sampler
    except ValueError:  # no exact sampler: the default hook refuses
        return None
    return kind if kind in ("dl", "dg") else None


def boosted_lattice(mech):
    """PB-DP over the discrete Gaussian or discrete Laplace with an absolute-error region, run exactly: the
    boosted law itself (the kernel at its own σ or b, no rounding: the table of :func:`table_samplers.pb_icdf` is built
    from the float64 parameters as exact rationals) with the keep probability 1 − q that the accountant
    computes (the float64 exp(log(1 − q)), exactly). The mechanism accounted is ``mech`` itself."""
    from dpjax.regions import AbsoluteError

    name = type(mech).__name__
    kernel = mech.kernel
    kind = _integer_kernel_sampler(kernel)
    if kind is None:
        raise ValueError(f"numerics='exact': {name} has an exact sampler only over DiscreteGaussian or "
                         f"DiscreteLaplace kernels, got {type(kernel).__name__}")
    if not isinstance(mech.region, AbsoluteError):
        raise ValueError(f"numerics='exact': {name} has an exact sampler only with an AbsoluteError region (its "
                         f"boosted noise law does not depend on the answer), got {type(mech.region).__name__}")
    scale = _concrete(kernel.scale_name, getattr(kernel, kernel.scale_name))
    for pname, x in ((kernel.scale_name, scale), ("tau", _concrete("tau", mech.region.tau)),
                     ("rho", _concrete("rho", mech.rho))):
        if np.size(x) != 1:
            raise ValueError(f"numerics='exact': {name} needs one {pname} for all records, got shape {np.shape(x)}")
    top = table_samplers.PB_MAX_SCALE[kind]
    if float(scale) > top:
        raise ValueError(f"{kernel.scale_name} must be at most {top:g} for an exact {name} release, got {float(scale)!r}")
    with jax.enable_x64(True):
        noise = jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), mech)
    return _make(noise, 1.0, 0, 0, "pb")


def _pb_spec(mech):
    """The static description of a boosted law for :func:`table_samplers.pb_icdf` (exact rationals from float64s): the
    keep probability is the float64 exp(log(1 − q)) of the accountant's formulas."""
    with jax.enable_x64(True):
        keep = float(jnp.exp(jnp.asarray(mech.log1m_boosting_rate, jnp.float64)))
    kind = _integer_kernel_sampler(mech.kernel)
    s = Fraction(float(np.asarray(getattr(mech.kernel, mech.kernel.scale_name))))
    scale = s * s if kind == "dg" else s
    k = Fraction(keep)
    radius = math.floor(float(np.asarray(mech.region.tau)))
    return kind, scale.numerator, scale.denominator, radius, k.numerator, k.denominator.bit_length() - 1


# -- the release ------------------------------------------------------------------------------
def nearest_index(x):
    """⌊x + ½⌋ of numpy or jax float arrays, exactly (the lattice index of x = v/g; g a power of two makes
    x exact). Float result: the caller casts it to its integer width."""
    f = np.floor(x) if isinstance(x, np.ndarray) else jnp.floor(x)
    return f + (x - f >= 0.5)


def _lattice_coordinate(v, g, inv_g=None):
    """v/g in float64 (exact: g is a power of two), or v·inv_g with ``inv_g`` = 1/g (a normal power of two: the same
    value; a product fuses into its consumers where a per-record division would be computed apart)."""
    return v.astype(jnp.float64) / g if inv_g is None else v.astype(jnp.float64) * inv_g


def _reciprocal_pow2(g):
    """1/g of float64 powers of two g whose reciprocals are normal, exactly, from the exponent bits."""
    return jax.lax.bitcast_convert_type(np.uint64(2046 << 52) - jax.lax.bitcast_convert_type(g, jnp.uint64), jnp.float64)


def _lattice_value(v, noise, g, unit, out_dtype, inv_g=None):
    """g·(⌊v/g + ½⌋ + noise) in ``out_dtype`` (the index is exact: g is a power of two). ``noise``: integers, or
    integer-valued floats (|noise| < 2^53): the float64 sum of the exact index and noise rounds once, as the int64
    sum's conversion does — the same value, without 64-bit integers."""
    if unit:  # integers on ℤ: no rounding, no float
        return (v.astype(jnp.int64) + noise.astype(jnp.int64)).astype(out_dtype)
    if jnp.issubdtype(noise.dtype, jnp.floating):
        return ((nearest_index(_lattice_coordinate(v, g, inv_g)) + noise) * g).astype(out_dtype)
    index = nearest_index(_lattice_coordinate(v, g, inv_g)).astype(jnp.int64)
    return ((index + noise).astype(jnp.float64) * g).astype(out_dtype)


def _sentinel(dtype):
    """The output of a record that awaits the host: NaN (never a release's output), or the integer minimum
    (a release may output it too: such a record is recomputed, to the same value)."""
    return np.nan if jnp.issubdtype(dtype, jnp.floating) else np.iinfo(dtype).min


class _WordTable:
    """Word j of every record from a table ``W[j, record]`` made on the host (:class:`HostBits` releases): the
    fixed-trip samplers ask for the whole batch's word j at once."""

    def __init__(self, table):
        self.table = table
        self.records = jnp.arange(table.shape[1], dtype=jnp.uint32)

    def __call__(self, j, records=None):
        return self.table[j]


def _words_per_record(kind, t, shift):
    """How many words the fixed-trip sampler of ``kind`` reads per record (before any host completion)."""
    if kind == "dl":
        return 1 + len(table_samplers.chunk_layout(t, shift)[0])
    return 2 if kind == "rr" else 1  # (dg, pb, dlr, dgr, lap, dlap: one word)


def _table_noise(words, kind, t, shift):
    """(z, flagged) of the fixed-trip table sampler of ``kind`` ("dl": discrete Laplace t/2^shift, "dg": discrete
    Gaussian of variance t, "pb": boosted, t its spec) on ``words``."""
    return {"dl": lambda: table_samplers.laplace_noise(words, t, shift),
            "dg": lambda: table_samplers.symmetric_noise(words, table_samplers.dg_icdf(t), *table_samplers.dg_guide(t)),
            "pb": lambda: table_samplers.symmetric_noise(words, table_samplers.pb_icdf(t), *table_samplers.pb_guide(t))}[kind]()


# -- os.urandom words by 16-bit prefixes -------------------------------------------------------------------------
#: bits of a word read for every record of a HostBits release (its top bits: a prefix table decides most records)
PREFIX_BITS = 16
#: the prefix table is used where it decides at least this share of the records (else every record reads whole words)
PREFIX_MIN_DECIDED = 0.97
#: releases of fewer records read whole words (below it the programs of the undecided records cost about what the
#: 6 bytes a record save)
PREFIX_MIN_RECORDS = 1 << 16
#: the prefix table's entry for a prefix that does not decide the noise
_UNDECIDED = np.iinfo(np.int32).min


@functools.lru_cache(maxsize=32)
def _prefix_table(kind, t, shift):
    """The noise of every 16-bit word prefix of the one-word table samplers, or None where no such table serves.

    For a fixed top bit (the sign) the samplers map the word's low 63 bits v to |Z| = #{k : T[k] ≤ v} (a count of
    thresholds below v, monotone in v), so a prefix p, which holds the words [p 2^48, p 2^48 + 2^48 − 1], decides
    Z when the sampler gives the same unflagged noise at both ends: no threshold lies between them, and every word
    of the prefix, whatever its 48 further bits, draws that noise (the sampler flags a word only at a threshold's
    value, an equal high half, or past the table, all of them between the ends). Entry p is that noise, or
    ``_UNDECIDED`` (int32 [2^16]). None for the discrete Laplace's several-word scales (τ > 2^10) and where fewer than
    :data:`PREFIX_MIN_DECIDED` of the prefixes decide (large scales: the thresholds spread over most prefixes)."""
    if kind not in ("dl", "dg", "pb") or (kind == "dl" and _words_per_record(kind, t, shift) > 1):
        return None
    low = np.arange(1 << PREFIX_BITS, dtype=np.uint64) << np.uint64(64 - PREFIX_BITS)
    ends = np.stack([low, low | np.uint64((1 << (64 - PREFIX_BITS)) - 1)])
    with jax.enable_x64(True):
        z, flag = (np.asarray(a).reshape(2, -1) for a in _noise_of_words(ends.reshape(1, -1), kind=kind, t=t, shift=shift))
    decided = (z[0] == z[1]) & ~flag[0] & ~flag[1]
    if decided.mean() < PREFIX_MIN_DECIDED:
        return None
    return np.where(decided, z[0], _UNDECIDED).astype(np.int32)


@functools.partial(jax.jit, static_argnames=("kind", "t", "shift"))
def _noise_of_words(table, *, kind, t, shift):
    """:func:`_table_noise` of the words ``table`` (uint64 [1, n]), in one compiled program (eager, its few dozen
    operations would compile one by one)."""
    return _table_noise(_WordTable(table), kind, t, shift)


@functools.partial(jax.jit, static_argnames=("kind", "g", "unit", "out_dtype"))
def _prefix_lattice(table, prefixes, values, *, kind, g, unit, out_dtype):
    """The release of records whose words begin with ``prefixes`` (uint16): the noise looked up in the prefix table
    (:func:`_prefix_table`), the sentinel where the prefix does not decide it."""
    z = table.at[prefixes].get(mode="promise_in_bounds")  # (a uint16 index is in bounds: no clamp)
    return _finish_noise(z, z == _UNDECIDED, values, kind, g, unit, out_dtype)


def _prefix_release(bits, table, values, kind, t, shift, g, unit, out_dtype):
    """A one-scale release from ``bits`` (:class:`HostBits`) reading two bytes per record: (out, word_of).

    Each record reads its word's top 16 bits (:meth:`HostBits.prefixes`); the prefix table gives its noise, except
    for the records whose prefix does not decide it (about 0.1 % at scale 3), which read 48 more bits (their word is
    ``prefix << 48 | fresh``: the same uniform word) and run the one-word sampler on the device, compacted to a
    power of two. Every record's noise is the sampler's on a uniform 64-bit word: the law of the whole-word
    release. The records that sampler flags keep the sentinel for the host completion, whose ``word_of(i)`` gives
    the completed word 0 and fresh words after it."""
    pre = bits.prefixes(values.shape[0])
    out = _prefix_lattice(jnp.asarray(table), jax.device_put(pre, may_alias=True), values, kind=kind, g=g, unit=unit, out_dtype=out_dtype)
    idx = _flagged(out, values.shape[0])
    first = {}
    if idx.size:
        count = idx.size
        pad = _padded(idx)
        fresh = bits.words((count,)) & np.uint64((1 << (64 - PREFIX_BITS)) - 1)
        words = (pre[idx].astype(np.uint64) << np.uint64(64 - PREFIX_BITS)) | fresh
        first = dict(zip(idx.tolist(), words.tolist()))
        table_words = np.append(words, np.repeat(words[-1:], pad.size - count))[None, :]
        part = _fast_lattice(jnp.asarray(table_words), jnp.uint32(0), _take(values, jnp.asarray(pad)), kind=kind, t=t,
                             shift=shift, g=g, unit=unit, out_dtype=out_dtype)
        out = _put(out, jnp.asarray(pad), part)
    return out, _host_streams(bits, lambda j, i: first[i] if j == 0 else None)


def _host_streams(bits, known):
    """``word_of(i)``: record i's word stream, ``known(j, i)`` where it is not None, then fresh words of ``bits``
    (drawn once, kept)."""
    extra = {}

    def word_of(i):
        def word(j):
            w = known(j, i)
            if w is not None:
                return w
            if (j, i) not in extra:
                extra[(j, i)] = int(bits.words((1,))[0])
            return extra[(j, i)]

        return word

    return word_of


@functools.partial(jax.jit, static_argnames=("kind", "t", "shift", "g", "unit", "out_dtype"))
def _fast_lattice(source, start, values, records=None, *, kind, t, shift, g, unit, out_dtype):
    """The one-scale lattice release of the flat ``values`` (sharded or not) in one program: the fixed-trip
    discrete Laplace t/2^shift (:func:`table_samplers.laplace_code`) or discrete Gaussian of variance t
    (:func:`table_samplers.gaussian_code`), the lattice output, and the sentinel for the rare flagged records. ``source``:
    the key's Threefry pair (uint32 [2]) or a table of host words (uint64 [words per record, records]);
    ``records``: the records' indices (default ``start, start + 1, ...``)."""
    n = values.shape[0]
    words = _WordTable(source) if source.ndim == 2 else ThreefryWords(None, (n,), start, pair=source)
    if records is not None and source.ndim == 1:
        words.records = records
    if kind == "rr":  # t: the keep threshold, shift: the number of other categories
        return _finish(table_samplers.rr_code(words, values, t, shift), values, kind, g, unit, out_dtype)

    # one program whatever the values (no branch on them: the release's work does not depend on the data)
    z, flag = _table_noise(words, kind, t, shift)
    return _finish_noise(z, flag, values, kind, g, unit, out_dtype)


#: the smallest Laplace scale whose lattice :func:`_laplace_lattice_bits` builds (b and g = 2^(⌊log2 b⌋ − 20)
#: normal floats: XLA may flush subnormals to zero); smaller ones are built on the host
_DEVICE_LAPLACE_MIN = 2.0**-1002


def _laplace_lattice_bits(b, integer=False):
    """The (t, shift, g) of float64 scales b from their bits, in a device program: :func:`laplace_lattice`'s
    (b ≥ :data:`_DEVICE_LAPLACE_MIN`) or, ``integer``, :func:`discrete_laplace_lattice`'s (2^-40 ≤ b < 2^31). With
    b = M 2^(E − 52), M its 53-bit significand: the lattice g = 2^(E − 20), t = ⌈b/g⌉ = ⌈M/2^32⌉; the integers
    g = 1, shift p = max(0, 20 − E), t = ⌈b 2^p⌉ = ⌈M/2^r⌉ with r = 32 (p > 0) or 52 − E. The same integers as
    numpy's frexp/ldexp/ceil (``tests/test_exact.py``)."""
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


@functools.partial(jax.jit, static_argnames=("kind", "k1", "small", "narrow", "unit", "out_dtype"))
def _per_record_lattice(source, start, values, t, shift, g, records=None, *, kind, k1, small, unit, out_dtype,
                        narrow=False, table=None):
    """The lattice release of per-record scales (any number of distinct values: uint64 arrays ``t``, ``shift``,
    float64 ``g``) in one program, like :func:`_fast_lattice`: the discrete Laplace by
    :func:`table_samplers.laplace_noise_per_record` (kind "dlr"), or randomized response with per-record keep thresholds
    ``t`` over ``k1`` other categories (kind "rr"). Kinds "lap" and "dlap": ``t`` holds the Laplace or discrete
    Laplace scales b themselves (any float dtype; ``shift`` and ``g`` None), whose lattice parameters are built here
    (:func:`_laplace_lattice_bits`). Kind "rr" with float ``t``: the records' ε, their thresholds looked up in the
    table ``shift`` with the hash multiplier ``g`` (:func:`_rr_lookup`; the records it misses flagged).
    Kind "dgr": the discrete Gaussian, record i's exact table ``table[t[i] : t[i] + shift[i]]`` searched in ``k1``
    bisection steps (:func:`table_samplers.icdf_noise_per_record`). ``narrow``
    (static; a discrete Laplace, every scale in :func:`_float32_range`): the float32 decision
    (:func:`table_samplers.laplace_noise_per_record32`), whose open records the host sends back to this program
    without ``narrow``. ``records``: the records' indices (default ``start, start + 1, ...``)."""
    inv_g = None
    if kind in ("lap", "dlap"):
        t, shift, g = _laplace_lattice_bits(t.astype(jnp.float64), integer=kind == "dlap")
        inv_g = _reciprocal_pow2(g)  # g and 1/g normal: b ≥ _DEVICE_LAPLACE_MIN (Laplace), g = 1 (discrete)
        kind = "dlr"
    words = _WordTable(source) if source.ndim == 2 else ThreefryWords(None, (values.shape[0],), start, pair=source)
    if records is not None and source.ndim == 1:
        words.records = records
    if kind == "dgr":  # the discrete Gaussian: record i's table at offset t[i], of length shift[i], in ``table``
        z, flag = table_samplers.icdf_noise_per_record(words, table, t, shift, k1)
        return _finish_noise(z, flag, values, kind, g, unit, out_dtype)
    if kind == "rr" and jnp.issubdtype(t.dtype, jnp.floating):  # the ε themselves: their thresholds from the table
        t, missing = _rr_lookup(t, shift, g)
        return _finish(table_samplers.rr_code(words, values, t, k1) | missing.astype(jnp.int64), values, kind, 1.0, unit,
                       out_dtype)
    if kind == "rr":
        return _finish(table_samplers.rr_code(words, values, t, k1), values, kind, g, unit, out_dtype)
    z, flag = (table_samplers.laplace_noise_per_record32(words, t, shift) if narrow
               else table_samplers.laplace_noise_per_record(words, t, shift, small))
    return _finish_noise(z, flag, values, kind, g, unit, out_dtype, inv_g)


def _rr_lookup(eps, table, multiplier):
    """The keep thresholds of the records' ε from an :class:`_RRTable`'s slots ``table`` (uint64 [2, 2^b]: the ε
    bits, their T) and ``multiplier``: slot h = (bits · multiplier mod 2^w) >> (w − b) of the ε's w-bit pattern
    (one multiply, one shift, two gathers), and the records whose slot holds another ε (``missing``: flagged)."""
    width = jnp.dtype(eps.dtype).itemsize * 8
    u = jnp.uint64 if width == 64 else jnp.uint32
    bits = jax.lax.bitcast_convert_type(eps, u)
    h = (bits * multiplier.astype(u)) >> u(width - (table.shape[1].bit_length() - 1))
    return table[1][h], table[0][h] != bits.astype(jnp.uint64)


def _finish(code, values, kind, g, unit, out_dtype):
    """:func:`_finish_noise` of packed codes."""
    return _finish_noise(code >> 8, (code & 1) == 1, values, kind, g, unit, out_dtype)


def _finish_noise(z, flag, values, kind, g, unit, out_dtype, inv_g=None):
    """The output of the noise ``z`` (or category, randomized response) and the ``flag`` of the records that await
    the host: the category or the lattice value, and the sentinel for the flagged records and for answers off the
    index range (the host refuses the release). ``inv_g``: 1/g (:func:`_lattice_coordinate`)."""
    if kind == "rr":
        out = z.astype(out_dtype)
    elif unit and values.dtype == out_dtype and jnp.issubdtype(out_dtype, jnp.integer):
        # in the values' width: the same bits as the int64 sum, narrowed (float noise: |z| < 2^53, exact in int64)
        out = values + (z.astype(jnp.int64) if jnp.issubdtype(z.dtype, jnp.floating) else z).astype(out_dtype)
    else:
        out = _lattice_value(values, z, g, unit, out_dtype, inv_g)
    flag = flag | (False if unit else jnp.abs(_lattice_coordinate(values, g, inv_g)) >= _INDEX_MAX)
    return jnp.where(flag, jnp.asarray(_sentinel(out_dtype), out_dtype), out)


def _sentinel_mask(out):
    """Whether each output is the sentinel of a record that awaits the host."""
    return jnp.isnan(out) if jnp.issubdtype(out.dtype, jnp.floating) else out == _sentinel(out.dtype)


#: records per block of the device search for flagged records: the host reads one boolean per block
_FLAG_BLOCK = 32


def _blocked(out):
    """:func:`_sentinel_mask` of the flat ``out`` as rows of :data:`_FLAG_BLOCK` records (the last padded)."""
    a = _sentinel_mask(out.reshape(-1))
    return jnp.pad(a, (0, -a.size % _FLAG_BLOCK)).reshape(-1, _FLAG_BLOCK)


@jax.jit
def _flag_blocks(out):
    return jnp.any(_blocked(out), axis=1)


@jax.jit
def _block_rows(out, blocks):
    return _blocked(out)[blocks]


def _flagged(out, n):
    """The indices (below n) of the records of ``out`` awaiting the host, found on the device: one boolean per block of
    :data:`_FLAG_BLOCK` records comes to the host, then the rows of the blocks that hold any (padded to a power of
    two: one compilation per size class) — never the whole output."""
    blocks = np.flatnonzero(np.asarray(_flag_blocks(out)))
    if not blocks.size:
        return blocks
    rows = np.asarray(_block_rows(out, jnp.asarray(_padded(blocks))))[: blocks.size]
    b, c = np.nonzero(rows)
    idx = blocks[b] * _FLAG_BLOCK + c
    return idx[idx < n]


def _fast_release(key, start, values, kind, t, shift, g, unit, out_dtype, records=None, scales=None, scales_at=None,
                  small=None, narrow=False, table=None):
    """The one-scale lattice release: one device program over the records (sharded over the local devices
    for large inputs: the noise of record i is a function of (key, i) and integer-only, so the release is
    bitwise the same on any number of devices); the rare flagged records completed exactly on the host.
    ``records``: the (global) record indices of ``values`` when they are a group of a batch (not sharded).
    ``scales``: per-record (t, shift, g) numpy arrays instead (:func:`_per_record_lattice`, not sharded), or, kind
    "lap" or "dlap", (scales b, None, None) with ``scales_at(idx)``: the (t, shift, g) of the records ``idx``, and
    ``small``: whether every 1/τ ≤ 2^-8 (:func:`table_samplers.laplace_noise_per_record`); ``narrow``: the float32
    decision first (:func:`_per_record_lattice`); ``table``: kind "dgr"'s concatenated exact tables (scales: each
    record's offset and length in it, and g). A :class:`HostBits` key feeds whole words, or, for the one-word
    samplers of one scale, 16-bit word prefixes (:func:`_prefix_release`). The flagged records are found on the
    device (:func:`_flagged`); the float32 decision's go through the float64 program first, on the device; the host
    completes the rest."""
    n = values.size
    flat = values.reshape(-1)
    rec = None if records is None else np.asarray(records, np.uint32)
    host_bits = isinstance(key, HostBits)
    prefix = _prefix_table(kind, t, shift) if host_bits and scales is None and n >= PREFIX_MIN_RECORDS else None
    if prefix is not None:  # os.urandom words, two bytes for most records
        out, word_of = _prefix_release(key, prefix, flat, kind, t, shift, g, unit, out_dtype)
    elif host_bits:  # os.urandom words, made here for every record and fed to the device
        words = key.words((_words_per_record(kind, t, shift), n))
        source = jax.device_put(words, may_alias=True)  # (os.urandom's buffer is aligned: no copy on a CPU)
        word_of = _host_streams(key, lambda j, i: int(words[j, i]) if j < words.shape[0] else None)
    else:
        source = key_pair(key)
        devices = jax.local_devices()  # (this process's: a multi-process release runs each shard apart)
        if len(devices) > 1 and n >= SHARD_MIN_RECORDS and rec is None and (
                scales is None or all(np.ndim(a) == 0 for a in scales if a is not None)):  # (one scale as 0-d arrays)
            flat = _shard(jnp.pad(flat, (0, -n % (LANE_BLOCK * len(devices)))), devices)
        k0, k1 = (int(w) for w in np.asarray(source))

        def word_of(i):
            r = start + i if rec is None else int(rec[i])
            return lambda j: table_samplers.threefry_word(k0, k1, j, r)
    if prefix is None and scales is None:
        out = _fast_lattice(source, jnp.uint32(start), flat, None if rec is None else jnp.asarray(rec), kind=kind,
                            t=t, shift=shift, g=g, unit=unit, out_dtype=out_dtype)
    elif prefix is None:
        if small is None:
            small = kind == "dlr" and bool(np.all(np.ldexp(1.0, scales[1].astype(np.int64)) <= scales[0] * 2.0**-8))
            narrow = kind == "dlr" and _float32_range(scales[0], scales[1])
        narrow = narrow and table_samplers.transcendentals_trusted("float32")  # (the platform check, once)
        on_device = tuple(None if a is None else jnp.asarray(a) for a in scales)
        if kind in ("dlr", "lap", "dlap") and not table_samplers.transcendentals_trusted("float64"):
            # the float64 decision's error bound fails on this backend: every record decided on the host
            out, narrow = jnp.full(flat.shape[0], _sentinel(out_dtype), out_dtype), False
        else:
            out = _per_record_lattice(source, jnp.uint32(start), flat, *on_device, kind=kind, k1=shift, small=small,
                                      narrow=narrow, unit=unit, out_dtype=out_dtype,
                                      table=None if table is None else jnp.asarray(table))
    idx = _flagged(out, n)
    if idx.size and narrow:  # the float32 decision's open records (a few per 10^4): the float64 program on them
        pad = jnp.asarray(_padded(idx))
        sub = _per_record_lattice(source if source.ndim == 1 else _take_columns(source, pad), jnp.uint32(start),
                                  _take(values, pad), *(None if a is None else _take(a, pad) for a in on_device),
                                  jnp.uint32(start) + pad.astype(jnp.uint32), kind=kind, k1=shift, small=small,
                                  unit=unit, out_dtype=out_dtype)
        out = _put(out, pad, sub)
        idx = idx[np.asarray(_sentinel_mask(sub))[: idx.size]]
    if idx.size:
        pad = _padded(idx)
        v = np.asarray(_take(values, jnp.asarray(pad)))[: idx.size]
        every = scales_at or (lambda i: tuple(np.broadcast_to(a, (n,))[i] for a in scales))  # (0-d: one scale)
        at = None if scales is None else every(idx)
        gi = g if scales is None else at[2]
        if not unit and v.size and np.max(np.abs(v.astype(np.float64)) / gi) >= _INDEX_MAX:
            raise ValueError(f"values: |value| / granularity must be below 2**62 for numerics='exact' "
                             f"(granularity {np.min(gi)}), got {np.max(np.abs(v))}")

        def record_fn(word, value, pos):
            if scales is not None:
                t_i = int(at[0][pos])
                if kind == "dgr":
                    return table_samplers.exact_gaussian_record(word, t_i)
                return table_samplers.exact_rr_record(word, value, t_i, shift) if kind == "rr" else \
                    table_samplers.exact_per_record(word, t_i, int(at[1][pos]))
            if kind == "rr":
                return table_samplers.exact_rr_record(word, value, t, shift)
            if kind == "pb":
                return table_samplers.exact_boosted_record(word, t)
            return table_samplers.exact_record(word, t, shift) if kind == "dl" else table_samplers.exact_gaussian_record(word, t)

        z = np.asarray([record_fn(word_of(int(i)), int(x), pos) for pos, (i, x) in enumerate(zip(idx, v))], np.int64)
        last = pad.size - idx.size
        out = _patch(out, jnp.asarray(pad), jnp.asarray(np.append(v, np.repeat(v[-1:], last))),
                     jnp.asarray(np.append(z, np.repeat(z[-1:], last))),
                     jnp.asarray(gi if np.ndim(gi) == 0 else np.append(gi, np.repeat(gi[-1:], last))), kind=kind,
                     unit=unit, out_dtype=out_dtype)
    out = out if out.shape[0] == n else out[:n]
    return out.reshape(values.shape)


def _padded(idx):
    """The flagged records' indices padded to a power of two (at least 16) by repeating the last: the device steps
    of the host completion compile once per size class, not once per count of flagged records (a release of
    millions of records flags about one)."""
    return np.concatenate([idx, np.repeat(idx[-1:], max(16, 1 << int(idx.size - 1).bit_length()) - idx.size)])


@jax.jit
def _take(x, idx):
    return x.reshape(-1)[idx]


@jax.jit
def _take_columns(x, idx):
    return x[:, idx]


@functools.partial(jax.jit, donate_argnums=0)
def _put(out, idx, fixed):
    """``out`` (donated: updated in place, not copied) with the records ``idx`` set to ``fixed``."""
    return out.at[idx].set(fixed)


@functools.partial(jax.jit, static_argnames=("kind", "unit", "out_dtype"), donate_argnums=0)
def _patch(out, idx, v, z, g, *, kind, unit, out_dtype):
    """``out`` (donated) with the host-completed records ``idx`` (noise ``z``, answers ``v``) set to their outputs
    (padded entries repeat the last record: the same value written twice)."""
    fixed = z.astype(out_dtype) if kind == "rr" else _lattice_value(v, z, g, unit, out_dtype)
    return out.at[idx].set(fixed)


#: the noise scale may reach the output's largest value over 2^this: |noise| beyond it has probability
#: below e^-512 (Laplace tails; Gaussian ones far below), and a float output keeps the float tier's bound
_RANGE_BITS = {"f": 16, "i": 9}


def _check_output_range(lat, param, shift, g, out_dtype):
    """Refuse a scale whose noise would overflow the output dtype (±inf, or wrapped integers)."""
    dt = np.dtype(out_dtype)
    top = float(np.finfo(dt).max) if dt.kind == "f" else float(np.iinfo(dt).max)
    hi = top * 2.0 ** -_RANGE_BITS["f" if dt.kind == "f" else "i"]
    p = np.asarray(param, np.float64)
    scale = (np.ldexp(p, -np.asarray(shift, np.int64)) if lat.sampler == "dl" else np.sqrt(p)) * g
    if scale.size and np.max(scale) > hi:
        wider = "float values, or int64 ones inside jax.enable_x64(True)" if dt.kind != "f" else \
            "float64 values inside jax.enable_x64(True)"
        hint = f"; release {wider}" if dt.itemsize < 8 else ""
        raise ValueError(f"{lat.noise.scale_name} must be at most {hi:.3g} for numerics='exact' with {dt} output (the "
                         f"noise would overflow it{hint}), got {float(np.max(scale)):.3g}")


#: per-record parameters with at most this many distinct scales run the fixed-trip release per scale
MAX_SCALE_GROUPS = 16


def _scale_groups(shape, *params):
    """[(first record, records)] of each distinct scale (the parameters broadcast to ``shape``), or None when
    there are more than :data:`MAX_SCALE_GROUPS` (the per-record samplers then run every record)."""
    cols = [np.broadcast_to(p, shape).reshape(-1) for p in params if np.size(p) > 1]
    probe = np.stack([c[:: max(1, c.size // 4096)] for c in cols], axis=-1)  # a strided sample: many scales early
    if len(np.unique(probe, axis=0)) > MAX_SCALE_GROUPS:
        return None
    left = np.ones(math.prod(shape), bool)
    groups = []
    while left.any():
        if len(groups) == MAX_SCALE_GROUPS:
            return None
        i = int(np.argmax(left))
        mask = left.copy()
        for c in cols:
            mask &= c == c[i]
        groups.append((i, np.flatnonzero(mask)))
        left &= ~mask
    return groups


def _lattice_parameter(mech, hook):
    """``mech.<hook>()`` (the per-record parameter its :meth:`exact_lattice` is built from) when the class that
    defines the hook also defines the mechanism's ``exact_lattice`` (a subclass with its own lattice does not
    inherit the fast route), else None."""
    owner = next((c for c in type(mech).__mro__ if hook in vars(c)), None)
    if owner is None or vars(owner).get("exact_lattice") is not type(mech).exact_lattice:
        return None
    return getattr(mech, hook)()


@functools.partial(jax.jit, static_argnames=("stride",))
def _scale_summary(b, *, stride):
    """Every ``stride``-th scale and the smallest and largest (float64, exact), in one small program over b in its
    own dtype (no float64 copy of the scales)."""
    flat = b.reshape(-1)
    return flat[::stride], jnp.min(flat).astype(jnp.float64), jnp.max(flat).astype(jnp.float64)


def _device_laplace_scales(mech):
    """The per-record scales b of a Laplace or discrete Laplace ``mech`` (``exact_lattice_scale``, asked of the
    class that defines the mechanism's ``exact_lattice``), a device array, when its exact release builds
    their lattice parameters in the device program — more than :data:`MAX_SCALE_GROUPS` distinct values (on a
    strided sample, as :func:`_scale_groups`), the Laplace's all at least :data:`_DEVICE_LAPLACE_MIN` — with the
    host lattices of the smallest and the largest (which refuse scales out of range, as a host lattice of all
    would); otherwise None (the lattice is built on the host). The scales keep their own dtype (the device program
    converts them)."""
    b = _lattice_parameter(mech, "exact_lattice_scale")
    if b is None:
        return None
    if is_traced(b) or np.ndim(b) == 0 or np.size(b) <= MAX_SCALE_GROUPS:
        return None
    from dpjax.pytree import replace

    with jax.enable_x64(True):
        b = jnp.asarray(b)
        probe, lo, top = _scale_summary(b, stride=max(1, b.size // 4096))
        if len(np.unique(np.asarray(probe))) <= MAX_SCALE_GROUPS:
            return None
        lo, top = np.float64(lo), np.float64(top)
        if not mech.discrete and lo < _DEVICE_LAPLACE_MIN:
            return None
        return b, replace(mech, scale=lo).exact_lattice(), replace(mech, scale=top).exact_lattice()


def _float32_range(t, shift):
    """Whether every discrete Laplace scale τ = t/2^shift lies in the range of the float32 decision
    (:func:`table_samplers.laplace_noise_per_record32`), with t exact in float32 (below 2^24)."""
    t = np.asarray(t, np.float64)
    tau = np.ldexp(t, -np.asarray(shift, np.int64))
    return bool(tau.size and np.max(t) < 2.0**24 and np.ldexp(1.0, table_samplers.NARROW_MIN_LOG2) <= np.min(tau)
                and np.max(tau) <= np.ldexp(1.0, table_samplers.NARROW_MAX_LOG2))


def _release_laplace_scales(key, start, values, mech, b, low_lat, top_lat, in_dt):
    """The release of a Laplace or discrete Laplace with many per-record scales b (:func:`_device_laplace_scales`):
    only b moves to the device program, which builds the lattice parameters; the output-range check is that of
    the largest scale and the per-record sampler's ``small`` that of the smallest (the noise scale that runs, b
    rounded up to 21 significant bits or to an integer, does not decrease with b), and so does the choice of the
    float32 decision (a discrete Laplace whose scales all lie in its range); the rare flagged records get their
    parameters from the host lattice of their own scales."""
    from dpjax.pytree import replace

    unit = bool(mech.discrete and jnp.issubdtype(in_dt, jnp.integer))
    out_dtype = jnp.dtype(in_dt if unit or jnp.issubdtype(in_dt, jnp.floating) else default_float())
    with jax.enable_x64(True):
        _check_output_range(top_lat, top_lat.param, top_lat.shift, top_lat.granularity, out_dtype)
        host_b = b.reshape(-1)

        def scales_at(idx):
            lat = replace(mech, scale=np.asarray(_take(host_b, jnp.asarray(_padded(idx))), np.float64)[: idx.size]).exact_lattice()
            return np.asarray(lat.param), np.broadcast_to(lat.shift, idx.shape), np.asarray(lat.granularity)

        small = bool(np.ldexp(1.0, int(low_lat.shift)) <= float(low_lat.param) * 2.0**-8)
        narrow = bool(mech.discrete) and _float32_range([low_lat.param, top_lat.param], [low_lat.shift, top_lat.shift])
        return _fast_release(key, start, values, "dlap" if mech.discrete else "lap", None, 0, 1.0, unit, out_dtype,
                             scales=(host_b, None, None), scales_at=scales_at, small=small, narrow=narrow)


#: per-record ε with at most this many distinct values look their keep thresholds up in a table (:class:`_RRTable`)
RR_TABLE_MAX = 1024
#: records whose ε the table misses are completed on the host up to this many (one by one); beyond, the missed
#: values join the table and the release runs again
_RR_HOST_MISSES = 64


def _perfect_hash(keys, width):
    """(multiplier a, b, slots) of a multiply-shift hash slot = (key · a mod 2^w) >> (w − b) that sends the distinct
    ``width``-bit ``keys`` to distinct slots of 2^b ≥ n²/4 (n keys; 4 MB of table for 1024 values): a random odd a
    does with probability about e^-2; the first of 64 deterministic candidates (SplitMix64 of 1, 2, ...) that does
    is taken, else b grows (at b = w every odd a is a bijection)."""
    mask = (1 << 64) - 1
    keys = keys.astype(np.uint64)
    b = max(4, (-(-keys.size**2 // 4) - 1).bit_length())
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


class _RRTable:
    """The keep thresholds of randomized response over ``k`` categories for the distinct ε ``bits`` (their
    w-bit patterns, w = 32 or 64) in a perfect hash table (:func:`_perfect_hash`) for :func:`_rr_lookup`. An
    empty slot holds the ε of the first slot in use, whose hash is not that slot: no record can match it."""

    def __init__(self, bits, k):
        self.bits = np.unique(bits)
        self.k = k
        width = self.bits.dtype.itemsize * 8
        a, b, slots = _perfect_hash(self.bits, width)
        table = np.zeros((2, 1 << b), np.uint64)
        table[0] = self.bits[0]
        table[0, slots] = self.bits
        table[1, slots] = [_rr_keep(float(v), k)[0] for v in self.bits.view(np.float32 if width == 32 else np.float64)]
        self.table, self.multiplier = table, np.uint64(a)

    def thresholds_at(self, eps):
        """``scales_at`` of :func:`_fast_release`: the thresholds of the flagged records ``idx`` (their ε gathered
        from the device array ``eps``), or :class:`_TableMiss` when more than :data:`_RR_HOST_MISSES` of them have
        an ε the table misses."""
        def at(idx):
            e = np.asarray(_take(eps, jnp.asarray(_padded(idx))))[: idx.size]
            missed = ~np.isin(e.view(self.bits.dtype), self.bits)
            if np.count_nonzero(missed) > _RR_HOST_MISSES:
                raise _TableMiss(e[missed].view(self.bits.dtype))
            return np.asarray([_rr_keep(float(v), self.k)[0] for v in e], np.uint64), None, 1.0

        return at


class _TableMiss(Exception):
    """Raised from the host completion of :func:`_release_rr_epsilon` with the ε bits its table missed."""

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


def _sample_positions(size):
    """The records whose ε the table starts from: j s mod ``size`` for j < 4096 (all the records when fewer), s of
    :func:`_sample_step`. Spread over the records (s/size near 1/φ: the golden-ratio sequence; gaps up to 3.3 ×
    size/4096 in the sizes tested, 2·10^4 to 2^32), and over the residues modulo every period L ≤ 4096 that divides ``size`` (s is prime to L, so
    any L consecutive j hit every residue): ε assigned in tiers that repeat record by record (record i in tier
    i mod L) shows the sample every tier, where a stride sharing a factor with L sees some of them only."""
    if size <= 4096:
        return np.arange(size)
    return np.arange(4096, dtype=np.int64) * _sample_step(size) % size


def _device_rr_epsilon(mech):
    """The per-record ε of a randomized response ``mech`` (``exact_lattice_epsilon``, asked of the class that
    defines the mechanism's ``exact_lattice``), a float32 or float64 device array, with the distinct bit patterns
    of a sample of them (:func:`_sample_positions`), when its exact release looks the keep thresholds up in a table: concrete float ε,
    more than one, at most :data:`RR_TABLE_MAX` distinct in the sample; otherwise None (the host lattice)."""
    eps = _lattice_parameter(mech, "exact_lattice_epsilon")
    if eps is None or is_traced(eps) or np.size(eps) <= 1 or not jnp.issubdtype(jnp.result_type(eps), jnp.floating):
        return None
    with jax.enable_x64(True):
        eps = jnp.asarray(eps)
        eps = eps if eps.dtype in (jnp.float32, jnp.float64) else eps.astype(jnp.float32)  # (exact: a wider float)
        flat = eps.reshape(-1)
        sample = np.unique(np.asarray(flat[jnp.asarray(_sample_positions(flat.size))]))
    if sample.size > RR_TABLE_MAX:
        return None
    return eps, sample.view(np.uint32 if sample.dtype == np.float32 else np.uint64)


def _release_rr_epsilon(key, start, values, mech, eps, bits, in_dt):
    """The release of a randomized response with per-record ε (:func:`_device_rr_epsilon`): only the ε move to the
    device program, which looks each record's keep threshold up in an :class:`_RRTable` of the distinct values
    (the thresholds of :func:`rr_lattice`, so the output is bitwise that of the host lattice) and flags the
    records whose ε it misses; the host completes a few of them, or adds the missed values and runs again (the
    same words: the records already right are unchanged). None (the host lattice runs) when the values outgrow
    :data:`RR_TABLE_MAX`."""
    with jax.enable_x64(True):
        eps = jnp.broadcast_to(eps, values.shape).reshape(-1)
        while bits.size <= RR_TABLE_MAX:
            table = _RRTable(bits, mech.num_categories)
            try:
                return _fast_release(key, start, values, "rr", None, mech.num_categories - 1, 1.0, True,
                                     jnp.dtype(in_dt), scales=(eps, table.table, table.multiplier),
                                     scales_at=table.thresholds_at(eps))
            except _TableMiss as miss:  # (values not yet in the table: each round grows it)
                bits = np.union1d(bits, miss.bits)
    return None


def _chunked(t, shift):
    """Whether any discrete Laplace scale τ = t/2^shift has chunked tables (:func:`table_samplers.chunk_layout`'s
    m = ⌈log2 t⌉ − shift − DL_TABLE_LOG2 > 0: τ above 2^DL_TABLE_LOG2; ⌈log2 t⌉ is the bit length of t − 1)."""
    t = np.asarray(t, np.float64)
    return bool(np.any(np.frexp(t - 1.0)[1] - np.asarray(shift, np.int64) - table_samplers.DL_TABLE_LOG2 > 0))


#: a discrete Gaussian release with per-record σ builds one exact inverse-CDF table per distinct lattice variance
#: (about 0.25 s and 7.4σ words each at the Gaussian lattice's σ ≤ 2^12): at most this many distinct values
DG_TABLES_MAX = 1024


def _release_gaussian_tables(key, start, values, nvar, g, unit, out_dtype):
    """The discrete Gaussian of per-record lattice variances ``nvar`` (any number of distinct values, at most
    :data:`DG_TABLES_MAX`): each record's |Z| by the exact table of its own variance (:func:`table_samplers.dg_icdf`,
    the one-scale release's), searched per record in the concatenated tables
    (:func:`table_samplers.icdf_noise_per_record`): the one-scale map, whatever the other records' scales."""
    distinct, inverse = np.unique(nvar, return_inverse=True)
    if distinct.size > DG_TABLES_MAX:
        raise ValueError(f"sigma: numerics='exact' runs at most {DG_TABLES_MAX} distinct per-record sigma (one exact "
                         f"table each), got {distinct.size}; round sigma to fewer values or release them in batches")
    tables = [table_samplers.dg_icdf(int(v)) for v in distinct]
    sizes = np.asarray([tab.size for tab in tables], np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return _fast_release(key, start, values, "dgr", None, int(sizes.max()).bit_length(), 1.0, unit, out_dtype,
                         scales=(offsets[inverse], sizes[inverse], g), scales_at=lambda idx: (nvar[idx], None, g[idx]),
                         table=np.concatenate(tables))


def release_exact(key, values, mech: Mechanism, *, start: int = 0, flat: bool = False):
    """``dpjax.release(key, values, mech, numerics="exact")``: see the module docstring.

    ``key``: a Threefry key (reproducible: the noise of record i is a function of (key, i)) or a
    :class:`~dpjax.exact.bits.HostBits` (``os.urandom`` words, not reproducible).
    """
    if not isinstance(mech, Mechanism):
        raise ValueError(f"mech must be a dpjax mechanism, got {type(mech).__name__}")
    laplace_b = _device_laplace_scales(mech)
    rr_eps = _device_rr_epsilon(mech) if laplace_b is None else None
    # (the lattice of the largest scale checks the records; the randomized response itself, per-record ε)
    lat = mech.exact_lattice() if laplace_b is None and rr_eps is None else None
    if not isinstance(key, HostBits):
        key = check_key(key)
    if not flat:
        check_finite_values("values", values)
    values, squeeze = as_records(values, lat if lat is not None else mech if rr_eps is not None else laplace_b[2])
    start = check_int("start", start, minimum=0) if not is_traced(start) else start
    shape = values.shape
    n = math.prod(shape)
    if not is_traced(start) and start + n + LANE_BLOCK * len(jax.local_devices()) > MAX_RECORDS:  # room for the padding
        raise ValueError(f"start + number of records must be at most 2**32 per key, got {start + n}")
    in_dt = values.dtype
    integer = jnp.issubdtype(in_dt, jnp.integer)
    if laplace_b is not None and laplace_b[0].shape == shape:
        out = _release_laplace_scales(key, start, values, mech, *laplace_b, in_dt)
        return out.reshape(()) if squeeze else out
    if rr_eps is not None and n:
        out = _release_rr_epsilon(key, start, values, mech, *rr_eps, in_dt)
        if out is not None:
            return out.reshape(()) if squeeze else out
    if lat is None:  # scales broadcast to the records: the host lattice
        lat = mech.exact_lattice()
        check_batch_shape(lat, shape)
    g_own, param_own, shift_own = (np.asarray(lat.granularity, np.float64), np.asarray(lat.param), np.asarray(lat.shift))
    g = np.broadcast_to(g_own, shape)
    kind = lat.sampler
    out_float = in_dt if jnp.issubdtype(in_dt, jnp.floating) else default_float()
    param = np.broadcast_to(param_own, shape)
    shift = np.broadcast_to(shift_own, shape)
    if kind not in ("rr", "pb"):  # (a boosted kernel's scale is at most table_samplers.PB_MAX_SCALE)
        _check_output_range(lat, param_own, shift_own, g_own, in_dt if integer and np.all(g_own == 1.0) else out_float)
    unit = bool(integer and np.all(g_own == 1.0)) or kind == "rr"  # integers on ℤ (or categories): no float
    out_dt = jnp.dtype(in_dt if unit else out_float)
    if not n:  # no records (a flat release of an empty batch): the output dtype of any other batch
        return jnp.zeros(shape, out_dt)
    one_scale = all(np.all(a == a.flat[0]) for a in (param_own, shift_own, g_own) if a.size)
    # one word-to-noise map per law, whatever the layout: a discrete Laplace whose tables would be chunked (τ above
    # 2^DL_TABLE_LOG2: two or more words) runs the one-word inverse CDF of the per-record program for every record
    chunked = kind == "dl" and _chunked(param_own, shift_own)
    groups = None if one_scale or chunked else _scale_groups(shape, param_own, shift_own, g_own)
    if groups is not None:  # a few distinct scales: the fixed-trip release of each, on its records
        with jax.enable_x64(True):
            flat_v = values.reshape(-1)
            out = np.empty(n, out_dt)
            for first, idx in groups:
                m = 1 << max(int(idx.size - 1).bit_length(), 0)  # padded to a power of two: few compilations
                pad = np.concatenate([idx, np.full(m - idx.size, idx[-1])])
                t0, s0 = int(param.flat[first]), int(shift.flat[first])
                if kind == "rr":
                    s0 = lat.noise.num_categories - 1
                part = _fast_release(key, start, flat_v[pad], kind, t0, s0, float(g.flat[first]), unit, out_dt,
                                     records=start + pad)
                out[idx] = np.asarray(part)[: idx.size]
        out = jnp.asarray(out).reshape(shape)
    elif (chunked or not one_scale) and kind in ("dl", "rr"):  # any number of scales (or ε)
        with jax.enable_x64(True):
            scales = tuple(np.asarray(a.flat[0]) if one_scale else np.ascontiguousarray(a).reshape(-1)
                           for a in (param, shift, g))
            out = _fast_release(key, start, values, "dlr" if kind == "dl" else "rr", None,
                                lat.noise.num_categories - 1 if kind == "rr" else 0, 1.0, unit, out_dt, scales=scales)
    elif not one_scale and kind == "dg":  # any number of distinct σ²: a table each
        with jax.enable_x64(True):
            out = _release_gaussian_tables(key, start, values, np.ascontiguousarray(param).reshape(-1),
                                           np.ascontiguousarray(g).reshape(-1), unit, out_dt)
    elif kind == "rr":  # one ε: one keep word, one Lemire word
        with jax.enable_x64(True):
            out = _fast_release(key, start, jnp.asarray(values), "rr", int(param.flat[0]), lat.noise.num_categories - 1,
                                1.0, True, out_dt)
    else:  # one scale ("dl", "dg", and "pb", whose lattice always has one): the fused fixed-trip release
        t0 = _pb_spec(lat.noise) if kind == "pb" else int(param.flat[0])
        with jax.enable_x64(True):
            out = _fast_release(key, start, values, kind, t0, int(shift.flat[0]), float(g.flat[0]), unit, out_dt)
    return out.reshape(()) if squeeze else out
