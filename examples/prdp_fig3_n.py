"""Figure 3 of the PrDP paper: sum estimation vs dataset size n, three privacy functions.

Normal(5·10⁴, 5·10⁴) data, n = 10⁴ … 10⁷, U = 10¹², ε̂ = 100, β = 0.1; E ∈ {inverse 10⁴/v,
sqrt 8/√v, log 500/ln⁴ v}; naive, PDP, PrDP extension and framework, 50 runs each (one jit(vmap)
per method and size). Writes prdp_fig3.csv (+ prdp_fig3.png with matplotlib).

    python examples/prdp_fig3_n.py [--out DIR] [--max-n 1e7]
"""

import argparse
import os
import sys

import numpy as np

import _common as C
import prdp_experiments as ex

KINDS = ("inverse", "sqrt", "log")


def main():
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--max-n", type=float, default=1e7)
    opts, rest = extra.parse_known_args()
    sys.argv = sys.argv[:1] + rest
    args = C.parse_args(__doc__)
    sizes = [int(n) for n in ex.log10_range(1e4, opts.max_n)]
    rng = np.random.default_rng(3)
    data = {n: ex.normal_data(rng, n, 5e4, 5e4) for n in sizes}
    rows = []
    for kind in KINDS:
        setting = ex.Setting(kind, 1e12)
        for n in sizes:
            res = ex.run(data[n], setting, methods=ex.SUM_METHODS, runs=50, seed=2)
            for method, errors in res.items():
                rows.append([kind, n, method, ex.re_percent(errors)])
            print(kind, n, {m: round(ex.re_percent(v), 4) for m, v in res.items()})
    C.write_csv(os.path.join(args.out, "prdp_fig3.csv"), ["privacy_function", "n", "method", "re_percent"], rows)
    plt = C.plt_or_none()
    if plt is None:
        return
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for ax, kind in zip(axes, KINDS):
        for method in ex.SUM_METHODS:
            pts = [(r[1], r[3]) for r in rows if r[0] == kind and r[2] == method]
            ax.plot(*zip(*pts), "o-", label=method)
        C.decorate(ax, "n", "RE %", f"sum, E = {kind}", logx=True)
    C.save(fig, os.path.join(args.out, "prdp_fig3.png"))


if __name__ == "__main__":
    main()
