"""The exact randomized response's keep thresholds and the ε it reports, against 100-digit mpmath."""

from __future__ import annotations

import mpmath
import numpy as np

import dpjax
from dpjax.exact.laws.randomized_response import rr_keep as _rr_keep


def test_reported_epsilon_is_at_least_the_thresholds_true_epsilon():
    """For ε from 1e-300 to 700 and several category counts: the ε reported (the accountant's) is at least the ε of
    the law that runs, ln(T (k − 1)/(2^64 − T)) at 100 digits, and within 2 float64 ulp of it; keeping is at least
    as likely as each other category (the accountant's law), and T ≤ 2^64 e^ε/(e^ε + k − 1) wherever that allows."""
    eps = np.concatenate([np.logspace(-300, np.log10(700), 240), [6.35e-18, 1e-17, 1e-12, 5.2e-12]])
    with mpmath.workdps(100):
        for k in (2, 3, 5, 7, 1000):
            for e in eps:
                t, achieved = _rr_keep(float(e), k)
                truth = mpmath.log(mpmath.mpf(t * (k - 1)) / (2**64 - t))
                assert truth >= 0 and achieved >= truth, (k, e, achieved, truth)
                assert achieved <= np.nextafter(np.nextafter(float(truth), np.inf), np.inf) or truth == 0, (k, e)
                ideal = (
                    mpmath.mpf(2) ** 64 * mpmath.exp(mpmath.mpf(float(e))) / (mpmath.exp(mpmath.mpf(float(e))) + k - 1)
                )
                assert t <= ideal or t == -(-(2**64) // k), (k, e)
    lat = dpjax.RandomizedResponse(np.array([1e-300, 1e-17, 1e-12, 1.0, 700.0]), num_categories=3).exact_lattice()
    t = np.asarray(lat.param).astype(object)
    with mpmath.workdps(100):
        truth = [mpmath.log(mpmath.mpf(int(x) * 2) / (2**64 - int(x))) for x in t]
    assert all(float(r) >= q for r, q in zip(np.asarray(lat.noise.epsilon), truth))
