"""Float64 noise for the PrDP mechanisms, built from 32-bit random words only.

Budgets, thresholds and sums of the PrDP mechanisms run in float64 (spec §5.1: level
floors reach 1e-8, noise scales 1e22, sums 1e11), inside ``jax.enable_x64(True)``
contexts entered while tracing. A caller may ``jit``/``vmap`` a mechanism with the
global x64 flag off: the program is then *lowered* outside the context, and JAX's own
float64 samplers (``jax.random.laplace``/``gumbel``/``gamma`` with ``dtype=float64``)
emit 64-bit integer operations that do not lower there. These samplers therefore draw
``uint32`` words (``jax.random.bits``) and assemble 52-bit uniforms with float64
arithmetic only, so a mechanism lowers the same with the flag on or off.

Each function consumes its key once; callers split keys per use.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtri

__all__ = ["uniform", "laplace", "gumbel", "normal", "gamma"]

_F64 = jnp.float64


def uniform(key, shape=()) -> jax.Array:
    """U(0, 1) in float64 on the open interval: ``(k + 1/2)·2^-52`` with k uniform on 52 bits."""
    words = jax.random.bits(key, (2,) + tuple(shape), jnp.uint32)
    hi = (words[0] >> 6).astype(_F64)  # 26 bits
    lo = (words[1] >> 6).astype(_F64)  # 26 bits
    return (hi * 2.0**26 + lo + 0.5) * 2.0**-52


def laplace(key, shape=()) -> jax.Array:
    """Standard Laplace, density e^{-|x|}/2, by inversion of its CDF (one uniform per draw)."""
    v = uniform(key, shape) - 0.5  # never exactly 0: (k + 1/2) 2^-52 != 1/2
    return -jnp.sign(v) * jnp.log1p(-2.0 * jnp.abs(v))


def gumbel(key, shape=()) -> jax.Array:
    """Standard Gumbel, ``-log(-log U)``."""
    return -jnp.log(-jnp.log(uniform(key, shape)))


def normal(key, shape=()) -> jax.Array:
    """Standard normal by inversion (``ndtri``)."""
    return ndtri(uniform(key, shape))


def gamma(key, alpha) -> jax.Array:
    """Gamma(alpha, 1) draws, one per entry of ``alpha`` (float64 array, entries 0 or ≥ 1).

    Marsaglia & Tsang (2000): d = α − 1/3, c = 1/√(9d); draw x ~ N(0,1), v = (1 + cx)³,
    accept d·v when v > 0 and log U < x²/2 + d − dv + d log v. Exact given exact uniforms
    and normals; acceptance ≥ 0.95 for α ≥ 1, so the loop runs a few rounds (each round
    draws fresh words from ``fold_in(key, round)``). ``alpha = 0`` gives 0 (an empty sum).
    """
    alpha = jnp.asarray(alpha, _F64)
    d = jnp.maximum(alpha, 1.0) - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)

    def body(state):
        i, out, done = state
        kx, ku = jax.random.split(jax.random.fold_in(key, i))
        x = normal(kx, alpha.shape)
        u = uniform(ku, alpha.shape)
        v = (1.0 + c * x) ** 3
        safe_v = jnp.where(v > 0.0, v, 1.0)
        ok = (v > 0.0) & (jnp.log(u) < 0.5 * x * x + d - d * safe_v + d * jnp.log(safe_v))
        take = ok & ~done
        return i + 1, jnp.where(take, d * safe_v, out), done | ok

    _, out, _ = jax.lax.while_loop(lambda s: ~jnp.all(s[2]), body,
                                   (jnp.int32(0), jnp.zeros_like(alpha), alpha <= 0.0))
    return jnp.where(alpha > 0.0, out, 0.0)
