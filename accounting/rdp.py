"""Rényi differential privacy: exact divergences of a mechanism, and conversion to (ε, δ).

``rdp(mech, orders)`` is max over the declared neighbouring pairs, both orders of each
pair, of D_α(P_v‖P_v'):

* closed form where the mechanism overrides ``renyi_divergence`` (Gaussian, Laplace, RR,
  privacy-boosted), through :func:`accounting.privacy_loss.pair_path.worst_case` (the supremum along
  the answers where the pairs sample a path: relative and fixed regions);
* discrete mechanisms: the exact sum over the integers of p^α q^{1−α};
* continuous mechanisms: Gauss–Legendre quadrature of p^α q^{1−α} over cells between the
  output grid and the mechanism's ``output_breakpoints``, on an interval widened by
  (α−1)|v−v'| on each side (the tilted law p^α q^{1−α} sits away from both laws).

Poisson subsampling at the integer :data:`RDP_ORDERS`: :func:`subsampled_rdp` (Zhu & Wang,
"Poisson Subsampled Rényi Differential Privacy", ICML 2019, Thm. 5: any mechanism) and
:func:`sampled_gaussian_rdp` (Mironov, Talwar & Zhang, "Rényi Differential Privacy of the Sampled
Gaussian Mechanism", 2019, Sec. 3.3: the Gaussian, exactly; :func:`sampled_gaussian_rdp_at` at any
order, fractional ones by the paper's series, on :data:`SAMPLED_GAUSSIAN_ORDERS`).

RDP composes by addition (``T * rdp``); :func:`rdp_to_epsilon` / :func:`rdp_to_delta`
use Proposition 12 of Canonne, Kamath, Steinke (arXiv:2004.00010), as dp_accounting does.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from accounting._numerics import as64, to64, x64
from accounting.privacy_loss.pair_path import worst_case
from accounting.privacy_loss.profiles import discrete_plan, expand, output_interval
from dpjax.validation import check_int, check_positive, check_probability, check_real, is_traced
from dpjax.mechanism import Mechanism

__all__ = [
    "rdp",
    "rdp_to_epsilon",
    "rdp_to_delta",
    "subsampled_rdp",
    "sampled_gaussian_rdp",
    "RDP_ORDERS",
    "SAMPLED_GAUSSIAN_ORDERS",
    "sampled_gaussian_rdp_at",
]

_GL_X, _GL_W = np.polynomial.legendre.leggauss(8)


def _check_orders(orders):
    check_real("orders", orders)
    if not is_traced(orders) and np.any(np.asarray(orders) <= 1.0):
        raise ValueError(f"orders must all be > 1, got {orders!r}")


def _pair_divergence(mech, kind, v, nv, alpha, cells, klo, count):
    """(D_α(P_v‖P_nv), D_α(P_nv‖P_v)) with params (..., 1) and alpha (K,), without a closed form."""
    a = alpha[..., :, None]  # (K, 1)
    if kind == "discrete":
        k = jnp.floor(klo) + jnp.arange(count, dtype=jnp.float64)
        lp, lq = mech.log_prob(k, v)[..., None, :], mech.log_prob(k, nv)[..., None, :]
        logw = 0.0
    else:
        ylo, yhi = output_interval(mech, v, nv)
        widen = (jnp.max(alpha) - 1.0) * jnp.abs(v - nv)
        ylo, yhi = ylo - widen, yhi + widen
        edges = ylo + (yhi - ylo) * jnp.linspace(0.0, 1.0, cells + 1)
        if mech.output_breakpoints is not None:
            bp = jnp.clip(jnp.asarray(mech.output_breakpoints(v, nv), jnp.float64), ylo, yhi)
            shape = jnp.broadcast_shapes(edges.shape[:-1], bp.shape[:-1])
            edges = jnp.sort(
                jnp.concatenate(
                    [jnp.broadcast_to(edges, shape + edges.shape[-1:]), jnp.broadcast_to(bp, shape + bp.shape[-1:])], -1
                ),
                -1,
            )
        lo, hi = edges[..., :-1, None], edges[..., 1:, None]
        y = (lo + (hi - lo) * (jnp.asarray(_GL_X) + 1.0) / 2.0).reshape(edges.shape[:-1] + (-1,))
        w = ((hi - lo) / 2.0 * jnp.asarray(_GL_W)).reshape(edges.shape[:-1] + (-1,))
        lp, lq = mech.log_prob(y, v)[..., None, :], mech.log_prob(y, nv)[..., None, :]
        logw = jnp.log(jnp.maximum(w, 1e-300))[..., None, :]

    def div(l1, l2):
        t = jnp.where(jnp.isneginf(l1), -jnp.inf, a * l1 + (1.0 - a) * l2)
        return jax.nn.logsumexp(t + logw, axis=-1) / (alpha - 1.0)

    return div(lp, lq), div(lq, lp)


@x64
def rdp(mech, orders, *, sensitivity=1.0, quadrature_cells=4096):
    """Exact Rényi divergence D_α of a mechanism at the given orders.

    The worst declared neighbouring pair, both directions: a closed form where the mechanism has
    ``renyi_divergence``, the exact sum over the integers for a discrete law, Gauss–Legendre
    quadrature between the output breakpoints otherwise. Compose T runs by ``T * rdp``.

    Args:
      mech: a dpjax mechanism (batched: results get its batch shape).
      orders: Rényi orders α, all > 1 (array).
      sensitivity: the neighbouring answers' distance Δ (positive).
      quadrature_cells: cells of the quadrature grid of a continuous law without a closed form (≥ 16).

    Returns:
      float64 D_α of shape ``batch_shape + orders.shape`` (∞ where the shift leaves the mechanism's lattice).

    Raises:
      ValueError: ``mech`` not a dpjax Mechanism; an order not real or ≤ 1; ``sensitivity`` not
        positive; ``quadrature_cells`` not an integer ≥ 16.
      NotImplementedError: a mechanism whose pairs sample a path (``pair_path``) without a
        closed-form ``renyi_divergence``.
    """
    if not isinstance(mech, Mechanism):
        raise ValueError(f"mech must be a dpjax Mechanism, got {type(mech).__name__}")
    _check_orders(orders)
    check_positive("sensitivity", sensitivity)
    cells = check_int("quadrature_cells", quadrature_cells, minimum=16)
    alpha = jnp.asarray(orders, jnp.float64)
    shp = alpha.shape
    alpha = alpha.reshape(-1)
    m = to64(mech)
    values, nvalues = (jnp.asarray(x, jnp.float64) for x in m.neighbour_pairs(jnp.asarray(sensitivity, jnp.float64)))
    me = expand(m)
    kind = "closed_form" if m.renyi_divergence is not None else ("discrete" if m.discrete else "grid")
    # a shift off the mechanism's lattice separates the neighbours' supports: D_α = ∞
    apart = m.off_lattice(jnp.asarray(sensitivity, jnp.float64)).reshape(tuple(m.batch_shape) + (1,) * len(shp))
    if kind == "closed_form":
        out = _closed_form(m, alpha, jnp.asarray(sensitivity, jnp.float64)).reshape(tuple(m.batch_shape) + shp)
        return jnp.where(apart, jnp.inf, out)
    if getattr(m, "pair_path", False):
        raise NotImplementedError(f"{type(m).__name__}.pair_path needs the closed form renyi_divergence")
    klo, count = None, 0
    if kind == "discrete":
        plan = discrete_plan(me, values, nvalues)
        widen = float(np.max(np.asarray(alpha)) - 1.0) * float(np.max(np.abs(np.asarray(values - nvalues))))
        klo = plan["klo"] - np.ceil(widen)
        count = plan["count"] + 2 * int(np.ceil(widen))
    out = None
    for i in range(int(np.size(values))):
        v, nv = jnp.atleast_1d(values)[i][..., None], jnp.atleast_1d(nvalues)[i][..., None]
        k = None if klo is None else jnp.atleast_1d(klo)[i][..., None]
        d1, d2 = _pair_divergence(me, kind, v, nv, alpha, cells, k, count)
        d = jnp.maximum(d1, d2)
        out = d if out is None else jnp.maximum(out, d)
    out = jnp.maximum(out, 0.0)
    return jnp.where(apart, jnp.inf, out.reshape(tuple(m.batch_shape) + shp))


@jax.jit
def _closed_form(m, alpha, sensitivity):
    """Closed-form worst case over pairs (the supremum along a pair path), batch flattened."""
    shape = tuple(m.batch_shape)
    flat = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, shape).reshape(-1), m)

    def one(mm):
        return jnp.maximum(worst_case(mm, "renyi", alpha, *mm.neighbour_pairs(sensitivity))[0], 0.0)

    return jax.vmap(one)(flat)


def _conv_inputs(orders, rdp_values, arg):
    """(orders, RDP values ≥ 0, the δ or ε argument) as float64 arrays, and the array module: numpy where
    all are concrete (converted on the host, nothing compiled), else ``jax.numpy``."""
    _check_orders(orders)
    check_real("rdp_values", rdp_values, finite=False)
    xp = jnp if is_traced((orders, rdp_values, arg)) else np
    a = xp.asarray(orders, np.float64)
    r = xp.asarray(rdp_values, np.float64)
    if a.shape[-1:] != r.shape[-1:]:
        raise ValueError(f"rdp_values: last axis must match orders ({a.shape[-1:]}), got shape {r.shape}")
    return a, xp.maximum(r, 0.0), xp.asarray(arg, np.float64), xp


@x64
def rdp_to_epsilon(orders, rdp_values, delta):
    """ε at ``delta`` from an RDP curve.

    The minimum over α of r + log1p(−1/α) − (log δ + log α)/(α − 1), and 0 when
    δ² + expm1(−r) > 0 (the KL bound), as dp_accounting does.

    Args:
      orders: the Rényi orders α, all > 1 (last axis).
      rdp_values: the RDP at each order (last axis = orders; negative values count as 0).
      delta: δ in (0, 1) (scalar or array).

    Returns:
      float64 ε of shape ``rdp_values.shape[:-1]`` (plus δ's shape when δ is an array).

    Raises:
      ValueError: ``delta`` outside (0, 1); an order not real or ≤ 1; ``rdp_values`` NaN or its last
        axis not matching ``orders``.

    References:
      Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020
      (arXiv:2004.00010), Proposition 12.
    """
    check_probability("delta", delta, high_open=True)
    a, r, d, xp = _conv_inputs(orders, rdp_values, delta)
    dd = d[..., None] if d.ndim else d
    r_ = r[..., None, :] if d.ndim else r
    eps = r_ + xp.log1p(-1.0 / a) - (xp.log(dd) + xp.log(a)) / (a - 1.0)
    eps = xp.where(dd**2 + xp.expm1(-r_) > 0, 0.0, eps)
    out = xp.maximum(xp.min(eps, axis=-1), 0.0)
    return out if xp is jnp else as64(out)


@x64
def rdp_to_delta(orders, rdp_values, epsilon):
    """δ at ``epsilon`` from an RDP curve.

    The minimum over α of exp((α−1)(r − ε + log1p(−1/α)) − log α), also bounded by sqrt(1 − e^{−r}).

    Args:
      orders: the Rényi orders α, all > 1 (last axis).
      rdp_values: the RDP at each order (last axis = orders).
      epsilon: ε ≥ 0 (scalar or array).

    Returns:
      float64 δ of shape ``rdp_values.shape[:-1]`` (plus ε's shape when ε is an array), at most 1.

    Raises:
      ValueError: ``epsilon`` negative; an order not real or ≤ 1; ``rdp_values`` NaN or its last
        axis not matching ``orders``.

    References:
      Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020
      (arXiv:2004.00010), Proposition 12.
    """
    check_positive("epsilon", epsilon, allow_zero=True)
    a, r, e, xp = _conv_inputs(orders, rdp_values, epsilon)
    ee = e[..., None] if e.ndim else e
    r_ = r[..., None, :] if e.ndim else r
    logd = (a - 1.0) * (r_ - ee + xp.log1p(-1.0 / a)) - xp.log(a)
    kl = 0.5 * xp.log(-xp.expm1(-xp.maximum(r_, 1e-300)))
    logd = xp.minimum(logd, kl)
    out = xp.minimum(xp.exp(xp.min(logd, axis=-1)), 1.0)
    return out if xp is jnp else as64(out)


# ----------------------------------------------------------------------------------
# Poisson subsampling
# ----------------------------------------------------------------------------------
#: integer Rényi orders of the subsampled bounds (Zhu & Wang's Thm. 5 needs integers)
RDP_ORDERS = np.concatenate([np.arange(2, 65), np.arange(72, 257, 8), [320, 384, 512]]).astype(float)
_gammaln = np.vectorize(math.lgamma)
_A = RDP_ORDERS[:, None]
_K = np.arange(int(RDP_ORDERS.max()) + 1, dtype=float)[None, :]
with np.errstate(invalid="ignore"):
    #: log C(α, k) for every order α (rows) and k = 0..max α (columns); -inf where k > α
    _LOG_BINOM = np.where(
        _K <= _A, _gammaln(_A + 1.0) - _gammaln(_K + 1.0) - _gammaln(np.maximum(_A - _K, 0) + 1.0), -np.inf
    )


def _log1m(q):
    return jnp.log1p(-jnp.minimum(q, 1.0 - 1e-16))


def subsampled_rdp(base_rdp, sampling_prob):
    """An RDP bound of a mechanism run on a Poisson sample, at the integer :data:`RDP_ORDERS`.

    ε_q(α) ≤ log[(1−q)^{α−1}(αq − q + 1) + C(α,2) q² (1−q)^{α−2} e^{ε(2)}
    + 3 Σ_{l=3}^{α} C(α,l) (1−q)^{α−l} q^l e^{(l−1)ε(l)}] / (α−1), min'd with the base RDP.
    Traceable; no validation.

    Args:
      base_rdp: maps orders (an array broadcasting against ``sampling_prob``'s shape + (1, 1)) to the
        unsampled mechanism's RDP values.
      sampling_prob: the Poisson rate q (scalar or array).

    Returns:
      float64 RDP of shape ``sampling_prob.shape + RDP_ORDERS.shape``.

    References:
      Zhu, Wang, "Poisson Subsampled Rényi Differential Privacy", ICML 2019, Theorem 5.
    """
    q = jnp.asarray(sampling_prob, jnp.float64)[..., None, None]
    a, k = jnp.asarray(_A), jnp.asarray(_K)
    ksafe = jnp.maximum(k, 2.0)
    terms = (
        jnp.asarray(_LOG_BINOM)
        + (a - k) * _log1m(q)
        + k * jnp.log(q)
        + (ksafe - 1.0) * base_rdp(ksafe)
        + jnp.where(k >= 3, math.log(3.0), 0.0)
    )
    terms = jnp.where(k >= 2, terms, -jnp.inf)
    first = (a - 1.0) * _log1m(q) + jnp.log1p((a - 1.0) * q)
    total = jax.nn.logsumexp(jnp.concatenate([first, terms], -1), axis=-1)
    base = base_rdp(a)[..., 0]
    return jnp.where(q[..., 0] >= 1.0, base, jnp.minimum(total / (a[..., 0] - 1.0), base))


def sampled_gaussian_rdp(z, sampling_prob):
    """RDP of the Poisson-subsampled Gaussian at the integer :data:`RDP_ORDERS`, exactly.

    log A_α / (α − 1) with A_α = Σ_k C(α,k)(1−q)^{α−k} q^k e^{(k²−k)/2z²} (the add direction is
    smaller, the paper's Theorem 5). Traceable; no validation.

    Args:
      z: the noise multiplier (σ over the L2 sensitivity), scalar or array.
      sampling_prob: the Poisson rate q, broadcasting with ``z``.

    Returns:
      float64 RDP of shape ``broadcast(z, sampling_prob).shape + RDP_ORDERS.shape``.

    References:
      Mironov, Talwar, Zhang, "Rényi Differential Privacy of the Sampled Gaussian Mechanism",
      arXiv:1908.10530, 2019, §3.3.
    """
    z = jnp.asarray(z, jnp.float64)[..., None, None]
    q = jnp.asarray(sampling_prob, jnp.float64)[..., None, None]
    a, k = jnp.asarray(_A), jnp.asarray(_K)
    t = jnp.asarray(_LOG_BINOM) + (a - k) * _log1m(q) + k * jnp.log(q) + (k * k - k) / (2.0 * z * z)
    t = jnp.where((q >= 1.0) & (k < a), -jnp.inf, t)
    return jax.nn.logsumexp(t, axis=-1) / (a[..., 0] - 1.0)


#: the orders of the sampled Gaussian's RDP curve: dp_accounting's default RDP orders (1.1 to 10.9 by
#: 0.1, 11 to 63, 128 to 1024) with :data:`RDP_ORDERS` and a finer grid of 0.05 from 2 to 20, so that the
#: minimum over orders is never above what either set gives
SAMPLED_GAUSSIAN_ORDERS = np.unique(
    np.concatenate(
        [
            np.round(np.arange(2.0, 20.0, 0.05), 2),
            np.round(np.arange(1.1, 11.0, 0.1), 1),
            np.arange(11, 64),
            [128, 256, 512, 1024],
            RDP_ORDERS,
        ]
    ).astype(float)
)
#: the fractional-order series ends where its terms fall below e^this of log A_α
_SERIES_LOG_TAIL = -30.0
_SERIES_CHUNK = 1024


@jax.jit
def _log_ndtr_jit(x):
    return jax.scipy.special.log_ndtr(x)


def _log_ndtr(x):
    """log Φ(x) in float64, rows padded to a power of two (few compiled shapes)."""
    rows = 1 << max(x.shape[0] - 1, 0).bit_length()
    with jax.enable_x64(True):
        return np.asarray(_log_ndtr_jit(jnp.asarray(np.pad(x, ((0, rows - x.shape[0]), (0, 0))), jnp.float64)))[
            : x.shape[0]
        ]


def _log_a_int(q, z, alpha):
    """log A_α of the sampled Gaussian at an integer α: the finite binomial sum (Mironov et al., Sec. 3.3)."""
    k = np.arange(int(alpha) + 1, dtype=float)
    log_binom = math.lgamma(alpha + 1) - np.array([math.lgamma(i + 1) + math.lgamma(alpha - i + 1) for i in k])
    t = log_binom + k * math.log(q) + (alpha - k) * math.log1p(-q) + (k * k - k) / (2.0 * z * z)
    return float(np.logaddexp.reduce(t))


def _log_a_frac(q, z, alpha):
    """Upper bounds on log A_α of the sampled Gaussian at fractional orders ``alpha`` (an array), tight to a
    relative e^-30 of log A_α: the paper's series over i ≥ 0 of the two half-line integrals split at
    z₀ = z² log(1/q − 1) + ½ (Mironov et al., Sec. 3.3; dp_accounting's ``_compute_log_a_frac``), in
    signed log space. Past i = α + 1 the binomial coefficients alternate in sign and the terms fall,
    so the series is cut where they are below e^-30 of log A_α and the cut is bounded by the last
    term's magnitude, added (dp_accounting stops at e^-30 absolute, which at α near 1 misses a
    relative 2% of log A_α)."""
    z0 = z * z * math.log(1.0 / q - 1.0) + 0.5
    out = np.full(len(alpha), np.nan)
    live = np.arange(len(alpha))
    alpha = np.asarray(alpha, float)[:, None]
    lp, ln = np.full(len(alpha), -np.inf), np.full(len(alpha), -np.inf)
    log_coef, sign = np.zeros(len(alpha)), np.ones(len(alpha))
    start = 0
    while len(live):
        a = alpha[live]
        i = np.arange(start, start + _SERIES_CHUNK, dtype=float)[None, :]
        step = np.log(np.abs(a - i)) - np.log(i + 1.0)  # |C(α, i+1)| = |C(α, i)|·|α − i|/(i + 1)
        signs = np.sign(a - i)
        logc = log_coef[live, None] + np.concatenate([np.zeros_like(a), np.cumsum(step[:, :-1], 1)], 1)
        sgn = sign[live, None] * np.concatenate([np.ones_like(a), np.cumprod(signs[:, :-1], 1)], 1)
        j = a - i
        s0 = logc + i * math.log(q) + j * math.log1p(-q) + (i * i - i) / (2 * z * z) + _log_ndtr((z0 - i) / z)
        s1 = logc + j * math.log(q) + i * math.log1p(-q) + (j * j - j) / (2 * z * z) + _log_ndtr((j - z0) / z)
        both = np.logaddexp(s0, s1)
        lp[live] = np.logaddexp(lp[live], np.logaddexp.reduce(np.where(sgn > 0, both, -np.inf), axis=1))
        ln[live] = np.logaddexp(ln[live], np.logaddexp.reduce(np.where(sgn < 0, both, -np.inf), axis=1))
        with np.errstate(divide="ignore", invalid="ignore"):
            log_a = lp[live] + np.log1p(-np.exp(ln[live] - lp[live]))
            done = (start > a[:, 0] + 1) & (both[:, -1] < np.log(np.abs(log_a)) + _SERIES_LOG_TAIL)
        out[live[done]] = np.logaddexp(log_a, both[:, -1])[done]
        log_coef[live], sign[live] = logc[:, -1] + step[:, -1], sgn[:, -1] * signs[:, -1]
        live, start = live[~done], start + _SERIES_CHUNK
    return out


def sampled_gaussian_rdp_at(z, sampling_prob, orders=SAMPLED_GAUSSIAN_ORDERS) -> np.ndarray:
    """RDP of the Poisson-subsampled Gaussian at any orders > 1.

    log A_α / (α − 1), A_α the finite sum at an integer α and the paper's series at a fractional
    one, bounded above (computed on the host in float64, as dp_accounting does).

    Args:
      z: the noise multiplier (σ over the L2 sensitivity), a positive number.
      sampling_prob: the Poisson sampling rate q in (0, 1].
      orders: the orders (all > 1); default :data:`SAMPLED_GAUSSIAN_ORDERS`.

    Returns:
      float64 array of the RDP at each order (the unsampled Gaussian's α/(2z²) where q = 1).

    Raises:
      ValueError: ``z`` not positive, ``sampling_prob`` outside (0, 1], or an order ≤ 1.

    References:
      Mironov, Talwar, Zhang, "Rényi Differential Privacy of the Sampled Gaussian Mechanism",
      arXiv:1908.10530, 2019, §3.3.
    """
    z = float(check_positive("z", z))
    q = float(check_probability("sampling_prob", sampling_prob, low_open=True))
    _check_orders(orders)
    orders = np.asarray(orders, float)
    if q >= 1.0:
        return orders / (2.0 * z * z)
    frac = orders != np.round(orders)
    log_a = np.array([_log_a_int(q, z, a) if not f else np.nan for a, f in zip(orders, frac)])
    if frac.any():
        log_a[frac] = _log_a_frac(q, z, orders[frac])
    return log_a / (orders - 1.0)
