"""Exact privacy of a composite release (``dpjax.Composite``; Zhang et al., IEEE S&P 2024).

* :func:`epsilon_star` — the true worst-case loss ε* over every neighbouring pair of the
  window (the 1-D reduction of :mod:`dpjax.composite.privacy`; never below the truth),
  next to the nominal ε: a :class:`CompositePrivacy` report.
* :func:`brute_force_epsilon` — the same by an explicit scan over answer pairs and outputs
  (a check; a lower estimate of ε*).
* :func:`pld` — the PLD for composition: ``accounting.pld(mech)`` through the mechanism's
  hooks (exact 3 atoms for A1B1, cell-rounded pessimistic for the others, every query
  capped by ε*); here with the sensitivity defaulting to the window's width.

Float64 inside ``jax.enable_x64(True)``; the global flag is untouched.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from accounting._numerics import to64, x64
from accounting.privacy_loss.distribution import pld as _pld
from dpjax.composite import Composite, privacy
from dpjax.validation import check_int, check_positive, is_traced

__all__ = ["CompositePrivacy", "epsilon_star", "brute_force_epsilon", "pld"]


@dataclasses.dataclass(frozen=True)
class CompositePrivacy:
    """The exact privacy of a composite release, next to its nominal ε (:func:`epsilon_star`).

    Arrays have the mechanism's batch shape.

    Attributes:
      nominal: the declared ε.
      epsilon: the true worst-case loss ε* (≤ nominal).
      sup_inf: the paper's own bound ln(sup P / inf P') (Theorem 3.2).
      pair: the two answers attaining ε*.
      output: the output where the loss peaks.
    """

    nominal: np.ndarray
    epsilon: np.ndarray
    sup_inf: np.ndarray
    pair: tuple
    output: np.ndarray

    def __str__(self):
        return f"epsilon* = {np.asarray(self.epsilon)} (nominal {np.asarray(self.nominal)})"


def _check(mech, sensitivity):
    if not isinstance(mech, Composite):
        raise ValueError(f"mech must be a dpjax.Composite, got {type(mech).__name__}")
    if sensitivity is not None:
        check_positive("sensitivity", sensitivity)


@functools.lru_cache(maxsize=1)
def _details_program():
    """The 1-D/2-D reduction, compiled once per (activation, base, batch size, sensitivity given)."""
    return jax.jit(jax.vmap(privacy.epsilon_star_details, in_axes=(0, None)))


@x64
def epsilon_star(mech, sensitivity=None) -> CompositePrivacy:
    """The exact worst-case privacy loss ε* of one composite release.

    The maximum of the pointwise loss over every neighbouring pair of the window (the 1-D reduction
    of :mod:`dpjax.composite.privacy`; never below the truth). Concrete parameters only (the result
    holds numpy arrays): under ``jax.grad`` / ``jit`` it refuses, naming the differentiable route.

    Args:
      mech: a :class:`dpjax.Composite` (batched or not).
      sensitivity: the largest distance of two neighbouring answers; default: every pair of the
        window (the paper's design W = Δf).

    Returns:
      A :class:`CompositePrivacy` with arrays of the mechanism's batch shape.

    Raises:
      ValueError: ``mech`` not a ``dpjax.Composite``; ``sensitivity`` not positive; traced
        parameters.

    References:
      Zhang et al., "Bounded and Unbiased Composite Differential Privacy", IEEE S&P 2024, Theorem 3.2.
    """
    _check(mech, sensitivity)
    if is_traced(sensitivity) or any(is_traced(x) for x in jax.tree_util.tree_leaves(mech)):
        raise ValueError(
            "mech: epsilon_star takes concrete parameters and cannot be differentiated or traced; "
            "differentiate accounting.exact.epsilon(mech, delta) (ε at δ → 0 is ε*) instead"
        )
    m = to64(mech)
    d = m._derived()
    sens = None if sensitivity is None else jnp.asarray(sensitivity, jnp.float64)
    shape = tuple(m.batch_shape)
    flat = jax.tree_util.tree_map(lambda p: jnp.broadcast_to(p, shape).reshape(-1), m)
    res = _details_program()(flat, sens)
    eps, x, a, a2 = (np.asarray(r).reshape(shape) for r in res)
    # back to answers: a = C_p/S1 − m/2, C_p = (f − mid)·C
    f = lambda start: np.asarray(d["mid"] + (start + 0.5 * d["m"]) * d["s1"] / d["C"])  # noqa: E731
    out = np.asarray(d["mid"] + x / d["C"])
    gmin = d["t"] if m.base == "quartic" else d["y"]
    sup_inf = np.asarray(jnp.log1p(d["k"] / gmin))
    return CompositePrivacy(np.asarray(d["eps"]), eps, sup_inf, (f(a), f(a2)), out)


@x64
def brute_force_epsilon(mech, sensitivity=None, *, num_answers=41, num_outputs=40001):
    """A lower estimate of ε* by an explicit scan (a numerical check of :func:`epsilon_star`).

    The maximum of the pointwise loss over a grid of answers of the window (pairs at distance ≤ Δ)
    and a grid of outputs.

    Args:
      mech: a single (unbatched) :class:`dpjax.Composite`.
      sensitivity: the largest distance of two neighbouring answers; default: the whole window.
      num_answers: answers on the window's grid (≥ 2).
      num_outputs: outputs on the grid (≥ 2).

    Returns:
      The largest loss found, a Python float.

    Raises:
      ValueError: ``mech`` not a ``dpjax.Composite`` or batched; ``sensitivity`` not positive;
        ``num_answers`` or ``num_outputs`` not an integer ≥ 2.
    """
    _check(mech, sensitivity)
    num_answers = check_int("num_answers", num_answers, minimum=2)
    num_outputs = check_int("num_outputs", num_outputs, minimum=2)
    if mech.batch_shape:
        raise ValueError("mech: brute_force_epsilon takes a single mechanism")
    m = to64(mech)
    d = m._derived()
    answers = np.linspace(float(d["lo"]), float(d["hi"]), num_answers)
    L = float(d["L"])
    xs = jnp.linspace(-L, L, num_outputs)
    logp = np.asarray(jax.vmap(lambda v: jnp.log(m.density_x(xs, v)))(jnp.asarray(answers)))
    sens = np.inf if sensitivity is None else float(sensitivity)
    best = -np.inf
    for i in range(num_answers):
        near = np.abs(answers - answers[i]) <= sens * (1 + 1e-12)
        near[i] = False
        if near.any():
            best = max(best, float(np.max(logp[i][None, :] - logp[near])))
    return best


def pld(mech, *, sensitivity=None, **kwargs):
    """The privacy loss distribution of a composite release, for composition.

    ``accounting.pld(mech, sensitivity=...)`` (exact 3 atoms for A1B1, cell-rounded pessimistic for
    the others, every query capped by ε*), with the sensitivity defaulting to the window's width.

    Args:
      mech: a :class:`dpjax.Composite`.
      sensitivity: the neighbouring answers' distance; default: the window's width.
      **kwargs: passed to :func:`accounting.pld`.

    Returns:
      An :class:`accounting.PrivacyLossDistribution`.

    Raises:
      ValueError: ``mech`` not a ``dpjax.Composite``; ``sensitivity`` not positive; as
        :func:`accounting.pld`.
    """
    _check(mech, sensitivity)
    if sensitivity is None:
        lo, hi = mech.window
        sensitivity = float(np.max(np.asarray(hi, np.float64) - np.asarray(lo, np.float64)))
    return _pld(mech, sensitivity=sensitivity, **kwargs)
