"""The noise of a table release, keyed by (key, component, group key, element).

Element ``e`` of component ``c`` for group ``g`` draws from the words addressed by ``(key, c, g, e)`` — under the
pair ``H(H(key, c), g)`` (:func:`dpjax.table.keys.derive`), the counter ``(j, e)`` — so a group's noise depends only
on (key, component, group key, element).

Two tiers (``dpjax.table.release(..., numerics=...)``):

* ``"float"`` (:func:`draw` of a kernel): the kernel's own sampler (``_sample``, the protocol's inverse
  CDF or exact-arithmetic sampler) on the uniforms of :class:`dpjax.table.keys.GroupStream`. Draws are
  laid out in rows of :data:`dpjax.mechanism.LANE_BLOCK` (padding past the real entries) so that no entry
  falls in XLA's scalar loop tail, whose ``log``/``exp`` may differ in the last bit from the vector lanes':
  a group's noise is the same bits whatever else is released.
* ``"exact"`` (:func:`draw` of ``kernel.exact_lattice()``, an :class:`~dpjax.exact.ExactLattice`): the
  integer-only release of :mod:`dpjax.exact.lattice` — the true value rounded to the lattice gℤ
  (k = ⌊x/g + ½⌋, exact: g is a power of two), plus integer noise N of the lattice's one-scale sampler (the
  fixed-trip discrete Laplace or discrete Gaussian table sampler of :mod:`dpjax.exact.laws`, the
  :class:`~dpjax.exact.sampler.IntegerSampler` a release of one scale runs) fed by
  :class:`dpjax.exact.bits.GroupWords` (the same pair and element, raw 64-bit words); the rare flagged
  entries (a tie with a threshold, a word past the table) are completed exactly on the host from further
  words of the same entry, by the same sampler's host completion. The output g·(k + N) is a point of gℤ
  whatever the data.

A quantile is the exponential mechanism over its candidates (:func:`exponential_mechanism`), drawn exactly on
both tiers: the inverse cdf of its law at a uniform ``U`` read from the words of (component, group key, element 0),
decided in float64 where ``U`` is clear of the float error bound of the cumulative weights, else on the host in
interval arithmetic (``mpmath.iv``) at growing precision and with more words of ``U`` until decided.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from mpmath.ctx_iv import MPIntervalContext

from dpjax.exact import ExactLattice, table_samplers
from dpjax.exact.bits import GroupWords
from dpjax.exact.lattice import check_index_range, nearest_index
from dpjax.mechanism import LANE_BLOCK
from dpjax.random import threefry2x32
from dpjax.table.keys import GroupStream, derive

__all__ = ["draw", "run_scale", "exponential_mechanism"]


@jax.jit
def _draw(kernel, k0, k1, elements, values):
    return kernel._sample(GroupStream(k0, k1, elements, jnp.float64), values)


@functools.partial(jax.jit, static_argnames=("sampler",))
def _noise(k0, k1, elements, *, sampler):
    """(z, flagged) of the one-scale ``sampler`` (:class:`~dpjax.exact.sampler.IntegerSampler`) on group-addressed
    words."""
    return sampler.noise(GroupWords(k0, k1, elements), None, ())


def draw(kernel, component_pair, group_words: np.ndarray, elements: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values + noise``, float64, each element's noise keyed by (component, group key, element).

    Args:
      kernel: a noise kernel (the float tier) or its ``exact_lattice()`` (the exact tier: a one-scale
        discrete Laplace or discrete Gaussian lattice).
      component_pair: the component's key pair (:meth:`dpjax.table.keys.KeyWords.component`).
      group_words: ``[G, 2]`` uint32, each group's key hash.
      elements: the element index of each value (broadcasting to ``values``).
      values: ``[G, E]`` float64, the true value of element ``elements[g, i]`` of group ``g``.

    Returns:
      float64 array of ``values``' shape; on the exact tier points of the lattice gℤ.

    Raises:
      ValueError: on the exact tier, a lattice of another sampler or of several scales, or values whose
        lattice index is out of range (:func:`dpjax.exact.lattice.check_index_range`).
    """
    k0, k1 = derive(component_pair, group_words)
    shape = values.shape
    if isinstance(kernel, ExactLattice):
        return _draw_exact(kernel, k0, k1, elements, values)
    n = values.size
    pad = -n % LANE_BLOCK or (LANE_BLOCK if n == 0 else 0)

    def rows(x, dtype):
        return np.pad(np.asarray(x, dtype).reshape(-1), (0, pad)).reshape(-1, LANE_BLOCK)

    k0 = rows(np.broadcast_to(k0[:, None], shape), np.uint32)
    k1 = rows(np.broadcast_to(k1[:, None], shape), np.uint32)
    with jax.enable_x64(True):
        out = _draw(kernel, k0, k1, rows(np.broadcast_to(elements, shape), np.uint32), rows(values, np.float64))
        out = np.asarray(out, np.float64)
    return out.reshape(-1)[:n].reshape(shape)


def _draw_exact(lat: ExactLattice, k0, k1, elements, values) -> np.ndarray:
    """The exact tier's :func:`draw`: g·(⌊x/g + ½⌋ + N), N the lattice's integer noise (module docstring)."""
    if not lat.sampler.for_tables or np.size(lat.param) != 1:
        raise ValueError(
            f"noise: the exact tier of a table release needs a one-scale discrete Laplace or discrete "
            f"Gaussian lattice, got {type(lat).__name__} (sampler {lat.sampler!r})"
        )
    shape = values.shape
    n = values.size
    g = float(np.asarray(lat.granularity))
    check_index_range(lat, values)
    index = nearest_index(np.asarray(values, np.float64).reshape(-1) / g).astype(np.int64)  # exact: g = 2^p
    size = max(LANE_BLOCK, 1 << max(n - 1, 0).bit_length())  # a power of two: few compilations

    def flat(a):
        return np.pad(np.broadcast_to(a, shape).reshape(-1).astype(np.uint32), (0, size - n))

    k0, k1, e = flat(k0[:, None]), flat(k1[:, None]), flat(elements)
    sampler = lat.sampler.one_scale(lat, int(np.asarray(lat.param)), int(np.asarray(lat.shift)))
    with jax.enable_x64(True):
        z, flag = (np.asarray(a)[:n] for a in _noise(k0, k1, e, sampler=sampler))
    z = z.astype(np.int64)
    for i in np.flatnonzero(flag):  # ties and the far tail (probability ≲ 2^-40 each): exactly, on the host
        a, b, c = int(k0[i]), int(k1[i]), int(e[i])
        z[i] = sampler.complete(lambda j, a=a, b=b, c=c: table_samplers.threefry_word(a, b, j, c), None, ())
    return ((index + z).astype(np.float64) * g).reshape(shape)


def run_scale(kernel) -> float:
    """The scale of the noise ``kernel`` adds, in the values' units.

    The kernel's scale, or for a lattice g times the scale of its integer noise as accounted (the discrete
    Laplace's t/2^p, the discrete Gaussian's σ').

    Args:
      kernel: a kernel, or its :class:`~dpjax.exact.ExactLattice`.

    Returns:
      The scale, a float.
    """
    noise = kernel.noise if isinstance(kernel, ExactLattice) else kernel
    scale = float(np.asarray(getattr(noise, noise.scale_name)))
    return scale * float(np.asarray(kernel.granularity)) if isinstance(kernel, ExactLattice) else scale


#: candidates × groups per chunk of :func:`exponential_mechanism`'s float pass
_CHUNK = 1 << 20


def _uniform_words(k0, k1, j):
    """Word ``j`` (64 bits, as two uint32 halves) of element 0 under each entry's pair: the bits ``64j … 64j + 63``
    of the entry's uniform."""
    with np.errstate(over="ignore"):
        return threefry2x32(k0, k1, np.full(np.shape(k0), j, np.uint32), np.zeros(np.shape(k0), np.uint32))


def _cdf_error(n, candidates, scale):
    """A bound on |float64 cdf − cdf| of :func:`exponential_mechanism`'s float pass: the scores' rounding (three
    operations, each within 2^-53 of ``n``) divided by β, ``exp``'s (2 ulp), the cumulative sum's (a relative
    2^-53 per term) and the normalisation's."""
    return 16 * n * 2.0**-53 / scale + 4 * candidates * 2.0**-52 + 2.0**-46


def exponential_mechanism(component_pair, group_words, below, total, q: float, scale: float) -> np.ndarray:
    """One candidate per group drawn exactly from the exponential mechanism of the quantile scores.

    Candidate ``j`` of a group has score ``u_j = −|L_j − q·n|`` (``L_j = below[g, j]``, ``n = total[g]``) and is
    drawn with probability ``exp(u_j/β)/Σ_i exp(u_i/β)`` (β = ``scale``): report-noisy-max with Gumbel noise of
    scale β, which is ε-bounded-range at ε = 2Δ/β for scores moving by at most Δ
    (:class:`dpjax.BoundedRange`). The draw is the inverse cdf at a uniform ``U`` whose bits are the words of
    (component, group key, element 0): decided in float64 when ``U``'s first 53 bits lie farther than the
    error bound ρ of the computed cdf from its two neighbouring values, otherwise on the host, exactly, in
    interval arithmetic with more bits of ``U`` until decided. The result is a function of the words and the
    integer data only.

    Args:
      component_pair: the component's key pair (:meth:`dpjax.table.keys.KeyWords.component`).
      group_words: ``[G, 2]`` uint32, each group's key hash.
      below: ``[G, C]`` int64, ``L_j``: the values below candidate ``j``.
      total: ``[G]`` int64, ``n``.
      q: the quantile's level in [0, 1].
      scale: β > 0.

    Returns:
      ``[G]`` int64, the index of each group's candidate.

    References:
      McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007. Durfee & Rogers, "Practical
      differentially private top-k selection with pay-what-you-get composition", NeurIPS 2019.
    """
    k0, k1 = derive(component_pair, group_words)
    g, c = below.shape
    hi, lo = _uniform_words(k0, k1, 0)
    u = (hi.astype(np.float64) * 2.0**21 + (lo >> 11).astype(np.float64)) * 2.0**-53  # U ∈ [u, u + 2^-53)
    out = np.empty(g, np.int64)
    step = max(_CHUNK // c, 1)
    for s in range(0, g, step):
        b = below[s : s + step].astype(np.float64)
        n = total[s : s + step].astype(np.float64)
        score = -np.abs(b - q * n[:, None])
        x = (score - score.max(axis=1, keepdims=True)) / scale
        cdf = np.cumsum(np.exp(x), axis=1)
        cdf /= cdf[:, -1:]
        us = u[s : s + step]
        j = np.minimum(np.sum(cdf <= us[:, None], axis=1), c - 1)
        rho = _cdf_error(n, c, scale)
        rows = np.arange(len(j))
        left = np.where(j > 0, cdf[rows, np.maximum(j - 1, 0)], 0.0)
        clear = (j == 0) | (left + rho <= us)
        clear &= (j == c - 1) | (us + 2.0**-53 <= cdf[rows, j] - rho)
        out[s : s + step] = j
        for i in np.flatnonzero(~clear):
            r = s + i
            out[r] = _exact_choice(int(k0[r]), int(k1[r]), below[r], int(total[r]), q, scale)
    return out


def _exact_choice(k0, k1, below, n, q, scale) -> int:
    """The smallest ``j`` with ``U·Z < S_j`` (``S_j`` the cumulative weights, ``Z`` their sum), decided in interval
    arithmetic: weights far below the largest (``exp(−T)``, ``T`` twice the working precision's range) are
    bounded by ``[0, e^{−T/2}]`` unevaluated; the precision doubles and ``U`` gains a word until the two boundaries
    around ``U·Z`` are apart from it."""
    below = [int(v) for v in below]
    approx = [-abs(v - q * n) for v in below]
    top = max(approx)
    prec, words = 128, 2
    while True:
        iv = MPIntervalContext()  # a context of its own: thread-safe
        iv.prec = prec
        cut = 2 * (prec * math.log(2) + math.log(len(below)) + 20)
        qn = iv.mpf(q) * n  # exact: 53 × 64 bits
        beta, best = iv.mpf(scale), -abs(below[approx.index(top)] - qn)
        tail = iv.exp(iv.mpf(-cut / 2))
        sums, s = [], iv.mpf(0)
        for v, a in zip(below, approx):
            if (a - top) / scale < -cut:
                w = iv.mpf([0, tail.b])
            else:
                w = iv.exp((-abs(v - qn) - best) / beta)
            s = s + w
            sums.append(s)
        bits = 0
        for j in range(words):
            hi, lo = _uniform_words(np.uint32([k0]), np.uint32([k1]), j)
            bits = (bits << 64) | (int(hi[0]) << 32) | int(lo[0])
        unit = iv.mpf([bits, bits + 1]) / iv.mpf(2) ** (64 * words)
        target = unit * s
        j = next((j for j, a in enumerate(sums) if a.a > target.b), None)
        if j is not None and (j == 0 or sums[j - 1].b <= target.a):
            return j
        prec, words = 2 * prec, words + 1
