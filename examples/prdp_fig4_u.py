"""Figure 4 of the PrDP paper: sum estimation vs the global bound U.

Normal(5·10⁴, 5·10⁴), n = 200 000, clipped to [0, U] (the paper's §8.1), inverse E = 10⁴/v,
ε̌ = E(U), ε̂ = 100, β = 0.1, U = 10⁴ … 10¹⁶; naive, PDP, PrDP extension and framework, 50 runs.
At U = 10⁴ every clipped record has E ≥ ε̌ = 1 and the naive sum is strong (docs/prdp.md).
Writes prdp_fig4.csv (+ prdp_fig4.png with matplotlib).

    python examples/prdp_fig4_u.py [--out DIR]
"""

import os

import numpy as np

import _common as C
import prdp_experiments as ex

UPPERS = ex.log10_range(1e4, 1e16, per_decade=0.5)


def main():
    args = C.parse_args(__doc__)
    x = ex.normal_data(np.random.default_rng(4), 200_000, 5e4, 5e4)
    rows = []
    for u in UPPERS:
        res = ex.run(x, ex.Setting("inverse", u), methods=ex.SUM_METHODS, runs=50, seed=3)
        for method, errors in res.items():
            rows.append([u, method, ex.re_percent(errors)])
        print(f"U={u:g}", {m: round(ex.re_percent(v), 4) for m, v in res.items()})
    C.write_csv(os.path.join(args.out, "prdp_fig4.csv"), ["U", "method", "re_percent"], rows)
    plt = C.plt_or_none()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for method in ex.SUM_METHODS:
        ax.plot(UPPERS, [r[2] for r in rows if r[1] == method], "o-", label=method)
    C.decorate(ax, "U", "RE %", "sum vs U (inverse E, n = 200k)", logx=True)
    C.save(fig, os.path.join(args.out, "prdp_fig4.png"))


if __name__ == "__main__":
    main()
