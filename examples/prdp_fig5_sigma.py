"""Figure 5 of the PrDP paper: sum estimation vs data skew σ (absolute error).

Normal(5·10⁴, σ), σ = 10² … 10⁵, n = 200 000, inverse E = 10⁴/v (the paper names no function for
this figure; the paper's §8.2, Figure 5), U = 10¹², ε̂ = 100, β = 0.1; naive, PDP, PrDP extension and framework,
50 runs; the trimmed mean absolute error. Writes prdp_fig5.csv (+ prdp_fig5.png with matplotlib).

    python examples/prdp_fig5_sigma.py [--out DIR]
"""

import os

import numpy as np

import _common as C
import prdp_experiments as ex

SIGMAS = ex.log10_range(1e2, 1e5, per_decade=2)


def main():
    args = C.parse_args(__doc__)
    rng = np.random.default_rng(5)
    setting = ex.Setting("inverse", 1e12)
    rows = []
    for sigma in SIGMAS:
        x = ex.normal_data(rng, 200_000, 5e4, sigma)
        res = ex.run(x, setting, methods=ex.SUM_METHODS, runs=50, seed=4)
        for method, errors in res.items():
            rows.append([sigma, method, ex.trimmed_mean(errors) * x.sum(), x.sum()])
        print(f"sigma={sigma:g}", {m: f"{ex.trimmed_mean(v) * x.sum():.3g}" for m, v in res.items()})
    C.write_csv(os.path.join(args.out, "prdp_fig5.csv"), ["sigma", "method", "abs_error", "true_sum"], rows)
    plt = C.plt_or_none()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for method in ex.SUM_METHODS:
        ax.plot(SIGMAS, [r[2] for r in rows if r[1] == method], "o-", label=method)
    C.decorate(ax, "σ", "absolute error", "sum vs σ (μ = 5·10⁴, n = 200k)", logx=True)
    C.save(fig, os.path.join(args.out, "prdp_fig5.png"))


if __name__ == "__main__":
    main()
