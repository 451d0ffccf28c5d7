"""One process against several on the same release: ``python benchmarks/throughput.py --processes 2``.

Runs the same work, a Laplace(1) release of ``--n`` float32 values, under ``python -m dpjax.launch``
with 1 process and with ``--processes`` processes (one CPU device each, Gloo collectives): each
process generates and holds its own rows of a global array (:func:`dpjax.multihost.global_records`)
and releases its shards. A timing is the slowest process's, best of ``--repeats`` after a warm-up
(compile); the throughput is n / that time. This measures the multi-controller route on one
machine (every process shares its cores); on a cluster the processes have a host each.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

import numpy as np


def worker(n: int, repeats: int) -> None:
    """One process of a run (under dpjax.launch): time its part of the release, print the slowest."""
    import jax

    import dpjax
    from dpjax import multihost

    count, me = jax.process_count(), jax.process_index()
    rows = n // count
    local = np.random.default_rng(me).random(rows, dtype=np.float32) * 1000
    x = multihost.global_records(local) if count > 1 else jax.numpy.asarray(local)
    mech = dpjax.Laplace(scale=1.0)
    keys = iter(jax.random.split(jax.random.key(0), repeats + 1))
    times = []
    for r in range(repeats + 1):
        if count > 1:
            multihost.agree("benchmark", {})  # start together
        t = time.perf_counter()
        dpjax.release(next(keys), x, mech, numerics="float").block_until_ready()
        elapsed = time.perf_counter() - t
        slowest = max(p["t"] for p in multihost.agree("benchmark", {"t": elapsed})) if count > 1 else elapsed
        if r:  # the first run compiles
            times.append(slowest)
    if me == 0:
        print("RESULT " + json.dumps({"processes": count, "n": rows * count, "seconds": min(times)}), flush=True)


def compare(n: int, processes: int, repeats: int) -> dict:
    """Launch 1 and ``processes`` processes on the same n values; print both throughputs."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores (CPU, one device per "
        f"process, Gloo); n = {n:.0e} float32, Laplace(1); load average {os.getloadavg()[0]:.2f}"
    )
    out = {}
    for p in sorted({1, processes}):
        cmd = [
            sys.executable,
            "-m",
            "dpjax.launch",
            "--processes",
            str(p),
            os.path.abspath(__file__),
            "--worker",
            str(n),
            str(repeats),
        ]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        line = next((l for l in res.stdout.splitlines() if l.startswith("RESULT ")), None)
        if line is None:
            raise SystemExit(f"{p} process(es) failed:\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}")
        r = json.loads(line[7:])
        out[p] = r["n"] / r["seconds"]
        print(f"{p} process(es): {r['seconds']:.3f} s, {out[p]:.3e} values/s")
    if processes != 1:
        print(f"{processes} processes / 1 process: {out[processes] / out[1]:.2f}x")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return out


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    worker(int(sys.argv[2]), int(sys.argv[3]))
