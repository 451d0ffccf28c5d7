"""The exact tier's shared table machinery (dpjax.exact.table_samplers): the one-word search on 32-bit halves, the
assumed error bounds of the transcendental functions, and their platform check.

The platform check of the transcendental functions the exact tier's per-record decisions rely on:

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
from dpjax.exact.laws import discrete_gaussian


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


def test_float64_transcendentals_are_within_the_assumed_error():
    """The per-record discrete Laplace's decisions assume XLA's float64 log, exp and log1p within
    ts.TRANSCENDENTAL_ERROR (2^-48) relative: measured against 60-digit mpmath on the arguments it
    uses, they are within 2^-50 here (the platform margin: 4× headroom)."""
    import mpmath

    rng = np.random.default_rng(0)
    s = np.concatenate(
        [rng.uniform(0, 1, 3000), 2.0 ** -rng.uniform(0, 63, 3000), 1 - 2.0 ** -rng.uniform(1, 52, 1000)]
    )
    lam = np.concatenate([2.0 ** rng.uniform(-41, 5, 3000), rng.uniform(0, 10, 1000)])
    with jax.enable_x64(True):
        e = np.asarray(jax.jit(lambda x: jnp.exp(-x))(lam))
        cases = (
            ("log", s, np.asarray(jax.jit(jnp.log)(s)), mpmath.log),
            ("exp", -lam, e, mpmath.exp),
            ("log1p", e, np.asarray(jax.jit(jnp.log1p)(e)), mpmath.log1p),
        )
    worst = 0.0
    with mpmath.workdps(60):
        for _, args, got, fn in cases:
            for a, g in zip(args, got):
                ref = fn(mpmath.mpf(float(a)))
                if ref != 0:
                    worst = max(worst, float(abs((mpmath.mpf(float(g)) - ref) / ref)))
    assert worst < 2.0**-50 and ts.PLATFORM_MARGIN * ts.TRANSCENDENTAL_ERROR >= 2.0**-50, worst


def test_float32_transcendentals_are_within_the_assumed_error():
    """The per-record discrete Laplace's float32 decision assumes XLA's float32 exp within
    ts.TRANSCENDENTAL_ERROR32 (2^-18) relative and its log within that times |log r| + 1, on the
    arguments it uses (−λ for the scales 2^-5 … 2^5; r = q 2^32/((1 + q) W) from below e^-32 to 2^32, near 1 and
    near powers of two): measured against float64 (whose own error, ~2^-53, is negligible here), they are within
    2^-22 (16× headroom)."""

    rng = np.random.default_rng(0)
    f32 = np.float32
    lam = (2.0 ** rng.uniform(-5.01, 5.01, 300_000)).astype(f32)
    ones = 1.0 + np.arange(-(2**15), 2**15) * 2.0**-24
    pow2 = np.ldexp(1.0 + rng.integers(-8, 9, 20_000) * 2.0**-23, rng.integers(-48, 33, 20_000))
    r = np.concatenate([2.0 ** rng.uniform(-48, 32, 300_000), ones[ones != 1.0], pow2]).astype(f32)
    with jax.enable_x64(True):
        e = np.asarray(jax.jit(lambda x: jnp.exp(-x))(jnp.asarray(lam)), np.float64)
        lg = np.asarray(jax.jit(jnp.log)(jnp.asarray(r)), np.float64)
    ref_e, ref_l = np.exp(-lam.astype(np.float64)), np.log(r.astype(np.float64))
    worst = max(np.max(np.abs(e - ref_e) / ref_e), np.max(np.abs(lg - ref_l) / (np.abs(ref_l) + 1.0)))
    assert worst < ts.TRANSCENDENTAL_ERROR32 / 16, np.log2(worst)


class _CraftedWords:
    """Word 0 of every record given (a uint64 array): ``halves`` as :class:`ThreefryWords` serves them."""

    def __init__(self, u):
        self.u = np.asarray(u, np.uint64)
        self.records = jnp.arange(self.u.size, dtype=jnp.uint32)

    def halves(self, j, records=None):
        assert j == 0
        return jnp.asarray((self.u >> np.uint64(32)).astype(np.uint32)), jnp.asarray(self.u.astype(np.uint32))


@pytest.mark.parametrize("nvar", [5, 2**22 + 77])
def test_device_search_on_32_bit_halves(nvar):
    """The one-word search compares 32-bit halves: words whose high half equals a threshold's (just below it, on it,
    just above it) are decided by the low halves in a long table (exactly: |Z| = #{T ≤ v}, open only on a tie) and
    left open for the host in a short one (≤ EXACT_LOW_ABOVE thresholds); every decided record is the host's exact
    value, and the host completes the open ones to the same function of the word."""

    tab = discrete_gaussian.dg_icdf(nvar)
    ks = np.linspace(0, tab.size - 1, 12).astype(np.int64)
    near = np.concatenate([tab[ks] - np.uint64(1), tab[ks], tab[ks] + np.uint64(1)])
    far = (tab[ks] & ~np.uint64(0xFFFFFFFF)) - np.uint64(1)  # below the threshold's high half: decided by it
    v = np.concatenate([near, far[far < tab[ks]]])
    u = np.concatenate([v, v | np.uint64(1 << 63)])  # both signs
    with jax.enable_x64(True):
        z, flag = (np.asarray(a) for a in ts.symmetric_noise(_CraftedWords(u), tab, *discrete_gaussian.dg_guide(nvar)))
    host = np.array([discrete_gaussian.exact_gaussian_record(lambda j, w=int(w): w, nvar) for w in u])
    ties = np.isin(u & np.uint64((1 << 63) - 1), tab)  # (V against F: the further words decide)
    count = np.searchsorted(tab, u & np.uint64((1 << 63) - 1), side="right")
    np.testing.assert_array_equal(np.where(u >> np.uint64(63) == 1, -count, count)[~ties], host[~ties])
    np.testing.assert_array_equal(z[~flag], host[~flag])
    if tab.size > ts.EXACT_LOW_ABOVE:
        np.testing.assert_array_equal(flag, ties | (count == tab.size))  # a tie, or past the table
    else:
        same_high = np.isin((u & np.uint64((1 << 63) - 1)) >> np.uint64(32), tab >> np.uint64(32))
        assert flag[same_high].all() and not flag[~same_high & (count < tab.size)].any()
