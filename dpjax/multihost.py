"""Releases and batch maps over global arrays spread across JAX processes (``jax.distributed``).

In a multi-process run (one JAX process per host, started by ``jax.distributed.initialize``,
a cluster launcher or ``python -m dpjax.launch``), data arrives as a *global* ``jax.Array``
whose shards live on the devices of different processes. :func:`dpjax.release` sends such a
run here. Every process handles only the shards it holds:

* **validation** runs on the process's addressable shards (non-finite values, the mechanism's
  domain, per-record parameters), and the processes then **agree** (:func:`agree`: an all-gather
  of each process's verdict and the fingerprints of its key, mechanism, shape and options, through
  JAX's public collectives, with a timeout): an error on one process refuses the
  release on all, naming the process; so do mismatched keys, a process passing a process-local
  array where another passes a global one, and a process that never arrives (a timeout, never
  a hang);
* **the release** of a shard is the one-process release of its records with ``start`` set to
  the flat index of its first record: the noise of record ``i`` is a function of ``(key, i)``
  (:mod:`dpjax.random`, :mod:`dpjax.exact`), so the global output is bitwise the output of one
  process releasing the whole array with the same key; nothing is communicated but the verdicts.

Records are laid out along the first axis: a global array must be partitioned along axis 0 only
(replicated along any mesh axis, whole along the others), as
``jax.make_array_from_process_local_data`` builds it from each process's rows
(:func:`global_records` does, checking that every process holds the same number of rows).

In a multi-process run :func:`dpjax.release` is therefore *collective*, like every JAX
computation on global arrays: every process calls it, in the same order. A release of
process-local arrays on every process stays local (each process releases its own records;
give each process its own key).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import threading
import zlib

import jax
import numpy as np

from dpjax.validation import check_finite_values, check_int, is_global

__all__ = [
    "active",
    "is_global",
    "agree",
    "global_records",
    "map_shards",
    "release",
    "key_fingerprint",
    "AGREE_TIMEOUT",
]

#: seconds a process waits for the others at an agreement (env ``DPJAX_AGREE_TIMEOUT`` overrides)
AGREE_TIMEOUT = 120.0

_lock = threading.Lock()
_rounds: dict[str, int] = {}


def active() -> bool:
    """Whether this is a run of several JAX processes joined by ``jax.distributed.initialize``.

    Returns:
      True when ``jax.process_count() > 1``.
    """
    return jax.process_count() > 1


def _gathered(header, data, timeout):
    """Every process's ``header`` (uint32[2]) and ``data`` (bytes, the length in ``header[0]``), in process
    order, through two all-gathers (``jax.experimental.multihost_utils.process_allgather``); raises
    ``TimeoutError`` when they have not completed within ``timeout`` seconds."""
    from jax.experimental import multihost_utils

    result = {}

    def run():
        try:
            headers = np.asarray(multihost_utils.process_allgather(header))
            if len({int(h[1]) for h in headers}) == 1:  # the same call on every process: exchange the payloads
                size = max(64, 1 << (int(headers[:, 0].max()) - 1).bit_length())  # few shapes, few compilations
                buf = np.zeros(size, np.uint8)
                buf[: len(data)] = np.frombuffer(data, np.uint8)
                result["data"] = np.asarray(multihost_utils.process_allgather(buf))
            result["headers"] = headers
        except BaseException as exc:  # reported by the caller
            result["error"] = exc

    worker = threading.Thread(target=run, name="dpjax-agree", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return None
    if "error" in result:
        raise result["error"]
    return result["headers"], result.get("data")


def agree(tag: str, payload: dict, *, timeout: float | None = None) -> list[dict]:
    """Exchange one payload per process for this process's next round of ``tag`` (collective).

    Two all-gathers over every process. Rounds are counted per tag and per process (every process
    calls in the same order; thread-safe).

    Args:
      tag: the name of the agreement.
      payload: a JSON-able dict.
      timeout: seconds to wait for the other processes (default :data:`AGREE_TIMEOUT`, or the
        environment's ``DPJAX_AGREE_TIMEOUT``).

    Returns:
      Every process's payload of that round, in process order.

    Raises:
      ValueError: a process at another tag or round (raised on every process).
      TimeoutError: the exchange did not complete within ``timeout`` (a process that never calls, or
        that died): the run cannot go on (a collective is left pending), stop it.
    """
    timeout = float(os.environ.get("DPJAX_AGREE_TIMEOUT", AGREE_TIMEOUT)) if timeout is None else timeout
    with _lock:
        n = _rounds.get(tag, 0)
        _rounds[tag] = n + 1
    data = json.dumps(payload).encode()
    call = f"{tag} #{n}"
    header = np.array([len(data), zlib.crc32(call.encode())], np.uint32)
    got = _gathered(header, data, timeout)
    if got is None:
        raise TimeoutError(
            f"dpjax {call}: the other processes did not all arrive within {timeout:g} s (in a "
            f"multi-process run every process calls {tag}, in the same order; DPJAX_AGREE_TIMEOUT "
            "sets the wait); this run cannot continue"
        )
    headers, gathered = got
    if gathered is None:
        raise ValueError(
            f"dpjax {call}: the processes are at different collective calls (call hashes "
            f"{[int(h[1]) for h in headers]}); every process must call the same dpjax functions in "
            "the same order"
        )
    return [json.loads(bytes(row[: int(h[0])]).decode()) for h, row in zip(headers, gathered)]


def _refuse_if_any(tag, payloads):
    """Raise on every process the first process's error (its payload's ``"error"``), naming it."""
    for p, pay in enumerate(payloads):
        if pay.get("error"):
            raise ValueError(f"{tag} refused on every process: process {p} reports: {pay['error']}")


def key_fingerprint(key) -> str:
    """A short hash of a Threefry key's words (compared across processes; the key itself is not sent).

    Args:
      key: a typed Threefry key.

    Returns:
      16 hexadecimal characters.
    """
    words = np.asarray(jax.random.key_data(key)).astype("<u4").tobytes()
    return hashlib.sha256(b"dpjax-key" + words).hexdigest()[:16]


def _leaf_fingerprint(leaf) -> str:
    if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
        return f"global{tuple(leaf.shape)}{leaf.dtype}"
    arr = np.ascontiguousarray(np.asarray(leaf))
    return f"{arr.shape}{arr.dtype}:" + hashlib.sha256(arr.tobytes()).hexdigest()[:16]


def _tree_fingerprint(tree) -> str:
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return hashlib.sha256((str(treedef) + "|".join(map(_leaf_fingerprint, leaves))).encode()).hexdigest()[:16]


def _row_offset(index, shape) -> int:
    """Flat index of a shard's first record (``index`` from :func:`_slices`), or a ValueError when the
    shard is not whole rows."""
    for axis, (sl, size) in enumerate(zip(index[1:], shape[1:]), start=1):
        if (sl.start, sl.stop) != (0, size):
            raise ValueError(
                f"values: a global array is released row by row: it must be partitioned along axis 0 "
                f"only, but axis {axis} is split (shard {index})"
            )
    return index[0].start * math.prod(shape[1:]) if index else 0


def _local_tree(tree, device, index, shape):
    """The pytree's leaves restricted to the shard ``index`` (on ``device``) of an array of ``shape``: a
    global leaf by its shard on the same device (it must have the array's shape and sharding), a local
    leaf broadcast and sliced, a scalar kept."""

    def leaf(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            if tuple(x.shape) != tuple(shape):
                raise ValueError(
                    f"mech: a per-record parameter given as a global array must have the values' shape "
                    f"{tuple(shape)}, got {tuple(x.shape)}"
                )
            for s in x.addressable_shards:
                if s.device == device and _slices(s.index, shape) == index:
                    return np.asarray(s.data)
            raise ValueError("mech: a per-record parameter given as a global array must be sharded like the values")
        if np.ndim(x) == 0:
            return x
        return np.asarray(np.broadcast_to(np.asarray(x), shape)[index])

    return jax.tree_util.tree_map(leaf, tree)


def _slices(index, shape):
    """A shard's index as a tuple of ``slice(start, stop)`` with both ends explicit, one per axis."""
    index = tuple(index) + (slice(None),) * (len(shape) - len(index))
    return tuple(slice(s.start or 0, s.stop if s.stop is not None else n) for s, n in zip(index, shape))


def _rebuilt(obj):
    """A (pytree) dataclass built again through its constructor, children first: its validation, deferred
    for global arrays (:func:`dpjax.validation.is_global`), runs on the shard's own entries."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return obj
    return dataclasses.replace(
        obj, **{f.name: _rebuilt(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init}
    )


def _each_shard(tree, shape, sharding, fn):
    """``[(device, fn(local_tree, offset))]`` over the addressable shards of ``sharding`` (local work; every
    mechanism in ``tree`` rebuilt on the shard's parameters, so that its constructor validates them)."""
    out = []
    for device, index in sharding.addressable_devices_indices_map(tuple(shape)).items():
        index = _slices(index, shape)
        local = jax.tree_util.tree_map(
            _rebuilt, _local_tree(tree, device, index, shape), is_leaf=dataclasses.is_dataclass
        )
        out.append((device, fn(local, _row_offset(index, shape))))
    return out


def _agreed(tag, work, tree, extra):
    """``work()`` (local; a ``ValueError`` is caught), then one agreement: an error on any process, different
    ``extra`` arguments or different mechanisms (``tree``'s fingerprint) raise on every process."""
    try:
        result, error = work(), None
    except ValueError as exc:
        result, error = None, str(exc)
    pays = agree(tag, {"error": error, "extra": extra, "tree": _tree_fingerprint(tree)})
    _refuse_if_any(tag, pays)
    if len({json.dumps(p["extra"], sort_keys=True) for p in pays}) > 1:
        raise ValueError(
            f"{tag} refused on every process: the processes passed different arguments: "
            + "; ".join(f"process {p}: {q['extra']}" for p, q in enumerate(pays))
        )
    if len({p["tree"] for p in pays}) > 1:
        raise ValueError(
            f"{tag} refused on every process: the processes passed different mechanisms (types or "
            "parameters differ; per-record parameters must be global arrays or equal on every process)"
        )
    return result


def global_records(local_values, *, mesh=None) -> jax.Array:
    """A global array of records from each process's rows (collective).

    The rows of process 0 first, then process 1's, …, sharded along axis 0.

    Args:
      local_values: this process's rows (at least one dimension).
      mesh: the device mesh (default: every device, one axis ``"records"``).

    Returns:
      The global ``jax.Array``.

    Raises:
      ValueError: on every process, when a process passes no rows, the processes hold different
        numbers of rows, row shapes or dtypes, or a process's devices do not divide its rows evenly.
    """
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    local = np.asarray(local_values)
    mesh = Mesh(np.asarray(jax.devices()), ("records",)) if mesh is None else mesh
    info = {
        "rows": int(local.shape[0]) if local.ndim else -1,
        "row": list(local.shape[1:]),
        "dtype": str(local.dtype),
        "devices": len(jax.local_devices()),
    }
    pays = agree("global_records", info) if active() else [info]
    if any(p["rows"] < 0 for p in pays):
        raise ValueError("local_values: every process must pass an array of rows (at least one dimension)")
    rows = [p["rows"] for p in pays]
    if len(set(rows)) > 1 or len({(tuple(p["row"]), p["dtype"]) for p in pays}) > 1:
        raise ValueError(
            f"local_values: every process must hold the same number of rows of the same shape and dtype, "
            f"got rows {rows}, row shapes {[tuple(p['row']) for p in pays]}, dtypes "
            f"{[p['dtype'] for p in pays]} (the process count must divide the data: pad or split it "
            "first)"
        )
    if rows[0] % info["devices"]:
        raise ValueError(
            f"local_values: each process's {rows[0]} rows must split evenly over its {info['devices']} devices"
        )
    return jax.make_array_from_process_local_data(NamedSharding(mesh, PartitionSpec(mesh.axis_names[0])), local)


def map_shards(tag, fn, tree, shape, sharding, *, extra=None) -> jax.Array:
    """Map a function over the addressable shards of a global array, agreed across processes (collective).

    Args:
      tag: the agreement's name.
      fn: ``fn(local_tree, offset)``: ``tree``'s leaves restricted to the shard (mechanisms rebuilt,
        so their constructors validate the shard's parameters), ``offset`` the flat index of its
        first record; returns the shard's output.
      tree: a pytree (values and mechanisms).
      shape: the global array's shape.
      sharding: its sharding (partitioned along axis 0 only).
      extra: JSON-able arguments that must be equal on every process.

    Returns:
      The outputs assembled into a global array with ``sharding``.

    Raises:
      ValueError: on every process, when ``fn`` raises one on any process, the ``extra`` arguments
        or the mechanisms differ between processes, or the sharding splits an axis other than 0.
    """
    results = _agreed(tag, lambda: _each_shard(tree, shape, sharding, fn), tree, extra)
    return jax.make_array_from_single_device_arrays(tuple(shape), sharding, [jax.device_put(r, d) for d, r in results])


def release(key, values, mech, *, start: int = 0, numerics: str = "float"):
    """:func:`dpjax.release` in a multi-process run (collective; see the module docstring).

    Args:
      key: a Threefry key, the same on every process.
      values: a global array of records (or process-local values on every process).
      mech: the mechanism (per-record parameters as global arrays sharded like ``values``).
      start: record index of ``values``' first record.
      numerics: ``"float"`` or ``"exact"``.

    Returns:
      The released global array, or ``None`` when every process passed process-local values (each
      then releases its own).

    Raises:
      ValueError: on every process, when any process's validation fails (as :func:`dpjax.release`),
        a process passes ``HostBits`` for a global array, the processes disagree on whether the
        values are global, hold different keys, or pass different mechanisms or options.
    """
    from dpjax.exact.bits import HostBits
    from dpjax.exact.lattice import check_index_range, release_exact
    from dpjax.mechanism import LANE_BLOCK, Mechanism, check_batch_shape
    from dpjax.random import MAX_RECORDS, check_key

    glob = isinstance(values, jax.Array) and not values.is_fully_addressable
    pay = {"global": glob, "error": None, "key": None}
    try:
        if glob and isinstance(key, HostBits):
            raise ValueError(
                "key: HostBits words differ on every process; a release across processes needs one "
                "Threefry key shared by all (e.g. secure_key() on process 0 sent to all with "
                "jax.experimental.multihost_utils.broadcast_one_to_all)"
            )
        if glob:
            pay["key"] = key_fingerprint(check_key(key))
    except ValueError as exc:
        pay["error"] = str(exc)
    pays = agree("dpjax.release", pay)
    kinds = [p["global"] for p in pays]
    if len(set(kinds)) > 1:
        raise ValueError(
            "values: dpjax.release refused on every process: values is a global array on processes "
            f"{[p for p, g in enumerate(kinds) if g]} but a process-local array on processes "
            f"{[p for p, g in enumerate(kinds) if not g]}; pass the same global array on every process "
            "(dpjax.multihost.global_records builds one from each process's rows)"
        )
    _refuse_if_any("dpjax.release", pays)
    if not glob:
        return None
    if len({p["key"] for p in pays}) > 1:
        raise ValueError(
            "key: dpjax.release refused on every process: the processes hold different keys (fingerprints "
            f"{[p['key'] for p in pays]}); a release across processes draws record i's noise from "
            "(key, i), so every process must pass the same key"
        )
    key = check_key(key)
    shape = tuple(values.shape)
    n = math.prod(shape)

    def prepare(local, offset):
        vals, m = local
        if not isinstance(m, Mechanism):
            raise ValueError(f"mech must be a dpjax mechanism, got {type(m).__name__}")
        check_finite_values("values", vals)
        if numerics == "exact":
            m = m.exact_lattice()
            check_index_range(m, vals)
        m.validate_values(vals)
        return vals, m, offset

    def work():
        check_int("start", start, minimum=0)
        if start + n + LANE_BLOCK > MAX_RECORDS:
            raise ValueError(f"start + number of records must be at most 2**32 per key, got {start + n}")
        if isinstance(mech, Mechanism):
            check_batch_shape(mech, shape)
        return _each_shard((values, mech), shape, values.sharding, prepare)

    options = {"shape": list(shape), "dtype": str(values.dtype), "start": repr(start), "numerics": numerics}
    plans = _agreed("dpjax.release", work, mech, options)
    from dpjax._draw import _cut, _release_whole

    outs = []
    for i, (device, (vals, m, offset)) in enumerate(plans):
        shard_key = key if i == 0 else jax.random.clone(key)  # each shard's records are disjoint: not a reuse
        squeeze = vals.ndim == 0
        vals = jax.device_put(vals.reshape(1) if squeeze else vals, device)
        if numerics == "exact":
            out = release_exact(shard_key, vals, m, start=start + offset)
        else:
            rows = _release_whole(shard_key, vals, m, np.uint32(start + offset))
            out = _cut(rows, vals.size, vals.shape)
        outs.append(jax.device_put(out.reshape(()) if squeeze else out, device))
    return jax.make_array_from_single_device_arrays(shape, values.sharding, outs)
