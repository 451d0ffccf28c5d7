"""Shared helpers of the figure scripts: output folder, CSV/PNG writers, the four single-release curves.

Paper mode = :mod:`accounting.papers.pbdp` (the paper's own, NOT CERTIFIED accountant, Jiang et al.,
IEEE S&P 2025, §3) with these conventions: Gaussian kernel, analytic calibration,
strip masses capped, Remark 4 with the exponent fixed, Algorithm 1 with its indices fixed;
the paper's optimum is ``pbdp_paper.paper_tune`` (log grid over σ ∈ [σ_base, 50 σ_base],
refined).

Exact mode = :mod:`optimize` (exact closed forms / exact PLD composition).
"""

from __future__ import annotations

import argparse
import csv
import os

import jax
import jax.numpy as jnp
import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))

DEFAULT_OUT = os.path.join(_HERE, "out")


def parse_args(doc):
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="output folder (default: examples/out/)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    return args


def write_csv(path, header, rows):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r in rows:
            w.writerow([f"{x:.6g}" if isinstance(x, (float, np.floating)) else x for x in r])
    print("wrote", path)


def plt_or_none():
    """matplotlib.pyplot (Agg backend) when the ``plot`` extra is installed, else None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (pip install dpjax[plot]): CSV only")
        return None
    return plt


def decorate(ax, xlabel, ylabel, title, *, logx=False, logy=True, legend_size=7):
    """Axis labels, title, log scales and legend of one panel."""
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=legend_size)


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print("wrote", path)


x64 = jax.enable_x64


def single_release_curves(sens, rho, size, delta=None, order=None):
    """Gaussian, PB paper-optimum, PB exact at the paper's σ*, PB exact-optimum (absolute region).

    Arrays broadcast; ``size`` = |S| = 2τ. (ε, δ) when ``delta`` is given, RDP at ``order`` otherwise.
    """
    import dpjax
    import optimize
    from accounting.papers import pbdp as pbdp_paper

    sens, rho, size = np.broadcast_arrays(*(np.asarray(x, float) for x in (sens, rho, size)))
    tau = size / 2
    kw = {"delta": delta} if delta is not None else {"order": order}
    exact = optimize.tune_boosted(region=dpjax.AbsoluteError(tau), rho=rho, sensitivity=sens, **kw)
    paper = pbdp_paper.paper_tune(dpjax.AbsoluteError(tau), rho, sensitivity=sens, **kw)
    paper, sigma_star = paper.epsilon, paper.sigma
    with x64(True):
        mech = dpjax.PrivacyBoosted(dpjax.Gaussian(sigma_star), dpjax.AbsoluteError(jnp.asarray(tau)), jnp.asarray(rho))
        at_paper = (
            optimize.exact_epsilon(mech, delta, sens) if delta is not None else optimize.exact_renyi(mech, order, sens)
        )
    return {
        "gaussian": np.asarray(exact.baseline_epsilon),
        "paper_opt": np.asarray(paper),
        "exact_at_paper_sigma": np.asarray(at_paper),
        "exact_opt": np.asarray(exact.epsilon),
        "sigma_paper": np.asarray(sigma_star),
        "sigma_exact": np.asarray(exact.sigma),
    }


CURVES = (
    ("gaussian", "Gaussian (same utility)", "k-"),
    ("paper_opt", "PB, paper mode", "C0--"),
    ("exact_at_paper_sigma", "PB at paper σ*, exact", "C1:"),
    ("exact_opt", "PB exact-optimal", "C2-"),
)


def panel_figure(path_stem, panels, x_name, x_label):
    """Write one CSV and (with matplotlib) one PNG of 2×2 panels ``(title, x, {label: curves})``."""
    rows = []
    for title, x, groups in panels:
        for label, c in groups.items():
            for i, xi in enumerate(x):
                rows.append([title, label, xi] + [c[k][i] for k, _, _ in CURVES])
    write_csv(path_stem + ".csv", ["panel", "setting", x_name] + [k for k, _, _ in CURVES], rows)
    plt = plt_or_none()
    if plt is None:
        return
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for ax, (title, x, groups) in zip(axes.ravel(), panels):
        for j, (label, c) in enumerate(groups.items()):
            for k, name, style in CURVES:
                ax.plot(x, c[k], style, alpha=1.0 - 0.35 * j, label=f"{name} ({label})")
        decorate(ax, x_label, "ε", title, legend_size=6)
    save(fig, path_stem + ".png")
