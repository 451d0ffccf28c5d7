"""Figure 3 analogue: ε vs the confidence ρ at a fixed smallest region [−10, 10] (absolute error).

Panels as the arXiv sub-captions: (a) (ε,δ) Δf=2, (b) (ε,δ) Δf=4 (δ ∈ {1e-5, 1e-7});
(c) RDP Δf=1, (d) RDP Δf=4 (α ∈ {2, 10, 100}). Same four curves as Figure 2.
Writes fig3.csv (+ fig3.png with matplotlib).

    python examples/fig3_confidence.py [--out DIR]
"""

import os

import numpy as np

import _common as C

RHOS = np.array([0.6, 0.7, 0.8, 0.9, 0.95, 0.99])


def main():
    args = C.parse_args(__doc__)
    panels = []
    for tag, sens in (("a", 2.0), ("b", 4.0)):
        groups = {f"δ={d:g}": C.single_release_curves(sens, RHOS, 20.0, delta=d) for d in (1e-5, 1e-7)}
        panels.append((f"({tag}) (ε,δ): S=[−10,10], Δf={sens:g}", RHOS, groups))
    for tag, sens in (("c", 1.0), ("d", 4.0)):
        groups = {f"α={a:g}": C.single_release_curves(sens, RHOS, 20.0, order=a) for a in (2.0, 10.0, 100.0)}
        panels.append((f"({tag}) RDP: S=[−10,10], Δf={sens:g}", RHOS, groups))
    C.panel_figure(os.path.join(args.out, "fig3"), panels, "rho", "ρ")


if __name__ == "__main__":
    main()
