"""Monte-Carlo privacy test (issue 12, "Done when"): on two neighbouring datasets of a few records, the
frequencies of every event of the output (ℓ, binned estimate) over 10^6 vmapped runs differ by at
most ``e^{E(r)}``, r the differing record (up to the statistical margin), for count and sum; and the
same check flags a mechanism calibrated above a record's budget (the test can fail). The count runs
by default; the framework-sum runs (a larger program to compile) are ``slow``.

D and D' are the same padded arrays with the differing record masked out of D, so each mechanism
compiles once for both datasets.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import prdp

RUNS = 1_000_000
EPS_MIN, EPS_MAX, BETA = 0.5, 2.0, 0.1  # two levels: [0.5, 1] and (1, 2]
BUDGETS = np.array([0.6, 1.5, 0.6])  # the third record r (level 1, floor 0.5) is the one added
VALUES = np.array([1.0, 3.0, 4.0])
D, D_PRIME = np.array([True, True, False]), np.array([True, True, True])
Z_MAX = 5.0  # one-sided z bound per event (Bonferroni over ~100 events: family error < 1e-4)


def _events(level_a, est_a, level_b, est_b, bins=25):
    """Counts of each (ℓ, estimate-bin) event for both runs; bins at pooled quantiles."""
    edges = np.quantile(np.concatenate([est_a, est_b]), np.linspace(0, 1, bins + 1)[1:-1])
    ea = np.asarray(level_a) * bins + np.searchsorted(edges, est_a)
    eb = np.asarray(level_b) * bins + np.searchsorted(edges, est_b)
    size = int(max(ea.max(), eb.max())) + 1
    return np.bincount(ea, minlength=size), np.bincount(eb, minlength=size)


def _worst(counts_a, counts_b, epsilon, min_count=400):
    """Max over events and both directions of the z-score of p_a − e^ε p_b (> 0 means a violation),
    and the largest empirical log-ratio among well-populated events."""
    pa, pb = counts_a / RUNS, counts_b / RUNS
    z, ratio = -np.inf, 0.0
    for p, q in ((pa, pb), (pb, pa)):
        ok = (p * RUNS >= min_count) & (q * RUNS >= min_count)
        p, q = p[ok], q[ok]
        sd = np.sqrt(p * (1 - p) / RUNS + np.exp(2 * epsilon) * q * (1 - q) / RUNS)
        z = max(z, float(np.max((p - np.exp(epsilon) * q) / sd)))
        ratio = max(ratio, float(np.max(np.log(p / q))))
    return z, ratio


def _run_and_score(fn, seed, epsilon):
    """Run ``fn(key, mask)`` 10^6 times on D and on D' (one compiled program) and score the events."""
    batched = jax.jit(jax.vmap(fn, in_axes=(0, None)))
    out_a = batched(jax.random.split(jax.random.key(seed), RUNS), jnp.asarray(D))
    out_b = batched(jax.random.split(jax.random.key(seed + 1), RUNS), jnp.asarray(D_PRIME))
    counts = _events(
        np.asarray(out_a.level), np.asarray(out_a.estimate), np.asarray(out_b.level), np.asarray(out_b.estimate)
    )
    return _worst(*counts, epsilon=epsilon)


@pytest.mark.slow
def test_count_event_frequencies_within_e_to_the_budget():
    fn = lambda k, m: prdp.count(k, BUDGETS, eps_min=EPS_MIN, eps_max=EPS_MAX, beta=BETA, mask=m)  # noqa: E731
    z, ratio = _run_and_score(fn, 0, BUDGETS[2])
    assert z < Z_MAX
    assert 0.35 < ratio < 0.62  # the loss reaches lo_1 = 0.5 in the tails: the test has power


@pytest.mark.slow
def test_count_calibrated_to_the_level_upper_edge_is_caught():
    """Erratum bug 1 as a mechanism: noise at 2·lo_i (budgets and ε̌ doubled) spends 1.0 > E(r) = 0.6."""
    fn = lambda k, m: prdp.count(
        k,
        2 * BUDGETS,
        eps_min=2 * EPS_MIN,
        eps_max=2 * EPS_MAX,
        beta=BETA,  # noqa: E731
        mask=m,
    )
    z, ratio = _run_and_score(fn, 10, BUDGETS[2])
    assert z > 2 * Z_MAX and ratio > 0.9


@pytest.mark.slow
def test_framework_sum_event_frequencies_within_e_to_the_budget():
    fn = lambda k, m: prdp.sum(
        k,
        VALUES,
        BUDGETS,
        eps_min=EPS_MIN,
        eps_max=EPS_MAX,
        beta=BETA,  # noqa: E731
        upper=4.0,
        mask=m,
    )
    z, ratio = _run_and_score(fn, 20, BUDGETS[2])
    assert z < Z_MAX
    assert 0.3 < ratio < 0.6  # bound lo_1/2 + lo_1/2 = 0.5 (ℓ = 1); the record is visible


@pytest.mark.slow
def test_framework_with_an_overspending_mechanism_is_caught():
    """The framework around an M that spends 10ε (a Laplace sum with a tenth of the noise) breaks E(r)."""

    def overspending_sum(key, values, weights, epsilon, beta, upper):
        return jnp.sum(jnp.where(weights, values, 0.0)) + upper / (10.0 * epsilon) * jax.random.laplace(
            key, dtype=jnp.float64
        )

    def fn(k, m):
        return prdp.framework(
            k, VALUES, BUDGETS, overspending_sum, eps_min=EPS_MIN, eps_max=EPS_MAX, beta=BETA, upper=4.0, mask=m
        )

    with jax.enable_x64(True):  # M samples with jax.random in float64 (see dpjax.prdp.framework)
        z, _ = _run_and_score(fn, 30, BUDGETS[2])
    assert z > 2 * Z_MAX
