"""Exact randomized response with per-record ε through ``dpjax.release(..., numerics="exact")``, ε laid out in
several ways, each release paired with the float Laplace(1) release of the same n (alternating runs, medians of
wall-clock and CPU time), and beside it the path the public call took before the keep-threshold table: the host
lattice, ``rr.exact_lattice()`` then its release (``--before``).

    python benchmarks/rr_epsilon.py                 # n = 10^7, k = 4
    python benchmarks/rr_epsilon.py --before --repeats 5

The load average is printed with every row: on a shared machine, ratios are only comparable within one run.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

import dpjax
from dpjax.exact import lattice


def layouts(n):
    """(name, per-record ε) of the cases: the row of ``throughput.py --exact``, tiers interleaved or in blocks, many
    values, and values the table's sample of ε misses (completed on the host, or joining the table and run again)."""
    blocks = np.repeat(np.linspace(0.5, 3.0, 40), -(-n // 40))[:n].astype(np.float32)
    sampled = np.sort(lattice._sample_positions(n))
    gap = int(np.argmax(np.diff(sampled)))  # the widest gap between sampled records
    few, some = blocks.copy(), blocks.copy()
    few[sampled[gap] + 1 : sampled[gap] + 41] = 7.25
    some[sampled[gap] + 1 : sampled[gap] + 2001] = 7.25
    hidden = np.full(n, 2.0, np.float32)
    hidden[sampled] = 0.5
    return [
        ("40 values, cycled (throughput.py's row)", np.resize(np.linspace(0.5, 3.0, 40), n).astype(np.float32)),
        ("2 tiers, alternating", np.where(np.arange(n) % 2 == 0, 0.5, 2.0).astype(np.float32)),
        ("40 tiers in blocks", blocks),
        ("300 values, float64", np.resize(np.linspace(0.1, 4.0, 300), n)),
        ("1000 values", np.resize(np.linspace(0.1, 4.0, 1000), n).astype(np.float32)),
        ("+ 40 records off the sample (host)", few),
        ("+ 2000 records off the sample (rerun)", some),
        ("a value on all records but the sampled", hidden),
    ]


def paired(fn, anchor, repeats):
    """(anchor / fn) of the median wall-clock and of the median CPU time (both threads) over ``repeats``
    alternating runs of the two, after one warm-up of each."""
    fn(), anchor()
    wall, cpu = ([], []), ([], [])
    for _ in range(repeats):
        for i, f in enumerate((anchor, fn)):
            t, c = time.perf_counter(), time.process_time()
            f()
            wall[i].append(time.perf_counter() - t)
            cpu[i].append(time.process_time() - c)
    (wa, wf), (ca, cf) = ([np.median(x) for x in pair] for pair in (wall, cpu))
    return wa / wf, ca / cf


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=float, default=1e7)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--before", action="store_true", help="also the host lattice (the path before the table)")
    args = p.parse_args(argv)
    n = int(args.n)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {jax.devices()[0].platform}; "
        f"jax {jax.__version__}; n = {n:.0e}, k = {args.k}; load average {os.getloadavg()[0]:.2f}"
    )
    keys = iter(jax.random.split(jax.random.key(0), 100_000))
    xf = jnp.asarray(np.random.default_rng(0).random(n, dtype=np.float32) * 1000)
    x = xf.astype(jnp.int32) % args.k
    reference = lambda: dpjax.release(next(keys), xf, dpjax.Laplace(1.0), numerics="float").block_until_ready()
    print(f"{'ε layout':<42}{'exact / float Laplace (wall, CPU)':>36}{'before (wall, CPU)':>22}")
    for name, eps in layouts(n):
        rr = dpjax.RandomizedResponse(jnp.asarray(eps), args.k)
        w, c = paired(
            lambda: dpjax.release(next(keys), x, rr, numerics="exact").block_until_ready(), reference, args.repeats
        )
        before = ""
        if args.before:
            bw, bc = paired(
                lambda: lattice.release_exact(next(keys), x, rr.exact_lattice()).block_until_ready(),
                reference,
                args.repeats,
            )
            before = f"{bw:>13.3f}x {bc:.3f}x"
        print(f"{name:<42}{w:>27.3f}x {c:.3f}x{before}   (load {os.getloadavg()[0]:.2f})", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
