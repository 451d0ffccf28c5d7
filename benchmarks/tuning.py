"""Gradient tuning vs the paper's Algorithm 2 (ternary search), same exact objective, same tolerance.

Both methods search ``u = log(σ/σ_base) ∈ [0, log 50]`` to the tolerance ``tol`` on u
(Algorithm 2: final interval width; gradient: last step), over a batch of settings in
one ``jit(vmap(...))`` call each; the objective is the exact closed-form ε at δ (single
release) or the exact Rényi divergence at α, both through ``PrivacyBoosted``'s own
closed-form hooks. Both warm-start the inner ε root solve from their previous iterates
(Algorithm 2: each third point from its previous value; gradient: the previous ε moved
along its slope). Wall times are whole ``tune_boosted`` calls (set-up, search, final
values, result), the best of ``--repeats`` runs after a first (compiling) run, measured
side by side in one process; compile time is first run minus best run. The machine's
load average is printed: on a shared machine absolute times are inflated, the ratio
measured side by side is what counts.

    python benchmarks/tuning.py [--tol 1e-6] [--repeats 3]
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import sys
import time

# benchmarks/accounting.py would shadow the accounting package: drop this folder from the path
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import numpy as np  # noqa: E402

import dpjax  # noqa: E402
import optimize  # noqa: E402


def settings():
    """120 (ε, δ) settings and 120 RDP settings: ΔQ × ρ × |S| × (δ | α)."""
    grid = list(itertools.product([1.0, 2.0, 4.0], [0.7, 0.8, 0.9, 0.95], [5.0, 10.0, 20.0, 30.0, 40.0]))
    sens, rho, size = (np.array(c, float) for c in zip(*grid))
    dp = dict(
        sensitivity=np.tile(sens, 2),
        rho=np.tile(rho, 2),
        size=np.tile(size, 2),
        delta=np.repeat([1e-5, 1e-7], len(grid)),
    )
    rdp = dict(
        sensitivity=np.tile(sens, 2),
        rho=np.tile(rho, 2),
        size=np.tile(size, 2),
        order=np.repeat([10.0, 100.0], len(grid)),
    )
    return dp, rdp


def run(method, s, tol, target):
    kw = {target: s[target]}
    return optimize.tune_boosted(
        region=dpjax.AbsoluteError(s["size"] / 2),
        rho=s["rho"],
        sensitivity=s["sensitivity"],
        method=method,
        tol=tol,
        **kw,
    )


def timed(fn, repeats):
    t0 = time.perf_counter()
    out = fn()
    np.asarray(out.epsilon)
    first = time.perf_counter() - t0
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        np.asarray(out.epsilon)
        best = min(best, time.perf_counter() - t0)
    return out, first, best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    dp, rdp = settings()
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, "
        f"JAX backend {__import__('jax').default_backend()}, load average {os.getloadavg()[0]:.2f} (start)"
    )
    print(f"tolerance on u = log(σ/σ_base): {args.tol:g}; best of {args.repeats} runs after a compile run\n")
    head = (
        f"{'objective':<12}{'settings':>9}{'method':>10}{'compile s':>11}{'run s':>9}"
        f"{'steps max/mean':>16}{'evals':>7}{'ratio':>8}{'max |Δε|/ε':>12}{'ε ≤ base':>10}"
    )
    print(head)
    print("-" * len(head))
    for name, s, target in (("(ε,δ) exact", dp, "delta"), ("RDP exact", rdp, "order")):
        res = {}
        for method in ("ternary", "gradient"):
            res[method] = timed(lambda: run(method, s, args.tol, target), args.repeats)
        t_run = res["ternary"][2]
        ref = np.asarray(res["ternary"][0].epsilon)
        for method in ("ternary", "gradient"):
            out, first, best = res[method]
            steps = np.asarray(out.steps)
            # ternary: 2 per iteration + the final u* and u = 0; gradient: 1 fused value+slope per step
            evals = 2 * steps.max() + 2 if method == "ternary" else steps.max()
            diff = np.max(np.abs(np.asarray(out.epsilon) - ref) / ref)
            ok = bool(np.all(np.asarray(out.epsilon) <= np.asarray(out.baseline_epsilon) + 1e-9))
            print(
                f"{name:<12}{len(s['rho']):>9}{method:>10}{first - best:>11.2f}{best:>9.4f}"
                f"{steps.max():>9}/{steps.mean():<6.1f}{evals:>7}{t_run / best:>8.2f}{diff:>12.1e}{str(ok):>10}"
            )
    print(f"\nload average {os.getloadavg()[0]:.2f} (end)")
    print(
        "evals: objective evaluations per setting at the batch maximum (ternary: 2 per iteration + u* and u = 0; "
        "gradient: 1 fused value+slope per step, u = 0 being its first); vmap runs every setting for the batch's "
        "maximum.\nratio: ternary run time / this run time."
    )


if __name__ == "__main__":
    main()
