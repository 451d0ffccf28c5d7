"""Public wrappers of the exact, differentiable PB-DP accountant (every kernel)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

import dpjax
from dpjax.validation import check_positive, check_probability, is_traced
from optimize import _exact


def _check_mech(mech):
    if not isinstance(mech, dpjax.PrivacyBoosted):
        raise ValueError(f"mech must be a dpjax.PrivacyBoosted mechanism, got {mech!r}")


def _to64(tree):
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), tree)


def _batched(fn, mech, arg, sensitivity):
    """Apply ``fn(mech, arg, sensitivity)`` over the mechanism's batch (broadcast with ``arg``), jit-compiled."""
    return _batched_jit(fn, _to64(mech), arg, sensitivity)


@functools.partial(jax.jit, static_argnums=(0,))
def _batched_jit(fn, m, arg, sensitivity):
    arg = jnp.asarray(arg, jnp.float64)
    sens = jnp.asarray(sensitivity, jnp.float64)
    shape = jnp.broadcast_shapes(tuple(m.batch_shape), arg.shape, sens.shape)
    flat = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, shape).reshape(-1), m)
    out = jax.vmap(fn)(flat, jnp.broadcast_to(arg, shape).reshape(-1), jnp.broadcast_to(sens, shape).reshape(-1))
    return out.reshape(shape)


def exact_delta(mech, epsilon, sensitivity=1.0):
    """Exact worst-case δ(ε) of a ``PrivacyBoosted`` mechanism, any kernel (float64, differentiable)."""
    _check_mech(mech)
    if not is_traced(sensitivity):
        check_positive("sensitivity", sensitivity)
    with jax.enable_x64(True):
        return _batched(_exact.delta, mech, epsilon, sensitivity)


def exact_epsilon(mech, delta, sensitivity=1.0):
    """Exact ε at ``delta`` (single release); implicit derivative w.r.t. every parameter."""
    _check_mech(mech)
    if not is_traced(delta):
        check_probability("delta", delta, high_open=True)
    if not is_traced(sensitivity):
        check_positive("sensitivity", sensitivity)

    with jax.enable_x64(True):
        return _batched(_epsilon_one, mech, delta, sensitivity)


def _log_delta(e, params):
    m, s = params
    return jnp.log(_exact.delta(m, e, s))


def _epsilon_one(m, d, s):
    return _exact.epsilon_for_delta(_log_delta, (m, s), d)


def exact_renyi(mech, order, sensitivity=1.0):
    """Exact worst-case Rényi divergence ``D_α`` (α > 1) of a ``PrivacyBoosted`` mechanism, any kernel."""
    _check_mech(mech)
    if not is_traced(order):
        check_positive("order", jnp.asarray(order) - 1.0)
    if not is_traced(sensitivity):
        check_positive("sensitivity", sensitivity)
    with jax.enable_x64(True):
        return _batched(_exact.renyi, mech, order, sensitivity)
