"""The platform check of the transcendental functions the exact tier's per-record decisions rely on.

The float32 decision (exp, log at ``TRANSCENDENTAL_ERROR32``) and the float64 one (exp, log, log1p at
``TRANSCENDENTAL_ERROR``) are exact only where XLA's functions on the backend stay within those bounds: the device's
values over a fixed sweep are compared with the host's at first use, and a function past a safe fraction of its bound
disables the decisions relying on it there (the release unchanged: the float64 program or the host decides).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax
from dpjax.exact import table_samplers as ts


def test_this_backends_transcendentals_are_within_the_assumed_bounds():
    errors = ts.transcendental_errors()
    assert set(errors) == {
        ("exp", "float64"),
        ("log", "float64"),
        ("log1p", "float64"),
        ("exp", "float32"),
        ("log", "float32"),
    }
    for (name, dtype), err in errors.items():
        bound = ts.TRANSCENDENTAL_ERROR if dtype == "float64" else ts.TRANSCENDENTAL_ERROR32
        assert 0.0 <= err <= ts.PLATFORM_MARGIN * bound, (name, dtype, err)
    assert ts.transcendentals_trusted("float32") and ts.transcendentals_trusted("float64")


def _inaccurate(dtype, name, factor):
    """``name`` off by the relative ``factor`` on inputs of ``dtype`` (the other dtype's values unchanged)."""
    good = ts.TRANSCENDENTALS[name]

    def bad(x):
        y = good(x)
        return y * jnp.asarray(factor, y.dtype) if x.dtype == dtype else y

    return bad


def _fresh_check(monkeypatch):
    monkeypatch.setattr(ts, "_platform_errors", {})
    monkeypatch.setattr(ts, "_warned", set())
    jax.clear_caches()  # (programs traced with the accurate functions)


@pytest.mark.parametrize(
    "dtype,name,mech,factor",
    [
        (
            jnp.float32,
            "exp",
            "discrete",
            1 + 2.0**-7,
        ),  # the float32 decision: per-record discrete Laplace τ in [2^-5, 2^5]
        pytest.param(jnp.float64, "log", "laplace", 1 + 2.0**-30, marks=pytest.mark.slow),  # the float64 decision
    ],
    ids=["float32-exp", "float64-log"],
)
def test_an_inaccurate_transcendental_disables_its_decision_and_keeps_the_release(
    monkeypatch, dtype, name, mech, factor
):
    """An injected inaccurate function: the check reports it, warns once, and the release stays bitwise the exact
    release (the host's exact function of the words: ``tests/test_exact_laws_discrete_laplace.py`` checks the accurate
    route against it); trusting it instead changes outputs (the injection matters)."""
    rng = np.random.default_rng(3)
    n = 600
    if mech == "discrete":
        values, m = jnp.asarray(rng.integers(-50, 50, n), jnp.int32), dpjax.DiscreteLaplace(rng.uniform(0.05, 30.0, n))
    else:
        values, m = jnp.asarray(rng.normal(size=n), jnp.float32), dpjax.Laplace(rng.uniform(0.5, 4.0, n))
    key = jax.random.key(8)
    want = np.asarray(dpjax.release(key, values, m, numerics="exact"))
    dt = "float32" if dtype == jnp.float32 else "float64"
    try:
        _fresh_check(monkeypatch)
        monkeypatch.setitem(ts.TRANSCENDENTALS, name, _inaccurate(dtype, name, factor))
        assert ts.transcendental_errors()[(name, dt)] > ts.PLATFORM_MARGIN * (
            ts.TRANSCENDENTAL_ERROR32 if dt == "float32" else ts.TRANSCENDENTAL_ERROR
        )
        with pytest.warns(RuntimeWarning, match=f"XLA's {dt} {name} errs up to"):
            got = np.asarray(dpjax.release(key, values, m, numerics="exact"))
        np.testing.assert_array_equal(got, want)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once per backend and dtype
            np.testing.assert_array_equal(np.asarray(dpjax.release(key, values, m, numerics="exact")), want)
        jax.clear_caches()
        monkeypatch.setattr(ts, "transcendentals_trusted", lambda dtype, backend=None: True)
        assert np.any(np.asarray(dpjax.release(key, values, m, numerics="exact")) != want)
    finally:
        jax.clear_caches()  # (no program traced with the injected function outlives the test)
