"""Composite DP benchmark: tune_composite (gradient) vs the paper's 3-stage grid on the same
objective, and release throughput against Laplace, in one run.

Run: ``PYTHONPATH=. python benchmarks/composite.py [--n 10000000]``
"""

import argparse
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]  # benchmarks/accounting.py

import jax
import jax.numpy as jnp
import numpy as np

import dpjax
import optimize


def best_of(fn, reps=3):
    out, best = None, float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10**7)
    args = ap.parse_args()
    eps = np.array([0.2, 0.3, 0.4, 0.5, 1.0, 2.0, 3.0, 5.0])
    t = time.perf_counter()
    g = optimize.tune_composite(eps, window=(0, 1))
    cold = time.perf_counter() - t
    tg, g = best_of(lambda: optimize.tune_composite(eps, window=(0, 1)))
    tp, p = best_of(lambda: optimize.tune_composite(eps, window=(0, 1), method="paper_grid"), reps=1)
    print(f"tuning A1B1 centre, {len(eps)} eps: gradient {tg:.3f} s (cold {cold:.2f} s), paper grid {tp:.3f} s, "
          f"speed-up {tp / tg:.1f}x warm, {tp / cold:.1f}x cold")
    print("  variance gradient / grid: " + " ".join(f"{a / b:.5f}" for a, b in zip(g.variance, p.variance)))
    mech = jax.tree_util.tree_map(lambda x: x[4] if jnp.ndim(x) else x, g.mechanism)
    values = jnp.full((args.n,), 0.3, jnp.float32)
    lap = dpjax.Laplace(1.0)
    for name, m in (("Laplace", lap), ("Composite A1B1", mech)):
        dpjax.release(jax.random.key(0), values, m).block_until_ready()
        tr, _ = best_of(lambda m=m: dpjax.release(jax.random.key(1), values, m).block_until_ready())
        print(f"release {args.n:.0e} values, {name}: {tr:.3f} s ({args.n / tr / 1e6:.1f} M/s)")


if __name__ == "__main__":
    main()
