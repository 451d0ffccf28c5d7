r"""Closed-form single-release privacy of a mechanism with closed-form pair divergences.

(Not to be confused with the integer-noise tier :mod:`dpjax.exact` or with the PLD of
:func:`accounting.pld`: this module discretises nothing and composes nothing.)

For every mechanism whose pair divergences are closed forms (``hockey_stick``, and
``renyi_divergence`` for Rényi): a privacy-boosted mechanism with any kernel
(:mod:`dpjax.boosting.closed_forms`), the Laplace and Gaussian kernels, randomized
response, or any mechanism that defines them. The privacy of one release is the worst
case over the mechanism's neighbouring pairs (``neighbour_pairs``), each in both
directions, and where the pairs sample a path of answers (``pair_path``: relative and
fixed regions, shifts of a kernel that is not log-concave) the supremum along the path,
bounded from above (:mod:`accounting.privacy_loss.pair_path`), never the grid's maximum.

Nothing is discretised: δ(ε) is the true hockey-stick divergence of the output laws, ε(δ)
its root (:mod:`accounting._root`: bracketed Newton, never cut at a cap, reported on the
safe side). Composition of several releases goes through :func:`accounting.pld`.

Public, validated, float64 (the user's global flag untouched), batched over the
mechanism's batch (results ``batch_shape + arg.shape``), differentiable in every
parameter (ε(δ) implicitly):

* :func:`privacy_profile` — δ(ε);
* :func:`epsilon` — ε(δ);
* :func:`renyi` — D_α;
* :func:`worst_pair` — the pair attaining δ(ε) (single mechanism).

Traceable building blocks for code that runs inside ``jit``/``vmap`` (the tuner's
objective): :func:`worst_delta`, :func:`worst_renyi` (no validation, no float64 switch),
and the root solvers :func:`epsilon_root`, :func:`epsilon_and_slope`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from accounting._numerics import to64, x64
from accounting.privacy_loss.pair_path import CERTIFY_SLACK, certified_supremum, worst_case
from accounting._root import epsilon_and_slope, epsilon_root
from dpjax.mechanism import Mechanism
from dpjax.validation import check_positive, check_probability, check_real, is_traced

__all__ = [
    "privacy_profile",
    "epsilon",
    "renyi",
    "worst_pair",
    "worst_delta",
    "worst_renyi",
    "epsilon_root",
    "epsilon_and_slope",
]

#: pairs per chunk of a trimmed sweep over listed pairs.
CHUNK = 384
_KINDS = {"hockey_stick": "hockey_stick", "renyi": "renyi_divergence"}


# ----------------------------------------------------------------------------------
# traceable worst cases
# ----------------------------------------------------------------------------------
def _worst(mech, kind, x, sensitivity, trim=False):
    """The worst case over ``mech.neighbour_pairs``; with ``trim``, a listed (not path) pair set
    longer than :data:`CHUNK` is swept chunk by chunk, stopping after the first chunk whose
    pairs all lie beyond the kernel's reach (both answers' regions reach past it).

    Such a pair's two laws are the kernel's own, shifted (the kernel's mass outside both
    regions is below 1e-17), so every later pair repeats that chunk's: the list may be sized
    for a larger kernel scale (a tuner's static list covers its whole search range) while
    each evaluation pays for its own scale. Forward-mode differentiable only (a while loop).
    """
    return _charge_apart(mech, sensitivity, kind, _worst_pairs(mech, kind, x, sensitivity, trim))


#: the divergences of two laws with disjoint supports: δ = 1 at every ε, D_α = ∞
_APART = {"hockey_stick": 1.0, "renyi": jnp.inf}


def _charge_apart(mech, sensitivity, kind, out):
    """``out`` (an unbatched mechanism's) where the shift stays on the mechanism's lattice, the
    disjoint laws' divergence where it leaves it (:meth:`dpjax.Mechanism.off_lattice`)."""
    return jnp.where(mech.off_lattice(sensitivity), _APART[kind], out)


def _worst_pairs(mech, kind, x, sensitivity, trim):
    v, nv = mech.neighbour_pairs(sensitivity)
    n = v.shape[-1]
    if not trim or mech.pair_path or n <= CHUNK:
        return worst_case(mech, kind, x, v, nv)[0]
    count = -(-n // CHUNK)
    pad = count * CHUNK - n  # repeats of the first pair fill the last chunk

    def chunks(a):
        return jnp.concatenate([a, jnp.broadcast_to(a[..., :1], a.shape[:-1] + (pad,))], -1).reshape(count, CHUNK)

    vc, nvc = chunks(v), chunks(nv)
    reach = mech.kernel.noise_reach()
    near = jnp.min(jnp.minimum(mech.region.noise_interval(vc)[1], mech.region.noise_interval(nvc)[1]), -1) <= reach

    def cond(s):
        i = s[0]
        return (i < count) & ((i == 0) | near[jnp.maximum(i - 1, 0)])

    def body(s):
        i, best = s
        return i + 1, jnp.maximum(best, worst_case(mech, kind, x, vc[i], nvc[i])[0])

    x = jnp.asarray(x)
    return jax.lax.while_loop(cond, body, (jnp.zeros((), jnp.int32), jnp.full(x.shape, -jnp.inf, x.dtype)))[1]


def worst_delta(mech, epsilon, sensitivity, trim=False):
    """Worst-case exact δ(ε) over the neighbouring pairs of an unbatched mechanism.

    Traceable (no validation, no float64 switch); the supremum along a pair path.

    Args:
      mech: an unbatched mechanism with a closed-form ``hockey_stick``.
      epsilon: ε (array).
      sensitivity: Δ.
      trim: sweep a long listed pair set only as far as the kernel reaches (for a privacy-boosted
        mechanism whose pair list covers larger scales; forward-mode differentiable only).

    Returns:
      δ(ε), of ``epsilon``'s shape.
    """
    return _worst(mech, "hockey_stick", epsilon, sensitivity, trim)


def worst_renyi(mech, order, sensitivity, trim=False):
    """Worst-case exact Rényi divergence D_α over the neighbouring pairs of an unbatched mechanism.

    Traceable (no validation, no float64 switch).

    Args:
      mech: an unbatched mechanism with a closed-form ``renyi_divergence``.
      order: α > 1 (array).
      sensitivity: Δ.
      trim: as in :func:`worst_delta`.

    Returns:
      D_α, of ``order``'s shape.
    """
    return _worst(mech, "renyi", order, sensitivity, trim)


# ----------------------------------------------------------------------------------
# public, validated, batched
# ----------------------------------------------------------------------------------
def _setup(mech, sensitivity, pairs, kind):
    if not isinstance(mech, Mechanism):
        raise ValueError(f"mech must be a dpjax Mechanism, got {type(mech).__name__}")
    if getattr(mech, _KINDS[kind]) is None:
        raise ValueError(
            f"mech: {type(mech).__name__} has no closed-form {_KINDS[kind]}; its exact privacy comes "
            "from its output law through accounting.pld / accounting.rdp"
        )
    if not is_traced(sensitivity):
        check_positive("sensitivity", sensitivity)
    m = to64(mech)
    sens = jnp.asarray(sensitivity, jnp.float64)
    if pairs is not None:
        pairs = tuple(jnp.atleast_1d(jnp.asarray(p, jnp.float64)) for p in pairs)
        if len(pairs) != 2 or pairs[0].shape != pairs[1].shape:
            raise ValueError("pairs must be (values, neighbour_values) of equal shape")
    return m, sens, pairs


def _flat(m, sens):
    """The mechanism batch flattened (and the sensitivity broadcast along it)."""
    shape = jnp.broadcast_shapes(tuple(m.batch_shape), jnp.shape(sens))
    flat = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, shape).reshape(-1), m)
    return flat, jnp.broadcast_to(sens, shape).reshape(-1), shape


def _pairs_of(m, sens, pairs):
    return m.neighbour_pairs(sens) if pairs is None else pairs


@functools.partial(jax.jit, static_argnames=("kind", "directions"))
def _worst_batch(m, x, sens, pairs, kind, directions):
    flat, s, shape = _flat(m, sens)

    def one(mm, ss):
        v, nv = _pairs_of(mm, ss, pairs)
        out = worst_case(mm, kind, x, v, nv, directions=directions, path=pairs is None)[0]
        return out if pairs is not None else _charge_apart(mm, ss, kind, out)

    return jax.vmap(one)(flat, s).reshape(shape + jnp.shape(x))


def _check_directions(directions):
    if directions not in ("both", "forward"):
        raise ValueError(f"directions must be 'both' or 'forward', got {directions!r}")


@x64
def privacy_profile(mech, epsilon, sensitivity=1.0, *, pairs=None, directions="both"):
    """Exact δ(ε) of one release.

    The worst case over the neighbouring pairs, both directions (the supremum along the answers
    where the pairs sample a path), of the true hockey-stick divergence: nothing is discretised. Along a
    path on concrete values the supremum is proven by branch and bound (an upper bound within ~1e-7 of
    it, or the largest bound of the cells left when its budget runs out); traced, a search's bound.

    Args:
      mech: a dpjax mechanism with a closed-form ``hockey_stick`` (batched: results get its batch shape).
      epsilon: ε, any real (array).
      sensitivity: the neighbouring answers' distance Δ (positive; broadcasts with the batch).
      pairs: optional ``(values, neighbour_values)`` of equal shape, replacing the mechanism's
        pairs (exactly those pairs are examined, no path supremum).
      directions: ``"both"`` or ``"forward"`` (only ``δ(P_value‖P_neighbour)``).

    Returns:
      float64 δ of shape ``batch_shape + epsilon.shape``, differentiable in every parameter.

    Raises:
      ValueError: ``epsilon`` not real (NaN); ``directions`` unknown; ``mech`` is not a dpjax
        Mechanism or has no closed-form ``hockey_stick``; ``sensitivity`` not positive; ``pairs``
        not two arrays of equal shape.
    """
    check_real("epsilon", epsilon)
    _check_directions(directions)
    m, sens, pairs = _setup(mech, sensitivity, pairs, "hockey_stick")
    eps = jnp.asarray(epsilon, jnp.float64)
    out = _worst_batch(m, eps, sens, pairs, "hockey_stick", directions)
    if pairs is None and _certifiable(m, sens, eps):
        out = jnp.asarray(_certified(m, sens, eps, out, directions == "forward"))
    return out


def _certifiable(m, sens, *args):
    """Whether the path supremum of ``m`` can be certified (:func:`_certified`): a pair path with a
    bound of its divergence's variation along the answers, on concrete values."""
    return (
        bool(m.pair_path)
        and hasattr(m, "path_variation")
        and not any(is_traced(a) for a in jax.tree_util.tree_leaves((m, sens) + args))
    )


#: :func:`_certified_epsilon`: raises of ε tried before it keeps the search's root
_EPSILON_RETRIES = 4


def _path_members(m, sens, forward):
    """``(i, certify)`` for every member ``i`` of the flat batch of ``m`` whose pair path can be certified,
    ``certify(x, bound)`` the branch and bound of its path at points ``x``
    (:func:`accounting.privacy_loss.pair_path.certified_supremum` with the variation bound of
    :meth:`dpjax.PrivacyBoosted.path_variation`)."""
    flat, s, _ = _flat(m, sens)
    apart = np.asarray(jax.vmap(lambda mm, ss: mm.off_lattice(ss))(flat, s)).reshape(-1)
    for i in range(len(s)):
        mm = jax.tree_util.tree_map(lambda a: a[i], flat)
        if apart[i] or mm.region.noise_edge_speed() is None:
            continue
        v, nv = (np.asarray(a, np.float64).reshape(-1) for a in mm.neighbour_pairs(s[i]))
        div = functools.partial(_pair_div, mm, forward=forward or bool(mm.symmetric_pairs))
        var = functools.partial(_path_variation, mm)
        yield (
            i,
            functools.partial(certified_supremum, div, values=v, nvalues=nv, variation=var, discrete=bool(mm.discrete)),
        )


def _certified(m, sens, eps, bound, forward):
    """The path supremum of δ(ε) of every member of ``m`` at ``eps``, proven (:func:`_path_members`) over
    the search's ``bound`` (shape batch + ε.shape). Where the cells close, the bound they prove (at most the
    search's raised by CERTIFY_SLACK); where the budget runs out, the largest bound of the cells left — never
    the search's value, which is not proven. Members whose region declares no variation bound keep the
    search's."""
    shape = jnp.broadcast_shapes(tuple(m.batch_shape), jnp.shape(sens))
    bound = np.array(np.broadcast_to(np.asarray(bound, np.float64), shape + jnp.shape(eps)).reshape(-1, np.size(eps)))
    x = np.broadcast_to(np.asarray(eps, np.float64), jnp.shape(eps)).reshape(-1)
    for i, certify in _path_members(m, sens, forward):
        bound[i] = np.minimum(certify(x, bound=bound[i])[0], 1.0)
    return bound.reshape(shape + jnp.shape(eps))


def _certified_epsilon(m, sens, delta, eps):
    """The search's ε (shape batch + δ.shape) raised until the branch and bound proves δ(ε) ≤ δ at every
    member whose path it can certify (:func:`_path_members`): the search's root meets δ within round-off,
    which no cell bound reaches, so ε is raised by 1e-7 of itself (and at least 1e-9), eight times more
    at every retry that leaves δ(ε) unproven. After ``_EPSILON_RETRIES`` the search's root stays, unproven:
    where δ is small against the variation bound (small δ, near a pure ε) the first-order cells do not
    close within the budget at any ε."""
    shape = jnp.broadcast_shapes(tuple(m.batch_shape), jnp.shape(sens))
    eps = np.array(np.broadcast_to(np.asarray(eps, np.float64), shape + jnp.shape(delta)).reshape(-1, np.size(delta)))
    target = np.broadcast_to(np.asarray(delta, np.float64), jnp.shape(delta)).reshape(-1)
    for i, certify in _path_members(m, sens, False):
        todo = np.isfinite(eps[i])
        out = eps[i].copy()
        for k in range(_EPSILON_RETRIES):
            if not todo.any():
                break
            step = 8.0**k * np.maximum(1e-7 * eps[i][todo], 1e-9)
            x = eps[i][todo] + step
            up = certify(x, bound=target[todo] / (1.0 + CERTIFY_SLACK))[0]
            ok = up <= target[todo]
            idx = np.flatnonzero(todo)
            out[idx[ok]] = x[ok]
            todo[idx[ok]] = False
        eps[i] = out
    return eps.reshape(shape + jnp.shape(delta))


@jax.jit
def _path_variation(m, x, v, nv, v2, nv2):
    """:meth:`dpjax.PrivacyBoosted.path_variation` of the cells from (``v``, ``nv``) to (``v2``, ``nv2``) at ``x``."""
    return m.path_variation(x, (v, nv), (v2, nv2))


@functools.partial(jax.jit, static_argnames=("forward",))
def _pair_div(m, x, v, nv, forward):
    """δ at flat points ``x`` of the pairs (``v``, ``nv``), elementwise; both orders maxed unless ``forward``."""

    def one(e, a, b):
        d = m.hockey_stick(e, a, b).reshape(())
        return d if forward else jnp.maximum(d, m.hockey_stick(e, b, a).reshape(()))

    return jax.vmap(one)(x, v, nv)


@x64
def renyi(mech, order, sensitivity=1.0, *, pairs=None, directions="both"):
    """Exact Rényi divergence D_α of one release.

    The worst case over the neighbouring pairs and both directions. T releases compose to ``T ×`` it.

    Args:
      mech: a dpjax mechanism with a closed-form ``renyi_divergence`` (batched: results get its batch shape).
      order: α > 1 (array).
      sensitivity: the neighbouring answers' distance Δ (positive; broadcasts with the batch).
      pairs: optional ``(values, neighbour_values)`` of equal shape, replacing the mechanism's
        pairs (exactly those pairs are examined, no path supremum).
      directions: ``"both"`` or ``"forward"``.

    Returns:
      float64 D_α of shape ``batch_shape + order.shape``.

    Raises:
      ValueError: ``order`` not real or ≤ 1; ``directions`` unknown; ``mech`` is not a dpjax
        Mechanism or has no closed-form ``renyi_divergence``; ``sensitivity`` not positive;
        ``pairs`` not two arrays of equal shape.
    """
    check_real("order", order)
    if not is_traced(order) and np.any(np.asarray(order) <= 1.0):
        raise ValueError(f"order must be > 1, got {order!r}")
    _check_directions(directions)
    m, sens, pairs = _setup(mech, sensitivity, pairs, "renyi")
    return _worst_batch(m, jnp.asarray(order, jnp.float64), sens, pairs, "renyi", directions)


def _log_worst_delta(path, e, params):
    m, s, pairs = params
    v, nv = _pairs_of(m, s, pairs)
    return jnp.log(worst_case(m, "hockey_stick", e, v, nv, path=path)[0])


@jax.jit
def _epsilon_batch(m, delta, sens, pairs):
    flat, s, shape = _flat(m, sens)
    fn = functools.partial(_log_worst_delta, pairs is None)

    def one(mm, ss):
        eps = epsilon_root(fn, (mm, ss, pairs), delta)
        return eps if pairs is not None else jnp.where(mm.off_lattice(ss), jnp.inf, eps)

    return jax.vmap(one)(flat, s).reshape(shape + jnp.shape(delta))


@x64
def epsilon(mech, delta, sensitivity=1.0, *, pairs=None):
    """Exact ε of one release at ``delta``.

    The smallest ε with δ(ε) ≤ delta (:func:`privacy_profile`), by bracketed Newton, reported on the
    safe side. Never capped: ``inf`` where no ε reaches ``delta`` (e.g. a fully truncated kernel, ρ = 1).
    Along a pair path on concrete values the root is raised (by 1e-7 of itself or more) until a branch
    and bound proves δ(ε) ≤ delta along the whole path; where it cannot within its budget (small
    ``delta``, e.g. 1e-6, near a pure ε) and traced, the search's root, not proven.

    Args:
      mech: a dpjax mechanism with a closed-form ``hockey_stick`` (batched: results get its batch shape).
      delta: δ in (0, 1) (array).
      sensitivity: the neighbouring answers' distance Δ (positive; broadcasts with the batch).
      pairs: optional ``(values, neighbour_values)`` of equal shape, replacing the mechanism's
        pairs (exactly those pairs are examined, no path supremum).

    Returns:
      float64 ε of shape ``batch_shape + delta.shape``, with an implicit derivative with respect to
      every parameter and ``delta`` (forward and reverse mode).

    Raises:
      ValueError: ``delta`` outside (0, 1); ``mech`` is not a dpjax Mechanism or has no closed-form
        ``hockey_stick``; ``sensitivity`` not positive; ``pairs`` not two arrays of equal shape.
    """
    if not is_traced(delta):
        check_probability("delta", delta, high_open=True)
    m, sens, pairs = _setup(mech, sensitivity, pairs, "hockey_stick")
    delta = jnp.asarray(delta, jnp.float64)
    out = _epsilon_batch(m, delta, sens, pairs)
    if pairs is None and _certifiable(m, sens, delta):
        out = jnp.asarray(_certified_epsilon(m, sens, delta, out))
    return out


@x64
def worst_pair(mech, epsilon, sensitivity=1.0, *, pairs=None):
    """The ordered neighbouring pair whose hockey-stick divergence at ``epsilon`` is largest.

    On the answers' path where the pairs sample one.

    Args:
      mech: a dpjax mechanism with a closed-form ``hockey_stick``, unbatched.
      epsilon: ε, a scalar.
      sensitivity: the neighbouring answers' distance Δ (positive; broadcasts with the batch).
      pairs: optional ``(values, neighbour_values)`` of equal shape, replacing the mechanism's
        pairs (exactly those pairs are examined, no path supremum).

    Returns:
      ``(value, neighbour_value, δ)`` as Python floats.

    Raises:
      ValueError: ``epsilon`` not real; a batched ``mech``; ``mech`` is not a dpjax Mechanism or has
        no closed-form ``hockey_stick``; ``sensitivity`` not positive; ``pairs`` not two arrays of
        equal shape.
    """
    check_real("epsilon", epsilon)
    m, sens, pairs = _setup(mech, sensitivity, pairs, "hockey_stick")
    if m.batch_shape:
        raise ValueError(f"mech: worst_pair takes a single mechanism, got batch shape {m.batch_shape}")
    eps = jnp.asarray(epsilon, jnp.float64)
    v, nv = _pairs_of(m, sens, pairs)
    _, (a, b) = _worst_pair_jit(m, eps, v, nv, pairs is None)
    forward, backward = float(m.hockey_stick(eps, a, b)), float(m.hockey_stick(eps, b, a))
    return (float(a), float(b), forward) if forward >= backward else (float(b), float(a), backward)


@functools.partial(jax.jit, static_argnums=(4,))
def _worst_pair_jit(m, eps, v, nv, path):
    return worst_case(m, "hockey_stick", eps, v, nv, path=path)
