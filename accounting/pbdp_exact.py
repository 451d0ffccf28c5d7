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
both directions — and the exact single-release ε at a given δ, in float64. Where the
mechanism's pairs sample a path of answers (``pair_path``: relative and fixed regions)
the worst case is the supremum along the path, bounded by :func:`accounting._pair_path.worst_case`
(bisection around the best grid pair at every ε or order, plus the last step's change),
not the grid's maximum, which sits up to ~1e-3 relative below it with the default 201
answers. These are the fast exact paths, the tuner's objective (:mod:`optimize`) and the
oracles for the discretised accountant (``accounting.pld`` / ``accounting.rdp`` use the
same hooks and the same path bound, and compose by FFT).

Everything here is exact (no discretisation of the output or loss): δ(ε) is the true
hockey-stick divergence of the mechanism's output laws.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from accounting._numerics import to64, x64
from accounting._pair_path import worst_case
from dpjax.validation import check_positive, check_probability, check_real
from dpjax.boosting import PrivacyBoosted

__all__ = ["privacy_profile", "epsilon_for_delta", "rdp", "worst_pair", "worst_case"]


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


def _check_directions(directions):
    if directions not in ("both", "forward"):
        raise ValueError(f"directions must be 'both' or 'forward', got {directions!r}")


@functools.partial(jax.jit, static_argnums=(4, 5, 6))
def _worst_case_jit(m, x, values, nvalues, kind, directions, path):
    return worst_case(m, kind, x, values, nvalues, directions=directions, path=path)


@x64
def privacy_profile(mech, epsilon, *, sensitivity=1.0, pairs=None, directions="both"):
    """Exact δ(ε) of one release: the worst case over pairs and both directions of the
    hockey-stick divergence (the supremum along the answers for relative / fixed regions).

    ``pairs``: optional ``(values, neighbour_values)`` replacing the mechanism's grid
    (e.g. the spec's Q ∈ [−40, 40] step 0.5; exactly those pairs are examined).
    ``directions="forward"`` examines only ``δ(P_value‖P_neighbour)`` (the pair as given).
    Single (unbatched) mechanisms; any real ε.
    """
    check_real("epsilon", epsilon)
    _check_directions(directions)
    m, values, nvalues = _setup(mech, sensitivity, pairs)
    eps = jnp.asarray(epsilon, jnp.float64)
    return _worst_case_jit(m, eps, values, nvalues, "hockey_stick", directions, pairs is None)[0]


@x64
def worst_pair(mech, epsilon, *, sensitivity=1.0, pairs=None):
    """``(value, neighbour_value, δ)``: the ordered pair whose hockey-stick divergence at
    ``epsilon`` is largest (on the answers' path for relative / fixed regions) and its δ."""
    check_real("epsilon", epsilon)
    m, values, nvalues = _setup(mech, sensitivity, pairs)
    eps = jnp.asarray(epsilon, jnp.float64)
    _, (v, nv) = _worst_case_jit(m, eps, values, nvalues, "hockey_stick", "both", pairs is None)
    forward, backward = float(m.hockey_stick(eps, v, nv)), float(m.hockey_stick(eps, nv, v))
    return (float(v), float(nv), forward) if forward >= backward else (float(nv), float(v), backward)


@x64
def epsilon_for_delta(mech, delta, *, sensitivity=1.0, pairs=None, lower=-1.0, upper=200.0, iterations=80):
    """Smallest ε with exact δ(ε) ≤ ``delta`` (bisection on the monotone worst-case profile; float64).

    Returns ``lower`` if δ(lower) ≤ delta already; ``inf`` if δ(upper) > delta (e.g. q = 1 with strips).
    """
    check_probability("delta", delta, high_open=True)
    m, values, nvalues = _setup(mech, sensitivity, pairs)
    args = (jnp.float64(delta), jnp.float64(lower), jnp.float64(upper), iterations)
    return float(_bisect_epsilon(m, values, nvalues, *args, path=pairs is None))


@functools.partial(jax.jit, static_argnums=(6,), static_argnames=("path",))
def _bisect_epsilon(m, values, nvalues, delta, lower, upper, iterations, path=True):
    # one call site of the profile (compile time): steps 0 and 1 probe the bracket ends
    def body(i, s):
        lo, hi, ok_lo, bad_hi = s
        e = jnp.where(i == 0, lower, jnp.where(i == 1, upper, 0.5 * (lo + hi)))
        bad = worst_case(m, "hockey_stick", e, values, nvalues, path=path)[0] > delta
        ok_lo = jnp.where(i == 0, ~bad, ok_lo)
        bad_hi = jnp.where(i == 1, bad, bad_hi)
        lo = jnp.where((i > 1) & bad, e, lo)
        hi = jnp.where((i > 1) & ~bad, e, hi)
        return lo, hi, ok_lo, bad_hi

    _, root, ok_lo, bad_hi = jax.lax.fori_loop(0, iterations + 2, body, (lower, upper, False, False))
    return jnp.where(ok_lo, lower, jnp.where(bad_hi, jnp.inf, root))


@x64
def rdp(mech, orders, *, sensitivity=1.0, pairs=None, directions="both"):
    """Exact Rényi divergence at ``orders`` (> 1): the worst case over pairs and both
    directions (the supremum along the answers for relative / fixed regions)."""
    check_real("orders", orders)
    _check_directions(directions)
    m, values, nvalues = _setup(mech, sensitivity, pairs)
    a = jnp.asarray(orders, jnp.float64)
    return _worst_case_jit(m, a, values, nvalues, "renyi", directions, pairs is None)[0]
