"""Releases, batch accounting and DP-SGD across two JAX processes (CPU, Gloo), bitwise against one process.

Each scenario group starts two processes once (``python -m dpjax.launch --processes 2`` running this
file as a script); they write their shards of every output, and the test compares the assembled
arrays with a one-process run of the same calls in the test process. The ``refusals`` group checks
that bad input raises the same clear error on both processes (never a hang: the launcher has a
timeout, and the agreement a short one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = 1001  # rows per process: not a multiple of the 128-record lane block
SEED = 11


def _data():
    rng = np.random.default_rng(SEED)
    return {
        "x": (rng.normal(size=(2 * ROWS, 3)) * 10).astype(np.float32),
        "sigma": rng.uniform(0.5, 3.0, size=2 * ROWS).astype(np.float32),
        "v": rng.normal(size=2 * ROWS).astype(np.float32),
        "counts": rng.integers(-1000, 1000, size=2 * ROWS).astype(np.int32),
        "batch_sigma": np.linspace(0.6, 3.0, 8).astype(np.float32),
        "xs": rng.normal(size=(64, 5)).astype(np.float32),
        "ys": (rng.uniform(size=64) > 0.5).astype(np.float32),
    }


def _releases(dpjax, key, glob):
    """The release scenarios: name → output, for global (``glob``: name → global array) or whole inputs."""
    import jax

    keys = jax.random.split(key, 8)
    boosted = dpjax.PrivacyBoosted(dpjax.Laplace(2.0), dpjax.AbsoluteError(1.5), 0.9)
    return {
        "laplace_2d": dpjax.release(keys[0], glob["x"], dpjax.Laplace(1.0), numerics="float"),
        "gaussian_per_record": dpjax.release(keys[1], glob["v"], dpjax.Gaussian(glob["sigma"]), numerics="float"),
        "laplace_start": dpjax.release(keys[2], glob["v"], dpjax.Laplace(0.5), start=7, numerics="float"),
        "pbdp": dpjax.release(keys[3], glob["v"], boosted, numerics="float"),
        "exact_laplace": dpjax.release(keys[4], glob["v"], dpjax.Laplace(1.0), numerics="exact"),
        "exact_gaussian": dpjax.release(keys[5], glob["x"], dpjax.Gaussian(2.0), numerics="exact"),
        "exact_discrete_laplace": dpjax.release(keys[6], glob["counts"], dpjax.DiscreteLaplace(3.0), numerics="exact"),
    }


def _batch_epsilon(dpjax, accounting, sigma):
    return accounting.get_epsilon(dpjax.Gaussian(sigma), 1e-5, count=10)


def _dpsgd(sharding=None, replicated=None):
    """Two DP-SGD steps of logistic regression; the batch sharded by ``sharding`` (None: one process)."""
    import jax
    import jax.numpy as jnp
    import optax

    import optimize

    d = _data()
    xs, ys = d["xs"], d["ys"]
    if sharding is not None:
        from dpjax.multihost import global_records

        half = len(xs) // 2
        p = jax.process_index()
        xs, ys = global_records(xs[p * half : (p + 1) * half]), global_records(ys[p * half : (p + 1) * half])

    def loss(params, x, y):
        logit = x @ params["w"] + params["b"]
        return optax.sigmoid_binary_cross_entropy(logit, y)

    out = {}
    for name, kwargs in (
        ("dpsgd_gaussian", {}),
        ("dpsgd_grid", {"mechanism": __import__("dpjax").DiscreteGaussian, "grid_step": 1e-3}),
    ):
        tx = optimize.dpsgd(0.5, 1.0, 1.1, jax.random.key(5), **kwargs)
        params = {"w": jnp.zeros((5,), jnp.float32), "b": jnp.zeros((), jnp.float32)}
        if replicated is not None:
            params = jax.device_put(params, replicated)
        state = jax.jit(tx.init)(params)

        @jax.jit
        def step(params, state, x, y):
            grads = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(params, x, y)
            updates, state = tx.update(grads, state, params)
            return optax.apply_updates(params, updates), state

        for _ in range(2):
            params, state = step(params, state, xs, ys)
        out[name] = np.concatenate(
            [np.asarray(params["w"].addressable_data(0)), np.asarray(params["b"].addressable_data(0)).reshape(1)]
        )
    return out


# -- the processes -----------------------------------------------------------------------------
def _save(outdir, name, arr):
    import jax

    shard = arr.addressable_shards[0]
    row = shard.index[0].start or 0 if shard.index else 0
    np.save(os.path.join(outdir, f"{name}__{jax.process_index()}__{row}.npy"), np.asarray(shard.data))


def _child_good(outdir):
    import jax

    import accounting
    import dpjax
    from dpjax.multihost import global_records
    from jax.sharding import NamedSharding, PartitionSpec

    p = jax.process_index()
    d = _data()
    rows = slice(p * ROWS, (p + 1) * ROWS)
    glob = {name: global_records(d[name][rows]) for name in ("x", "sigma", "v", "counts")}
    for name, out in _releases(dpjax, jax.random.key(SEED), glob).items():
        assert out.sharding == glob["x" if out.ndim == 2 else "v"].sharding, name
        _save(outdir, name, out)
    sig = global_records(d["batch_sigma"][p * 4 : (p + 1) * 4])
    _save(outdir, "batch_epsilon", _batch_epsilon(dpjax, accounting, sig))
    mesh = jax.sharding.Mesh(np.asarray(jax.devices()), ("records",))
    for name, params in _dpsgd(
        NamedSharding(mesh, PartitionSpec("records")), NamedSharding(mesh, PartitionSpec())
    ).items():
        np.save(os.path.join(outdir, f"{name}__{p}.npy"), params)


def _child_refusals(outdir):
    import threading
    import time

    import jax

    import dpjax
    from dpjax import multihost
    from dpjax.multihost import global_records

    p = jax.process_index()
    d = _data()
    v = d["v"][p * ROWS : (p + 1) * ROWS].copy()
    good = global_records(v)
    messages = {}

    def attempt(name, fn):
        try:
            fn()
            messages[name] = None
        except (ValueError, TimeoutError) as exc:
            messages[name] = f"{type(exc).__name__}: {exc}"

    with_nan = v.copy()  # (a global array may share its numpy buffer on the CPU)
    if p == 1:
        with_nan[5] = np.nan
    attempt(
        "nan_on_one",
        lambda: dpjax.release(jax.random.key(1), global_records(with_nan), dpjax.Laplace(1.0), numerics="float"),
    )
    attempt("keys_differ", lambda: dpjax.release(jax.random.key(p), good, dpjax.Laplace(1.0), numerics="float"))
    attempt(
        "local_on_one",
        lambda: dpjax.release(
            jax.random.key(1), good if p == 0 else np.asarray(v), dpjax.Laplace(1.0), numerics="float"
        ),
    )
    attempt("rows_differ", lambda: global_records(d["v"][: ROWS + p]))
    attempt("mech_differs", lambda: dpjax.release(jax.random.key(1), good, dpjax.Laplace(1.0 + p), numerics="float"))
    attempt(
        "exact_unsupported",
        lambda: dpjax.release(
            jax.random.key(1),
            good,
            dpjax.PrivacyBoosted(dpjax.Laplace(2.0), dpjax.AbsoluteError(1.5), 0.9),
            numerics="exact",
        ),
    )
    huge = v.copy()
    if p == 1:
        huge[7] = 1e13  # |value| / granularity past 2**62 for Laplace(1)'s lattice: only process 1 can see it
    attempt(
        "exact_range_on_one",
        lambda: dpjax.release(jax.random.key(1), global_records(huge), dpjax.Laplace(1.0), numerics="exact"),
    )
    sigma = d["sigma"][p * ROWS : (p + 1) * ROWS].copy()
    sigma[3] = -1.0 if p == 1 else sigma[3]  # the constructor cannot see it; the release validates each shard
    attempt(
        "sigma_invalid_on_one",
        lambda: dpjax.release(jax.random.key(1), good, dpjax.Gaussian(global_records(sigma)), numerics="float"),
    )
    attempt("calls_differ", lambda: multihost.agree("global_records" if p else "dpjax.release", {}))
    os.environ["DPJAX_AGREE_TIMEOUT"] = "2"
    if p == 0:  # process 1 never calls: process 0 must time out, not hang
        attempt("absent_peer", lambda: dpjax.release(jax.random.key(1), good, dpjax.Laplace(1.0), numerics="float"))
    else:  # alive meanwhile (a dead peer breaks the all-gather at once instead)
        time.sleep(8)
    with open(os.path.join(outdir, f"messages__{p}.json"), "w") as fh:
        json.dump(messages, fh)
    # process 0's timed-out all-gather is pending until process 1 has gone (and process 0, which hosts the
    # coordinator, must outlive it); both leave without JAX's teardown, as dpjax.launch's children do on an
    # uncaught error such as that TimeoutError
    while p == 0 and any(t.name == "dpjax-agree" for t in threading.enumerate()):
        time.sleep(0.1)
    os._exit(0)


# -- the tests ---------------------------------------------------------------------------------
def _child_fails(outdir):
    import jax

    from dpjax import multihost

    if jax.process_index() == 1:
        raise RuntimeError("process 1 fails before the agreement")
    multihost.agree("never", {}, timeout=600)  # process 1 never comes: the launcher must stop this process


def _launch(group, outdir, *options, status=0):
    import time

    t0 = time.monotonic()
    cmd = [
        sys.executable,
        "-m",
        "dpjax.launch",
        "--processes",
        "2",
        "--timeout",
        "240",
        *options,
        __file__,
        group,
        str(outdir),
    ]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == status, res.stdout[-3000:] + res.stderr[-6000:]
    print(f"{group}: two processes took {time.monotonic() - t0:.1f} s")
    return res


def _assembled(outdir, name):
    parts = sorted((int(f.split("__")[2][:-4]), f) for f in os.listdir(outdir) if f.startswith(name + "__"))
    return np.concatenate([np.load(os.path.join(outdir, f)) for _, f in parts])


@pytest.mark.slow
def test_two_processes_bitwise_one_process(tmp_path):
    import jax

    import accounting
    import dpjax

    _launch("good", tmp_path)
    d = _data()
    expected = _releases(dpjax, jax.random.key(SEED), {k: d[k] for k in ("x", "sigma", "v", "counts")})
    for name, want in expected.items():
        got = _assembled(tmp_path, name)
        assert got.dtype == np.asarray(want).dtype, name
        np.testing.assert_array_equal(got, np.asarray(want), err_msg=name)
    np.testing.assert_array_equal(
        _assembled(tmp_path, "batch_epsilon"), np.asarray(_batch_epsilon(dpjax, accounting, d["batch_sigma"]))
    )
    for name, want in _dpsgd().items():  # float and grid: the clipped sum's order is fixed, bitwise one process
        got0, got1 = (np.load(tmp_path / f"{name}__{p}.npy") for p in (0, 1))
        np.testing.assert_array_equal(got0, got1, err_msg=name)  # one noise draw, the same on both hosts
        np.testing.assert_array_equal(got0, want, err_msg=name)


@pytest.mark.slow
def test_bad_input_refused_on_every_process(tmp_path):
    _launch("refusals", tmp_path)
    m0, m1 = (json.loads((tmp_path / f"messages__{p}.json").read_text()) for p in (0, 1))
    for name, fragment in (
        ("nan_on_one", "process 1 reports: values contains 1 NaN"),
        ("keys_differ", "different keys"),
        ("local_on_one", "global array on processes [0] but a process-local array on processes [1]"),
        ("rows_differ", "same number of rows"),
        ("mech_differs", "different mechanisms"),
        ("exact_unsupported", "exact sampler only over DiscreteGaussian or DiscreteLaplace kernels"),
        ("exact_range_on_one", "process 1 reports: values: |value| / granularity must be below 2**"),
        ("sigma_invalid_on_one", "process 1 reports: sigma must lie in (0, inf)"),
        ("calls_differ", "the processes are at different collective calls"),
    ):
        for p, m in enumerate((m0, m1)):
            assert m[name] is not None and fragment in m[name], (name, p, m[name])
    assert m0["absent_peer"].startswith("TimeoutError") and "did not all arrive within 2 s" in m0["absent_peer"]


@pytest.mark.slow
def test_launcher_stops_the_others_when_one_process_fails(tmp_path):
    res = _launch("fails", tmp_path, "--grace", "1", status=1)
    assert "process 1 fails before the agreement" in res.stderr


if __name__ == "__main__":  # a process of a scenario group, under dpjax.launch
    {"good": _child_good, "refusals": _child_refusals, "fails": _child_fails}[sys.argv[1]](sys.argv[2])
