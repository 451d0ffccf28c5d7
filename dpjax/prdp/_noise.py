"""Float64 randomness for the PrDP mechanisms: numbered streams of one consumed key.

A mechanism consumes its key once (``jax.random.bits(key, (2,))``, as :mod:`dpjax.random`
does, so ``jax_debug_key_reuse`` catches a caller's reuse) and draws everything else from
numbered streams: uniform ``i`` of stream ``s`` is built from the Threefry-2x32 hash
(:func:`dpjax.random.threefry2x32`, unrolled ``uint32`` arithmetic) of the counter ``(s, i)``,
whose two words give 52 random bits. Each use site takes its own stream number, so no
randomness is shared between uses.

Why not ``jax.random``: (1) budgets, thresholds and sums run in float64, traced
inside ``jax.enable_x64(True)``; a caller may ``jit`` a mechanism with the global x64 flag off,
and JAX's float64 samplers then emit 64-bit integer operations that do not lower — these
samplers use float64 arithmetic on ``uint32`` words only, so a mechanism lowers with the flag
on or off. (2) Every ``jax.random`` call site compiles its own Threefry loop; the unrolled hash
fuses into its consumer and compiles faster (docs/performance.md), which keeps a mechanism
with a dozen draws cheap to compile.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtri

from dpjax.random import threefry2x32

__all__ = ["Stream"]

_F64 = jnp.float64
_ROUND_BITS = 16  # gamma rounds of stream s use counters (s << 16) | round


class Stream:
    """Numbered float64 random streams from one key (consumed here)."""

    def __init__(self, key):
        words = jax.random.bits(key, (2,), jnp.uint32)
        self._k0, self._k1 = words[0], words[1]

    def _words(self, stream, shape):
        size = math.prod(shape)
        index = jnp.arange(size, dtype=jnp.uint32)
        hi = jnp.broadcast_to(jnp.asarray(stream, jnp.uint32), index.shape)
        w0, w1 = threefry2x32(self._k0, self._k1, hi, index)
        return w0.reshape(shape), w1.reshape(shape)

    def uniform(self, stream, shape=()) -> jax.Array:
        """U(0, 1) on the open interval: ``(k + 1/2)·2^-52``, k uniform on 52 bits (26 from each word)."""
        w0, w1 = self._words(stream, tuple(shape))
        return ((w0 >> 6).astype(_F64) * 2.0**26 + (w1 >> 6).astype(_F64) + 0.5) * 2.0**-52

    def laplace(self, stream, shape=()) -> jax.Array:
        """Standard Laplace, density e^{-|x|}/2, by inversion of its CDF."""
        v = self.uniform(stream, shape) - 0.5  # never exactly 0: (k + 1/2) 2^-52 != 1/2
        return -jnp.sign(v) * jnp.log1p(-2.0 * jnp.abs(v))

    def gumbel(self, stream, shape=()) -> jax.Array:
        """Standard Gumbel, ``-log(-log U)``."""
        return -jnp.log(-jnp.log(self.uniform(stream, shape)))

    def normal(self, stream, shape=()) -> jax.Array:
        """Standard normal by inversion (``ndtri``)."""
        return ndtri(self.uniform(stream, shape))

    def gamma(self, stream, alpha) -> jax.Array:
        """Gamma(alpha, 1), one draw per entry of ``alpha`` (float64 array, entries 0 or ≥ 1).

        Marsaglia & Tsang (2000): d = α − 1/3, c = 1/√(9d); draw x ~ N(0,1), v = (1 + cx)³,
        accept d·v when v > 0 and log U < x²/2 + d − dv + d log v. Exact given exact uniforms and
        normals; acceptance ≥ 0.95 for α ≥ 1, so the loop runs a few rounds, round t drawing from
        the counters ``((stream + 1) << 16) | 2t`` and ``| 2t + 1`` (above every plain stream number,
        which stays below 2^16). ``alpha = 0`` gives 0 (an empty sum). ``stream < 2^15``.
        """
        alpha = jnp.asarray(alpha, _F64)
        d = jnp.maximum(alpha, 1.0) - 1.0 / 3.0
        c = 1.0 / jnp.sqrt(9.0 * d)
        base = jnp.uint32((stream + 1) << _ROUND_BITS)

        def body(state):
            t, out, done = state
            x = self.normal(base | (2 * t), alpha.shape)
            u = self.uniform(base | (2 * t + 1), alpha.shape)
            v = (1.0 + c * x) ** 3
            safe_v = jnp.where(v > 0.0, v, 1.0)
            ok = (v > 0.0) & (jnp.log(u) < 0.5 * x * x + d - d * safe_v + d * jnp.log(safe_v))
            return t + 1, jnp.where(ok & ~done, d * safe_v, out), done | ok

        _, out, _ = jax.lax.while_loop(
            lambda s: ~jnp.all(s[2]), body, (jnp.uint32(0), jnp.zeros_like(alpha), alpha <= 0.0)
        )
        return jnp.where(alpha > 0.0, out, 0.0)

    def key(self, stream) -> jax.Array:
        """A fresh Threefry key from stream ``stream`` (for a user mechanism that takes a key)."""
        w0, w1 = self._words(stream, (1,))
        return jax.random.wrap_key_data(jnp.stack([w0[0], w1[0]]), impl="threefry2x32")
