"""The noise of a table release: element ``e`` of component ``c`` for group ``g`` draws from the
uniform stream addressed by ``(key, c, g, e)`` (:class:`dpjax.table.keys.GroupStream`), through
the kernel's own sampler (``_sample``, the protocol's inverse CDF or exact sampler).

Draws are laid out in rows of :data:`dpjax.mechanism.LANE_BLOCK` (padding past the real
entries) so that no entry falls in XLA's scalar loop tail, whose ``log``/``exp`` may differ in
the last bit from the vector lanes': a group's noise is the same bits whatever else is released.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.mechanism import LANE_BLOCK
from dpjax.table.keys import GroupStream, derive

__all__ = ["draw"]


@jax.jit
def _draw(kernel, k0, k1, elements, values):
    return kernel._sample(GroupStream(k0, k1, elements, jnp.float64), values)


def draw(kernel, component_pair, group_words: np.ndarray, elements: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values + noise``, float64, for ``values[g, i]`` the true value of element ``elements[g, i]``
    of group ``g`` (``group_words[g]`` its key hash) in the component keyed by ``component_pair``."""
    k0, k1 = derive(component_pair, group_words)
    shape = values.shape
    n = values.size
    pad = -n % LANE_BLOCK or (LANE_BLOCK if n == 0 else 0)

    def rows(x, dtype):
        return np.pad(np.asarray(x, dtype).reshape(-1), (0, pad)).reshape(-1, LANE_BLOCK)

    k0 = rows(np.broadcast_to(k0[:, None], shape), np.uint32)
    k1 = rows(np.broadcast_to(k1[:, None], shape), np.uint32)
    with jax.enable_x64(True):
        out = _draw(kernel, k0, k1, rows(np.broadcast_to(elements, shape), np.uint32), rows(values, np.float64))
        out = np.asarray(out, np.float64)
    return out.reshape(-1)[:n].reshape(shape)
