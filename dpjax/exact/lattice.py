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
attack on float samplers: Mironov, "On Significance of the Least Significant Bits for Differential Privacy",
ACM CCS 2012). Rounding moves two answers at distance ≤ Δ to lattice indices at distance ≤ ⌈Δ/g⌉ (≤ Δ/g + 1,
i.e. the sensitivity is charged as Δ + g, exactly Δ/g when g divides Δ), and the integer noise is
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

import functools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.exact import table_samplers
from dpjax.exact.bits import HostBits, ThreefryWords, key_pair
from dpjax.exact.laws.boosted import BoostedSampler
from dpjax.exact.laws.discrete_gaussian import DiscreteGaussianSampler
from dpjax.exact.laws.discrete_laplace import (
    DEVICE_LAPLACE_MIN,
    LAPLACE_BITS,
    DiscreteLaplaceSampler,
    LaplaceScales,
    float32_range,
)
from dpjax.exact.laws.randomized_response import (
    RR_TABLE_MAX,
    RandomizedResponseLookup,
    RandomizedResponseSampler,
    RRTable,
    TableMiss,
    rr_keep,
    sample_positions,
)
from dpjax.exact.sampler import IntegerSampler, LatticeSampler, padded, take
from dpjax.mechanism import LANE_BLOCK, Mechanism, as_records, check_batch_shape, default_float
from dpjax.pytree import pytree_dataclass, static_field
from dpjax.random import MAX_RECORDS, check_key
from dpjax._draw import SHARD_MIN_RECORDS, _shard
from dpjax.validation import check_finite_values, check_int, is_traced

__all__ = [
    "ExactLattice",
    "laplace_lattice",
    "discrete_laplace_lattice",
    "gaussian_lattice",
    "rr_lattice",
    "boosted_lattice",
    "release_exact",
    "check_index_range",
    "LAPLACE_BITS",
    "GAUSSIAN_BITS",
]

#: the lattice σ of the Gaussian noise is in (2^(GAUSSIAN_BITS−1), 2^GAUSSIAN_BITS] (σ² ≤ 2^24)
GAUSSIAN_BITS = 12
#: lattice indices |x/g| must stay below this (int64 arithmetic with room for the noise)
_INDEX_MAX = 2.0**62


def _concrete(name, x):
    if is_traced(x):
        raise ValueError(
            f"numerics='exact' needs concrete parameters: {name} is traced (build the mechanism outside jit)"
        )
    return np.asarray(x, np.float64)


@pytree_dataclass
class ExactLattice(Mechanism):
    """The discrete mechanism an exact release runs: integer noise ``noise`` on the lattice gℤ.

    Releases (``dpjax.release(key, values, lat)``, ``sample``) take and return real values: the answer rounded
    to gℤ plus g × integer noise. The output law and every accounting hook (``log_prob``, ``cdf``,
    ``hockey_stick``, ``pure_epsilon``, …) are those of ``noise`` in *lattice units* (outputs y/g, answers
    ⌊x/g + ½⌋), and ``neighbour_pairs(Δ)`` turns the sensitivity Δ of the real answers into the lattice
    sensitivity ⌈Δ/g⌉: the accountant reports the privacy of the mechanism actually run, rounding included.
    Built by ``mech.exact_lattice()``; not meant to be constructed by hand. The methods it overrides are
    documented on :class:`~dpjax.mechanism.Mechanism`.

    Attributes:
      noise: the integer mechanism accounted, in lattice units (a discrete Laplace, discrete Gaussian,
        randomized response or boosted mechanism).
      granularity: g, a power of two (one, or one per record).
      param: the integer noise's integer parameter (t, n or the keep threshold T; one, or one per record).
      shift: the integer noise's scale exponent p (scale t/2^p; one, or one per record).
      sampler: the law (:class:`~dpjax.exact.sampler.LatticeSampler`), which gives the integer sampler of each
        layout.

    References:
      Mironov, "On Significance of the Least Significant Bits for Differential Privacy", ACM CCS 2012 (the
      attack the lattice closes); Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy",
      NeurIPS 2020.
    """

    noise: Mechanism
    granularity: jax.Array
    param: jax.Array
    shift: jax.Array
    sampler: LatticeSampler = static_field()

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
        """The lattice sensitivity of a real sensitivity Δ.

        Args:
          sensitivity: Δ, in the answers' units.

        Returns:
          ⌈Δ/g⌉ (exact: g is a power of two); the sensitivity itself for randomized response.
        """
        return self.sampler.lattice_sensitivity(sensitivity, self.granularity)

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
        if self.sampler.checks_values:
            self.noise.validate_values(values)

    def sample_records(self, key, value, start=0):
        return release_exact(key, value, self, start=start, flat=True)

    def exact_lattice(self):
        return self


def check_index_range(lat, values) -> None:
    """Refuse values whose lattice index |value| / granularity reaches 2**62, before anything is drawn.

    The bound of an exact release's int64 arithmetic; the multi-process release validates each shard with it,
    so that the processes agree on the refusal (:mod:`dpjax.multihost`).

    Args:
      lat: an :class:`ExactLattice`.
      values: the answers (concrete).

    Raises:
      ValueError: a value whose lattice index reaches 2**62.
    """
    values = np.asarray(values)
    g = np.asarray(lat.granularity, np.float64)
    if lat.sampler.categorical or not values.size or (np.issubdtype(values.dtype, np.integer) and np.all(g == 1.0)):
        return
    _refuse_off_index(values, g)


def _refuse_off_index(values, g):
    """Refuse answers ``values`` (numpy, not empty) whose lattice index |value| / g reaches 2**62."""
    if np.max(np.abs(values.astype(np.float64)) / g) >= _INDEX_MAX:
        raise ValueError(
            f"values: |value| / granularity must be below 2**62 for numerics='exact' "
            f"(granularity {np.min(g)}), got {np.max(np.abs(values))}"
        )


def _make(noise, granularity, param, shift, sampler):
    return ExactLattice(
        noise=noise,
        granularity=np.asarray(granularity, np.float64),
        param=np.asarray(param, np.uint64),
        shift=np.asarray(shift, np.uint64),
        sampler=sampler,
    )


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
        raise ValueError(
            f"{name} must be at least {low:.3g} for numerics='exact' (its lattice granularity would "
            f"underflow float64), got {np.min(scale)!r}"
        )


def laplace_lattice(scale, lattice_kernel):
    """Laplace(b) → discrete Laplace ``lattice_kernel(scale=t)`` on gℤ, g = 2^(⌊log2 b⌋ − 20), t = ⌈b/g⌉.

    Args:
      scale: b (concrete; one, or one per record).
      lattice_kernel: the discrete Laplace kernel class.

    Returns:
      The :class:`ExactLattice`.

    Raises:
      ValueError: ``scale`` traced, or so small that g underflows float64.
    """
    b = _concrete("scale", scale)
    _, e = np.frexp(b)  # b = m 2^e, m in [1/2, 1)
    _check_granularity("scale", b, e - 1 - LAPLACE_BITS)
    g = np.ldexp(1.0, e - 1 - LAPLACE_BITS)
    t = np.ceil(b / g)
    return _make(lattice_kernel(scale=t), g, t, 0, DiscreteLaplaceSampler())


def discrete_laplace_lattice(scale, kernel_cls):
    """Discrete Laplace(b) on the integers → its scale rounded up to t/2^p (t < 2^32, 2^p ≤ 2^20), on g = 1.

    Args:
      scale: b (concrete; one, or one per record).
      kernel_cls: the discrete Laplace kernel class.

    Returns:
      The :class:`ExactLattice`.

    Raises:
      ValueError: ``scale`` traced, at least 2**31 or below 2**-40.
    """
    b = _concrete("scale", scale)
    if np.any(b >= 2.0**31):
        raise ValueError(f"scale must be below 2**31 for numerics='exact', got {b.max()}")
    _, e = np.frexp(b)
    p = np.clip(LAPLACE_BITS + 1 - e, 0, LAPLACE_BITS + 1 + 1074).astype(np.int64)
    if np.any(p > 60):
        raise ValueError(f"scale must be at least 2**-40 for numerics='exact', got {b.min()}")
    t = np.ceil(np.ldexp(b, p))
    return _make(kernel_cls(scale=np.ldexp(t, -p)), np.ones_like(b), t, p, DiscreteLaplaceSampler())


def _sigma_below(n):
    """Largest float64 σ with σ² ≤ n (the accounting σ is never above the σ that ran)."""
    s = math.sqrt(n)
    while Fraction(s) ** 2 > n:
        s = math.nextafter(s, 0.0)
    return s


def gaussian_lattice(sigma, lattice_kernel, integer=False):
    """Gaussian(σ) → discrete Gaussian on gℤ with lattice variance n = ⌈(σ/g)²⌉ ≤ 2^24.

    g = 2^(⌈log2 σ⌉ − 12) (at least 1 for an integer kernel); accounted at σ' = the largest float with
    σ'² ≤ n (never above the σ that ran).

    Args:
      sigma: σ (concrete; one, or one per record).
      lattice_kernel: the discrete Gaussian kernel class.
      integer: whether the kernel is integer-valued (then g ≥ 1).

    Returns:
      The :class:`ExactLattice`.

    Raises:
      ValueError: ``sigma`` traced, or so small that g underflows float64.

    References:
      Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020.
    """
    s = _concrete("sigma", sigma)
    _, e = np.frexp(s)  # s = m 2^e: ⌈log2 s⌉ = e, or e − 1 when s is a power of two
    e = np.where(np.ldexp(0.5, e) == s, e - 1, e)
    shift = e - GAUSSIAN_BITS
    if integer:
        shift = np.maximum(shift, 0)
    _check_granularity("sigma", s, shift)
    g = np.ldexp(1.0, shift)
    n, sig = _elementwise(lambda x: (lambda q: (q, _sigma_below(q)))(math.ceil(Fraction(float(x)) ** 2)), s / g)
    return _make(lattice_kernel(sigma=np.asarray(sig, np.float64)), g, n, 0, DiscreteGaussianSampler())


def rr_lattice(mech):
    """k-ary randomized response with keep probability T/2^64, accounted at the ε it achieves.

    T is the integer ≤ 2^64 e^ε/(e^ε + k − 1); the ε achieved, ln(T (k − 1)/(2^64 − T)), is rounded up.

    Args:
      mech: a :class:`~dpjax.randomized_response.RandomizedResponse`.

    Returns:
      The :class:`ExactLattice` (g = 1; its ``noise`` the mechanism at the achieved ε).

    Raises:
      ValueError: ``epsilon`` traced.
    """
    eps = _concrete("epsilon", mech.epsilon)
    k = mech.num_categories
    t, achieved = _elementwise(lambda x: (lambda r: (np.uint64(r[0]), r[1]))(rr_keep(float(x), k)), eps)
    from dpjax.pytree import replace

    noise = replace(mech, epsilon=np.asarray(achieved, np.float64))
    return _make(noise, np.ones_like(eps), t, 0, RandomizedResponseSampler())


def _boostable(kernel):
    """The lattice sampler of an integer-noise kernel whose boosted law runs exactly (discrete Laplace or discrete
    Gaussian, as its own :meth:`exact_lattice` declares), or None for any other kernel. Asked of the kernel, not of
    its class (the kernels import this module)."""
    if not kernel.discrete:
        return None
    try:
        sampler = kernel.exact_lattice().sampler
    except ValueError:  # no exact sampler: the default hook refuses
        return None
    return sampler if sampler.boost_max_scale is not None else None


def boosted_lattice(mech):
    """PB-DP over the discrete Gaussian or discrete Laplace with an absolute-error region, run exactly.

    The boosted law itself (the kernel at its own σ or b, no rounding: the table of
    :func:`~dpjax.exact.laws.boosted.pb_icdf` is built from the float64 parameters as exact rationals) with
    the keep probability 1 − q that the accountant computes (the float64 exp(log(1 − q)), exactly). The
    mechanism accounted is ``mech`` itself.

    Args:
      mech: a :class:`~dpjax.boosting.PrivacyBoosted`.

    Returns:
      The :class:`ExactLattice` (g = 1).

    Raises:
      ValueError: a kernel other than the discrete Gaussian or discrete Laplace, a region other than
        :class:`~dpjax.regions.AbsoluteError`, parameters traced or not one for all records, or a scale
        above the sampler's ``boost_max_scale``.
    """
    from dpjax.regions import AbsoluteError

    name = type(mech).__name__
    kernel = mech.kernel
    sampler = _boostable(kernel)
    if sampler is None:
        raise ValueError(
            f"numerics='exact': {name} has an exact sampler only over DiscreteGaussian or "
            f"DiscreteLaplace kernels, got {type(kernel).__name__}"
        )
    if not isinstance(mech.region, AbsoluteError):
        raise ValueError(
            f"numerics='exact': {name} has an exact sampler only with an AbsoluteError region (its "
            f"boosted noise law does not depend on the answer), got {type(mech.region).__name__}"
        )
    scale = _concrete(kernel.scale_name, getattr(kernel, kernel.scale_name))
    for pname, x in (
        (kernel.scale_name, scale),
        ("tau", _concrete("tau", mech.region.tau)),
        ("rho", _concrete("rho", mech.rho)),
    ):
        if np.size(x) != 1:
            raise ValueError(f"numerics='exact': {name} needs one {pname} for all records, got shape {np.shape(x)}")
    top = sampler.boost_max_scale
    if float(scale) > top:
        raise ValueError(
            f"{kernel.scale_name} must be at most {top:g} for an exact {name} release, got {float(scale)!r}"
        )
    with jax.enable_x64(True):
        noise = jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), mech)
    return _make(noise, 1.0, 0, 0, BoostedSampler())


# -- the release ------------------------------------------------------------------------------
def nearest_index(x):
    """⌊x + ½⌋ of numpy or jax float arrays, exactly (the lattice index of x = v/g; g a power of two makes x exact).

    Args:
      x: a numpy or jax float array.

    Returns:
      Floats of ``x``'s kind; the caller casts them to its integer width.
    """
    f = np.floor(x) if isinstance(x, np.ndarray) else jnp.floor(x)
    return f + (x - f >= 0.5)


def _lattice_coordinate(v, g, inv_g=None):
    """v/g in float64 (exact: g is a power of two), or v·inv_g with ``inv_g`` = 1/g (a normal power of two: the same
    value; a product fuses into its consumers where a per-record division would be computed apart)."""
    return v.astype(jnp.float64) / g if inv_g is None else v.astype(jnp.float64) * inv_g


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
def _prefix_table(sampler: IntegerSampler):
    """The noise of every 16-bit word prefix of the one-word table samplers, or None where no such table serves.

    For a fixed top bit (the sign) the samplers map the word's low 63 bits v to |Z| = #{k : T[k] ≤ v} (a count of
    thresholds below v, monotone in v), so a prefix p, which holds the words [p 2^48, p 2^48 + 2^48 − 1], decides
    Z when the sampler gives the same unflagged noise at both ends: no threshold lies between them, and every word
    of the prefix, whatever its 48 further bits, draws that noise (the sampler flags a word only at a threshold's
    value, an equal high half, or past the table, all of them between the ends). Entry p is that noise, or
    ``_UNDECIDED`` (int32 [2^16]). None for a sampler that is not :attr:`~IntegerSampler.prefixable` (the discrete
    Laplace's several-word scales, τ > 2^10; randomized response) and where fewer than :data:`PREFIX_MIN_DECIDED` of
    the prefixes decide (large scales: the thresholds spread over most prefixes)."""
    if not sampler.prefixable:
        return None
    low = np.arange(1 << PREFIX_BITS, dtype=np.uint64) << np.uint64(64 - PREFIX_BITS)
    ends = np.stack([low, low | np.uint64((1 << (64 - PREFIX_BITS)) - 1)])
    with jax.enable_x64(True):
        z, flag = (np.asarray(a).reshape(2, -1) for a in _noise_of_words(ends.reshape(1, -1), sampler=sampler))
    decided = (z[0] == z[1]) & ~flag[0] & ~flag[1]
    if decided.mean() < PREFIX_MIN_DECIDED:
        return None
    return np.where(decided, z[0], _UNDECIDED).astype(np.int32)


@functools.partial(jax.jit, static_argnames=("sampler",))
def _noise_of_words(table, *, sampler):
    """The one-scale ``sampler``'s noise of the words ``table`` (uint64 [1, n]), in one compiled program (eager, its
    few dozen operations would compile one by one)."""
    return sampler.noise(_WordTable(table), None, ())


@functools.partial(jax.jit, static_argnames=("categorical", "g", "unit", "out_dtype"))
def _prefix_lattice(table, prefixes, values, *, categorical, g, unit, out_dtype):
    """The release of records whose words begin with ``prefixes`` (uint16): the noise looked up in the prefix table
    (:func:`_prefix_table`), the sentinel where the prefix does not decide it."""
    z = table.at[prefixes].get(mode="promise_in_bounds")  # (a uint16 index is in bounds: no clamp)
    return _finish_noise(z, z == _UNDECIDED, values, categorical, g, unit, out_dtype)


def _prefix_release(bits, table, values, sampler, g, unit, out_dtype):
    """A one-scale release from ``bits`` (:class:`HostBits`) reading two bytes per record: (out, word_of).

    Each record reads its word's top 16 bits (:meth:`HostBits.prefixes`); the prefix table gives its noise, except
    for the records whose prefix does not decide it (about 0.1 % at scale 3), which read 48 more bits (their word is
    ``prefix << 48 | fresh``: the same uniform word) and run the one-word sampler on the device, compacted to a
    power of two. Every record's noise is the sampler's on a uniform 64-bit word: the law of the whole-word
    release. The records that sampler flags keep the sentinel for the host completion, whose ``word_of(i)`` gives
    the completed word 0 and fresh words after it."""
    pre = bits.prefixes(values.shape[0])
    out = _prefix_lattice(
        jnp.asarray(table),
        jax.device_put(pre, may_alias=True),
        values,
        categorical=sampler.categorical,
        g=g,
        unit=unit,
        out_dtype=out_dtype,
    )
    idx = _flagged(out, values.shape[0])
    first = {}
    if idx.size:
        count = idx.size
        pad = padded(idx)
        fresh = bits.words((count,)) & np.uint64((1 << (64 - PREFIX_BITS)) - 1)
        words = (pre[idx].astype(np.uint64) << np.uint64(64 - PREFIX_BITS)) | fresh
        first = dict(zip(idx.tolist(), words.tolist()))
        table_words = np.append(words, np.repeat(words[-1:], pad.size - count))[None, :]
        part = _fast_lattice(
            jnp.asarray(table_words),
            jnp.uint32(0),
            take(values, jnp.asarray(pad)),
            sampler=sampler,
            g=g,
            unit=unit,
            out_dtype=out_dtype,
        )
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


@functools.partial(jax.jit, static_argnames=("sampler", "g", "unit", "out_dtype"))
def _fast_lattice(source, start, values, records=None, *, sampler, g, unit, out_dtype):
    """The one-scale lattice release of the flat ``values`` (sharded or not) in one program: the noise of the one-scale
    ``sampler`` (:class:`~dpjax.exact.sampler.IntegerSampler`), the lattice output, and the sentinel for the rare
    flagged records. ``source``: the key's Threefry pair (uint32 [2]) or a table of host words (uint64 [words per
    record, records]); ``records``: the records' indices (default ``start, start + 1, ...``)."""
    words = _words(source, start, values, records)
    # one program whatever the values (no branch on them: the release's work does not depend on the data)
    z, flag = sampler.noise(words, values, ())
    return _finish_noise(z, flag, values, sampler.categorical, g, unit, out_dtype)


def _words(source, start, values, records):
    """The word source of a release program: a table of host words, or Threefry words of the key pair ``source`` at
    the records ``records`` (default ``start, start + 1, ...``)."""
    if source.ndim == 2:
        return _WordTable(source)
    words = ThreefryWords(None, (values.shape[0],), start, pair=source)
    if records is not None:
        words.records = records
    return words


@functools.partial(jax.jit, static_argnames=("sampler", "unit", "out_dtype"))
def _per_record_lattice(source, start, values, params, g, records=None, *, sampler, unit, out_dtype):
    """The lattice release of per-record parameters ``params`` (any number of distinct values: a tuple of arrays over
    the records, or 0-d) and granularities ``g`` in one program, like :func:`_fast_lattice`, by the per-record
    ``sampler`` — which may build the records' lattice in the program itself (:meth:`IntegerSampler.prepare`: the
    Laplace scales b). ``records``: the records' indices (default ``start, start + 1, ...``)."""
    sampler, params, g, inv_g = sampler.prepare(params, g)
    words = _words(source, start, values, records)
    z, flag = sampler.noise(words, values, params)
    return _finish_noise(z, flag, values, sampler.categorical, g, unit, out_dtype, inv_g)


def _finish_noise(z, flag, values, categorical, g, unit, out_dtype, inv_g=None):
    """The output of the noise ``z`` (or category, ``categorical``: randomized response) and the ``flag`` of the records
    that await the host: the category or the lattice value, and the sentinel for the flagged records and for answers
    off the index range (the host refuses the release). ``inv_g``: 1/g (:func:`_lattice_coordinate`)."""
    if categorical:
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
    rows = np.asarray(_block_rows(out, jnp.asarray(padded(blocks))))[: blocks.size]
    b, c = np.nonzero(rows)
    idx = blocks[b] * _FLAG_BLOCK + c
    return idx[idx < n]


def _fast_release(key, start, values, sampler, g, unit, out_dtype, records=None, params=None):
    """A lattice release by ``sampler`` (:class:`~dpjax.exact.sampler.IntegerSampler`): one device program over the
    records (sharded over the local devices for large inputs: the noise of record i is a function of (key, i) and
    integer-only, so the release is bitwise the same on any number of devices); the rare flagged records completed
    exactly on the host by the sampler's :meth:`~dpjax.exact.sampler.IntegerSampler.complete`.

    ``params``: None for a one-scale sampler (:func:`_fast_lattice`, granularity ``g`` a number), else its per-record
    parameters (:func:`_per_record_lattice`, not sharded unless every one is 0-d; ``g`` a number, an array over the
    records or None where the program builds it). ``records``: the (global) record indices of ``values`` when they are
    a group of a batch (not sharded). A :class:`HostBits` key feeds whole words, or, for the one-word samplers of one
    scale, 16-bit word prefixes (:func:`_prefix_release`). The flagged records are found on the device
    (:func:`_flagged`); those a float32 decision leaves open go through its :meth:`~IntegerSampler.fallback` first, on
    the device; the host completes the rest."""
    n = values.size
    flat = values.reshape(-1)
    rec = None if records is None else np.asarray(records, np.uint32)
    host_bits = isinstance(key, HostBits)
    prefix = _prefix_table(sampler) if host_bits and params is None and n >= PREFIX_MIN_RECORDS else None
    if prefix is not None:  # os.urandom words, two bytes for most records
        out, word_of = _prefix_release(key, prefix, flat, sampler, g, unit, out_dtype)
    elif host_bits:  # os.urandom words, made here for every record and fed to the device
        words = key.words((sampler.words_per_record, n))
        source = jax.device_put(words, may_alias=True)  # (os.urandom's buffer is aligned: no copy on a CPU)
        word_of = _host_streams(key, lambda j, i: int(words[j, i]) if j < words.shape[0] else None)
    else:
        source = key_pair(key)
        devices = jax.local_devices()  # (this process's: a multi-process release runs each shard apart)
        if (
            len(devices) > 1
            and n >= SHARD_MIN_RECORDS
            and rec is None
            and (params is None or all(np.ndim(a) == 0 for a in params))
        ):  # (one scale as 0-d arrays)
            flat = _shard(jnp.pad(flat, (0, -n % (LANE_BLOCK * len(devices)))), devices)
        k0, k1 = (int(w) for w in np.asarray(source))

        def word_of(i):
            r = start + i if rec is None else int(rec[i])
            return lambda j: table_samplers.threefry_word(k0, k1, j, r)

    fallback = sampler.fallback()
    if prefix is None and params is None:
        out = _fast_lattice(
            source,
            jnp.uint32(start),
            flat,
            None if rec is None else jnp.asarray(rec),
            sampler=sampler,
            g=g,
            unit=unit,
            out_dtype=out_dtype,
        )
    elif prefix is None:
        on_device = tuple(jnp.asarray(a) for a in params)
        g_device = None if g is None else jnp.asarray(g)
        if sampler.transcendental and not table_samplers.transcendentals_trusted("float64"):
            # the float64 decision's error bound fails on this backend: every record decided on the host
            out, fallback = jnp.full(flat.shape[0], _sentinel(out_dtype), out_dtype), None
        else:
            out = _per_record_lattice(
                source, jnp.uint32(start), flat, on_device, g_device, sampler=sampler, unit=unit, out_dtype=out_dtype
            )
    idx = _flagged(out, n)
    if idx.size and fallback is not None:  # the float32 decision's open records (a few per 10^4): the float64 program
        pad = jnp.asarray(padded(idx))
        sub = _per_record_lattice(
            source if source.ndim == 1 else _take_columns(source, pad),
            jnp.uint32(start),
            take(values, pad),
            tuple(take(a, pad) for a in on_device),
            None if g_device is None else take(g_device, pad),
            jnp.uint32(start) + pad.astype(jnp.uint32),
            sampler=fallback,
            unit=unit,
            out_dtype=out_dtype,
        )
        out = _put(out, pad, sub)
        idx = idx[np.asarray(_sentinel_mask(sub))[: idx.size]]
    if idx.size:
        pad = padded(idx)
        v = np.asarray(take(values, jnp.asarray(pad)))[: idx.size]
        at, gi = ((), g) if params is None else sampler.at(params, g, idx, n)
        if not unit and v.size:
            _refuse_off_index(v, gi)
        z = np.asarray(
            [
                sampler.complete(word_of(int(i)), int(x), tuple(a[pos] for a in at))
                for pos, (i, x) in enumerate(zip(idx, v))
            ],
            np.int64,
        )
        last = pad.size - idx.size
        out = _patch(
            out,
            jnp.asarray(pad),
            jnp.asarray(np.append(v, np.repeat(v[-1:], last))),
            jnp.asarray(np.append(z, np.repeat(z[-1:], last))),
            jnp.asarray(gi if np.ndim(gi) == 0 else np.append(gi, np.repeat(gi[-1:], last))),
            categorical=sampler.categorical,
            unit=unit,
            out_dtype=out_dtype,
        )
    out = out if out.shape[0] == n else out[:n]
    return out.reshape(values.shape)


@jax.jit
def _take_columns(x, idx):
    return x[:, idx]


@functools.partial(jax.jit, donate_argnums=0)
def _put(out, idx, fixed):
    """``out`` (donated: updated in place, not copied) with the records ``idx`` set to ``fixed``."""
    return out.at[idx].set(fixed)


@functools.partial(jax.jit, static_argnames=("categorical", "unit", "out_dtype"), donate_argnums=0)
def _patch(out, idx, v, z, g, *, categorical, unit, out_dtype):
    """``out`` (donated) with the host-completed records ``idx`` (noise ``z``, answers ``v``) set to their outputs
    (padded entries repeat the last record: the same value written twice)."""
    fixed = z.astype(out_dtype) if categorical else _lattice_value(v, z, g, unit, out_dtype)
    return out.at[idx].set(fixed)


#: the noise scale may reach the output's largest value over 2^this (a float output, an integer one): |noise| beyond
#: it has probability below e^-512 (Laplace tails; Gaussian ones far below), and a float output keeps the float tier's
#: bound
_RANGE_BITS_FLOAT, _RANGE_BITS_INT = 16, 9


def _check_output_range(lat, param, shift, g, out_dtype):
    """Refuse a scale whose noise would overflow the output dtype (±inf, or wrapped integers)."""
    dt = np.dtype(out_dtype)
    floating = bool(np.issubdtype(dt, np.floating))
    top = float(np.finfo(dt).max) if floating else float(np.iinfo(dt).max)
    hi = top * 2.0 ** -(_RANGE_BITS_FLOAT if floating else _RANGE_BITS_INT)
    p = np.asarray(param, np.float64)
    scale = lat.sampler.noise_scale(p, shift) * g
    if scale.size and np.max(scale) > hi:
        wider = (
            "float values, or int64 ones inside jax.enable_x64(True)"
            if not floating
            else "float64 values inside jax.enable_x64(True)"
        )
        hint = f"; release {wider}" if dt.itemsize < 8 else ""
        raise ValueError(
            f"{lat.noise.scale_name} must be at most {hi:.3g} for numerics='exact' with {dt} output (the "
            f"noise would overflow it{hint}), got {float(np.max(scale)):.3g}"
        )


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


@functools.partial(jax.jit, static_argnames=("stride",))
def _scale_summary(b, *, stride):
    """Every ``stride``-th scale and the smallest and largest (float64, exact), in one small program over b in its
    own dtype (no float64 copy of the scales)."""
    flat = b.reshape(-1)
    return flat[::stride], jnp.min(flat).astype(jnp.float64), jnp.max(flat).astype(jnp.float64)


def _device_laplace_scales(mech):
    """The per-record scales b of a Laplace or discrete Laplace ``mech`` (its ``exact_lattice_scale`` hook), a device
    array, when its exact release builds their lattice parameters in the device program — more than
    :data:`MAX_SCALE_GROUPS` distinct values (on a strided sample, as :func:`_scale_groups`), the Laplace's all at
    least :data:`DEVICE_LAPLACE_MIN` — with the host lattices of the smallest and the largest (which refuse scales
    out of range, as a host lattice of all would); otherwise None (the lattice is built on the host). The scales
    keep their own dtype (the device program converts them)."""
    if mech.exact_lattice_scale is None:
        return None
    b = mech.exact_lattice_scale()
    if is_traced(b) or np.ndim(b) == 0 or np.size(b) <= MAX_SCALE_GROUPS:
        return None
    from dpjax.pytree import replace

    with jax.enable_x64(True):
        b = jnp.asarray(b)
        probe, lo, top = _scale_summary(b, stride=max(1, b.size // 4096))
        if len(np.unique(np.asarray(probe))) <= MAX_SCALE_GROUPS:
            return None
        lo, top = np.float64(lo), np.float64(top)
        if not mech.discrete and lo < DEVICE_LAPLACE_MIN:
            return None
        return b, replace(mech, scale=lo).exact_lattice(), replace(mech, scale=top).exact_lattice()


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

        def lattice_of(b):
            return replace(mech, scale=b).exact_lattice()

        small = bool(np.ldexp(1.0, int(low_lat.shift)) <= float(low_lat.param) * 2.0**-8)
        narrow = bool(mech.discrete) and float32_range([low_lat.param, top_lat.param], [low_lat.shift, top_lat.shift])
        narrow = narrow and table_samplers.transcendentals_trusted("float32")  # (the platform check, once)
        sampler = LaplaceScales(small, narrow, integer=bool(mech.discrete), lattice_of=lattice_of)
        return _fast_release(key, start, values, sampler, None, unit, out_dtype, params=(b.reshape(-1),))


def _device_rr_epsilon(mech):
    """The per-record ε of a randomized response ``mech`` (its ``exact_lattice_epsilon`` hook), a float32 or float64
    device array, with the distinct bit patterns of a sample of them
    (:func:`~dpjax.exact.laws.randomized_response.sample_positions`), when its exact release looks the keep
    thresholds up in a table: concrete float ε, more than one, at most
    :data:`~dpjax.exact.laws.randomized_response.RR_TABLE_MAX` distinct in the sample; otherwise None (the host
    lattice)."""
    if mech.exact_lattice_epsilon is None:
        return None
    eps = mech.exact_lattice_epsilon()
    if is_traced(eps) or np.size(eps) <= 1 or not jnp.issubdtype(jnp.result_type(eps), jnp.floating):
        return None
    with jax.enable_x64(True):
        eps = jnp.asarray(eps)
        eps = eps if eps.dtype in (jnp.float32, jnp.float64) else eps.astype(jnp.float32)  # (exact: a wider float)
        flat = eps.reshape(-1)
        sample = np.unique(np.asarray(flat[jnp.asarray(sample_positions(flat.size))]))
    if sample.size > RR_TABLE_MAX:
        return None
    return eps, sample.view(np.uint32 if sample.dtype == np.float32 else np.uint64)


def _release_rr_epsilon(key, start, values, mech, eps, bits, in_dt):
    """The release of a randomized response with per-record ε (:func:`_device_rr_epsilon`): only the ε move to the
    device program, which looks each record's keep threshold up in an
    :class:`~dpjax.exact.laws.randomized_response.RRTable` of the distinct values
    (the thresholds of :func:`rr_lattice`, so the output is bitwise that of the host lattice) and flags the
    records whose ε it misses; the host completes a few of them, or adds the missed values and runs again (the
    same words: the records already right are unchanged). None (the host lattice runs) when the values outgrow
    :data:`~dpjax.exact.laws.randomized_response.RR_TABLE_MAX`."""
    with jax.enable_x64(True):
        eps = jnp.broadcast_to(eps, values.shape).reshape(-1)
        while bits.size <= RR_TABLE_MAX:
            table = RRTable(bits, mech.num_categories)
            sampler = RandomizedResponseLookup(mech.num_categories - 1, table=table)
            try:
                return _fast_release(
                    key,
                    start,
                    values,
                    sampler,
                    1.0,
                    True,
                    jnp.dtype(in_dt),
                    params=(eps, table.table, table.multiplier),
                )
            except TableMiss as miss:  # (values not yet in the table: each round grows it)
                bits = np.union1d(bits, miss.bits)
    return None


def release_exact(key, values, mech: Mechanism, *, start: int = 0, flat: bool = False):
    """``dpjax.release(key, values, mech, numerics="exact")``: ``mech.exact_lattice()`` run on integer-only noise.

    The release branches on the layout only: one scale (the fused fixed-trip release), a few distinct scales
    (that release per scale), or per-record parameters (one program); the rare records a device program
    flags are completed exactly on the host. See the module docstring for the lattice.

    Args:
      key: a Threefry key (reproducible: the noise of record i is a function of (key, i)) or a
        :class:`~dpjax.exact.bits.HostBits` (``os.urandom`` words, not reproducible).
      values: the true answers (any shape).
      mech: a mechanism with an exact sampler (``mech.exact_lattice()`` does not refuse), or an
        :class:`ExactLattice`.
      start: the record index of ``values[0]`` (flat), for releases in slices.
      flat: ``values`` are already the records (``sample_records``): the finiteness check is skipped.

    Returns:
      Points of gℤ with the shape of ``values`` (integers for integer values on g = 1, categories for
      randomized response).

    Raises:
      ValueError: ``mech`` not a dpjax mechanism or without an exact sampler; ``key`` neither a Threefry key
        nor :class:`~dpjax.exact.bits.HostBits`; ``values`` not finite, outside the mechanism's domain or its
        lattice index range; ``start`` negative or ``start`` + the number of records past 2**32; parameters
        traced; a scale whose noise would overflow the output dtype.
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
    g_own, param_own, shift_own = (
        np.asarray(lat.granularity, np.float64),
        np.asarray(lat.param),
        np.asarray(lat.shift),
    )
    law = lat.sampler
    g = np.broadcast_to(g_own, shape)
    out_float = in_dt if jnp.issubdtype(in_dt, jnp.floating) else default_float()
    param = np.broadcast_to(param_own, shape)
    shift = np.broadcast_to(shift_own, shape)
    if law.noise_scale(param_own, shift_own) is not None:  # (randomized response and boosted laws have no range)
        _check_output_range(lat, param_own, shift_own, g_own, in_dt if integer and np.all(g_own == 1.0) else out_float)
    unit = bool(integer and np.all(g_own == 1.0)) or law.categorical  # integers on ℤ (or categories): no float
    out_dt = jnp.dtype(in_dt if unit else out_float)
    if not n:  # no records (a flat release of an empty batch): the output dtype of any other batch
        return jnp.zeros(shape, out_dt)
    one_scale = all(np.all(a == a.flat[0]) for a in (param_own, shift_own, g_own) if a.size)
    # the release branches on the layout only: one scale, a few scales (groups), or per-record parameters
    per_record = law.per_record_only(param_own, shift_own)
    groups = None if one_scale or per_record else _scale_groups(shape, param_own, shift_own, g_own)
    with jax.enable_x64(True):
        if groups is not None:  # a few distinct scales: the fixed-trip release of each, on its records
            flat_v = values.reshape(-1)
            out = np.empty(n, out_dt)
            for first, idx in groups:
                m = 1 << max(int(idx.size - 1).bit_length(), 0)  # padded to a power of two: few compilations
                pad = np.concatenate([idx, np.full(m - idx.size, idx[-1])])
                sampler = law.one_scale(lat, int(param.flat[first]), int(shift.flat[first]))
                part = _fast_release(
                    key, start, flat_v[pad], sampler, float(g.flat[first]), unit, out_dt, records=start + pad
                )
                out[idx] = np.asarray(part)[: idx.size]
            out = jnp.asarray(out).reshape(shape)
        elif per_record or not one_scale:  # any number of scales (one program, per-record parameters)
            sampler, params, g_run = law.per_record(lat, param, shift, g, one_scale)
            out = _fast_release(key, start, values, sampler, g_run, unit, out_dt, params=params)
        else:  # one scale: the fused fixed-trip release
            sampler = law.one_scale(lat, int(param.flat[0]), int(shift.flat[0]))
            out = _fast_release(key, start, values, sampler, float(g.flat[0]), unit, out_dt)
    return out.reshape(()) if squeeze else out
