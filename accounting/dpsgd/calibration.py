"""DP-SGD calibration: the noise multiplier, the number of steps or the batch size that meets a
target ε, each solved with the Rényi bound as a feasible start and the exact PLD's answers."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from accounting._numerics import x64
from accounting._root import log_bisect
from accounting.dpsgd.epsilon import _query_flat, _validate_setting
from accounting.dpsgd.noise import _noise, _rdp_curve
from accounting.rdp import RDP_ORDERS, rdp_to_epsilon
from dpjax.validation import check_int, check_positive, check_probability

__all__ = ["calibrate_noise_multiplier", "calibrate_num_steps", "calibrate_batch_size"]


@functools.partial(jax.jit, static_argnums=0)
def _rdp_epsilon_jit(kind, z, sampling_prob, steps, delta):
    return rdp_to_epsilon(RDP_ORDERS, _rdp_curve(kind, z, sampling_prob) * steps, delta)


def _rdp_epsilon(kind, z, sampling_prob, steps, delta):
    return float(
        _rdp_epsilon_jit(
            kind,
            jnp.asarray(z, jnp.float64),
            jnp.asarray(sampling_prob, jnp.float64),
            jnp.asarray(steps, jnp.float64),
            jnp.asarray(delta, jnp.float64),
        )
    )


def _rdp_noise_multiplier(kind, target, delta, sampling_prob, steps):
    """z at which the RDP bound reaches the target: ε(z) ≤ target there (RDP ≥ the truth)."""
    lo, hi = 1e-2, 1.0
    while _rdp_epsilon(kind, hi, sampling_prob, steps, delta) > target:
        lo, hi = hi, hi * 2.0
        if hi > 1e6:
            raise ValueError(f"target_epsilon: {target} is out of reach (noise multiplier > 1e6)")
    while lo > 1e-4 and _rdp_epsilon(kind, lo, sampling_prob, steps, delta) <= target:
        hi, lo = lo, lo / 2.0
    return log_bisect(lambda z: _rdp_epsilon(kind, z, sampling_prob, steps, delta), lo, hi, target, rtol=1e-7)


def _eps(kind, z, sampling_prob, steps, delta, step):
    """Exact ε of settings (arrays broadcast), as :func:`dpsgd_epsilon` answers them."""
    z, sampling_prob, st, d = np.broadcast_arrays(
        np.asarray(z, float), np.asarray(sampling_prob, float), np.asarray(steps, np.int64), np.asarray(delta, float)
    )
    flat = _query_flat(
        "epsilon", kind, st.reshape(-1), step, *(jnp.asarray(x.reshape(-1)) for x in (z, sampling_prob, d))
    )
    return np.asarray(flat).reshape(z.shape)


def _solve_noise(kind, target, delta, sampling_prob, steps, rtol, step):
    """Safeguarded secant on log ε vs log z with exact PLD evaluations (each on its rung's plan)."""
    z_hi = _rdp_noise_multiplier(kind, target, delta, sampling_prob, steps)  # feasible: RDP is an upper bound
    if kind.kind == "discrete_gaussian":
        return z_hi

    def f(zv):
        return float(_eps(kind, zv, sampling_prob, steps, delta, step))

    lo, e_lo = None, None  # infeasible side (ε > target)
    hi, eh = z_hi, f(z_hi)
    while eh > target:  # not expected (RDP is never below the PLD); a wider start if it happens
        lo, e_lo = hi, eh
        hi = hi * 1.25
        eh = f(hi)
    z = hi * 0.93 if lo is None else math.sqrt(lo * hi)  # the PLD's noise is typically 5-10 % below RDP's
    for _ in range(60):
        e = f(z)
        if e <= target:
            if z < hi:
                hi, eh = z, e
        elif lo is None or z > lo:
            lo, e_lo = z, e
        if target * (1.0 - rtol) <= eh <= target:
            return hi
        if lo is not None and hi / lo - 1.0 < 1e-12:
            # ε(z) jumps across the window (pure-DP atoms rounded up to the loss grid): the
            # smallest feasible z found is the answer
            return hi
        aim = math.log(target * (1.0 - rtol / 4.0))  # a little inside the feasible side
        if lo is None:  # no infeasible point yet: step down, ε ∝ z^(-s) with s ≈ 1.25 as a first slope
            z = hi * math.exp((math.log(eh) - aim) / 1.25)
            continue
        # secant in log-log between the bracket ends
        x0, y0, x1, y1 = math.log(lo), math.log(e_lo), math.log(hi), math.log(eh)
        x = x1 + (aim - y1) * (x1 - x0) / (y1 - y0) if y1 != y0 else 0.5 * (x0 + x1)
        if not (x0 < x < x1):
            x = 0.5 * (x0 + x1)
        z = math.exp(x)
    raise RuntimeError("calibrate_noise_multiplier did not converge")  # pragma: no cover


def _scalar_loop(fn, *arrays):
    shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    flat = [np.broadcast_to(np.asarray(a), shape).reshape(-1) for a in arrays]
    out = np.asarray([fn(*(x[i] for x in flat)) for i in range(int(np.prod(shape, dtype=int)))])
    return out.reshape(shape) if shape else out.reshape(())[()]


@x64
def calibrate_noise_multiplier(
    target_epsilon, delta, sampling_prob, steps, *, mechanism=None, rtol=1e-3, value_discretization_interval=None
):
    """The noise multiplier z whose ε after ``steps`` steps at rate ``sampling_prob`` lies in
    [target·(1 − rtol), target] (:func:`dpsgd_epsilon`, from above: never over the target).

    A few exact PLD evaluations: the Rényi bound gives a feasible z (RDP is never below the
    PLD), then a safeguarded secant on log ε vs log z, each evaluation the one
    :func:`dpsgd_epsilon` answers. Arrays broadcast (one solve per setting). For the discrete
    Gaussian the Rényi bound is the accountant, solved to 1e-7. Where ε(z) jumps across the
    window (Laplace noise: its randomized-response atoms are rounded up to the loss grid, so
    ε(z) is a fine staircase), the smallest feasible z is returned, ε a little below the window.

    Args:
      target_epsilon: the ε to reach (positive).
      delta: δ, in [0, 1).
      sampling_prob: the Poisson sampling probability per step.
      steps: the number of steps.
      mechanism: the noise kernel class (None: the Gaussian).
      rtol: the relative width of the target window, in [0, 1).
      value_discretization_interval: the loss-grid step, or None (adaptive).

    Returns:
      The noise multiplier, a float (an array for array arguments).

    Raises:
      ValueError: an argument is out of range, ``mechanism`` is not a supported kernel, or the target is out of
        reach (noise multiplier above 1e6).

    References:
      Abadi et al., "Deep Learning with Differential Privacy", CCS 2016; Koskela, Jälkö, Honkela,
      "Computing Tight Differential Privacy Guarantees Using FFT", AISTATS 2020.
    """
    kind = _noise(mechanism)
    check_positive("target_epsilon", target_epsilon)
    check_probability("delta", delta, high_open=True)
    _validate_setting(1.0, sampling_prob, steps)
    check_probability("rtol", rtol, high_open=True)

    def one(t, d, sampling_prob, s):
        return _solve_noise(
            kind, float(t), float(d), float(sampling_prob), int(s), float(rtol), value_discretization_interval
        )

    return _scalar_loop(one, target_epsilon, delta, sampling_prob, steps)


def _largest_int(feasible_batch, lo, hi, width=16):
    """Largest integer n in [lo, hi) with feasible(n) (monotone: true then false), given
    feasible(lo); ``feasible_batch`` answers ``width`` candidates per round."""
    while hi - lo > 1:
        cand = np.unique(np.round(np.geomspace(lo, hi, width + 2)[1:-1]).astype(np.int64))
        cand = cand[(cand > lo) & (cand < hi)]
        if cand.size == 0:
            cand = np.asarray([(lo + hi) // 2])
        cand = np.concatenate([cand, np.repeat(cand[-1:], width - cand.size)])  # one shape: one compile
        ok = np.asarray(feasible_batch(cand))
        good, bad = cand[ok], cand[~ok]
        lo = int(good.max()) if good.size else lo
        hi = int(bad.min()) if bad.size else hi
    return lo


def _largest_feasible(feasible, start, limit):
    """Largest integer in [1, limit] with feasible (monotone), from a feasible ``start`` (0 if 1 is not)."""
    if not feasible(np.asarray([start]))[0]:
        if start == 1:
            return 0
        return _largest_int(feasible, 0, start) if feasible(np.asarray([1]))[0] else 0
    lo, hi = start, min(2 * start, limit + 1)
    while hi <= limit and feasible(np.asarray([hi]))[0]:
        lo, hi = hi, min(2 * hi, limit + 1)
    return _largest_int(feasible, lo, hi)


@x64
def calibrate_num_steps(
    target_epsilon,
    delta,
    noise_multiplier,
    sampling_prob,
    *,
    mechanism=None,
    max_steps=10**7,
    value_discretization_interval=None,
):
    """The largest number of steps whose ε at ``delta`` stays ≤ ``target_epsilon`` (0 if even one
    step exceeds it), as :func:`dpsgd_epsilon` answers. The search starts at the Rényi bound's
    count (feasible: RDP is never below the PLD) and evaluates 16 candidate counts per round on
    one compiled program (the count is a traced argument). Arrays broadcast.

    Args:
      target_epsilon: the ε not to exceed (positive).
      delta: δ, in [0, 1).
      noise_multiplier: the noise multiplier.
      sampling_prob: the Poisson sampling probability per step.
      mechanism: the noise kernel class (None: the Gaussian).
      max_steps: the largest count searched.
      value_discretization_interval: the loss-grid step, or None (adaptive).

    Returns:
      The number of steps, an int (an array for array arguments).

    Raises:
      ValueError: an argument is out of range or ``mechanism`` is not a supported kernel.

    References:
      Abadi et al., "Deep Learning with Differential Privacy", CCS 2016; Koskela, Jälkö, Honkela,
      "Computing Tight Differential Privacy Guarantees Using FFT", AISTATS 2020.
    """
    kind = _noise(mechanism)
    check_positive("target_epsilon", target_epsilon)
    check_probability("delta", delta, high_open=True)
    _validate_setting(noise_multiplier, sampling_prob, 1)
    max_steps = check_int("max_steps", max_steps, minimum=1)

    def one(t, d, z, sampling_prob):
        t, d, z, sampling_prob = float(t), float(d), float(z), float(sampling_prob)
        rdp = _rdp_curve(kind, jnp.asarray(z), jnp.asarray(sampling_prob))

        def rdp_ok(c):
            return np.asarray(rdp_to_epsilon(RDP_ORDERS, rdp * jnp.asarray(c, jnp.float64)[:, None], d)) <= t

        start = max(1, _largest_int(rdp_ok, 1, max_steps + 1)) if rdp_ok(np.asarray([1]))[0] else 1
        if kind.kind == "discrete_gaussian":
            return start if rdp_ok(np.asarray([start]))[0] else 0
        return _largest_feasible(
            lambda c: _eps(kind, z, sampling_prob, c, d, value_discretization_interval) <= t, start, max_steps
        )

    return _scalar_loop(one, target_epsilon, delta, noise_multiplier, sampling_prob)


@x64
def calibrate_batch_size(
    target_epsilon, delta, noise_multiplier, steps, num_examples, *, mechanism=None, value_discretization_interval=None
):
    """The largest expected batch size B (sampling_prob = B / num_examples) whose ε after ``steps``
    steps stays ≤ ``target_epsilon`` (0 if even B = 1 exceeds it), as :func:`dpsgd_epsilon`
    answers; the search starts at the Rényi bound's B (feasible). Arrays broadcast.

    Args:
      target_epsilon: the ε not to exceed (positive).
      delta: δ, in [0, 1).
      noise_multiplier: the noise multiplier.
      steps: the number of steps.
      num_examples: the dataset size.
      mechanism: the noise kernel class (None: the Gaussian).
      value_discretization_interval: the loss-grid step, or None (adaptive).

    Returns:
      The expected batch size, an int (an array for array arguments).

    Raises:
      ValueError: an argument is out of range or ``mechanism`` is not a supported kernel.

    References:
      Abadi et al., "Deep Learning with Differential Privacy", CCS 2016; Koskela, Jälkö, Honkela,
      "Computing Tight Differential Privacy Guarantees Using FFT", AISTATS 2020.
    """
    kind = _noise(mechanism)
    check_positive("target_epsilon", target_epsilon)
    check_probability("delta", delta, high_open=True)
    _validate_setting(noise_multiplier, 1.0, steps)

    def one(t, d, z, s, n):
        t, d, z, s = float(t), float(d), float(z), int(s)
        n = check_int("num_examples", int(n), minimum=1)

        def rdp_ok(b):
            return np.asarray([_rdp_epsilon(kind, z, bb / n, s, d) <= t for bb in np.atleast_1d(b)])

        start = max(1, _largest_int(rdp_ok, 1, n + 1)) if rdp_ok(np.asarray([1]))[0] else 1
        if kind.kind == "discrete_gaussian":
            return start if rdp_ok(np.asarray([start]))[0] else 0
        return _largest_feasible(
            lambda b: _eps(kind, z, np.asarray(b) / n, s, d, value_discretization_interval) <= t, start, n
        )

    return _scalar_loop(one, target_epsilon, delta, noise_multiplier, steps, num_examples)
