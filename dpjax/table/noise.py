"""The noise of a table release, keyed by (key, component, group key, element).

Element ``e`` of component ``c`` for group ``g`` draws from the words addressed by ``(key, c, g, e)`` — under the
pair ``H(H(key, c), g)`` (:func:`dpjax.table.keys.derive`), the counter ``(j, e)`` — so a group's noise depends only
on (key, component, group key, element).

Two tiers (``dpjax.table.release(..., numerics=...)``):

* ``"float"`` (:func:`draw` of a kernel): the kernel's own sampler (``_sample``, the protocol's inverse
  CDF or exact-arithmetic sampler) on the uniforms of :class:`dpjax.table.keys.GroupStream`. Draws are
  laid out in rows of :data:`dpjax.mechanism.LANE_BLOCK` (padding past the real entries) so that no entry
  falls in XLA's scalar loop tail, whose ``log``/``exp`` may differ in the last bit from the vector lanes':
  a group's noise is the same bits whatever else is released.
* ``"exact"`` (:func:`draw` of ``kernel.exact_lattice()``, an :class:`~dpjax.exact.ExactLattice`): the
  integer-only release of :mod:`dpjax.exact.lattice` — the true value rounded to the lattice gℤ
  (k = ⌊x/g + ½⌋, exact: g is a power of two), plus integer noise N of the lattice's one-scale sampler (the
  fixed-trip discrete Laplace or discrete Gaussian table sampler of :mod:`dpjax.exact.laws`, the
  :class:`~dpjax.exact.sampler.IntegerSampler` a release of one scale runs) fed by
  :class:`dpjax.exact.bits.GroupWords` (the same pair and element, raw 64-bit words); the rare flagged
  entries (a tie with a threshold, a word past the table) are completed exactly on the host from further
  words of the same entry, by the same sampler's host completion. The output g·(k + N) is a point of gℤ
  whatever the data.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.exact import ExactLattice, table_samplers
from dpjax.exact.bits import GroupWords
from dpjax.exact.lattice import check_index_range, nearest_index
from dpjax.mechanism import LANE_BLOCK
from dpjax.table.keys import GroupStream, derive

__all__ = ["draw", "run_scale"]


@jax.jit
def _draw(kernel, k0, k1, elements, values):
    return kernel._sample(GroupStream(k0, k1, elements, jnp.float64), values)


@functools.partial(jax.jit, static_argnames=("sampler",))
def _noise(k0, k1, elements, *, sampler):
    """(z, flagged) of the one-scale ``sampler`` (:class:`~dpjax.exact.sampler.IntegerSampler`) on group-addressed
    words."""
    return sampler.noise(GroupWords(k0, k1, elements), None, ())


def draw(kernel, component_pair, group_words: np.ndarray, elements: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values + noise``, float64, each element's noise keyed by (component, group key, element).

    Args:
      kernel: a noise kernel (the float tier) or its ``exact_lattice()`` (the exact tier: a one-scale
        discrete Laplace or discrete Gaussian lattice).
      component_pair: the component's key pair (:meth:`dpjax.table.keys.KeyWords.component`).
      group_words: ``[G, 2]`` uint32, each group's key hash.
      elements: the element index of each value (broadcasting to ``values``).
      values: ``[G, E]`` float64, the true value of element ``elements[g, i]`` of group ``g``.

    Returns:
      float64 array of ``values``' shape; on the exact tier points of the lattice gℤ.

    Raises:
      ValueError: on the exact tier, a lattice of another sampler or of several scales, or values whose
        lattice index is out of range (:func:`dpjax.exact.lattice.check_index_range`).
    """
    k0, k1 = derive(component_pair, group_words)
    shape = values.shape
    if isinstance(kernel, ExactLattice):
        return _draw_exact(kernel, k0, k1, elements, values)
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


def _draw_exact(lat: ExactLattice, k0, k1, elements, values) -> np.ndarray:
    """The exact tier's :func:`draw`: g·(⌊x/g + ½⌋ + N), N the lattice's integer noise (module docstring)."""
    if not lat.sampler.for_tables or np.size(lat.param) != 1:
        raise ValueError(
            f"noise: the exact tier of a table release needs a one-scale discrete Laplace or discrete "
            f"Gaussian lattice, got {type(lat).__name__} (sampler {lat.sampler!r})"
        )
    shape = values.shape
    n = values.size
    g = float(np.asarray(lat.granularity))
    check_index_range(lat, values)
    index = nearest_index(np.asarray(values, np.float64).reshape(-1) / g).astype(np.int64)  # exact: g = 2^p
    size = max(LANE_BLOCK, 1 << max(n - 1, 0).bit_length())  # a power of two: few compilations

    def flat(a):
        return np.pad(np.broadcast_to(a, shape).reshape(-1).astype(np.uint32), (0, size - n))

    k0, k1, e = flat(k0[:, None]), flat(k1[:, None]), flat(elements)
    sampler = lat.sampler.one_scale(lat, int(np.asarray(lat.param)), int(np.asarray(lat.shift)))
    with jax.enable_x64(True):
        z, flag = (np.asarray(a)[:n] for a in _noise(k0, k1, e, sampler=sampler))
    z = z.astype(np.int64)
    for i in np.flatnonzero(flag):  # ties and the far tail (probability ≲ 2^-40 each): exactly, on the host
        a, b, c = int(k0[i]), int(k1[i]), int(e[i])
        z[i] = sampler.complete(lambda j, a=a, b=b, c=c: table_samplers.threefry_word(a, b, j, c), None, ())
    return ((index + z).astype(np.float64) * g).reshape(shape)


def run_scale(kernel) -> float:
    """The scale of the noise ``kernel`` adds, in the values' units.

    The kernel's scale, or for a lattice g times the scale of its integer noise as accounted (the discrete
    Laplace's t/2^p, the discrete Gaussian's σ').

    Args:
      kernel: a kernel, or its :class:`~dpjax.exact.ExactLattice`.

    Returns:
      The scale, a float.
    """
    noise = kernel.noise if isinstance(kernel, ExactLattice) else kernel
    scale = float(np.asarray(getattr(noise, noise.scale_name)))
    return scale * float(np.asarray(kernel.granularity)) if isinstance(kernel, ExactLattice) else scale
