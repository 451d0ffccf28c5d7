"""Batch releases: ``dpjax.release(key, values, mech)``.

The noise of record ``i`` (flat, row-major position plus ``start``) is a
function of ``(key, i)`` only (:mod:`dpjax.random`), so a release is bitwise
identical whether it runs whole, in slices (pass each slice's ``start``), or
sharded over several devices or processes. With more than one device and a large input, the
records are sharded over a 1-D device mesh with :mod:`jax.sharding`; the
computation is elementwise, so each device generates the noise of its own
records and nothing is communicated. A global array spread over several JAX processes is
released by :mod:`dpjax.multihost` (each process its own shards, the validation agreed by all).

A mechanism with batch shape equal to (or broadcastable to) ``values.shape``
gives per-query parameters: record ``i`` is released with mechanism ``i``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from dpjax import multihost
from dpjax._draw import SHARD_MIN_RECORDS, _cut, _release_flat, _release_whole, _shard
from dpjax.validation import check_finite_values, check_int, release_dtype
from dpjax.mechanism import LANE_BLOCK, Mechanism, as_records, flat_records
from dpjax.random import MAX_RECORDS, check_key

__all__ = ["release", "checked_release"]

def release(key, values, mech: Mechanism, *, start: int = 0, numerics: str = "float") -> jax.Array:
    """Release ``values`` through ``mech``: one independent draw per record.

    Args:
      key: a Threefry PRNG key (``jax.random.key(seed)`` or
        :func:`dpjax.random.secure_key`); consumed once. Never reuse it for another release.
      values: array of true answers (any shape); NaN/inf or empty input is refused.
      mech: a mechanism; its batch shape must broadcast to ``values.shape``.
      start: record index of ``values[0]`` (flat), to release a large array in
        slices with exactly the noise of the whole release.
      numerics: ``"float"`` (default; idealized numerics: float samplers, see docs/threat-model.md)
        or ``"exact"``: ``mech.exact_lattice()`` is run, integer-only noise on a lattice that does
        not depend on the data (:mod:`dpjax.exact`); ``key`` may then also be a
        :class:`dpjax.exact.HostBits` (``os.urandom`` words).

    Returns:
      Noisy values with the shape of ``values``.
    """
    if numerics not in ("float", "exact"):
        raise ValueError(f"numerics must be 'float' or 'exact', got {numerics!r}")
    if multihost.active():  # several JAX processes: a global array is released shard by shard, agreed by all
        out = multihost.release(key, values, mech, start=start, numerics=numerics)
        if out is not None:
            return out
    if numerics == "exact":
        from dpjax.exact.lattice import release_exact

        return release_exact(key, values, mech, start=start)
    if not isinstance(mech, Mechanism):
        raise ValueError(f"mech must be a dpjax mechanism, got {type(mech).__name__}")
    key = check_key(key)
    values = release_dtype("values", values)
    check_finite_values("values", values)
    values, squeeze = as_records(values, mech)
    start = check_int("start", start, minimum=0)
    shape = values.shape
    n = math.prod(shape)
    devices = jax.local_devices()  # (this process's own: another process's devices are not addressable here)
    if start + n + LANE_BLOCK * len(devices) > MAX_RECORDS:
        raise ValueError(f"start + number of records must be at most 2**32 per key, got {start + n}")
    shards = len(devices) if len(devices) > 1 and n >= SHARD_MIN_RECORDS else 1
    if shards == 1:
        out = _cut(_release_whole(key, values, mech, jnp.uint32(start)), n, shape)
        return out.reshape(()) if squeeze else out
    # every device's share a multiple of LANE_BLOCK records (padded records get indices past the
    # real ones and are dropped, so the real records' noise is unchanged)
    flat_mech, flat, _ = flat_records(mech, values, shape, LANE_BLOCK * shards)
    flat = _shard(flat, devices)
    flat_mech = jax.tree_util.tree_map(lambda p: _shard(p, devices) if jnp.ndim(p) else p, flat_mech)
    out = _cut(_release_flat(key, flat, flat_mech, jnp.uint32(start)), n, shape)
    return out.reshape(()) if squeeze else out


def checked_release(key, values, mech: Mechanism, *, start: int = 0) -> jax.Array:
    """:func:`release` that also refuses invalid input *under* ``jit``, through
    :mod:`jax.experimental.checkify`: NaN/inf values, non-finite or non-positive parameters,
    values outside the mechanism's domain (:meth:`Mechanism.traced_checks`). Functionalize it
    with ``checkify.checkify`` and throw the error before using the output::

        err, out = jax.jit(checkify.checkify(dpjax.checked_release))(key, values, mech)
        err.throw()   # ValueError-like JaxRuntimeError naming the problem; nothing released

    (Plain :func:`release` validates concrete input eagerly and lets traced input through.)
    """
    from jax.experimental import checkify

    for ok, message in mech.traced_checks(jnp.asarray(values)):
        checkify.check(ok, message)
    return release(key, values, mech, start=start)
