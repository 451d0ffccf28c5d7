"""Tuning a piecewise mixture (Lap_m / Geom_m) for utility at an exact pure-DP target (issue 10).

:func:`tune_mixture` minimises E|X| (``objective="mean_abs"``) or E X² (``"variance"``) of the
noise over the mixture's parameters subject to its **exact** pure ε ≤ ``pure_epsilon``
(``kernel.pure_epsilon(Δ) = max(λ1 Δ, φ(Δ))``, tight), and compares with the plain Laplace
/ geometric kernel at the same exact pure ε.

Where the optimum can lie (spec §3.6 and its Erratum): when r ≥ 1, or c ≥ Δ, the mixture's
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
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

import dpjax
from dpjax.kernels.mixture import GeometricMixture, LaplaceMixture
from dpjax.validation import check_int, check_positive

__all__ = ["MixtureTuning", "tune_mixture"]

_OBJECTIVES = ("mean_abs", "variance")
_KERNELS = ("laplace", "geometric")
#: relative improvement below which the mixture is not reported (the plain kernel is returned).
_MIN_GAIN = 1e-9


@dataclasses.dataclass(frozen=True)
class MixtureTuning:
    """Outcome of :func:`tune_mixture` (arrays of the targets' shape).

    Attributes:
      mechanism: the tuned kernel — a mixture where one beats the plain kernel, else the plain
        ``dpjax.Laplace`` / ``dpjax.DiscreteLaplace`` at the target. Batched targets: a batched
        ``LaplaceMixture`` (rows without a gain have r = 1, c = 0: the plain Laplace law), or for
        the geometric kernel (whose integer breakpoint is static) a tuple of kernels.
      objective: its E|X| or E X².
      baseline_objective: the plain kernel's at the same exact pure ε.
      pure_epsilon: the mechanism's exact pure ε (≤ the target).
      improved: whether a mixture beat the plain kernel.
    """

    mechanism: object
    objective: jax.Array
    baseline_objective: jax.Array
    pure_epsilon: jax.Array
    improved: jax.Array
    kernel: str
    objective_name: str

    @property
    def ratio(self):
        """objective / baseline_objective (1 where the plain kernel is returned)."""
        return self.objective / self.baseline_objective


def _as_mixture(k):
    """A plain Laplace / discrete Laplace kernel as the mixture with r = 1, c = 0 (the same law)."""
    if isinstance(k, dpjax.Laplace):
        return LaplaceMixture._unchecked(k.scale, k.scale, jnp.zeros_like(k.scale))
    if isinstance(k, dpjax.DiscreteLaplace):
        return GeometricMixture._unchecked(k.scale, k.scale, 0)
    return k


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


def tune_mixture(pure_epsilon, *, sensitivity=1.0, kernel="laplace", objective="mean_abs", steps=300):
    """The Lap_m (``kernel="laplace"``) or Geom_m (``"geometric"``, integer Δ) with the least E|X|
    (``objective="mean_abs"``) or E X² (``"variance"``) whose exact pure ε is at most
    ``pure_epsilon`` for sensitivity Δ; the plain kernel when no mixture beats it.

    ``pure_epsilon``: a target or an array of targets (tuned together under ``vmap``). Exact
    throughout: the constraint is the kernel's tight pure ε, never the paper's ζ. Runs in float64.
    """
    check_positive("pure_epsilon", pure_epsilon)
    check_positive("sensitivity", sensitivity)
    if kernel not in _KERNELS:
        raise ValueError(f"kernel must be one of {_KERNELS}, got {kernel!r}")
    if objective not in _OBJECTIVES:
        raise ValueError(f"objective must be one of {_OBJECTIVES}, got {objective!r}")
    steps = check_int("steps", steps, minimum=1)
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
            cands = [(c, _optimise(eps0, delta, starts, GeometricMixture, objective, steps, c))
                     for c in range(1, int(round(delta)))]
        cls_plain = dpjax.Laplace if kernel == "laplace" else dpjax.DiscreteLaplace
        plains = [cls_plain.from_epsilon(e, delta) for e in flat]  # scales rounded up: exactly ≤ ε0
        base = np.asarray([float(_moment(_as_mixture(k), objective)) for k in plains])
        best = base.copy()
        choice = [None] * flat.size
        for c, (val, p) in cands:
            val, p = np.asarray(val)[:flat.size], np.asarray(p)[:flat.size]
            for i in range(flat.size):
                if val[i] < best[i] * (1.0 - _MIN_GAIN):
                    mech = _build(LaplaceMixture if c is None else GeometricMixture, p[i, 0], p[i, 1],
                                  jnp.asarray(flat[i]), delta, c)
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
            mech = LaplaceMixture._unchecked(*(jnp.asarray(np.reshape([float(getattr(k, n)) for k in mixtures], shape),
                                                           jnp.float64)
                                              for n in ("inner_scale", "outer_scale", "breakpoint")))
        else:
            mech = tuple(kernels)
        pure = np.asarray([float(k.pure_epsilon(delta)) for k in kernels])
        assert np.all(pure <= flat), (pure, flat)
    return MixtureTuning(mech, best.reshape(shape), base.reshape(shape), pure.reshape(shape),
                         improved.reshape(shape), kernel, objective)
