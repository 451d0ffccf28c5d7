"""Tuning a piecewise mixture (Lap_m / Geom_m) for utility at an exact pure-DP target.

:func:`tune_mixture` minimises E|X| (``objective="mean_abs"``) or E X² (``"variance"``) of the
noise over the mixture's parameters subject to its **exact** pure ε ≤ ``pure_epsilon``
(``kernel.pure_epsilon(Δ) = max(λ1 Δ, φ(Δ))``, tight), and compares with the plain Laplace
/ geometric kernel at the same exact pure ε.

Where the optimum can lie (docs/mixture.md): when r ≥ 1, or c ≥ Δ, the mixture's
log density is λ-Lipschitz with λ Δ its pure ε, and the plain kernel at that ε dominates it
stochastically (hazard rate ≤ λ): no mixture there beats the plain kernel in any monotone
loss. The only region left is r < 1 with c < Δ (a steep centre narrower than the
sensitivity, flatter tails), where the pure ε is λ2 c + λ1 (Δ − c) < λ2 Δ. There the
constraint is met with equality by the parametrisation

    c = Δ·sigmoid(a),   λ1 = (ε0/Δ)·sigmoid(b),   λ2 = λ1 + (ε0 − λ1 Δ)/c   (≥ λ1),

and (a, b) are optimised with optax (Adam) through the differentiable closed-form moments
from a grid of starts, batched over the targets with ``vmap``. At Δ = 1 the mixture wins
from ε0 ≈ 3.35 (E|X|) / 4.28 (E X²) upwards; below, the result is the plain kernel
(ratio 1) — the tuner never reports a gain it does not have. On the integers (Geom_m)
c < Δ needs Δ ≥ 2 (c = 1 … Δ − 1, a static loop); at Δ = 1 the answer is always the
plain geometric.

An (ε, δ) target instead (``delta=``, Lap_m): the constraint is the exact ε(δ) of
:mod:`accounting.exact` (the closed-form hockey stick, the supremum over every shift up to
Δ). Lap_m is a scale family in its shape (r = b2/b1, γ = c/b2): at each shape the scale
that meets δ(ε0) ≤ δ is found by bisection on the exact profile (δ(ε0) falls as the scale
grows: the shifts examined, up to Δ/scale at unit scale, shrink), and the objective is
minimised over a log grid of shapes, zoomed twice around the best (a grid search, not
gradients: the calibrated scale is a root of the profile). The baseline is the plain
Laplace calibrated the same way to the same (ε0, δ).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpjax._float64 import x64
from dpjax.kernels import by_name
from dpjax.kernels.mixture import GeometricMixture, LaplaceMixture
import accounting
from dpjax.validation import check_int, check_positive, check_probability

__all__ = ["MixtureTuning", "tune_mixture"]

_OBJECTIVES = ("mean_abs", "variance")
_KERNELS = ("laplace", "geometric")
#: relative improvement below which the mixture is not reported (the plain kernel is returned).
_MIN_GAIN = 1e-9


@dataclasses.dataclass(frozen=True)
class MixtureTuning:
    """Outcome of :func:`tune_mixture`.

    Arrays have the targets' shape.

    Attributes:
      mechanism: the tuned kernel — a mixture where one beats the plain kernel, else the plain
        ``dpjax.Laplace`` / ``dpjax.DiscreteLaplace`` at the target. Batched targets: a batched
        ``LaplaceMixture`` (rows without a gain have r = 1, c = 0: the plain Laplace law), or for
        the geometric kernel (whose integer breakpoint is static) and for an (ε, δ) target a tuple
        of kernels (flat order).
      objective: its E|X| or E X².
      baseline_objective: the plain kernel's at the same exact pure ε.
      pure_epsilon: the mechanism's exact pure ε (≤ the target for a pure-ε target; for an
        (ε, δ) target informational, it may exceed ε).
      improved: whether a mixture beat the plain kernel.
      kernel: ``"laplace"`` or ``"geometric"``, as asked.
      objective_name: ``"mean_abs"`` or ``"variance"``, as asked.
      delta: the δ of an (ε, δ) target, else ``None``.
      epsilon: for an (ε, δ) target the mechanism's exact ε(δ) (≤ the target), else ``None``.
    """

    mechanism: object
    objective: jax.Array
    baseline_objective: jax.Array
    pure_epsilon: jax.Array
    improved: jax.Array
    kernel: str
    objective_name: str
    delta: float | None = None
    epsilon: jax.Array | None = None

    @property
    def ratio(self):
        """The tuned kernel's objective over the plain kernel's.

        Returns:
          ``objective / baseline_objective`` (1 where the plain kernel is returned).
        """
        return self.objective / self.baseline_objective


def _as_mixture(k):
    """The kernel as a mixture (a plain Laplace / discrete Laplace kernel: r = 1, c = 0, the same law)."""
    return k.as_mixture()


def _moment(k, objective):
    return k.mean_abs() if objective == "mean_abs" else k.second_moment()


def _build(cls, a, b, eps0, delta, c=None):
    """The mixture of the parametrisation at (a, b) (Geom_m: at the static integer c)."""
    if c is None:
        c = delta * jax.nn.sigmoid(a)
    l1 = eps0 / delta * jax.nn.sigmoid(b)
    l2 = l1 + (eps0 - l1 * delta) / c
    return cls._unchecked(1.0 / l2, 1.0 / l1, c)


@functools.partial(jax.jit, static_argnames=("cls", "objective", "steps", "c"))
def _optimise(eps0, delta, starts, cls, objective, steps, c):
    """Best (value, a, b) over the starts for every target (vmapped)."""
    opt = optax.adam(0.05)

    def loss(p, e):
        return jnp.log(_moment(_build(cls, p[0], p[1], e, delta, c), objective))

    def one_start(p0, e):
        def step(s, _):
            p, st = s
            g = jax.grad(loss)(p, e)
            up, st = opt.update(g, st, p)
            return (optax.apply_updates(p, up), st), None

        (p, _), _ = jax.lax.scan(step, (p0, opt.init(p0)), None, length=steps)
        return loss(p, e), p

    def one_target(e):
        vals, ps = jax.vmap(lambda p0: one_start(p0, e))(starts)
        vals = jnp.where(jnp.isfinite(vals), vals, jnp.inf)
        i = jnp.argmin(vals)
        return jnp.exp(vals[i]), ps[i]

    return jax.vmap(one_target)(eps0)


def _within(kernel, eps0, delta):
    """The kernel scaled (both scales) so that its exact pure ε is ≤ ε0 despite rounding."""
    pure = np.asarray(kernel.pure_epsilon(delta))
    for _ in range(4):
        over = pure > eps0
        if not np.any(over):
            break
        f = np.where(over, pure / eps0 * (1 + 8 * np.finfo(float).eps), 1.0)
        kernel = type(kernel)._unchecked(kernel.inner_scale * f, kernel.outer_scale * f, kernel.breakpoint)
        pure = np.asarray(kernel.pure_epsilon(delta))
    assert np.all(pure <= eps0), (pure, eps0)
    return kernel


def _profile_at(mech, eps0, delta, sens):
    return np.asarray(accounting.exact.privacy_profile(mech, eps0, sens))


def _calibrate(make, shapes, eps0, delta, sens, rounds=34):
    """Per shape, a scale k with exact δ(ε0) ≤ ``delta`` for ``make(shapes, k)`` (batched), within
    a relative 2^-rounds·log(2^12) of the smallest such k (bisection on log k, upper end kept)."""
    n = len(shapes[0])
    hi = np.full(n, 1.0)
    for _ in range(200):  # upper end: exactly ε0-DP (pure ε, closed form), so δ(ε0) = 0
        over = np.asarray(make(shapes, hi).pure_epsilon(sens)) > eps0
        if not over.any():
            break
        hi = np.where(over, 2.0 * hi, hi)
    lo = hi / 4096.0
    for _ in range(200):  # lower end: δ(ε0) > delta
        ok = _profile_at(make(shapes, lo), eps0, delta, sens) <= delta
        if not ok.any():
            break
        lo = np.where(ok, lo / 4096.0, lo)
    for _ in range(rounds):
        mid = np.sqrt(lo * hi)
        ok = _profile_at(make(shapes, mid), eps0, delta, sens) <= delta
        hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid)
    return hi


def _mixtures(shapes, k):
    r, g = shapes
    k = jnp.asarray(k, jnp.float64)
    return LaplaceMixture._unchecked(k, k / jnp.asarray(r), k * jnp.asarray(g))


def _verified(mech, eps0, delta, sens):
    """The kernel, scale nudged up until its exact ε(δ) (reported on the safe side) is ≤ ε0."""
    for i in range(30):
        e = float(accounting.exact.epsilon(mech, delta, sens))
        if e <= eps0:
            return mech, e
        mech = mech.with_scale(getattr(mech, mech.scale_name) * (1.0 + 1e-9 * 4.0**i))
    raise AssertionError(f"could not meet epsilon {eps0} at delta {delta}")  # pragma: no cover


def _tune_approx(eps0, delta, sens, objective, grid):
    """One (ε0, δ) target: (best kernel, its objective, the calibrated Laplace's, exact ε(δ))."""
    laplace = by_name("laplace")
    lap_scale = _calibrate(lambda sh, k: laplace(jnp.asarray(k, jnp.float64)), (np.zeros(1),), eps0, delta, sens)[0]
    plain, _ = _verified(laplace(jnp.float64(lap_scale)), eps0, delta, sens)
    base = float(_moment(_as_mixture(plain), objective))
    lr = np.linspace(np.log(0.05), np.log(20.0), grid)  # r = b2/b1
    lg = np.linspace(np.log(0.01), np.log(20.0), grid)  # γ = c/b2
    best_val, best_shape = np.inf, None
    pure = tune_mixture(eps0, sensitivity=sens, objective=objective)  # ε0-DP: within (ε0, δ) too
    for rnd in range(3):  # a grid (seeded with the pure-ε optimum's shape), then two zooms around its best point
        rr, gg = (a.ravel() for a in np.meshgrid(lr, lg))
        if rnd == 0 and bool(pure.improved):
            pm = pure.mechanism
            rr[-1] = np.log(float(pm.inner_scale) / float(pm.outer_scale))
            gg[-1] = np.log(float(pm.breakpoint) / float(pm.inner_scale))
        shapes = (np.exp(rr), np.exp(gg))
        k = _calibrate(_mixtures, shapes, eps0, delta, sens)
        vals = np.asarray(_moment(_mixtures(shapes, k), objective))
        i = int(np.argmin(np.where(np.isfinite(vals), vals, np.inf)))
        if vals[i] < best_val:
            best_val, best_shape = float(vals[i]), (rr[i], gg[i], k[i])
        sr, sg = 2.0 * (lr[1] - lr[0]) / (grid - 1), 2.0 * (lg[1] - lg[0]) / (grid - 1)
        lr = best_shape[0] + sr * np.linspace(-(grid - 1) / 2, (grid - 1) / 2, grid)
        lg = best_shape[1] + sg * np.linspace(-(grid - 1) / 2, (grid - 1) / 2, grid)
    if best_val < base * (1.0 - _MIN_GAIN):
        r, g, k = np.exp(best_shape[0]), np.exp(best_shape[1]), best_shape[2]
        mech = LaplaceMixture._unchecked(jnp.float64(k), jnp.float64(k / r), jnp.float64(k * g))
        mech, e = _verified(mech, eps0, delta, sens)
        val = float(_moment(mech, objective))
        if val < base * (1.0 - _MIN_GAIN):
            return mech, val, base, e
    return plain, base, base, float(accounting.exact.epsilon(plain, delta, sens))


def tune_mixture(
    pure_epsilon, *, delta=None, sensitivity=1.0, kernel="laplace", objective="mean_abs", steps=300, grid=8
):
    """The piecewise mixture with the least noise at an exact privacy target.

    Finds the Lap_m (``kernel="laplace"``) or Geom_m (``"geometric"``, integer Δ) with the least
    E|X| (``objective="mean_abs"``) or E X² (``"variance"``) whose exact pure ε is at most
    ``pure_epsilon`` for sensitivity Δ, or the plain kernel when no mixture beats it. Exact
    throughout: the constraint is the kernel's tight pure ε, never the paper's ζ. Runs in float64.

    Args:
      pure_epsilon: a target ε, or an array of targets (tuned together under ``vmap``).
      delta: an (ε, δ) target instead (Lap_m only): ``pure_epsilon`` is then the ε of the target and
        the constraint the exact ε(δ) ≤ ε (:func:`accounting.exact.epsilon`, every shift up to Δ);
        the baseline is the plain Laplace calibrated to the same (ε, δ). One number.
      sensitivity: Δ (an integer for the geometric mixture).
      kernel: ``"laplace"`` (Lap_m) or ``"geometric"`` (Geom_m).
      objective: ``"mean_abs"`` (E|X|) or ``"variance"`` (E X²).
      steps: Adam steps per start of the pure-ε search.
      grid: shape points per axis of the (ε, δ) search (``grid²`` calibrated shapes per round,
        three rounds).

    Returns:
      A :class:`MixtureTuning` with arrays of ``pure_epsilon``'s shape.

    Raises:
      ValueError: ``pure_epsilon`` or ``sensitivity`` not positive; ``kernel`` or ``objective``
        unknown; ``steps < 1``; ``delta`` outside (0, 1), not one number, or given with
        ``kernel="geometric"``; ``grid < 2``; a non-integer ``sensitivity`` for the geometric
        mixture.

    References:
      Li et al., "More Flexible Differential Privacy: The Application of Piecewise Mixture
      Distributions in Query Release", arXiv:1707.01189 (Lap_m, Geom_m).
    """
    check_positive("pure_epsilon", pure_epsilon)
    check_positive("sensitivity", sensitivity)
    if kernel not in _KERNELS:
        raise ValueError(f"kernel must be one of {_KERNELS}, got {kernel!r}")
    if objective not in _OBJECTIVES:
        raise ValueError(f"objective must be one of {_OBJECTIVES}, got {objective!r}")
    steps = check_int("steps", steps, minimum=1)
    if delta is not None:
        check_probability("delta", delta, high_open=True)
        if np.ndim(delta):
            raise ValueError(f"delta must be one number, got {delta!r}")
        if kernel != "laplace":
            raise ValueError(
                "delta: an (epsilon, delta) target is tuned for kernel='laplace' only (Geom_m: use a "
                "pure-epsilon target)"
            )
        grid = check_int("grid", grid, minimum=2)
        return _tune_delta(np.asarray(pure_epsilon, float), float(delta), float(sensitivity), objective, grid)
    delta = float(sensitivity)
    if kernel == "geometric" and delta != round(delta):
        raise ValueError(f"sensitivity must be an integer for the geometric mixture, got {sensitivity!r}")
    targets = np.asarray(pure_epsilon, float)
    flat = targets.reshape(-1)
    with jax.enable_x64(True):
        # padded (repeats) to a power of two ≥ 8: one compilation serves every batch up to that size
        eps0 = jnp.asarray(np.resize(flat, max(8, 1 << (flat.size - 1).bit_length())))
        if kernel == "laplace":
            grid = jnp.asarray([-2.0, 0.0, 2.0])
            starts = jnp.stack(jnp.meshgrid(grid, grid), -1).reshape(-1, 2)
            cands = [(None, _optimise(eps0, delta, starts, LaplaceMixture, objective, steps, None))]
        else:
            starts = jnp.stack([jnp.zeros(5), jnp.linspace(-3.0, 3.0, 5)], -1)
            cands = [
                (c, _optimise(eps0, delta, starts, GeometricMixture, objective, steps, c))
                for c in range(1, int(round(delta)))
            ]
        cls_plain = by_name("laplace" if kernel == "laplace" else "discrete_laplace")
        plains = [cls_plain.from_epsilon(e, delta) for e in flat]  # scales rounded up: exactly ≤ ε0
        base = np.asarray([float(_moment(_as_mixture(k), objective)) for k in plains])
        best = base.copy()
        choice = [None] * flat.size
        for c, (val, p) in cands:
            val, p = np.asarray(val)[: flat.size], np.asarray(p)[: flat.size]
            for i in range(flat.size):
                if val[i] < best[i] * (1.0 - _MIN_GAIN):
                    mech = _build(
                        LaplaceMixture if c is None else GeometricMixture,
                        p[i, 0],
                        p[i, 1],
                        jnp.asarray(flat[i]),
                        delta,
                        c,
                    )
                    mech = _within(jax.tree_util.tree_map(jnp.asarray, mech), flat[i], delta)
                    v = float(_moment(mech, objective))
                    if v < best[i] * (1.0 - _MIN_GAIN):
                        best[i], choice[i] = v, mech
        improved = np.asarray([m is not None for m in choice])
        kernels = []
        for i, m in enumerate(choice):
            kernels.append(plains[i] if m is None else m)
        shape = targets.shape
        if not shape:
            mech = kernels[0]
        elif kernel == "laplace":
            mixtures = [_as_mixture(k) for k in kernels]
            mech = LaplaceMixture._unchecked(
                *(
                    jnp.asarray(np.reshape([float(getattr(k, n)) for k in mixtures], shape), jnp.float64)
                    for n in ("inner_scale", "outer_scale", "breakpoint")
                )
            )
        else:
            mech = tuple(kernels)
        pure = np.asarray([float(k.pure_epsilon(delta)) for k in kernels])
        assert np.all(pure <= flat), (pure, flat)
    return MixtureTuning(
        mech, best.reshape(shape), base.reshape(shape), pure.reshape(shape), improved.reshape(shape), kernel, objective
    )


@x64
def _tune_delta(targets, delta, sens, objective, grid):
    flat = targets.reshape(-1)
    rows = [_tune_approx(float(e), delta, sens, objective, grid) for e in flat]
    kernels = [r[0] for r in rows]
    # batched: a tuple (flat order), each row's own kernel — a plain Laplace row written as the
    # r = 1, c = 0 mixture would be accounted along every shift, a hair above its exact ε(δ)
    mech = kernels[0] if not targets.shape else tuple(kernels)
    pure = np.asarray([float(_as_mixture(k).pure_epsilon(sens)) for k in kernels])
    col = lambda j: np.asarray([r[j] for r in rows], float).reshape(targets.shape)  # noqa: E731
    improved = np.asarray([isinstance(k, LaplaceMixture) for k in kernels]).reshape(targets.shape)
    return MixtureTuning(
        mech, col(1), col(2), pure.reshape(targets.shape), improved, "laplace", objective, delta=delta, epsilon=col(3)
    )
