"""Batched runs of the PrDP experiments (Chen, Sun, Xu, Dong, SIGMOD 2025, §8 and App. B).

Shared by the ``examples/prdp_*.py`` scripts and the slow acceptance tests. Every method runs all
its repetitions as one ``jit(vmap(...))`` over keys, with the data, ε̌, ε̂ and the per-level value
bounds passed as arguments (a static ``max_levels``), so one compiled program serves every dataset,
privacy function and U of a given size n. Relative errors (RE) are ``|est − truth|/truth`` for count
and sum and the rank error ``#{v > ŷ}/n`` for max (the paper's §8.1); the paper reports the mean after
discarding the top and bottom 20 % of runs (:func:`trimmed_mean`).

Synthetic data (the paper's §8.1): normal ``N(μ, σ)`` redrawn until n non-negative values, floored; Zipf
surrogates ``v = s·K``, ``K ~ zipf(b)`` (the paper's scale is unknown: qualitative only).
"""

from __future__ import annotations

import math
import os
import sys
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from prdp_reference import normal_data, trimmed_mean  # noqa: E402  (spec Appendix A)

from dpjax import prdp  # noqa: E402

__all__ = [
    "normal_data",
    "zipf_data",
    "trimmed_mean",
    "Setting",
    "run",
    "METHODS",
    "COUNT_METHODS",
    "SUM_METHODS",
    "MAX_LEVELS",
]

MAX_LEVELS = 48  # covers ε̂/ε̌ up to 2^48: every U of the sweeps (U = 1e16 gives L = 47)
COUNT_METHODS = ("naive_count", "pdp_count", "prdp_count")
SUM_METHODS = ("naive_sum", "pdp_sum", "extension", "framework")
METHODS = COUNT_METHODS + SUM_METHODS + ("max", "local_count", "local_count_paper")


def zipf_data(rng, n, b, scale):
    """Zipf surrogate ``v = scale·K``, ``K ~ zipf(b)`` (support K ≥ 1), the paper's §8.1."""
    return scale * rng.zipf(b, n).astype(np.float64)


class Setting:
    """A privacy function E (``"inverse"``, ``"sqrt"``, ``"log"``) at bound U, ε̂ = 100, β = 0.1."""

    def __init__(self, kind="inverse", upper=1e12, eps_max=100.0, beta=0.1):
        self.E = getattr(prdp.PrivacyFunction, kind)(upper, eps_max=eps_max)
        self.kind, self.upper, self.beta = kind, float(upper), beta
        self.eps_min, self.eps_max = float(self.E.eps_min), float(eps_max)
        self.level_upper = np.asarray(self.E.level_upper(MAX_LEVELS))


def _ranks(x_sorted, y):
    """Rank error ``#{v > y}/n`` for each output y."""
    return (x_sorted.size - np.searchsorted(x_sorted, y, side="right")) / x_sorted.size


@partial(jax.jit, static_argnames=("method",))
def _batch(keys, x, e, eps_min, eps_max, beta, level_upper, *, method):
    kw = dict(eps_min=eps_min, eps_max=eps_max, beta=beta, max_levels=MAX_LEVELS)
    upper = level_upper[0]  # U

    def one(k):
        if method == "prdp_count":
            return prdp.count(k, e, **kw).estimate
        if method == "naive_count":
            return prdp.naive_count(k, e, eps_min=eps_min, eps_max=eps_max, max_levels=MAX_LEVELS).estimate
        if method == "extension":
            return prdp.sum(k, x, e, upper=level_upper, method="extension", **kw).estimate
        if method == "framework":
            return prdp.sum(k, x, e, upper=level_upper, **kw).estimate
        if method == "naive_sum":
            return prdp.naive_sum(
                k, x, e, upper=upper, eps_min=eps_min, eps_max=eps_max, beta=beta, max_levels=MAX_LEVELS
            ).estimate
        if method == "max":
            return prdp.max(k, x, e, upper=level_upper, **kw).estimate
        if method == "local_count":
            return prdp.local_count(k, e, **kw).estimate
        if method == "local_count_paper":
            return prdp.local_count(k, e, threshold="paper", **kw).estimate
        raise ValueError(method)

    return jax.vmap(one)(keys)


def _pdp(keys, x, e, s: Setting, method):
    """The PDP baselines need a static query count t, i.e. concrete ε̌, ε̂ and U: one program per setting."""
    kw = dict(eps_min=s.eps_min, eps_max=s.eps_max, beta=s.beta)
    if method == "pdp_count":
        f = jax.vmap(lambda k, e: prdp.pdp_count(k, e, **kw), in_axes=(0, None))
        return f(keys, e)
    f = jax.vmap(lambda k, x, e: prdp.pdp_sum(k, x, e, upper=s.upper, **kw), in_axes=(0, None, None))
    return f(keys, x, e)


def run(x, s: Setting, methods=METHODS, runs=50, seed=0):
    """Relative errors (``runs`` each) of ``methods`` on values ``x`` (clipped to ``[0, U]``) under ``s``."""
    x = np.minimum(np.asarray(x, np.float64), s.upper)
    e = np.asarray(s.E(x))
    n, total, x_sorted = x.size, x.sum(), np.sort(x)
    out = {}
    for i, method in enumerate(methods):
        keys = jax.random.split(jax.random.fold_in(jax.random.key(seed), i), runs)
        if method.startswith("pdp"):
            est = _pdp(keys, x, e, s, method)
        else:
            with jax.enable_x64(True):
                est = _batch(
                    keys,
                    jnp.asarray(x),
                    jnp.asarray(e),
                    s.eps_min,
                    s.eps_max,
                    s.beta,
                    jnp.asarray(s.level_upper),
                    method=method,
                )
        est = np.asarray(est, np.float64)
        if method == "max":
            out[method] = _ranks(x_sorted, est)
        elif method in COUNT_METHODS or method.startswith("local_count"):
            out[method] = np.abs(est - n) / n
        else:
            out[method] = np.abs(est - total) / total
    return out


def re_percent(errors, frac=0.2):
    """The paper's metric: 100 × the mean of the middle 60 % of runs."""
    return 100.0 * trimmed_mean(errors, frac)


def table3_data(rng, n=200_000):
    """The synthetic columns of Table 3: N1, N2 (normal μ = σ), Z3, Z5 (Zipf surrogates)."""
    return {
        "N1": normal_data(rng, n, 5e4, 5e4),
        "N2": normal_data(rng, n, 5e5, 5e5),
        "Z3": zipf_data(rng, n, 3.0, 1e3),
        "Z5": zipf_data(rng, n, 5.0, 1e4),
    }


def log10_range(lo, hi, per_decade=1):
    return [10.0**k for k in np.arange(math.log10(lo), math.log10(hi) + 1e-9, 1.0 / per_decade)]
