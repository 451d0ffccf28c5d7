"""The draw programs of one process that :mod:`dpjax.release`, :mod:`dpjax.multihost` and the
integer-noise tier (:mod:`dpjax.exact.lattice`) share: the one-device draw of whole rows, the
sharded draw over a 1-D device mesh, and the cut back to the input's shape."""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from dpjax.mechanism import LANE_BLOCK, flat_records

#: Inputs with fewer records than this are not worth sharding.
SHARD_MIN_RECORDS = 1 << 16


@jax.jit
def _release_flat(key, values, mech, start):
    # ``start`` is traced: no recompilation per slice
    return mech.sample_records(key, values, start)


@jax.jit
def _release_whole(key, values, mech, start):
    """One device: the layout into rows of :data:`LANE_BLOCK` records and the draw in one program (as
    separate eager steps, the padding copies took as long as the draw itself). The rows are returned
    whole: cut back to ``values.shape`` in the same program, XLA fuses the cut into the draw and
    emits it as one loop over the records, whose vector/scalar split differs from the rows' loop of
    the sharded program (the float Gaussian's transcendental functions then differ in the last bit
    on a few records: a release would depend on the device count)."""
    flat_mech, flat, _ = flat_records(mech, values, values.shape, LANE_BLOCK)
    return flat_mech.sample_records(key, flat, start)


def _cut(rows, n, shape):
    """The first ``n`` records of the rows, in ``shape`` (a bitcast when nothing was padded)."""
    flat = rows.reshape(-1)
    return (flat if flat.shape[0] == n else flat[:n]).reshape(shape)


def _shard(x, devices):
    """``x`` split along its first axis over ``devices`` (this process's addressable devices: a sharding over
    another process's devices cannot be placed from here)."""
    mesh = Mesh(np.asarray(devices), ("records",))
    return jax.device_put(x, NamedSharding(mesh, P("records")))
