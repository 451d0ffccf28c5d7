"""The odometers under threads: a check-and-record is one indivisible step.

Each test makes many threads contend (a ``threading.Barrier`` releases them together) on one
ledger whose budget admits exactly N records: exactly N calls succeed, the ledger holds N,
every other call raises. Without a lock the threads read the same state, all pass the check
and overwrite each other's record (the audit's 4 × 10 Gaussian records left 11 entries; with a
budget of 10, 37 calls returned success).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import accounting
import dpjax


def _contend(threads, calls, fn):
    """Run ``fn()`` ``calls`` times in each of ``threads`` threads started together; returns
    (successes, refusals with ValueError); any other exception fails the test."""
    barrier = threading.Barrier(threads)
    ok, refused, other = [], [], []

    def worker():
        barrier.wait()
        for _ in range(calls):
            try:
                fn()
                ok.append(1)
            except ValueError:
                refused.append(1)
            except Exception as err:  # noqa: BLE001 - surfaced below
                other.append(err)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not other, other[0]
    return len(ok), len(refused)


def _budget_admitting(epsilons, n):
    """A budget strictly between the ε after n records and after n + 1."""
    return 0.5 * (epsilons[n - 1] + epsilons[n])


def test_accountant_records_every_call_from_many_threads():
    acc = accounting.Accountant(delta=1e-6)
    ok, refused = _contend(16, 25, lambda: acc.record(dpjax.Gaussian(20.0)))
    assert (ok, refused) == (400, 0)
    assert [r.count for r in acc.releases] == [400]


def test_accountant_budget_admits_exactly_n_under_threads():
    n = 37
    probe = accounting.Accountant(delta=1e-6)
    eps = [probe.record(dpjax.Gaussian(20.0)) for _ in range(n + 1)]
    budget = _budget_admitting(eps, n)
    acc = accounting.Accountant(epsilon_budget=budget, delta=1e-6)
    ok, refused = _contend(16, 25, lambda: acc.record(dpjax.Gaussian(20.0)))
    assert (ok, refused) == (n, 400 - n)
    assert [r.count for r in acc.releases] == [n]
    assert acc.spent_epsilon() == eps[n - 1] <= budget


@pytest.mark.slow
def test_dpsgd_accountant_budget_admits_exactly_n_under_threads():
    n = 12
    probe = accounting.DpsgdAccountant(1.0, 0.05, delta=1e-5)
    eps = [probe.step() for _ in range(n + 1)]
    acc = accounting.DpsgdAccountant(1.0, 0.05, delta=1e-5, epsilon_budget=_budget_admitting(eps, n))
    ok, refused = _contend(8, 4, acc.step)
    assert (ok, refused) == (n, 32 - n)
    assert acc.steps == n
    assert acc.epsilon() == eps[n - 1]


def test_dpsgd_accountant_rdp_path_counts_every_step_under_threads():
    acc = accounting.DpsgdAccountant(1.0, 0.01, delta=1e-5, mechanism=dpjax.DiscreteGaussian)
    ok, _ = _contend(8, 5, acc.step)
    assert ok == 40 and acc.steps == 40
    assert acc._rdp == {(1.0, 0.01): 40}


@pytest.mark.slow
def test_prdp_ledger_grants_exactly_n_under_threads(monkeypatch):
    probe = accounting.PrDPLedger(eps_min=0.01, eps_max=2.0)
    n = 0
    while not probe.would_exceed(1 / 64):
        probe.record(1 / 64)
        n += 1
    assert n >= 60
    ledger = accounting.PrDPLedger(eps_min=0.01, eps_max=2.0)

    # a grant is a few microseconds of numpy that keep the GIL: widen the window between the
    # check and the charge (the share is made there) so that unlocked threads would interleave
    def slow_share(*args):
        time.sleep(1e-3)
        return accounting.PrDPShare(*args)

    monkeypatch.setattr(accounting.prdp, "PrDPShare", slow_share)
    ok, refused = _contend(16, 25, lambda: ledger.record(1 / 64))
    assert (ok, refused) == (n, 400 - n)
    assert len(ledger.releases) == n
    np.testing.assert_array_equal(ledger.spent, probe.spent)
