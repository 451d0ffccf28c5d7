"""Tuning the kernel scale of a privacy-boosted mechanism.

Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting Approach",
IEEE S&P 2025, §3.4 and Algorithm 2.

The utility constraint fixes the boosting rate as a function of the kernel scale
(``q`` is derived from ``rho`` by :class:`dpjax.PrivacyBoosted`, never searched), so the
only free parameter is the kernel's scale — σ of the Gaussian kernels, b of the Laplace
ones (called ``sigma`` throughout, for every kernel). We search ``σ = σ_base·e^u`` with
``u ∈ [0, log sigma_max_ratio]``: ``σ_base`` is the plain kernel that meets the utility
constraint on its own (``q = 0`` at ``u = 0``), so the tuned mechanism is never worse
than that kernel (the paper's §3.4). Any kernel: an instance of a :class:`dpjax.AdditiveMechanism`
(its scale leaf is searched, through ``with_scale``) or a built-in's name (``"gaussian"``,
``"laplace"``, ``"discrete_laplace"``, ``"discrete_gaussian"``).

Objectives (all exact, none of the paper's uncertified formulas):

* ``delta=`` (single release): the exact worst-case hockey-stick divergence in closed
  form (:func:`accounting.exact.worst_delta`), ε solved by the accountants' Newton root
  (:func:`accounting.exact.epsilon_root`) with an implicit derivative;
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

import dpjax
from accounting import exact
from accounting._numerics import to64
from dpjax._float64 import x64
from optimize import _composed, _search

__all__ = ["TuningResult", "tune_boosted", "base_sigma"]

_METHODS = ("gradient", "ternary")
#: most pairs a listed pair set (discrete kernel, relative region) may hold: its static arrays
#: are allocated per setting, however few of them an evaluation sweeps (accounting.exact.worst_delta).
_MAX_LISTED_PAIRS = 1_000_000
#: default grid of the gradient method's scan where the objective has several local minima.
_SCAN = 33


@dataclasses.dataclass(frozen=True)
class TuningResult:
    """Outcome of :func:`tune_boosted`.

    Every array has the broadcast batch shape of the tuning's arguments. ``sigma`` is the kernel's
    scale leaf for every kernel (``kernel.scale_name``): σ of the
    Gaussian kernels, the scale b of the Laplace kernels, ``scale`` of a user's kernel.

    Attributes:
      mechanism: the tuned ``PrivacyBoosted(kernel(sigma), region, rho)`` (batched).
      epsilon: its exact ε at ``delta`` (or Rényi divergence at ``order``), after
        ``compositions`` releases.
      baseline: the plain kernel meeting the same utility, ``kernel.with_scale(sigma_base)``
        (``None`` when no plain kernel meets it: a continuous kernel with a fixed region and
        ``rho >= 1/2``).
      baseline_epsilon: the baseline's exact ε (same objective; NaN where it has none).
      sigma: the tuned kernel scale (σ, or b for Laplace kernels).
      sigma_base: the baseline kernel scale.
      boosting_rate: ``q`` of the tuned mechanism.
      steps: optimiser iterations (gradient steps, or Algorithm 2 iterations).
      method: the method run, ``"gradient"`` or ``"ternary"``.
      objective: the objective, ``"dp"`` or ``"rdp"``.
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
        """Relative reduction of ε against the plain kernel.

        Returns:
          ``1 − epsilon / baseline_epsilon`` (NaN where there is no baseline).
        """
        return 1.0 - self.epsilon / self.baseline_epsilon


# ----------------------------------------------------------------------------------
# the kernel and the plain kernel meeting the constraint
# ----------------------------------------------------------------------------------
def resolve_kernel(kernel):
    """A kernel instance from an instance or a built-in kernel's name.

    Args:
      kernel: a :class:`dpjax.AdditiveMechanism` instance (returned as is) or a built-in kernel's
        name (a key of ``dpjax.kernels.BUILTIN``, dashes accepted), built at scale 1.

    Returns:
      The kernel instance.

    Raises:
      ValueError: ``kernel`` is neither an additive kernel instance nor a built-in kernel's name.
    """
    if isinstance(kernel, str):
        cls = dpjax.kernels.by_name(kernel)
        return cls(**{cls.scale_name: 1.0})
    if not isinstance(kernel, dpjax.AdditiveMechanism):
        raise ValueError(
            "kernel must be an additive noise kernel (a dpjax.AdditiveMechanism instance) or one of "
            f"{tuple(dpjax.kernels.BUILTIN)}, got {kernel!r}"
        )
    return kernel


def _check_region(region):
    if not isinstance(region, dpjax.regions.Region):
        raise ValueError(
            "region must be dpjax.AbsoluteError(tau), RelativeError(theta, tau) or FixedInterval(low, "
            f"high), got {type(region).__name__}"
        )


def _hardest_coverage(kernel, region, terms: int):
    """``p_S`` of the plain kernel at the hardest answer (the least over the hardest answers).

    Continuous kernels: the region's mass from ``noise_region_log_masses``. Integer noise: the
    sum of the pmf over the region's integers (``terms``, static, bounds their count), which
    needs no CDF table whatever the scale."""
    out = None
    for h in region.hardest_answers(kernel.discrete):
        h = jnp.asarray(h)
        lo, hi = region.interval(h)
        a, b = lo - h, hi - h
        if kernel.discrete:
            first, count = jnp.ceil(a), jnp.floor(b) - jnp.ceil(a) + 1.0
            k = jnp.arange(terms, dtype=jnp.result_type(float))
            me = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[..., None], kernel)
            pmf = jnp.exp(me.noise_log_prob(first[..., None] + k))
            p = jnp.sum(jnp.where(k < count[..., None], pmf, 0.0), axis=-1)
        else:
            p = jnp.exp(kernel.noise_region_log_masses(a, b)[1])
        out = p if out is None else jnp.minimum(out, p)
    return out


def _terms(kernel, region) -> int:
    """Static bound on the integers of the region at a hardest answer (0: continuous kernel)."""
    if not kernel.discrete:
        return 0
    counts = [
        np.floor(np.asarray(hi - h)) - np.ceil(np.asarray(lo - h)) + 1.0
        for h in region.hardest_answers(True)
        for lo, hi in [region.interval(h)]
    ]
    return int(max(np.max(c) for c in counts + [np.ones(())]))


def _region_width(region, kernel):
    """Width of the preferred region at the hardest answer (the bisection's unit of scale)."""
    h = jnp.asarray(region.hardest_answers(kernel.discrete)[0])
    lo, hi = region.interval(h)
    return jnp.maximum(hi - lo, 1.0 if kernel.discrete else 0.0)


#: bisection bracket of the baseline: [1e-6, 1e6] × the region's width, halved in log scale
#: to a relative width below 1e-17.
_BASE_BRACKET = (1e-6, 1e6)
_BASE_ITERS = 64


def _base_scale(kernel, region, rho, terms):
    """Largest scale whose plain kernel covers the hardest answer with probability ≥ ``rho``
    (the coverage decreases with the scale): bisection on the log scale, returning the end
    whose coverage is ≥ ``rho``; NaN where even the smallest scale misses it."""
    rho = jnp.asarray(rho)
    width = _region_width(region, kernel)
    shape = jnp.broadcast_shapes(jnp.shape(width), jnp.shape(rho), jnp.shape(kernel.noise_scale))

    def coverage(log_scale):
        return _hardest_coverage(kernel.with_scale(jnp.exp(log_scale)), region, terms)

    def body(_, s):
        lo, hi = s
        mid = 0.5 * (lo + hi)
        ok = coverage(mid) >= rho
        return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid)

    lo0 = jnp.broadcast_to(jnp.log(_BASE_BRACKET[0] * width), shape)
    hi0 = jnp.broadcast_to(jnp.log(_BASE_BRACKET[1] * width), shape)
    lo, _ = jax.lax.fori_loop(0, _BASE_ITERS, body, (lo0, hi0))
    return jnp.where(coverage(lo0) >= rho, jnp.exp(lo), jnp.nan)


_base_jit = jax.jit(_base_scale, static_argnums=(3,))


@x64
def base_sigma(region, rho, kernel="gaussian"):
    """Scale of the plain kernel whose hardest answer has coverage exactly ``rho``.

    The largest scale (σ, b, or a user kernel's scale leaf) meeting the utility constraint alone.
    Bisection on the kernel's own region mass (``noise_region_log_masses`` at the region's
    hardest answers), to the float's resolution, returning the end whose coverage is ≥ ``rho``.
    E.g. Gaussian, absolute error τ: ``τ/Φ⁻¹((1+ρ)/2)``; Laplace: ``−τ/log(1 − ρ)``; discrete
    kernels count the integers of the region. ``NaN`` where no plain kernel meets the
    constraint (a continuous kernel, a fixed interval and ``ρ ≥ ½``: the hardest answer, an
    edge, is covered with probability below ½ at every scale).

    Args:
      region: the preferred region, ``dpjax.AbsoluteError``, ``RelativeError`` or ``FixedInterval``
        (its parameters may be arrays).
      rho: required coverage (scalar or array).
      kernel: an additive kernel instance or a built-in kernel's name.

    Returns:
      A float64 array of the broadcast shape: the baseline scale, NaN where no plain kernel meets ``rho``.

    Raises:
      ValueError: ``kernel`` is not an additive kernel nor a built-in name; ``region`` is not a
        region.

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, §3.4 (the plain kernel as the tuning's lower end).
    """
    kernel = resolve_kernel(kernel)
    _check_region(region)
    return _base_jit(to64(kernel), to64(region), jnp.asarray(rho, jnp.float64), _terms(kernel, region))


@dataclasses.dataclass(frozen=True)
class _Config:
    """Static configuration of one tuning problem (hashable: a jit cache key). The kernel and
    the region travel as data in the settings (their structure is part of the cache key)."""

    objective: str  # "dp" | "rdp" | "pld"
    compositions: int
    method: str
    tol: float
    iterations: int  # Algorithm 2 iterations
    max_steps: int
    num_pairs: int
    start: float
    scan: int  # grid points the gradient method scans first (0: none)


def _mechanism(cfg, p, sigma):
    """``PrivacyBoosted`` of the setting ``p`` with its kernel at scale ``sigma``."""
    return dpjax.PrivacyBoosted(p["kernel"].with_scale(sigma), p["region"], p["rho"], num_pairs=cfg.num_pairs)


def _objective(cfg, p):
    """``fn(u, warm) -> (value, warm)`` for one setting ``p`` (a dict of scalars)."""
    sens = p["sensitivity"]
    if cfg.objective == "rdp":

        def fn(u, warm):
            mech = _mechanism(cfg, p, p["sigma_ref"] * jnp.exp(u))
            val = cfg.compositions * exact.worst_renyi(mech, p["target"], sens, trim=True)
            return val, warm

        return fn

    def fn(u, warm):
        eps = exact.epsilon_root(functools.partial(_log_delta, cfg), (u, p), p["target"], x0=warm)
        return eps, eps

    return fn


def _log_delta(cfg, eps, params):
    """``log δ(ε)`` of the setting ``p`` at ``u`` (no captured tracers: a root-solve callback)."""
    u, p = params
    return _log_delta_u(cfg, eps, u, p)


def _log_delta_u(cfg, eps, u, p):
    mech = _mechanism(cfg, p, p["sigma_ref"] * jnp.exp(u))
    return jnp.log(exact.worst_delta(mech, eps, p["sensitivity"], trim=True))


def _value_and_slope(cfg, p):
    """``vs(u, warm) -> (value, d value/du, warm)`` for the gradient method: one fused evaluation.

    (ε, δ): the Newton root and its implicit slope from the same iterations
    (:func:`accounting.exact.epsilon_and_slope`), warm-started from the previous step's ε
    moved along its slope (first-order predictor; ``warm = (ε, slope, u)``); the bracket
    estimates curvatures from slope secants. RDP: value, slope and exact curvature from a
    nested jvp of the closed form.
    """
    if cfg.objective == "rdp":
        fn = _objective(cfg, p)

        def vs_rdp(u, warm):
            # closed form: value, slope and curvature from one nested jvp,
            # which lets the bracket take Newton steps inside a rounded kink
            def slope(x):
                return jax.jvp(lambda y: fn(y, warm)[0], (x,), (jnp.ones_like(x),))

            (v, g), (_, h) = jax.jvp(slope, (u,), (jnp.ones_like(u),))
            return v, (g, h), warm

        return vs_rdp

    def vs(u, warm):
        e0, s0, u0 = warm
        x0 = jnp.maximum(e0 + s0 * (u - u0), 0.0)
        eps, slope = exact.epsilon_and_slope(functools.partial(_log_delta_u, cfg), u, p, p["target"], x0)
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
        u, steps, value, at_lower = _search.gradient(
            fn, lower, upper, w0, start, cfg.tol, cfg.max_steps, value_and_slope=vs, with_values=True
        )
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


def tune_boosted(
    kernel="gaussian",
    region=None,
    rho=0.9,
    sensitivity=1.0,
    delta=None,
    order=None,
    compositions=1,
    method="gradient",
    *,
    tol=1e-6,
    sigma_max_ratio=50.0,
    max_steps=100,
    num_pairs=201,
    start=0.0,
    scan=None,
    value_discretization_interval=1e-3,
) -> TuningResult:
    """Choose the kernel scale of ``PrivacyBoosted(kernel, region, rho)`` minimising exact privacy.

    The scale is searched as ``σ = σ_base·e^u``, ``u ∈ [0, log sigma_max_ratio]``, from the plain
    kernel meeting the utility constraint (:func:`base_sigma`); the boosting rate follows from
    ``rho``. All numeric arguments broadcast to one batch shape, tuned in one jit-compiled ``vmap``.

    Args:
      kernel: an additive noise kernel instance (a :class:`dpjax.AdditiveMechanism`: its scale
        leaf, ``kernel.scale_name``, is searched; its other leaves and static configuration are
        kept) or a built-in kernel's name (``"gaussian"``, ``"laplace"``, ``"discrete_laplace"``,
        ``"discrete_gaussian"``). The privacy boosting's closed forms come from the kernel
        protocol: exact and differentiable for every kernel.
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
        none. Default: 33 for a discrete kernel with a region that moves with the answer
        (relative or fixed), whose exact objective is the worst case over integer answers
        and can have a local minimum wherever the worst answer changes (a sawtooth: the
        discrete Gaussian, θ = 0.1, τ = 3, ρ = 0.9 has 12, the first at the plain kernel, 9%
        above the best); 0 otherwise.
      value_discretization_interval: loss-grid step of the PLD (``compositions > 1``).

    Returns:
      A :class:`TuningResult` with arrays of the batch shape (never worse than the plain kernel).

    Raises:
      ValueError: ``kernel`` is not an additive kernel or built-in name; ``region`` is not a region
        (or holds answers the kernel cannot take); ``method`` is unknown; not exactly one of
        ``delta`` and ``order``; ``compositions`` not a positive integer; ``tol <= 0``;
        ``sigma_max_ratio <= 1``; ``scan`` neither 0 nor an integer ≥ 3; ``rho`` outside (0, 1);
        ``sensitivity <= 0``; ``delta`` outside (0, 1); ``order <= 1``; a discrete kernel with a
        relative region whose listed pairs exceed one million at the largest scale searched.

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, §3.4 and Algorithm 2 (the ternary method).
    """
    template = resolve_kernel(kernel)
    _check_region(region)
    _check(method in _METHODS, "method", lambda: f"must be one of {_METHODS}, got {method!r}")
    _check((delta is None) != (order is None), "delta", "or order: give exactly one of the two")
    _check(
        isinstance(compositions, (int, np.integer)) and compositions >= 1,
        "compositions",
        lambda: f"must be a positive integer, got {compositions!r}",
    )
    _check(tol > 0, "tol", lambda: f"must be positive, got {tol!r}")
    _check(sigma_max_ratio > 1, "sigma_max_ratio", lambda: f"must be > 1, got {sigma_max_ratio!r}")
    if scan is None:
        scan = _SCAN if template.discrete and not region.translation_invariant else 0
    _check(
        isinstance(scan, (int, np.integer)) and (scan == 0 or scan >= 3),
        "scan",
        lambda: f"must be 0 or an integer >= 3, got {scan!r}",
    )
    rho_np = np.asarray(rho, float)
    _check(
        np.all((rho_np > 0) & (rho_np < 1)),
        "rho",
        lambda: f"must lie in (0, 1) (rho = 1 makes ε infinite), got {rho!r}",
    )
    _check(np.all(np.asarray(sensitivity, float) > 0), "sensitivity", lambda: f"must be positive, got {sensitivity!r}")
    region.check_answers(template.discrete)
    if delta is not None:
        d = np.asarray(delta, float)
        _check(np.all((d > 0) & (d < 1)), "delta", lambda: f"must lie in (0, 1), got {delta!r}")
    else:
        _check(np.all(np.asarray(order, float) > 1), "order", lambda: f"must be > 1, got {order!r}")

    with jax.enable_x64(True):
        to64 = lambda t: jax.tree_util.tree_map(lambda x: np.asarray(x, np.float64), t)  # noqa: E731
        region64, template = to64(region), to64(template)
        target = np.asarray(delta if delta is not None else order, np.float64)
        rho64, sens64 = np.asarray(rho, np.float64), np.asarray(sensitivity, np.float64)
        leaves = jax.tree_util.tree_leaves((region64, template))
        shape = np.broadcast_shapes(*[np.shape(a) for a in leaves], rho64.shape, sens64.shape, target.shape)
        objective = "rdp" if order is not None else ("pld" if compositions > 1 else "dp")
        # the baseline first (concrete): the largest scale searched fixes the static sizes
        base = np.asarray(_base_jit(template, region64, rho64, _terms(template, region64)))
        ref = base
        if not region.translation_invariant and np.any(np.isnan(base)):
            # a fixed region with ρ ≥ ½ (continuous kernels): no plain kernel meets the constraint;
            # search up from a quarter of the region's width (the objective is degenerate there,
            # its minimum runs to the upper bound)
            ref = np.where(np.isnan(base), np.asarray(_region_width(region64, template)) / 4.0, base)
        top_scale = float(sigma_max_ratio * np.max(ref))
        template = template.with_scale(np.float64(top_scale), max_scale=top_scale)
        listed = region.required_pairs(template.noise_reach(), template.discrete)  # every distinct pair, or None
        _check(
            not listed or listed <= _MAX_LISTED_PAIRS,
            "kernel",
            lambda: (
                f"{type(template).__name__} with a relative region lists one pair per region width up to the kernel's "
                f"reach: {listed} pairs at the largest scale searched ({sigma_max_ratio:g} x {np.max(ref):.6g}), over "
                f"the limit of {_MAX_LISTED_PAIRS}; use a continuous kernel or a smaller sigma_max_ratio"
            ),
        )
        cfg = _Config(
            objective,
            int(compositions),
            method,
            float(tol),
            _search.ternary_iterations(math.log(sigma_max_ratio), float(tol)),
            int(max_steps),
            int(listed or num_pairs),
            float(start),
            int(scan),
        )
        u_max = math.log(sigma_max_ratio)
        if objective == "pld":
            flat = _prepare(template, region64, rho64, sens64, target, base, ref, u_max, shape)
            u, value, base_value, steps = _composed.solve(
                functools.partial(_mechanism, cfg), cfg, flat, float(value_discretization_interval)
            )
            out = _finish(cfg, flat, u, value, base_value, steps, shape)
        else:
            out = _tune_batch(cfg, template, region64, rho64, sens64, target, base, ref, u_max, shape)
        # one device-to-host transfer for everything the result holds
        out = jax.tree_util.tree_map(np.asarray, jax.device_get(out))
        kernel_out = template.with_scale(out["sigma"])
        # (a region listing every pair sizes its list for the tuned scale itself)
        mech = dpjax.PrivacyBoosted(kernel_out, out["region"], out["rho"], num_pairs=None if listed else num_pairs)
        base_sig = out["sigma_base"]
        baseline = None if np.any(np.isnan(base_sig)) else template.with_scale(base_sig)
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


def _prepare(kernel, region, rho, sensitivity, target, base, ref, u_max, shape):
    """Flat float64 settings: the kernel and region pytrees and the scalars broadcast to the batch;
    ``sigma_base`` the plain kernel meeting the constraint (NaN where none does), ``sigma_ref``
    the search's lower end (``u = 0``)."""
    flat_of = lambda x: jnp.broadcast_to(jnp.asarray(x, jnp.float64), shape).reshape(-1)  # noqa: E731
    arrays = dict(rho=rho, sensitivity=sensitivity, sigma_base=base, sigma_ref=ref, target=target)
    flat = {k: flat_of(v) for k, v in arrays.items()}
    flat["kernel"] = jax.tree_util.tree_map(flat_of, kernel)
    flat["region"] = jax.tree_util.tree_map(flat_of, region)
    flat["u_max"] = jnp.full(flat["rho"].shape, u_max)
    return flat


def _finish(cfg, flat, u, value, base, steps, shape):
    """Everything :class:`TuningResult` holds, as arrays of the batch shape."""
    sigma = flat["sigma_ref"] * jnp.exp(u)
    q = _mechanism(cfg, flat, sigma).boosting_rate
    base_sig = flat["sigma_base"]
    out = {
        "sigma": sigma,
        "epsilon": value,
        "baseline_epsilon": jnp.where(jnp.isnan(base_sig), jnp.nan, base),
        "sigma_base": base_sig,
        "boosting_rate": q,
        "steps": steps,
        "rho": flat["rho"],
        "region": flat["region"],
    }
    return jax.tree_util.tree_map(lambda x: x.reshape(shape), out)


@functools.partial(jax.jit, static_argnums=(0, 9))
def _tune_batch(cfg, kernel, region, rho, sensitivity, target, base, ref, u_max, shape):
    """Set up, tune and summarise the whole batch in one compiled call (no eager glue; the
    baseline scales come in concrete, having fixed the static sizes)."""
    flat = _prepare(kernel, region, rho, sensitivity, target, base, ref, u_max, shape)
    u, value, base, steps = _solve_batch(cfg, flat)
    return _finish(cfg, flat, u, value, base, steps, shape)
