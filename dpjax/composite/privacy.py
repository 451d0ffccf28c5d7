"""Exact privacy of the composite mechanism (docs/composite.md).

Zhang et al., "Bounded and Unbiased Composite Differential Privacy", IEEE S&P 2024, Definition 3.3.

The guarantee is local-DP-like: any two answers of the window at distance ≤ Δ are
neighbours (with Δ ≥ W, every pair of the window). Three results, all traceable:

* :func:`epsilon_star` — the true worst-case pointwise loss
  ``ε* = sup_{pairs} sup_x ln(P_v(x)/P_v'(x))``. The base ``G`` does not depend on the
  answer, so for a fixed output ``x`` the pair problem separates into the largest and the
  smallest bump value at ``x`` over the admissible bump positions (the "1-D reduction"):
  ``ε* = sup_x ln((G + H_max(x))/(G + H_min(x)))``. A1: ``ln(1 + k/min G)`` exactly. A2/A3:
  a fine grid plus its Lipschitz margin (never below the truth), capped by the paper's own
  sup/inf bound ``ln((y + k)/min G)`` (Theorem 3.2, never above the nominal ε).
* :func:`hockey_stick` — δ(ε) of one pair from cells: the output domain is cut at every
  point where ``G``, ``H`` or ``H'`` turns (bump ends and peaks, 0), so each is monotone in
  every cell; a cell of mass ``P_c`` whose loss is at most ``ℓ_c`` contributes at most
  ``P_c(1 − e^{ε − ℓ_c})_+``. Exact for A1B1 (piecewise-constant laws, one cell per piece:
  the three atoms ±ε, 0 of §1.7); for the others a pessimistic rounding of the loss.
* :func:`neighbour_pairs` — edge pairs ``(lo, lo + s)``. A1: one pair, the largest shift
  (proved dominant: the loss is ±ε'/0 on cells whose ±-mass grows with the shift until the
  bumps are disjoint, and B2's base is smallest at the edge). A2/A3: eight shifts at the
  edge and the centred pair of largest shift, examined as a list; their profiles grow with
  the shift and are largest at the edge up to the cells' rounding (≈1e-5, checked by
  ``tests/test_composite.py``), and every query is capped by the proved ε*.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax.composite import _laws
from dpjax.kernels.base import sort_small

__all__ = ["epsilon_star", "epsilon_star_details", "hockey_stick", "neighbour_pairs", "NUM_PATH_PAIRS"]

#: edge pairs (lo, lo + s) of A2/A3, shifts s = Δ·i/8 (plus the centred pair of shift Δ)
NUM_PATH_PAIRS = 8
#: cells per monotone piece of the pair laws (A1B1: 1, exact)
CELLS_PER_PIECE = 2048
#: output grid of the 1-D ε* reduction (its Lipschitz margin is ~ slope/2^18)
GRID_1D = 2**18
#: coarse grid (x, bump position) of the 2-D reduction (Δ < W) and its refinement
GRID_2D = (2048, 256)
REFINE_TOP = 512
REFINE_GRID = 32
#: float round-off margin added to every loss bound
_ROUND = 1e-12


def _shift(mech, sensitivity, d):
    """Largest answer distance of a neighbouring pair: min(Δ, W) (W when Δ is None)."""
    if sensitivity is None:
        return d["width"]
    return jnp.minimum(jnp.asarray(sensitivity, d["width"].dtype), d["width"])


def neighbour_pairs(mech, sensitivity=None):
    """Edge pairs of the window: A1 the single pair at ``min(Δ, W)``; A2/A3 eight shifts and the centred pair.

    Args:
      mech: a :class:`dpjax.Composite`.
      sensitivity: the largest distance of two neighbouring values (``None``: the window's width).

    Returns:
      ``(values, neighbour_values)`` with a trailing pair axis.
    """
    d = mech._derived()
    lo = d["lo"]
    delta = _shift(mech, sensitivity, d)
    if mech.activation == "rectangle":
        s = delta[..., None]
        lo = jnp.broadcast_to(lo[..., None], jnp.broadcast_shapes(jnp.shape(lo[..., None]), s.shape))
        return lo, lo + s
    s = delta[..., None] * (jnp.arange(1, NUM_PATH_PAIRS + 1, dtype=jnp.result_type(delta)) / NUM_PATH_PAIRS)
    v = jnp.concatenate([jnp.broadcast_to(lo[..., None], s.shape), (d["mid"] - 0.5 * delta)[..., None]], -1)
    return v, v + jnp.concatenate([s, delta[..., None]], -1)


def _gmin_lip(mech, d):
    """(min G, sup |G'|, sup |H'|)."""
    gmin = d["t"] if mech.base == "quartic" else d["y"]
    gslope = 4.0 * (d["y"] - d["t"]) / d["L"] if mech.base == "quartic" else 0.0 * d["y"]
    return gmin, gslope, _laws.peak_slope(mech.activation, d["k"], d["m"])


def _nominal_bound(mech, d):
    gmin, _, _ = _gmin_lip(mech, d)
    return jnp.log1p(d["k"] / gmin)


def epsilon_star(mech, sensitivity=None):
    """The true worst-case loss ε* over the window's neighbouring pairs (see the module docstring).

    Args:
      mech: a :class:`dpjax.Composite`.
      sensitivity: the largest distance of two neighbouring values (``None``: the window's width).

    Returns:
      ε*, of the mechanism's batch shape.

    Raises:
      ValueError: a batched A2/A3 mechanism (vmap over the batch instead).
    """
    shape = tuple(mech.batch_shape)
    if mech.activation == "rectangle" or not shape:
        return epsilon_star_details(mech, sensitivity)[0]
    flat = jax.tree_util.tree_map(lambda p: jnp.broadcast_to(p, shape).reshape(-1), mech)
    sens = None if sensitivity is None else jnp.broadcast_to(jnp.asarray(sensitivity), shape).reshape(-1)
    if sens is None:
        out = jax.vmap(lambda mm: epsilon_star_details(mm, None)[0])(flat)
    else:
        out = jax.vmap(lambda mm, s: epsilon_star_details(mm, s)[0])(flat, sens)
    return out.reshape(shape)


def epsilon_star_details(mech, sensitivity=None):
    """ε* and where it is attained.

    ``(ε*, x*, a*, a'*)``: the bound and where it is attained (𝓛 output point, bump starts
    of the two answers). Unbatched for A2/A3 (vmap it); batched for A1.

    Args:
      mech: a :class:`dpjax.Composite`.
      sensitivity: the largest distance of two neighbouring values (``None``: the window's width).

    Returns:
      ``(ε*, x*, a*, a'*)``.

    Raises:
      ValueError: a batched A2/A3 mechanism.
    """
    d = mech._derived()
    gmin, gslope, hslope = _gmin_lip(mech, d)
    bound = _nominal_bound(mech, d)
    L, m = d["L"], d["m"]
    a_lo, a_hi = -L, L - m
    if mech.activation == "rectangle":
        # a bump covering −L (where G is smallest) against any other position
        delta_a = _shift(mech, sensitivity, d) * d["C"] / d["s1"]
        return bound, -L + 0.0 * bound, a_lo + 0.0 * bound, jnp.minimum(a_lo + delta_a, a_hi)
    delta_a = _shift(mech, sensitivity, d) * d["C"] / d["s1"]
    full = delta_a >= (a_hi - a_lo) * (1.0 - 1e-12)

    def h(u):
        return _laws.bump(mech.activation, u, d["k"], m)

    def g(x):
        return _laws.base(mech.base, x, d["y"], d["t"], L)

    def loss_1d(x):
        best = jnp.clip(x - 0.5 * m, a_lo, a_hi)
        hmax = h(x - best)
        hmin = jnp.minimum(h(x - a_lo), h(x - a_hi))
        gx = g(x)
        return jnp.log(gx + hmax) - jnp.log(gx + hmin), best

    def loss_2d(x, a):
        al, ar = jnp.maximum(a_lo, a - delta_a), jnp.minimum(a_hi, a + delta_a)
        hl, hr = h(x - al), h(x - ar)
        gx = g(x)
        return jnp.log(gx + h(x - a)) - jnp.log(gx + jnp.minimum(hl, hr)), jnp.where(hl <= hr, al, ar)

    lip_x = 2.0 * (gslope + hslope) / gmin
    lip_a = 2.0 * hslope / gmin

    def one_d():
        xs = jnp.linspace(-1.0, 1.0, GRID_1D) * L
        val, best = loss_1d(xs)
        i = jnp.argmax(val)
        hx = 2.0 * L / (GRID_1D - 1)
        ahi = jnp.where(best[i] - a_lo > a_hi - best[i], a_lo, a_hi)
        return val[i] + 0.5 * lip_x * hx, xs[i], best[i], ahi

    def two_d():
        nx, na = GRID_2D
        hx, ha = 2.0 * L / (nx - 1), (a_hi - a_lo) / (na - 1)
        xs = jnp.linspace(-1.0, 1.0, nx) * L
        as_ = a_lo + ha * jnp.arange(na)
        val, _ = loss_2d(xs[:, None], as_[None, :])
        coarse = val + 0.5 * (lip_x * hx + lip_a * ha)
        flat = coarse.reshape(-1)
        top, idx = jax.lax.top_k(flat, REFINE_TOP + 1)
        rest = top[-1]  # every unrefined cell is below this bound
        ix, ia = idx[:-1] // na, idx[:-1] % na
        off = (jnp.arange(REFINE_GRID) + 0.5) / REFINE_GRID - 0.5
        fx = jnp.clip(xs[ix][:, None, None] + hx * off[None, :, None], -L, L)
        fa = jnp.clip(as_[ia][:, None, None] + ha * off[None, None, :], a_lo, a_hi)
        fval, fpair = loss_2d(fx, fa)
        fine = fval + 0.5 * (lip_x * hx + lip_a * ha) / REFINE_GRID
        j = jnp.argmax(fine.reshape(-1))
        return (
            jnp.maximum(fine.reshape(-1)[j], rest),
            fx.reshape(-1)[j],
            jnp.broadcast_to(fa, fval.shape).reshape(-1)[j],
            fpair.reshape(-1)[j],
        )

    if jnp.ndim(bound) != 0:
        raise ValueError("epsilon_star: A2/A3 mechanisms are evaluated one at a time (vmap over a batch)")
    # Δ < W: the pairs are a subset of the window's, so the 1-D value bounds them too
    res = jax.lax.cond(full, one_d, lambda: _better(two_d(), one_d()))
    eps = jnp.minimum(res[0] + _ROUND, bound)
    return (eps,) + tuple(res[1:])


def _better(r1, r2):
    """The tighter (smaller) of two sound bounds, with its location."""
    pick = r1[0] <= r2[0]
    return tuple(jnp.where(pick, p, q) for p, q in zip(r1, r2))


def _cells(mech, d, a, a2):
    """Cell edges (..., N + 1) cutting [−L, L] at every turning point of G, H_a, H_a2."""
    L, m = d["L"], d["m"]
    pts = [-L, a, a + 0.5 * m, a + m, a2, a2 + 0.5 * m, a2 + m, 0.0 * L, L]
    shape = jnp.broadcast_shapes(*[jnp.shape(p) for p in pts])
    b = sort_small(jnp.clip(jnp.stack([jnp.broadcast_to(p, shape) for p in pts], -1), -L[..., None], L[..., None]))
    n = 1 if (mech.activation == "rectangle" and mech.base == "uniform") else CELLS_PER_PIECE
    frac = jnp.arange(n, dtype=b.dtype) / n
    seg = b[..., :-1, None] + (b[..., 1:, None] - b[..., :-1, None]) * frac
    return jnp.concatenate([seg.reshape(shape + (-1,)), b[..., -1:]], -1)


def hockey_stick(mech, epsilon, value, neighbour_value):
    """δ(ε) of one pair of a composite mechanism: exact for A1B1, an upper bound otherwise.

    δ(ε) = ∫(p − e^ε p')_+ of the pair (value, neighbour_value): exact for A1B1, an upper
    bound otherwise (module docstring). Broadcasts ``epsilon`` (..., n) against the pair and
    the parameters (..., 1).

    Args:
      mech: a :class:`dpjax.Composite` with parameters shaped (..., 1).
      epsilon: ε, any real (array).
      value: the query value.
      neighbour_value: the neighbouring value.

    Returns:
      δ(ε), of the broadcast shape.
    """
    d = mech._derived()
    a = mech.bump_start(value, _d=d)
    a2 = mech.bump_start(neighbour_value, _d=d)
    edges = _cells(mech, d, a, a2)
    x0, x1 = edges[..., :-1], edges[..., 1:]
    ex = lambda z: z[..., None]  # noqa: E731
    k, m, y, t, L = (ex(d[n]) for n in ("k", "m", "y", "t", "L"))
    aa, bb = ex(a), ex(a2)

    def cdf(x, start):
        return _laws.base_cdf(mech.base, x, y, t, L) + _laws.bump_cdf(mech.activation, x - start, k, m)

    mass = jnp.maximum(cdf(x1, aa) - cdf(x0, aa), 0.0)
    g0, g1 = _laws.base(mech.base, x0, y, t, L), _laws.base(mech.base, x1, y, t, L)
    gmax, gmin = jnp.maximum(g0, g1), jnp.minimum(g0, g1)
    if mech.activation == "rectangle":
        xm = 0.5 * (x0 + x1)
        hp = _laws.bump(mech.activation, xm - aa, k, m)
        hq = _laws.bump(mech.activation, xm - bb, k, m)
    else:
        hp = jnp.maximum(_laws.bump(mech.activation, x0 - aa, k, m), _laws.bump(mech.activation, x1 - aa, k, m))
        hq = jnp.minimum(_laws.bump(mech.activation, x0 - bb, k, m), _laws.bump(mech.activation, x1 - bb, k, m))
    loss = jnp.log(gmax + hp) - jnp.log(gmin + hq) + _ROUND
    return _profile_from_cells(loss, mass, jnp.asarray(epsilon))


@jax.custom_jvp
def _profile_from_cells(loss, mass, eps):
    """Σ_c P_c (1 − e^{ε − ℓ_c})_+ for every ε, by sorting the cells once per pair.

    Its tangent is the sum's own, cell by cell (selects and sums): the sort's and the
    searchsorted gathers' transposes would build float64 zeros outside the accountant's x64
    context (``jax.grad`` in JAX's 32-bit mode) and fail on the dtype mismatch.
    """
    order = jnp.argsort(loss, axis=-1)
    ls = jnp.take_along_axis(loss, order, -1)
    ps = jnp.take_along_axis(mass, order, -1)
    qs = ps * jnp.exp(-ls)
    zero = jnp.zeros(ps.shape[:-1] + (1,), ps.dtype)
    sp = jnp.concatenate([jnp.flip(jnp.cumsum(jnp.flip(ps, -1), -1), -1), zero], -1)
    sq = jnp.concatenate([jnp.flip(jnp.cumsum(jnp.flip(qs, -1), -1), -1), zero], -1)
    n = ls.shape[-1]

    def core(l_, p_, q_, e):
        i = jnp.searchsorted(l_, e, side="right")
        val = p_[i] - jnp.exp(jnp.minimum(e, 700.0)) * q_[i]
        return jnp.where(i >= n, 0.0, jnp.maximum(val, 0.0))

    f = jnp.vectorize(core, signature="(n),(m),(m),(k)->(k)")
    cell_batch = ls.shape[:-1]
    out_shape = jnp.broadcast_shapes(cell_batch, eps.shape)
    if len(cell_batch) and cell_batch[-1] == 1 and eps.ndim:
        e = jnp.broadcast_to(eps, out_shape)
        return f(ls[..., 0, :], sp[..., 0, :], sq[..., 0, :], e).reshape(out_shape)
    e = jnp.broadcast_to(eps, out_shape)[..., None]
    return f(ls, sp, sq, e)[..., 0]


@_profile_from_cells.defjvp
def _profile_from_cells_jvp(primals, tangents):
    loss, mass, eps = primals
    dloss, dmass, deps = tangents
    e = eps[..., None]
    above = (loss > e) & jnp.isfinite(loss)
    w = jnp.where(above, jnp.exp(jnp.where(above, e - loss, 0.0)), 0.0)  # e^{ε − ℓ_c} on ℓ_c > ε
    dw = jnp.where(w > 0, mass * w * (dloss - deps[..., None]), 0.0)
    out = jnp.sum(jnp.where(loss > e, dmass * (1.0 - w), 0.0) + dw, -1)
    return _profile_from_cells(loss, mass, eps), out
