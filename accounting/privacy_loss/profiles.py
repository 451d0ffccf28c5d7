"""Privacy profiles δ(ε) of a mechanism's neighbouring pairs, and their pessimistic envelope.

Three sources, chosen per mechanism by :func:`accounting.privacy_loss.route.route` (see
docs/accounting.md, "The mechanism hook"):

* **closed form** — the mechanism overrides ``hockey_stick(epsilon, value, neighbour_value)``
  (Gaussian, Laplace, randomized response, privacy-boosted mechanisms);
* **discrete** — ``mech.discrete``: exact atoms on the integers from ``log_prob``;
* **output grid** — any continuous mechanism with ``cdf`` and ``privacy_loss``: the
  output interval holding all but a tiny tail is cut into cells (plus the mechanism's
  ``output_breakpoints``, where the loss jumps or turns); a cell's masses are CDF
  differences. Pessimistic: each cell becomes the two-atom pair at the extreme losses
  of the cell with the same P and Q masses (the worst law of the loss given the cell's
  masses, by convexity); optimistic: one atom at log(P_c/Q_c) (the best, by Jensen).
  Valid when the loss is monotone inside each cell.

Poisson subsampling with rate ``sampling_prob`` (s below) is applied to each pair's profile (joint
convexity): remove (M(D∪x) vs M(D)): δ_s(ε) = s·δ_{P‖Q}(log((e^ε−(1−s))/s)) for e^ε > 1−s, else
1−e^ε; add (M(D) vs M(D∪x)): δ_s(ε) = c·δ_{Q‖P}(ε + log s − log c) with c = 1 − e^ε(1−s) > 0, else 0.
The envelope is the pointwise max over pairs (each in both orders; along a ``pair_path``, the
lower convex hull in e^ε of point-by-point bounds on the supremum between the pairs, see
:func:`_path_supremum`). Connect-the-dots turns it into a dominating PLD: its profile is at or
above these values at the grid points (negative masses are paid from the mass below them, which
only raises δ and keeps the total) and linear in e^ε between them, hence above the true profile,
a supremum of profiles, convex in e^ε.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from accounting._numerics import safe_log, searchsorted_right, take_last
from accounting.privacy_loss.route import route
from accounting.privacy_loss.pair_path import HOOKS, convex_minorant, path_divergence, supremum

#: output-space tail (per side, per law) left out of the output grid; carried as +∞ mass.
OUTPUT_TAIL = 1e-18


def is_symmetric(mech) -> bool:
    """δ(P_v‖P_v') = δ(P_v'‖P_v) for the declared pairs (the mechanism's ``symmetric_pairs``:
    symmetric additive noise, RR, an absolute-error region).

    Args:
      mech: the dpjax mechanism.

    Returns:
      Whether the mechanism declares symmetric pairs.
    """
    return bool(mech.symmetric_pairs)


def expand(mech):
    """Parameters shaped (..., 1) so that they broadcast against a trailing grid axis.

    Args:
      mech: the dpjax mechanism (a pytree of parameters).

    Returns:
      The mechanism with every parameter given a trailing axis of length 1.
    """
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x)[..., None], mech)


# ----------------------------------------------------------------------------------
# atoms → profile evaluator
# ----------------------------------------------------------------------------------
def atoms_profile(mass, loss, tail):
    """Evaluator ε ↦ tail + Σ_c m_c (1 − e^{ε−ℓ_c})_+ for atoms (..., K).

    Args:
      mass: the atoms' masses (..., K).
      loss: the atoms' losses (..., K); NaN counts as +∞.
      tail: mass added to δ at every ε (...,).

    Returns:
      The function ``at(eps)`` giving δ of shape (..., m) for ε of shape (..., m).
    """
    loss = jnp.where(jnp.isnan(loss), jnp.inf, loss)  # an undefined loss counts as the worst
    valid = mass > 0
    loss = jnp.where(valid, loss, -jnp.inf)
    mass = jnp.where(valid, mass, 0.0)
    order = jnp.argsort(loss, axis=-1)
    loss = jnp.take_along_axis(loss, order, -1)
    mass = jnp.take_along_axis(mass, order, -1)
    a = jnp.flip(jnp.cumsum(jnp.flip(mass, -1), axis=-1), -1)
    qterm = jnp.where(jnp.isfinite(loss), safe_log(mass) - jnp.where(jnp.isfinite(loss), loss, 0.0), -jnp.inf)
    logs = jax.lax.cumlogsumexp(qterm, axis=qterm.ndim - 1, reverse=True)
    zero = jnp.zeros(mass.shape[:-1] + (1,))
    a = jnp.concatenate([a, zero], -1)
    logs = jnp.concatenate([logs, zero - jnp.inf], -1)

    def at(eps):
        k = searchsorted_right(loss, eps)
        val = take_last(a, k) - jnp.exp(eps + take_last(logs, k))
        return tail[..., None] + jnp.maximum(val, 0.0)

    return at


def _cell_atoms(pm, qm, l_lo, l_hi, pessimistic):
    """Atoms dominating (pessimistic) or dominated by (optimistic) a cell with P mass pm,
    Q mass qm and loss in [l_lo, l_hi]."""
    logp, logq = safe_log(pm), safe_log(qm)
    if not pessimistic:
        lbar = jnp.clip(logp - logq, l_lo, l_hi)
        return pm, lbar
    width = l_hi - l_lo
    both_inf = jnp.isinf(l_lo) & (l_lo > 0)
    qe = jnp.exp(jnp.minimum(logq + jnp.where(jnp.isfinite(l_lo), l_lo, -jnp.inf), 700.0))
    denom = -jnp.expm1(-jnp.where(jnp.isnan(width), 0.0, width))
    w_hi = jnp.where(denom > 1e-300, (pm - qe) / jnp.where(denom > 1e-300, denom, 1.0), pm)
    w_hi = jnp.where(both_inf, pm, jnp.clip(w_hi, 0.0, pm))
    mass = jnp.concatenate([pm - w_hi, w_hi], -1)
    loss = jnp.concatenate([l_lo, l_hi], -1)
    return mass, loss


def _bisect_output(mech, v, nv, tail, upper: bool, iters=90):
    """A point y with cdf(y) ≤ tail (lower) or ≥ 1 − tail (upper) under both laws."""

    def ok(y):
        if upper:
            return (mech.cdf(y, v) >= 1.0 - tail) & (mech.cdf(y, nv) >= 1.0 - tail)
        return (mech.cdf(y, v) <= tail) & (mech.cdf(y, nv) <= tail)

    sign = 1.0 if upper else -1.0
    centre = jnp.maximum(v, nv) if upper else jnp.minimum(v, nv)
    centre = jnp.broadcast_to(centre, jnp.broadcast_shapes(jnp.shape(centre), mech.batch_shape))

    def cond(s):
        far, step, i = s
        return jnp.any(~ok(far)) & (i < 1100)

    def body(s):
        far, step, i = s
        good = ok(far)
        return jnp.where(good, far, far + sign * step), jnp.where(good, step, 2.0 * step), i + 1

    far, _, _ = jax.lax.while_loop(cond, body, (centre + sign, jnp.ones_like(centre), 0))

    def bis(_, s):
        good, bad = s
        mid = 0.5 * (good + bad)
        m_ok = ok(mid)
        return jnp.where(m_ok, mid, good), jnp.where(m_ok, bad, mid)

    good, _ = jax.lax.fori_loop(0, iters, bis, (far, centre))
    return good


def output_interval(mech, v, nv, tail=OUTPUT_TAIL):
    """(ylo, yhi) holding all but ``tail`` per side of P_v and P_nv (params (..., 1)).

    Args:
      mech: the mechanism, parameters shaped (..., 1).
      v: the answer.
      nv: the neighbouring answer.
      tail: the mass left outside on each side.

    Returns:
      ``(ylo, yhi)``.
    """
    return _bisect_output(mech, v, nv, tail, False), _bisect_output(mech, v, nv, tail, True)


def _grid_pair(mech, v, nv, cells, pessimistic):
    """Atoms of (P_v‖P_nv) and (P_nv‖P_v) from the output grid; params (..., 1)."""
    ylo, yhi = output_interval(mech, v, nv)
    u = jnp.linspace(0.0, 1.0, cells + 1)
    y = ylo + (yhi - ylo) * u
    if mech.output_breakpoints is not None:
        bp = jnp.asarray(mech.output_breakpoints(v, nv), jnp.float64)
        bp = jnp.clip(bp, ylo, yhi)
        y = jnp.sort(
            jnp.concatenate(
                [
                    jnp.broadcast_to(y, jnp.broadcast_shapes(y.shape[:-1], bp.shape[:-1]) + y.shape[-1:]),
                    jnp.broadcast_to(bp, jnp.broadcast_shapes(y.shape[:-1], bp.shape[:-1]) + bp.shape[-1:]),
                ],
                -1,
            ),
            -1,
        )
    fp = mech.cdf(y, v)
    fq = mech.cdf(y, nv)
    pm = jnp.maximum(jnp.diff(fp, axis=-1), 0.0)
    qm = jnp.maximum(jnp.diff(fq, axis=-1), 0.0)
    a = jnp.nextafter(y[..., :-1], jnp.inf)
    b = jnp.nextafter(y[..., 1:], -jnp.inf)
    b = jnp.maximum(a, b)
    la = mech.privacy_loss(a, v, nv)
    lb = mech.privacy_loss(b, v, nv)
    l_lo, l_hi = jnp.minimum(la, lb), jnp.maximum(la, lb)
    tail_p = fp[..., 0] + mech.sf(y[..., -1:], v)[..., 0]
    tail_q = fq[..., 0] + mech.sf(y[..., -1:], nv)[..., 0]
    if not pessimistic:
        tail_p, tail_q = jnp.zeros_like(tail_p), jnp.zeros_like(tail_q)
    fwd = _cell_atoms(pm, qm, l_lo, l_hi, pessimistic)
    bwd = _cell_atoms(qm, pm, -l_hi, -l_lo, pessimistic)
    return (fwd, tail_p), (bwd, tail_q)


def _discrete_pair(mech, v, nv, klo, count, pessimistic):
    """Exact atoms on the integers klo .. klo+count-1; the rest of the mass is tail."""
    k = jnp.floor(klo) + jnp.arange(count, dtype=jnp.float64)
    lp = mech.log_prob(k, v)
    lq = mech.log_prob(k, nv)
    pm, qm = jnp.exp(lp), jnp.exp(lq)
    loss = lp - lq
    # the mass outside the window from the laws' own tails (1 − Σ would lose it below 1e-16
    # and make a mechanism with unbounded loss look pure-DP): it goes to the +∞ atom
    k_lo, k_hi = k[..., :1] - 1.0, k[..., -1:]
    tail_p = jnp.maximum(1.0 - jnp.sum(pm, -1), (mech.cdf(k_lo, v) + mech.sf(k_hi, v))[..., 0])
    tail_q = jnp.maximum(1.0 - jnp.sum(qm, -1), (mech.cdf(k_lo, nv) + mech.sf(k_hi, nv))[..., 0])
    if not pessimistic:
        tail_p, tail_q = jnp.zeros_like(tail_p), jnp.zeros_like(tail_q)
    return ((pm, loss), tail_p), ((qm, -loss), tail_q)


# ----------------------------------------------------------------------------------
# subsampling transforms
# ----------------------------------------------------------------------------------
def _remove_arg(eps, sampling_prob, xp=jnp):
    """``(e2, post)`` with ``post(h(e2))`` the profile of ((1−s)Q + sP ‖ Q) from h = δ(P‖Q), s = ``sampling_prob``
    (the remove direction of Poisson subsampling)."""
    if sampling_prob is None:
        return eps, lambda hv: hv
    log1m_prob = xp.log1p(-sampling_prob)
    low = eps <= log1m_prob
    e_safe = xp.where(low, log1m_prob + 1.0, eps)
    inner = xp.maximum(-xp.exp(log1m_prob - e_safe), -1.0 + 1e-300)
    e2 = e_safe + xp.log1p(inner) - xp.log(sampling_prob)
    return e2, lambda hv: xp.where(low, -xp.expm1(xp.minimum(eps, 0.0)), sampling_prob * hv)


def _add_arg(eps, sampling_prob, xp=jnp):
    """``(e2, post)`` with ``post(h(e2))`` the profile of (Q ‖ (1−s)Q + sP) from h = δ(Q‖P), s = ``sampling_prob``
    (the add direction of Poisson subsampling)."""
    if sampling_prob is None:
        return eps, lambda hv: hv
    log1m_prob = xp.log1p(-sampling_prob)
    high = eps + log1m_prob >= 0
    e_safe = xp.where(high, -log1m_prob - 1.0, eps)
    c = -xp.expm1(e_safe + log1m_prob)
    e2 = e_safe + xp.log(sampling_prob) - xp.log(c)
    return e2, lambda hv: xp.where(high, 0.0, c * hv)


# ----------------------------------------------------------------------------------
# the profiles of the Gaussian and the Laplace pair on the host
# ----------------------------------------------------------------------------------
#: math.erfc is exactly 2 at and below this, exactly 0 at and above ERFC_ZERO (checked in the tests)
ERFC_TWO, ERFC_ZERO = -6.0, 27.3


def _erfc(x):
    """``math.erfc`` elementwise over a float64 array (bitwise), calling it only where it is neither 2 nor 0."""
    x = np.asarray(x, np.float64)
    out = np.where(x <= ERFC_TWO, 2.0, 0.0)
    mid = ~((x <= ERFC_TWO) | (x >= ERFC_ZERO))
    out[mid] = np.fromiter(map(math.erfc, x[mid].tolist()), np.float64, int(np.count_nonzero(mid)))
    return out


_HALF_SQRT2 = 0.5 * math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _host_log_ndtr(x):
    """log Φ(x) in numpy: log(erfc(−x/√2)/2) down to x = −37 (erfc is relative-accurate there), the
    asymptotic series below, as :func:`dpjax.kernels.gaussian.gaussian_privacy_profile` evaluates it."""
    big = x < -37.0
    core = np.log(0.5 * _erfc(-np.where(big, -1.0, x) * _HALF_SQRT2))
    xb = np.where(big, x, -40.0)
    z = 1.0 / (xb * xb)
    series = 1.0 + z * (-1.0 + z * (3.0 + z * (-15.0 + z * (105.0 + z * (-945.0 + z * 10395.0)))))
    return np.where(big, -0.5 * xb * xb - np.log(-xb) - _LOG_SQRT_2PI + np.log(series), core)


def host_gaussian_profile(mu, eps):
    """δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) of the pair N(0, 1) vs N(μ, 1), in numpy.

    Args:
      mu: μ, shaped (..., 1) against the losses.
      eps: the losses (..., m).

    Returns:
      δ(ε), NaN where the numerics cannot evaluate it.

    References:
      Balle, Wang, "Improving the Gaussian Mechanism for Differential Privacy: Analytical
      Calibration and Optimal Denoising", ICML 2018, Theorem 8.
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        a, b = mu / 2.0 - eps / mu, -mu / 2.0 - eps / mu
        return 0.5 * _erfc(-a * _HALF_SQRT2) - np.exp(eps + _host_log_ndtr(b))


def host_laplace_profile(r, eps):
    """δ(ε) of the pair Lap(0, b) vs Lap(Δ, b), r = Δ/b, in numpy: the arithmetic of
    :meth:`dpjax.Laplace.hockey_stick` (1 − e^ε for ε ≤ −r, 1 − e^{(ε−r)/2} for |ε| < r, 0 for ε ≥ r).

    Args:
      r: Δ/b, shaped (..., 1) against the losses.
      eps: the losses (..., m).

    Returns:
      δ(ε).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        mid = -np.expm1(np.minimum(eps - r, 0.0) / 2.0)
        low = -np.expm1(np.minimum(eps, 0.0))
        return np.where(eps >= r, 0.0, np.where(eps <= -r, low, mid))


def host_envelope(profile, param, sampling_prob, eps_rem, eps_add, pessimistic):
    """The remove / add profiles (:func:`envelope`) of a mechanism with one symmetric pair whose profile
    ``profile(param, ε)`` is known in numpy (:func:`host_gaussian_profile` of μ,
    :func:`host_laplace_profile` of r), Poisson-subsampled at rate ``sampling_prob`` (``None``: not
    subsampled, ``eps_add`` None), computed on the host from concrete parameters (batch) and losses
    (batch + (m,)).

    Args:
      profile: the pair's profile in numpy, ``profile(param, eps)``.
      param: its parameter over the batch.
      sampling_prob: the Poisson rate (``None``: not subsampled).
      eps_rem: the remove direction's losses.
      eps_add: the add direction's losses (``None`` when not subsampled).
      pessimistic: a profile the numerics cannot evaluate reads 1 (else 0).

    Returns:
      ``(δ_rem, δ_add)`` (``δ_add`` None when not subsampled).
    """
    param = np.asarray(param, np.float64)[..., None]
    e_r, post_r = _remove_arg(eps_rem, sampling_prob, np)
    parts = [e_r]
    if eps_add is not None:
        e_a, post_a = _add_arg(eps_add, sampling_prob, np)
        parts.append(e_a)
    lead = np.broadcast_shapes(*[p.shape[:-1] for p in parts])
    args = np.concatenate([np.broadcast_to(p, lead + p.shape[-1:]) for p in parts], -1)
    val = profile(param, args)
    # (a profile the numerics could not evaluate (NaN) is bounded by 1, 0 when optimistic, as in the envelope)
    val = np.where(np.isnan(val), 1.0 if pessimistic else 0.0, val)
    nr = e_r.shape[-1]
    return post_r(val[..., :nr]), None if eps_add is None else post_a(val[..., nr:])


# ----------------------------------------------------------------------------------
# envelope over pairs
# ----------------------------------------------------------------------------------
def envelope(mech, values, nvalues, sampling_prob, eps_rem, eps_add, *, pessimistic, plan):
    """Pointwise max over pairs (both orders) of the remove / add profiles.

    ``mech`` has parameters shaped (..., 1); ``values``/``nvalues`` are (P,) or (..., P);
    ``eps_rem``/``eps_add`` are (..., m) (``eps_add`` may be None: the symmetric case, not subsampled:
    ``sampling_prob`` None).
    ``plan``: dict with the static sizes of the source (``cells`` or ``klo``/``count``).
    Returns (δ_rem, δ_add) on the given grids.

    Args:
      mech: the mechanism, parameters shaped (..., 1).
      values: the pairs' answers, (P,) or (..., P).
      nvalues: the neighbours' answers, same shape.
      sampling_prob: the Poisson rate, or None (not subsampled).
      eps_rem: the remove direction's losses (..., m).
      eps_add: the add direction's losses (..., m), or None (symmetric).
      pessimistic: bound from above (else from below).
      plan: the static sizes of the source (``cells``, or ``klo``/``count``).

    Returns:
      ``(δ_rem, δ_add)`` on the given grids (``δ_add`` None when ``eps_add`` is None).

    Raises:
      NotImplementedError: the mechanism has a pair path but no closed-form hockey-stick profile.
    """
    how = route(mech)
    kind = how.profile
    sym = is_symmetric(mech)
    vals = jnp.moveaxis(jnp.atleast_1d(values), -1, 0)
    nvals = jnp.moveaxis(jnp.atleast_1d(nvalues), -1, 0)

    def pair(v, nv, k_lo):
        v = jnp.asarray(v)[..., None]
        nv = jnp.asarray(nv)[..., None]
        if kind == "closed_form":
            hf = lambda e: mech.hockey_stick(e, v, nv)  # noqa: E731
            hb = hf if sym else (lambda e: mech.hockey_stick(e, nv, v))
            return hf, hb
        if kind == "discrete":
            (f, tf), (b, tb) = _discrete_pair(mech, v, nv, k_lo[..., None], plan["count"], pessimistic)
        else:
            (f, tf), (b, tb) = _grid_pair(mech, v, nv, plan["cells"], pessimistic)
        hf = atoms_profile(*f, tf)
        hb = hf if sym else atoms_profile(*b, tb)
        return hf, hb

    # every profile evaluation of a pair goes through ONE call per order (h_fwd, h_bwd) on the
    # concatenated transformed arguments: a single copy of the (often large) profile graph
    # in the compiled program instead of one per direction and order.
    e_r, post_r = _remove_arg(eps_rem, sampling_prob)
    parts = [e_r]
    if eps_add is not None:
        e_a, post_a = _add_arg(eps_add, sampling_prob)
        parts.append(e_a)
    lead = jnp.broadcast_shapes(*[p.shape[:-1] for p in parts])
    args = jnp.concatenate([jnp.broadcast_to(p, lead + p.shape[-1:]) for p in parts], -1)
    nr = e_r.shape[-1]

    # the max over pairs and both orders of the *base* profile at every argument, and the pair
    # attaining it; the subsampling post-processing is increasing in δ, so it commutes with the max
    refine = how.pair_path and vals.shape[0] > 1
    if refine and kind != "closed_form":
        raise NotImplementedError(f"{type(mech).__name__}.pair_path needs the closed form hockey_stick")

    def step(carry, x):
        best, arg, i = carry
        v, nv, k_lo = x
        hf, hb = pair(v, nv, k_lo)
        vf = hf(args)
        val = vf if hb is hf else jnp.maximum(vf, hb(args))
        # a profile the mechanism's numerics could not evaluate (NaN) is bounded by 1 (0 when
        # optimistic), never dropped
        val = jnp.where(jnp.isnan(val), 1.0 if pessimistic else 0.0, val).reshape(best.shape)
        return (jnp.maximum(best, val), jnp.where(val > best, i, arg), i + 1), None

    klos = plan.get("klo")
    if klos is None:
        klos = jnp.zeros_like(vals)
    else:
        klos = jnp.moveaxis(jnp.asarray(klos), -1, 0)
    shape = jnp.broadcast_shapes(args.shape, mech_batch(mech, args))
    init = (jnp.full(shape, -jnp.inf), jnp.zeros(shape, jnp.int32), jnp.int32(0))
    (best, arg, _), _ = jax.lax.scan(step, init, (vals, nvals, klos))
    if refine:
        best = _path_supremum(mech, values, nvalues, args, best, arg, pessimistic)
    rem = post_r(best[..., :nr])
    return rem, (None if eps_add is None else post_a(best[..., nr:]))


def _path_supremum(mech, values, nvalues, args, best, arg, pessimistic):
    """The envelope at ``args`` raised to the supremum along the mechanism's pair path
    (see :mod:`accounting.privacy_loss.pair_path`), both orders of every pair: the greatest function
    convex in e^ε below the points' upper bounds (pessimistic), or the best value found (optimistic).

    Pessimistic: every point's bound (best found + margin) is an upper bound of the supremum f, but
    not a convex function of e^ε (each point has its own search), and connect-the-dots turns
    non-convexity into negative masses. The lower convex hull of the bounds over all of ``args``
    (:func:`accounting.privacy_loss.pair_path.convex_minorant`: the grid, the mirrored points and the
    other direction's points are all values of one base profile) is convex, below the bounds and
    still above f. A finer (power-of-two) grid holds the coarser one's points, so its hull is lower:
    the PLD's figures fall as the step shrinks and converge to the hull of the bounds along the
    whole continuum, within the search's margin of f.

    What it replaces: the max over a fixed set of pairs (the nodes and the worst pair at every 256th
    grid point) raised by a smooth relative margin. That margin was the block's largest (3.6 % near
    the pure ε at 2^-13, where δ is tiny, against 0.7 % at 2^-11), its ramp between blocks was not
    convex, and the pay-down of the resulting negative masses (0.0044 at 2^-13) raised δ(ε) by 3.5 %
    from ε = 0 up: PB-DP relative, Laplace kernel, k = 50, ε(1e-6) 12.785 at 2^-11 and 12.93 at
    2^-13, 12.7761 at 2^-15, against a truth in [12.7475, 12.7482] (now 12.74846 … 12.74845). The
    coarse grids were not below the truth (their profile was above a dense search's supremum at
    every grid point, if only thanks to the fixed pairs: the search itself then missed a peak next to
    the path's end, see :func:`accounting.privacy_loss.pair_path.supremum`); every step over-stated,
    the finer ones more."""
    values = jnp.broadcast_to(jnp.asarray(values, jnp.float64), best.shape[:-1] + jnp.shape(values)[-1:])
    nvalues = jnp.broadcast_to(jnp.asarray(nvalues, jnp.float64), values.shape)
    div = path_divergence(HOOKS["hockey_stick"], mech, args, forward=is_symmetric(mech))
    # (the parameters are shaped batch + (1,): the nodes get that axis before the last)
    kink = mech.path_kink(values[..., None, :], nvalues[..., None, :]) if hasattr(mech, "path_kink") else None
    kink = None if kink is None else kink[..., 0]
    value, margin, _ = supremum(div, values, nvalues, best, arg, discrete=mech.discrete, kink=kink)
    if not pessimistic:
        return value
    bound = value + margin  # (a bound the numerics could not evaluate is 1, as in the envelope)
    return convex_minorant(jnp.broadcast_to(args, value.shape), jnp.where(jnp.isnan(bound), 1.0, bound))


def mech_batch(mech, eps):
    """Shape (..., 1) of the expanded parameters, padded to the grid's rank.

    Args:
      mech: the dpjax mechanism.
      eps: the loss grid.

    Returns:
      The batch shape, or ``(1,) * eps.ndim`` for an unbatched mechanism.
    """
    shp = mech.batch_shape
    return shp if len(shp) else (1,) * eps.ndim


# ----------------------------------------------------------------------------------
# plan: static sizes for the discrete source
# ----------------------------------------------------------------------------------
#: the largest integer support the discrete source sums exactly (memory ∝ support × pairs)
MAX_DISCRETE_SUPPORT = 1 << 24


def discrete_plan(mech, values, nvalues):
    """Concrete integer support (klo per pair, common count) for the discrete source.

    Args:
      mech: the discrete mechanism.
      values: the pairs' answers.
      nvalues: the neighbours' answers.

    Returns:
      ``{"klo": support start per pair (an array), "count": the common support length (an int)}``.

    Raises:
      ValueError: the support spans more than MAX_DISCRETE_SUPPORT integers.
    """
    vals = jnp.atleast_1d(values)
    nvals = jnp.atleast_1d(nvalues)
    lo = _bisect_output(mech, vals, nvals, OUTPUT_TAIL, False)
    hi = _bisect_output(mech, vals, nvals, OUTPUT_TAIL, True)
    lo, hi = np.floor(np.asarray(lo)), np.ceil(np.asarray(hi))
    # broadcast over the mechanism batch (params (..., 1), pairs on the last axis)
    klo = np.min(lo.reshape(-1, lo.shape[-1]), axis=0) if lo.ndim > 1 else lo
    khi = np.max(hi.reshape(-1, hi.shape[-1]), axis=0) if hi.ndim > 1 else hi
    count = int(np.max(khi - klo)) + 1
    if count > MAX_DISCRETE_SUPPORT:
        raise ValueError(
            f"sensitivity: the discrete output law spans {count:.3g} integers between neighbouring inputs "
            f"(more than {MAX_DISCRETE_SUPPORT:.3g} can be summed exactly); account a mechanism with a closed-form "
            f"privacy profile (a hockey_stick method) or a smaller sensitivity / scale"
        )
    return {"klo": jnp.asarray(klo), "count": count}
