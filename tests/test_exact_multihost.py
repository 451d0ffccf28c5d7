"""Exact and float releases across two JAX processes at the sizes that shard (``SHARD_MIN_RECORDS`` records per
process and more), bitwise against one process releasing the whole array.

Each process must draw on its own addressable devices with the global record index: a sharding over
``jax.devices()`` (every process's devices) cannot be placed from one process. The two-process run is under
``-m slow``; the default suite keeps a one-process sibling (``jax.devices()`` listing another process's device).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 23


def _rows():
    from dpjax._draw import SHARD_MIN_RECORDS

    return SHARD_MIN_RECORDS + 128  # rows per process: a shard at the size that shards


def _data(rows):
    rng = np.random.default_rng(SEED)
    n = 2 * rows
    return {
        "v": (rng.normal(size=n) * 10).astype(np.float32),
        "counts": rng.integers(-1000, 1000, size=n).astype(np.int32),
        "cats": rng.integers(0, 4, size=n).astype(np.int32),
        "b_many": rng.uniform(0.5, 4.0, size=n),
        "b_few": np.repeat(np.array([1.0, 2.5, 3.0, 7.0]), n // 4 + 1)[:n],
        "eps": np.round(rng.uniform(0.1, 3.0, size=n), 2),
        "sigma_few": np.tile(np.array([1.5, 3.0, 5.0]), n // 3 + 1)[:n],
    }


def _releases(dpjax, key, d):
    """The routes: name → (key, values, mechanism) for the inputs ``d`` (values: numpy or global arrays)."""
    import jax

    keys = jax.random.split(key, 12)
    boosted = dpjax.PrivacyBoosted(dpjax.DiscreteLaplace(4.0), dpjax.AbsoluteError(3.0), 0.9)
    return {
        "exact_discrete_laplace": (keys[0], d["counts"], dpjax.DiscreteLaplace(3.0)),
        "exact_laplace": (keys[1], d["v"], dpjax.Laplace(1.0)),
        "exact_gaussian_lattice": (keys[2], d["v"], dpjax.Gaussian(2.0)),
        "exact_discrete_gaussian": (keys[3], d["counts"], dpjax.DiscreteGaussian(3.0)),
        "exact_laplace_per_record": (keys[4], d["v"], dpjax.Laplace(d["b_many"])),
        "exact_discrete_laplace_few_scales": (keys[5], d["counts"], dpjax.DiscreteLaplace(d["b_few"])),
        "exact_discrete_laplace_per_record": (keys[6], d["counts"], dpjax.DiscreteLaplace(d["b_many"])),
        "exact_rr_per_record": (keys[7], d["cats"], dpjax.RandomizedResponse(d["eps"], num_categories=4)),
        "exact_boosted": (keys[8], d["counts"], boosted),
        "exact_gaussian_few_scales": (keys[9], d["v"], dpjax.Gaussian(d["sigma_few"])),
        "float_laplace": (keys[10], d["v"], dpjax.Laplace(1.0)),
        "float_gaussian_per_record": (keys[11], d["v"], dpjax.Gaussian(d["sigma_few"].astype(np.float32))),
    }


def _release_all(dpjax, key, d, start=0, names=None):
    return {
        name: dpjax.release(k, values, mech, numerics="float" if name.startswith("float") else "exact", start=start)
        for name, (k, values, mech) in _releases(dpjax, key, d).items()
        if names is None or name in names
    }


def _child(outdir):
    import jax

    import dpjax
    from dpjax.multihost import global_records

    p = jax.process_index()
    rows = _rows()
    d = _data(rows)
    glob = {
        k: (global_records(v[p * rows : (p + 1) * rows]) if k in ("v", "counts", "cats") else v) for k, v in d.items()
    }
    for name, out in _release_all(dpjax, jax.random.key(SEED), glob).items():
        shard = out.addressable_shards[0]
        np.save(os.path.join(outdir, f"{name}__{shard.index[0].start or 0}.npy"), np.asarray(shard.data))


def _assembled(outdir, name):
    parts = sorted((int(f.split("__")[1][:-4]), f) for f in os.listdir(outdir) if f.startswith(name + "__"))
    return np.concatenate([np.load(os.path.join(outdir, f)) for _, f in parts])


@pytest.mark.slow
def test_two_processes_at_the_shard_size_bitwise_one_process(tmp_path):
    import jax

    import dpjax

    cmd = [sys.executable, "-m", "dpjax.launch", "--processes", "2", "--timeout", "500", __file__, str(tmp_path)]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-6000:]
    want = _release_all(dpjax, jax.random.key(SEED), _data(_rows()))
    for name, w in want.items():
        got = _assembled(tmp_path, name)
        assert got.dtype == np.asarray(w).dtype, name
        np.testing.assert_array_equal(got, np.asarray(w), err_msg=name)


def test_releases_shard_over_this_processs_devices_only(monkeypatch):
    """The default suite's sibling of the two-process test: with ``jax.devices()`` listing a device of another
    process (as in a multi-process run), a release at the shard size draws on this process's devices only and is
    unchanged (the exact and the float routes)."""
    import jax
    import jax.numpy as jnp

    import dpjax
    from dpjax._draw import SHARD_MIN_RECORDS

    x = jnp.asarray(np.arange(SHARD_MIN_RECORDS) % 1000, jnp.int32)
    key = jax.random.key(1)
    want = [
        np.asarray(dpjax.release(key, x, dpjax.DiscreteLaplace(3.0), numerics="exact")),
        np.asarray(dpjax.release(key, x.astype(jnp.float32), dpjax.Laplace(1.0))),
    ]
    real = jax.devices
    monkeypatch.setattr(jax, "devices", lambda *a, **k: [*real(*a, **k), "a device of another process"])
    got = [
        np.asarray(dpjax.release(key, x, dpjax.DiscreteLaplace(3.0), numerics="exact")),
        np.asarray(dpjax.release(key, x.astype(jnp.float32), dpjax.Laplace(1.0))),
    ]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


if __name__ == "__main__":  # a process of the two-process run, under dpjax.launch
    _child(sys.argv[1])
