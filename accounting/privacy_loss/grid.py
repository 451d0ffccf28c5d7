"""Privacy-loss pmfs on a power-of-two loss grid: construction, FFT composition, queries.

A :class:`GridPmf` holds one direction of a PLD: mass ``probs[..., i]`` at loss
``(offset + i) * step``, plus an atom at +∞ (``inf_mass``). ``step`` and the length
are static; ``offset`` is an integer-valued float64 array (per batch element), so a
batch of PLDs shares shapes but not positions. ``roundoff`` is an estimate of the
absolute error of δ computed from this pmf (float64 FFT round-off), used to refuse
queries whose answer would be dominated by it.

Everything here is pure ``jnp`` (jit/vmap/grad-able). Static sizes are decided by the
callers (:mod:`accounting.pld`) from concrete values.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from accounting._numerics import EPS64, as64, leaf64, next_fast_len, safe_log, take_last
from dpjax.validation import concrete, is_traced
from dpjax.pytree import pytree_dataclass, static_field

#: largest absolute error of the first mass read from the gaps (:func:`connect_the_dots`); above it the first
#: mass is what the other masses leave of 1
_GAP_TOLERANCE = 1e-9
#: Chernoff orders (times 1/len) used to bound the tails of a T-fold composition.
_CHERNOFF_T = np.concatenate([-np.geomspace(1e-3, 60.0, 28), np.geomspace(1e-3, 60.0, 28)])


@pytree_dataclass
class GridPmf:
    """One direction of a privacy-loss distribution on a loss grid of spacing ``step``.

    Mass ``probs[..., i]`` sits at loss ``(offset + i) * step``, plus an atom ``inf_mass`` at +∞.

    Args:
      probs: masses of shape batch + (n,).
      offset: grid index of the first mass, an integer-valued float64 array of the batch shape.
      inf_mass: the mass at +∞, of the batch shape.
      roundoff: estimated absolute error of δ computed from this pmf, of the batch shape.
      step: the grid spacing (static).
    """

    probs: jax.Array  # (..., n)
    offset: jax.Array  # (...,) integer-valued float64
    inf_mass: jax.Array  # (...,)
    roundoff: jax.Array  # (...,) estimated absolute error of δ
    step: float = static_field()

    @property
    def size(self) -> int:
        return self.probs.shape[-1]

    @property
    def batch_shape(self):
        return self.probs.shape[:-1]


# ----------------------------------------------------------------------------------
# construction: connect-the-dots from a privacy profile on the grid
# ----------------------------------------------------------------------------------
def _cummin(x, reverse=False, xp=jnp):
    """Cumulative minimum along the last axis (from the top with ``reverse``); ``xp=numpy`` on the host."""
    if xp is jnp:
        return jax.lax.cummin(x, axis=x.ndim - 1, reverse=reverse)
    if reverse:
        return np.flip(np.minimum.accumulate(np.flip(x, -1), axis=-1), -1)
    return np.minimum.accumulate(x, axis=-1)


def connect_the_dots(deltas, gaps, step: float, xp=jnp):
    """Masses of the PLD whose privacy profile interpolates ``deltas`` (δ at ε_i = (k0+i)·step).

    The profile of a PLD is convex in e^ε, so the chord through its values at grid
    points lies above it: the result dominates (pessimistic). ``gaps`` are
    g_i = δ(ε_i) − (1 − e^{ε_i}) = e^{ε_i} δ_reverse(−ε_i), the same profile seen from the
    other side: an interior mass is a second difference in e^ε, to which the linear
    part 1 − e^ε contributes nothing, so masses where δ ≈ 1 and ε < 0 are taken from g
    (small, accurate) instead of δ (whose 1e-16 absolute error would be amplified by 1/step);
    at ε > 0, where g ≈ e^ε, from δ.
    Returns ``(probs, inf_mass, clipped)``: negative masses (round-off noise of the second
    differences, or profile values that are not exactly convex — an envelope of pairs bounded
    point by point) are paid from the positive mass just below them (:func:`_pay_down`), which
    keeps the total and only raises δ; ``clipped`` is their total magnitude. ``xp=numpy``: concrete
    profile values on the host (no derivative).

    Args:
      deltas: profile values δ(ε_i), shape batch + (n,).
      gaps: the gaps g_i at the same ε_i, shape batch + (n,).
      step: the grid spacing.
      xp: ``jax.numpy``, or ``numpy`` for concrete values on the host.

    Returns:
      ``(probs, inf_mass, clipped)`` as described above.
    """
    d = _cummin(xp.clip(deltas, 0.0, 1.0), xp=xp)
    g = xp.maximum(gaps, 0.0)
    em1 = math.expm1(step)
    e = math.exp(step)

    def interior(v):
        dv = xp.diff(v, axis=-1)
        return (dv[..., 1:] - dv[..., :-1] * e) / em1

    # g is the small one only where e^ε < 1 (ε < 0); at large ε it grows like e^ε (and overflows)
    small_g = g < d
    use_g = (d[..., 1:-1] > 0.5) & small_g[..., 1:-1] & small_g[..., :-2] & small_g[..., 2:]
    mid = xp.where(use_g, interior(xp.where(small_g, g, 0.0)), interior(d))
    # the gap formula subtracts gaps of size ~e^{ε_0}: its absolute error ~ε64·g/step exceeds the first mass
    # itself once the grid starts well above 0 (at ε_0 = 424 it read 7.6e170, and every composition overflowed)
    finite = (xp.isfinite(g[..., :2]) & (g[..., :2] * (8.0 * EPS64 / em1) <= _GAP_TOLERANCE)).all(-1, keepdims=True)
    g01 = xp.where(finite, g[..., :2], 0.0)
    p0 = -g01[..., :1] + (g01[..., 1:2] - g01[..., :1]) / em1
    last = -(d[..., -1:] - d[..., -2:-1]) * e / em1
    # the first mass is at least what the others leave of 1: all P-mass below the grid is lifted to its
    # first point. From the gap alone (the other side's normalisation) an envelope of pair profiles
    # (not itself a profile) can leave less, and mass dropped at the bottom lowers composed δ (PB-DP
    # relative Laplace: total 0.99996 at 2^-11, ε(1e-6) × 50 12.78 against 12.93 at 2^-13). Where the gap is
    # not accurate (a grid starting far above 0) the rest is all the first mass is.
    rest = 1.0 - d[..., -1:] - xp.sum(mid, -1, keepdims=True) - last
    p0 = xp.where(finite, xp.maximum(p0, rest), xp.maximum(rest, 0.0))
    p = xp.concatenate([p0, mid, last], axis=-1)
    neg = -xp.sum(xp.minimum(p, 0.0), axis=-1)
    if xp is np:
        return _pay_down(p, np), d[..., -1], neg
    # the pay-down's derivative is the signed mass's: a zero mass (a cell between a discrete law's
    # atoms, at ±round-off) may be the one an atom is moving into, and a zero derivative there would
    # lose the mass it takes from its other neighbour (the discrete Gaussian's ε read −1957 for −1.07)
    return p + jax.lax.stop_gradient(_pay_down(p) - p), d[..., -1], neg


def _pay_down(p, xp=jnp):
    """Masses ≥ 0 from signed ones, each negative mass cancelled against the positive mass nearest
    below it (what cannot be paid, at the bottom, is dropped to 0: added mass).

    Cancelling −m at loss ℓ_j against +m at ℓ_i < ℓ_j is moving mass m up from ℓ_i to ℓ_j: δ(ε)
    rises at every ε and the total stays. Clipping instead (setting −m to 0) adds mass m, and a
    PLD with more than probability 1 inflates every composition (mass^k). Greedy from the top, the
    deficit carried below index i is the Lindley recursion D_i = max(D_{i+1} − p_i, 0), i.e.
    D_i = S_i − min_{k≥i} S_k with S_i = −Σ_{k≥i} p_k (sums from the top: the small upper-tail
    masses stay exact)."""
    s = -_rcumsum(p, xp)
    zero = xp.zeros(p.shape[:-1] + (1,), p.dtype)
    s_next = xp.concatenate([s[..., 1:], zero], -1)  # S_{i+1} (S_n = 0)
    low = _cummin(xp.concatenate([s, zero], -1), reverse=True, xp=xp)
    d = s - low[..., :-1]  # deficit below i
    d_next = s_next - low[..., 1:]  # deficit arriving at i from above
    paid = xp.clip(d_next - d, 0.0, xp.maximum(p, 0.0))
    return xp.where(p > 0, xp.maximum(p - paid, 0.0), 0.0)


def from_profile(deltas, gaps, k0, step: float, xp=jnp):
    """GridPmf from profile values (and gaps, see :func:`connect_the_dots`) at ε_i = (k0 + i)·step;
    ``xp=numpy``: concrete values on the host.

    Args:
      deltas: profile values δ(ε_i), shape batch + (n,).
      gaps: the gaps at the same ε_i (:func:`connect_the_dots`).
      k0: grid index of ε_0 (the pmf's offset).
      step: the grid spacing.
      xp: ``jax.numpy``, or ``numpy`` for concrete values on the host.

    Returns:
      The dominating :class:`GridPmf`.
    """
    probs, inf, _ = connect_the_dots(deltas, gaps, step, xp)
    n = probs.shape[-1]
    # The PLD reproduces the profile values at the grid points exactly (clipping only adds
    # mass), so its δ error is that of the profile values, ~ε·√n, although single masses
    # carry ~ε/step noise (second differences of O(1) values).
    roundoff = 8.0 * EPS64 * math.sqrt(n) + xp.zeros_like(inf)
    offset = xp.broadcast_to(xp.asarray(k0, np.float64), inf.shape)
    return GridPmf(probs, offset, inf, roundoff, step)


def coarsen(pmf: GridPmf, factor: int, xp=jnp) -> GridPmf:
    """The same PLD on the grid of step ``factor``·step (``factor`` a static power of two).

    A mass p at ℓ between coarse points a < ℓ ≤ b = a + S is split into w·p at b and (1 − w)·p at a
    with w = (1 − e^{a−ℓ}) / (1 − e^{−S}): Σp and Σp·e^{−ℓ} are kept (both laws stay normalised) and
    the profile δ(ε) = Σ p (1 − e^{ε−ℓ})_+, linear in e^ε on each atom's side, becomes its chord
    between a and b — above it (convexity in e^ε): connect-the-dots of this PLD on the coarser grid,
    dominating, with δ unchanged at the coarse grid points. The mean loss rises by ≤ S²/8 per
    composition, so a step well below the loss scale costs little. ``xp=numpy``: a concrete pmf
    (numpy leaves) on the host.

    Args:
      pmf: the grid pmf.
      factor: the ratio of the new step to the old one (a static power of two).
      xp: ``jax.numpy``, or ``numpy`` for a concrete pmf on the host.

    Returns:
      The coarsened :class:`GridPmf` (``pmf`` itself when ``factor`` is 1).
    """
    if factor == 1:
        return pmf
    n = pmf.size
    # fine index i sits at (offset + i)·s; the coarse cell of i starts at floor((offset + i)/factor)
    r = xp.mod(pmf.offset, float(factor))  # position of index 0 inside its coarse cell
    nb = -(-(n + factor - 1) // factor) + 1
    flat = pmf.probs.reshape(-1, n)
    shifts = xp.broadcast_to(r, pmf.inf_mass.shape).reshape(-1)
    if xp is np:
        blocks = np.zeros((flat.shape[0], nb * factor))
        for i, sh in enumerate(shifts.astype(np.int64)):
            blocks[i, sh : sh + n] = flat[i]
        blocks = blocks.reshape(-1, nb, factor)
    else:

        def place(p, sh):  # p at fine index i → padded index i + r, then (cells, factor)
            pad = jnp.zeros(nb * factor, p.dtype)
            return jax.lax.dynamic_update_slice_in_dim(pad, p, sh, 0).reshape(nb, factor)

        blocks = jax.vmap(place)(flat, shifts.astype(jnp.int32))
    s = pmf.step
    j = xp.arange(factor, dtype=np.float64)
    w = -xp.expm1(-j * s) / -math.expm1(-factor * s)  # share sent up to b (0 at ℓ = a)
    up = xp.sum(blocks * w, -1)
    down = xp.sum(blocks, -1) - up
    probs = down + xp.concatenate([xp.zeros_like(up[:, :1]), up[:, :-1]], -1)
    probs = probs.reshape(pmf.batch_shape + (nb,))
    offset = (pmf.offset - r) / factor
    # the exact split keeps the round-off of the fine δ at every coarse grid point
    return GridPmf(probs, offset, pmf.inf_mass, pmf.roundoff, s * factor)


def disjoint(pmf: GridPmf, apart) -> GridPmf:
    """``pmf`` with every batch member where ``apart`` replaced by the PLD of two laws with disjoint
    supports (all mass at +∞: δ = 1 at every ε).

    Args:
      pmf: the grid pmf.
      apart: boolean mask broadcasting with the batch shape.

    Returns:
      The :class:`GridPmf` with the masked members replaced.
    """
    apart = jnp.broadcast_to(apart, pmf.inf_mass.shape)
    return GridPmf(
        jnp.where(apart[..., None], 0.0, pmf.probs),
        pmf.offset,
        jnp.where(apart, 1.0, pmf.inf_mass),
        pmf.roundoff,
        pmf.step,
    )


# ----------------------------------------------------------------------------------
# queries
# ----------------------------------------------------------------------------------
def _rcumsum(x, xp=jnp):
    """Reverse cumulative sum along the last axis (faster on CPU than jnp.cumsum of a flip;
    lax.associative_scan runs faster still but compiles far slower); ``xp=numpy`` on the host."""
    if xp is np:
        return np.flip(np.cumsum(np.flip(x, -1), -1), -1)
    return jax.lax.cumsum(x, axis=x.ndim - 1, reverse=True)


def _suffix_sums(pmf: GridPmf, xp=jnp):
    """A_j = Σ_{i≥j} p_i and B_j = Σ_{i≥j} p_i e^{-(i-j)·step}, j = 0..n-1 (both ≥ 0).

    B uses reverse cumulative sums of p_i e^{-k·step} inside chunks of K entries with
    K·step ≤ 512 (no under/overflow), chained across chunks by a short scan.
    """
    p = pmf.probs
    n = p.shape[-1]
    step = pmf.step
    a = _rcumsum(p, xp)
    k_len = int(min(n, max(1, math.floor(512.0 / step))))
    nb = -(-n // k_len)
    if nb == 1:
        k = xp.arange(n, dtype=p.dtype) * step
        b = xp.exp(k) * _rcumsum(p * xp.exp(-k), xp)
        return a, b
    pad = xp.pad(p, [(0, 0)] * (p.ndim - 1) + [(0, nb * k_len - n)]).reshape(p.shape[:-1] + (nb, k_len))
    k = xp.arange(k_len, dtype=p.dtype) * step
    local = _rcumsum(pad * xp.exp(-k), xp)  # Σ_{k'≥k} p e^{-k' s}
    decay = math.exp(-k_len * step)

    def chain(nxt, r0):  # B at the start of the next chunk → B at the start of this one
        return r0 + decay * nxt, nxt

    firsts = xp.moveaxis(local[..., 0], -1, 0)
    if xp is np:
        nxt, after = np.zeros(p.shape[:-1]), np.empty_like(firsts)
        for c in range(nb - 1, -1, -1):
            nxt, after[c] = chain(nxt, firsts[c])
    else:
        _, after = jax.lax.scan(chain, jnp.zeros(p.shape[:-1]), firsts, reverse=True)
    after = xp.moveaxis(after, 0, -1)[..., None]  # B at the start of the following chunk
    b = xp.exp(k) * local + xp.exp(k - k_len * step) * after  # (k is a loss: index · step)
    return a, b.reshape(p.shape[:-1] + (nb * k_len,))[..., :n]


def _at(arr, j, xp=jnp):
    """``arr[..., j]`` for batched indices j in [0, n], with arr[..., n] = 0."""
    n = arr.shape[-1]
    if xp is np:
        shape = np.broadcast_shapes(arr.shape[:-1], j.shape[:-1])
        idx = np.broadcast_to(np.minimum(j, n - 1), shape + j.shape[-1:])
        got = np.take_along_axis(np.broadcast_to(arr, shape + arr.shape[-1:]), idx, axis=-1)
        return np.where(j < n, got, 0.0)
    return jnp.where(j < n, take_last(arr, jnp.minimum(j, n - 1)), 0.0)


def _host(pmf: GridPmf) -> GridPmf:
    """``pmf`` with numpy leaves (a concrete pmf read on the host)."""
    return jax.tree_util.tree_map(lambda x: np.asarray(x, np.float64), pmf)


def on_host(fn, pmf: GridPmf, *args, **kwargs) -> GridPmf:
    """A grid operation run on the host: a composition or coarsening that compiles nothing.

    Args:
      fn: a function of this module taking ``xp`` (:func:`self_compose`, :func:`coarsen`).
      pmf: a concrete grid pmf.
      *args: ``fn``'s other arguments.
      **kwargs: ``fn``'s keyword arguments.

    Returns:
      ``fn(pmf, *args, xp=numpy, **kwargs)`` with float64 JAX leaves.
    """
    with np.errstate(all="ignore"):  # overflowed masses read as such (round-off ∞), as the compiled route
        out = fn(_host(pmf), *args, xp=np, **kwargs)
    with jax.enable_x64(True):
        return jax.tree_util.tree_map(leaf64, out)


def delta_for_epsilon(pmf: GridPmf, eps, xp=jnp):
    """δ(ε) = m_∞ + Σ_i p_i (1 - e^{ε - ℓ_i})_+ of a grid pmf.

    Args:
      pmf: the grid pmf.
      eps: ε of shape (..., m), broadcasting with the batch.
      xp: ``numpy`` for a concrete pmf on the host (nothing compiled), else one compiled program.

    Returns:
      δ of shape batch + (m,), in [0, 1].
    """
    if xp is jnp:
        return _delta_for_epsilon_jit(pmf, eps)
    return _delta_for_epsilon(_host(pmf), np.asarray(eps, np.float64), np)


def _delta_for_epsilon(pmf, eps, xp):
    a, b = _suffix_sums(pmf, xp)
    n = pmf.size
    off = pmf.offset[..., None]
    # first grid index whose loss is > eps
    j = xp.clip(xp.floor(eps / pmf.step - off) + 1.0, 0, n).astype(np.int32)
    lj = (off + j) * pmf.step
    val = _at(a, j, xp) - xp.exp(xp.minimum(eps - lj, 0.0)) * _at(b, j, xp)
    return xp.clip(pmf.inf_mass[..., None] + xp.maximum(val, 0.0), 0.0, 1.0)


_delta_for_epsilon_jit = jax.jit(functools.partial(_delta_for_epsilon, xp=jnp))


def epsilon_for_delta(pmf: GridPmf, delta, xp=jnp):
    """The smallest ε ≥ 0 with δ(ε) ≤ ``delta`` (exact for the discrete PLD).

    The value is an explicit function of the masses on its grid cell, so autodiff through it is the
    implicit-function derivative of δ(ε) = delta.

    Args:
      pmf: the grid pmf.
      delta: δ of shape (..., m), broadcasting with the batch.
      xp: ``numpy`` for a concrete pmf on the host (the same arithmetic, nothing compiled, no
        derivative), else one compiled program.

    Returns:
      ε of shape batch + (m,) (∞ where the +∞ atom alone exceeds δ).
    """
    if xp is jnp:
        return _epsilon_for_delta_jit(pmf, delta)
    host = _host(pmf)  # read over its support (the zeros padding it on top change no answer)
    host = GridPmf(host.probs[..., : support_len(host)], host.offset, host.inf_mass, host.roundoff, host.step)
    return _epsilon_for_delta(host, np.asarray(delta, np.float64), np)


def _epsilon_for_delta(pmf, delta, xp):
    a, b = _suffix_sums(pmf, xp)
    n = pmf.size
    step = pmf.step
    inf = pmf.inf_mass[..., None]
    # δ at the grid losses ℓ_j: Σ_{i>j} p_i (1 − e^{ℓ_j−ℓ_i}) = A_j − B_j (the i = j terms cancel)
    dj = inf + xp.maximum(a - b, 0.0)  # (..., n), non-increasing
    # count of grid points with δ(ℓ_j) > delta; on (ℓ_{j*-1}, ℓ_{j*}] δ(ε) = m_∞ + A_{j*} − e^{ε−ℓ_{j*}} B_{j*}
    if xp is np:  # one δ at a time: no (n, m) array
        shape = np.broadcast_shapes(dj.shape[:-1], delta.shape[:-1])
        d = np.broadcast_to(delta, shape + delta.shape[-1:])
        jstar = np.stack([np.sum(dj > d[..., i : i + 1], axis=-1) for i in range(d.shape[-1])], -1).astype(np.int32)
    else:
        jstar = jnp.sum((dj[..., None, :] > delta[..., :, None]).astype(jnp.int32), axis=-1)
    jstar = xp.minimum(jstar, n)
    aj = _at(a, jstar, xp)
    bj = _at(b, jstar, xp)
    lj = (pmf.offset[..., None] + jstar) * step
    num = inf + aj - delta
    ok = (num > 0) & (bj > 0) & (jstar < n)
    eps = lj + safe_log(xp.where(ok, num, 1.0), xp) - safe_log(xp.where(ok, bj, 1.0), xp)
    eps = xp.where(ok, eps, lj)
    eps = xp.where(inf >= delta, np.inf, eps)
    if xp is np:
        return np.maximum(eps, 0.0)
    eps = jax.lax.stop_gradient(jnp.maximum(eps, 0.0))
    # the derivative: implicit, dε = (dδ_target − ∂δ/∂θ) / ∂δ/∂ε, both read at the grid point ℓ_i
    # below the answer's cell, where the PLD's profile is its construction's (not a chord): δ(ℓ_i)
    # and its left slope −B_i. Inside the cell the chord's derivative in θ is the mass moving
    # between its two ends, which stands still while an atom inside it moves (the atom at a
    # Laplace kernel's Δ/b read −0.33 for −1.24 composed five times)
    i = jnp.maximum(jstar - 1, 0)
    bi = jax.lax.stop_gradient(_at(b, i))
    di = inf + _at(a, i) - _at(b, i)
    live = (eps > 0) & jnp.isfinite(eps) & (bi > 0)
    t = jnp.where(live, (di - delta) / jnp.where(live, bi, 1.0), 0.0)
    return eps + (t - jax.lax.stop_gradient(t))


_epsilon_for_delta_jit = jax.jit(functools.partial(_epsilon_for_delta, xp=jnp))


def delta_with_roundoff(pmf: GridPmf, eps, pessimistic: bool, xp=jnp):
    """δ(ε) (:func:`delta_for_epsilon`) moved by the pmf's accumulated round-off to the chosen side.

    Args:
      pmf: the grid pmf.
      eps: ε of shape (..., m).
      pessimistic: move δ up (else down).
      xp: ``numpy`` for a concrete pmf on the host.

    Returns:
      δ of shape batch + (m,); a pmf without a finite round-off (overflowed) answers 1 (0 when optimistic).
    """
    d = delta_for_epsilon(pmf, eps, xp)
    r = xp.asarray(pmf.roundoff)[..., None]
    ok = xp.isfinite(r)
    if pessimistic:
        return xp.where(ok, xp.minimum(d + r, 1.0), 1.0)
    return xp.where(ok, xp.maximum(d - r, 0.0), 0.0)


def pure_epsilon(pmf: GridPmf, tol: float = 0.0):
    """Largest loss carrying mass (∞ if the +∞ atom is non-zero); of a concrete pmf read on the host
    (no program compiled per grid length).

    Args:
      pmf: the grid pmf.
      tol: masses at or below this are treated as zero.

    Returns:
      The pure ε per batch member (≥ 0, ∞ with mass at +∞).
    """
    xp = jnp if is_traced(pmf.probs) or is_traced(pmf.offset) or is_traced(pmf.inf_mass) else np
    probs, offset, inf_mass = (xp.asarray(x) for x in (pmf.probs, pmf.offset, pmf.inf_mass))
    idx = xp.arange(pmf.size, dtype=np.float64)
    last = xp.max(xp.where(probs > tol, idx, -1.0), axis=-1)
    eps = (offset + last) * pmf.step
    out = xp.where(inf_mass > 0, np.inf, xp.maximum(eps, 0.0))
    if xp is np:
        with jax.enable_x64(True):
            return as64(out)
    return out


# ----------------------------------------------------------------------------------
# composition
# ----------------------------------------------------------------------------------
def _log_mgf(probs, ts, block: int = 64, xp=jnp):
    """log Σ_i p_i e^{t i} for each order t of ``ts`` (K,), exactly (no binning slack), as one
    matmul: i = block·r + c, Σ_r e^{t·block·r} Σ_c p_{r,c} e^{t c}. |t|·n ≤ 60 keeps every
    exponential in range."""
    n = probs.shape[-1]
    block = int(min(block, n))
    nb = -(-n // block)
    pad = xp.pad(probs, [(0, 0)] * (probs.ndim - 1) + [(0, nb * block - n)]).reshape(probs.shape[:-1] + (nb, block))
    inner = xp.exp(xp.arange(block, dtype=np.float64)[:, None] * ts)  # (block, K)
    outer = xp.exp((xp.arange(nb, dtype=np.float64) * block)[:, None] * ts)  # (nb, K)
    if xp is np:
        m = np.sum(np.matmul(pad, inner) * outer, axis=-2)
    else:
        m = jnp.sum(jnp.matmul(pad, inner, precision=jax.lax.Precision.HIGHEST) * outer, axis=-2)  # (..., K)
    return safe_log(m, xp)


def chernoff_window(pmf: GridPmf, count, tail: float, xp=jnp):
    """Relative index window [lo, hi] of the ``count``-fold composition holding all but ``tail`` mass.

    Chernoff: P(S ≥ u) ≤ exp(T log M(t) − t u) (t > 0), likewise below with t < 0,
    minimised over a fixed set of orders. The moment generating function is exact
    (:func:`_log_mgf`): an upper bound on it per bin of b entries would widen the window
    by T·(b−1) indices on each side. ``count``: an int, or an integer-valued array over the
    batch (traced: one program for every count). ``xp=numpy``: a
    concrete pmf (numpy leaves) on the host.

    Args:
      pmf: the grid pmf.
      count: the number of compositions.
      tail: the mass allowed outside the window.
      xp: ``jax.numpy``, or ``numpy`` for a concrete pmf on the host.

    Returns:
      ``(lo, hi, (ts, logm))``: the window bounds and the Chernoff orders with the log moment
      generating function at them (for :func:`_tail_bound`).
    """
    n = pmf.size
    ts = xp.asarray(_CHERNOFF_T / n)
    logm = _log_mgf(pmf.probs, ts, xp=xp)  # (..., K)
    c = xp.asarray(count, logm.dtype)[..., None]
    bound = (c * logm + math.log(2.0 / tail)) / ts
    pos = ts > 0
    hi = xp.min(xp.where(pos, bound, np.inf), axis=-1)
    lo = xp.max(xp.where(pos, -np.inf, bound), axis=-1)
    top = c[..., 0] * (n - 1)
    hi = xp.clip(xp.ceil(hi), 0.0, top)
    lo = xp.clip(xp.floor(lo), 0.0, hi)
    return lo, hi, (ts, logm)


def _tail_bound(count, ts, logm, u, upper, xp=jnp):
    """Chernoff bound on P(S ≥ u) (``upper``) or P(S ≤ u) (u relative index)."""
    side = ts > 0 if upper else ts < 0
    logb = xp.where(side, xp.asarray(count)[..., None] * logm - ts * u[..., None], np.inf)
    return xp.minimum(xp.exp(xp.min(logb, axis=-1)), 1.0)


def power(spec, count, bits: int | None = None, xp=jnp):
    """``spec ** count``: ``lax.integer_pow`` for an int, square-and-multiply for an integer-valued
    array ``count`` < 2**bits (broadcast over the last axis; traced: one program for every count).
    ``xp=numpy``: the same square-and-multiply on the host (an int count too: numpy's power of a
    complex array by a large integer goes through exp/log).

    Args:
      spec: the (complex) spectrum to raise.
      count: the exponent, an int or an integer-valued array.
      bits: an upper bound on the exponent's bit length (square-and-multiply); None for an int count.
      xp: ``jax.numpy``, or ``numpy`` on the host.

    Returns:
      ``spec ** count``, elementwise.
    """
    if bits is None and xp is jnp:
        return spec**count
    if bits is None:
        bits = max(int(count), 1).bit_length()
    m = xp.asarray(count, np.float64)[..., None]

    if xp is np:  # the same products, those of a bit no member has (and squares past the last bit) skipped
        res, base = None, spec
        for _ in range(bits):
            odd = np.mod(m, 2.0) == 1.0
            if odd.any():
                prod = (np.ones_like(spec) if res is None else res) * base
                res = prod if odd.all() else np.where(odd, prod, np.ones_like(spec) if res is None else res)
            m = np.floor(m / 2.0)
            if not m.any():
                break
            base = base * base
        return np.ones_like(spec) if res is None else res

    def body(_, state):
        res, base, m = state
        odd = jnp.mod(m, 2.0) == 1.0
        return jnp.where(odd, res * base, res), base * base, jnp.floor(m / 2.0)

    return jax.lax.fori_loop(0, bits, body, (jnp.ones_like(spec), spec, m))[0]


def self_compose(
    pmf: GridPmf,
    count,
    size: int,
    tail: float,
    pessimistic: bool,
    with_width: bool = False,
    bits: int | None = None,
    xp=jnp,
):
    """``count``-fold composition by one FFT power (length ``size``, static), windowed.

    The window starts at the Chernoff lower bound; the circular convolution of length
    ``size`` aliases only mass outside the window, whose (Chernoff) bound goes to the
    +∞ atom when pessimistic (dropped when optimistic). ``count``: an int, or with ``bits``
    an integer-valued array below 2**bits (traced: the odometer of a training loop composes
    every count with one program). ``xp=numpy``: a concrete pmf (numpy leaves) composed on the host.

    Args:
      pmf: the grid pmf.
      count: the number of compositions.
      size: the FFT length (static).
      tail: the mass allowed outside the window.
      pessimistic: move the aliased mass to +∞ (else drop it).
      with_width: also return the Chernoff window's width.
      bits: an upper bound on the bit length of an array ``count``.
      xp: ``jax.numpy``, or ``numpy`` for a concrete pmf on the host.

    Returns:
      The composed :class:`GridPmf`, or ``(pmf, width)`` with ``with_width``.
    """
    n = pmf.size
    lo, hi, (ts, logm) = chernoff_window(pmf, count, tail, xp)
    spec = xp.fft.rfft(pmf.probs, n=size, axis=-1)
    out = xp.fft.irfft(power(spec, count, bits, xp), n=size, axis=-1)
    out = _roll_left(out, lo, size, xp)
    top = xp.asarray(count, lo.dtype) * (n - 1)
    end = lo + size  # first relative index outside the window
    up = xp.where(end > top, 0.0, _tail_bound(count, ts, logm, end, True, xp))
    down = xp.where(lo > 0, _tail_bound(count, ts, logm, lo - 1.0, False, xp), 0.0)
    out, roundoff = _clip_roundoff(out, pmf.roundoff, xp)
    inf = -xp.expm1(count * xp.log1p(-xp.minimum(pmf.inf_mass, 1.0)))
    if pessimistic:
        inf = inf + up + down
    res = GridPmf(out, count * pmf.offset + lo, xp.minimum(inf, 1.0), roundoff, pmf.step)
    return (res, hi - lo + 1.0) if with_width else res


def _roll_left(out, lo, size: int, xp=jnp):
    """``out[..., (lo + i) % size]`` for i < size (per batch element ``lo``): a dynamic slice of
    the doubled array (a gather is much slower on CPU)."""
    if xp is np:
        shift = np.mod(np.broadcast_to(lo, out.shape[:-1]), float(size)).astype(np.int64).reshape(-1)
        rows = out.reshape(-1, size)
        return np.stack([np.roll(r, -int(s)) for r, s in zip(rows, shift)]).reshape(out.shape)

    def one(x, l):
        sh = jnp.mod(l, float(size)).astype(jnp.int32)
        return jax.lax.dynamic_slice_in_dim(jnp.concatenate([x, x], -1), sh, size, axis=-1)

    lo = jnp.broadcast_to(lo, out.shape[:-1])
    if out.ndim == 1:
        return one(out, lo)
    flat = jax.vmap(one)(out.reshape(-1, size), lo.reshape(-1))
    return flat.reshape(out.shape)


def _clip_roundoff(out, roundoff_in, xp=jnp):
    """Clip FFT round-off negatives; estimate the δ round-off from them.

    The FFT error is two-signed noise spread over the window; where the true masses
    are ~0 (the tails, which small-δ queries read) it shows up as negative entries, so
    twice their total magnitude, plus ε·L·max(p), measures the noise floor empirically.
    ``xp``: ``jax.numpy``, or ``numpy`` for concrete masses on the host.
    """
    hold = jax.lax.stop_gradient if xp is jnp else (lambda x: x)
    neg = -xp.sum(xp.minimum(out, 0.0), axis=-1)
    floor = EPS64 * out.shape[-1] * xp.max(out, axis=-1)
    # derivative of the unclipped masses, as in :func:`connect_the_dots`; the round-off estimate is
    # an error bar, not a function of the parameters: differentiated, the noise it sums (cells an
    # atom moves into, at ±m/step) would shift the pessimistic δ − round-off (−6487 for −3.64)
    roundoff = hold(roundoff_in + 2.0 * neg + floor)
    # a pmf that overflowed (masses beyond float64) has no error bar: +∞ refuses every δ query on it
    roundoff = xp.where(xp.isfinite(out).all(-1) & xp.isfinite(roundoff), roundoff, np.inf)
    return out + hold(xp.maximum(out, 0.0) - out), roundoff


def compose(a: GridPmf, b: GridPmf, pessimistic: bool, support=None, xp=jnp) -> GridPmf:
    """Linear convolution of two pmfs on the same grid (FFT), full support. ``support`` (traced, for
    pmfs padded with zeros on top): the length of the true convolution (the unpadded lengths' sum − 1),
    above which the exact result is 0 and the FFT's round-off noise is dropped. ``xp``: ``jax.numpy``,
    or ``numpy`` for concrete pmfs composed on the host (masses as numpy arrays).

    Args:
      a: the first grid pmf.
      b: the second grid pmf, on the same grid.
      pessimistic: the side round-off is accounted on.
      support: the true convolution length of zero-padded pmfs, or None.
      xp: ``jax.numpy``, or ``numpy`` for concrete pmfs on the host.

    Returns:
      The composed :class:`GridPmf`, of length ``a.size + b.size - 1``.
    """
    size = a.size + b.size - 1
    # (on the host a 5-smooth length runs as fast as a power of two: the smallest holding the convolution)
    fft_len = next_fast_len(size) if xp is np else 1 << (size - 1).bit_length()
    fa = xp.fft.rfft(a.probs, n=fft_len, axis=-1)
    fb = xp.fft.rfft(b.probs, n=fft_len, axis=-1)
    out = xp.fft.irfft(fa * fb, n=fft_len, axis=-1)[..., :size]
    if support is not None:
        out = xp.where(xp.arange(size) < support, out, 0.0)
    out, roundoff = _clip_roundoff(out, a.roundoff + b.roundoff, xp)
    inf = 1.0 - (1.0 - a.inf_mass) * (1.0 - b.inf_mass)
    return GridPmf(out, a.offset + b.offset, xp.minimum(inf, 1.0), roundoff, a.step)


def support_len(pmf: GridPmf) -> int:
    """Concrete: one past the last index where any member of the batch has mass (1 if none): the length
    of the pmf without the zeros that pad it on top.

    Args:
      pmf: a grid pmf with concrete masses.

    Returns:
      The support length (an int).
    """
    nz = np.flatnonzero(np.any(np.asarray(pmf.probs).reshape(-1, pmf.size) != 0, axis=0))
    return int(nz[-1]) + 1 if nz.size else 1


def trim(pmf: GridPmf, start: int, stop: int, size: int, pessimistic: bool) -> GridPmf:
    """Keep indices [start, stop) of a concrete pmf (numpy masses) on a grid of ``size`` >= stop − start
    points, zeros above ``stop``; cut mass below goes up to the first kept bucket, cut mass above to
    +∞ (pessimistic) or is dropped / lumped down to the last kept one (optimistic). On the host, in
    numpy (nothing compiled per pair of lengths).

    Args:
      pmf: a grid pmf with concrete masses.
      start: first index kept.
      stop: one past the last index kept.
      size: length of the result (>= ``stop - start``).
      pessimistic: the side the cut mass is moved to.

    Returns:
      The trimmed :class:`GridPmf`.
    """
    p = np.asarray(pmf.probs)
    below, above = p[..., :start].sum(-1), p[..., stop:].sum(-1)
    kept = np.zeros(p.shape[:-1] + (size,))
    kept[..., : stop - start] = p[..., start:stop]
    inf = np.asarray(pmf.inf_mass)
    if pessimistic:
        kept[..., 0] += below
        inf = np.minimum(inf + above, 1.0)
    else:
        kept[..., stop - 1 - start] += above
    return GridPmf(kept, np.asarray(pmf.offset) + start, inf, pmf.roundoff, pmf.step)


def pad_to(pmf: GridPmf, size: int) -> GridPmf:
    """Append zero masses (losses above the support) up to length ``size`` (static); concrete masses
    are padded on the host (no program compiled per pair of lengths).

    Args:
      pmf: the grid pmf.
      size: the length to pad to (static).

    Returns:
      The padded :class:`GridPmf` (``pmf`` itself if already at least ``size`` long).
    """
    if size <= pmf.size:
        return pmf
    width = [(0, 0)] * (pmf.probs.ndim - 1) + [(0, size - pmf.size)]
    if is_traced(pmf.probs):
        probs = jnp.pad(pmf.probs, width)
    else:
        with jax.enable_x64(True):
            probs = jnp.asarray(np.pad(np.asarray(pmf.probs, np.float64), width), jnp.float64)
    return GridPmf(probs, pmf.offset, pmf.inf_mass, pmf.roundoff, pmf.step)


def trim_window(pmf: GridPmf, tail: float):
    """Static (start, stop) keeping all but ``tail``/2 mass on each side (concrete pmf).

    Args:
      pmf: a grid pmf with concrete masses.
      tail: the total mass that may be cut.

    Returns:
      ``(start, stop)`` as ints, at least two points apart.
    """
    p = np.asarray(pmf.probs).reshape(-1, pmf.size)
    c = np.cumsum(p, axis=-1)
    r = np.cumsum(p[:, ::-1], axis=-1)[:, ::-1]
    start = int(np.min(np.sum(c <= tail / 2, axis=-1)))
    stop = int(pmf.size - np.min(np.sum(r <= tail / 2, axis=-1)))
    start = min(start, pmf.size - 2)  # (a pmf whose mass is all at +∞ keeps its first two points)
    return start, min(max(stop, start + 2), pmf.size)


def required_window(pmf: GridPmf, count: int, tail: float) -> int:
    """The largest Chernoff window over the batch (static FFT length planning), on the host.

    Args:
      pmf: a grid pmf with concrete values (also under plain ``jax.grad``).
      count: the number of compositions (an int or an array over the batch).
      tail: the mass left outside the window.

    Returns:
      The window length (an int).

    Raises:
      ValueError: the pmf is traced inside ``jit``.
    """
    conc = concrete(pmf)
    if conc is None:
        raise ValueError(
            "size: the PLD is traced (inside jit); pass the FFT length (size=/sizes=) taken from a concrete run"
        )
    lo, hi, _ = chernoff_window(_host(conc), count, tail, np)
    return int(np.max(hi - lo)) + 1
