"""The exact discrete Gaussian (dpjax.exact.laws.discrete_gaussian): the fixed-trip inverse-CDF sampler is the host's
exact function of each record's words, its table is exact, and the host completion gives the same release."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax
from dpjax.exact import ThreefryWords, table_samplers
from dpjax.exact.laws import discrete_gaussian


@pytest.mark.parametrize("nvar", [5, 2**22 + 77])
def test_fast_gaussian_device_equals_exact_host_path(nvar):

    n = 40
    with jax.enable_x64(True):
        words = ThreefryWords(jax.random.key(6), (n,))
        code = np.asarray(jax.jit(lambda: discrete_gaussian.gaussian_code(words, n, nvar))())
        k0, k1 = int(words._k0), int(words._k1)
    assert not (code & 1).any()
    host = [
        discrete_gaussian.exact_gaussian_record(lambda j, i=i: table_samplers.threefry_word(k0, k1, j, i), nvar)
        for i in range(n)
    ]
    np.testing.assert_array_equal(code >> 8, host)


def test_fast_gaussian_icdf_table_is_exact():
    """T[k] = ⌊2^63 P(|Z| ≤ k)⌋ of the discrete Gaussian (pmf ∝ exp(−z²/(2n))), checked against 200-digit
    decimal sums, and the table ends where P(|Z| > K) < 2^-40."""
    import decimal

    nvar = 1000
    table = discrete_gaussian.dg_icdf(nvar)
    ctx = decimal.Context(prec=200)
    p = [ctx.exp(ctx.divide(decimal.Decimal(-k * k), decimal.Decimal(2 * nvar))) for k in range(3000)]
    s = ctx.add(p[0], ctx.multiply(decimal.Decimal(2), sum(p[1:], decimal.Decimal(0))))
    cum = [p[0]]
    for k in range(1, 3000):
        cum.append(ctx.add(cum[-1], ctx.multiply(decimal.Decimal(2), p[k])))
    for k in (0, 1, 17, 31, 100, len(table) - 2, len(table) - 1):
        want = int(
            ctx.multiply(ctx.divide(cum[k], s), decimal.Decimal(2**63)).to_integral_value(rounding=decimal.ROUND_FLOOR)
        )
        assert int(table[k]) == want
    tail = lambda k: ctx.divide(ctx.subtract(s, cum[k]), s)
    assert tail(len(table) - 1) < decimal.Decimal(2) ** -40 <= tail(len(table) - 2)


@pytest.mark.slow
def test_gaussian_release_host_completion_is_the_same_release(monkeypatch):
    """Words past the |Z| table go to the host (forced for P(|Z| > K) ≥ 2^-3 here): the same release."""

    mech = dpjax.Gaussian(3.0)
    x = jnp.linspace(-50, 50, 100, dtype=jnp.float32)
    key = jax.random.key(8)
    plain = np.asarray(dpjax.release(key, x, mech, numerics="exact"))
    discrete_gaussian.dg_icdf.cache_clear()
    discrete_gaussian.dg_guide.cache_clear()
    jax.clear_caches()  # the tables are constants of the compiled release
    monkeypatch.setattr(table_samplers, "ICDF_TAIL", 3)
    try:
        nvar = int(mech.exact_lattice().param)
        with jax.enable_x64(True):
            code = np.asarray(discrete_gaussian.gaussian_code(ThreefryWords(key, (100,)), 100, nvar))
        assert (code & 1).sum() > 5  # the host path really runs
        forced = np.asarray(dpjax.release(key, x, mech, numerics="exact"))
    finally:
        discrete_gaussian.dg_icdf.cache_clear()
        discrete_gaussian.dg_guide.cache_clear()
        jax.clear_caches()
    np.testing.assert_array_equal(plain, forced)
