"""Figure 6 analogue: T-fold homogeneous composition, absolute error, ΔQ = 3, |S| = 10, ρ = 0.9.

(a) (ε, δ = 1e-5): the Gaussian meeting the same utility (analytic, μ√T); PB in paper
    mode (accounting.papers.pbdp: Algorithm 1 with its indices fixed, re-optimised over σ
    for every T); the exact
    ε of that paper-tuned mechanism (PLD + FFT); PB tuned on the exact composed PLD
    (optimize.tune_boosted(compositions=T)).
(b) RDP at α ∈ {2, 20}: T × the per-release value (Gaussian, paper-optimal, exact-optimal).
Writes fig6a.csv, fig6b.csv (+ fig6.png with matplotlib).

    python examples/fig6_composition.py [--out DIR]
"""

import os

import numpy as np

import _common as C
import accounting
import dpjax
import optimize
from accounting.papers import pbdp as pbdp_paper

SENS, TAU, RHO, DELTA = 3.0, 5.0, 0.9, 1e-5
COUNTS = (1, 10, 100, 1000)


def step(count):
    return 2.0**-9 if count <= 10 else 2.0**-7  # loss-grid step of the exact PLD


def main():
    args = C.parse_args(__doc__)
    rows = []
    region = dpjax.AbsoluteError(TAU)
    sb = float(optimize.base_sigma(region, RHO))
    for t in COUNTS:
        paper, s_star = pbdp_paper.paper_tune(region, RHO, sensitivity=SENS, delta=DELTA, compositions=t)[:2]
        with C.x64(True):
            gauss = float(
                accounting.pld(dpjax.Gaussian(sb), sensitivity=SENS).self_compose(t).get_epsilon_for_delta(DELTA)
            )
            mech = dpjax.PrivacyBoosted(dpjax.Gaussian(s_star), dpjax.AbsoluteError(TAU), RHO)
            at_paper = float(
                accounting.pld(mech, sensitivity=SENS, value_discretization_interval=step(t))
                .self_compose(t)
                .get_epsilon_for_delta(DELTA)
            )
        tuned = optimize.tune_boosted(
            region=dpjax.AbsoluteError(TAU),
            rho=RHO,
            sensitivity=SENS,
            delta=DELTA,
            compositions=t,
            tol=1e-3,
            value_discretization_interval=step(t),
        )
        rows.append(
            [
                t,
                gauss,
                float(paper),
                float(s_star) / sb,
                at_paper,
                float(tuned.epsilon),
                float(tuned.sigma / tuned.sigma_base),
            ]
        )
        print(rows[-1])
    head = ["T", "gaussian", "paper_opt", "paper_k", "exact_at_paper_sigma", "exact_opt", "exact_k"]
    C.write_csv(os.path.join(args.out, "fig6a.csv"), head, rows)
    rows_b = []
    for a in (2.0, 20.0):
        tuned = optimize.tune_boosted(region=dpjax.AbsoluteError(TAU), rho=RHO, sensitivity=SENS, order=a)
        paper = pbdp_paper.paper_tune(region, RHO, sensitivity=SENS, order=a).epsilon
        for t in (1, 10, 100, 1000):
            rows_b.append([a, t, t * float(tuned.baseline_epsilon), t * float(paper), t * float(tuned.epsilon)])
    C.write_csv(os.path.join(args.out, "fig6b.csv"), ["alpha", "T", "gaussian", "paper_opt", "exact_opt"], rows_b)
    plt = C.plt_or_none()
    if plt is None:
        return
    r = np.asarray(rows)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.8))
    for j, (name, style) in enumerate(
        (
            ("Gaussian (same utility)", "k-o"),
            ("PB paper mode", "C0--o"),
            ("PB at paper σ*, exact", "C1:o"),
            ("PB exact-optimal", "C2-o"),
        )
    ):
        ax.plot(r[:, 0], r[:, [1, 2, 4, 5][j]], style, label=name)
    C.decorate(ax, "T", "ε at δ = 1e-5", "(a) (ε,δ) after T releases: ΔQ=3, |S|=10, ρ=0.9", logx=True)
    rb = np.asarray(rows_b)
    for i, a in enumerate((2.0, 20.0)):
        m = rb[:, 0] == a
        for col, style, name in ((2, "-", "Gaussian"), (3, "--", "PB paper"), (4, ":", "PB exact-optimal")):
            bx.plot(rb[m, 1], rb[m, col], f"C{i}{style}o", label=f"{name}, α={a:g}")
    C.decorate(bx, "T", "RDP ε(α) after T releases", "(b) RDP (additive): T × per-release", logx=True)
    C.save(fig, os.path.join(args.out, "fig6.png"))


if __name__ == "__main__":
    main()
