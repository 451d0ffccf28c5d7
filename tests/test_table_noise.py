"""The table quantile's exponential mechanism (:func:`dpjax.table.noise.exponential_mechanism`): its draws follow
the exact law, and the host's interval-arithmetic completion agrees with every decision of the float pass."""

import numpy as np
import pytest
from scipy import stats

from dpjax.table import noise

PAIR = (np.uint32(11), np.uint32(12))


def _case(groups, seed, candidates=33):
    """One histogram of ``candidates − 1`` leaves repeated over ``groups`` groups with random key words."""
    rng = np.random.default_rng(seed)
    below = np.concatenate([[0], np.cumsum(rng.integers(0, 5, candidates - 1))])
    words = rng.integers(0, 2**32, (groups, 2), dtype=np.uint64).astype(np.uint32)
    table = np.repeat(below[None, :], groups, axis=0)
    return words, table, table[:, -1].copy()


def _law(below, q, scale):
    score = -np.abs(below - q * below[-1])
    p = np.exp((score - score.max()) / scale)
    return p / p.sum()


@pytest.mark.parametrize("q, scale", [(0.5, 3.0), (0.9, 1.5)])
def test_draws_follow_the_exponential_mechanism(q, scale):
    """χ² of 100 000 draws (one per group key) against ``exp(u_j/β)/Σ exp(u_i/β)``, ``u_j = −|L_j − q·n|``."""
    words, below, total = _case(100_000, 1)
    got = noise.exponential_mechanism(PAIR, words, below, total, q, scale)
    p = _law(below[0], q, scale)
    obs = np.bincount(got, minlength=len(p))
    assert obs[p * len(got) < 1e-3].sum() == 0
    keep = p * len(got) >= 5
    expected = p[keep] / p[keep].sum() * obs[keep].sum()
    assert stats.chisquare(obs[keep], expected).pvalue > 1e-3


def test_host_completion_agrees_with_the_float_pass(monkeypatch):
    """With the float pass made unable to decide (error bound 1/4), every group is drawn by the host's interval
    arithmetic: the same candidates as the float pass's decisions, for every group."""
    words, below, total = _case(200, 2, candidates=17)
    fast = noise.exponential_mechanism(PAIR, words, below, total, 0.3, 2.0)
    calls = []
    exact = noise._exact_choice

    def counted(*args):
        calls.append(args)
        return exact(*args)

    monkeypatch.setattr(noise, "_cdf_error", lambda n, c, scale: 0.25)
    monkeypatch.setattr(noise, "_exact_choice", counted)
    slow = noise.exponential_mechanism(PAIR, words, below, total, 0.3, 2.0)
    assert len(calls) > 150  # (groups whose uniform is within 1/4 of no boundary are still decided in float)
    np.testing.assert_array_equal(slow, fast)
