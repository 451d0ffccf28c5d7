r"""Exact privacy of a neighbouring pair of a privacy-boosted mechanism.

The output law is that of Jiang et al., "Meeting Utility Constraints in Differential Privacy: A
Privacy-Boosting Approach", IEEE S&P 2025, eqs. (2)–(3) (docs/pbdp.md).

Between the region boundaries of both laws (and the kernel's kinks), the boosted privacy
loss is the kernel's pair loss ``ℓ(y) = log f(y − v) − log f(y − v')`` plus a constant
``c_j − c'_j`` (the two laws' log boosts on piece j), and ℓ is monotone there. Hence:

* the hockey-stick divergence ``δ(ε) = Σ_j [e^{c_j} P_v(A_j) − e^{ε + c'_j} P_v'(A_j)]_+`` with
  ``A_j = {y ∈ piece j : ℓ(y) > ε − (c_j − c'_j)}`` an interval cut at the kernel's loss
  threshold (``noise_loss_threshold``: closed form for the Gaussian and Laplace kernels, a
  bisection otherwise), its masses kernel CDF differences (``log_interval_masses``);
* the Rényi divergence
  ``D_α = log Σ_j e^{α c_j + (1−α) c'_j} ∫_j f(y−v)^α f(y−v')^{1−α} dy / (α−1)``, the integrals
  from ``noise_tilted_log_integral`` (closed forms for the built-in kernels).

Every function takes the mechanism with its parameters already broadcasting against the
trailing axes it adds, and is differentiable in ε, the answers and every parameter: the
outer pieces end at finite edges (``noise_far``) where the kernel's mass underflows, and
empty pieces have zero gradient.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax.kernels.base import sort_small

__all__ = ["pieces", "hockey_stick", "renyi_divergence"]


def pieces(mech, v, nv, kinks: bool, spread=0.0):
    """The pieces of the output line between which both laws' boost weights are constant.

    Piece edges ``(lo, hi)`` (trailing axis) between which both boost weights are constant,
    and those constants ``(c, c')`` (``log_boost`` of each law on the piece); with ``kinks``
    also cut at the kernel's kinks around both answers.

    The two outer pieces end at finite edges ``noise_far`` beyond every breakpoint, both
    answers and ``spread`` (a further distance, e.g. to a tilted centre), where the kernel's
    mass underflows: the values of ±∞ edges, with finite gradients. ``v``/``nv`` and the
    parameters must already broadcast with a trailing piece axis of length 1.

    Args:
      mech: a ``PrivacyBoosted`` whose parameters broadcast against the trailing axes added here.
      v: the answer (with a trailing axis of length 1).
      nv: the neighbouring answer (likewise).
      kinks: also cut at the kernel's kinks.
      spread: a further distance the outer edges must clear.

    Returns:
      ``((lo, hi), (c, c'))``, arrays with a trailing piece axis.
    """
    lo1, hi1 = mech.region.interval(v)
    lo2, hi2 = mech.region.interval(nv)
    cuts = [lo1, hi1, lo2, hi2]
    if mech.discrete:  # as output_breakpoints: half-integers, no output on a boundary
        cuts = [jnp.ceil(lo1) - 0.5, jnp.floor(hi1) + 0.5, jnp.ceil(lo2) - 0.5, jnp.floor(hi2) + 0.5]
    if kinks:
        k = mech.kernel.noise_kinks()
        cuts += [a + k[..., i] for i in range(k.shape[-1]) for a in (v, nv)]
    shape = jnp.broadcast_shapes(*[jnp.shape(x) for x in cuts])
    cuts = [jnp.broadcast_to(x, shape) for x in cuts]
    inner = sort_small(jnp.concatenate(cuts, axis=-1))
    far = mech.kernel.noise_far() + spread
    first = jnp.minimum(jnp.minimum(inner[..., :1], v), nv) - far
    last = jnp.maximum(jnp.maximum(inner[..., -1:], v), nv) + far
    shape = jnp.broadcast_shapes(first.shape, inner.shape[:-1] + (1,))
    first, last = jnp.broadcast_to(first, shape), jnp.broadcast_to(last, shape)
    inner = jnp.broadcast_to(inner, shape[:-1] + inner.shape[-1:])
    lo = jnp.concatenate([first, inner], axis=-1)
    hi = jnp.concatenate([inner, last], axis=-1)
    l1mq, log_z, log_z2 = mech.boost_parts(v, nv)
    mid = 0.5 * (lo + hi)

    def const(answer, lz):
        a, b = mech.region.interval(answer)
        return jnp.where((mid >= a) & (mid <= b), 0.0, l1mq) - lz

    return lo, hi, const(v, log_z), const(nv, log_z2)


def _decreasing(kernel, lo, hi, v, nv):
    """Whether the kernel pair loss decreases on each piece: ``v < v'`` for a log-concave kernel;
    otherwise from its values at the piece's two ends (first and last integer inside, for a
    discrete kernel)."""
    if kernel.log_concave:
        return v < nv
    if kernel.discrete:
        a, b = jnp.ceil(lo), jnp.floor(hi)
    else:
        a, b = lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo)
    la, lb = kernel.noise_pair_loss(a, v, nv), kernel.noise_pair_loss(b, v, nv)
    return ~(lb > la)


def hockey_stick(mech, epsilon, value, neighbour_value):
    """Exact hockey-stick divergence δ(ε) of a pair of a privacy-boosted mechanism.

    Exact ``δ(ε) = ∫ (p(y|value) − e^ε p(y|neighbour_value))_+ dy``, any real ε; broadcasts
    ε (..., m) against the pair and the parameters. Three fused special-function calls for a
    kernel with a closed-form threshold.

    Args:
      mech: a ``PrivacyBoosted`` whose parameters broadcast against the trailing axes added here.
      epsilon: ε, any real (array, trailing axis m).
      value: the answer.
      neighbour_value: the neighbouring answer.

    Returns:
      δ(ε), of the broadcast shape.
    """
    v = jnp.asarray(value)[..., None]
    nv = jnp.asarray(neighbour_value)[..., None]
    me = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[..., None], mech)
    kinked = not mech.kernel.log_concave
    lo, hi, c, c2 = pieces(me, v, nv, kinks=kinked)  # (..., P)
    eps = jnp.asarray(epsilon)[..., None]  # (..., m, 1)
    lo, hi, c, c2 = lo[..., None, :], hi[..., None, :], c[..., None, :], c2[..., None, :]
    kernel = jax.tree_util.tree_map(lambda x: x[..., None], me.kernel)
    v3, nv3 = v[..., None], nv[..., None]
    t = eps - (c - c2)
    t = jnp.where(jnp.isnan(t), jnp.inf, t)
    dec = _decreasing(kernel, lo, hi, v3, nv3)
    ystar = jnp.clip(kernel.noise_loss_threshold(t, v3, nv3, lo, hi, dec), lo, hi)
    u = jnp.where(dec, lo, ystar)
    w = jnp.where(dec, ystar, hi)
    same = v3 == nv3
    u = jnp.where(same, jnp.where(t < 0, lo, hi), u)
    w = jnp.where(same, hi, w)
    lp, lq = kernel.log_interval_masses(u, w, (v3, nv3))
    term = jnp.exp(c + lp) - jnp.exp(jnp.minimum(eps + c2 + lq, 700.0))
    out = jnp.sum(jnp.maximum(jnp.where(jnp.isnan(term), 0.0, term), 0.0), axis=-1)
    return out[..., 0] if jnp.ndim(epsilon) == 0 else out


def renyi_divergence(mech, order, value, neighbour_value):
    """Exact Rényi divergence D_α of a pair of a privacy-boosted mechanism.

    Exact ``D_α(P_value‖P_neighbour_value)``, α > 1, in log space; broadcasts like
    :func:`hockey_stick` (the outer edges also clear the tilted centre).

    Args:
      mech: a ``PrivacyBoosted`` whose parameters broadcast against the trailing axes added here.
      order: α > 1 (array).
      value: the answer.
      neighbour_value: the neighbouring answer.

    Returns:
      D_α, of the broadcast shape.
    """
    v = jnp.asarray(value)[..., None, None]
    nv = jnp.asarray(neighbour_value)[..., None, None]
    a = jnp.asarray(order)[..., None]  # (..., k, 1)
    me = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[..., None, None], mech)
    lo, hi, c, c2 = pieces(me, v, nv, kinks=True, spread=a * jnp.abs(v - nv))  # (..., k, P)
    log_int = me.kernel.noise_tilted_log_integral(lo, hi, v, nv, a)
    weight = jnp.where(jnp.isneginf(c), -jnp.inf, a * c + (1.0 - a) * c2)
    term = jnp.where(jnp.isneginf(log_int) | jnp.isneginf(c), -jnp.inf, weight + log_int)
    out = jnp.maximum(jax.nn.logsumexp(term, axis=-1) / (a[..., 0] - 1.0), 0.0)
    return out[..., 0] if jnp.ndim(order) == 0 else out
