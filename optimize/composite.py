"""Optimal composite-mechanism parameters (spec ``composite.md`` §2.5, §3).

:func:`tune_composite` minimises the release variance of ``dpjax.Composite`` (Definition 4.1;
at the window's centre — the paper's choice, Algorithm 1 with ``C_p = 0`` — at its ends, or
averaged over it) over ``(k, m, y)`` on the DP boundary ``k = y(e^ε − 1)`` (B2: ``t = r·y``,
``r ∈ (e^{−ε}, 1]``). By scale invariance (§2.5) ``L = 1`` is fixed, so the search is over
``m = 2·sigmoid(θ)`` (and ``r``): optax Adam on ``log Var``, then safeguarded Newton steps,
``vmap``-ed over ε. The search touches no data: it has no privacy cost.

``method="paper_grid"`` is the released code's 3-stage coarse-to-fine grid (§3.3: steps
0.1, 0.01, 0.001 with float accumulation, ``checkConstraints`` feasibility, max ≤ 1), kept
for the side-by-side; :func:`closed_form_optimum` is §3.5's check (bisection on the
derivative of the closed-form canonical variance, B1).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax

from accounting._numerics import x64
from dpjax.composite import Composite, _laws
from dpjax.pytree import replace
from dpjax.validation import check_int, check_positive, check_real

__all__ = ["tune_composite", "CompositeTuning", "closed_form_optimum", "paper_grid_search", "canonical_variance"]

_OBJECTIVES = ("centre", "worst", "average")
_METHODS = ("gradient", "paper_grid")


@dataclasses.dataclass(frozen=True)
class CompositeTuning:
    """Result of :func:`tune_composite` (arrays over the ε given).

    ``mechanism``: the tuned :class:`dpjax.Composite` (batched over ε); ``variance``: the
    objective's value; ``centre_variance`` / ``worst_variance`` / ``average_variance``;
    ``baseline_variance``: Laplace(Δf/ε), ``2(Δf/ε)²``; ``ratio``: variance/baseline;
    ``h1``: H1 = S2/S1; ``closed_form``: §3.5's check (B1; ``None`` for B2 and the grid):
    ``{"m": optimal m/L by bisection, "variance": its variance, "relative_gap": ...}``.
    """

    mechanism: Composite
    variance: np.ndarray
    centre_variance: np.ndarray
    worst_variance: np.ndarray
    average_variance: np.ndarray
    baseline_variance: np.ndarray
    ratio: np.ndarray
    h1: np.ndarray
    method: str
    objective: str
    closed_form: dict | None = None


def _params(activation, base, theta, eps):
    """(k, m, y) at L = 1 on the DP boundary from the unconstrained θ = (θ_m, θ_r)."""
    s = _laws.area_factor(activation)
    m = 2.0 * jax.nn.sigmoid(theta[0])
    if base == "uniform":
        q = jnp.expm1(eps)
        y = 1.0 / (2.0 + s * m * q)
    else:
        r = jnp.exp(-eps) + (-jnp.expm1(-eps)) * jax.nn.sigmoid(theta[1])
        q = r * jnp.exp(eps) - 1.0
        y = 1.0 / (2.0 * (4.0 + r) / 5.0 + s * m * q)
    return q * y, m, y


def _objective_value(mech, objective):
    lo, hi = mech.window
    if objective == "centre":
        return mech.variance(0.5 * (lo + hi))
    if objective == "worst":
        return mech.variance(hi)
    return mech.average_variance()


def _build(template, eps, k, m, y):
    return replace(template, epsilon=eps, k=k, m=m, y=y)


def canonical_variance(activation, m, epsilon, objective="centre"):
    """§2.5's closed form (B1, L = 1, W = 1, k on the boundary):
    Var(0) = (2 + qsm)(2/3 + qs·c_σ·m³)/(q²s²m²(2 − m)²), worst + 1/(2qsm), average + 1/(6qsm)."""
    s, c = _laws.area_factor(activation), _laws.shape_variance(activation)
    q = jnp.expm1(epsilon)
    v0 = (2.0 + q * s * m) * (2.0 / 3.0 + q * s * c * m**3) / (q**2 * s**2 * m**2 * (2.0 - m) ** 2)
    extra = {"centre": 0.0, "worst": 0.5, "average": 1.0 / 6.0}[objective]
    return v0 + extra / (q * s * m)


@x64
def closed_form_optimum(activation, epsilon, objective="centre", iterations=200):
    """(m*, Var*) of the canonical closed form by bisection on d Var/dm (unimodal in m ∈ (0, 2),
    spec §2.5); W = 1 (scale Var by W²). Batched over ``epsilon``."""
    eps = jnp.asarray(epsilon, jnp.float64)
    dv = jax.grad(lambda m, e: jnp.log(canonical_variance(activation, m, e, objective)))

    def one(e):
        def body(_, lohi):
            lo, hi = lohi
            mid = 0.5 * (lo + hi)
            neg = dv(mid, e) < 0
            return jnp.where(neg, mid, lo), jnp.where(neg, hi, mid)

        lo, hi = jax.lax.fori_loop(0, iterations, body, (jnp.float64(1e-9), jnp.float64(2.0 - 1e-9)))
        m = 0.5 * (lo + hi)
        return m, canonical_variance(activation, m, e, objective)

    return jax.vmap(one)(eps.reshape(-1)) if eps.ndim else one(eps)


def _gradient(template, activation, base, eps, objective, steps, learning_rate):
    return _gradient_program(activation, base, objective, steps, float(learning_rate))(template, eps)


@functools.lru_cache(maxsize=64)
def _gradient_program(activation, base, objective, steps, learning_rate):
    """One compiled program per configuration (the window and ε are arguments)."""

    def loss(theta, e, template):
        k, m, y = _params(activation, base, theta, e)
        return jnp.log(_objective_value(_build(template, e, k, m, y), objective))

    opt = optax.adam(learning_rate)

    def solve(e, template):
        grad = lambda th, e: jax.grad(loss)(th, e, template)  # noqa: E731
        hess = lambda th, e: jax.hessian(loss)(th, e, template)  # noqa: E731
        lossf = lambda th, e: loss(th, e, template)  # noqa: E731

        theta = jnp.asarray([0.0, 3.0], jnp.float64)
        state = opt.init(theta)

        def step(carry, _):
            th, st = carry
            upd, st = opt.update(grad(th, e), st, th)
            return (optax.apply_updates(th, upd), st), None

        (theta, _), _ = jax.lax.scan(step, (theta, state), None, length=steps)

        def newton(th, _):  # safeguarded: a step is kept only if it lowers the objective
            g, h = grad(th, e), hess(th, e)
            if base == "uniform":
                d = jnp.zeros_like(th).at[0].set(-g[0] / jnp.where(h[0, 0] > 0, h[0, 0], jnp.inf))
            else:
                d = -jnp.linalg.solve(h + 1e-12 * jnp.eye(2), g)
                d = jnp.where(jnp.all(jnp.isfinite(d)) & (jnp.vdot(g, d) < 0), d, jnp.zeros_like(d))
            new = th + d
            return jnp.where(lossf(new, e) < lossf(th, e), new, th), None

        theta, _ = jax.lax.scan(newton, theta, None, length=12)
        return _params(activation, base, theta, e)

    return jax.jit(lambda template, eps: jax.vmap(lambda e: solve(e, template))(eps.reshape(-1)))


def _variance_py(activation, base, eps, k, m, y, rho2):
    """Real-unit variance (W = 1) at ρ² of arbitrary (k, m, y), or None if infeasible (the
    released ``checkConstraints``: positivity, S1 < 1, k ≤ 1 − y, DP, the bump fits)."""
    if k <= 0 or m <= 0 or y <= 0 or k > 1.0 - y:
        return None
    s1 = _laws.area_factor(activation) * k * m
    if s1 >= 1.0:
        return None
    if base == "uniform":
        if k > y * math.expm1(eps):
            return None
        t, L = y, (1.0 - s1) / (2.0 * y)
        m2 = 2.0 * y * L**3 / 3.0
    else:
        t = (y + k) * math.exp(-eps)
        if not t < y:
            return None
        L = 5.0 * (1.0 - s1) / (2.0 * (4.0 * y + t))
        m2 = 2.0 * L**3 * (4.0 * y + 3.0 * t) / 21.0
    if not m < 2.0 * L:
        return None
    cp = s1 * (L - 0.5 * m)
    c = 2.0 * cp
    return (m2 + s1 * _laws.shape_variance(activation) * m * m) / (c * c) + rho2 * (1.0 - s1) / (4.0 * s1)


def _frange(start, stop, step, inclusive):
    v = start
    while (v <= stop) if inclusive else (v < stop):
        yield v
        v += step


def paper_grid_search(activation, base, epsilon, objective="centre"):
    """The released 3-stage grid (spec §3.3) for one ε: returns (k, m, y), W = 1."""
    rho2 = {"centre": 0.0, "worst": 1.0, "average": 1.0 / 3.0}[objective]
    best = (math.inf, None)

    def scan(ys, ks, ms, best):
        for y in ys:
            if y <= 0:
                continue
            for k in ks:
                for m in ms:
                    v = _variance_py(activation, base, epsilon, k, m, y, rho2)
                    if v is not None and v < best[0]:
                        best = (v, (k, m, y))
        return best

    best = scan(list(_frange(0.0, 1.0, 0.1, False)), list(_frange(0.0, 1.0, 0.1, False)),
                list(_frange(0.1, 2.0, 0.1, True)), best)
    for step in (0.01, 0.001):
        k0, m0, y0 = best[1]
        w = 10 * step
        best = scan(list(_frange(y0 - w, y0 + w, step, True)), list(_frange(k0 - w, k0 + w, step, True)),
                    list(_frange(m0 - w, m0 + w, step, True)), best)
    return best[1]


def tune_composite(epsilon, *, window, activation="rectangle", base="uniform", objective="centre",
                   method="gradient", sensitivity=None, steps=300, learning_rate=0.05) -> CompositeTuning:
    """Composite parameters of least variance at each ``epsilon`` (scalar or 1-D array).

    ``window``: ``(lo, hi)`` of the query values; ``sensitivity``: Δf of the Laplace baseline
    (default the window's width, the paper's comparison). ``objective``: ``"centre"``
    (Var at the window's centre, the paper's), ``"worst"`` (its ends), ``"average"`` (uniform
    over the window). ``method``: ``"gradient"`` (default) or ``"paper_grid"``.
    """
    activation = _laws.canonical_activation(activation)
    base = _laws.canonical_base(base)
    if objective not in _OBJECTIVES:
        raise ValueError(f"objective must be one of {_OBJECTIVES}, got {objective!r}")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    check_positive("epsilon", epsilon)
    try:
        lo, hi = (float(x) for x in window)
    except (TypeError, ValueError):
        raise ValueError(f"window must be a pair of numbers (lo, hi), got {window!r}") from None
    check_real("window", np.asarray([lo, hi]))
    if not hi > lo:
        raise ValueError(f"window must have lo < hi, got {window!r}")
    if sensitivity is not None:
        check_positive("sensitivity", sensitivity)
    steps = check_int("steps", steps, minimum=0)
    check_positive("learning_rate", learning_rate)
    eps_np = np.asarray(epsilon, np.float64)
    with jax.enable_x64(True):
        template = Composite(activation, base, 1.0, 0.1, 0.5, 0.3, window=(jnp.float64(lo), jnp.float64(hi)))
        template = jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), template)
        eps = jnp.asarray(eps_np.reshape(-1))
        if method == "gradient":
            k, m, y = _gradient(template, activation, base, eps, objective, steps, learning_rate)
        else:
            kmy = np.asarray([paper_grid_search(activation, base, float(e), objective) for e in eps_np.reshape(-1)])
            k, m, y = (jnp.asarray(kmy[:, i]) for i in range(3))
        mech = _build(template, eps, k, m, y)
        mid = 0.5 * (lo + hi)
        centre, worst, avg = mech.variance(mid), mech.variance(hi), mech.average_variance()
        var = {"centre": centre, "worst": worst, "average": avg}[objective]
        df = (hi - lo) if sensitivity is None else float(sensitivity)
        baseline = 2.0 * (df / eps) ** 2
        closed = None
        if base == "uniform" and method == "gradient":
            m_cf, v_cf = closed_form_optimum(activation, eps, objective)
            v_cf = v_cf * (hi - lo) ** 2
            closed = {"m": np.asarray(m_cf).reshape(eps_np.shape), "variance": np.asarray(v_cf).reshape(eps_np.shape),
                      "relative_gap": np.asarray(var / v_cf - 1.0).reshape(eps_np.shape)}
        shape = eps_np.shape
        mech = jax.tree_util.tree_map(lambda x: x.reshape(shape) if jnp.ndim(x) else x, mech)
        out = dict(variance=var, centre_variance=centre, worst_variance=worst, average_variance=avg,
                   baseline_variance=baseline, ratio=var / baseline, h1=mech.h1_rate.reshape(-1))
        out = {n: np.asarray(v).reshape(shape) for n, v in out.items()}
    return CompositeTuning(mechanism=mech, method=method, objective=objective, closed_form=closed, **out)
