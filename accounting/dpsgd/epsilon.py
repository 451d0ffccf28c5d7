"""ε and δ of T-fold DP-SGD on the exact PLD: one plan and FFT length per rung of noise multipliers,
a bounded, thread-safe cache of them, and the batched, differentiable queries."""

from __future__ import annotations

import functools
import math
import threading

import jax
import jax.numpy as jnp
import numpy as np

from accounting._numerics import as64, concrete, x64, x64_vjp
from accounting.privacy_loss.construction import make_plan
from accounting.privacy_loss.distribution import pld
from accounting.accountant import _bits, composition_grid, self_compose_by_count
from accounting.dpsgd.noise import _noise, _rdp_curve, step_mechanism
from accounting.rdp import RDP_ORDERS, rdp_to_delta, rdp_to_epsilon
from dpjax.validation import check_positive, check_probability, check_real, is_traced

__all__ = ["dpsgd_epsilon", "dpsgd_delta"]


def _plan_rung(kind, z: float, sampling_prob: float, step: float, adaptive: bool) -> float:
    """The noise multiplier whose plan serves z: the lowest quarter-octave rung of z's octave at or below z
    whose grid step is z's (the adaptive step only gets finer as z grows: a search over z meets one plan,
    hence one set of compiled programs, per octave and step instead of one per rung)."""
    k = math.floor(4.0 * math.log2(z) + 1e-9)
    low = 4 * math.floor(k / 4)
    while k > low and (not adaptive or _adaptive_step(kind, 2.0 ** ((k - 1) / 4.0), sampling_prob) == step):
        k -= 1
    return 2.0 ** (k / 4.0)


def _steps_rung(steps: int) -> int:
    """The power of two at or above ``steps``: the count range of one FFT length."""
    return 1 << (max(int(steps), 1) - 1).bit_length()


class _PldEvaluator:
    """ε (or δ) of T-fold DP-SGD for the noise multipliers served by one rung z_plan (:func:`_plan_rung`),
    one rate q and counts up to a power of two, on one plan and one FFT length.

    The plan (single-step loss grid) is built for z_plan, at or below each of them: a larger z has a
    narrower loss range, inside it (mass outside the grid would go to +∞: sound either way).
    ``step`` is the grid step: with ``adaptive``, the setting's own adaptive step (the rule of
    ``accounting.pld``, :func:`_adaptive_step`: settings are grouped by it), so the answer is
    ``accounting.pld``'s. The FFT length holds the widest composition window, that of z_plan at the largest count (an
    adaptive grid coarsened first where that window exceeds AUTO_WINDOW, as ``self_compose`` does).
    Which evaluator answers depends only on the setting (its rung), never on what was asked
    before, so an answer is reproducible; settings sharing grid shapes share compiled code.
    """

    def __init__(self, noise, z_plan, sampling_prob, max_steps, step, adaptive):
        self.noise, self.sampling_prob = noise, sampling_prob
        self.step = None if adaptive else step  # what pld is told: adaptive PLDs coarsen to fit a window
        self.z_plan, self.max_steps = z_plan, max_steps
        self.plan = make_plan(
            step_mechanism(z_plan, noise.cls), sampling_prob=sampling_prob, value_discretization_interval=step
        )
        # built as a batch of one, as a query of one setting is: both run one compiled build
        widest = pld(
            step_mechanism(as64(np.full((1,), z_plan)), noise.cls),
            sampling_prob=as64(sampling_prob),
            value_discretization_interval=self.step,
            plan=self.plan,
        )
        # an unsampled Gaussian stays analytic (μ√T): no grid, no FFT length
        self.sizes, self.grid_step = None, widest.step
        if max_steps > 1 and not widest.is_analytic:
            fit, self.sizes = composition_grid(widest, max_steps)
            self.grid_step = fit.step
        self.bits = _bits(max_steps)

    def composed(self, z, steps, sampling_prob):
        """The T-fold PLDs of a batch of noise multipliers ``z`` at one rate ``q`` (scalar)."""
        p = pld(
            step_mechanism(z, self.noise.cls),
            sampling_prob=sampling_prob,
            value_discretization_interval=self.step,
            plan=self.plan,
        )
        if self.max_steps == 1:
            return p
        return self_compose_by_count(p.coarsened(self.grid_step), steps, sizes=self.sizes, bits=self.bits)

    def query(self, kind_query, z, steps, arg, sampling_prob):
        c = self.composed(z, steps, sampling_prob)
        xp = jnp if is_traced((z, arg, sampling_prob)) else np  # concrete: read on the host
        arg = xp.asarray(arg, np.float64).reshape(-1)
        out = c.get_epsilon_for_delta(arg) if kind_query == "epsilon" else c.get_delta_for_epsilon(arg)
        return xp.diagonal(xp.asarray(out))


_EVALUATORS: dict = {}  # recent evaluators by (kind, sampling_prob, rung, steps rung, grid step); bounded
_EVALUATORS_LOCK = threading.Lock()  # the cache is shared by every thread's queries


@functools.lru_cache(maxsize=1024)
def _adaptive_step(kind, z, sampling_prob):
    """The adaptive loss-grid step of one DP-SGD step at (z, sampling_prob): ``accounting.pld``'s."""
    return make_plan(step_mechanism(z, kind.cls), sampling_prob=sampling_prob).step


def _evaluator(kind, z, sampling_prob, steps, step, adaptive):
    key = (
        kind,
        float(sampling_prob),
        _plan_rung(kind, float(z), float(sampling_prob), float(step), adaptive),
        _steps_rung(steps),
        float(step),
        adaptive,
    )
    with _EVALUATORS_LOCK:
        ev = _EVALUATORS.pop(key, None)
    if ev is None:
        ev = _PldEvaluator(kind, key[2], key[1], key[3], key[4], adaptive)
    with _EVALUATORS_LOCK:
        _EVALUATORS[key] = ev  # most recent last
        while len(_EVALUATORS) > 16:
            _EVALUATORS.pop(next(iter(_EVALUATORS)))
    return ev


def _chunk(size) -> int:
    """Members per compiled call: bounded memory (a few complex arrays of the FFT length each)."""
    return int(max(1, min(16, (1 << 21) // max(int(size or 1), 1))))


def _validate_setting(noise_multiplier, sampling_prob, steps):
    check_positive("noise_multiplier", noise_multiplier)
    check_probability("sampling_prob", sampling_prob)
    st = np.asarray(steps)
    if is_traced(steps) or not np.issubdtype(st.dtype, np.integer) and not np.all(np.round(st) == st):
        raise ValueError(f"steps must be concrete positive integers, got {steps!r}")
    if np.any(st < 1):
        raise ValueError(f"steps must be integers >= 1, got {steps!r}")


def _query(kind_query, noise_multiplier, sampling_prob, steps, arg, mechanism, value_discretization_interval):
    kind = _noise(mechanism)
    _validate_setting(noise_multiplier, sampling_prob, steps)
    if value_discretization_interval is not None:
        value_discretization_interval = float(
            check_positive("value_discretization_interval", value_discretization_interval)
        )
    traced = is_traced((noise_multiplier, sampling_prob, arg))
    xp = jnp if traced else np  # concrete settings are gathered and read on the host: nothing compiled
    z = xp.asarray(noise_multiplier, np.float64)
    sampling_prob = xp.asarray(sampling_prob, np.float64)
    a = xp.asarray(arg, np.float64)
    shape = np.broadcast_shapes(z.shape, sampling_prob.shape, np.shape(steps), a.shape)
    z, sampling_prob, a = (xp.broadcast_to(x, shape).reshape(-1) for x in (z, sampling_prob, a))
    st = np.broadcast_to(np.asarray(steps, np.int64), shape).reshape(-1)
    core = functools.partial(_query_flat, kind_query, kind, st, value_discretization_interval)
    if not traced:
        return as64(np.asarray(core(z, sampling_prob, a)).reshape(shape))
    # a custom VJP whose backward also runs in float64 (jax.grad outside our x64 context)
    return x64_vjp(core)(z, sampling_prob, a).reshape(shape)


def _query_flat(kind_query, kind, st, step, z, sampling_prob, a):
    if kind.kind == "discrete_gaussian":
        rdp = _rdp_curve(kind, z, sampling_prob) * jnp.asarray(st, jnp.float64)[:, None]
        fn = rdp_to_epsilon if kind_query == "epsilon" else rdp_to_delta
        return jax.vmap(lambda r, x: fn(RDP_ORDERS, r, x))(rdp, a)
    zc, sampling_probs = concrete(z), concrete(sampling_prob)
    if zc is None or sampling_probs is None:
        raise ValueError(
            "noise_multiplier: DP-SGD accounting plans its grids from concrete values; call it outside "
            "jit (jax.grad works)"
        )
    zc, sampling_probs = np.asarray(zc, float), np.asarray(sampling_probs, float)
    groups: dict = {}
    for i in range(zc.size):
        grid = _adaptive_step(kind, float(zc[i]), float(sampling_probs[i])) if step is None else step
        rung = _plan_rung(kind, float(zc[i]), float(sampling_probs[i]), grid, step is None)
        groups.setdefault((float(sampling_probs[i]), rung, _steps_rung(st[i]), grid), []).append(i)
    out = [None] * zc.size
    xp = jnp if is_traced((z, sampling_prob, a)) else np
    for (prob, _, _, grid), members in groups.items():
        idx = np.asarray(members)
        ev = _evaluator(kind, zc[idx[0]], prob, int(st[idx].max()), grid, step is None)
        # a traced rate (jax.grad in sampling_prob) goes one member at a time: the build takes one scalar rate
        n = (
            1
            if is_traced(sampling_prob)
            else min(_chunk(None if ev.sizes is None else ev.sizes[0]), 1 << (idx.size - 1).bit_length())
        )
        for s in range(0, idx.size, n):
            part = idx[s : s + n]
            pad = np.concatenate([part, np.repeat(part[-1:], n - part.size)])
            ix = xp.asarray(pad)
            res = ev.query(kind_query, z[ix], np.asarray(st[pad], np.float64), a[ix], sampling_prob[pad[0]])
            for j, i in enumerate(part):
                out[i] = res[j]
    return xp.stack(out)


@x64
def dpsgd_epsilon(noise_multiplier, sampling_prob, steps, delta, *, mechanism=None, value_discretization_interval=None):
    """ε at ``delta`` of ``steps`` DP-SGD steps (add/remove neighbours, both directions).

    Gaussian noise: the exact pessimistic PLD (never below the truth); Laplace: the
    randomized-response dominating pair; discrete Gaussian: an RDP bound (:mod:`accounting.dpsgd`).
    Concrete settings are answered on the host; under ``jax.grad`` the answer is differentiable in
    ``noise_multiplier`` and ``sampling_prob`` (not inside ``jit``: grid sizes are planned from
    concrete values).

    Args:
      noise_multiplier: z, the noise scale over the clipping norm (array).
      sampling_prob: the Poisson rate q (array).
      steps: the number of steps T (concrete positive integers, array).
      delta: δ in (0, 1) (array); all four broadcast together (a batch of settings).
      mechanism: the noise kernel class (default Gaussian).
      value_discretization_interval: ``None`` (default) the adaptive loss-grid step of
        :func:`accounting.pld`, a number the step.

    Returns:
      float64 ε of the broadcast shape.

    Raises:
      ValueError: a parameter out of range, ``steps`` not concrete integers, or traced settings
        inside ``jit``.

    References:
      Abadi et al., "Deep Learning with Differential Privacy", CCS 2016; Koskela, Jälkö, Honkela,
      "Computing Tight Differential Privacy Guarantees Using FFT", AISTATS 2020.
    """
    check_probability("delta", delta, high_open=True)
    return _query("epsilon", noise_multiplier, sampling_prob, steps, delta, mechanism, value_discretization_interval)


@x64
def dpsgd_delta(noise_multiplier, sampling_prob, steps, epsilon, *, mechanism=None, value_discretization_interval=None):
    """δ at ``epsilon`` of ``steps`` DP-SGD steps (:func:`dpsgd_epsilon`'s accounting).

    Args:
      noise_multiplier: z, the noise scale over the clipping norm (array).
      sampling_prob: the Poisson rate q (array).
      steps: the number of steps T (concrete positive integers, array).
      epsilon: ε (array); all four broadcast together.
      mechanism: the noise kernel class (default Gaussian).
      value_discretization_interval: ``None`` (default) the adaptive loss-grid step, a number the step.

    Returns:
      float64 δ of the broadcast shape (never below the truth).

    Raises:
      ValueError: a parameter out of range, ``steps`` not concrete integers, or traced settings
        inside ``jit``.
    """
    check_real("epsilon", epsilon)
    return _query("delta", noise_multiplier, sampling_prob, steps, epsilon, mechanism, value_discretization_interval)
