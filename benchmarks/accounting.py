"""dpjax accounting vs Google dp_accounting, side by side, same process run.

Usage:  python benchmarks/accounting.py            (all cases, each in its own subprocess)
        python benchmarks/accounting.py --case NAME (one case; prints one JSON line)
        python benchmarks/accounting.py --quick    (skip dp_accounting's 20 s Gaussian accountant)
        python benchmarks/accounting.py --only A,B (the table for the named cases only)

Each case runs in a fresh subprocess so that peak RSS (``resource.getrusage``) is per
case; "peak MB" is the growth of the process's max RSS over its post-import baseline
(it includes XLA compilation, whose memory the allocator keeps).
"warm s" is the best of a few repeated dpjax calls after the first; "cold s" is that
first call, which includes tracing and XLA compilation (once per process and static
shape). Ratios are dp_accounting time / dpjax time, warm and cold. dp_accounting times
are its own best of one or two runs (it has no compile step). Answers are checked to
agree. The 1-minute load average is printed before and after: the machine may be shared.

gauss_T1000's first row is what a user gets by default,
``accounting.pld(Gaussian(1.0)).self_compose(1000).get_epsilon_for_delta(1e-5)``: the
analytic Gaussian PLD (μ√T, no grid). The "grid path" row forces the FFT accountant
(``use_analytic=False``) for comparison.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import resource
import subprocess
import sys
import time

# this file is itself named accounting.py: keep its folder off sys.path so that
# `import accounting` finds the package, not this script
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.modules.pop("accounting", None)

import numpy as np  # noqa: E402

DELTA = 1e-5


def _rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _best(fn, reps=3):
    best, val = math.inf, None
    for _ in range(reps):
        t = time.perf_counter()
        val = fn()
        best = min(best, time.perf_counter() - t)
    return val, best


def _block(x):
    return np.asarray(x)


_BASE = [0.0]


def _peak():
    """Peak RSS growth (MB) so far: call right after the dpjax part, before dp_accounting runs."""
    return _rss_mb() - _BASE[0]


# ----------------------------------------------------------------------------------
# cases: each returns dict(ours=..., ref=..., t_ours, t_first, t_ref, note)
# ----------------------------------------------------------------------------------
def case_gauss_T1000(full=True):
    import dp_accounting
    from dp_accounting.pld import privacy_loss_distribution as PLD

    import accounting
    import dpjax

    m = dpjax.Gaussian(sigma=1.0)
    f = lambda: float(_block(accounting.pld(m).self_compose(1000).get_epsilon_for_delta(DELTA)))  # noqa: E731
    t0 = time.perf_counter()
    f()
    first = time.perf_counter() - t0
    ours, t_ours = _best(f, 5)
    g = lambda: float(_block(accounting.pld(m, use_analytic=False).self_compose(1000).get_epsilon_for_delta(DELTA)))  # noqa: E731
    g()
    grid, t_grid = _best(g, 2)
    peak = _peak()
    ref_sc, t_sc = _best(lambda: PLD.from_gaussian_mechanism(1.0).self_compose(1000).get_epsilon_for_delta(DELTA), 1)
    out = dict(
        ours=ours,
        t_ours=t_ours,
        t_first=first,
        ours_grid=grid,
        t_grid=t_grid,
        ref=ref_sc,
        t_ref=t_sc,
        peak_mb=peak,
        ref_name="default pld(Gaussian(1)) = analytic; ref PLD.from_gaussian(1).self_compose(1000)",
    )
    if full:
        acc, t_acc = _best(
            lambda: (
                dp_accounting.pld.PLDAccountant().compose(dp_accounting.GaussianDpEvent(1.0), 1000).get_epsilon(DELTA)
            ),
            1,
        )
        out.update(ref_acc=acc, t_ref_acc=t_acc)
    return out


def _psg(count):
    import dp_accounting

    import accounting
    import dpjax

    m = dpjax.Gaussian(sigma=1.0)
    f = lambda: float(_block(accounting.get_epsilon(m, DELTA, count=count, sampling_prob=0.01)))  # noqa: E731
    t0 = time.perf_counter()
    f()
    first = time.perf_counter() - t0
    ours, t_ours = _best(f, 5)
    g = lambda: float(_block(accounting.pld(m, sampling_prob=0.01).self_compose(count).get_epsilon_for_delta(DELTA)))  # noqa: E731
    g()
    obj, t_obj = _best(g, 5)
    peak = _peak()
    ev = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0))
    ref, t_ref = _best(lambda: dp_accounting.pld.PLDAccountant().compose(ev, count).get_epsilon(DELTA), 2)
    return dict(
        ours=ours,
        t_ours=t_ours,
        t_first=first,
        ours_obj=obj,
        t_obj=t_obj,
        ref=ref,
        t_ref=t_ref,
        peak_mb=peak,
        ref_name="accounting.get_epsilon vs PLDAccountant(PoissonSampled(0.01, Gaussian(1)))",
    )


def case_psg_T1000():
    return _psg(1000)


def case_psg_T10000():
    return _psg(10000)


def case_batch_gauss_1000():
    """ε of 1000 Gaussian mechanisms (σ ∈ [0.5, 5]), T=100 each: one batched call vs a dp_accounting loop."""
    import dp_accounting

    import accounting
    import dpjax
    import jax.numpy as jnp

    sig = np.linspace(0.5, 5.0, 1000)
    mech = dpjax.Gaussian(sigma=jnp.asarray(sig))
    f = lambda: _block(accounting.get_epsilon(mech, DELTA, count=100))  # noqa: E731
    t0 = time.perf_counter()
    f()
    first = time.perf_counter() - t0
    ours, t_ours = _best(f, 5)
    peak = _peak()
    idx = np.arange(0, 1000, 100)  # dp_accounting on 10 of them, extrapolated to 1000
    ref, t_ref = _best(
        lambda: [
            dp_accounting.pld.PLDAccountant()
            .compose(dp_accounting.GaussianDpEvent(float(sig[i])), 100)
            .get_epsilon(DELTA)
            for i in idx
        ],
        1,
    )
    return dict(
        ours=ours[idx].tolist(),
        t_ours=t_ours,
        t_first=first,
        ref=ref,
        t_ref=t_ref * 100,
        peak_mb=peak,
        ref_name="one get_epsilon call vs loop of PLDAccountant(Gaussian) (10 timed, x100)",
    )


def case_batch_psg_1000():
    """ε of 1000 subsampled Gaussians (q=0.01, T=1000, σ ∈ [0.6, 2]): one batched call vs a loop."""
    import dp_accounting

    import accounting
    import dpjax
    import jax.numpy as jnp

    sig = np.linspace(0.6, 2.0, 1000)
    mech = dpjax.Gaussian(sigma=jnp.asarray(sig))
    f = lambda: _block(accounting.get_epsilon(mech, DELTA, count=1000, sampling_prob=0.01))  # noqa: E731
    t0 = time.perf_counter()
    ours = f()
    first = time.perf_counter() - t0
    ours, t_ours = _best(f, 1)
    peak = _peak()
    idx = np.arange(0, 1000, 200)
    ref, t_ref = _best(
        lambda: [
            dp_accounting.pld.PLDAccountant()
            .compose(dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(float(sig[i]))), 1000)
            .get_epsilon(DELTA)
            for i in idx
        ],
        1,
    )
    return dict(
        ours=ours[idx].tolist(),
        t_ours=t_ours,
        t_first=first,
        ref=ref,
        t_ref=t_ref * 200,
        peak_mb=peak,
        ref_name="one get_epsilon call vs loop of PLDAccountant(PSG) (5 timed, x200)",
    )


def case_batch_psg_10000():
    """ε of 10⁴ subsampled Gaussians (q=0.01, T=100, σ ∈ [0.6, 2]) in one call, chunked with progress,
    vs a loop of dp_accounting (a sample of members timed)."""
    import dp_accounting

    import accounting
    import dpjax
    import jax.numpy as jnp

    sig = np.linspace(0.6, 2.0, 10_000)
    mech = dpjax.Gaussian(sigma=jnp.asarray(sig))
    t0 = time.perf_counter()
    ours = _block(accounting.get_epsilon(mech, DELTA, count=100, sampling_prob=0.01, progress=False))
    first = time.perf_counter() - t0  # one call: compile and run (a second call repeats the run only)
    ours, t_ours = _best(
        lambda: _block(accounting.get_epsilon(mech, DELTA, count=100, sampling_prob=0.01, progress=False)), 1
    )
    peak = _peak()
    idx = np.arange(0, 10_000, 2000)
    ref, t_ref = _best(
        lambda: [
            dp_accounting.pld.PLDAccountant()
            .compose(dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(float(sig[i]))), 100)
            .get_epsilon(DELTA)
            for i in idx
        ],
        1,
    )
    return dict(
        ours=ours[idx].tolist(),
        t_ours=t_ours,
        t_first=first,
        ref=ref,
        t_ref=t_ref * 2000,
        peak_mb=peak,
        ref_name="one get_epsilon call vs loop of PLDAccountant(PSG) (5 timed, x2000)",
    )


def _distinct_mechanisms(n=100):
    """``n`` distinct mechanisms, Gaussians (σ ∈ [20, 40]) and Laplaces (b ∈ [20, 40]) alternating, as
    (dpjax mechanism, dp_accounting event) pairs."""
    import dp_accounting

    import dpjax

    scales = np.linspace(20.0, 40.0, n)
    return [
        (dpjax.Gaussian(sigma=float(s)), dp_accounting.GaussianDpEvent(float(s)))
        if i % 2 == 0
        else (dpjax.Laplace(scale=float(s)), dp_accounting.LaplaceDpEvent(float(s)))
        for i, s in enumerate(scales)
    ]


def _first_then_best(fn):
    """(seconds of the first call, tracing and compilation included; ``_best(fn, 1)`` after it)."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0, _best(fn, 1)


def case_distinct_100():
    """100 distinct Gaussian/Laplace mechanisms composed in one expression on a first call
    (``functools.reduce`` of ``PrivacyLossDistribution.compose``, then ε at δ) vs dp_accounting's
    ``PLDAccountant`` composing the same 100 events. "warm" repeats the whole expression."""
    import functools

    from dp_accounting.pld import pld_privacy_accountant

    import accounting

    pairs = _distinct_mechanisms()

    def ours():
        total = functools.reduce(lambda a, b: a.compose(b), [accounting.pld(m) for m, _ in pairs])
        return float(_block(total.get_epsilon_for_delta(DELTA)))

    first, (eps, t_ours) = _first_then_best(ours)
    peak = _peak()

    def ref():
        acc = pld_privacy_accountant.PLDAccountant()
        for _, ev in pairs:
            acc.compose(ev)
        return acc.get_epsilon(DELTA)

    ref_eps, t_ref = _best(ref, 1)
    return dict(
        ours=eps,
        t_ours=t_ours,
        t_first=first,
        ref=ref_eps,
        t_ref=t_ref,
        peak_mb=peak,
        ref_name="reduce(compose) of 100 distinct Gaussian/Laplace PLDs vs PLDAccountant.compose x100",
    )


def case_distinct_100_accountant():
    """The same 100 mechanisms recorded one by one into ``accounting.Accountant`` (ε at δ returned by
    every ``record``) on a first call vs dp_accounting's ``PLDAccountant`` (``compose`` then
    ``get_epsilon`` per mechanism). "warm" records them again into a new Accountant."""
    from dp_accounting.pld import pld_privacy_accountant

    import accounting

    pairs = _distinct_mechanisms()

    def ours():
        acc = accounting.Accountant(delta=DELTA)
        return [acc.record(m) for m, _ in pairs][-1]

    first, (eps, t_ours) = _first_then_best(ours)
    peak = _peak()

    def ref():
        acc = pld_privacy_accountant.PLDAccountant()
        for _, ev in pairs:
            acc.compose(ev)
            out = acc.get_epsilon(DELTA)
        return out

    ref_eps, t_ref = _best(ref, 1)
    return dict(
        ours=eps,
        t_ours=t_ours,
        t_first=first,
        ref=ref_eps,
        t_ref=t_ref,
        peak_mb=peak,
        ref_name="Accountant.record x100 (ε after each) vs PLDAccountant compose+get_epsilon x100",
    )


def case_record_repeat():
    """A repeated spend recorded into ``accounting.Accountant`` (a Poisson-subsampled Gaussian, σ 1,
    q 0.01, ε at δ returned by every ``record``): median seconds per spend over 50 after 20 warm-up
    spends vs dp_accounting's ``PLDAccountant`` (``compose`` then ``get_epsilon``) over 20. "cold" is
    the first ``record`` of the process."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    import accounting
    import dpjax

    m, q = dpjax.Gaussian(sigma=1.0), 0.01
    acc = accounting.Accountant(delta=DELTA)
    first, _ = _first_then_best(lambda: acc.record(m, sampling_prob=q))
    for _ in range(20):
        acc.record(m, sampling_prob=q)
    times = []
    for _ in range(50):
        t = time.perf_counter()
        eps = acc.record(m, sampling_prob=q)
        times.append(time.perf_counter() - t)
    peak = _peak()
    ev = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(1.0))
    ref_acc, ref_times = pld_privacy_accountant.PLDAccountant(), []
    for i in range(72):  # as many spends as ours (2 + 20 + 50), the last 20 timed
        t = time.perf_counter()
        ref = ref_acc.compose(ev).get_epsilon(DELTA)
        if i >= 52:
            ref_times.append(time.perf_counter() - t)
    return dict(
        ours=eps,
        t_ours=float(np.median(times)),
        t_first=first,
        ref=ref,
        t_ref=float(np.median(ref_times)),
        peak_mb=peak,
        ref_name="Accountant.record of a repeated PSG(0.01, σ 1) spend (median per spend) vs "
        "PLDAccountant compose+get_epsilon",
    )


def case_dpsgd_first():
    """A first ``accounting.dpsgd_epsilon`` call of the process (σ 1, q 0.01, T 1000; "cold"), then a
    new setting (σ 1.1: "warm") vs dp_accounting's ``PLDAccountant`` on the same event."""
    import dp_accounting

    import accounting

    t0 = time.perf_counter()
    float(_block(accounting.dpsgd_epsilon(1.0, 0.01, 1000, DELTA)))
    first = time.perf_counter() - t0
    ours, t_ours = _best(lambda: float(_block(accounting.dpsgd_epsilon(1.1, 0.01, 1000, DELTA))), 1)
    peak = _peak()
    ev = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1))
    ref, t_ref = _best(lambda: dp_accounting.pld.PLDAccountant().compose(ev, 1000).get_epsilon(DELTA), 1)
    return dict(
        ours=ours,
        t_ours=t_ours,
        t_first=first,
        ref=ref,
        t_ref=t_ref,
        peak_mb=peak,
        ref_name="dpsgd_epsilon(σ 1.1) after a first call (σ 1) vs PLDAccountant(PSG(0.01, σ 1.1), 1000)",
    )


CASES = {
    "gauss_T1000": case_gauss_T1000,
    "psg_T1000": case_psg_T1000,
    "psg_T10000": case_psg_T10000,
    "batch_gauss_1000": case_batch_gauss_1000,
    "batch_psg_1000": case_batch_psg_1000,
    "batch_psg_10000": case_batch_psg_10000,
    "distinct_100": case_distinct_100,
    "distinct_100_accountant": case_distinct_100_accountant,
    "record_repeat": case_record_repeat,
    "dpsgd_first": case_dpsgd_first,
}


def run_case(name, quick):
    logging.disable(logging.WARNING)
    import jax  # noqa: F401  (baseline after imports)
    import dp_accounting  # noqa: F401

    import accounting  # noqa: F401

    _BASE[0] = _rss_mb()
    fn = CASES[name]
    res = fn(full=not quick) if name == "gauss_T1000" else fn()
    res["peak_mb_all"] = _peak()
    res["case"] = name
    print(json.dumps(res))


def _agree(a, b, rel=2e-4):
    a, b = np.atleast_1d(np.asarray(a, float)), np.atleast_1d(np.asarray(b, float))
    return bool(np.all(np.abs(a - b) <= rel * np.abs(b) + 1e-9))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", help="comma-separated case names (default: every case)")
    args = ap.parse_args()
    if args.case:
        run_case(args.case, args.quick)
        return
    names = args.only.split(",") if args.only else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"--only: unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    rows = []
    load0 = os.getloadavg()[0]
    for name in names:
        cmd = [sys.executable, __file__, "--case", name] + (["--quick"] if args.quick else [])
        out = subprocess.run(cmd, capture_output=True, text=True)
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
        if not line:
            print(f"{name}: FAILED\n{out.stderr[-2000:]}")
            continue
        rows.append(json.loads(line[-1]))
    load1 = os.getloadavg()[0]
    print(f"load average (1 min): {load0:.2f} before, {load1:.2f} after, on {os.cpu_count()} cores")
    print(
        "warm = best of repeated dpjax calls (compile excluded); cold = the first call in a fresh process "
        "(tracing + XLA compile included); ratio / cold x = dp_accounting time over warm / cold"
    )
    print(
        f"{'case':18s} {'warm s':>10s} {'cold s':>9s} {'dp_acc s':>10s} {'ratio':>8s} {'cold x':>7s} {'peak MB':>8s}"
        f"  agree  values"
    )
    for r in rows:
        ratio = r["t_ref"] / r["t_ours"]
        ok = _agree(r["ours"], r["ref"])
        v = r["ours"] if np.isscalar(r["ours"]) else r["ours"][0]
        w = r["ref"] if np.isscalar(r["ref"]) else r["ref"][0]
        print(
            f"{r['case']:18s} {r['t_ours']:10.4f} {r['t_first']:9.2f} {r['t_ref']:10.3f} {ratio:8.1f} "
            f"{r['t_ref'] / r['t_first']:7.1f} {r['peak_mb']:8.0f}  {'yes' if ok else 'NO ':3s}   {v:.6f} vs {w:.6f}"
            f"  [{r['ref_name']}]"
        )
        if "t_grid" in r:
            print(
                f"{'  grid path':18s} {r['t_grid']:10.4f} {'':9s} {r['t_ref']:10.3f} {r['t_ref'] / r['t_grid']:8.1f} "
                f"{'':7s} {'':8s}  {'yes' if _agree(r['ours_grid'], r['ref']) else 'NO ':3s}   {r['ours_grid']:.6f}"
            )
        if "t_ref_acc" in r:
            print(
                f"{'  vs PLDAccountant':18s} {r['t_ours']:10.4f} {'':9s} {r['t_ref_acc']:10.3f} "
                f"{r['t_ref_acc'] / r['t_ours']:8.1f} {'':7s} {'':8s}  "
                f"{'yes' if _agree(r['ours'], r['ref_acc']) else 'NO ':3s}"
                f"   {r['ref_acc']:.6f}"
            )
        if "t_obj" in r:
            print(
                f"{'  PLD object path':18s} {r['t_obj']:10.4f} {'':9s} {r['t_ref']:10.3f} "
                f"{r['t_ref'] / r['t_obj']:8.1f} "
                f"{'':7s} {'':8s}  {'yes' if _agree(r['ours_obj'], r['ref']) else 'NO ':3s}   {r['ours_obj']:.6f}"
            )


if __name__ == "__main__":
    main()
