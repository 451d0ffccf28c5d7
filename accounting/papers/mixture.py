"""The piecewise-mixture paper's own privacy quantities — **NOT CERTIFIED**; for reproducing it only.

.. warning::

   **NOTHING IN THIS MODULE IS A PRIVACY GUARANTEE.** The "general privacy budget" ζ is
   an exponential *average* of the absolute privacy loss, not a DP parameter (docs/mixture.md,
   Lemma 1's converse is false). The paper's headline Geom_m(c = 5, ε = 0.2, rε = 1) has
   ζ = 0.328 but is exactly 1-DP, or (0.328, 0.0399)-DP; ten releases cost ε ≈ 6.69 at
   δ = 1e-6 (``accounting.pld(mech).self_compose(10)``), not Σζ = 3.28. For any guarantee
   use ``mech.pure_epsilon``, :mod:`accounting.exact` or ``accounting.pld`` (the default).

Li, Yang, et al., "More Flexible Differential Privacy: The Application of Piecewise Mixture
Distributions in Query Release" (arXiv:1707.01189v3):

* **Definition 5 / eqs. (24)–(27)** — :func:`general_privacy_budget`: ζ = ln E_P[e^{|L|}]
  for the shift Δ. Forms: ``"definition"`` (the integral/sum of eq. 24 in closed form over
  the loss's linear pieces; exact for both kernels, any Δ), ``"eq25"`` (Geom_m, Δ = 1: exact,
  equal to the definition), ``"eq27"`` (rounded Lap_m, the approximation TABLE I prints, typo
  +0.5e^{0.5ε} → +0.5e^{−0.5ε} fixed, needs c ≥ 1.5), ``"naive"`` (ln(e^ε(1−P_out) + e^{rε}P_out),
  the Fig. 1 value 0.2975); :func:`rounded_laplace_budget` is eq. (26) (typo fixed, exact);
  :func:`laplace_epsilon_for_budget` inverts it (TABLE I's ε_Lap).
* **Proposition 1** — :func:`compose_budgets`: Σ ζ_i. The paper says "=", the truth is "≤"
  (triangle inequality), and neither is a DP composition.
* **Theorems 2 and 4** — :func:`usefulness`: the tail radius t* with P(max_k |Y_k| ≥ t*) ≤ δ,
  as printed (``corrected=False``) or as corrected (Theorem 4's proof uses
  a1,g e^{−rεt} for a tail that is 2α1/(α1+1) times larger).
* :func:`rounded_moments` — E|round(Y)|, E round(Y)² of Lap_m and Laplace (TABLE I's "Lap_m"
  and "Lap" columns are moments of the rounded noise).

Float64 inside ``jax.enable_x64`` (the user's flag untouched); broadcasts over batches.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from accounting._numerics import to64, x64
from dpjax.kernels.mixture import GeometricMixture, LaplaceMixture, piecewise_log_integral
from dpjax.validation import check_int, check_positive, check_probability

__all__ = [
    "general_privacy_budget",
    "rounded_laplace_budget",
    "laplace_epsilon_for_budget",
    "compose_budgets",
    "usefulness",
    "Usefulness",
    "rounded_moments",
    "NOT_CERTIFIED",
]

#: the label every result of this module carries.
NOT_CERTIFIED = "NOT CERTIFIED: the paper's average-case budget / bound, not a DP guarantee"


def _check_kernel(mech):
    if not callable(getattr(mech, "as_mixture", None)):
        raise ValueError(
            "mech must be a kernel of the Laplace family with an as_mixture() form (LaplaceMixture, "
            f"GeometricMixture, Laplace or DiscreteLaplace), got {type(mech).__name__}"
        )


def _as_mixture(m):
    """The kernel as a mixture (a plain Laplace / geometric kernel: r = 1, c = 0, the same law)."""
    return m.as_mixture()


@jax.jit
def _definition(m, d):
    """ln Σ/∫ e^{|L|} p over the seven linear pieces of the loss L = log p − log q, q = p(· − d):
    on {L > 0} the integrand is p²/q, elsewhere q (both exponential on a piece). Jitted: one
    compilation, not one per operation."""
    lo, hi, ref, lp, lq, sp, sq = m._segments(d)
    lm, sl = lp - lq, sp - sq
    sl_safe = jnp.where(sl == 0, 1.0, sl)
    y0 = ref + (0.0 - lm) / sl_safe
    if m.discrete:
        up_first, down_last = jnp.floor(y0) + 1.0, jnp.ceil(y0) - 1.0  # L > 0 from / up to these
        a_pos = jnp.where(sl > 0, jnp.maximum(lo, up_first), lo)
        b_pos = jnp.where(sl < 0, jnp.minimum(hi, down_last), hi)
        a_neg = jnp.where(sl < 0, jnp.maximum(lo, down_last + 1.0), lo)
        b_neg = jnp.where(sl > 0, jnp.minimum(hi, up_first - 1.0), hi)
    else:
        a_pos = jnp.where(sl > 0, jnp.maximum(lo, y0), lo)
        b_pos = jnp.where(sl < 0, jnp.minimum(hi, y0), hi)
        a_neg = jnp.where(sl < 0, jnp.maximum(lo, y0), lo)
        b_neg = jnp.where(sl > 0, jnp.minimum(hi, y0), hi)
    flat = sl == 0
    pos_all = flat & (lm > 0)
    a_pos, b_pos = jnp.where(flat & ~pos_all, 1.0, a_pos), jnp.where(flat & ~pos_all, 0.0, b_pos)
    a_neg, b_neg = jnp.where(pos_all, 1.0, a_neg), jnp.where(pos_all, 0.0, b_neg)
    pos = piecewise_log_integral(2 * lp - lq, 2 * sp - sq, ref, a_pos, b_pos, m.discrete)
    neg = piecewise_log_integral(lq, sq, ref, a_neg, b_neg, m.discrete)
    return jax.nn.logsumexp(jnp.concatenate([pos, neg], -1), axis=-1)


def _eq25(m):
    """Geom_m, Δ = 1: e^ζ = e^{λ2}(1 − w) + e^{λ1} w, w = a1,g e^{−λ1 c} = q2^c (1 + q1)/((1 − q1) Z_d)."""
    l2, l1, c = m._l2, m._l1, m.breakpoint
    w = jnp.exp(-l2 * c) * (1.0 + jnp.exp(-l1)) / (-jnp.expm1(-l1) * m._z())
    return jnp.log(jnp.exp(l2) * (1.0 - w) + jnp.exp(l1) * w)


def _eq27(m):
    """Eq. (27), +0.5e^{0.5ε} read as +0.5e^{−0.5ε} (a sign typo): rounded Lap_m, Δ = 1, an approximation."""
    eps, l1, c = m._l2, m._l1, m.breakpoint
    _, a2 = m.weights()
    kc = (1.0 - a2) / 2.0
    p0 = 1.0 - a2 * jnp.exp(-0.5 * eps) - 2.0 * kc
    p1 = 0.5 * a2 * (jnp.exp(-0.5 * eps) - jnp.exp(-1.5 * eps))
    rest = jnp.exp(eps) * a2 * (0.5 * jnp.exp(-1.5 * eps) + 0.5 * jnp.exp(-0.5 * eps) - jnp.exp(-c * eps))
    return jnp.log(p0**2 / p1 + p0 + rest + jnp.exp(l1) * m.tail_mass())


def _naive(m):
    p = m.tail_mass()
    return jnp.log(jnp.exp(m._l2) * (1.0 - p) + jnp.exp(m._l1) * p)


@x64
def general_privacy_budget(mech, sensitivity=1.0, *, form="definition"):
    """The paper's general privacy budget ζ of a single release. NOT CERTIFIED.

    ζ = ln E_P[e^{|L|}] for the shift ``sensitivity``: an average of e^{|L|}, **not a DP parameter**
    (compare ``mech.pure_epsilon(Δ)`` and ``accounting.exact.epsilon``). A plain Laplace / discrete
    Laplace kernel is the mixture with r = 1.

    Args:
      mech: a LaplaceMixture, GeometricMixture, Laplace or DiscreteLaplace kernel (batched or not).
      sensitivity: the shift Δ (positive; 1 for the paper's printed forms).
      form: ``"definition"`` (exact eq. 24 for the kernel's own law; the default), ``"eq25"``
        (Geom_m or the geometric, Δ = 1; exact), ``"eq27"`` (Lap_m: TABLE I's approximation for
        the *rounded* mixture, c ≥ 1.5, Δ = 1), ``"naive"`` (Lap_m: the Fig. 1 value).

    Returns:
      float64 ζ of the kernel's batch shape.

    Raises:
      ValueError: ``mech`` not of the Laplace family; ``sensitivity`` not positive, or not 1 for a
        printed form; an unknown ``form``, or one that does not fit the kernel (``"eq25"`` for
        Lap_m, ``"eq27"``/``"naive"`` for Geom_m).

    References:
      Li et al., "More Flexible Differential Privacy: The Application of Piecewise Mixture
      Distributions in Query Release", arXiv:1707.01189v3, Definition 5, eqs. (24)–(27), Fig. 1 and TABLE I.
    """
    _check_kernel(mech)
    check_positive("sensitivity", sensitivity)
    forms = ("definition", "eq25", "eq27", "naive")
    if form not in forms:
        raise ValueError(f"form must be one of {forms}, got {form!r}")
    m = _as_mixture(to64(mech))
    if form == "definition":
        return _definition(m, jnp.asarray(sensitivity, jnp.float64))
    if np.any(np.asarray(sensitivity) != 1.0):
        raise ValueError(f"sensitivity: form={form!r} is the paper's Δ = 1 formula, got {sensitivity!r}")
    if form == "eq25":
        if not m.discrete:
            raise ValueError("form: 'eq25' is the geometric mixture's formula (use 'eq27' or 'naive' for Lap_m)")
        return _eq25(m)
    if m.discrete:
        raise ValueError(f"form: {form!r} is a Laplace-mixture formula (use 'eq25' for Geom_m)")
    return _eq27(m) if form == "eq27" else _naive(m)


@x64
def rounded_laplace_budget(epsilon):
    """ζ of the rounded Laplace round(Lap(1/ε)), Δ = 1, exactly. NOT CERTIFIED (ζ is not DP).

    Eq. (26) with its typo fixed; e.g. ζ(0.332) = 0.309167.

    Args:
      epsilon: the Laplace's ε (positive, scalar or array).

    Returns:
      float64 ζ of ``epsilon``'s shape.

    Raises:
      ValueError: ``epsilon`` not positive.

    References:
      Li et al., "More Flexible Differential Privacy: The Application of Piecewise Mixture
      Distributions in Query Release", arXiv:1707.01189v3, eq. (26).
    """
    check_positive("epsilon", epsilon)
    return _eq26(jnp.asarray(epsilon, jnp.float64))


@x64
def laplace_epsilon_for_budget(zeta, *, iterations=200):
    """TABLE I's ε_Lap: the ε whose rounded Laplace has budget ``zeta``. NOT CERTIFIED.

    Bisection on the increasing eq. (26) for ``rounded_laplace_budget(ε) = zeta``. A Laplace at ε_Lap
    is ε_Lap-DP; the mixture it is matched to is not.

    Args:
      zeta: the target ζ (positive, scalar or array).
      iterations: bisection steps (≥ 1).

    Returns:
      float64 ε of ``zeta``'s shape.

    Raises:
      ValueError: ``zeta`` not positive; ``iterations < 1``.

    References:
      Li et al., "More Flexible Differential Privacy: The Application of Piecewise Mixture
      Distributions in Query Release", arXiv:1707.01189v3, eq. (26) and TABLE I.
    """
    check_positive("zeta", zeta)
    iterations = check_int("iterations", iterations, minimum=1)
    return _invert_eq26(jnp.asarray(zeta, jnp.float64), iterations)


@functools.partial(jax.jit, static_argnames="iterations")
def _invert_eq26(z, iterations):
    lo, hi = jnp.full_like(z, 1e-9), jnp.full_like(z, 50.0)

    def body(_, s):
        a, b = s
        mid = 0.5 * (a + b)
        up = _eq26(mid) > z
        return jnp.where(up, a, mid), jnp.where(up, mid, b)

    a, b = jax.lax.fori_loop(0, iterations, body, (lo, hi))
    return 0.5 * (a + b)


def _eq26(e):
    """Eq. (26) with its typo fixed: e^ζ = p0²/p1 + p0 + e^ε (½e^{−3ε/2} + ½e^{−ε/2})."""
    p0 = -jnp.expm1(-e / 2)
    p1 = 0.5 * (jnp.exp(-e / 2) - jnp.exp(-1.5 * e))
    return jnp.log(p0**2 / p1 + p0 + jnp.exp(e) * (0.5 * jnp.exp(-1.5 * e) + 0.5 * jnp.exp(-e / 2)))


def compose_budgets(*zetas):
    """The paper's composition of budgets, Σ ζ_i. NOT CERTIFIED.

    ζ of independent releases ≤ Σ ζ_i (the paper states equality; it is an upper bound). A sum of
    ζ's is no DP composition — use ``accounting.pld(...).compose``.

    Args:
      *zetas: the releases' budgets ζ_i (non-negative, scalars or arrays broadcasting together).

    Returns:
      float64 Σ ζ_i.

    Raises:
      ValueError: no budget given, or a negative one.

    References:
      Li et al., "More Flexible Differential Privacy: The Application of Piecewise Mixture
      Distributions in Query Release", arXiv:1707.01189v3, Proposition 1.
    """
    if not zetas:
        raise ValueError("zetas: give at least one budget")
    for z in zetas:
        check_positive("zetas", z, allow_zero=True)
    return sum(np.asarray(z, np.float64) for z in zetas)


class Usefulness(NamedTuple):
    """Result of :func:`usefulness`. NOT CERTIFIED (a tail bound on the noise, no privacy claim).

    Attributes:
      radius: t*, with P(max_k |Y_k| ≥ t*) ≤ δ by the union bound.
      valid: whether the theorem's premise t* ≥ c (> c on the integers) holds.
      laplace_radius: the same bound for the plain kernel at the inner ε, (Δ/ε) ln(k/δ).
      label: :data:`NOT_CERTIFIED`.
    """

    radius: jax.Array  # t*: P(max_k |Y_k| ≥ t*) ≤ δ by the union bound
    valid: jax.Array  # the theorem's premise t* ≥ c (> c on the integers) holds
    laplace_radius: jax.Array  # the same bound for the plain kernel at the inner ε: (Δ/ε) ln(k/δ)
    label: str = NOT_CERTIFIED


@x64
def usefulness(mech, delta, *, k=1, corrected=True):
    """The radius t* with P(max over k noises |Y| ≥ t*) ≤ δ: Theorems 2 (Lap_m) and 4 (Geom_m).

    Lap_m: t* = b1 ln(k a1/δ), valid when t* ≥ c (i.e. δ ≤ k P_out); the paper's "r/ln a1 times more
    useful than Laplace" is wrong (the ratio tends to r). Geom_m: printed (``corrected=False``)
    t* = b1 ln(k a1,g/δ), which understates the tail by 2α1/(α1 + 1); corrected: the smallest integer
    ≥ max(c + 1, 1 + b1 ln(2k a1,g/((α1 + 1)δ))) (Theorem 4, corrected). NOT CERTIFIED (no privacy
    statement).

    Args:
      mech: a LaplaceMixture or GeometricMixture (batched or not).
      delta: the tail probability δ in (0, 1).
      k: the number of independent noises (≥ 1).
      corrected: Geom_m: the corrected radius (default) or the printed one.

    Returns:
      A :class:`Usefulness`.

    Raises:
      ValueError: ``mech`` not a mixture; ``delta`` outside (0, 1); ``k < 1``.

    References:
      Li et al., "More Flexible Differential Privacy: The Application of Piecewise Mixture
      Distributions in Query Release", arXiv:1707.01189v3, Theorems 2 and 4.
    """
    if not isinstance(mech, (LaplaceMixture, GeometricMixture)):
        raise ValueError(f"mech must be a LaplaceMixture or GeometricMixture, got {type(mech).__name__}")
    check_probability("delta", delta, high_open=True)
    k = check_int("k", k, minimum=1)
    m = to64(mech)
    d = jnp.asarray(delta, jnp.float64)
    a1, _ = m.weights()
    b1, c = m.outer_scale, jnp.asarray(m.breakpoint, jnp.float64)
    lap = m.inner_scale * jnp.log(k / d)
    if not m.discrete or not corrected:
        t = b1 * jnp.log(k * a1 / d)
        return Usefulness(t, t >= c, lap)
    alpha1 = jnp.exp(m._l1)
    t = jnp.ceil(jnp.maximum(c + 1.0, 1.0 + b1 * jnp.log(2.0 * k * a1 / ((alpha1 + 1.0) * d))))
    return Usefulness(t, t > c, lap)


@x64
def rounded_moments(mech, *, terms=None):
    """The moments of the rounded noise of a continuous Laplace mixture or Laplace kernel.

    ``(E|K|, E K²)`` of K = round(Y) (nearest integer): TABLE I's "Lap_m" and "Lap" E|x| and Var
    columns (rounding is post-processing). Exact sums of CDF masses over |k| ≤ ``terms``.

    Args:
      mech: a single (unbatched) continuous LaplaceMixture or Laplace kernel.
      terms: the largest |k| summed (≥ 1); default c + 60 b1 (tail < 1e-25).

    Returns:
      ``(E|K|, E K²)``, float64 scalars.

    Raises:
      ValueError: ``mech`` not a continuous Laplace-family kernel, or batched; ``terms < 1``.

    References:
      Li et al., "More Flexible Differential Privacy: The Application of Piecewise Mixture
      Distributions in Query Release", arXiv:1707.01189v3, TABLE I.
    """
    if mech.discrete or not callable(getattr(mech, "as_mixture", None)):
        raise ValueError(f"mech must be a LaplaceMixture or Laplace kernel, got {type(mech).__name__}")
    m = _as_mixture(to64(mech))
    if m.batch_shape:
        raise ValueError("mech: rounded_moments takes a single kernel")
    if terms is None:
        terms = int(np.ceil(float(m.breakpoint) + 60.0 * float(m.outer_scale))) + 2
    return _rounded_moments(m, check_int("terms", terms, minimum=1))


@functools.partial(jax.jit, static_argnames="terms")
def _rounded_moments(m, terms):
    kk = jnp.arange(1, terms + 1, dtype=jnp.float64)
    # P(K = k) = P(k − ½ < Y ≤ k + ½) = S(k − ½) − S(k + ½) on each side, S(t) = P(Y > t)
    s = 0.5 * jnp.exp(m._log_sf_abs(jnp.concatenate([kk - 0.5, kk[-1:] + 0.5])))
    pk = 2.0 * (s[:-1] - s[1:])
    return jnp.sum(kk * pk), jnp.sum(kk**2 * pk)
