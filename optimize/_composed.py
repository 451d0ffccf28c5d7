"""Tuning against the exact T-fold composition: ``accounting.pld(mech).self_compose(T)``.

The discretised PLD needs static grid sizes taken from concrete parameters, so this
path runs the searches of :mod:`optimize._search` step by step in Python (each
objective evaluation is one jit-compiled PLD build + one FFT power), setting by
setting. The derivative for the gradient method is ``jax.jvp`` through the PLD (the
mechanism's closed-form hooks are differentiable); where that is not finite (the
discretised grid's own rounding) a central difference in ``u`` stands in.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import accounting
from optimize import _search

#: central-difference step in u when the PLD's derivative is unavailable.
_FD_STEP = 1e-4


def _mech(make, p, u):
    return make(p, p["sigma_ref"] * jnp.exp(u))


def _widen(a, b, margin=0.25):
    """Union of two plan directions ``(k0, n, ng)``, widened by ``margin`` of its length."""
    if a is None or b is None:
        return None
    k0 = min(a[0], b[0])
    stop = max(a[0] + a[1], b[0] + b[1])
    pad = int(margin * (stop - k0))
    return (k0 - pad, stop - k0 + 2 * pad, max(a[2] + a[0], b[2] + b[0]) - k0 + pad)


def _shared_grid(make, cfg, p, h, lower, upper):
    """One static plan and FFT size for the whole search (so each PLD build hits the jit cache).

    The union of the grids at both ends of the search range, widened by 25%; a loss
    range that still escapes it is carried to the +∞ atom by the accountant (sound).
    """
    plans, sizes = [], []
    for u in (lower, upper):
        mech = _mech(make, p, jnp.float64(u))
        plans.append(accounting.make_plan(mech, sensitivity=p["sensitivity"], value_discretization_interval=h))
    a, b = plans
    plan = accounting.Plan(a.step, _widen(a.remove, b.remove), _widen(a.add, b.add), a.cells, a.count, a.klo)
    for u in (lower, upper):
        dist = accounting.pld(
            _mech(make, p, jnp.float64(u)), sensitivity=p["sensitivity"], value_discretization_interval=h, plan=plan
        )
        sizes.append(dist.self_compose(cfg.compositions).remove.size)
    return plan, max(sizes)


def _epsilon(make, cfg, p, u, h, grid):
    plan, size = grid
    dist = accounting.pld(_mech(make, p, u), sensitivity=p["sensitivity"], value_discretization_interval=h, plan=plan)
    return dist.self_compose(cfg.compositions, size=size).get_epsilon_for_delta(p["target"])


def _value_and_slope(make, cfg, p, u, h, grid, lower, upper):
    try:
        e, g = jax.jvp(lambda x: _epsilon(make, cfg, p, x, h, grid), (u,), (jnp.ones_like(u),))
        e, g = float(e), float(g)
    except Exception:  # noqa: BLE001 - any failure of the autodiff path falls back to differences
        e, g = float(_epsilon(make, cfg, p, u, h, grid)), float("nan")
    if not np.isfinite(g):
        lo, hi = max(float(u) - _FD_STEP, lower), min(float(u) + _FD_STEP, upper)
        g = (
            float(_epsilon(make, cfg, p, jnp.float64(hi), h, grid))
            - float(_epsilon(make, cfg, p, jnp.float64(lo), h, grid))
        ) / (hi - lo)
    return e, g


def _one(make, cfg, p, h):
    lower, upper = 0.0, float(p["u_max"])
    grid = _shared_grid(make, cfg, p, h, lower, upper)
    if cfg.method == "ternary":
        lo, hi = lower, upper
        for _ in range(cfg.iterations):
            u1, u2 = lo + (hi - lo) / 3.0, hi - (hi - lo) / 3.0
            if float(_epsilon(make, cfg, p, jnp.float64(u1), h, grid)) > float(
                _epsilon(make, cfg, p, jnp.float64(u2), h, grid)
            ):
                lo = u1
            else:
                hi = u2
        u, steps = 0.5 * (lo + hi), cfg.iterations
    else:
        a, b, u = lower, upper, min(max(cfg.start, lower), upper)
        if cfg.scan:  # as _search.grid_cell: the local search runs in the best grid point's cell
            points = np.linspace(lower, upper, cfg.scan)
            k = int(np.argmin([float(_epsilon(make, cfg, p, jnp.float64(x), h, grid)) for x in points]))
            a, b, u = points[max(k - 1, 0)], points[min(k + 1, cfg.scan - 1)], points[k]
        opt = _search.scale_by_bracket(a, b, tol=cfg.tol)
        u = jnp.float64(u)
        state = opt.init(u)
        steps = 0
        while steps < cfg.max_steps:
            e, g = _value_and_slope(make, cfg, p, u, h, grid, a, b)
            upd, state = opt.update(jnp.float64(g), state, u, value=jnp.float64(e))
            steps += 1
            new = jnp.clip(u + upd, a, b)
            if abs(float(new - u)) <= cfg.tol:
                u = new
                break
            u = new
        u = float(u)
    value = float(_epsilon(make, cfg, p, jnp.float64(u), h, grid))
    base = float(_epsilon(make, cfg, p, jnp.float64(0.0), h, grid))
    if np.isfinite(float(p["sigma_base"])):
        # u = 0 is the plain kernel (boosting rate 0): its own PLD is the baseline's figure. The boosted
        # mechanism's coarse shared grid (no pure-ε cap) reads it higher, which would let a tuned
        # mechanism worse than the plain kernel pass as better
        plain = accounting.pld(
            p["kernel"].with_scale(p["sigma_base"]), sensitivity=p["sensitivity"], value_discretization_interval=h
        )
        base = min(base, float(plain.self_compose(cfg.compositions).get_epsilon_for_delta(p["target"])))
    if value > base:  # never worse than the plain kernel (u = 0)
        u, value = 0.0, base
    return u, value, base, steps


def solve(make, cfg, flat, h):
    """Tune every setting of the flat batch ``flat``; returns arrays ``(u, value, base, steps)``.
    ``make(p, sigma)``: the mechanism of setting ``p`` with its kernel at scale ``sigma``."""
    n = flat["rho"].shape[0]
    out = [_one(make, cfg, jax.tree_util.tree_map(lambda v: v[i], flat), h) for i in range(n)]
    u, value, base, steps = (np.asarray(c) for c in zip(*out))
    return jnp.asarray(u), jnp.asarray(value), jnp.asarray(base), jnp.asarray(steps, jnp.int32)
