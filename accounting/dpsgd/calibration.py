"""DP-SGD calibration: the noise multiplier, the number of steps or the batch size that meets a
target ε, each solved with the Rényi bound as a feasible start and the exact PLD's answers."""

from __future__ import annotations

import functools
import math
import threading

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


#: lattice of noise multipliers the search interpolates on: z_k = 2^(k / _PER_OCTAVE), k in [_K_MIN, _K_MAX]
_PER_OCTAVE, _K_MIN, _K_MAX = 8, -80, 160

_POINTS: dict = {}  # remembered evaluations by event (recent events last): exact ε by z, the Rényi ε by k
_POINTS_LOCK = threading.Lock()  # shared by every thread's calibrations
_MAX_EVENTS, _MAX_POINTS = 32, 512


def _memo(key, fn):
    """``fn`` with its values remembered under the event ``key`` (a small bounded, thread-safe cache):
    the values are deterministic (each the one its arguments give), so remembering them only skips the
    work of computing them again."""
    with _POINTS_LOCK:
        table = _POINTS.pop(key, None)
        _POINTS[key] = table = {} if table is None else table  # most recent last
        while len(_POINTS) > _MAX_EVENTS:
            _POINTS.pop(next(iter(_POINTS)))

    def remembered(x):
        with _POINTS_LOCK:
            if x in table:
                return table[x]
        value = fn(x)
        with _POINTS_LOCK:
            table[x] = value
            while len(table) > _MAX_POINTS:
                table.pop(next(iter(table)))
        return value

    return remembered


def _node(k):
    return 2.0 ** (k / _PER_OCTAVE)


def _rdp_cell(kind, target, delta, sampling_prob, steps):
    """The smallest lattice index k whose Rényi ε is ≤ ``target`` (the Rényi bound is decreasing in z):
    octave strides from z = 1, then bisection on k."""
    rdp = _memo(
        ("rdp", kind, sampling_prob, steps, delta), lambda k: _rdp_epsilon(kind, _node(k), sampling_prob, steps, delta)
    )
    if rdp(_K_MAX) > target:
        raise ValueError(f"target_epsilon: {target} is out of reach (noise multiplier > 2^20)")
    lo, hi = _K_MIN - 1, _K_MAX  # rdp(hi) <= target; rdp(lo) > target (or lo below the lattice)
    k = 0
    while hi - lo > 1:
        if rdp(k) <= target:
            hi = k
        else:
            lo = k
        k = hi - _PER_OCTAVE if k == hi else lo + _PER_OCTAVE  # an octave on from the end just moved
        if not lo < k < hi:
            k = (lo + hi) // 2
    return hi


def _interpolated_root(xs, ys, aim):
    """x in [xs[0], xs[-1]] where the polynomial through the (xs, ys) meets ``aim`` (bisection), or None where it
    does not cross there."""
    coef = np.polyfit(xs, ys, len(xs) - 1)
    a, b = xs[0], xs[-1]
    if not np.polyval(coef, a) > aim >= np.polyval(coef, b):
        return None
    for _ in range(60):
        m = 0.5 * (a + b)
        a, b = (m, b) if np.polyval(coef, m) > aim else (a, m)
    return 0.5 * (a + b)


def _solve_noise(kind, target, delta, sampling_prob, steps, rtol, step):
    """z with exact ε in [target·(1 − rtol), target]: the lattice cell z_k, z_{k+1} (:func:`_node`) that
    brackets the target, the quadratic in log ε vs log z through its ends and midpoint, then (rarely) a
    safeguarded log-log secant. The path depends only on the arguments and exact ε values, so the same
    arguments give the same z whatever was asked before; the remembered evaluations only skip work."""
    if kind.kind == "discrete_gaussian":
        return _rdp_noise_multiplier(kind, target, delta, sampling_prob, steps)
    f = _memo(
        ("pld", kind, sampling_prob, steps, delta, step),
        lambda zv: float(_eps(kind, zv, sampling_prob, steps, delta, step)),
    )
    floor, aim = target * (1.0 - rtol), target * (1.0 - rtol / 2.0)  # aim: the window's middle
    # the first cell: next to the node below the Rényi bound's cell (its ε is never below the PLD's, and its
    # z is typically 5-10 % above), on the side that node's exact ε points to
    k = min(max(_rdp_cell(kind, target, delta, sampling_prob, steps) - 1, _K_MIN), _K_MAX - 1)
    k = max(k - 1, _K_MIN) if f(_node(k)) <= aim else k
    last = 0  # the previous move: cells are skipped by the chord's slope until the walk turns back
    for _ in range(_K_MAX - _K_MIN):
        e0, e1 = f(_node(k)), f(_node(k + 1))
        if e0 > aim >= e1 or (e0 <= aim and k == _K_MIN) or (e1 > aim and k + 1 == _K_MAX):
            break
        move = -1 if e0 <= aim else 1
        if last != -move and 0.0 < e1 < e0 < math.inf:  # where log ε's chord through the cell meets the aim
            cells = math.floor((math.log(e0) - math.log(aim)) / (math.log(e0) - math.log(e1)))
            move = max(-16, min(-1, cells)) if move < 0 else min(16, max(1, cells))
        k, last = min(max(k + move, _K_MIN), _K_MAX - 1), move
    for z, e in ((_node(k), e0), (_node(k + 1), e1)):
        if floor <= e <= target:
            return z
    if e1 > target or e0 <= target:  # the lattice's ends: the answer lies beyond them
        raise ValueError(f"target_epsilon: {target} is out of reach (noise multiplier outside [2^-10, 2^20])")
    bracket, x = (_node(k), e0, _node(k + 1), e1), None
    if 0.0 < e1 and math.isfinite(e0):  # the cell's midpoint: a third node inside it
        em = f(_node(k + 0.5))
        if floor <= em <= target:
            return _node(k + 0.5)
        es = np.asarray([e0, em, e1])
        if np.all((es > 0.0) & np.isfinite(es)):
            x = _interpolated_root(
                np.asarray([k, k + 0.5, k + 1]) * (math.log(2.0) / _PER_OCTAVE), np.log(es), math.log(aim)
            )
        bracket = (_node(k + 0.5), em) + bracket[2:] if em > target else bracket[:2] + (_node(k + 0.5), em)
    return _secant(f, target, floor, aim, bracket, x)


def _secant(f, target, floor, aim, bracket, x):
    """The safeguarded log-log secant in ``bracket`` = (lo, ε(lo) > target, hi, ε(hi) ≤ target), its first point
    at log z = ``x`` if given: the first z whose ε lands in [floor, target]."""
    lo, e_lo, hi, eh = bracket
    for _ in range(60):
        if x is None:
            x0, y0, x1, y1 = math.log(lo), math.log(e_lo), math.log(hi), math.log(max(eh, 1e-300))
            x = x1 + (math.log(aim) - y1) * (x1 - x0) / (y1 - y0) if math.isfinite(y0) and y1 != y0 else None
            if x is None or not x0 < x < x1:
                x = 0.5 * (x0 + x1)
        z = math.exp(x)
        e = f(z)
        if floor <= e <= target:
            return z
        if e <= target:
            hi, eh = z, e
        else:
            lo, e_lo = z, e
        if hi / lo - 1.0 < 1e-12:
            # ε(z) jumps across the window (pure-DP atoms rounded up to the loss grid): the
            # smallest feasible z found is the answer
            return hi
        x = None
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

    A few exact PLD evaluations, each the one :func:`dpsgd_epsilon` answers: the lattice cell
    [z_k, z_{k+1}], z_k = 2^(k/8), whose ends bracket the target (the Rényi bound names the first
    node), the quadratic in log ε vs log z through the cell's ends and midpoint aimed at the
    window's middle, and a safeguarded log-log secant should that miss. The exact values are
    remembered per event (a small bounded cache shared by threads), so a new target whose z lies in
    a cell already met costs one evaluation; the search's path depends only on the arguments and the
    exact values, so the same arguments give the same z whatever was asked before. Arrays broadcast
    (one solve per setting). For the discrete Gaussian the Rényi bound is the accountant, solved to
    1e-7. Where ε(z) jumps across the window (Laplace noise: its randomized-response atoms are
    rounded up to the loss grid, so ε(z) is a fine staircase), the smallest feasible z found is
    returned, ε a little below the window.

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
        reach (a noise multiplier above about 1e6, or below 2^-10 where the exact PLD is searched).

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
