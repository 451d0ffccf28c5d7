"""Before/after: the release and accounting hot paths timed on two checkouts, interleaved in one run.

    python benchmarks/revisions.py --base ../dpjax-old        # another checkout (e.g. a git worktree)

Each case runs in a fresh subprocess per checkout (PYTHONPATH = that checkout), alternating
base / head ``--rounds`` times; the best time of each side is kept, so a shared machine's load
hits both sides alike. Prints head/base ratios (> 1: head slower).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CASES = {
    "release Laplace 1e7": """
import jax, jax.numpy as jnp, dpjax
x = jnp.arange(10_000_000, dtype=jnp.float32); m = dpjax.Laplace(scale=1.0)
run = lambda: dpjax.release(jax.random.key(0), x, m).block_until_ready()""",
    "release Gaussian 1e7": """
import jax, jax.numpy as jnp, dpjax
x = jnp.arange(10_000_000, dtype=jnp.float32); m = dpjax.Gaussian(sigma=1.0)
run = lambda: dpjax.release(jax.random.key(0), x, m).block_until_ready()""",
    "release DiscreteLaplace 1e7": """
import jax, jax.numpy as jnp, dpjax
x = jnp.arange(10_000_000, dtype=jnp.int32); m = dpjax.DiscreteLaplace(scale=2.0)
run = lambda: dpjax.release(jax.random.key(0), x, m).block_until_ready()""",
    "release PB Gaussian AbsoluteError 1e7": """
import jax, jax.numpy as jnp, dpjax
x = jnp.arange(10_000_000, dtype=jnp.float32)
m = dpjax.PrivacyBoosted(dpjax.Gaussian(3.0), dpjax.AbsoluteError(5.0), 0.9)
run = lambda: dpjax.release(jax.random.key(0), x, m).block_until_ready()""",
    "release PB Laplace RelativeError 1e7": """
import jax, jax.numpy as jnp, dpjax
x = jnp.arange(10_000_000, dtype=jnp.float32)
m = dpjax.PrivacyBoosted(dpjax.Laplace(3.0), dpjax.RelativeError(0.01, 5.0), 0.9)
run = lambda: dpjax.release(jax.random.key(0), x, m).block_until_ready()""",
    "pld Gaussian grid T=1000": """
import accounting, dpjax
grid = accounting.pld(dpjax.Gaussian(1.0), use_analytic=False)
run = lambda: float(grid.self_compose(1000).get_epsilon_for_delta(1e-6))""",
    "pld subsampled Gaussian T=1e4": """
import accounting, dpjax
sampled = accounting.pld(dpjax.Gaussian(1.0), sampling_prob=0.01)
run = lambda: float(sampled.self_compose(10000).get_epsilon_for_delta(1e-5))""",
    "batch eps of 1000 Gaussians T=100": """
import numpy as np, jax.numpy as jnp, accounting, dpjax
m = dpjax.Gaussian(sigma=jnp.linspace(0.5, 5.0, 1000))
run = lambda: np.asarray(accounting.get_epsilon(m, 1e-6, count=100))""",
    "pld PB Gaussian AbsoluteError": """
import accounting, dpjax
m = dpjax.PrivacyBoosted(dpjax.Gaussian(1.0), dpjax.AbsoluteError(2.0), 0.9)
run = lambda: float(accounting.pld(m).get_epsilon_for_delta(1e-6))""",
}

TIMER = """
import json, time
{setup}
run()
best = min((lambda t: (run(), time.perf_counter() - t)[1])(time.perf_counter()) for _ in range({repeats}))
print(json.dumps(best))
"""


def _time(tree, setup, repeats):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    out = subprocess.run(
        [sys.executable, "-c", TIMER.format(setup=setup, repeats=repeats)],
        env=env,
        capture_output=True,
        text=True,
        cwd=os.path.abspath(tree),
    )
    if out.returncode:
        return None, out.stderr.strip().splitlines()[-1]
    return json.loads(out.stdout.strip().splitlines()[-1]), None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="path of the 'before' checkout")
    p.add_argument("--head", default=os.path.join(os.path.dirname(__file__), ".."), help="the 'after' checkout")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--only", help="substring of the case names to run")
    args = p.parse_args(argv)
    print(f"load average before: {os.getloadavg()}")
    print("| case | base s | head s | head/base |\n|---|---|---|---|")
    for name, setup in CASES.items():
        if args.only and args.only not in name:
            continue
        best = {"base": float("inf"), "head": float("inf")}
        err = None
        for _ in range(args.rounds):
            for side in ("base", "head"):
                t, e = _time(getattr(args, side), setup, args.repeats)
                if t is None:
                    err = f"{side}: {e}"
                else:
                    best[side] = min(best[side], t)
        ratio = best["head"] / best["base"] if err is None else float("nan")
        print(
            f"| {name} | {best['base']:.4g} | {best['head']:.4g} | {ratio:.2f}× |" + (f" {err}" if err else ""),
            flush=True,
        )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
