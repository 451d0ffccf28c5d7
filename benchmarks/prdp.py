"""PrDP repetitions as one vmap against the NumPy reference of spec Appendix A, in the same run.

200 repetitions of the PrDP count (Algorithm 1), framework sum (Algorithm 2 + universal sum) and
framework max (Algorithm 2 + EM max on U_ℓ) on 2·10⁵ records (Normal(5·10⁴, 5·10⁴), inverse
E = 10⁴/v, U = 10¹², ε̂ = 100, β = 0.1 — Table 3's N1 column): dpjax runs the 200 repetitions as
one ``jit(vmap(...))`` call over keys; the anchor is ``examples/prdp_reference.py`` (spec
Appendix A, the code behind the spec's numbers) called once per repetition, as the paper's
experiments do. Also timed: one dpjax release per ``jit`` call (no vmap) and the cold first call
(tracing + XLA compilation). Reported: seconds per repetition, best of ``--repeats`` timings after
a warm-up, and the ratio numpy / dpjax.

    python benchmarks/prdp.py                    # 200 repetitions; numpy loop of 50 repetitions
    python benchmarks/prdp.py --numpy-reps 200   # the numpy loop over all 200 as well

The load average is printed before and after: on a shared machine compare ratios within one run.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import jax
import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_ROOT, "examples"))

import prdp_reference as ref  # noqa: E402

from dpjax import prdp  # noqa: E402


def _best(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=200, help="repetitions in the vmapped dpjax call")
    ap.add_argument("--numpy-reps", type=int, default=50, help="repetitions of the numpy loop")
    ap.add_argument("--repeats", type=int, default=3, help="timings per case (best kept)")
    args = ap.parse_args()

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.processor() or platform.platform()}; "
        f"jax {jax.__version__} on {jax.devices()[0].platform}, numpy {np.__version__}"
    )
    print(f"load average at start: {os.getloadavg()}")
    rng = np.random.default_rng(2025)
    x = ref.normal_data(rng, args.n, 5e4, 5e4)
    setting = ref.Setting("inv", 1e12)
    e = setting.E(x)
    fn = prdp.PrivacyFunction.inverse(1e12)
    upper_levels = np.asarray(fn.level_upper())
    kw = dict(eps_min=float(fn.eps_min), eps_max=100.0, beta=0.1)
    cases = {
        "count": (lambda k, x, e: prdp.count(k, e, **kw).estimate, lambda r: ref.prdp_count(r, setting, e, 0.1)),
        "framework sum": (
            lambda k, x, e: prdp.sum(k, x, e, upper=1e12, **kw).estimate,
            lambda r: ref.prdp_framework(r, setting, x, e, 0.1, ref.universal_sum),
        ),
        "framework max": (
            lambda k, x, e: prdp.max(k, x, e, upper=upper_levels, **kw).estimate,
            lambda r: ref.prdp_framework(r, setting, x, e, 0.1, ref.em_max, restrict_domain=True),
        ),
    }
    keys = jax.random.split(jax.random.key(0), args.reps)
    header = (
        f"{'mechanism':<15}{'dpjax vmap s/rep':>18}{'dpjax 1/call s':>16}{'numpy s/rep':>13}"
        f"{'ratio (vmap)':>14}{'ratio (1/call)':>16}{'cold s':>9}"
    )
    print(f"n = {args.n}, {args.reps} repetitions per vmapped call, numpy loop of {args.numpy_reps}")
    print(header)
    for name, (dpjax_fn, numpy_fn) in cases.items():
        with jax.enable_x64(True):  # the data enter jit as float64 arguments
            batched = jax.jit(jax.vmap(dpjax_fn, in_axes=(0, None, None)))
            single = jax.jit(dpjax_fn)
            t = time.perf_counter()
            jax.block_until_ready(batched(keys, x, e))
            cold = time.perf_counter() - t
            jax.block_until_ready(single(keys[0], x, e))
            vmap_s = _best(lambda: batched(keys, x, e), args.repeats) / args.reps
            one_s = _best(lambda: single(keys[1], x, e), args.repeats)
        r = np.random.default_rng(1)
        numpy_fn(r)  # warm-up
        numpy_s = _best(lambda: [numpy_fn(r) for _ in range(args.numpy_reps)], args.repeats) / args.numpy_reps
        print(
            f"{name:<15}{vmap_s:>18.3e}{one_s:>16.3e}{numpy_s:>13.3e}{numpy_s / vmap_s:>13.1f}×"
            f"{numpy_s / one_s:>15.1f}×{cold:>9.2f}"
        )
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
