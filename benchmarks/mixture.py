"""Release throughput of the piecewise mixtures (Lap_m, Geom_m) against Laplace / discrete Laplace, same run.

    python benchmarks/mixture.py            # 10^7 values, best of 5 after a warm-up
    python benchmarks/mixture.py --n 1e8

Acceptance (issue 10): a Lap_m release of 10^7 values at >= 0.8x the Laplace release of the
same run. Both samplers are one-uniform inverse CDFs (the mixture's is branch-free: both
pieces computed, one selected), so the gap is the extra log/exp of the second piece.
Also times the closed-form accounting the mixtures add (pure ε, exact ε(δ), a 10-fold PLD).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]  # benchmarks/accounting.py

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import accounting  # noqa: E402
import dpjax  # noqa: E402


def _best(fn, repeats):
    jax.block_until_ready(fn())
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=1e7)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    n = int(args.n)
    print(f"devices: {jax.devices()}; load average {os.getloadavg()}")
    key = jax.random.key(0)
    cases = {
        "Laplace(scale=5)": (dpjax.Laplace(5.0), jnp.float32),
        "LaplaceMixture(eps=.2, r=5, c=5)": (dpjax.LaplaceMixture.from_epsilon(0.2, 5.0, 5.0), jnp.float32),
        "LaplaceMixture(eps=9, r=.3, c=.375)": (dpjax.LaplaceMixture.from_epsilon(9.0, 0.3, 0.375), jnp.float32),
        "DiscreteLaplace(scale=5)": (dpjax.DiscreteLaplace(5.0), jnp.int32),
        "GeometricMixture(eps=.2, r=5, c=5)": (dpjax.GeometricMixture.from_epsilon(0.2, 5.0, 5), jnp.int32),
    }
    times = {}
    for name, (mech, dt) in cases.items():
        x = jnp.zeros(n, dt)
        release = jax.jit(lambda k, v, m=mech: dpjax.release(k, v, m))
        times[name] = _best(lambda: release(key, x), args.repeats)
        print(f"{name:40s} {n / times[name] / 1e6:9.1f} M values/s")
    lap = times["Laplace(scale=5)"]
    for name in list(cases)[1:3]:
        print(f"{name}: {lap / times[name]:.2f}x the Laplace release")
    print(
        f"GeometricMixture: {times['DiscreteLaplace(scale=5)'] / times['GeometricMixture(eps=.2, r=5, c=5)']:.2f}x "
        "the discrete Laplace release"
    )
    g = dpjax.GeometricMixture.from_epsilon(0.2, 5.0, 5)
    m = dpjax.LaplaceMixture.from_epsilon(0.2, 5.0, 5.0)
    for label, fn in [
        ("exact eps(1e-5), Lap_m (closed-form path supremum)", lambda: accounting.exact.epsilon(m, 1e-5)),
        (
            "pld(Geom_m).self_compose(10) eps(1e-6)",
            lambda: accounting.pld(g).self_compose(10).get_epsilon_for_delta(1e-6),
        ),
    ]:
        t = time.perf_counter()
        v = float(np.asarray(fn()))
        print(f"{label}: {v:.5f} in {time.perf_counter() - t:.2f} s (first call, compile included)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
