r"""The CKS samplers: integer-only samplers on raw random words.

After Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020 ("CKS").

Every sampler here is a *state machine* that consumes one 64-bit word per step and decides
with integer comparisons only (no float enters an accept/reject decision):

* :func:`bernoulli_exp` — Bernoulli(exp(−x)) for rational ``x = num/den`` (CKS Algorithm 1,
  with ``⌊x⌋`` Bernoulli(e⁻¹) factors for x > 1);
* :func:`discrete_laplace` — pmf ∝ exp(−|z|·s/t) for integers t, s = 2^shift (CKS Algorithm 2;
  for one scale and Threefry words, the fixed-trip table sampler of :mod:`dpjax.exact.laws.discrete_laplace`);
* :func:`discrete_gaussian` — pmf ∝ exp(−z²/(2n)) for an integer variance n (CKS Algorithm 3,
  rejection from the discrete Laplace of scale t = ⌊√n⌋ + 1; for one n and Threefry words, the
  fixed-trip version of :mod:`dpjax.exact.laws.discrete_gaussian`);
* :func:`randomized_response` — keep the category iff a word is below an integer threshold,
  otherwise a uniform other category (Lemire's multiply-shift with rejection).

**Bernoulli(p/q), lazily.** A word u is the first 64 bits of a uniform U ∈ [0, 1). With
X = u·q (128 bits, 32-bit limbs): ``(u+1)·q ≤ p·2^64`` proves U < p/q, ``u·q ≥ p·2^64`` proves
U ≥ p/q; otherwise (probability < 2^-64) the comparison continues with the next word against
the residual ``p·2^64 − u·q`` (< q). The result is exactly Bernoulli(p/q).

**Fixed trip counts, stragglers.** All records step in lock-step: ``budget`` steps in a
``fori_loop`` (the oversampled batch: enough words for all but a small fraction of records to
finish), then a ``while_loop`` continues the *same* machines, from their state, until every
record is done. Continuing (never restarting) keeps the output law exact; since word j of a
record is a function of (key, record, j), the output of a record does not depend on the
batch it ran in.

**Bounds.** ``t < 2^32``, ``n ≤ 2^24`` (so every product fits 64 bits); Algorithm 1's
Bernoulli(γ/k) uses ``k`` capped at 2^13 (it reaches that only with probability ≤ 1/8192!,
below 10^-28000); the discrete Gaussian rejects a proposal with ``|y| ≥ 2^19`` (its mass there
is below exp(−2^13)); both deviations have total-variation distance far below 2^-1000 and
are charged to δ in :mod:`docs/threat-model.md` (zero in float64).
"""

from __future__ import annotations

import abc
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.exact.bits import _M32, mul_128

__all__ = [
    "bernoulli_exp",
    "discrete_laplace",
    "discrete_gaussian",
    "randomized_response",
    "run_machine",
    "Machine",
    "BernoulliExpMachine",
    "DiscreteLaplaceMachine",
    "DiscreteGaussianMachine",
    "RandomizedResponseMachine",
]

U64 = jnp.uint64
_K_CAP = np.uint64(1 << 13)
#: the discrete Gaussian rejects proposals with |y| at or beyond this (see the module docstring)
DG_Y_MAX = 1 << 19

# phases
_U, _D, _V, _SIGN, _INT, _FRAC, _RR_KEEP, _RR_OTHER, _DONE = range(9)


def _u(x):
    return jnp.asarray(x, U64)


def bernoulli_step(u, p, q):
    """One word of the lazy comparison U < p/q (p < q < 2^64): ``(one, zero, residual)``.

    ``one``/``zero``: decided; neither: continue with the next word against ``residual/q``."""
    hi, lo = mul_128(u, q)
    zero = hi >= p
    lo2 = lo + q
    hi2 = hi + (lo2 < lo).astype(U64)
    one = (hi2 < p) | ((hi2 == p) & (lo2 == np.uint64(0)))
    return one, zero & ~one, np.uint64(0) - lo


class _State(dict):
    """Per-record machine state (a dict pytree of same-shape arrays)."""


jax.tree_util.register_pytree_node(
    _State, lambda s: (tuple(s.values()), tuple(s.keys())), lambda keys, vals: _State(zip(keys, vals))
)


def _init(shape, phase, **fields):
    z = jnp.zeros(shape, U64)
    s = _State(
        phase=jnp.full(shape, phase, jnp.int32),
        k=z,
        res=z,
        p0=z,
        d0=z,
        U=z,
        V=z,
        Y=jnp.zeros(shape, jnp.int64),
        count=z,
        rem=z,
        out=jnp.zeros(shape, jnp.int64),
    )
    for name, value in fields.items():
        s[name] = jnp.broadcast_to(value, shape).astype(s[name].dtype)
    return s


def _setter(new):
    """``setw(mask, **fields)``: set the fields of the records ``mask`` in the state ``new``."""

    def setw(mask, **fields):
        for name, value in fields.items():
            new[name] = jnp.where(mask, jnp.asarray(value).astype(new[name].dtype), new[name])

    return setw


class Machine(abc.ABC):
    """One CKS state machine: its step on one word for every record, and its lock-step budget."""

    #: steps of the lock-step batch before the straggler stages
    budget: ClassVar[int]

    @abc.abstractmethod
    def step(self, params, s, u):
        """The state after one step on the words ``u`` (one per record) from the state ``s``.

        Args:
          params: the machine's parameters, a dict of arrays over the records.
          s: the per-record state (a dict pytree; ``phase`` says which records are done).
          u: one uint64 word per record.

        Returns:
          The new state (records already done keep theirs).
        """


class RandomizedResponseMachine(Machine):
    """Randomized response: keep the value iff the word is below the threshold, else a uniform other category.

    The other category by Lemire's multiply-shift on the low 32 bits (rejected: the next word).
    """

    budget = 2

    def step(self, params, s, u):
        ph = s["phase"]
        new = _State(s)
        setw = _setter(new)
        keep_thr, kcat, lemire = params["keep"], params["k1"], params["thr"]
        at = ph == _RR_KEEP
        keep = u < keep_thr
        setw(at & keep, out=params["value"], phase=_DONE)
        setw(at & ~keep, phase=_RR_OTHER)
        at = ph == _RR_OTHER
        m = (u & _M32) * kcat
        ok = (m & _M32) >= lemire
        r = (m >> np.uint64(32)).astype(jnp.int64)
        other = r + (r >= params["value"]).astype(jnp.int64)
        setw(at & ok, out=other, phase=_DONE)
        return new


class BernoulliExpMachine(Machine):
    """Bernoulli(exp(−num/den)) (CKS Algorithm 1).

    Phases INT (⌊x⌋ Bernoulli(e⁻¹) factors) and FRAC (Bernoulli(exp(−rem/den))), on the Algorithm 1
    sub-machine the other machines share.
    """

    budget = 8

    def step(self, params, s, u):
        new = _State(s)
        setw = _setter(new)
        one32 = np.uint64(1)
        ph = s["phase"]
        # Algorithm 1 sub-machine, shared by phases D, V, INT, FRAC: A_k ~ Bernoulli(p0 / (d0 * k))
        kk = jnp.minimum(s["k"], _K_CAP)
        one, zero, resid = bernoulli_step(u, s["res"], s["d0"] * kk)
        alg1 = (ph == _D) | (ph == _V) | (ph == _INT) | (ph == _FRAC)
        cont = alg1 & one
        setw(cont, k=s["k"] + one32, res=s["p0"])
        setw(alg1 & ~one & ~zero, res=resid)
        fin = alg1 & zero
        odd = (s["k"] & one32) == one32  # Algorithm 1 returns 1 iff K is odd
        start_e1 = dict(k=np.uint64(2), res=one32, p0=one32, d0=one32)  # Bernoulli(e^-1): A_1 = 1 always
        self._propose(params, s, u, setw, fin, odd, start_e1)
        self._accept(params, s, setw, fin, odd, start_e1)
        return new

    def _propose(self, params, s, u, setw, fin, odd, start_e1):
        """The phases before the acceptance (none: the Bernoulli starts in INT or FRAC)."""

    #: the phase a failed acceptance goes to (done, output 0: the Bernoulli's 0)
    _fail = _DONE

    def _success(self, s):
        """The output of an accepted record."""
        return 1

    def _accept(self, params, s, setw, fin, odd, start_e1):
        """INT: ⌊γ⌋ Bernoulli(e⁻¹) factors; FRAC: Bernoulli(exp(−rem/den))."""
        one32 = np.uint64(1)
        ph = s["phase"]
        fail = jnp.int32(self._fail)
        at = fin & (ph == _INT)
        last = s["count"] == one32
        setw(at & odd & ~last, count=s["count"] - one32, **start_e1)
        setw(at & odd & last, count=np.uint64(0), phase=_FRAC, k=one32, res=s["rem"], p0=s["rem"], d0=params["den"])
        setw(at & ~odd, phase=fail, out=0)
        at = fin & (ph == _FRAC)
        setw(at & odd, phase=_DONE, out=self._success(s))
        setw(at & ~odd, phase=fail, out=0)


class DiscreteLaplaceMachine(BernoulliExpMachine):
    """The discrete Laplace (CKS Algorithm 2).

    U uniform on [0, t), D ~ Bernoulli(exp(−U/t)), V Bernoulli(e⁻¹) successes, a sign; the output at the sign
    (no acceptance phases).
    """

    budget = 16

    def _propose(self, params, s, u, setw, fin, odd, start_e1):
        one32 = np.uint64(1)
        ph = s["phase"]
        t, shift = params["t"], params["shift"]
        # U: uniform on {0..t-1} from the low 32 bits (Lemire), retried with the next word if rejected
        at = ph == _U
        m = (u & _M32) * t
        ok = (m & _M32) >= params["thr"]
        U = m >> np.uint64(32)
        setw(at & ok, U=U, k=one32, res=U, p0=U, d0=t, phase=_D)
        # D ~ Bernoulli(exp(-U/t)): rejected -> new U
        setw(fin & (ph == _D) & odd, V=np.uint64(0), phase=_V, **start_e1)
        setw(fin & (ph == _D) & ~odd, phase=_U)
        # V: count Bernoulli(e^-1) successes
        setw(fin & (ph == _V) & odd, V=s["V"] + one32, **start_e1)
        setw(fin & (ph == _V) & ~odd, phase=_SIGN)
        # sign: top bit; (negative, 0) is rejected
        at = ph == _SIGN
        neg = (u >> np.uint64(63)) == one32
        x = s["U"] + t * s["V"]
        y = x >> shift
        bad = neg & (y == np.uint64(0))
        z = jnp.where(neg, -(y.astype(jnp.int64)), y.astype(jnp.int64))
        setw(at & bad, phase=_U)
        self._signed(params, setw, at & ~bad, y, z, start_e1)

    def _signed(self, params, setw, at, y, z, start_e1):
        """The records ``at`` whose signed draw ``z`` (|z| = ``y``) is accepted by the sign step."""
        setw(at, out=z, phase=_DONE)

    def _accept(self, params, s, setw, fin, odd, start_e1):
        """(No acceptance phases: the discrete Laplace is done at its sign.)"""


class DiscreteGaussianMachine(DiscreteLaplaceMachine):
    """The discrete Gaussian (CKS Algorithm 3).

    A discrete Laplace proposal of scale t = ⌊√n⌋ + 1, accepted with probability exp(−(|y| t − n)²/(2nt²)) by
    the INT and FRAC phases (a rejection draws a new proposal).
    """

    budget = 24
    _fail = _U

    def _success(self, s):
        return s["Y"]

    def _signed(self, params, setw, at, y, z, start_e1):
        one32 = np.uint64(1)
        t, n, den = params["t"], params["n"], params["den"]
        far = y >= np.uint64(DG_Y_MAX)
        setw(at & far, phase=_U)
        yc = jnp.minimum(y, np.uint64(DG_Y_MAX))
        yt = yc * t
        a = jnp.where(yt >= n, yt - n, n - yt)  # |(|y| t − n)|
        num = a * a
        qi = num // den
        rem = num - qi * den
        go = at & ~far
        setw(go, Y=z, count=qi, rem=rem)
        setw(go & (qi > np.uint64(0)), phase=_INT, **start_e1)
        setw(go & (qi == np.uint64(0)), phase=_FRAC, k=one32, res=rem, p0=rem, d0=den)

    _accept = BernoulliExpMachine._accept


def _advance(machine, params, state, words, records, steps):
    """``steps`` lock-step steps; word j of a record is ``words(state['j'], records)``."""

    def step(_, s):
        u = words(s["j"], records)
        nxt = machine.step(params, s, u)
        nxt["j"] = s["j"] + (s["phase"] != _DONE).astype(jnp.uint32)
        return nxt

    return jax.lax.fori_loop(0, steps, step, state)


def run_machine(machine, params, state, words, budget, records=None):
    """Run the machines until all are done: the oversampled lock-step batch, then the stragglers.

    ``budget`` steps run on every record; the records still running are then gathered (``jnp.nonzero`` with a
    static size, a sixteenth of the batch) and stepped on their own, ``budget`` steps at a time, in a
    ``while_loop`` until every record is done. Each record carries its own word counter ``j``: word j of record
    i is ``words(j, i)``, so the output does not depend on which stage ran which step.

    Args:
      machine: a :class:`Machine`.
      params: its parameters, a dict of arrays broadcasting to the records.
      state: the initial per-record state.
      words: the word source (:class:`~dpjax.exact.bits.ThreefryWords` or alike: ``words(j, records)``).
      budget: the lock-step steps of each stage.
      records: the records' counters (default ``words.records``).

    Returns:
      The int64 outputs, of the state's shape.
    """
    shape = state["phase"].shape
    n = int(np.prod(shape))
    flat = jax.tree_util.tree_map(lambda x: x.reshape(-1), state)
    fparams = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, shape).reshape(-1), params)
    if records is None:
        records = words.records
    records = jnp.broadcast_to(records, shape).reshape(-1)
    flat["j"] = jnp.zeros((n,), jnp.uint32)
    flat = _advance(machine, fparams, flat, words, records, budget)

    def stage(full, size, steps):
        running = full["phase"] != _DONE
        (idx,) = jnp.nonzero(running, size=size, fill_value=n)
        valid = idx < n
        safe = jnp.where(valid, idx, 0)
        sub = jax.tree_util.tree_map(lambda x: x[safe], full)
        sub["phase"] = jnp.where(valid, sub["phase"], _DONE)
        sp = jax.tree_util.tree_map(lambda x: x[safe], fparams)
        sub = _advance(machine, sp, sub, words, records[safe], steps)
        return jax.tree_util.tree_map(lambda x, y: x.at[idx].set(y, mode="drop"), full, sub)

    small = min(n, max(n // 16, 1024))
    flat = jax.lax.while_loop(lambda f: ~jnp.all(f["phase"] == _DONE), lambda f: stage(f, small, budget), flat)
    return flat["out"].reshape(shape)


# -- parameter preparation (host, exact integers) ---------------------------------------------
def lemire_threshold(m):
    """``2^32 mod m`` (uint64 array): the rejection threshold of Lemire's multiply-shift for [0, m)."""
    m = np.asarray(m, np.uint64)
    return (np.uint64(1 << 32) - m) % m


def _check_range(name, x, lo, hi):
    x = np.asarray(x)
    if x.size and (np.any(x < lo) or np.any(x > hi)):
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {x.min()}..{x.max()}")


def laplace_params(t, shift, shape):
    """Parameters of the discrete Laplace machine: scale t / 2^shift (t < 2^32 integer)."""
    t = np.asarray(t, np.uint64)
    _check_range("t", t, 1, 2**32 - 1)
    return {
        "t": jnp.asarray(np.broadcast_to(t, shape)),
        "shift": jnp.asarray(np.broadcast_to(np.asarray(shift, np.uint64), shape)),
        "thr": jnp.asarray(np.broadcast_to(lemire_threshold(t), shape)),
    }


def gaussian_params(n, shape):
    """Parameters of the discrete Gaussian machine: variance n (integer ≤ 2^24), t = ⌊√n⌋ + 1."""
    n = np.asarray(n, np.uint64)
    _check_range("n (sigma^2)", n, 1, 2**24)
    t = np.asarray(np.vectorize(lambda v: int(np.sqrt(float(v))))(n), np.uint64)
    t = t - (t * t > n).astype(np.uint64)  # exact integer square root
    t = t + ((t + 1) * (t + 1) <= n).astype(np.uint64)
    t = t + np.uint64(1)
    p = laplace_params(t, 0, shape)
    p["n"] = jnp.asarray(np.broadcast_to(n, shape))
    p["den"] = jnp.asarray(np.broadcast_to(np.uint64(2) * n * t * t, shape))
    return p


# -- the samplers -----------------------------------------------------------------------------
def discrete_laplace(words, shape, t, shift=0, budget=None):
    """Discrete Laplace, pmf ∝ exp(−|z| 2^shift / t) (CKS Algorithm 2's law).

    One (t, shift) for all records and Threefry words: the fixed-trip table sampler of
    :mod:`dpjax.exact.laws.discrete_laplace` (a few words per record); otherwise the state machine.

    Args:
      words: the word source (:class:`~dpjax.exact.bits.ThreefryWords` or alike).
      shape: the records' shape.
      t: the integer t in [1, 2^32) (one, or broadcasting to ``shape``).
      shift: the scale exponent (the scale is t / 2^shift).
      budget: the lock-step steps of the state machine (``None``: its default; given, the machine runs).

    Returns:
      int64 noise of ``shape``.

    Raises:
      ValueError: ``t`` outside [1, 2^32).

    References:
      Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020, Algorithm 2.
    """
    from dpjax.exact.bits import ThreefryWords
    from dpjax.exact.laws.discrete_laplace import threefry_laplace

    if isinstance(words, ThreefryWords) and budget is None and np.ndim(t) == 0 and np.ndim(shift) == 0:
        _check_range("t", np.asarray(t, np.uint64), 1, 2**32 - 1)
        n = int(np.prod(shape))
        return threefry_laplace(words, n, int(t), int(shift)).reshape(shape)
    params = laplace_params(t, shift, shape)
    machine = DiscreteLaplaceMachine()
    return run_machine(machine, params, _init(shape, _U), words, machine.budget if budget is None else budget)


def discrete_gaussian(words, shape, n, budget=None):
    """Discrete Gaussian, pmf ∝ exp(−z²/(2n)) (CKS Algorithm 3).

    One n for all records and Threefry words: the fixed-trip version of
    :mod:`dpjax.exact.laws.discrete_gaussian`; otherwise the state machine.

    Args:
      words: the word source (:class:`~dpjax.exact.bits.ThreefryWords` or alike).
      shape: the records' shape.
      n: the integer variance in [1, 2^24] (one, or broadcasting to ``shape``).
      budget: the lock-step steps of the state machine (``None``: its default; given, the machine runs).

    Returns:
      int64 noise of ``shape``.

    Raises:
      ValueError: ``n`` outside [1, 2^24].

    References:
      Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020, Algorithm 3.
    """
    from dpjax.exact.bits import ThreefryWords
    from dpjax.exact.laws.discrete_gaussian import threefry_gaussian

    if isinstance(words, ThreefryWords) and budget is None and np.ndim(n) == 0:
        _check_range("n (sigma^2)", np.asarray(n, np.uint64), 1, 2**24)
        return threefry_gaussian(words, int(np.prod(shape)), int(n)).reshape(shape)
    params = gaussian_params(n, shape)
    machine = DiscreteGaussianMachine()
    return run_machine(machine, params, _init(shape, _U), words, machine.budget if budget is None else budget)


def bernoulli_exp(words, shape, num, den, budget=None):
    """Bernoulli(exp(−num/den)) for integers num ≥ 0, den ≥ 1 (CKS Algorithm 1).

    Args:
      words: the word source (:class:`~dpjax.exact.bits.ThreefryWords` or alike).
      shape: the records' shape.
      num: the numerator, an integer ≥ 0 (broadcasting to ``shape``).
      den: the denominator, an integer in [1, 2^50] (``num·k`` and ``den·k`` must fit 64 bits for k ≤ 2^13).
      budget: the lock-step steps (``None``: the machine's default).

    Returns:
      int64 0/1 of ``shape``.

    Raises:
      ValueError: ``den`` outside [1, 2^50].

    References:
      Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020, Algorithm 1.
    """
    num, den = np.asarray(num, np.uint64), np.asarray(den, np.uint64)
    _check_range("den", den, 1, 2**50)
    q, r = num // den, num % den
    params = {"den": jnp.asarray(np.broadcast_to(den, shape))}
    s = _init(
        shape,
        _FRAC,
        count=jnp.asarray(np.broadcast_to(q, shape)),
        rem=jnp.asarray(np.broadcast_to(r, shape)),
        k=np.uint64(1),
        res=jnp.asarray(np.broadcast_to(r, shape)),
        p0=jnp.asarray(np.broadcast_to(r, shape)),
        d0=jnp.asarray(np.broadcast_to(den, shape)),
    )
    intp = jnp.asarray(np.broadcast_to(q > 0, shape))
    s["phase"] = jnp.where(intp, _INT, _FRAC).astype(jnp.int32)
    for name, v in (("k", 2), ("res", 1), ("p0", 1), ("d0", 1)):
        s[name] = jnp.where(intp, np.uint64(v), s[name])
    machine = BernoulliExpMachine()
    return run_machine(machine, params, s, words, machine.budget if budget is None else budget)


def randomized_response(words, value, keep_threshold, num_categories, budget=None):
    """k-ary randomized response: keep ``value`` iff a word < ``keep_threshold``, else a uniform other category.

    The keep probability is keep_threshold / 2^64; the other category is drawn by Lemire's multiply-shift with
    rejection.

    Args:
      words: the word source (:class:`~dpjax.exact.bits.ThreefryWords` or alike).
      value: the true categories, integers in [0, num_categories).
      keep_threshold: the integer threshold T (uint64; broadcasting to ``value``).
      num_categories: k.
      budget: the lock-step steps (``None``: the machine's default).

    Returns:
      int64 categories of ``value``'s shape.

    References:
      Warner, "Randomized Response: A Survey Technique for Eliminating Evasive Answer Bias", JASA 1965;
      Lemire, "Fast Random Integer Generation in an Interval", ACM TOMACS 2019.
    """
    shape = jnp.shape(value)
    k1 = np.asarray(num_categories, np.uint64) - np.uint64(1)
    params = {
        "keep": jnp.asarray(np.broadcast_to(np.asarray(keep_threshold, np.uint64), shape)),
        "k1": jnp.asarray(np.broadcast_to(k1, shape)),
        "thr": jnp.asarray(np.broadcast_to(lemire_threshold(k1), shape)),
        "value": jnp.asarray(value, jnp.int64),
    }
    machine = RandomizedResponseMachine()
    return run_machine(machine, params, _init(shape, _RR_KEEP), words, machine.budget if budget is None else budget)
