"""Table 3 (synthetic columns) and Table 4 (normal column) of the PrDP paper, regenerated.

Chen, Sun, Xu, Dong, SIGMOD 2025, §8 / App. B, Tables 3–4. Inverse E = 10⁴/v,
U = 10¹², ε̂ = 100, β = 0.1; 200 000 records per dataset: N1 = Normal(5·10⁴, 5·10⁴),
N2 = Normal(5·10⁵, 5·10⁵), Z3/Z5 = Zipf surrogates (b = 3, scale 10³; b = 5, scale 10⁴ — the
paper's Zipf scale is unknown, so those columns are qualitative). 50 runs per method, each
method's runs one jit(vmap) call; RE % = mean of the middle 60 % of runs (max: rank error
#{v > ŷ}/n). Rows: naive / PDP (Sun et al.) / PrDP count; naive / PDP / extension / framework
sum; framework max (EM on U_ℓ); PrLDP count with the sub-Gaussian and the paper's threshold.
Writes prdp_table3.csv (+ prdp_table3.png with matplotlib); prints the paper's values alongside.

    python examples/prdp_table3.py [--out DIR]
"""

import os
import time

import numpy as np

import _common as C
import prdp_experiments as ex

PAPER = {  # Table 3 / Table 4, synthetic columns (RE %); None: not reported
    "naive_count": (">100",) * 4,
    "pdp_count": (2.27, 13.69, 1.28, 0.641),
    "prdp_count": (0.0138, 0.279, 0.00941, 0.0196),
    "naive_sum": (100, 100, 100, 100),
    "pdp_sum": (10.68, 48.80, 17.44, 7.18),
    "extension": (0.0358, 0.967, 0.198, 0.321),
    "framework": (0.187, 1.65, 1.04, 0.544),
    "max": (0.738, 6.15, 0.734, 0.387),
    "local_count": (9.84, None, 8.53, None),
    "local_count_paper": (None,) * 4,
}
COLUMNS = ("N1", "N2", "Z3", "Z5")


def main():
    args = C.parse_args(__doc__)
    data = ex.table3_data(np.random.default_rng(2025))
    setting = ex.Setting("inverse", 1e12)
    rows = []
    for c in COLUMNS:
        for method in ex.METHODS:
            t = time.perf_counter()
            errors = ex.run(data[c], setting, methods=(method,), runs=50, seed=1)[method]
            seconds = time.perf_counter() - t  # 50 runs, compilation included
            rows.append([c, method, ex.re_percent(errors), PAPER[method][COLUMNS.index(c)], seconds])
            print(f"{c:>3} {method:<18} RE {rows[-1][2]:>12.5g} %   paper {rows[-1][3]}   ({seconds:.2f} s)")
    C.write_csv(
        os.path.join(args.out, "prdp_table3.csv"),
        ["dataset", "method", "re_percent", "paper_re_percent", "seconds_50_runs_incl_compile"],
        rows,
    )
    plt = C.plt_or_none()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / len(ex.METHODS)
    for j, method in enumerate(ex.METHODS):
        vals = [r[2] for r in rows if r[1] == method]
        ax.bar(np.arange(len(COLUMNS)) + j * width, vals, width, label=method)
    ax.set_xticks(np.arange(len(COLUMNS)) + 0.4 - width / 2, COLUMNS)
    C.decorate(ax, "dataset", "RE % (trimmed mean of 50 runs)", "PrDP vs PDP vs naive (Table 3 synthetic columns)")
    C.save(fig, os.path.join(args.out, "prdp_table3.png"))


if __name__ == "__main__":
    main()
