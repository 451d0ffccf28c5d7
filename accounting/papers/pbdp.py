"""PB-DP accounting *as printed in the paper* — **NOT CERTIFIED**; for reproducing its figures only.

.. warning::

   **NOTHING IN THIS MODULE IS A PRIVACY GUARANTEE.** These are the paper's closed
   forms, kept to regenerate its figures and to show, side by side, where they diverge
   from the truth. For any guarantee use the exact path: :mod:`accounting.exact`,
   ``accounting.pld`` / ``accounting.rdp`` and :mod:`optimize` (the default).

Jiang, Zhang et al., "Meeting Utility Constraints in Differential Privacy: A
Privacy-Boosting Approach", IEEE S&P 2025:

* **Theorem 1** — the privacy-loss density is the kernel's, shifted by ``L1`` and mixed
  over the shifts ``{+L2, −L2, 0}`` with weights ``{W1, W2, W3}``
  (:func:`paper_parameters`, :func:`paper_loss_density`);
* **Proposition 1** — ``δ(ε) = W1 δ_Z(ε−L1−L2) + W2 δ_Z(ε−L1+L2) + W3 δ_Z(ε−L1)``
  (:func:`paper_privacy_profile`, :func:`paper_epsilon`);
* **Proposition 2** — ``ε(α) = ε0(α) + L1 + log(W1 e^{(α−1)L2} + W2 e^{−(α−1)L2} + W3)/(α−1)``
  (:func:`paper_rdp`); Remark 4's RDP is this with ``L1 = 0``, *with its exponent fixed*
  (the printed ``W e^{(α−1)}(e^{L2} + e^{−L2})`` is a typo);
* **Theorem 2 / Proposition 3 / Algorithm 1** — T-fold composition,
  ``δ^T(ε) = Σ_k V_k δ_Z^{(T)}(ε − T L1 − k L2)`` with the trinomial law ``V`` of
  ``#(+L2) − #(−L2)`` (:func:`trinomial_weights`, :func:`paper_composed_privacy_profile`),
  with the printed index bugs fixed (``V[e1−e2+T]``, a loop over the
  2T+1 entries of V, and the weight ``V_k`` times the kernel profile shifted by
  ``T L1 + k L2`` instead of ``δ(ε − V[i−T])``);
* **Propositions 4, 5, 6 / Remarks 3, 4** — the three region families
  (``RelativeError``, ``FixedInterval``, ``AbsoluteError``) through the paper's dominating
  pair: ``(0, Δ)`` for absolute and relative error, ``(low, low + Δ)`` for a fixed region
  (clamped to ``(low, high)`` when ``Δ > high − low``: the answers lie in the region);
* **Algorithm 2** — the paper's ε0 search, as a search over ``σ ∈ [σ_base, 50 σ_base]``
  (Algorithm 2 printed in ε0; :func:`paper_tune`).

Why these formulas are not guarantees, with this engine's numbers beside the paper's, and the
two weight conventions (``weights="paper"``, the printed W's; ``"corrected"``, the strips measured
under the boosted law): docs/pbdp.md, "Paper mode vs exact mode".

Kernels: Gaussian (the paper's experiments) and Laplace (single release only; T-fold
composition needs the Gaussian's closed-form T-fold profile). Everything is evaluated in
float64 (the user's global x64 flag is left alone) and broadcasts over batched mechanisms.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from accounting._numerics import to64, x64
from accounting._root import epsilon_root
from dpjax.validation import check_int, check_positive, check_probability, check_real, is_traced
from dpjax.boosting import PrivacyBoosted
from dpjax.kernels import AdditiveMechanism, by_name
from dpjax.regions import AbsoluteError, FixedInterval, RelativeError

__all__ = [
    "PaperParameters",
    "PaperTuning",
    "paper_parameters",
    "paper_loss_density",
    "paper_privacy_profile",
    "paper_composed_privacy_profile",
    "paper_epsilon",
    "paper_rdp",
    "trinomial_weights",
    "paper_tune",
]

_WEIGHTS = ("paper", "corrected")
_METHODS = ("grid", "ternary")
#: (T+1)² trinomial entries materialised at once when V is computed for a batch.
_TRINOMIAL_CHUNK = 1 << 22


class PaperParameters(NamedTuple):
    """The paper's quantities of its dominating pair (eq. 3, 4, 6). NOT CERTIFIED.

    Attributes:
      region_mass: p_S at the hardest answer (the mass eq. 3 uses).
      q: the boosting rate, eq. (3) clipped at 0.
      L1: the normaliser mismatch log((1 − p̄(X') q)/(1 − p̄(X) q)).
      L2: −log(1 − q).
      W1: the weight of the +L2 shift.
      W2: the weight of the −L2 shift.
      W3: 1 − W1 − W2.
    """

    region_mass: jax.Array  # p_S at the hardest answer (the mass eq. 3 uses)
    q: jax.Array  # boosting rate, eq. (3) clipped at 0
    L1: jax.Array  # normaliser mismatch log((1 − p̄(X') q)/(1 − p̄(X) q))
    L2: jax.Array  # −log(1 − q)
    W1: jax.Array  # weight of the +L2 shift
    W2: jax.Array  # weight of the −L2 shift
    W3: jax.Array  # 1 − W1 − W2


class PaperTuning(NamedTuple):
    """Result of :func:`paper_tune`: the paper-mode optimum. NOT CERTIFIED.

    Attributes:
      epsilon: the paper's ε (or RDP ε(α)) at ``sigma``.
      sigma: the kernel scale σ* minimising it.
      sigma_base: σ of the plain kernel meeting the utility (q = 0).
      baseline_epsilon: the plain kernel's ε: the objective at ``sigma_base``.
    """

    epsilon: jax.Array  # the paper's ε (or RDP ε(α)) at ``sigma``
    sigma: jax.Array  # the kernel σ* minimising it
    sigma_base: jax.Array  # σ of the plain Gaussian meeting the utility (q = 0)
    baseline_epsilon: jax.Array  # the plain Gaussian's ε: the objective at sigma_base


# ----------------------------------------------------------------------------------
# validation (concrete values, outside jit)
# ----------------------------------------------------------------------------------
def _check(mech, weights, sensitivity):
    if not isinstance(mech, PrivacyBoosted):
        raise ValueError(f"mech must be a dpjax.PrivacyBoosted mechanism, got {type(mech).__name__}")
    if mech.kernel.hockey_stick is None:
        raise ValueError(
            "mech: paper mode needs the kernel's closed-form privacy profile (hockey_stick: the Gaussian "
            f"and Laplace kernels), got {type(mech.kernel).__name__}"
        )
    if weights not in _WEIGHTS:
        raise ValueError(f"weights must be one of {_WEIGHTS}, got {weights!r}")
    check_positive("sensitivity", sensitivity)


def _check_orders(orders):
    check_real("orders", orders)
    if not is_traced(orders) and np.any(np.asarray(orders) <= 1):
        raise ValueError(f"orders must be > 1, got {orders!r}")


def _check_gaussian_for(kernel, T):
    if T > 1 and kernel.gaussian_pld_mu is None:
        raise ValueError(
            "mech: paper-mode composition (T > 1) needs a Gaussian kernel (closed-form T-fold profile, "
            f"gaussian_pld_mu), got {type(kernel).__name__}"
        )


# ----------------------------------------------------------------------------------
# Theorem 1 / eq. (3), (4), (6), (9), Props 4-6: the per-pair quantities
# ----------------------------------------------------------------------------------
def _hardest_mass(mech):
    masses = [mech.region_mass(h) for h in mech.region.hardest_answers(mech.discrete)]
    out = masses[0]
    for m in masses[1:]:
        out = jnp.minimum(out, m)
    return out


def _parameters(mech, d, weights):
    """The paper's quantities for its dominating pair (float64 mechanism, elementwise)."""
    F = mech.kernel.noise_cdf  # noqa: N806 - the paper's Φ (kernel CDF centred at 0)
    region = mech.region
    l1mq = mech.log1m_boosting_rate
    q = -jnp.expm1(l1mq)
    L2 = -l1mq
    zero = jnp.zeros(jnp.broadcast_shapes(jnp.shape(q), jnp.shape(d)))
    if isinstance(region, FixedInterval):  # Prop. 5 / Rem. 3: no L2 term
        low = jnp.asarray(region.low)
        x, x2 = low, jnp.minimum(low + d, jnp.asarray(region.high))
        L1 = mech.log_normalizer(x2, _l1mq=l1mq) - mech.log_normalizer(x, _l1mq=l1mq)
        W1 = W2 = zero
    else:
        tau = region.tau
        theta = region.theta if isinstance(region, RelativeError) else 0.0
        if isinstance(region, RelativeError):  # Prop. 4: pair (0, Δ), L1 >= 0
            L1 = mech.log_normalizer(d, _l1mq=l1mq) - mech.log_normalizer(0.0, _l1mq=l1mq)
        else:  # Prop. 6: the region's mass does not depend on the answer
            L1 = zero
        # strip of S(0) \ S(Δ) (the +L2 event), capped at τ when the regions separate
        inner = F(jnp.minimum((1.0 - theta) * d - tau, tau)) - F(-tau)
        if weights == "paper":
            if isinstance(region, RelativeError):  # Prop. 4 as printed (strip widths θΔ)
                W1 = F(theta * d + tau) - F(tau)
                W2 = F(theta * d - tau) - F(-tau)
            else:  # eq. (9): W1 = W2 = Φ(Δ − τ) − Φ(−τ), capped (§4.3, Prop. 6, Remark 4)
                W1 = W2 = inner
        else:  # the true strips, under the boosted law of X
            z = jnp.exp(mech.log_normalizer(0.0, _l1mq=l1mq))
            outer = F((1.0 + theta) * d + tau) - F(jnp.maximum(tau, (1.0 - theta) * d - tau))
            W1 = inner / z
            W2 = jnp.exp(l1mq) * outer / z
    W1, W2, L1 = W1 + zero, W2 + zero, L1 + zero
    return PaperParameters(_hardest_mass(mech) + zero, q + zero, L1, L2 + zero, W1, W2, 1.0 - W1 - W2)


@x64
def paper_parameters(mech, *, sensitivity=1.0, weights="paper") -> PaperParameters:
    """The paper's quantities ``p_S, q, L1, L2, W1, W2, W3`` of its dominating pair. NOT CERTIFIED.

    Broadcasts over a batched mechanism and ``sensitivity``.

    Args:
      mech: a ``dpjax.PrivacyBoosted`` whose kernel has a closed-form ``hockey_stick`` (batched or not).
      sensitivity: Δ of the dominating pair (positive; broadcasts with the batch).
      weights: ``"paper"`` (the printed W's) or ``"corrected"`` (the strips measured under the boosted law).

    Returns:
      A :class:`PaperParameters`.

    Raises:
      ValueError: ``mech`` not a ``dpjax.PrivacyBoosted`` or its kernel without a closed-form
        ``hockey_stick``; ``weights`` unknown; ``sensitivity`` not positive.

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, Theorem 1, eqs. (3), (4), (6).
    """
    _check(mech, weights, sensitivity)
    return _parameters_jit(to64(mech), jnp.asarray(sensitivity, jnp.float64), weights)


_parameters_jit = jax.jit(_parameters, static_argnums=(2,))


@x64
def paper_loss_density(mech, gamma, *, sensitivity=1.0, weights="paper"):
    """The paper's privacy-loss density ``f_Γ(γ) = Σ_i W_i f_Z(γ − L1 − s_i)``. NOT CERTIFIED.

    ``s = (+L2, −L2, 0)``. Gaussian kernel only: its loss for the pair (0, Δ) is
    ``Z ~ N(μ²/2, μ²)``, ``μ = Δ/σ``.

    Args:
      mech: a ``dpjax.PrivacyBoosted`` with a Gaussian kernel.
      gamma: the loss values γ (array).
      sensitivity: Δ of the dominating pair (positive; broadcasts with the batch).
      weights: ``"paper"`` (the printed W's) or ``"corrected"`` (the strips measured under the boosted law).

    Returns:
      float64 density of the broadcast shape of ``gamma`` and the batch.

    Raises:
      ValueError: ``mech`` not a ``dpjax.PrivacyBoosted`` or its kernel without a closed-form
        ``hockey_stick``; ``weights`` unknown; ``sensitivity`` not positive; a non-Gaussian kernel;
        ``gamma`` not real.

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, Theorem 1.
    """
    _check(mech, weights, sensitivity)
    if mech.kernel.gaussian_pld_mu is None:
        raise ValueError(
            f"mech: paper_loss_density needs a Gaussian kernel (gaussian_pld_mu), got {type(mech.kernel).__name__}"
        )
    check_real("gamma", gamma)
    m = to64(mech)
    d = jnp.asarray(sensitivity, jnp.float64)
    P = _parameters(m, d, weights)
    mu = m.kernel.gaussian_pld_mu(d)
    g = jnp.asarray(gamma, jnp.float64)

    def f_z(x):
        z = (x - 0.5 * mu * mu) / mu
        return jnp.exp(-0.5 * z * z) / (mu * math.sqrt(2.0 * math.pi))

    def term(w, shift):
        return jnp.where(w > 0, w * f_z(g - P.L1 - shift), 0.0)

    return term(P.W1, P.L2) + term(P.W2, -P.L2) + term(P.W3, 0.0)


# ----------------------------------------------------------------------------------
# Algorithm 1 (fixed): the trinomial law V
# ----------------------------------------------------------------------------------
def _trinomial_one(T, W1, W2):
    """``V[k+T] = Σ_{e1−e2=k} T!/(e1! e2! (T−e1−e2)!) W1^e1 W2^e2 W3^(T−e1−e2)`` (log space, O(T²))."""
    e1 = jnp.arange(T + 1, dtype=jnp.float64)[:, None]
    e2 = jnp.arange(T + 1, dtype=jnp.float64)[None, :]
    rest = T - e1 - e2
    ok = rest >= 0
    rest = jnp.maximum(rest, 0.0)
    W3 = 1.0 - W1 - W2

    def xlogy(n, w):  # n log|w| with 0 log 0 = 0 and n log 0 = -inf
        a = jnp.abs(w)
        return jnp.where(n > 0, jnp.where(a > 0, n * jnp.log(jnp.where(a > 0, a, 1.0)), -jnp.inf), 0.0)

    lw = (
        gammaln(T + 1.0)
        - gammaln(e1 + 1.0)
        - gammaln(e2 + 1.0)
        - gammaln(rest + 1.0)
        + xlogy(e1, W1)
        + xlogy(e2, W2)
        + xlogy(rest, W3)
    )
    lw = jnp.where(ok, lw, -jnp.inf)
    # eq. (9)'s W1 = W2 can exceed 1/2 (Δ > τ): W3 < 0, the terms alternate in sign
    sign = jnp.where((W3 < 0) & (jnp.mod(rest, 2.0) == 1.0), -1.0, 1.0)
    top = jnp.max(lw)
    k = jnp.broadcast_to((e1 - e2).astype(jnp.int32) + T, lw.shape)
    terms = sign * jnp.exp(lw - top)
    return jnp.zeros(2 * T + 1, jnp.float64).at[k.reshape(-1)].add(terms.reshape(-1)) * jnp.exp(top)


def _trinomial(T, W1, W2):
    """Batched :func:`_trinomial_one`: shape ``broadcast(W1, W2) + (2T+1,)``."""
    shape = jnp.broadcast_shapes(jnp.shape(W1), jnp.shape(W2))
    if T == 1:  # (W2 x^-1 + W3 + W1 x)
        W1, W2 = jnp.broadcast_to(W1, shape), jnp.broadcast_to(W2, shape)
        return jnp.stack([W2, 1.0 - W1 - W2, W1], axis=-1)
    w = jnp.stack([jnp.broadcast_to(W1, shape).reshape(-1), jnp.broadcast_to(W2, shape).reshape(-1)], axis=-1)
    chunk = max(1, _TRINOMIAL_CHUNK // (T + 1) ** 2)
    v = jax.lax.map(lambda p: _trinomial_one(T, p[0], p[1]), w, batch_size=min(chunk, w.shape[0]))
    return v.reshape(shape + (2 * T + 1,))


@x64
def trinomial_weights(T, W1, W2):
    """The trinomial law ``V[k+T] = Pr[#(+L2) − #(−L2) = k]``, k = −T..T (Algorithm 1, fixed). NOT CERTIFIED use.

    The coefficients of ``(W2/x + W3 + W1 x)^T``, ``W3 = 1 − W1 − W2``: the law of a sum of T
    i.i.d. steps in {+1 (W1), −1 (W2), 0 (W3)}; sums to 1, mean ``T (W1 − W2)``.
    Computed as the paper's O(T²) double loop, in log space. Broadcasts over W1, W2.
    ``W1 + W2 > 1`` is accepted (eq. 9's printed W1 = W2 exceed 1/2 when Δ > τ): V is then
    the polynomial's signed coefficients, not a law — the paper's formula, as printed.

    Args:
      T: the number of compositions (≥ 1).
      W1: the weight of a +1 step, in [0, 1] (array).
      W2: the weight of a −1 step, in [0, 1] (array).

    Returns:
      float64 array of shape ``broadcast(W1, W2) + (2T + 1,)``.

    Raises:
      ValueError: ``T < 1``; ``W1`` or ``W2`` outside [0, 1].

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, Theorem 2 and Algorithm 1.
    """
    T = check_int("T", T, minimum=1)
    check_probability("W1", W1, low_open=False)
    check_probability("W2", W2, low_open=False)
    return _trinomial(T, jnp.asarray(W1, jnp.float64), jnp.asarray(W2, jnp.float64))


# ----------------------------------------------------------------------------------
# Propositions 1 and 3: privacy profiles
# ----------------------------------------------------------------------------------
def _kernel_profile(kernel, eps, d, T):
    """δ_Z^{(T)}(ε) of the kernel's pair (0, Δ), T-fold composed (Gaussian: μ √T)."""
    if T == 1:
        return kernel.hockey_stick(eps, 0.0, d)
    return kernel.hockey_stick(eps, 0.0, math.sqrt(T) * d)


def _profile(m, P, V, eps, d, T):
    """Σ_k V_k δ_Z^{(T)}(ε − T L1 − k L2) (Prop. 3; Prop. 1 at T = 1), broadcasting eps against P."""
    k = jnp.arange(-T, T + 1, dtype=jnp.float64)
    eps = jnp.asarray(eps, jnp.float64)
    L1, L2 = P.L1[..., None], P.L2[..., None]
    shifted = eps[..., None] - T * L1 - jnp.where(k == 0, 0.0, k * L2)  # k L2 with 0·∞ = 0
    kern = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[..., None], m.kernel)
    prof = _kernel_profile(kern, shifted, jnp.asarray(d)[..., None], T)
    return jnp.sum(jnp.where(V != 0, V * prof, 0.0), axis=-1)  # (V = 0 masks 0·NaN at infinite shifts)


@functools.partial(jax.jit, static_argnums=(3, 4))
def _composed(m, eps, d, T, weights):
    P = _parameters(m, d, weights)
    return _profile(m, P, _trinomial(T, P.W1, P.W2), eps, d, T)


@x64
def paper_composed_privacy_profile(mech, epsilon, T, *, sensitivity=1.0, weights="paper"):
    """The paper's T-fold privacy profile δ^T(ε). NOT CERTIFIED — wildly optimistic as q → 1.

    ``δ^T(ε) = Σ_{k=−T}^{T} V_k δ_Z^{(T)}(ε − T L1 − k L2)``, ``V = trinomial_weights(T, W1, W2)``,
    ``δ_Z^{(T)}`` the T-fold kernel profile (Gaussian: Balle–Wang at ``√T Δ/σ``; exact for the
    Gaussian kernel, where the paper uses the Analytic Fourier Accountant). Broadcasts
    ``epsilon`` against a batched mechanism.

    Args:
      mech: a ``dpjax.PrivacyBoosted`` whose kernel has a closed-form ``hockey_stick`` (batched or not).
      epsilon: ε (array; ±inf allowed).
      T: the number of compositions (≥ 1; > 1 needs a Gaussian kernel).
      sensitivity: Δ of the dominating pair (positive; broadcasts with the batch).
      weights: ``"paper"`` (the printed W's) or ``"corrected"`` (the strips measured under the boosted law).

    Returns:
      float64 δ of the broadcast shape of ``epsilon`` and the batch.

    Raises:
      ValueError: ``mech`` not a ``dpjax.PrivacyBoosted`` or its kernel without a closed-form
        ``hockey_stick``; ``weights`` unknown; ``sensitivity`` not positive; ``epsilon`` NaN;
        ``T < 1``; ``T > 1`` with a non-Gaussian kernel.

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, Theorem 2, Proposition 3 and Algorithm 1 (index bugs fixed).
    """
    _check(mech, weights, sensitivity)
    check_real("epsilon", epsilon, finite=False)
    T = check_int("T", T, minimum=1)
    _check_gaussian_for(mech.kernel, T)
    return _composed(to64(mech), jnp.asarray(epsilon, jnp.float64), jnp.asarray(sensitivity, jnp.float64), T, weights)


@x64
def paper_privacy_profile(mech, epsilon, *, sensitivity=1.0, weights="paper"):
    """The paper's single-release privacy profile δ(ε). NOT CERTIFIED.

    ``δ(ε) = W1 δ_Z(ε−L1−L2) + W2 δ_Z(ε−L1+L2) + W3 δ_Z(ε−L1)`` (Proposition 1).

    Remark 4 for absolute error (L1 = 0, W1 = W2), Remark 3 for a fixed region
    (``δ_Z(ε − L1)``), Proposition 4's W's for relative error. The true δ(ε) is
    ``accounting.exact.privacy_profile``.

    Args:
      mech: a ``dpjax.PrivacyBoosted`` whose kernel has a closed-form ``hockey_stick`` (batched or not).
      epsilon: ε (array; ±inf allowed).
      sensitivity: Δ of the dominating pair (positive; broadcasts with the batch).
      weights: ``"paper"`` (the printed W's) or ``"corrected"`` (the strips measured under the boosted law).

    Returns:
      float64 δ of the broadcast shape of ``epsilon`` and the batch.

    Raises:
      ValueError: ``mech`` not a ``dpjax.PrivacyBoosted`` or its kernel without a closed-form
        ``hockey_stick``; ``weights`` unknown; ``sensitivity`` not positive; ``epsilon`` NaN.

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, Proposition 1, Remarks 3–4, Proposition 4.
    """
    return paper_composed_privacy_profile(mech, epsilon, 1, sensitivity=sensitivity, weights=weights)


def _log_paper_delta(T, e, params):
    m, P, V, d = params
    return jnp.log(_profile(m, P, V, e, d, T))


@functools.partial(jax.jit, static_argnums=(3, 4, 7))
def _epsilon(m, d, delta, T, weights, lower, upper, iterations):
    P = _parameters(m, d, weights)
    V = _trinomial(T, P.W1, P.W2)
    shape = jnp.broadcast_shapes(jnp.shape(delta), jnp.shape(P.L1))
    return epsilon_root(
        functools.partial(_log_paper_delta, T),
        (m, P, V, d),
        jnp.broadcast_to(delta, shape),
        x0=lower,
        lower=lower,
        upper=upper,
        iters=iterations,
    )


@x64
def paper_epsilon(mech, delta, *, sensitivity=1.0, weights="paper", T=1, lower=0.0, upper=2000.0, iterations=90):
    """The ε solving the paper's ``δ^T(ε) = delta``. NOT CERTIFIED.

    Prop. 1 for T = 1, Prop. 3 otherwise, solved in ``[lower, upper]`` by the accountants' root
    solver. Broadcasts ``delta`` against a batched mechanism. The exact ε is
    ``accounting.exact.epsilon`` (single release) or ``accounting.pld(mech).self_compose(T)``.

    Args:
      mech: a ``dpjax.PrivacyBoosted`` whose kernel has a closed-form ``hockey_stick`` (batched or not).
      delta: δ in (0, 1) (array).
      sensitivity: Δ of the dominating pair (positive; broadcasts with the batch).
      weights: ``"paper"`` (the printed W's) or ``"corrected"`` (the strips measured under the boosted law).
      T: the number of compositions (≥ 1; > 1 needs a Gaussian kernel).
      lower: the search interval's lower end.
      upper: its upper end (> ``lower``).
      iterations: the root solver's step cap (≥ 1).

    Returns:
      float64 ε: ``lower`` where the paper's δ is already below ``delta`` there, ``inf`` where it
      stays above it up to ``upper``.

    Raises:
      ValueError: ``mech`` not a ``dpjax.PrivacyBoosted`` or its kernel without a closed-form
        ``hockey_stick``; ``weights`` unknown; ``sensitivity`` not positive; ``delta`` outside (0,
        1); ``T < 1``; ``T > 1`` with a non-Gaussian kernel; ``lower``/``upper`` not finite or
        ``upper <= lower``; ``iterations < 1``.

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, Propositions 1 and 3.
    """
    _check(mech, weights, sensitivity)
    check_probability("delta", delta, high_open=True)
    T = check_int("T", T, minimum=1)
    _check_gaussian_for(mech.kernel, T)
    check_real("lower", lower)
    check_real("upper", upper)
    if not lower < upper:
        raise ValueError(f"upper must be greater than lower, got lower={lower!r}, upper={upper!r}")
    iterations = check_int("iterations", iterations, minimum=1)
    return _epsilon(
        to64(mech),
        jnp.asarray(sensitivity, jnp.float64),
        jnp.asarray(delta, jnp.float64),
        T,
        weights,
        jnp.float64(lower),
        jnp.float64(upper),
        iterations,
    )


# ----------------------------------------------------------------------------------
# Proposition 2 / Remarks 3-4: RDP
# ----------------------------------------------------------------------------------
def _rdp(m, P, a, d):
    eps0 = m.kernel.renyi_divergence(a, 0.0, d)
    a1 = a - 1.0
    x = a1 * P.L2  # >= 0, possibly +inf (q = 1)
    down = jnp.exp(-x)
    # log(W1 e^x + W2 e^-x + W3) as a linear sum (W3 may be negative, eq. 9), scaled by e^x when W1 > 0
    with_w1 = x + jnp.log(P.W1 + P.W2 * down * down + P.W3 * down)
    without = jnp.log(P.W2 * down + P.W3)
    mix = jnp.where(P.W1 > 0, jnp.where(jnp.isinf(x), jnp.inf, with_w1), without)
    return eps0 + P.L1 + mix / a1


@functools.partial(jax.jit, static_argnums=(3,))
def _rdp_jit(m, a, d, weights):
    return _rdp(m, _parameters(m, d, weights), a, d)


@x64
def paper_rdp(mech, orders, *, sensitivity=1.0, weights="paper"):
    """The paper's Rényi DP of a privacy-boosted mechanism. NOT CERTIFIED.

    Proposition 2 (Remark 4 with its exponent fixed, Remark 3 for a fixed region):

    ``ε(α) = ε0(α) + L1 + log(W1 e^{(α−1)L2} + W2 e^{−(α−1)L2} + W3)/(α − 1)``, ``ε0(α)`` the
    kernel's Rényi divergence of (0, Δ). *Below* the true Rényi divergence for moderate α
    (the paper's Prop. 2): use ``accounting.exact.renyi`` / ``accounting.rdp`` for a guarantee.
    T-fold composition is ``T ×`` this (Remark 2).

    Args:
      mech: a ``dpjax.PrivacyBoosted`` whose kernel has a closed-form ``hockey_stick`` (batched or not).
      orders: Rényi orders α > 1 (array).
      sensitivity: Δ of the dominating pair (positive; broadcasts with the batch).
      weights: ``"paper"`` (the printed W's) or ``"corrected"`` (the strips measured under the boosted law).

    Returns:
      float64 ε(α) of the broadcast shape of ``orders`` and the batch.

    Raises:
      ValueError: ``mech`` not a ``dpjax.PrivacyBoosted`` or its kernel without a closed-form
        ``hockey_stick``; ``weights`` unknown; ``sensitivity`` not positive; an order not real or ≤
        1.

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, Proposition 2, Remarks 2–4.
    """
    _check(mech, weights, sensitivity)
    _check_orders(orders)
    return _rdp_jit(to64(mech), jnp.asarray(orders, jnp.float64), jnp.asarray(sensitivity, jnp.float64), weights)


# ----------------------------------------------------------------------------------
# Algorithm 2 (paper-mode optimum over the kernel scale)
# ----------------------------------------------------------------------------------
def _sigma_base(kernel, region, rho):
    """Scale at which q reaches 0 (absolute / relative error, hardest answer Q = 0): the kernel at
    unit scale puts ρ inside ``[−τ/σ, τ/σ]``, ``σ = τ/F₁⁻¹((1+ρ)/2)``
    (Gaussian: ``τ/Φ⁻¹((1+ρ)/2)``)."""
    return region.tau / kernel.with_scale(1.0).noise_icdf((1.0 + rho) / 2.0)


def _objective(kernel, region, rho, d, sigma, kind, T, weights, target, iterations):
    """The paper's ε (or RDP) at kernel scale σ, broadcasting σ (..., K) against the settings (...)."""
    ex = functools.partial(jax.tree_util.tree_map, lambda x: jnp.asarray(x)[..., None])
    m = PrivacyBoosted(kernel.with_scale(sigma), ex(region), jnp.asarray(rho)[..., None])
    dd = jnp.asarray(d)[..., None]
    P = _parameters(m, dd, weights)
    if kind == "rdp":
        return T * _rdp(m, P, jnp.asarray(target)[..., None], dd)
    V = _trinomial(T, P.W1, P.W2)
    target = jnp.broadcast_to(
        jnp.asarray(target)[..., None], jnp.broadcast_shapes(jnp.shape(P.L1), jnp.shape(target) + (1,))
    )
    return epsilon_root(
        functools.partial(_log_paper_delta, T), (m, P, V, dd), target, x0=0.0, lower=0.0, upper=2000.0, iters=iterations
    )


@functools.partial(jax.jit, static_argnums=(5, 6, 7, 8, 9, 10, 11))
def _tune(kernel, region, rho, d, target, kind, T, weights, method, grid, max_ratio, iterations):
    sb = _sigma_base(kernel, region, rho)
    sb = jnp.broadcast_to(sb, jnp.broadcast_shapes(jnp.shape(sb), jnp.shape(d), jnp.shape(target)))
    top = math.log(max_ratio)
    inf = jnp.full(sb.shape, jnp.inf)

    def obj(u):  # the objective at σ = σ_base e^u, u (..., K)
        return _objective(kernel, region, rho, d, sb[..., None] * jnp.exp(u), kind, T, weights, target, 64)

    def pick(u, vals, j):
        return jnp.take_along_axis(u, j[..., None], -1)[..., 0], jnp.take_along_axis(vals, j[..., None], -1)[..., 0]

    if method == "grid":
        # nested log grids (one objective call site: compiles once): stage 0 covers
        # [σ_base, max_ratio σ_base]; each next stage spans the two cells around the best point
        t = jnp.linspace(0.0, 1.0, grid)

        def stage(i, s):
            a, b, best_u, best_v, base = s
            u = a[..., None] + (b - a)[..., None] * t
            vals = obj(u)
            j = jnp.argmin(vals, axis=-1)
            uj, vj = pick(u, vals, j)
            better = vj < best_v
            lo = pick(u, vals, jnp.maximum(j - 1, 0))[0]
            hi = pick(u, vals, jnp.minimum(j + 1, grid - 1))[0]
            return (
                lo,
                hi,
                jnp.where(better, uj, best_u),
                jnp.where(better, vj, best_v),
                jnp.where(i == 0, vals[..., 0], base),
            )

        init = (jnp.zeros(sb.shape), jnp.full(sb.shape, top), jnp.zeros(sb.shape), inf, inf)
        _, _, u, v, base = jax.lax.fori_loop(0, iterations, stage, init)
        return PaperTuning(v, sb * jnp.exp(u), sb, base)

    # Algorithm 2: ternary search on [0, log max_ratio] in u = log(σ/σ_base) (Algorithm 2, in log σ)
    def body(_, s):
        a, b = s
        x1, x2 = a + (b - a) / 3.0, b - (b - a) / 3.0
        f = obj(jnp.stack([x1, x2], axis=-1))
        right = f[..., 0] > f[..., 1]  # the minimum is right of x1
        return jnp.where(right, x1, a), jnp.where(right, b, x2)

    a, b = jax.lax.fori_loop(0, iterations, body, (jnp.zeros(sb.shape), jnp.full(sb.shape, top)))
    u = 0.5 * (a + b)
    f = obj(jnp.stack([jnp.zeros(sb.shape), u], axis=-1))
    return PaperTuning(f[..., 1], sb * jnp.exp(u), sb, f[..., 0])


@x64
def paper_tune(
    region,
    rho,
    *,
    sensitivity=1.0,
    delta=None,
    order=None,
    compositions=1,
    weights="paper",
    method="grid",
    grid=64,
    max_ratio=50.0,
    iterations=None,
    kernel="gaussian",
) -> PaperTuning:
    """Paper-mode optimum of a mechanism over its kernel scale. NOT CERTIFIED.

    Minimises the paper's ε at ``delta`` (Prop. 1; Prop. 3 / Alg. 1 with ``compositions=T``)
    or its RDP at ``order`` (Prop. 2, times T) over the kernel scale, the boosting rate
    following from ``rho`` (eq. 3). ``method="grid"`` (the convention of the tables'
    σ*): a log grid of ``grid`` points on ``[σ_base, max_ratio·σ_base]``, then ``iterations − 1``
    (default 3) finer grids over the two cells around the best point — robust to the
    saw-toothed composition objective. ``method="ternary"``: Algorithm 2 (ternary search,
    ``iterations`` default 48), in ``log σ`` rather than ε0; it assumes
    the objective is unimodal, as the paper does. Absolute- and relative-error regions (for a fixed region the
    optimum is degenerate, σ → ∞: docs/pbdp.md). Every numeric argument broadcasts.

    Paper mode only reproduces the paper's curves; ``optimize.tune_boosted`` tunes on the
    exact accountant. In composition the paper's optimum drifts to the grid edge (its ε
    keeps falling as σ → ∞; docs/pbdp.md).

    Args:
      region: ``dpjax.AbsoluteError`` or ``dpjax.RelativeError``.
      rho: the required coverage in (0, 1).
      sensitivity: Δ (positive).
      delta: minimise the paper's ε at this δ in (0, 1) ...
      order: ... or its RDP at this order (> 1). Exactly one of the two.
      compositions: T (≥ 1; > 1 needs a Gaussian kernel).
      weights: ``"paper"`` or ``"corrected"``.
      method: ``"grid"`` or ``"ternary"``.
      grid: log-grid points (≥ 3).
      max_ratio: the search's upper end over σ_base (> 1).
      iterations: grid refinements + 1 (default 4) or ternary steps (default 48).
      kernel: a kernel instance with a closed-form ``hockey_stick`` or a built-in kernel's name.

    Returns:
      A :class:`PaperTuning` of the broadcast shape.

    Raises:
      ValueError: ``region`` not absolute or relative error; ``rho`` or ``delta`` outside (0, 1);
        ``sensitivity`` not positive; not exactly one of ``delta`` and ``order``; an order ≤ 1;
        ``compositions``, ``grid`` or ``iterations`` out of range; ``weights`` or ``method``
        unknown; ``max_ratio <= 1``; a kernel without a closed-form ``hockey_stick`` (or an unknown
        name); ``compositions > 1`` with a non-Gaussian kernel.

    References:
      Jiang et al., "Meeting Utility Constraints in Differential Privacy: A Privacy-Boosting
      Approach", IEEE S&P 2025, eq. (3), Propositions 1–3 and Algorithm 2.
    """
    if not isinstance(region, (AbsoluteError, RelativeError)):
        raise ValueError(
            "region must be AbsoluteError or RelativeError: the paper-mode optimum of a fixed region is "
            f"degenerate (σ → ∞), got {type(region).__name__}; evaluate a chosen σ with paper_epsilon"
        )
    check_probability("rho", rho, high_open=True)
    check_positive("sensitivity", sensitivity)
    if (delta is None) == (order is None):
        raise ValueError("exactly one of delta (approximate DP) or order (RDP) must be given")
    if delta is not None:
        check_probability("delta", delta, high_open=True)
    else:
        _check_orders(order)
    T = check_int("compositions", compositions, minimum=1)
    if weights not in _WEIGHTS:
        raise ValueError(f"weights must be one of {_WEIGHTS}, got {weights!r}")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    grid = check_int("grid", grid, minimum=3)
    check_positive("max_ratio", max_ratio)
    if not max_ratio > 1.0:
        raise ValueError(f"max_ratio must be > 1, got {max_ratio!r}")
    if iterations is None:
        iterations = 4 if method == "grid" else 48
    iterations = check_int("iterations", iterations, minimum=1)
    kernel = by_name(kernel)(1.0) if isinstance(kernel, str) else kernel
    if not isinstance(kernel, AdditiveMechanism) or kernel.hockey_stick is None:
        raise ValueError(f"kernel must be an additive kernel with a closed-form hockey_stick, got {kernel!r}")
    _check_gaussian_for(kernel, T)
    kind, target = ("dp", delta) if delta is not None else ("rdp", order)
    return _tune(
        to64(kernel),
        to64(region),
        jnp.asarray(rho, jnp.float64),
        jnp.asarray(sensitivity, jnp.float64),
        jnp.asarray(target, jnp.float64),
        kind,
        T,
        weights,
        method,
        grid,
        float(max_ratio),
        iterations,
    )
