"""Tuning the kernel scale of a privacy-boosted mechanism (PB-DP §3.4, spec §4).

The utility constraint fixes the boosting rate as a function of the kernel scale
(``q`` is derived from ``rho`` by :class:`dpjax.PrivacyBoosted`, never searched), so the
only free parameter is the kernel's scale — σ of the Gaussian kernels, b of the Laplace
ones (called ``sigma`` throughout, for every kernel). We search ``σ = σ_base·e^u`` with
``u ∈ [0, log sigma_max_ratio]``: ``σ_base`` is the plain kernel that meets the utility
constraint on its own (``q = 0`` at ``u = 0``), so the tuned mechanism is never worse
than that kernel (spec §4.1). Kernels: ``"gaussian"``, ``"laplace"``,
``"discrete_laplace"``, ``"discrete_gaussian"``.

Objectives (all exact, none of the paper's uncertified formulas):

* ``delta=`` (single release): the exact worst-case hockey-stick divergence in closed
  form (:mod:`optimize._exact`), ε solved by Newton with an implicit derivative;
* ``delta=`` with ``compositions=T > 1``: ``accounting.pld(mech).self_compose(T)``,
  the exact (pessimistic, discretised) PLD;
* ``order=``: the exact Rényi divergence at that order, times ``compositions``.

Methods: ``"gradient"`` (optax, derivatives through the exact accountant) and
``"ternary"`` (the paper's Algorithm 2). Settings are batched: every numeric
argument broadcasts, and the whole batch is tuned in one ``jit(vmap(...))`` call.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtri

import dpjax
from dpjax.boosting import kernel_reach
from dpjax.regions import AbsoluteError, FixedInterval, Region, RelativeError
from optimize import _exact, _search

__all__ = ["TuningResult", "tune_boosted", "base_sigma"]

_METHODS = ("gradient", "ternary")
_KERNELS = ("gaussian", "laplace", "discrete_laplace", "discrete_gaussian")
_DISCRETE = ("discrete_laplace", "discrete_gaussian")
#: most pairs a listed pair set (discrete kernel, relative region) may hold: its static arrays
#: are allocated per setting, however few of them an evaluation sweeps (optimize._exact._worst).
_MAX_LISTED_PAIRS = 1_000_000
#: default grid of the gradient method's scan where the objective has several local minima.
_SCAN = 33


@dataclasses.dataclass(frozen=True)
class TuningResult:
    """Outcome of :func:`tune_boosted` (arrays of the broadcast batch shape).

    ``sigma`` is the kernel's scale parameter for every kernel: σ of the Gaussian and
    discrete Gaussian kernels, the scale b of the Laplace and discrete Laplace kernels.

    Attributes:
      mechanism: the tuned ``PrivacyBoosted(kernel(sigma), region, rho)`` (batched).
      epsilon: its exact ε at ``delta`` (or Rényi divergence at ``order``), after
        ``compositions`` releases.
      baseline: the plain kernel meeting the same utility, ``kernel(sigma_base)``, e.g.
        ``Gaussian(sigma_base)`` (``None`` when no plain kernel meets it: a continuous
        kernel with a fixed region and ``rho >= 1/2``).
      baseline_epsilon: the baseline's exact ε (same objective; NaN where it has none).
      sigma, sigma_base: tuned and baseline kernel scales (σ, or b for Laplace kernels).
      boosting_rate: ``q`` of the tuned mechanism.
      steps: optimiser iterations (gradient steps, or Algorithm 2 iterations).
      method, objective: what was run (``"gradient"``/``"ternary"``; ``"dp"``/``"rdp"``).
    """

    mechanism: dpjax.PrivacyBoosted
    epsilon: jax.Array
    baseline: dpjax.Mechanism | None
    baseline_epsilon: jax.Array
    sigma: jax.Array
    sigma_base: jax.Array
    boosting_rate: jax.Array
    steps: jax.Array
    method: str
    objective: str

    @property
    def improvement(self):
        """Relative reduction of ε against the plain kernel, ``1 − ε/ε_base``."""
        return 1.0 - self.epsilon / self.baseline_epsilon


# ----------------------------------------------------------------------------------
# settings: regions as flat parameter dicts (leaves batch together under vmap)
# ----------------------------------------------------------------------------------
def _region_kind(region) -> str:
    if isinstance(region, AbsoluteError):
        return "absolute"
    if isinstance(region, RelativeError):
        return "relative"
    if isinstance(region, FixedInterval):
        return "fixed"
    raise ValueError(
        "region must be dpjax.AbsoluteError(tau), RelativeError(theta, tau) or FixedInterval(low, high), "
        f"got {type(region).__name__}"
    )


def _region_params(region) -> dict:
    return {f.name: getattr(region, f.name) for f in dataclasses.fields(region)}


def _make_region(kind, p):
    if kind == "absolute":
        return AbsoluteError(p["tau"])
    if kind == "relative":
        return RelativeError(p["theta"], p["tau"])
    return FixedInterval(p["low"], p["high"])


def _kernel(name, scale, support_radius=None):
    """The plain kernel ``name`` (one of ``_KERNELS``) at ``scale`` (σ, or b for the Laplace kernels)."""
    if name == "gaussian":
        return dpjax.Gaussian(scale)
    if name == "laplace":
        return dpjax.Laplace(scale)
    if name == "discrete_laplace":
        return dpjax.DiscreteLaplace(scale)
    return dpjax.DiscreteGaussian(scale, support_radius=support_radius)


def base_sigma(region: Region, rho, kernel="gaussian"):
    """Scale of the plain ``kernel`` whose hardest answer has coverage exactly ``rho``: the
    largest scale (σ, or b for the Laplace kernels) meeting the utility constraint alone.

    * ``"gaussian"``: ``τ/Φ⁻¹((1+ρ)/2)`` (absolute/relative error: the hardest answer is
      Q = 0, region ``[−τ, τ]``); fixed interval (hardest answer at an edge, coverage
      ``Φ(w/σ) − ½``, ``w = high − low``): ``w/Φ⁻¹(ρ + ½)`` for ``ρ < ½``.
    * ``"laplace"``: ``P(|N| ≤ τ) = 1 − e^{−τ/b}`` gives ``b = −τ/log(1 − ρ)``; fixed interval
      (``P(0 ≤ N ≤ w) = (1 − e^{−w/b})/2``): ``b = −w/log(1 − 2ρ)`` for ``ρ < ½``.
    * discrete kernels count integers: the noise must hit ``−⌊τ⌋ … ⌊τ⌋``, or
      ``0 … ⌊high⌋ − ⌈low⌉`` (fixed interval, integer answers; the atom at 0 lets every
      ``ρ < 1`` be met). The mass is decreasing in the scale: bisection on its log to the
      float's resolution, returning the end whose mass is ≥ ``rho``.

    ``NaN`` where no plain kernel meets the constraint (continuous kernel, fixed interval,
    ``ρ ≥ ½``). Region parameters must be concrete for the discrete kernels (the number of
    integers to count is static).
    """
    if kernel not in _KERNELS:
        raise ValueError(f"kernel must be one of {_KERNELS}, got {kernel!r}")
    kind = _region_kind(region)
    p = _region_params(region)
    return _base_jit(kernel, kind, p, rho, _count_bound(kernel, kind, p))


def _noise_integers(kind, p):
    """``(first, count)``: the integers a discrete kernel's noise must hit at the hardest answer."""
    if kind == "fixed":
        return jnp.zeros_like(jnp.asarray(p["low"])), jnp.floor(p["high"]) - jnp.ceil(p["low"]) + 1.0
    w = jnp.floor(jnp.asarray(p["tau"]))
    return -w, 2.0 * w + 1.0


def _count_bound(kernel, kind, p):
    """Static number of terms of the discrete mass sum: the largest ``count`` in the batch (0: continuous)."""
    if kernel not in _DISCRETE:
        return 0
    count = _noise_integers(kind, {k: np.asarray(v, np.float64) for k, v in p.items()})[1]
    return int(max(np.max(count), 1))


#: bisection bracket of the discrete baseline: [1e-3, 1e6] × the number of integers to hit
#: (mass ≈ 1 at the lower end, ≈ 1e-6 at the upper), halved to a relative width below 1e-16.
_BASE_BRACKET = (1e-3, 1e6)
_BASE_ITERS = 64


def _base_scale(kernel, kind, p, rho, terms):
    rho = jnp.asarray(rho)
    if kernel in _DISCRETE:
        first, count = _noise_integers(kind, p)
        k = jnp.arange(terms, dtype=jnp.result_type(float))

        def mass(scale):
            logp = _kernel(kernel, scale[..., None]).noise_log_prob(first[..., None] + k)
            return jnp.sum(jnp.where(k < count[..., None], jnp.exp(logp), 0.0), axis=-1)

        def body(_, s):
            lo, hi = s
            mid = 0.5 * (lo + hi)
            ok = mass(jnp.exp(mid)) >= rho
            return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid)

        shape = jnp.broadcast_shapes(jnp.shape(count), jnp.shape(rho))
        lo0 = jnp.broadcast_to(jnp.log(_BASE_BRACKET[0] * count), shape)
        hi0 = jnp.broadcast_to(jnp.log(_BASE_BRACKET[1] * count), shape)
        lo, _ = jax.lax.fori_loop(0, _BASE_ITERS, body, (lo0, hi0))
        return jnp.where(count >= 1, jnp.exp(lo), jnp.nan)
    gaussian = kernel == "gaussian"
    if kind == "fixed":
        w = jnp.asarray(p["high"]) - jnp.asarray(p["low"])
        ok = rho < 0.5
        r = jnp.where(ok, rho, 0.25)
        scale = w / ndtri(r + 0.5) if gaussian else -w / jnp.log1p(-2.0 * r)
        return jnp.where(ok, scale, jnp.nan)
    tau = jnp.asarray(p["tau"])
    return tau / ndtri((1.0 + rho) / 2.0) if gaussian else -tau / jnp.log1p(-rho)


_base_jit = jax.jit(_base_scale, static_argnums=(0, 1, 4))


@dataclasses.dataclass(frozen=True)
class _Config:
    """Static configuration of one tuning problem (hashable: a jit cache key)."""

    kernel: str
    kind: str
    objective: str  # "dp" | "rdp" | "pld"
    compositions: int
    method: str
    tol: float
    iterations: int  # Algorithm 2 iterations
    max_steps: int
    num_pairs: int
    start: float
    scan: int  # grid points the gradient method scans first (0: none)
    support_radius: int | None  # discrete Gaussian: its table covers the largest scale searched


def _mechanism(cfg, p, sigma):
    kernel = _kernel(cfg.kernel, sigma, cfg.support_radius)
    return dpjax.PrivacyBoosted(kernel, _make_region(cfg.kind, p), p["rho"], num_pairs=cfg.num_pairs)


def _objective(cfg, p):
    """``fn(u, warm) -> (value, warm)`` for one setting ``p`` (a dict of scalars)."""
    sens = p["sensitivity"]
    if cfg.objective == "rdp":

        def fn(u, warm):
            mech = _mechanism(cfg, p, p["sigma_ref"] * jnp.exp(u))
            val = cfg.compositions * _exact.renyi(mech, p["target"], sens, trim=True)
            return val, warm

        return fn

    def fn(u, warm):
        eps = _exact.epsilon_for_delta(functools.partial(_log_delta, cfg), (u, p), p["target"], x0=warm)
        return eps, eps

    return fn


def _log_delta(cfg, eps, params):
    """``log δ(ε)`` of the setting ``p`` at ``u`` (no captured tracers: a root-solve callback)."""
    u, p = params
    return _log_delta_u(cfg, eps, u, p)


def _log_delta_u(cfg, eps, u, p):
    mech = _mechanism(cfg, p, p["sigma_ref"] * jnp.exp(u))
    return jnp.log(_exact.delta(mech, eps, p["sensitivity"], trim=True))


def _value_and_slope(cfg, p):
    """``vs(u, warm) -> (value, d value/du, warm)`` for the gradient method: one fused evaluation.

    (ε, δ): the Newton root and its implicit slope from the same iterations
    (:func:`optimize._exact.epsilon_and_slope`), warm-started from the previous step's ε
    moved along its slope (first-order predictor; ``warm = (ε, slope, u)``); the bracket
    estimates curvatures from slope secants. RDP: value, slope and exact curvature from a
    nested jvp of the closed form.
    """
    if cfg.objective == "rdp":
        fn = _objective(cfg, p)

        def vs_rdp(u, warm):
            # closed form: value, slope and curvature from one nested jvp (+15% over a jvp),
            # which lets the bracket take Newton steps inside a rounded kink
            def slope(x):
                return jax.jvp(lambda y: fn(y, warm)[0], (x,), (jnp.ones_like(x),))

            (v, g), (_, h) = jax.jvp(slope, (u,), (jnp.ones_like(u),))
            return v, (g, h), warm

        return vs_rdp

    def vs(u, warm):
        e0, s0, u0 = warm
        x0 = jnp.maximum(e0 + s0 * (u - u0), 0.0)
        eps, slope = _exact.epsilon_and_slope(functools.partial(_log_delta_u, cfg), u, p, p["target"], x0)
        return eps, slope, (eps, slope, u)

    return vs


def _solve_one(cfg, p):
    fn = _objective(cfg, p)
    lower = jnp.zeros_like(p["u_max"])
    warm = jnp.ones_like(p["u_max"])
    if cfg.method == "ternary":
        u, steps, last = _search.ternary(fn, lower, p["u_max"], warm, cfg.iterations, with_warm=True)
    else:
        upper, start, base = p["u_max"], jnp.minimum(cfg.start, p["u_max"]), None
        if cfg.scan:  # a local minimum per worst integer answer: search the best grid point's cell
            lower, upper, start, base, warm = _search.grid_cell(fn, lower, upper, warm, cfg.scan)
        vs = _value_and_slope(cfg, p)
        w0 = warm if cfg.objective == "rdp" else (warm, jnp.zeros_like(warm), start)
        u, steps, value, at_lower = _search.gradient(fn, lower, upper, w0, start, cfg.tol, cfg.max_steps,
                                                     value_and_slope=vs, with_values=True)
        if base is None:
            # the plain kernel (u = 0): the first evaluation when the search starts there
            base = at_lower if cfg.start == 0.0 else fn(jnp.zeros_like(u), warm)[0]
        better = value <= base
        return jnp.where(better, u, 0.0), jnp.where(better, value, base), base, steps
    values, _ = jax.vmap(fn)(jnp.stack([u, lower]), jnp.stack([last, last]))  # warm: the last third point
    # never worse than the plain kernel (u = 0, q = 0), also when the minimum sits at that end
    better = values[0] <= values[1]
    return jnp.where(better, u, lower), jnp.where(better, values[0], values[1]), values[1], steps


@functools.partial(jax.jit, static_argnums=(0,))
def _solve_batch(cfg, params):
    return jax.vmap(functools.partial(_solve_one, cfg))(params)


# ----------------------------------------------------------------------------------
# the entry point
# ----------------------------------------------------------------------------------
def _check(cond, name, msg):
    """Raise ``ValueError("name msg")`` unless ``cond``; ``msg`` may be a callable (formatted
    only on failure: the repr of a large array costs more than a tuning run)."""
    if not cond:
        raise ValueError(f"{name} {msg() if callable(msg) else msg}")


def tune_boosted(kernel="gaussian", region=None, rho=0.9, sensitivity=1.0, delta=None, order=None, compositions=1,
                 method="gradient", *, tol=1e-6, sigma_max_ratio=50.0, max_steps=100, num_pairs=201, start=0.0,
                 scan=None, value_discretization_interval=1e-3) -> TuningResult:
    """Choose the kernel scale of ``PrivacyBoosted(kernel, region, rho)`` minimising exact privacy.

    Args:
      kernel: ``"gaussian"``, ``"laplace"``, ``"discrete_laplace"`` or ``"discrete_gaussian"``
        (the scale tuned is σ, or b for the Laplace kernels; every kernel has exact,
        differentiable closed forms on :class:`dpjax.PrivacyBoosted`).
      region: ``dpjax.AbsoluteError(tau)``, ``RelativeError(theta, tau)`` or
        ``FixedInterval(low, high)``; its parameters may be arrays (a batch).
      rho: required coverage in (0, 1) (scalar or array).
      sensitivity: ΔQ (scalar or array).
      delta: minimise ε at this δ (scalar or array) ...
      order: ... or the Rényi divergence at this order (> 1). Exactly one of the two.
      compositions: number of releases T. With ``delta``: the exact PLD of the T-fold
        composition (``accounting.pld(...).self_compose(T)``); with ``order``: T × RDP.
      method: ``"gradient"`` (optax, bracketed secant on derivatives through the exact
        accountant) or ``"ternary"`` (the paper's Algorithm 2).
      tol: tolerance on ``u = log(σ/σ_base)`` (Algorithm 2 interval width; gradient step size).
      sigma_max_ratio: search ``σ ∈ [σ_base, sigma_max_ratio·σ_base]``.
      max_steps: cap on gradient steps.
      num_pairs: answer-grid size for regions whose worst pair must be searched along a
        path (relative and fixed regions; a discrete kernel's relative region lists every
        distinct pair instead, as many as the largest scale searched needs).
      start: initial ``u`` of the gradient method (without a scan).
      scan: grid points (≥ 3) the gradient method evaluates over the whole range before its
        local search, which then runs in the cell around the best of them (from it); 0 for
        none. Default: 33 for a discrete kernel with a relative or fixed region, whose exact
        objective is the worst case over integer answers and has a local minimum wherever
        the worst answer changes (a sawtooth: DiscreteGaussian, θ = 0.1, τ = 3, ρ = 0.9 has
        12, the first at the plain kernel, 9% above the best); 0 otherwise (unimodal).
      value_discretization_interval: loss-grid step of the PLD (``compositions > 1``).

    All numeric arguments broadcast to one batch shape; the batch is tuned in one
    jit-compiled ``vmap``. Returns a :class:`TuningResult`.
    """
    if kernel not in _KERNELS:
        raise ValueError(f"kernel must be one of {_KERNELS}, got {kernel!r}")
    kind = _region_kind(region)
    _check(method in _METHODS, "method", lambda: f"must be one of {_METHODS}, got {method!r}")
    _check((delta is None) != (order is None), "delta", "or order: give exactly one of the two")
    _check(isinstance(compositions, (int, np.integer)) and compositions >= 1, "compositions",
           lambda: f"must be a positive integer, got {compositions!r}")
    _check(tol > 0, "tol", lambda: f"must be positive, got {tol!r}")
    _check(sigma_max_ratio > 1, "sigma_max_ratio", lambda: f"must be > 1, got {sigma_max_ratio!r}")
    if scan is None:
        scan = _SCAN if kernel in _DISCRETE and kind != "absolute" else 0
    _check(isinstance(scan, (int, np.integer)) and (scan == 0 or scan >= 3), "scan",
           lambda: f"must be 0 or an integer >= 3, got {scan!r}")
    rho_np = np.asarray(rho, float)
    _check(np.all((rho_np > 0) & (rho_np < 1)), "rho",
           lambda: f"must lie in (0, 1) (rho = 1 makes ε infinite), got {rho!r}")
    _check(np.all(np.asarray(sensitivity, float) > 0), "sensitivity",
           lambda: f"must be positive, got {sensitivity!r}")
    if kernel in _DISCRETE and kind == "fixed":
        _check(np.all(np.floor(np.asarray(region.high, float)) >= np.ceil(np.asarray(region.low, float))), "region",
               lambda: f"must hold an integer answer for a discrete kernel, got {region!r}")
    if delta is not None:
        d = np.asarray(delta, float)
        _check(np.all((d > 0) & (d < 1)), "delta", lambda: f"must lie in (0, 1), got {delta!r}")
    else:
        _check(np.all(np.asarray(order, float) > 1), "order", lambda: f"must be > 1, got {order!r}")

    with jax.enable_x64(True):
        rp = {k: np.asarray(v, np.float64) for k, v in _region_params(region).items()}
        target = np.asarray(delta if delta is not None else order, np.float64)
        rho64, sens64 = np.asarray(rho, np.float64), np.asarray(sensitivity, np.float64)
        shape = np.broadcast_shapes(*[a.shape for a in rp.values()], rho64.shape, sens64.shape, target.shape)
        objective = "rdp" if order is not None else ("pld" if compositions > 1 else "dp")
        # the baseline first (concrete): the largest scale searched fixes the static sizes
        base = np.asarray(_base_jit(kernel, kind, rp, rho64, _count_bound(kernel, kind, rp)))
        ref = base
        if kind == "fixed":
            # ρ ≥ ½ (continuous kernels): no plain kernel meets the constraint; search up from
            # σ = width/4 (documented: the fixed-region objective is degenerate, its minimum
            # runs to the upper bound).
            ref = np.where(np.isnan(base), (rp["high"] - rp["low"]) / 4.0, base)
        top = _kernel(kernel, float(sigma_max_ratio * np.max(ref)))
        radius = top.support_radius if kernel == "discrete_gaussian" else None
        listed = region.required_pairs(kernel_reach(top), top.discrete)  # every distinct pair, or None (a grid)
        _check(not listed or listed <= _MAX_LISTED_PAIRS, "kernel", lambda: (
            f"{kernel!r} with a relative region lists one pair per region width up to the kernel's reach: "
            f"{listed} pairs at the largest scale searched ({sigma_max_ratio:g} x {np.max(ref):.6g}), over the "
            f"limit of {_MAX_LISTED_PAIRS}; use the continuous kernel or a smaller sigma_max_ratio"))
        cfg = _Config(kernel, kind, objective, int(compositions), method, float(tol),
                      _search.ternary_iterations(math.log(sigma_max_ratio), float(tol)), int(max_steps),
                      int(listed or num_pairs), float(start), int(scan), radius)
        u_max = math.log(sigma_max_ratio)
        if objective == "pld":
            from optimize import _composed

            flat = _prepare(rp, rho64, sens64, target, base, ref, u_max, shape)
            u, value, base_value, steps = _composed.solve(cfg, flat, float(value_discretization_interval))
            out = _finish(cfg, flat, u, value, base_value, steps, shape)
        else:
            out = _tune_batch(cfg, rp, rho64, sens64, target, base, ref, u_max, shape)
        # one device-to-host transfer for everything the result holds
        out = jax.tree_util.tree_map(np.asarray, jax.device_get(out))
        region_out = _make_region(kind, out["region"])
        # (a region listing every pair sizes its list for the tuned scale itself)
        mech = dpjax.PrivacyBoosted(_kernel(kernel, out["sigma"]), region_out, out["rho"],
                                    num_pairs=None if listed else num_pairs)
        base_sig = out["sigma_base"]
        baseline = None if np.any(np.isnan(base_sig)) else _kernel(kernel, base_sig)
        return TuningResult(
            mechanism=mech,
            epsilon=out["epsilon"],
            baseline=baseline,
            baseline_epsilon=out["baseline_epsilon"],
            sigma=out["sigma"],
            sigma_base=base_sig,
            boosting_rate=out["boosting_rate"],
            steps=out["steps"],
            method=method,
            objective="rdp" if order is not None else "dp",
        )


def _prepare(rp, rho, sensitivity, target, base, ref, u_max, shape):
    """Flat float64 setting arrays: ``sigma_base`` the plain kernel meeting the constraint
    (NaN where none does), ``sigma_ref`` the search's lower end (``u = 0``)."""
    arrays = dict(rp, rho=rho, sensitivity=sensitivity, sigma_base=base, sigma_ref=ref, target=target)
    flat = {k: jnp.broadcast_to(jnp.asarray(v, jnp.float64), shape).reshape(-1) for k, v in arrays.items()}
    flat["u_max"] = jnp.full(flat["rho"].shape, u_max)
    return flat


def _finish(cfg, flat, u, value, base, steps, shape):
    """Everything :class:`TuningResult` holds, as arrays of the batch shape."""
    rp_names = {"absolute": ("tau",), "relative": ("theta", "tau"), "fixed": ("low", "high")}[cfg.kind]
    sigma = flat["sigma_ref"] * jnp.exp(u)
    q = _mechanism(cfg, flat, sigma).boosting_rate
    base_sig = flat["sigma_base"]
    out = {"sigma": sigma, "epsilon": value, "baseline_epsilon": jnp.where(jnp.isnan(base_sig), jnp.nan, base),
           "sigma_base": base_sig, "boosting_rate": q, "steps": steps, "rho": flat["rho"],
           "region": {k: flat[k] for k in rp_names}}
    return jax.tree_util.tree_map(lambda x: x.reshape(shape), out)


@functools.partial(jax.jit, static_argnums=(0, 7, 8))
def _tune_batch(cfg, rp, rho, sensitivity, target, base, ref, u_max, shape):
    """Set up, tune and summarise the whole batch in one compiled call (no eager glue; the
    baseline scales come in concrete, having fixed the static sizes)."""
    flat = _prepare(rp, rho, sensitivity, target, base, ref, u_max, shape)
    u, value, base, steps = _solve_batch(cfg, flat)
    return _finish(cfg, flat, u, value, base, steps, shape)
