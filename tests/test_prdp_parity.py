"""Parity with the NumPy reference of spec Appendix A (``examples/prdp_reference.py``), in distribution.

Same data, independent randomness: the engine's releases and the reference's must be two samples
of one law (two-sample KS on the estimate, and on ℓ where the reference returns it). Inverse E,
U = 10^12, ε̂ = 100, β = 0.1 on 20 000 normal(5·10^4, 5·10^4) values. The count runs by default;
the other mechanisms are ``slow`` (each compiles its own program; the reference loops in Python).
"""

from __future__ import annotations

import os
import sys

import jax
import numpy as np
import pytest
from scipy import stats

from dpjax import prdp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import prdp_reference as ref  # noqa: E402

RNG = np.random.default_rng(11)
S = ref.Setting("inv", 1e12)
X = ref.normal_data(RNG, 20_000, 5e4, 5e4)
E = S.E(X)
FN = prdp.PrivacyFunction.inverse(1e12)
KW = dict(eps_min=float(FN.eps_min), eps_max=100.0, beta=0.1)
UPPER_LEVELS = np.asarray(FN.level_upper())


def _engine(fn, runs, seed=0):
    keys = jax.random.split(jax.random.key(seed), runs)
    with jax.enable_x64(True):  # the data enter jit as float64 arguments
        return jax.jit(jax.vmap(fn, in_axes=(0, None, None)))(keys, X, E)


def _reference(fn, runs, seed=1):
    rng = np.random.default_rng(seed)
    return np.asarray([fn(rng) for _ in range(runs)], dtype=object)


CASES = {
    "count": (lambda k, x, e: prdp.count(k, e, **KW), lambda rng: ref.prdp_count(rng, S, E, 0.1)[::2], 3000),
    "framework_sum": (
        lambda k, x, e: prdp.sum(k, x, e, upper=1e12, **KW),
        lambda rng: (None, ref.prdp_framework(rng, S, X, E, 0.1, ref.universal_sum)),
        1500,
    ),
    "extension_sum": (
        lambda k, x, e: prdp.sum(k, x, e, upper=UPPER_LEVELS, method="extension", **KW),
        lambda rng: (None, ref.prdp_sum_extension(rng, S, X, E, 0.1)),
        1500,
    ),
    "max": (
        lambda k, x, e: prdp.max(k, x, e, upper=UPPER_LEVELS, **KW),
        lambda rng: (None, ref.prdp_framework(rng, S, X, E, 0.1, ref.em_max, restrict_domain=True)),
        1000,
    ),
    "local_count_paper": (
        lambda k, x, e: prdp.local_count(k, e, threshold="paper", **KW),
        lambda rng: ref.prldp_count(rng, S, E, 0.1, "paper")[::2],
        1500,
    ),
    "pdp_count": (lambda k, x, e: prdp.pdp_count(k, e, **KW), lambda rng: (None, ref.pdp_count(rng, S, E, 0.1)), 1500),
    "pdp_sum": (
        lambda k, x, e: prdp.pdp_sum(k, x, e, upper=1e12, **KW),
        lambda rng: (None, ref.pdp_sum(rng, S, X, E, 0.1)),
        600,
    ),
    "naive_sum": (
        lambda k, x, e: prdp.naive_sum(k, x, e, upper=1e12, **KW).estimate,
        lambda rng: (None, ref.naive_sum(rng, S, X, 0.1)),
        1500,
    ),
}
DEFAULT = ("count",)


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in DEFAULT else pytest.mark.slow) for n in CASES])
def test_engine_matches_the_reference_in_distribution(name):
    engine_fn, reference_fn, runs = CASES[name]
    out = _engine(engine_fn, runs)
    est = np.asarray(getattr(out, "estimate", out), np.float64)
    got = _reference(reference_fn, runs)
    ref_est = np.asarray(got[:, 1], np.float64)
    assert stats.ks_2samp(est, ref_est).pvalue > 1e-3, (name, np.median(est), np.median(ref_est))
    if got[0, 0] is not None:  # the reference returns ℓ (1-based)
        ref_level = np.asarray(got[:, 0], np.int64)
        levels = np.arange(1, 40)
        a = np.bincount(np.asarray(out.level), minlength=40)[levels]
        b = np.bincount(ref_level, minlength=40)[levels]
        keep = (a + b) > 0
        assert stats.chi2_contingency(np.stack([a[keep], b[keep]]) + 0.5).pvalue > 1e-3
