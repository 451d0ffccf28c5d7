"""Shared helpers of the figure scripts: output folder, CSV/PNG writers, paper-mode formulas.

Paper mode = the paper's own (uncertified) accountant, spec §3 / §9.7 item 1, with the
conventions of spec §7.1: Gaussian kernel, analytic calibration, strip masses capped,
Remark 4 with the exponent fixed, Algorithm 1 with its indices fixed; the paper's
optimum is a search over σ ∈ [σ_base, 50 σ_base] (log grid, then refined). When
``accounting.pbdp_paper`` exists it is not needed here: these few closed forms are
kept local so that the figures do not depend on a module's signature.

Exact mode = :mod:`optimize` (exact closed forms / exact PLD composition).
"""

from __future__ import annotations

import argparse
import csv
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr, ndtri

from dpjax.kernels import gaussian_privacy_profile

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


# ----------------------------------------------------------------------------------
# paper mode (float64, vectorised)
# ----------------------------------------------------------------------------------
def sigma_base(tau, rho):
    return tau / ndtri((1.0 + rho) / 2.0)


def q_rule(rho, p_s):
    return jnp.clip((rho - p_s) / (rho * (1.0 - p_s)), 0.0, 1.0)


def paper_abs(sigma, tau, sens, rho):
    """Remark 4 parameters (absolute error): q, L2 and the printed strip mass W (capped)."""
    p_s = ndtr(tau / sigma) - ndtr(-tau / sigma)
    q = q_rule(rho, p_s)
    w = ndtr(jnp.minimum(sens - tau, tau) / sigma) - ndtr(-tau / sigma)
    return q, -jnp.log1p(-q), w


def paper_delta(eps, sigma, tau, sens, rho, count=1):
    """Prop 1 (count = 1) / Prop 3 with the corrected Algorithm 1 (count = T), Gaussian kernel."""
    q, l2, w = paper_abs(sigma, tau, sens, rho)
    mu = jnp.sqrt(count) * sens / sigma
    if count == 1:
        return (w * gaussian_privacy_profile(eps - l2, mu) + w * gaussian_privacy_profile(eps + l2, mu)
                + (1 - 2 * w) * gaussian_privacy_profile(eps, mu))
    # Algorithm 1 (fixed): V = coefficients of (W2 x^-1 + W3 + W1 x)^T, by one FFT power
    n = 1 << int(np.ceil(np.log2(2 * count + 3)))
    w = jnp.asarray(w)
    poly = jnp.stack([w, 1 - 2 * w, w], axis=-1)
    poly = jnp.concatenate([poly, jnp.zeros(poly.shape[:-1] + (n - 3,))], axis=-1)
    v = jnp.maximum(jnp.fft.irfft(jnp.fft.rfft(poly) ** count, n)[..., : 2 * count + 1], 0.0)
    ks = jnp.arange(-count, count + 1.0)
    prof = gaussian_privacy_profile(jnp.asarray(eps)[..., None] - ks * jnp.asarray(l2)[..., None], mu[..., None])
    return jnp.sum(v * prof, axis=-1)


def paper_rdp(order, sigma, tau, sens, rho):
    """Prop 2 / Remark 4 with the exponent fixed (spec §8 item 21)."""
    q, l2, w = paper_abs(sigma, tau, sens, rho)
    a1 = order - 1.0
    return order * sens**2 / (2 * sigma**2) + jnp.log(1 - 2 * w + w * (jnp.exp(a1 * l2) + jnp.exp(-a1 * l2))) / a1


def epsilon_from(delta_fn, delta, hi=2000.0, iters=80):
    """Smallest ε ≥ 0 with delta_fn(ε) ≤ delta, elementwise bisection (delta_fn decreasing)."""
    lo = jnp.zeros_like(jnp.asarray(delta_fn(0.0)))
    h = lo + hi

    def body(_, s):
        a, b = s
        m = 0.5 * (a + b)
        ok = delta_fn(m) <= delta
        return jnp.where(ok, a, m), jnp.where(ok, m, b)

    return jax.lax.fori_loop(0, iters, body, (lo, h))[1]


def paper_optimum(objective, sb, ratios=np.geomspace(1.0, 50.0, 160)):
    """min over σ = k·σ_base of ``objective(σ)`` (vectorised over a log grid of k, refined once)."""
    sb = jnp.asarray(sb)
    k = jnp.asarray(ratios)
    vals = objective(sb[..., None] * k)
    i = jnp.argmin(vals, axis=-1)
    lo = k[jnp.maximum(i - 1, 0)]
    hi = k[jnp.minimum(i + 1, k.size - 1)]
    fine = lo[..., None] * (hi / lo)[..., None] ** jnp.linspace(0, 1, 41)
    vals = objective(sb[..., None] * fine)
    j = jnp.argmin(vals, axis=-1)
    return jnp.take_along_axis(vals, j[..., None], -1)[..., 0], sb * jnp.take_along_axis(fine, j[..., None], -1)[..., 0]


x64 = jax.enable_x64


def single_release_curves(sens, rho, size, delta=None, order=None):
    """Gaussian, PB paper-optimum, PB exact at the paper's σ*, PB exact-optimum (absolute region).

    Arrays broadcast; ``size`` = |S| = 2τ. (ε, δ) when ``delta`` is given, RDP at ``order`` otherwise.
    """
    import dpjax
    import optimize

    sens, rho, size = np.broadcast_arrays(*(np.asarray(x, float) for x in (sens, rho, size)))
    tau = size / 2
    kw = {"delta": delta} if delta is not None else {"order": order}
    exact = optimize.tune_boosted(region=dpjax.AbsoluteError(tau), rho=rho, sensitivity=sens, **kw)
    with x64(True):
        sb = sigma_base(jnp.asarray(tau), jnp.asarray(rho))
        if delta is not None:
            def obj(s):
                return epsilon_from(lambda e: paper_delta(e, s, tau[..., None], sens[..., None], rho[..., None]),
                                    delta)
        else:
            def obj(s):
                return paper_rdp(order, s, tau[..., None], sens[..., None], rho[..., None])
        paper, sigma_star = paper_optimum(obj, sb)
        mech = dpjax.PrivacyBoosted(dpjax.Gaussian(sigma_star), dpjax.AbsoluteError(jnp.asarray(tau)),
                                    jnp.asarray(rho))
        at_paper = (optimize.exact_epsilon(mech, delta, sens) if delta is not None
                    else optimize.exact_renyi(mech, order, sens))
    return {"gaussian": np.asarray(exact.baseline_epsilon), "paper_opt": np.asarray(paper),
            "exact_at_paper_sigma": np.asarray(at_paper), "exact_opt": np.asarray(exact.epsilon),
            "sigma_paper": np.asarray(sigma_star), "sigma_exact": np.asarray(exact.sigma)}


CURVES = (("gaussian", "Gaussian (same utility)", "k-"), ("paper_opt", "PB, paper mode", "C0--"),
          ("exact_at_paper_sigma", "PB at paper σ*, exact", "C1:"), ("exact_opt", "PB exact-optimal", "C2-"))


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
