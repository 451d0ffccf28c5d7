"""Throughput of ``dpjax.release`` against numpy's Generator doing the same work.

Both sides compute ``values + noise`` for the same float32 values (numpy draws
float64 noise as its Generator does and casts; dpjax draws in the values' dtype).
Timings are the best of ``--repeats`` runs after one warm-up (JIT compile); ``--exact`` reports medians and, beside
each exact row, its device program alone (the same call without the host work around it).

    python benchmarks/throughput.py            # 10^7 values
    python benchmarks/throughput.py --n 1e9    # on a GPU
    python benchmarks/throughput.py --only PrivacyBoosted   # PB-DP rows (and the Gaussian anchor)
    python benchmarks/throughput.py --exact --n 4e6          # the exact tier through dpjax.release(numerics="exact")
                                                             # against the float Laplace release (and OpenDP's
                                                             # sampler if installed)
    python benchmarks/throughput.py --processes 2 --n 1e8    # 1 vs 2 JAX processes (benchmarks/processes.py)

The load average is printed before and after: on a shared machine, ratios are only
comparable within one run.
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


def _times(fn, repeats):
    """Seconds of ``repeats`` timed runs of ``fn`` after one warm-up (JIT compile)."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def _best(fn, repeats):
    return min(_times(fn, repeats))


def _median(fn, repeats):
    """The median run (under load the best run flatters whichever row got a quiet moment)."""
    return float(np.median(_times(fn, repeats)))


def _device_program(call):
    """A function re-running the device program that the public ``call`` ran first (``lattice._fast_lattice`` or
    ``lattice._per_record_lattice``, with the same arguments: the program over every record, not a later one over
    the few records a float32 decision left open), or None when it ran neither: the program alone, without the host
    work around it."""
    from dpjax.exact import lattice

    seen = {}
    originals = {name: getattr(lattice, name) for name in ("_fast_lattice", "_per_record_lattice")}

    def spy(name):
        def run(*args, **kwargs):
            seen.setdefault("call", (originals[name], args, kwargs))
            return originals[name](*args, **kwargs)

        return run

    for name in originals:
        setattr(lattice, name, spy(name))
    try:
        call()
    finally:
        for name, fn in originals.items():
            setattr(lattice, name, fn)
    if "call" not in seen:
        return None
    fn, args, kwargs = seen["call"]

    def again():
        with jax.enable_x64(True):
            return fn(*args, **kwargs).block_until_ready()

    return again


def _numpy_cases(rng, x):
    n = x.shape[0]
    a = np.exp(-1.0 / 2.0)
    return {
        "Laplace(scale=1)": lambda: x + rng.laplace(0.0, 1.0, n).astype(np.float32),
        "Gaussian(sigma=1)": lambda: x + rng.normal(0.0, 1.0, n).astype(np.float32),
        # two-sided geometric as the difference of two geometrics, on int32 values
        "DiscreteLaplace(scale=2)": lambda: (
            x.astype(np.int32) + (rng.geometric(1 - a, n) - rng.geometric(1 - a, n)).astype(np.int32)
        ),
    }


def dpjax_cases():
    return {
        "Laplace(scale=1)": (dpjax.Laplace(scale=1.0), jnp.float32),
        "Gaussian(sigma=1)": (dpjax.Gaussian(sigma=1.0), jnp.float32),
        "DiscreteLaplace(scale=2)": (dpjax.DiscreteLaplace(scale=2.0), jnp.int32),
    }


def extra_cases():
    """Mechanisms without a numpy counterpart, reported against the plain Gaussian release."""
    g = dpjax.Gaussian(sigma=3.0)
    return {
        "PrivacyBoosted(Gaussian, Abs |S|=10, rho=.9)": (
            dpjax.PrivacyBoosted(g, dpjax.AbsoluteError(5.0), 0.9),
            jnp.float32,
        ),
        "PrivacyBoosted(Gaussian, Rel 1%+5, rho=.9)": (
            dpjax.PrivacyBoosted(g, dpjax.RelativeError(0.01, 5.0), 0.9),
            jnp.float32,
        ),
        "PrivacyBoosted(Gaussian, Fixed, rho=.9)": (
            dpjax.PrivacyBoosted(g, dpjax.FixedInterval(-10.0, 1010.0), 0.9),
            jnp.float32,
        ),
        "PrivacyBoosted(Laplace, Abs |S|=10, rho=.9)": (
            dpjax.PrivacyBoosted(dpjax.Laplace(3.0), dpjax.AbsoluteError(5.0), 0.9),
            jnp.float32,
        ),
        "PrivacyBoosted(Laplace, Rel 1%+5, rho=.9)": (
            dpjax.PrivacyBoosted(dpjax.Laplace(3.0), dpjax.RelativeError(0.01, 5.0), 0.9),
            jnp.float32,
        ),
        "PrivacyBoosted(Laplace, Fixed, rho=.9)": (
            dpjax.PrivacyBoosted(dpjax.Laplace(3.0), dpjax.FixedInterval(-10.0, 1010.0), 0.9),
            jnp.float32,
        ),
        "PrivacyBoosted(DiscreteLaplace, Abs, rho=.9)": (
            dpjax.PrivacyBoosted(dpjax.DiscreteLaplace(3.0), dpjax.AbsoluteError(5.0), 0.9),
            jnp.int32,
        ),
        "LaplaceMixture(eps=.2, r=5, c=5)": (dpjax.LaplaceMixture.from_epsilon(0.2, 5.0, 5.0), jnp.float32),
        "GeometricMixture(eps=.2, r=5, c=5)": (dpjax.GeometricMixture.from_epsilon(0.2, 5.0, 5), jnp.int32),
    }


def exact_table_cases(n):
    """The rows of issue 21's table: (name, mechanism, values dtype) released through
    ``dpjax.release(..., numerics="exact")`` against the float Laplace release of the same n."""
    dl = [
        ("DiscreteLaplace(scale 0.5)", dpjax.DiscreteLaplace(0.5)),
        ("DiscreteLaplace(scale 1)", dpjax.DiscreteLaplace(1.0)),
        ("DiscreteLaplace(scale 3)", dpjax.DiscreteLaplace(3.0)),
        ("DiscreteLaplace(scale 100)", dpjax.DiscreteLaplace(100.0)),
        ("DiscreteLaplace(scale 2^20)", dpjax.DiscreteLaplace(2.0**20)),
    ]
    rows = [(name, m, jnp.int32) for name, m in dl]
    rows += [
        ("DiscreteLaplace(scale 2^30), float values", dpjax.DiscreteLaplace(2.0**30), jnp.float32),
        ("Laplace(1) (lattice 2^-20)", dpjax.Laplace(1.0), jnp.float32),
        ("Gaussian(1) (lattice 2^-12)", dpjax.Gaussian(1.0), jnp.float32),
        ("Laplace with per-record scales 1..2", dpjax.Laplace(jnp.linspace(1.0, 2.0, n)), jnp.float32),
        ("DiscreteLaplace, per-record scales 0.5..5", dpjax.DiscreteLaplace(jnp.linspace(0.5, 5.0, n)), jnp.int32),
    ]
    rows += [
        (f"DiscreteGaussian(sigma {s:g})", dpjax.DiscreteGaussian(s), jnp.int32 if s < 1e4 else jnp.float32)
        for s in (0.1, 1.0, 100.0, 1e6)
    ]
    rows += [
        ("RandomizedResponse(eps 1, k 4)", dpjax.RandomizedResponse(1.0, 4), jnp.int32),
        (
            "RandomizedResponse, per-record eps (40 values)",
            dpjax.RandomizedResponse(jnp.asarray(np.resize(np.linspace(0.5, 3.0, 40), n)), 4),
            jnp.int32,
        ),
    ]
    return rows


def exact_rows(n, repeats, key):
    """The exact tier through the public call: every row of :func:`exact_table_cases` and the boosted discrete
    release, each against the float Laplace release of the same n (and the float discrete Gaussian against
    the float discrete Laplace); the integer discrete Laplace sampler alone (t = 2^20); OpenDP's exact discrete
    Laplace sampler (``opendp.measurements.make_laplace`` on a vector of integers, same scale, same n) when it
    is installed — a benchmark-only dependency (``pip install opendp``; measured with 0.16.0), not one of dpjax's.
    Rows slower than 10^6 records/s (the state machine) are timed once after the warm-up."""
    from dpjax.exact import ThreefryWords, cks

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {jax.devices()[0].platform}; "
        f"jax {jax.__version__}; n = {n:.0e}; load average {os.getloadavg()[0]:.2f}"
    )
    keys = iter(jax.random.split(key, 1000))
    xf = jnp.asarray(np.random.default_rng(0).random(n, dtype=np.float32) * 1000)
    data = {jnp.float32: xf, jnp.int32: xf.astype(jnp.int32)}

    def rate(mech, x, numerics, reps=repeats):
        return n / _median(lambda: dpjax.release(next(keys), x, mech, numerics=numerics).block_until_ready(), reps)

    def call(mech, x, numerics="exact"):
        return lambda: dpjax.release(next(keys), x, mech, numerics=numerics).block_until_ready()

    reference = call(dpjax.Laplace(1.0), xf, "float")

    def paired(fn, reps=repeats, anchor=reference):
        """(anchor's median time, fn's median time) over ``reps`` alternating runs of both: under a moving load
        each row is compared with the reference measured beside it, not once at the start."""
        fn(), anchor()
        times = ([], [])
        for _ in range(reps):
            for f, acc in zip((anchor, fn), times):
                t = time.perf_counter()
                f()
                acc.append(time.perf_counter() - t)
        return float(np.median(times[0])), float(np.median(times[1]))

    ref = rate(dpjax.Laplace(1.0), xf, "float")
    print(
        f"reference: Laplace(1) float release {ref:.3e} records/s (medians of {repeats} runs; each row's ratio is "
        f"against the reference re-measured in alternation with it)"
    )
    print(f"{'mechanism':<46}{'exact records/s':>16}{'exact / float Laplace':>23}{'device program alone':>22}")
    rates = {"float Laplace": ref}

    def row(name, mech, x):
        t0 = time.perf_counter()
        call(mech, x)()
        reps = repeats if time.perf_counter() - t0 < 5.0 else 1
        tr, te = paired(call(mech, x), reps)
        rates[name] = n / te
        prog = _device_program(call(mech, x))
        alone = ""
        if prog is not None:
            tr_prog, tp = paired(prog, reps)
            alone = f"{tr_prog / tp:>21.3f}x"
        print(f"{name:<46}{n / te:>16.3e}{tr / te:>22.3f}x{alone}")

    for name, mech, dt in exact_table_cases(n):
        row(name, mech, data[dt] % 4 if isinstance(mech, dpjax.RandomizedResponse) else data[dt])
    from dpjax.exact import HostBits

    class Counted(HostBits):  # os.urandom words (the parallel reader), counting the bytes a release reads
        read = 0

        def _read(self, nbytes):
            Counted.read += nbytes
            return super()._read(nbytes)

    urandom = lambda: dpjax.release(
        Counted(), data[jnp.int32], dpjax.DiscreteLaplace(3.0), numerics="exact"
    ).block_until_ready()
    urandom()
    Counted.read = 0
    urandom()
    per_record = Counted.read / n
    tr, te = paired(urandom)
    rates["os.urandom"] = n / te
    t0 = time.perf_counter()
    os.urandom(8 * n)
    alone = 8 * n / (time.perf_counter() - t0)
    print(
        f"{'DiscreteLaplace(scale 3), os.urandom words':<46}{n / te:>16.3e}{tr / te:>22.3f}x  "
        f"({per_record:.3f} bytes a "
        f"record; os.urandom alone, one call: {alone / 1e6:.0f} MB/s)"
    )
    for name, boosted in (
        (
            "PrivacyBoosted(DiscreteGaussian(3), Abs 5, .9)",
            dpjax.PrivacyBoosted(dpjax.DiscreteGaussian(3.0), dpjax.AbsoluteError(5.0), 0.9),
        ),
        (
            "PrivacyBoosted(DiscreteGaussian(10), Abs 5, .9)",
            dpjax.PrivacyBoosted(dpjax.DiscreteGaussian(10.0), dpjax.AbsoluteError(5.0), 0.9),
        ),
        (
            "PrivacyBoosted(DiscreteLaplace(7.5), Abs 2.5, .8)",
            dpjax.PrivacyBoosted(dpjax.DiscreteLaplace(7.5), dpjax.AbsoluteError(2.5), 0.8),
        ),
    ):
        row(name, boosted, data[jnp.int32])
        tr, tf = paired(call(boosted, data[jnp.int32], "float"))
        print(f"{'  its float tier':<46}{n / tf:>16.3e}{tr / tf:>22.3f}x")
    # the block sampler: one σ (every candidate kept below σ = 16, one hash a record) and per-record σ
    for s, per_record in [(v, False) for v in (0.1, 1.0, 3.0, 10.0, 100.0, 1e3, 1e4, 7e4, 1e6)] + [(3.0, True)]:
        scale = jnp.full(n, s) if per_record else s
        tl, tg = paired(
            call(dpjax.DiscreteGaussian(scale), data[jnp.int32], "float"),
            anchor=call(dpjax.DiscreteLaplace(scale), data[jnp.int32], "float"),
        )
        what = f"per-record {s:g}" if per_record else f"{s:g}"
        print(
            f"float DiscreteGaussian({what}) {n / tg:.3e}/s vs float DiscreteLaplace({what}) {n / tl:.3e}/s: "
            f"{tl / tg:.3f}x"
        )
    with jax.enable_x64(True):
        f = jax.jit(lambda k: cks.discrete_laplace(ThreefryWords(k, (n,)), (n,), 1 << 20))
        rates["exact discrete Laplace (t=2^20) samples/s"] = n / _median(
            lambda: f(next(keys)).block_until_ready(), repeats
        )
    print(
        "exact discrete Laplace sampler alone (t = 2^20): "
        f"{rates['exact discrete Laplace (t=2^20) samples/s']:.3e} samples/s"
    )
    try:
        import opendp.prelude as dp
    except ImportError:
        dp = None
    if dp is not None:
        # the same law and scale (discrete Laplace, scale 2^20) on the same n integers, one vector call (the
        # sampling loop runs in OpenDP's Rust core, one thread); slow, so one timed run after the warm-up
        dp.enable_features("contrib")
        m = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=float(1 << 20))
        zeros = [0] * n
        od = n / _best(lambda: m(zeros), 1)
        print(
            f"OpenDP exact discrete Laplace (scale 2^20): {od:.3e} samples/s; dpjax / OpenDP: "
            f"{rates['exact discrete Laplace (t=2^20) samples/s'] / od:.0f}x"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return rates


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=float, default=1e7)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--skip-numpy", action="store_true", help="for sizes numpy cannot hold")
    p.add_argument(
        "--only",
        default="",
        help="run only the cases whose name contains this text (the Gaussian(sigma=1) anchor always runs)",
    )
    p.add_argument("--exact", action="store_true", help="only the exact tier's rows (dpjax.exact)")
    p.add_argument(
        "--processes",
        type=int,
        default=0,
        help="compare 1 process with this many JAX processes "
        "(local CPU, dpjax.launch) on a Laplace release of n values",
    )
    args = p.parse_args(argv)
    n = int(args.n)
    if args.processes:
        from processes import compare

        return compare(n, args.processes, args.repeats)
    if args.exact:
        return exact_rows(n, args.repeats, jax.random.key(0))
    dev = jax.devices()[0]
    print(
        f"machine: {platform.processor() or platform.machine()}, "
        f"{jax.device_count()} x {dev.device_kind} ({dev.platform}); "
        f"jax {jax.__version__}, numpy {np.__version__}; n = {n:.0e}; load average {os.getloadavg()[0]:.2f}"
    )
    key = jax.random.key(0)
    x_np = np.random.default_rng(0).random(n, dtype=np.float32) * 1000
    rng = np.random.default_rng(1)
    np_cases = _numpy_cases(rng, x_np) if not args.skip_numpy else {}
    print(f"{'mechanism':<44}{'dpjax samples/s':>18}{'numpy samples/s':>18}{'ratio':>8}")
    rates = {}
    for name, (mech, dt) in {**dpjax_cases(), **extra_cases()}.items():
        if args.only not in name and name != "Gaussian(sigma=1)":
            continue
        x = jnp.asarray(x_np, dt)
        keys = iter(jax.random.split(key, args.repeats + 2))
        t = _best(lambda: dpjax.release(next(keys), x, mech, numerics="float").block_until_ready(), args.repeats)
        rates[name] = n / t
        if name in np_cases:
            tn = _best(np_cases[name], args.repeats)
            print(f"{name:<44}{n / t:>18.3e}{n / tn:>18.3e}{tn / t:>7.2f}x")
        else:
            ref = rates["Gaussian(sigma=1)"]
            print(f"{name:<44}{n / t:>18.3e}{'—':>18}{(n / t) / ref:>7.2f}x of Gaussian")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return rates


if __name__ == "__main__":
    main()
