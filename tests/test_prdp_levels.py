"""Privacy-specified domains and the paper's privacy functions."""

from __future__ import annotations

import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import prdp
from dpjax.prdp import domains


def _exact_level(e: float, eps_min: float, levels: int) -> int:
    """1-based level by exact rational comparisons: the least k ≥ 1 with E ≤ ε̌·2^k, clipped to L."""
    ratio = Fraction(e) / Fraction(eps_min)
    k = 1
    while ratio > 2**k:
        k += 1
    return min(k, levels)


def _exact_num_levels(eps_min: float, eps_max: float) -> int:
    ratio = Fraction(eps_max) / Fraction(eps_min)
    k = 1
    while ratio > 2**k:
        k += 1
    return k


@jax.jit
def _levels_jit(budgets, eps_min, eps_max):
    L = domains.num_levels(eps_min, eps_max)
    return domains.level_of(budgets, eps_min, L) + 1, L


def _levels(budgets, eps_min, eps_max):
    """1-based levels and L, in float64 (one compiled program per input length)."""
    with jax.enable_x64(True):
        lv, L = _levels_jit(jnp.asarray(budgets, jnp.float64), jnp.float64(eps_min), jnp.float64(eps_max))
        return np.asarray(lv), int(L)


@pytest.mark.parametrize("eps_min", [1e-8, 7.8125e-6, 0.3, 1.0, 5e-300 * 2**40])
def test_levels_exact_at_powers_of_two_and_their_neighbours(eps_min):
    """A1: E = 2^k ε̌ is in level k, E = ε̌ in level 1, and no level's floor exceeds E."""
    eps_max = eps_min * 2**33 * 1.37
    k = np.arange(0, 35)
    edges = np.ldexp(eps_min, k)
    cases = np.concatenate([edges, np.nextafter(edges, np.inf), np.nextafter(edges, 0.0)])
    cases = cases[cases >= eps_min]
    rng = np.random.default_rng(0)
    cases = np.concatenate([cases, eps_min * np.exp(rng.uniform(0.0, math.log(eps_max / eps_min), 2000))])
    got, L = _levels(cases, eps_min, eps_max)
    assert L == _exact_num_levels(eps_min, eps_max) == 34
    want = np.array([_exact_level(float(e), eps_min, L) for e in cases])
    np.testing.assert_array_equal(got, want)
    powers, _ = _levels(edges, eps_min, eps_max)
    np.testing.assert_array_equal(powers, np.maximum(np.minimum(k, L), 1))  # 2^k ε̌ -> level k, ε̌ -> 1
    floors = np.ldexp(eps_min, got - 1)
    assert np.all(floors <= cases)  # the privacy-critical direction: never a floor above E(r)
    below_top = got < L
    assert np.all(cases[below_top] <= 2 * floors[below_top])


def test_num_levels_exact():
    # Example 5.2: ε̂/ε̌ = 4.096/7.8125e-6 = 2^19 exactly -> L = 19; the experiments: 1e10 -> 34
    cases = [
        (7.8125e-6, 4.096, 19),
        (1e-8, 100.0, 34),
        (1.0, 1.0, 1),
        (1.0, 2.0, 1),
        (1.0, np.nextafter(2.0, 3), 2),
        (0.1, 0.4, 2),
        (0.1, 0.8, 3),
        (3e-5, 3e-5 * 2**20, 20),
    ]
    for lo, hi, want in cases:
        _, L = _levels([lo], lo, hi)
        assert L == want == _exact_num_levels(lo, hi), (lo, hi)
    np.testing.assert_array_equal(_levels([1.0, 1.0], 1.0, 1.0)[0], [1, 1])


def test_dyadic_exponent_and_floors():
    with jax.enable_x64(True):
        x = jnp.asarray([1.0, 2.0, 3.0, 4.0, 0.5, 0.3, 0.0, -1.0, jnp.inf], jnp.float64)
        np.testing.assert_array_equal(np.asarray(domains.dyadic_exponent(x, 1.0)), [0, 1, 2, 2, -1, -1, 0, 0, 0])
        floors = np.asarray(domains.level_floors(jnp.float64(1e-8), 5))
        np.testing.assert_array_equal(floors, np.ldexp(1e-8, np.arange(5)))


def test_first_heavy_level_and_tail_sum():
    with jax.enable_x64(True):
        noisy = jnp.asarray([1.0, 5.0, 2.0, 9.0, 100.0], jnp.float64)
        t = jnp.asarray([2.0, 4.0, 1.0, 1.0, 0.0], jnp.float64)
        L = jnp.int32(4)  # level 5 is padding: never heavy, never summed
        assert int(domains.first_heavy_level(noisy, t, L)) == 1
        assert float(domains.sum_from_level(noisy, jnp.int32(1), L)) == 16.0
        none = jnp.full((5,), jnp.inf)
        assert int(domains.first_heavy_level(noisy, none, L)) == 3  # default ℓ = L


@pytest.mark.parametrize("kind,eps_min,levels", [("inverse", 1e-8, 34), ("log", 8.58e-4, 17), ("sqrt", 8.0e-6, 24)])
def test_privacy_functions_table(kind, eps_min, levels):
    """Spec §4.4: ε̌ = E(U) and L at U = 10^12, ε̂ = 100."""
    E = getattr(prdp.PrivacyFunction, kind)(1e12)
    assert float(E.eps_min) == pytest.approx(eps_min, rel=2e-3)
    assert float(E.eps_max) == 100.0
    _, L = _levels([1.0], float(E.eps_min), 100.0)
    assert L == levels


def test_privacy_function_budgets():
    """Spec §4.4 budget table at v = 10^3 and 5·10^4, the caps, and E(0) = ε̂."""
    v = np.array([1e3, 5e4, 0.0, 50.0])
    np.testing.assert_allclose(np.asarray(prdp.PrivacyFunction.inverse(1e12)(v)), [10.0, 0.2, 100.0, 100.0])
    np.testing.assert_allclose(np.asarray(prdp.PrivacyFunction.sqrt(1e12)(v))[:2], [0.253, 0.0358], rtol=3e-3)
    log_e = prdp.PrivacyFunction.log(1e12)
    np.testing.assert_allclose(np.asarray(log_e(v))[:2], [0.220, 0.0365], rtol=3e-3)
    assert float(log_e(1.0)) == 100.0 and float(log_e(4.0)) == 100.0  # capped for v <= 4 (ln)
    np.testing.assert_allclose(float(prdp.PrivacyFunction.log(1e12, base=2.0)(1e3)), 0.051, rtol=1e-2)
    np.testing.assert_allclose(float(prdp.PrivacyFunction.log(1e12, base=10.0)(1e3)), 6.17, rtol=1e-2)


def test_level_upper_matches_appendix_b():
    """Spec Appendix B: cap_i = E^{-1}(lo_i)/lo_i = 10^4/lo_i², e.g. cap_23 = 5.68e6, cap_1 = U/ε̌ = 1e20."""
    E = prdp.PrivacyFunction.inverse(1e12)
    u = np.asarray(E.level_upper())
    lo = np.ldexp(1e-8, np.arange(34))
    caps = u / lo
    assert u.shape == (34,)
    assert caps[0] == pytest.approx(1e20)
    assert caps[22] == pytest.approx(5.68e6, rel=1e-3)
    np.testing.assert_allclose(caps[1:], 1e4 / lo[1:] ** 2, rtol=1e-12)
    # every value of level i is <= u_i: v with E(v) > lo_i means v < 1e4/lo_i
    rng = np.random.default_rng(1)
    x = np.floor(10 ** rng.uniform(0, 12, 5000))
    lv, _ = _levels(np.asarray(E(x)), 1e-8, 100.0)
    assert np.all(x <= u[lv - 1])
    padded = np.asarray(E.level_upper(40))
    np.testing.assert_array_equal(padded[34:], u[33])


def test_privacy_function_validation():
    with pytest.raises(ValueError, match="upper"):
        prdp.PrivacyFunction.inverse(-1.0)
    with pytest.raises(ValueError, match="alpha"):
        prdp.PrivacyFunction.sqrt(1e6, alpha=0.0)
    with pytest.raises(ValueError, match="log_base"):
        prdp.PrivacyFunction.log(1e6, base=1.0)
    with pytest.raises(ValueError, match="eps_max"):
        prdp.PrivacyFunction.inverse(1e6, eps_max=float("nan"))
