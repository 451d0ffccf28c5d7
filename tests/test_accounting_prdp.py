"""``accounting.PrDPLedger``: composition of PrDP releases per privacy level."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import accounting
from dpjax import prdp
from dpjax.prdp import domains

EPS_MIN, EPS_MAX = 0.01, 2.0
FLOORS = np.ldexp(EPS_MIN, np.arange(8))


def test_shares_compose_and_a_release_past_a_floor_is_refused():
    ledger = accounting.PrDPLedger(eps_min=EPS_MIN, eps_max=EPS_MAX)
    assert ledger.num_levels == 8
    np.testing.assert_array_equal(ledger.floors, FLOORS)
    half = ledger.record(0.5, label="count")
    assert half.eps_min == 0.005 and half.eps_max == 1.0
    np.testing.assert_array_equal(half.charge, FLOORS / 2)
    np.testing.assert_array_equal(ledger.spent, FLOORS / 2)
    assert ledger.would_exceed(0.75) and not ledger.would_exceed(0.5)
    with pytest.raises(ValueError, match="fraction.*refused"):
        ledger.record(0.75)
    np.testing.assert_array_equal(ledger.spent, FLOORS / 2)  # nothing recorded
    ledger.record(0.25)
    ledger.record(0.25)
    np.testing.assert_array_equal(ledger.remaining, np.zeros(8))
    with pytest.raises(ValueError, match="level 1"):
        ledger.record(1e-6)
    assert [s.label for s in ledger.releases] == ["count", "", ""]
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="fraction"):
            ledger.record(bad)
    with pytest.raises(ValueError, match="eps_max"):
        accounting.PrDPLedger(eps_min=1.0, eps_max=0.5)


@jax.jit
def _levels(budgets, eps_min, eps_max):
    return domains.level_of(budgets, eps_min, domains.num_levels(eps_min, eps_max))


def test_charges_bound_every_records_spend_for_any_fraction():
    """For fractions that are not powers of two the release grid is the ledger's scaled and rounded:
    the charge of each ledger level must bound the release floor of every budget in that level,
    boundaries and their float neighbours included (the mechanisms' own level assignment)."""
    ledger = accounting.PrDPLedger(eps_min=EPS_MIN, eps_max=EPS_MAX)
    edges = np.ldexp(EPS_MIN, np.arange(9))
    rng = np.random.default_rng(0)
    budgets = np.concatenate(
        [
            edges,
            np.nextafter(edges, 0),
            np.nextafter(edges, 9),
            EPS_MIN * np.exp(rng.uniform(0, np.log(EPS_MAX / EPS_MIN), 3000)),
        ]
    )
    budgets = budgets[(budgets >= EPS_MIN) & (budgets <= EPS_MAX)]
    with jax.enable_x64(True):
        ledger_level = np.asarray(_levels(jnp.asarray(budgets), EPS_MIN, EPS_MAX))
        for c in (0.1, 0.3, 1 / 3, 0.7, 0.999, 0.5):
            share_budgets = c * budgets
            lo = c * EPS_MIN
            j = np.asarray(_levels(jnp.asarray(share_budgets), lo, c * EPS_MAX))
            spent = np.ldexp(lo, j)  # what every mechanism spends at most on the record
            charge = ledger.charge(c)
            assert np.all(spent <= charge[ledger_level]), c
            assert np.all(spent <= share_budgets)
            assert np.all(charge <= c * FLOORS * (1 + 1e-15))


@pytest.mark.slow
def test_verify_a_release_against_its_share():
    rng = np.random.default_rng(1)
    budgets = EPS_MIN * np.exp(rng.uniform(0, np.log(EPS_MAX / EPS_MIN), 500))
    values = np.floor(1.0 / budgets)
    ledger = accounting.PrDPLedger(eps_min=EPS_MIN, eps_max=EPS_MAX)
    share = ledger.record(0.5)
    keys = jax.random.split(jax.random.key(0), 20)
    res = jax.vmap(
        lambda k: prdp.sum(
            k, values, share.budgets(budgets), eps_min=share.eps_min, eps_max=share.eps_max, beta=0.1, upper=100.0
        )
    )(keys)
    ledger.verify(res)  # batched: every run within floors and within the charge
    assert np.all(np.asarray(res.level_epsilon) <= share.charge)
    other = prdp.count(jax.random.key(1), budgets, eps_min=EPS_MIN, eps_max=EPS_MAX, beta=0.1)
    with pytest.raises(ValueError, match="not a share"):
        ledger.verify(other)  # a release on the full budgets was never granted
    forged = res.__class__(
        **{**{f: getattr(res, f) for f in res.__dataclass_fields__}, "level_epsilon": res.level_floor * 1.5}
    )
    with pytest.raises(ValueError, match="A2"):
        ledger.verify(forged)
    with pytest.raises(ValueError, match="budgets"):
        jax.jit(share.budgets)(jnp.ones(3))  # scaling happens on concrete budgets, outside jit
