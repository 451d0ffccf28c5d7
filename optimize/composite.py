"""Optimal composite-mechanism parameters.

Zhang et al., "Bounded and Unbiased Composite Differential Privacy", IEEE S&P 2024, §4.2,
Algorithms 1–2.

:func:`tune_composite` minimises the release variance of ``dpjax.Composite`` (Definition 4.1;
at the window's centre — the paper's choice, Algorithm 1 with ``C_p = 0`` — at its ends, or
averaged over it) over ``(k, m, y)`` on the DP boundary ``k = y(e^ε − 1)`` (B2: ``t = r·y``,
``r ∈ (e^{−ε}, 1]``). By scale invariance (§2.5) ``L = 1`` is fixed, so the search is over
``m = 2·sigmoid(θ)`` (and ``r``): optax Adam on ``log Var``, then safeguarded Newton steps,
``vmap``-ed over ε. The search touches no data: it has no privacy cost.

``method="paper_grid"`` is the released code's 3-stage coarse-to-fine grid (§3.3: steps
0.1, 0.01, 0.001 with float accumulation, ``checkConstraints`` feasibility, its loop bounds), kept
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
    """Result of :func:`tune_composite`.

    Arrays have the shape of the ε given.

    Attributes:
      mechanism: the tuned :class:`dpjax.Composite` (batched over ε).
      variance: the objective's value.
      centre_variance: the release variance at the window's centre.
      worst_variance: the release variance at the window's ends.
      average_variance: the release variance averaged uniformly over the window.
      baseline_variance: that of Laplace(Δf/ε), ``2(Δf/ε)²``.
      ratio: ``variance / baseline_variance``.
      h1: the rate H1 = S2/S1.
      method: ``"gradient"`` or ``"paper_grid"``, as asked.
      objective: ``"centre"``, ``"worst"`` or ``"average"``, as asked.
      closed_form: §3.5's check (B1; ``None`` for B2 and the grid):
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
    """The canonical composite mechanism's variance in closed form.

    §2.5's closed form (B1, L = 1, W = 1, k on the boundary), with q = e^ε − 1:
    Var(0) = (2 + qsm)(2/3 + qs·c_σ·m³)/(q²s²m²(2 − m)²), worst + 1/(2qsm), average + 1/(6qsm).

    Args:
      activation: the canonical activation name (``"rectangle"``, ``"half_sine"``, ``"triangle"``).
      m: the activation width m/L in (0, 2) (array).
      epsilon: ε (array, broadcast with ``m``).
      objective: ``"centre"``, ``"worst"`` or ``"average"``.

    Returns:
      The variance, of the broadcast shape of ``m`` and ``epsilon``.

    Raises:
      KeyError: an unknown ``objective``.

    References:
      Zhang et al., "Bounded and Unbiased Composite Differential Privacy", IEEE S&P 2024, §2.5.
    """
    s, c = _laws.area_factor(activation), _laws.shape_variance(activation)
    q = jnp.expm1(epsilon)
    v0 = (2.0 + q * s * m) * (2.0 / 3.0 + q * s * c * m**3) / (q**2 * s**2 * m**2 * (2.0 - m) ** 2)
    extra = {"centre": 0.0, "worst": 0.5, "average": 1.0 / 6.0}[objective]
    return v0 + extra / (q * s * m)


def _closed_form(activation, eps, objective, iterations):
    """Bisection on d log Var/dm of the canonical closed form, one ε (traceable)."""
    dv = jax.grad(lambda m, e: jnp.log(canonical_variance(activation, m, e, objective)))

    def body(_, lohi):
        lo, hi = lohi
        mid = 0.5 * (lo + hi)
        neg = dv(mid, eps) < 0
        return jnp.where(neg, mid, lo), jnp.where(neg, hi, mid)

    one = jnp.ones_like(eps)
    lo, hi = jax.lax.fori_loop(0, iterations, body, (1e-9 * one, (2.0 - 1e-9) * one))
    m = 0.5 * (lo + hi)
    return m, canonical_variance(activation, m, eps, objective)


@functools.lru_cache(maxsize=32)
def _closed_form_program(activation, objective, iterations):
    return jax.jit(jax.vmap(lambda e: _closed_form(activation, e, objective, iterations)))


@x64
def closed_form_optimum(activation, epsilon, objective="centre", iterations=200):
    """The optimal width of the canonical composite mechanism and its variance.

    Bisection on d Var/dm of :func:`canonical_variance` (unimodal in m ∈ (0, 2), docs/composite.md);
    W = 1 (scale Var by W²). Batched over ``epsilon``.

    Args:
      activation: ``"rectangle"`` (A1), ``"half_sine"`` (A2) or ``"triangle"`` (A3).
      epsilon: ε (scalar or array).
      objective: ``"centre"``, ``"worst"`` or ``"average"``.
      iterations: bisection steps.

    Returns:
      ``(m*, Var*)``, arrays of ``epsilon``'s shape.

    Raises:
      ValueError: an unknown ``activation`` or ``objective``; ``iterations < 1``.

    References:
      Zhang et al., "Bounded and Unbiased Composite Differential Privacy", IEEE S&P 2024, §3.5.
    """
    activation = _laws.canonical_activation(activation)
    if objective not in _OBJECTIVES:
        raise ValueError(f"objective must be one of {_OBJECTIVES}, got {objective!r}")
    iterations = check_int("iterations", iterations, minimum=1)
    eps = jnp.asarray(epsilon, jnp.float64)
    m, v = _closed_form_program(activation, objective, iterations)(eps.reshape(-1))
    return (m, v) if eps.ndim else (m[0], v[0])


@functools.lru_cache(maxsize=16)
def _treedef(activation, base):
    """Pytree structure of a Composite (leaves: epsilon, k, m, y, lo, hi)."""
    return jax.tree_util.tree_structure(Composite(activation, base, 1.0, 0.1, 0.5, 0.3, window=(0.0, 1.0)))


def _bucket(n):
    """Padded batch size (a power of two, at least 8): one compiled program serves every ε count
    up to it."""
    return max(8, 1 << max(n - 1, 0).bit_length())


@functools.lru_cache(maxsize=64)
def _gradient_program(activation, base, objective, steps, learning_rate):
    """One jitted, ε-vmapped program per configuration: the window, the sensitivity and ε are
    arguments, the template mechanism is built inside (traced: no validation; the parameters
    are valid by construction, ``S1 = sqm/(2 + sqm) < 1``, ``m < 2 = 2L``, DP boundary), and
    the objective's variances, the baseline and §3.5's closed-form check come out of the same
    call."""

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

    def run(lo, hi, eps, df):
        template = Composite(activation, base, 1.0, 0.1, 0.5, 0.3, window=(lo, hi))  # traced window: unvalidated
        k, m, y = jax.vmap(lambda e: solve(e, template))(eps)
        mech = _build(template, eps, k, m, y)
        centre, worst, avg = mech.variance(0.5 * (lo + hi)), mech.variance(hi), mech.average_variance()
        var = {"centre": centre, "worst": worst, "average": avg}[objective]
        baseline = 2.0 * (df / eps) ** 2
        out = dict(
            variance=var,
            centre_variance=centre,
            worst_variance=worst,
            average_variance=avg,
            baseline_variance=baseline,
            ratio=var / baseline,
            h1=mech.h1_rate,
        )
        if base == "uniform":
            m_cf, v_cf = jax.vmap(lambda e: _closed_form(activation, e, objective, 200))(eps)
            v_cf = v_cf * (hi - lo) ** 2
            out.update(cf_m=m_cf, cf_variance=v_cf, cf_gap=var / v_cf - 1.0)
        return (k, m, y), out

    return jax.jit(run)


def _paper_score(activation, base, eps, k, m, y, rho2):
    """The released ``checkConstraints`` + ``reduceRate`` of arbitrary (k, m, y) (github.com/CompositeDP/CompositeDP,
    Appendix A): ``(var_lap − var)/var_lap`` with ``var_lap = 2(sensitivity_Cp/ε)²`` and ``var``
    the variance in 𝓛 at ``C_p = ρ·C_p^max`` (the code's ``Cp_assume = 0``: ρ = 0), or ``None``
    if infeasible (k, m, y > 0; S1 < 1; the bump fits; k ≤ 1 − y; DP: B1 ``k ≤ y(e^ε − 1)``,
    strict for A2 as in the code; B2 ``t < y``). Maximising it minimises the real-unit
    variance (both are normalised by the same C²)."""
    if k <= 0 or m <= 0 or y <= 0:
        return None
    s1 = _laws.area_factor(activation) * k * m
    if s1 >= 1.0:
        return None
    if base == "uniform":
        t, L = y, (1.0 - s1) / (2.0 * y)
        m2 = 2.0 * y * L**3 / 3.0
    else:
        t = (y + k) * math.exp(-eps)
        L = 5.0 * (1.0 - s1) / (2.0 * (4.0 * y + t))
        m2 = 2.0 * L**3 * (4.0 * y + 3.0 * t) / 21.0
    cp_max = s1 * (L - 0.5 * m)
    if not cp_max > 0:  # the bump does not fit (m ≥ 2L; the code divides by zero at m = 2L)
        return None
    if k > 1.0 - y:
        return None
    if base == "uniform":
        bound = y * math.expm1(eps)
        if (k >= bound) if activation == "half_sine" else (k > bound):
            return None
    elif not t < y:
        return None
    var_lap = 2.0 * (2.0 * cp_max / eps) ** 2
    var = m2 + s1 * _laws.shape_variance(activation) * m * m + rho2 * cp_max**2 * (1.0 / s1 - 1.0)
    return (var_lap - var) / var_lap


def paper_grid_search(activation, base, epsilon, objective="centre"):
    """The paper's released 3-stage grid search of the composite parameters, for one ε.

    ``Mechanism/Parameter_Optimization.py`` of github.com/CompositeDP/CompositeDP, with its exact
    loop bounds: stage 1
    ``y, k ∈ [0, 1)``, ``m ∈ [0, 2]`` by 0.1; stage 2 ``[best − 0.1, best + 0.1)`` by 0.01;
    stage 3 ``[best − 0.01, best + 0.01)`` by 0.001; every loop by repeated ``+= step`` (float
    accumulation), the k range re-centred on the current best at each y and the m range at each
    k (as the code does), strict improvement of ``reduceRate``.

    Args:
      activation: the canonical activation name.
      base: the canonical base name (``"uniform"`` or ``"quartic"``).
      epsilon: ε, one number.
      objective: ``"centre"``, ``"worst"`` or ``"average"``.

    Returns:
      ``(k, m, y)`` of the best grid point, W = 1.

    Raises:
      ValueError: no grid point is feasible at ``epsilon``.
      KeyError: an unknown ``objective``.

    References:
      Zhang et al., "Bounded and Unbiased Composite Differential Privacy", IEEE S&P 2024, §3.3.
    """
    rho2 = {"centre": 0.0, "worst": 1.0, "average": 1.0 / 3.0}[objective]
    best = [-1000.0, 0.0, 0.0, 0.0]  # reduceRate, k, m, y

    def visit(k, m, y):
        r = _paper_score(activation, base, epsilon, k, m, y, rho2)
        if r is not None and r > best[0]:
            best[:] = [r, k, m, y]

    y = 0.0
    while y < 1.0:
        k = 0.0
        while k < 1.0:
            m = 0.0
            while m <= 2.0:
                if y != 0:
                    visit(k, m, y)
                m += 0.1
            k += 0.1
        y += 0.1
    for half, step in ((0.1, 0.01), (0.01, 0.001)):
        y, y_end = (0.0, half) if best[3] == 0 else (best[3] - half, best[3] + half)
        while y < y_end:
            k, k_end = (0.0, half) if best[1] == 0 else (best[1] - half, best[1] + half)
            while k < k_end:
                m, m_end = (0.0, half) if best[2] == 0 else (best[2] - half, best[2] + half)
                while m < m_end:
                    if y != 0:
                        visit(k, m, y)
                    m += step
                k += step
            y += step
    if best[0] == -1000.0:
        raise ValueError(f"epsilon: the paper's grid finds no feasible point at epsilon={epsilon!r}")
    return best[1], best[2], best[3]


def tune_composite(
    epsilon,
    *,
    window,
    activation="rectangle",
    base="uniform",
    objective="centre",
    method="gradient",
    sensitivity=None,
    steps=300,
    learning_rate=0.05,
) -> CompositeTuning:
    """Composite parameters of least variance at each ``epsilon``.

    Minimises the release variance of ``dpjax.Composite`` over ``(k, m, y)`` on the DP boundary
    ``k = y(e^ε − 1)``, with optax Adam on ``log Var`` then safeguarded Newton steps, ``vmap``-ed
    over ε. The search touches no data: it has no privacy cost.

    Args:
      epsilon: ε, a scalar or an array.
      window: ``(lo, hi)`` of the query values.
      activation: ``"rectangle"`` (A1), ``"half_sine"`` (A2) or ``"triangle"`` (A3).
      base: ``"uniform"`` (B1) or ``"quartic"`` (B2).
      objective: ``"centre"`` (Var at the window's centre, the paper's), ``"worst"`` (its ends)
        or ``"average"`` (uniform over the window).
      method: ``"gradient"`` (default) or ``"paper_grid"`` (the released code's grid).
      sensitivity: Δf of the Laplace baseline (default the window's width, the paper's comparison).
      steps: Adam steps of the gradient method.
      learning_rate: Adam's learning rate.

    Returns:
      A :class:`CompositeTuning` with arrays of ``epsilon``'s shape.

    Raises:
      ValueError: an unknown ``activation``, ``base``, ``objective`` or ``method``; ``epsilon``,
        ``sensitivity`` or ``learning_rate`` not positive; ``window`` not a pair of finite numbers
        with ``lo < hi``; ``steps < 0``; the paper's grid finds no feasible point.

    References:
      Zhang et al., "Bounded and Unbiased Composite Differential Privacy", IEEE S&P 2024, Definition
      4.1, §2.5, §3.3, §4.2 and Algorithms 1–2.
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
    shape, flat = eps_np.shape, eps_np.reshape(-1)
    n = flat.size
    df = (hi - lo) if sensitivity is None else float(sensitivity)
    with jax.enable_x64(True):
        if method == "gradient":
            padded = np.concatenate([flat, np.full(_bucket(n) - n, flat[-1])])
            kmy, out = _gradient_program(activation, base, objective, steps, float(learning_rate))(
                np.float64(lo), np.float64(hi), padded, np.float64(df)
            )
            kmy, out = jax.device_get((kmy, out))
            k, m, y = (np.asarray(v[:n]) for v in kmy)
            out = {name: np.asarray(v[:n]) for name, v in out.items()}
            closed = None
            if base == "uniform":
                closed = {
                    "m": out.pop("cf_m").reshape(shape),
                    "variance": out.pop("cf_variance").reshape(shape),
                    "relative_gap": out.pop("cf_gap").reshape(shape),
                }
            leaves = [jnp.asarray(v.reshape(shape)) for v in (flat, k, m, y)] + [jnp.float64(lo), jnp.float64(hi)]
            mech = jax.tree_util.tree_unflatten(_treedef(activation, base), leaves)  # valid by construction
            out = {name: v.reshape(shape) for name, v in out.items()}
            return CompositeTuning(mechanism=mech, method=method, objective=objective, closed_form=closed, **out)
        template = Composite(activation, base, 1.0, 0.1, 0.5, 0.3, window=(jnp.float64(lo), jnp.float64(hi)))
        template = jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), template)
        kmy = np.asarray([paper_grid_search(activation, base, float(e), objective) for e in flat])
        k, m, y = (jnp.asarray(kmy[:, i]) for i in range(3))
        eps = jnp.asarray(flat)
        mech = _build(template, eps, k, m, y)
        mid = 0.5 * (lo + hi)
        centre, worst, avg = mech.variance(mid), mech.variance(hi), mech.average_variance()
        var = {"centre": centre, "worst": worst, "average": avg}[objective]
        baseline = 2.0 * (df / eps) ** 2
        mech = jax.tree_util.tree_map(lambda x: x.reshape(shape) if jnp.ndim(x) else x, mech)
        out = dict(
            variance=var,
            centre_variance=centre,
            worst_variance=worst,
            average_variance=avg,
            baseline_variance=baseline,
            ratio=var / baseline,
            h1=mech.h1_rate.reshape(-1),
        )
        out = {name: np.asarray(v).reshape(shape) for name, v in out.items()}
    return CompositeTuning(mechanism=mech, method=method, objective=objective, closed_form=None, **out)
