"""Privacy of DP-SGD: ε of Poisson-subsampled noisy-gradient training, calibration, a per-step odometer.

One DP-SGD step clips every example's gradient to norm C, sums the examples of a
Poisson batch (each example in with probability q, independently) and adds noise of
scale C·z (z = ``noise_multiplier``). Adding or removing one example moves the clipped
sum by at most C, so the step is the mechanism ``step_mechanism(z)`` run on a query of
sensitivity 1 with Poisson rate q (the scale cancels), and T steps are its T-fold
composition (add/remove neighbours; both directions kept, the max reported).

* **Gaussian** noise (default): the Gaussian mechanism in any dimension has the privacy
  of the one-dimensional pair N(0, z²) vs N(1, z²) (rotation invariance), so
  ``accounting.pld(dpjax.Gaussian(z), sampling_prob=q)`` composed T times is the exact,
  pessimistic PLD of DP-SGD.
* **Laplace** noise with L1 clipping: each step is pure (1/z)-DP in any dimension, and every
  pure ε₀-DP pair is dominated by binary randomized response at ε₀ (Kairouz, Oh, Viswanath
  2015, Thm. 2.1 / the optimal composition theorem), so the PLD of
  ``dpjax.RandomizedResponse(1/z, 2)`` subsampled and composed is a sound bound. It is not
  tight: the one-dimensional Laplace pair, a lower bound on the truth, is 8-20 % below it
  at q = 0.01, T = 1000 (docs/dpsgd.md).
* **Discrete Gaussian** on a grid: the exact worst case of a d-dimensional discrete
  Gaussian over an L2 ball has no known closed form, so this is a Rényi-DP bound:
  D_α ≤ α‖v‖²/(2σ²) for integer shifts v (Canonne, Kamath, Steinke 2020: the theta-function
  sum Σ_y e^{−(y−(1−α)v)²/2σ²} is largest at an integer centre, coordinate by coordinate),
  Poisson subsampling by the general bound of Zhu & Wang (ICML 2019, Thm. 5) at integer
  orders, then Proposition 12 of Canonne et al. (:func:`accounting.rdp_to_epsilon`).

:func:`dpsgd_epsilon` / :func:`dpsgd_delta` are batched over settings (arrays of z, q, T
broadcast together) and differentiable in z and q (``jax.grad``, outside ``jit``). The
calibrators solve for one parameter with a handful of PLD evaluations on one compiled
program (a plan built once for the bracket). :class:`DpsgdAccountant` is the odometer a
training loop updates per step (an :class:`accounting.Accountant` underneath).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading

import jax
import jax.numpy as jnp
import numpy as np

from accounting._numerics import concrete, x64, x64_vjp
from accounting._pld import DEFAULT_DISCRETIZATION, make_plan, pld
from accounting.accountant import Accountant, _bits, composition_sizes, self_compose_by_count
from accounting.rdp import rdp_to_delta, rdp_to_epsilon
from dpjax.kernels import AdditiveMechanism, by_name
from dpjax.mechanism import overrides
from dpjax.randomized_response import RandomizedResponse
from dpjax.validation import check_int, check_positive, check_probability, check_real, is_traced

__all__ = [
    "noise_kind",
    "noise_mechanism",
    "step_mechanism",
    "dpsgd_epsilon",
    "dpsgd_delta",
    "calibrate_noise_multiplier",
    "calibrate_batch_size",
    "calibrate_num_steps",
    "DpsgdAccountant",
    "subsampled_rdp",
    "RDP_ORDERS",
]

#: the default noise: the Gaussian kernel
_GAUSSIAN = by_name("gaussian")
#: integer Rényi orders of the discrete-Gaussian bound (Zhu & Wang's Thm. 5 needs integers)
RDP_ORDERS = np.concatenate([np.arange(2, 65), np.arange(72, 257, 8), [320, 384, 512]]).astype(float)

def noise_kind(mechanism) -> str:
    """How a DP-SGD step with noise from the kernel class ``mechanism`` (default: the Gaussian) is
    accounted, from what the kernel declares (never its class):

    * ``"gaussian"`` — a continuous kernel whose pair loss is exactly Gaussian (``gaussian_pld_mu``):
      rotation invariant, L2 clipping, the exact subsampled PLD;
    * ``"laplace"`` — a continuous pure-DP kernel (``pure_epsilon``, linear in the shift: the log
      density is (1/scale)-Lipschitz, so d coordinates are (‖v‖₁/scale)-DP): L1 clipping, the
      randomized-response dominating pair;
    * ``"discrete_gaussian"`` — a discrete kernel with a Rényi bound at integer shifts in any
      dimension (``renyi_divergence_bound``): L2 clipping on a grid, accounted by RDP.
    """
    if mechanism is None:
        return "gaussian"
    if isinstance(mechanism, type) and issubclass(mechanism, AdditiveMechanism):
        if mechanism.discrete and overrides(mechanism, "renyi_divergence_bound"):
            return "discrete_gaussian"
        if not mechanism.discrete and overrides(mechanism, "gaussian_pld_mu"):
            return "gaussian"
        if not mechanism.discrete and overrides(mechanism, "pure_epsilon"):
            return "laplace"
    raise ValueError(
        "mechanism must be None or an additive kernel class whose DP-SGD accounting is known (the class: its scale "
        "is clip·noise_multiplier): a Gaussian-loss kernel (gaussian_pld_mu, e.g. dpjax.Gaussian), a pure-DP "
        "continuous kernel (pure_epsilon, e.g. dpjax.Laplace) or a discrete kernel with a Rényi bound "
        f"(renyi_divergence_bound, e.g. dpjax.DiscreteGaussian), got {mechanism!r}")


@dataclasses.dataclass(frozen=True)
class _Noise:
    """A DP-SGD noise family: how it is accounted (:func:`noise_kind`) and its kernel class."""

    kind: str
    cls: type


def _noise(mechanism) -> _Noise:
    return _Noise(noise_kind(mechanism), _GAUSSIAN if mechanism is None else mechanism)


def noise_mechanism(mechanism, scale):
    """The kernel ``mechanism`` (a class; default the Gaussian) at ``scale``."""
    cls = _GAUSSIAN if mechanism is None else mechanism
    return cls(**{cls.scale_name: scale})


def step_mechanism(noise_multiplier, mechanism=None):
    """The mechanism whose PLD at sensitivity 1 dominates one (unsampled) DP-SGD step: the kernel
    itself at scale z for a Gaussian-loss kernel (exact), ``RandomizedResponse(ε₀, 2)`` with ε₀
    the kernel's pure ε at scale z for a pure-DP kernel (dominating pair). A discrete Gaussian has
    none (it is accounted by RDP) and raises."""
    kind = noise_kind(mechanism)
    if kind == "gaussian":
        return noise_mechanism(mechanism, noise_multiplier)
    if kind == "laplace":
        eps0 = noise_mechanism(mechanism, jnp.asarray(noise_multiplier)).pure_epsilon(1.0)
        return RandomizedResponse(epsilon=eps0, num_categories=2)
    raise ValueError("mechanism: the discrete Gaussian is accounted by Rényi DP, it has no PLD step mechanism")


# ----------------------------------------------------------------------------------
# Rényi bounds: the discrete Gaussian's accountant, and brackets for the calibrators
# ----------------------------------------------------------------------------------
_gammaln = np.vectorize(math.lgamma)
_A = RDP_ORDERS[:, None]
_K = np.arange(int(RDP_ORDERS.max()) + 1, dtype=float)[None, :]
with np.errstate(invalid="ignore"):
    #: log C(α, k) for every order α (rows) and k = 0..max α (columns); -inf where k > α
    _LOG_BINOM = np.where(_K <= _A, _gammaln(_A + 1.0) - _gammaln(_K + 1.0) - _gammaln(np.maximum(_A - _K, 0) + 1.0),
                          -np.inf)


def _log1m(q):
    return jnp.log1p(-jnp.minimum(q, 1.0 - 1e-16))


def subsampled_rdp(base_rdp, sampling_prob):
    """Zhu & Wang (ICML 2019) Thm. 5: an RDP bound at the integer :data:`RDP_ORDERS` of a mechanism
    with RDP ``base_rdp(l)`` run on a Poisson sample of rate q; min'd with the base RDP.

    ε_q(α) ≤ log[(1−q)^{α−1}(αq − q + 1) + C(α,2) q² (1−q)^{α−2} e^{ε(2)}
    + 3 Σ_{l=3}^{α} C(α,l) (1−q)^{α−l} q^l e^{(l−1)ε(l)}] / (α−1).
    ``base_rdp`` maps orders (an array broadcasting against ``sampling_prob``'s shape + (1, 1)) to RDP values.
    """
    q = jnp.asarray(sampling_prob, jnp.float64)[..., None, None]
    a, k = jnp.asarray(_A), jnp.asarray(_K)
    ksafe = jnp.maximum(k, 2.0)
    terms = (jnp.asarray(_LOG_BINOM) + (a - k) * _log1m(q) + k * jnp.log(q) + (ksafe - 1.0) * base_rdp(ksafe)
             + jnp.where(k >= 3, math.log(3.0), 0.0))
    terms = jnp.where(k >= 2, terms, -jnp.inf)
    first = (a - 1.0) * _log1m(q) + jnp.log1p((a - 1.0) * q)
    total = jax.nn.logsumexp(jnp.concatenate([first, terms], -1), axis=-1)
    base = base_rdp(a)[..., 0]
    return jnp.where(q[..., 0] >= 1.0, base, jnp.minimum(total / (a[..., 0] - 1.0), base))


def _renyi_bound(noise, z):
    """The kernel's own Rényi bound at scale z for a unit shift (the discrete Gaussian: α/(2z²))."""
    mech = noise_mechanism(noise.cls, jnp.asarray(z, jnp.float64)[..., None, None])
    return lambda a: mech.renyi_divergence_bound(a, 0.0, 1.0)


def _randomized_response_rdp(noise, z):
    """D_α of binary randomized response at ε₀ (the kernel's pure ε at scale z for a unit shift: 1/z
    for the Laplace kernel), the pair that accounts a pure-DP step:
    log(p^α (1−p)^{1−α} + (1−p)^α p^{1−α}) / (α − 1), p = e^{ε₀}/(1 + e^{ε₀})."""
    e0 = noise_mechanism(noise.cls, jnp.asarray(z, jnp.float64)[..., None, None]).pure_epsilon(1.0)
    lp, lq = jax.nn.log_sigmoid(e0), jax.nn.log_sigmoid(-e0)
    return lambda a: jnp.logaddexp(a * lp + (1 - a) * lq, a * lq + (1 - a) * lp) / (a - 1)


def _sampled_gaussian_rdp(z, q):
    """RDP of the Poisson-subsampled Gaussian at the integer :data:`RDP_ORDERS`, exactly (Mironov,
    Talwar, Zhang 2019, Sec. 3.3: A_α = Σ_k C(α,k)(1−q)^{α−k} q^k e^{(k²−k)/2z²}; the add direction
    is smaller, their Thm. 5)."""
    z = jnp.asarray(z, jnp.float64)[..., None, None]
    q = jnp.asarray(q, jnp.float64)[..., None, None]
    a, k = jnp.asarray(_A), jnp.asarray(_K)
    t = jnp.asarray(_LOG_BINOM) + (a - k) * _log1m(q) + k * jnp.log(q) + (k * k - k) / (2.0 * z * z)
    t = jnp.where((q >= 1.0) & (k < a), -jnp.inf, t)
    return jax.nn.logsumexp(t, axis=-1) / (a[..., 0] - 1.0)


@functools.partial(jax.jit, static_argnums=0)
def _rdp_curve(noise, z, q):
    """Per-step RDP bound at :data:`RDP_ORDERS` (the DG's accountant; a bracket for the others)."""
    if noise.kind == "gaussian":
        return _sampled_gaussian_rdp(z, q)
    base = _randomized_response_rdp(noise, z) if noise.kind == "laplace" else _renyi_bound(noise, z)
    return subsampled_rdp(base, q)


# ----------------------------------------------------------------------------------
# exact PLD evaluation on a fixed plan
# ----------------------------------------------------------------------------------
def _ladder_floor(z: float) -> float:
    """The quarter-octave rung at or below z: the plan of every z on that rung."""
    return 2.0 ** (math.floor(4.0 * math.log2(z) + 1e-9) / 4.0)


def _steps_rung(steps: int) -> int:
    """The power of two at or above ``steps``: the count range of one FFT length."""
    return 1 << (max(int(steps), 1) - 1).bit_length()


class _PldEvaluator:
    """ε (or δ) of T-fold DP-SGD for the noise multipliers of one rung [z_plan, 2^{1/4} z_plan),
    one rate q and counts up to a power of two, on one plan and one FFT length.

    The plan (single-step loss grid) is built for the rung's bottom z_plan: a larger z has a
    narrower loss range, inside it (mass outside the grid would go to +∞: sound either way).
    The FFT length holds the widest composition window, that of z_plan at the largest count.
    Which evaluator answers depends only on the setting (its rung), never on what was asked
    before, so an answer is reproducible; settings sharing grid shapes share compiled code.
    """

    def __init__(self, noise, z_plan, q, max_steps, step):
        self.noise, self.q, self.step, self.z_plan, self.max_steps = noise, q, step, z_plan, max_steps
        mech = step_mechanism(z_plan, noise.cls)
        self.plan = make_plan(mech, sampling_prob=q, value_discretization_interval=step)
        widest = pld(mech, sampling_prob=q, plan=self.plan)
        # an unsampled Gaussian stays analytic (μ√T): no grid, no FFT length
        self.sizes = composition_sizes(widest, max_steps) if max_steps > 1 and not widest.is_analytic else None
        self.bits = _bits(max_steps)

    def composed(self, z, steps, q):
        """The T-fold PLDs of a batch of noise multipliers ``z`` at one rate ``q`` (scalar)."""
        p = pld(step_mechanism(z, self.noise.cls), sampling_prob=q, plan=self.plan)
        if self.max_steps == 1:
            return p
        return self_compose_by_count(p, steps, sizes=self.sizes, bits=self.bits)

    def query(self, kind_query, z, steps, arg, q):
        c = self.composed(z, steps, q)
        arg = jnp.asarray(arg, jnp.float64).reshape(-1)
        out = c.get_epsilon_for_delta(arg) if kind_query == "epsilon" else c.get_delta_for_epsilon(arg)
        return jnp.diagonal(out)


_EVALUATORS: dict = {}  # recent evaluators by (kind, q, rung, steps rung, grid step); bounded
_EVALUATORS_LOCK = threading.Lock()  # the cache is shared by every thread's queries


def _evaluator(kind, z, q, steps, step):
    key = (kind, float(q), _ladder_floor(float(z)), _steps_rung(steps), float(step))
    with _EVALUATORS_LOCK:
        ev = _EVALUATORS.pop(key, None)
    if ev is None:
        ev = _PldEvaluator(kind, key[2], key[1], key[3], key[4])
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
    check_positive("value_discretization_interval", value_discretization_interval)
    z = jnp.asarray(noise_multiplier, jnp.float64)
    q = jnp.asarray(sampling_prob, jnp.float64)
    a = jnp.asarray(arg, jnp.float64)
    shape = jnp.broadcast_shapes(z.shape, q.shape, np.shape(steps), a.shape)
    z, q, a = (jnp.broadcast_to(x, shape).reshape(-1) for x in (z, q, a))
    st = np.broadcast_to(np.asarray(steps, np.int64), shape).reshape(-1)
    # a custom VJP whose backward also runs in float64 (jax.grad outside our x64 context)
    core = functools.partial(_query_flat, kind_query, kind, st, float(value_discretization_interval))
    return x64_vjp(core)(z, q, a).reshape(shape)


def _query_flat(kind_query, kind, st, step, z, q, a):
    if kind.kind == "discrete_gaussian":
        rdp = _rdp_curve(kind, z, q) * jnp.asarray(st, jnp.float64)[:, None]
        fn = rdp_to_epsilon if kind_query == "epsilon" else rdp_to_delta
        return jax.vmap(lambda r, x: fn(RDP_ORDERS, r, x))(rdp, a)
    zc, qc = concrete(z), concrete(q)
    if zc is None or qc is None:
        raise ValueError("noise_multiplier: DP-SGD accounting plans its grids from concrete values; call it outside "
                         "jit (jax.grad works)")
    zc, qc = np.asarray(zc, float), np.asarray(qc, float)
    groups: dict = {}
    for i in range(zc.size):
        groups.setdefault((float(qc[i]), _ladder_floor(zc[i]), _steps_rung(st[i])), []).append(i)
    out = [None] * zc.size
    for (qv, _, _), members in groups.items():
        idx = np.asarray(members)
        ev = _evaluator(kind, zc[idx[0]], qv, int(st[idx].max()), step)
        # a traced rate (jax.grad in q) goes one member at a time: the build takes one scalar rate
        n = 1 if is_traced(q) else min(_chunk(None if ev.sizes is None else ev.sizes[0]),
                                       1 << (idx.size - 1).bit_length())
        for s in range(0, idx.size, n):
            part = idx[s:s + n]
            pad = np.concatenate([part, np.repeat(part[-1:], n - part.size)])
            ix = jnp.asarray(pad)
            res = ev.query(kind_query, z[ix], jnp.asarray(st[pad], jnp.float64), a[ix], q[pad[0]])
            for j, i in enumerate(part):
                out[i] = res[j]
    return jnp.stack(out)


@x64
def dpsgd_epsilon(noise_multiplier, sampling_prob, steps, delta, *, mechanism=None,
                  value_discretization_interval=DEFAULT_DISCRETIZATION):
    """ε at ``delta`` of ``steps`` DP-SGD steps with Poisson rate ``sampling_prob`` and noise scale
    clip·``noise_multiplier`` (add/remove neighbours, both directions).

    Arrays broadcast together (a batch of settings; ``steps`` concrete integers); float64 result
    of the broadcast shape. Gaussian noise: the exact pessimistic PLD (never below the truth);
    Laplace: the randomized-response dominating pair; discrete Gaussian: an RDP bound (module
    docstring). Differentiable in ``noise_multiplier`` and ``sampling_prob`` under ``jax.grad``
    (not inside ``jit``: grid sizes are planned from concrete values).
    """
    check_probability("delta", delta, high_open=True)
    return _query("epsilon", noise_multiplier, sampling_prob, steps, delta, mechanism, value_discretization_interval)


@x64
def dpsgd_delta(noise_multiplier, sampling_prob, steps, epsilon, *, mechanism=None,
                value_discretization_interval=DEFAULT_DISCRETIZATION):
    """δ at ``epsilon`` of ``steps`` DP-SGD steps (see :func:`dpsgd_epsilon`)."""
    check_real("epsilon", epsilon)
    return _query("delta", noise_multiplier, sampling_prob, steps, epsilon, mechanism, value_discretization_interval)


# ----------------------------------------------------------------------------------
# calibration
# ----------------------------------------------------------------------------------
@functools.partial(jax.jit, static_argnums=0)
def _rdp_epsilon_jit(kind, z, q, steps, delta):
    return rdp_to_epsilon(RDP_ORDERS, _rdp_curve(kind, z, q) * steps, delta)


def _rdp_epsilon(kind, z, q, steps, delta):
    return float(_rdp_epsilon_jit(kind, jnp.asarray(z, jnp.float64), jnp.asarray(q, jnp.float64),
                                  jnp.asarray(steps, jnp.float64), jnp.asarray(delta, jnp.float64)))


def _bisect_log(fn, lo, hi, target, iters=60):
    """Root of the decreasing fn(x) = target in [lo, hi] (log-space bisection); returns the end
    with fn ≤ target."""
    for _ in range(iters):
        mid = math.sqrt(lo * hi)
        if fn(mid) <= target:
            hi = mid
        else:
            lo = mid
        if hi / lo - 1.0 < 1e-7:
            break
    return hi


def _rdp_noise_multiplier(kind, target, delta, q, steps):
    """z at which the RDP bound reaches the target: ε(z) ≤ target there (RDP ≥ the truth)."""
    lo, hi = 1e-2, 1.0
    while _rdp_epsilon(kind, hi, q, steps, delta) > target:
        lo, hi = hi, hi * 2.0
        if hi > 1e6:
            raise ValueError(f"target_epsilon: {target} is out of reach (noise multiplier > 1e6)")
    while lo > 1e-4 and _rdp_epsilon(kind, lo, q, steps, delta) <= target:
        hi, lo = lo, lo / 2.0
    return _bisect_log(lambda z: _rdp_epsilon(kind, z, q, steps, delta), lo, hi, target)


def _eps(kind, z, q, steps, delta, step):
    """Exact ε of settings (arrays broadcast), as :func:`dpsgd_epsilon` answers them."""
    z, q, st, d = np.broadcast_arrays(np.asarray(z, float), np.asarray(q, float), np.asarray(steps, np.int64),
                                      np.asarray(delta, float))
    flat = _query_flat("epsilon", kind, st.reshape(-1), step, *(jnp.asarray(x.reshape(-1)) for x in (z, q, d)))
    return np.asarray(flat).reshape(z.shape)


def _solve_noise(kind, target, delta, q, steps, rtol, step):
    """Safeguarded secant on log ε vs log z with exact PLD evaluations (each on its rung's plan)."""
    z_hi = _rdp_noise_multiplier(kind, target, delta, q, steps)  # feasible: RDP is an upper bound
    if kind.kind == "discrete_gaussian":
        return z_hi

    def f(zv):
        return float(_eps(kind, zv, q, steps, delta, step))

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
def calibrate_noise_multiplier(target_epsilon, delta, sampling_prob, steps, *, mechanism=None, rtol=1e-3,
                               value_discretization_interval=DEFAULT_DISCRETIZATION):
    """The noise multiplier z whose ε after ``steps`` steps at rate ``sampling_prob`` lies in
    [target·(1 − rtol), target] (:func:`dpsgd_epsilon`, from above: never over the target).

    A few exact PLD evaluations: the Rényi bound gives a feasible z (RDP is never below the
    PLD), then a safeguarded secant on log ε vs log z, each evaluation the one
    :func:`dpsgd_epsilon` answers. Arrays broadcast (one solve per setting). For the discrete
    Gaussian the Rényi bound is the accountant, solved to 1e-7. Where ε(z) jumps across the
    window (Laplace noise: its randomized-response atoms are rounded up to the loss grid, so
    ε(z) is a fine staircase), the smallest feasible z is returned, ε a little below the window.
    """
    kind = _noise(mechanism)
    check_positive("target_epsilon", target_epsilon)
    check_probability("delta", delta, high_open=True)
    _validate_setting(1.0, sampling_prob, steps)
    check_probability("rtol", rtol, high_open=True)

    def one(t, d, q, s):
        return _solve_noise(kind, float(t), float(d), float(q), int(s), float(rtol), value_discretization_interval)

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
def calibrate_num_steps(target_epsilon, delta, noise_multiplier, sampling_prob, *, mechanism=None,
                        max_steps=10**7, value_discretization_interval=DEFAULT_DISCRETIZATION):
    """The largest number of steps whose ε at ``delta`` stays ≤ ``target_epsilon`` (0 if even one
    step exceeds it), as :func:`dpsgd_epsilon` answers. The search starts at the Rényi bound's
    count (feasible: RDP is never below the PLD) and evaluates 16 candidate counts per round on
    one compiled program (the count is a traced argument). Arrays broadcast."""
    kind = _noise(mechanism)
    check_positive("target_epsilon", target_epsilon)
    check_probability("delta", delta, high_open=True)
    _validate_setting(noise_multiplier, sampling_prob, 1)
    max_steps = check_int("max_steps", max_steps, minimum=1)
    step = float(value_discretization_interval)

    def one(t, d, z, q):
        t, d, z, q = float(t), float(d), float(z), float(q)
        rdp = _rdp_curve(kind, jnp.asarray(z), jnp.asarray(q))

        def rdp_ok(c):
            return np.asarray(rdp_to_epsilon(RDP_ORDERS, rdp * jnp.asarray(c, jnp.float64)[:, None], d)) <= t

        start = max(1, _largest_int(rdp_ok, 1, max_steps + 1)) if rdp_ok(np.asarray([1]))[0] else 1
        if kind.kind == "discrete_gaussian":
            return start if rdp_ok(np.asarray([start]))[0] else 0
        return _largest_feasible(lambda c: _eps(kind, z, q, c, d, step) <= t, start, max_steps)

    return _scalar_loop(one, target_epsilon, delta, noise_multiplier, sampling_prob)


@x64
def calibrate_batch_size(target_epsilon, delta, noise_multiplier, steps, num_examples, *, mechanism=None,
                         value_discretization_interval=DEFAULT_DISCRETIZATION):
    """The largest expected batch size B (sampling_prob = B / num_examples) whose ε after ``steps``
    steps stays ≤ ``target_epsilon`` (0 if even B = 1 exceeds it), as :func:`dpsgd_epsilon`
    answers; the search starts at the Rényi bound's B (feasible). Arrays broadcast."""
    kind = _noise(mechanism)
    check_positive("target_epsilon", target_epsilon)
    check_probability("delta", delta, high_open=True)
    _validate_setting(noise_multiplier, 1.0, steps)
    step = float(value_discretization_interval)

    def one(t, d, z, s, n):
        t, d, z, s = float(t), float(d), float(z), int(s)
        n = check_int("num_examples", int(n), minimum=1)

        def rdp_ok(b):
            return np.asarray([_rdp_epsilon(kind, z, bb / n, s, d) <= t for bb in np.atleast_1d(b)])

        start = max(1, _largest_int(rdp_ok, 1, n + 1)) if rdp_ok(np.asarray([1]))[0] else 1
        if kind.kind == "discrete_gaussian":
            return start if rdp_ok(np.asarray([start]))[0] else 0
        return _largest_feasible(lambda b: _eps(kind, z, np.asarray(b) / n, s, d, step) <= t, start, n)

    return _scalar_loop(one, target_epsilon, delta, noise_multiplier, steps, num_examples)


# ----------------------------------------------------------------------------------
# the per-step odometer
# ----------------------------------------------------------------------------------
class DpsgdAccountant:
    """The privacy odometer of a DP-SGD training loop: call :meth:`step` once per noisy update.

    >>> acc = DpsgdAccountant(noise_multiplier=1.1, sampling_prob=256 / 60000, delta=1e-5, epsilon_budget=3.0)
    >>> for t in range(steps):
    ...     eps = acc.step()        # ValueError (nothing recorded) once the budget would be exceeded

    Gaussian and Laplace noise go through :class:`accounting.Accountant` (exact composition by
    count: milliseconds per step); a step with another noise multiplier or rate (a schedule)
    is recorded as its own kind and composed exactly. The discrete Gaussian adds its per-step
    Rényi bound. ``steps`` counts noisy updates (logical batches), not micro-batches.

    Thread-safe: a lock makes each :meth:`step` (check, record, step count) one indivisible
    update and every read see a state between steps.
    """

    def __init__(self, noise_multiplier, sampling_prob, *, delta, epsilon_budget=None, mechanism=None,
                 value_discretization_interval=DEFAULT_DISCRETIZATION):
        self.kind = _noise(mechanism)
        self._mechanism = mechanism
        _validate_setting(noise_multiplier, sampling_prob, 1)
        check_probability("delta", delta, high_open=True)
        if epsilon_budget is not None:
            check_positive("epsilon_budget", epsilon_budget, allow_inf=True)
        self.noise_multiplier = float(noise_multiplier)
        self.sampling_prob = float(sampling_prob)
        self.delta = float(delta)
        self.epsilon_budget = None if epsilon_budget is None else float(epsilon_budget)
        self.steps = 0
        self._lock = threading.RLock()
        if self.kind.kind == "discrete_gaussian":
            self._rdp = {}  # (z, q) -> count
        else:
            self._acc = Accountant(epsilon_budget=epsilon_budget, delta=delta,
                                   value_discretization_interval=value_discretization_interval)

    def _rdp_eps(self, counts, delta):
        with jax.enable_x64(True):
            total = sum(_rdp_curve(self.kind, jnp.asarray(z), jnp.asarray(q)) * c for (z, q), c in counts.items())
            return float(rdp_to_epsilon(RDP_ORDERS, total, delta))

    def step(self, count=1, *, noise_multiplier=None, sampling_prob=None) -> float:
        """Record ``count`` steps (at this noise multiplier / rate unless overridden); returns ε spent
        at ``delta``. Raises ``ValueError`` and records nothing if the budget would be exceeded."""
        count = check_int("count", count, minimum=1)
        z = self.noise_multiplier if noise_multiplier is None else float(check_positive("noise_multiplier",
                                                                                       noise_multiplier))
        q = self.sampling_prob if sampling_prob is None else float(check_probability("sampling_prob",
                                                                                     sampling_prob))
        with self._lock:
            if self.kind.kind != "discrete_gaussian":
                with jax.enable_x64(True):
                    mech = step_mechanism(jnp.asarray(z, jnp.float64), self._mechanism)
                eps = self._acc.record(mech, sampling_prob=q, count=count)
            else:
                counts = dict(self._rdp)
                counts[(z, q)] = counts.get((z, q), 0) + count
                eps = self._rdp_eps(counts, self.delta)
                if self.epsilon_budget is not None and eps > self.epsilon_budget:
                    raise ValueError(f"epsilon_budget: this step would bring ε to {eps:.6g} > budget "
                                     f"{self.epsilon_budget:.6g} (δ={self.delta:g}); it was refused and nothing was recorded")
                self._rdp = counts
            self.steps += count
            return eps

    def epsilon(self, delta=None) -> float:
        """ε spent so far at ``delta`` (default: the accountant's δ)."""
        d = self.delta if delta is None else float(check_probability("delta", delta, high_open=True))
        with self._lock:
            if self.steps == 0:
                return 0.0
            if self.kind.kind == "discrete_gaussian":
                return self._rdp_eps(self._rdp, d)
            return self._acc.spent_epsilon(d)

    def remaining_steps(self) -> int | None:
        """Steps at the current noise multiplier and rate left within the budget (None without one);
        a count whose composition outgrows the largest FFT length counts as not fitting, so the
        answer may then be below the truth, never above."""
        if self.epsilon_budget is None:
            return None
        with self._lock:
            lo, hi = 0, 1
            while self._would_fit(hi):
                lo, hi = hi, hi * 2
                if hi > 10**7:
                    return lo
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if self._would_fit(mid) else (lo, mid)
            return lo

    def _would_fit(self, count) -> bool:
        if self.kind.kind == "discrete_gaussian":
            counts = dict(self._rdp)
            key = (self.noise_multiplier, self.sampling_prob)
            counts[key] = counts.get(key, 0) + count
            return self._rdp_eps(counts, self.delta) <= self.epsilon_budget
        with jax.enable_x64(True):
            mech = step_mechanism(jnp.asarray(self.noise_multiplier, jnp.float64), self._mechanism)
        try:
            return not self._acc.would_exceed(mech, sampling_prob=self.sampling_prob, count=count)
        except ValueError as err:
            if "FFT" not in str(err):
                raise
            return False
