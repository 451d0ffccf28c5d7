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
from dpjax.validation import check_finite_values, check_int, is_global, is_traced, release_dtype
from dpjax.mechanism import LANE_BLOCK, Mechanism, as_records, flat_records
from dpjax.random import MAX_RECORDS, check_key

__all__ = ["release", "checked_release"]


def release(key, values, mech: Mechanism, *, start: int = 0, numerics: str | None = None) -> jax.Array:
    """Release ``values`` through ``mech``: one independent draw per record.

    Args:
      key: a Threefry PRNG key (``jax.random.key(seed)`` or
        :func:`dpjax.random.secure_key`); consumed once. Never reuse it for another release.
      values: array of true answers (any shape); NaN/inf or empty input is refused.
      mech: a mechanism; its batch shape must broadcast to ``values.shape``.
      start: record index of ``values[0]`` (flat), to release a large array in
        slices with exactly the noise of the whole release.
      numerics: ``"exact"``: ``mech.exact_lattice()`` is run, integer-only noise on a lattice that
        does not depend on the data (:mod:`dpjax.exact`); ``key`` may then also be a
        :class:`dpjax.exact.HostBits` (``os.urandom`` words). ``"float"``: idealized numerics, the
        float samplers (docs/threat-model.md). ``None`` (default), the tier ``dpjax release`` runs:
        exact where ``mech`` has an exact sampler (Laplace, Gaussian, their discrete versions,
        randomized response, PB-DP over a discrete kernel with an absolute-error region), float where it
        has none and where the key, the values or the mechanism's parameters are traced (under ``jit``,
        ``vmap`` or ``grad``: the exact tier draws on the host from concrete parameters). The lattice
        mechanism that runs is ``mech.exact_lattice()``: account that one
        (:func:`accounting.exact.epsilon`) for the privacy of what ran.

    Returns:
      Noisy values with the shape of ``values``.

    Raises:
      ValueError: nothing is drawn when ``key`` is not a single Threefry key (or ``HostBits`` on the
        exact tier); ``values`` empty, NaN/inf or of a non-numeric dtype, or outside the mechanism's
        domain; ``mech`` not a dpjax mechanism or its batch shape not broadcasting to ``values``;
        ``start`` negative or ``start`` + the number of records past 2**32; ``numerics`` not
        ``"exact"``, ``"float"`` or ``None``; ``numerics="exact"`` for a mechanism without an exact
        sampler.
    """
    if numerics not in (None, "float", "exact"):
        raise ValueError(
            f"numerics must be 'exact', 'float' or None (exact where the mechanism has an exact "
            f"sampler), got {numerics!r}"
        )
    if numerics is None and is_traced((key, values, mech)):
        numerics = "float"
    if multihost.active():  # several JAX processes: a global array is released shard by shard, agreed by all
        if numerics is None:
            numerics = "exact" if _has_exact_sampler(mech) else "float"
        out = multihost.release(key, values, mech, start=start, numerics=numerics)
        if out is not None:
            return out
    if numerics != "float":
        from dpjax.exact.lattice import release_exact

        try:
            return release_exact(key, values, mech, start=start)
        except ValueError:
            # the default tier: float where the mechanism has no exact sampler (the refusal then came from
            # ``mech.exact_lattice()``); any other refusal stands
            if numerics == "exact" or _has_exact_sampler(mech):
                raise
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


def _has_exact_sampler(mech) -> bool:
    """Whether ``mech.exact_lattice()`` builds the exact tier's mechanism (a dpjax mechanism that does not refuse);
    parameters spread over several processes are asked on this process's first shard."""
    if not isinstance(mech, Mechanism):
        return False
    local = jax.tree_util.tree_map(lambda p: p.addressable_shards[0].data if is_global(p) else p, mech)
    try:
        local.exact_lattice()
    except ValueError:
        return False
    return True


def checked_release(key, values, mech: Mechanism, *, start: int = 0) -> jax.Array:
    """:func:`release` that also refuses invalid input *under* ``jit``.

    Through :mod:`jax.experimental.checkify`: NaN/inf values, non-finite or non-positive parameters,
    values outside the mechanism's domain (:meth:`Mechanism.traced_checks`). Functionalize it
    with ``checkify.checkify`` and throw the error before using the output::

        err, out = jax.jit(checkify.checkify(dpjax.checked_release))(key, values, mech)
        err.throw()   # ValueError-like JaxRuntimeError naming the problem; nothing released

    (Plain :func:`release` validates concrete input eagerly and lets traced input through.)

    Args:
      key: a Threefry PRNG key, consumed once.
      values: array of true answers (any shape).
      mech: a mechanism; its batch shape must broadcast to ``values.shape``.
      start: record index of ``values[0]`` (flat).

    Returns:
      Noisy values with the shape of ``values`` (float numerics under ``jit``).

    Raises:
      ValueError: as :func:`release`, for concrete input; under ``checkify`` the failed checks are
        returned as its error instead.
    """
    from jax.experimental import checkify

    for ok, message in mech.traced_checks(jnp.asarray(values)):
        checkify.check(ok, message)
    return release(key, values, mech, start=start)
