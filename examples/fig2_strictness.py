"""Figure 2 analogue: ε vs the size |S| of the smallest preferred region (absolute error), at fixed ρ.

Panels as in the paper: (a) (ε,δ) ΔQ=1 ρ=0.9, (b) (ε,δ) ΔQ=4 ρ=0.8 with δ ∈ {1e-5, 1e-7};
(c) RDP ΔQ=1 ρ=0.9, (d) RDP ΔQ=4 ρ=0.8 with α ∈ {2, 10, 100}. Curves: the Gaussian
mechanism meeting the same utility, PB in paper mode (Remark 4 / Prop 2 minimised
over σ), the exact ε of that paper-tuned mechanism, and PB tuned on the exact
accountant (optimize.tune_boosted). Writes fig2.csv (+ fig2.png with matplotlib).

    python examples/fig2_strictness.py [--out DIR]
"""

import os

import numpy as np

import _common as C

SIZES = np.array([5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 40.0])


def main():
    args = C.parse_args(__doc__)
    panels = []
    for tag, sens, rho in (("a", 1.0, 0.9), ("b", 4.0, 0.8)):
        groups = {f"δ={d:g}": C.single_release_curves(sens, rho, SIZES, delta=d) for d in (1e-5, 1e-7)}
        panels.append((f"({tag}) (ε,δ): ΔQ={sens:g}, ρ={rho}", SIZES, groups))
    for tag, sens, rho in (("c", 1.0, 0.9), ("d", 4.0, 0.8)):
        groups = {f"α={a:g}": C.single_release_curves(sens, rho, SIZES, order=a) for a in (2.0, 10.0, 100.0)}
        panels.append((f"({tag}) RDP: ΔQ={sens:g}, ρ={rho}", SIZES, groups))
    C.panel_figure(os.path.join(args.out, "fig2"), panels, "size_S", "|S(Q(X̃))| (length of the smallest region)")


if __name__ == "__main__":
    main()
