"""Exact single-release privacy of privacy-boosted mechanisms (PB-DP), spec §3.8.

The closed forms live on the mechanism (:meth:`dpjax.PrivacyBoosted.hockey_stick`,
:meth:`dpjax.PrivacyBoosted.renyi_divergence`): per piece between the region
boundaries of both laws, the privacy loss is the kernel's loss plus a constant, so
the hockey-stick divergence is a sum of kernel-CDF differences cut at
``y*_j = (ε − log(c_j/c'_j)) σ²/(Q − Q') + (Q + Q')/2`` (Gaussian kernel) and the
Rényi divergence a sum of ``c_j^α c'_j^{1−α} e^K [Φ((b_j − m)/σ) − Φ((a_j − m)/σ)]``,
``m = αQ + (1−α)Q'``, ``K = α(α−1)(Q − Q')²/(2σ²)``. (Laplace and discrete kernels
have the analogous closed forms there.)

This module adds the worst case over neighbouring answers — the pairs of
:meth:`~dpjax.PrivacyBoosted.neighbour_pairs`, or any grid you pass, each pair in
both directions — and the exact single-release ε at a given δ, in float64. These
are the fast exact paths and the oracles for the discretised accountant
(``accounting.pld`` / ``accounting.rdp`` use the same hooks and compose by FFT).

Everything here is exact (no discretisation): δ(ε) is the true hockey-stick
divergence of the mechanism's output laws, maximised over the pair grid; where the
grid is one of answers (relative and fixed regions), :func:`epsilon_for_delta` and
:func:`rdp` then zoom in around the worst grid pairs and add the largest change
between neighbouring fine answers, so the reported value bounds the supremum over
answers (pessimistic by ~1e-5 relative) instead of the grid's maximum, which can sit ~5e-5 below
it with the default 201 answers.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from accounting._numerics import to64, x64
from dpjax._validation import check_positive, check_probability, check_real
from dpjax.boosting import PrivacyBoosted

__all__ = ["privacy_profile", "epsilon_for_delta", "rdp", "worst_pair"]


def _setup(mech, sensitivity, pairs):
    if not isinstance(mech, PrivacyBoosted):
        raise ValueError(f"mech must be a dpjax.PrivacyBoosted mechanism, got {type(mech).__name__}")
    check_positive("sensitivity", sensitivity)
    m = to64(mech)
    if pairs is None:
        values, nvalues = m.neighbour_pairs(jnp.asarray(sensitivity, jnp.float64))
    else:
        values, nvalues = (jnp.asarray(p, jnp.float64) for p in pairs)
    return m, jnp.atleast_1d(values), jnp.atleast_1d(nvalues)


def _pairwise(m, fn, x, values, nvalues):
    """fn(x, v, v') for every pair, both directions: shape (pairs, 2) + x.shape."""

    def one(v, nv):
        return jnp.stack([fn(x, v, nv), fn(x, nv, v)])

    return jax.vmap(one)(values.reshape(-1), nvalues.reshape(-1))


@functools.partial(jax.jit, static_argnums=(4,))
def _divergences(m, x, values, nvalues, kind):
    fn = m.hockey_stick if kind == "hockey_stick" else m.renyi_divergence
    return _pairwise(m, fn, x, values, nvalues)


def _reduce(d, directions, shape):
    if directions == "forward":
        d = d[:, :1]
    elif directions != "both":
        raise ValueError(f"directions must be 'both' or 'forward', got {directions!r}")
    return jnp.max(d.reshape((-1,) + shape), axis=0)


@x64
def privacy_profile(mech, epsilon, *, sensitivity=1.0, pairs=None, directions="both"):
    """Exact δ(ε) of one release: max over pairs and both directions of the hockey-stick divergence.

    ``pairs``: optional ``(values, neighbour_values)`` replacing the mechanism's grid
    (e.g. the spec's Q ∈ [−40, 40] step 0.5). ``directions="forward"`` examines only
    ``δ(P_value‖P_neighbour)`` (the pair as given). Single (unbatched) mechanisms; any real ε.
    """
    check_real("epsilon", epsilon)
    m, values, nvalues = _setup(mech, sensitivity, pairs)
    eps = jnp.asarray(epsilon, jnp.float64)
    return _reduce(_divergences(m, eps, values, nvalues, "hockey_stick"), directions, eps.shape)


@x64
def worst_pair(mech, epsilon, *, sensitivity=1.0, pairs=None):
    """``(value, neighbour_value, δ)``: the ordered pair whose hockey-stick divergence at ``epsilon`` is largest."""
    check_real("epsilon", epsilon)
    m, values, nvalues = _setup(mech, sensitivity, pairs)
    d = _divergences(m, jnp.asarray(epsilon, jnp.float64), values, nvalues, "hockey_stick")
    i, direction = divmod(int(jnp.argmax(d.reshape(-1))), 2)
    v, nv = float(values.reshape(-1)[i]), float(nvalues.reshape(-1)[i])
    return (v, nv, float(d[i, direction])) if direction == 0 else (nv, v, float(d[i, direction]))


@x64
def epsilon_for_delta(mech, delta, *, sensitivity=1.0, pairs=None, lower=-1.0, upper=200.0, iterations=80):
    """Smallest ε with exact δ(ε) ≤ ``delta`` (bisection on the monotone profile; float64).

    Returns ``lower`` if δ(lower) ≤ delta already; ``inf`` if δ(upper) > delta (e.g. q = 1 with strips).
    """
    check_probability("delta", delta, high_open=True)
    m, values, nvalues = _setup(mech, sensitivity, pairs)
    args = (jnp.float64(delta), jnp.float64(lower), jnp.float64(upper), iterations)
    out = _bisect_epsilon(m, values, nvalues, *args, windows=1)
    if pairs is None and values.size > 1 and bool(jnp.isfinite(out)):
        # a grid of answers: the reported ε must bound the supremum over *all* answers
        values, nvalues = _zoom(m, "hockey_stick", out, values, nvalues)
        out = jnp.maximum(out, _bisect_epsilon(m, values, nvalues, *args, windows=_ZOOM_STARTS))
    return float(out)


_ZOOM_POINTS, _ZOOM_ROUNDS, _ZOOM_STARTS = 33, 3, 4


def _zoom(m, kind, x, values, nvalues):
    """Pairs (Q, Q + d) refined around the grid's worst pairs at ``x``, as ``_ZOOM_STARTS``
    windows of ``_ZOOM_POINTS`` answers (window-major).

    The divergence need not be unimodal in the answer (it has kinks, e.g. at Q = 0 for a
    relative region), so each of the ``_ZOOM_STARTS`` worst grid answers is refined:
    every round replaces the bracket around the current worst answer by a finer one
    (d = that pair's gap); after three rounds the step is ~1e-4 of the grid's.
    """
    values, nvalues = values.reshape(-1), nvalues.reshape(-1)
    gaps = nvalues - values
    worst = jnp.max(_divergences(m, x, values, nvalues, kind), axis=1)
    out_v, out_nv = [], []
    for k in [int(i) for i in jnp.argsort(-worst)[:_ZOOM_STARTS]]:
        v, gap = values, gaps[k]
        for _ in range(_ZOOM_ROUNDS):
            lo, hi = v[max(k - 1, 0)], v[min(k + 1, v.size - 1)]
            v = jnp.linspace(lo, hi, _ZOOM_POINTS)
            k = int(jnp.argmax(jnp.max(_divergences(m, x, v, v + gap, kind), axis=1)))
        out_v.append(v)
        out_nv.append(v + gap)
    return jnp.concatenate(out_v), jnp.concatenate(out_nv)


def _window_bound(d, windows):
    """Upper bound of a divergence between the answers of each zoom window: the largest value
    plus the largest change between neighbouring answers (a kink or smooth peak between two
    answers rises above them by at most one step's change, at the windows' fine step)."""
    if windows == 1:
        return jnp.max(d)
    d = jnp.max(d, axis=1).reshape(windows, -1)
    return jnp.max(d) + jnp.max(jnp.abs(jnp.diff(d, axis=1)))


@functools.partial(jax.jit, static_argnums=(6,), static_argnames=("windows",))
def _bisect_epsilon(m, values, nvalues, delta, lower, upper, iterations, windows=1):
    # one call site of the profile (compile time): steps 0 and 1 probe the bracket ends
    def body(i, s):
        lo, hi, ok_lo, bad_hi = s
        e = jnp.where(i == 0, lower, jnp.where(i == 1, upper, 0.5 * (lo + hi)))
        bad = _window_bound(_pairwise(m, m.hockey_stick, e, values, nvalues), windows) > delta
        ok_lo = jnp.where(i == 0, ~bad, ok_lo)
        bad_hi = jnp.where(i == 1, bad, bad_hi)
        lo = jnp.where((i > 1) & bad, e, lo)
        hi = jnp.where((i > 1) & ~bad, e, hi)
        return lo, hi, ok_lo, bad_hi

    _, root, ok_lo, bad_hi = jax.lax.fori_loop(0, iterations + 2, body, (lower, upper, False, False))
    return jnp.where(ok_lo, lower, jnp.where(bad_hi, jnp.inf, root))


@x64
def rdp(mech, orders, *, sensitivity=1.0, pairs=None, directions="both"):
    """Exact Rényi divergence at ``orders`` (> 1): max over pairs and both directions."""
    check_real("orders", orders)
    m, values, nvalues = _setup(mech, sensitivity, pairs)
    a = jnp.asarray(orders, jnp.float64)
    out = _reduce(_divergences(m, a, values, nvalues, "renyi"), directions, a.shape)
    if pairs is None and values.size > 1:
        # zoom in around each order's worst grid pairs (see epsilon_for_delta)
        fine = []
        for order in a.reshape(-1):
            zv, znv = _zoom(m, "renyi", order, values, nvalues)
            d = _divergences(m, order, zv, znv, "renyi")
            fine.append(_window_bound(d[:, :1] if directions == "forward" else d, _ZOOM_STARTS))
        out = jnp.maximum(out, jnp.stack(fine).reshape(a.shape))
    return out
