"""Figure 5 analogue: fixed preferred region — PB-GDP vs the bounded (truncated, q = 1) Gaussian.

(a) Privacy profiles δ(ε): kernel ε0 = 0.1 at δ0 = 1e-5 (σ = 30.75; δ0 is our assumption),
    ΔQ = 1, ρ = 0.8, S ∈ {[−10,10], [−25,25], [−50,50]}; paper mode (accounting.papers.pbdp,
    Remark 3: δ_G(ε − L1)) and exact mode (worst pair on the answer grid, both directions) for PB
    and for the bounded mechanism (PB with ρ = 1).
(b) The additional loss L1 = ε − ε0 (paper mode, α-free) vs ρ at σ = 10, with the exact
    Rényi increment D_α − αΔ²/(2σ²) at α ∈ {2, 10} beside it.
Writes fig5a.csv, fig5b.csv (+ fig5.png with matplotlib).

    python examples/fig5_fixed_region.py [--out DIR]
"""

import os

import jax.numpy as jnp
import numpy as np

import _common as C
import dpjax
import optimize
from accounting.papers import pbdp as pbdp_paper
from dpjax.kernels import analytic_gaussian_sigma

EPS = np.linspace(0.0, 0.2, 41)
REGIONS = (10.0, 25.0, 50.0)


def main():
    args = C.parse_args(__doc__)
    sens, rho = 1.0, 0.8
    sigma = float(analytic_gaussian_sigma(0.1, 1e-5, sens))
    rows_a, curves = [], {}
    with C.x64(True):
        for half in REGIONS:
            for label, r in (("PB", rho), ("bounded", 1.0)):
                mech = dpjax.PrivacyBoosted(dpjax.Gaussian(sigma), dpjax.FixedInterval(-half, half), r, num_pairs=101)
                q = float(mech.boosting_rate)
                l1 = pbdp_paper.paper_parameters(mech, sensitivity=sens).L1  # Prop 5, edge pair (τl, τl + Δ)
                paper = np.asarray(pbdp_paper.paper_privacy_profile(mech, EPS, sensitivity=sens))  # Rem 3
                exact = np.asarray(optimize.exact_delta(mech, jnp.asarray(EPS), sens))
                curves[(half, label)] = (paper, exact)
                rows_a += [
                    [f"[-{half:g},{half:g}]", label, q, float(l1), e, p, x] for e, p, x in zip(EPS, paper, exact)
                ]
    C.write_csv(
        os.path.join(args.out, "fig5a.csv"),
        ["S", "mechanism", "q", "L1_paper", "epsilon", "delta_paper", "delta_exact"],
        rows_a,
    )
    rhos = np.array([0.7, 0.8, 0.9, 0.95, 0.99, 1.0])
    rows_b, l1s = [], {}
    with C.x64(True):
        for half, dq in ((10.0, 1.0), (50.0, 1.0), (50.0, 30.0)):
            mech = dpjax.PrivacyBoosted(
                dpjax.Gaussian(10.0), dpjax.FixedInterval(-half, half), jnp.asarray(rhos), num_pairs=101
            )
            l1 = np.asarray(pbdp_paper.paper_parameters(mech, sensitivity=dq).L1)
            inc = {a: np.asarray(optimize.exact_renyi(mech, a, dq)) - a * dq**2 / 200.0 for a in (2.0, 10.0)}
            l1s[(half, dq)] = (l1, inc)
            rows_b += [[f"[-{half:g},{half:g}]", dq, r, a, b, c] for r, a, b, c in zip(rhos, l1, inc[2.0], inc[10.0])]
    C.write_csv(
        os.path.join(args.out, "fig5b.csv"),
        ["S", "sensitivity", "rho", "L1_paper", "exact_increment_a2", "exact_increment_a10"],
        rows_b,
    )
    plt = C.plt_or_none()
    if plt is None:
        return
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.8))
    for i, half in enumerate(REGIONS):
        for label, style in (("PB", "-"), ("bounded", "--")):
            paper, exact = curves[(half, label)]
            ax.plot(EPS, paper, f"C{i}{style}", alpha=0.5, label=f"{label} S=±{half:g} paper")
            ax.plot(EPS, np.maximum(exact, 1e-300), f"C{i}{style}", lw=2.5, label=f"{label} S=±{half:g} exact")
    C.decorate(ax, "ε", "δ(ε)", "(a) privacy profiles, ε0=0.1, ρ=0.8 (thin: paper, thick: exact)", legend_size=6)
    ax.set_ylim(1e-9, 1)
    for i, ((half, dq), (l1, inc)) in enumerate(l1s.items()):
        bx.plot(rhos, l1, f"C{i}-o", label=f"L1 paper, S=±{half:g}, ΔQ={dq:g}")
        bx.plot(rhos, inc[10.0], f"C{i}:", label="exact D_α − kernel, α=10")
    C.decorate(bx, "ρ", "additional loss", "(b) additional loss vs ρ at σ = 10", logy=False, legend_size=6)
    C.save(fig, os.path.join(args.out, "fig5.png"))


if __name__ == "__main__":
    main()
