"""Composite DP benchmark: tune_composite (gradient) vs the paper's 3-stage grid on the same
objective, and release throughput against Laplace, in one run.

The grid is the released code's (github.com/CompositeDP/CompositeDP, ``optimize.composite.paper_grid_search``):
stage 1 ``y, k ∈ [0, 1)``, ``m ∈ [0, 2]`` by 0.1; stages 2 and 3 ``[best ± 0.1)`` by 0.01 and
``[best ± 0.01)`` by 0.001 in all three parameters — the number of points it scores is printed.
Both methods are timed through ``optimize.tune_composite`` (A1B1, the paper's centre objective,
W = Δf = 1, the same 8 ε), best of ``--repeats`` after a warm-up call.

Run: ``PYTHONPATH=. python benchmarks/composite.py [--n 10000000] [--repeats 5]``
"""

import argparse
import os
import platform
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]  # benchmarks/accounting.py

import jax
import jax.numpy as jnp
import numpy as np

import dpjax
import optimize
import optimize.composite as oc


def best_of(fn, reps=3):
    out, best = None, float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def grid_points(eps):
    """Points the paper's grid scores (feasible or not) for each ε."""
    n = [0]
    score = oc._paper_score

    def counted(*a):
        n[0] += 1
        return score(*a)

    oc._paper_score = counted
    try:
        for e in eps:
            oc.paper_grid_search("rectangle", "uniform", float(e))
    finally:
        oc._paper_score = score
    return n[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10**7)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, jax {jax.__version__}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    eps = np.array([0.2, 0.3, 0.4, 0.5, 1.0, 2.0, 3.0, 5.0])
    t = time.perf_counter()
    optimize.tune_composite(eps, window=(0, 1))
    cold = time.perf_counter() - t
    tg, g = best_of(lambda: optimize.tune_composite(eps, window=(0, 1)), args.repeats)
    optimize.tune_composite(eps[:1], window=(0, 1), method="paper_grid")  # warm the eager post-processing
    tp, p = best_of(lambda: optimize.tune_composite(eps, window=(0, 1), method="paper_grid"), args.repeats)
    tl, _ = best_of(lambda: [oc.paper_grid_search("rectangle", "uniform", float(e)) for e in eps], args.repeats)
    npts = grid_points(eps)
    print(
        f"tuning A1B1 centre, {len(eps)} eps: gradient {tg * 1e3:.2f} ms warm (first call of the process, "
        f"with compilation: {cold:.2f} s); paper grid {tp * 1e3:.1f} ms ({tl * 1e3:.1f} ms in its loops, "
        f"{npts} points scored, {npts / len(eps):.0f} per eps)"
    )
    print(f"  speed-up {tp / tg:.0f}x warm, {tp / cold:.2f}x against the gradient's first call")
    print("  variance gradient / grid: " + " ".join(f"{a / b:.5f}" for a, b in zip(g.variance, p.variance)))
    print(f"  closed-form gap of the gradient optimum: {np.max(np.abs(g.closed_form['relative_gap'])):.1e}")
    mech = jax.tree_util.tree_map(lambda x: x[4] if jnp.ndim(x) else x, g.mechanism)
    values = jnp.full((args.n,), 0.3, jnp.float32)
    lap = dpjax.Laplace(1.0)
    rates = {}
    for name, m in (("Laplace", lap), ("Composite A1B1", mech)):
        dpjax.release(jax.random.key(0), values, m).block_until_ready()
        tr, _ = best_of(lambda m=m: dpjax.release(jax.random.key(1), values, m).block_until_ready(), args.repeats)
        rates[name] = args.n / tr
        print(f"release {args.n:.0e} values, {name}: {tr:.3f} s ({args.n / tr / 1e6:.1f} M/s)")
    print(f"  composite / Laplace throughput: {rates['Composite A1B1'] / rates['Laplace']:.2f}")


if __name__ == "__main__":
    main()
