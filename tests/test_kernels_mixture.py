"""Piecewise mixture kernels: law, moments, exact privacy, paper mode, tuning."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

import accounting
import dpjax
import optimize
from accounting.papers import mixture as mp

HEAD = (0.2, 5.0, 5.0)  # the paper's headline (ε, r, c), Δ = 1

# One compiled computation per kernel structure (called eagerly, a ~200-operation closed form
# compiles every operation separately: seconds per test).
_hs = jax.jit(lambda m, e, v, nv: m.hockey_stick(e, v, nv))


def lapm(eps, r, c, delta=1.0):
    with jax.enable_x64(True):
        k = dpjax.LaplaceMixture.from_epsilon(eps, r, c, delta)
        return jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), k)


def geomm(eps, r, c, delta=1.0):
    with jax.enable_x64(True):
        k = dpjax.GeometricMixture.from_epsilon(eps, r, c, delta)
        return jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), k)


def _ref_logpdf(x, eps, r, c, d=1.0):
    """Independent numpy potential-form density."""
    l2, l1 = eps / d, r * eps / d
    zh = -np.expm1(-l2 * c) / l2 + np.exp(-l2 * c) / l1
    ax = np.abs(x)
    return -np.log(2 * zh) - (l2 * np.minimum(ax, c) + l1 * np.maximum(ax - c, 0))


def _ref_pmf(k, eps, r, c, d=1.0):
    l2, l1 = eps / d, r * eps / d
    ks = np.arange(-20000, 20001)
    w = lambda kk: np.exp(-(l2 * np.minimum(np.abs(kk), c) + l1 * np.maximum(np.abs(kk) - c, 0)))  # noqa: E731
    return w(k) / w(ks).sum()


def _quad(f, lo, hi, points):
    pts = sorted(p for p in points if lo < p < hi)
    edges = [lo] + pts + [hi]
    return sum(integrate.quad(f, a, b, epsabs=1e-15, epsrel=1e-13, limit=200)[0] for a, b in zip(edges[:-1], edges[1:]))


CONFIGS = [
    (0.2, 5.0, 5.0, 1.0),
    (1.0, 0.1, 4.5, 1.0),
    (0.1, 10.0, 4.5, 1.0),
    (0.5, 2.0, 3.0, 2.0),
    (9.0, 0.3, 0.375, 1.0),
    (1.0, 0.5, 0.3, 2.0),
]


# ----------------------------------------------------------------------------------
# the law and its closed forms
# ----------------------------------------------------------------------------------
def test_spec_check_values_laplace_mixture():
    m = lapm(*HEAD)
    with jax.enable_x64(True):
        a1, a2 = m.weights()
        got = [m.mean_abs(), m.second_moment(), m.entropy(), m.tail_mass(), a1, a2, (1 - a2) / 2]
    want = [2.497761, 9.547133, 2.536975, 0.104260, 15.473551, 1.417040, -0.208520]
    np.testing.assert_allclose(np.asarray(got, float), want, rtol=0, atol=6e-7)
    for (e, r, c), w in [
        ((1.0, 0.1, 4.5), (2.317954, 32.835573, 2.197460)),
        ((0.1, 10.0, 4.5), (2.59328, 9.78201, 2.53673)),
    ]:
        k = lapm(e, r, c)
        with jax.enable_x64(True):
            np.testing.assert_allclose(
                [float(k.mean_abs()), float(k.second_moment()), float(k.entropy())], w, atol=6e-6 if e == 0.1 else 6e-7
            )
    # Fig. 1 constants: Lap_m(10, 1), c = 4.5
    k = lapm(0.1, 10.0, 4.5)
    with jax.enable_x64(True):
        f = np.exp(np.asarray(k.noise_log_prob(jnp.asarray([0.0, 4.5, 8.0]))))
    np.testing.assert_allclose(f, [0.117334, 0.074815, 0.002259], atol=6e-7)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_laplace_mixture_law_and_moments_against_quadrature(cfg):
    eps, r, c, d = cfg
    m = lapm(eps, r, c, d)
    f = lambda x: np.exp(_ref_logpdf(x, eps, r, c, d))  # noqa: E731
    xs = np.array([-9.0, -c - 0.7, -c, -0.3, 0.0, 0.4, c, c + 2.0, 12.0])
    with jax.enable_x64(True):
        np.testing.assert_allclose(
            np.asarray(m.noise_log_prob(jnp.asarray(xs))), _ref_logpdf(xs, eps, r, c, d), rtol=1e-12
        )
        cdf = np.asarray(m.noise_cdf(jnp.asarray(xs)))
        moments = [float(m.mean_abs()), float(m.second_moment()), float(m.entropy()), float(m.tail_mass())]
    pts = [-c, 0.0, c]
    big = 60.0 * d / (r * eps) + c + 50
    ref_cdf = [_quad(f, -big, x, pts) for x in xs]
    np.testing.assert_allclose(cdf, ref_cdf, rtol=1e-9, atol=1e-300)
    ref = [
        2 * _quad(lambda x: x * f(x), 0, big, pts),
        2 * _quad(lambda x: x * x * f(x), 0, big, pts),
        -2 * _quad(lambda x: f(x) * _ref_logpdf(x, eps, r, c, d), 0, big, pts),
        2 * _quad(f, c, big, pts),
    ]
    np.testing.assert_allclose(moments, ref, rtol=1e-9)


@pytest.mark.parametrize(
    "cfg",
    [
        (0.2, 5.0, 5, 1.0),
        pytest.param((0.1, 10.0, 6, 1.0), marks=pytest.mark.slow),
        pytest.param((1.0, 0.1, 5, 1.0), marks=pytest.mark.slow),
        pytest.param((0.5, 4.0, 4, 2.0), marks=pytest.mark.slow),
        pytest.param((2.0, 0.3, 1, 3.0), marks=pytest.mark.slow),
    ],
)
def test_geometric_mixture_law_and_moments_against_summation(cfg):
    eps, r, c, d = cfg
    m = geomm(eps, r, c, d)
    ks = np.arange(-20000, 20001, dtype=float)
    p = _ref_pmf(ks, eps, r, c, d)
    with jax.enable_x64(True):
        lp = np.asarray(m.noise_log_prob(jnp.asarray(ks[19950:20051])))
        cdf = np.asarray(m.noise_cdf(jnp.asarray(ks[19950:20051])))
        got = [float(m.mean_abs()), float(m.second_moment()), float(m.entropy()), float(m.tail_mass())]
        assert float(m.noise_log_prob(0.5)) == -np.inf
    np.testing.assert_allclose(np.exp(lp), p[19950:20051], rtol=1e-9)
    np.testing.assert_allclose(cdf, np.cumsum(p)[19950:20051], rtol=1e-9)
    nz = p > 0
    ref = [np.sum(np.abs(ks) * p), np.sum(ks**2 * p), -np.sum(p[nz] * np.log(p[nz])), p[np.abs(ks) > c].sum()]
    np.testing.assert_allclose(got, ref, rtol=1e-9)


def test_spec_check_values_geometric_mixture():
    for (e, r, c), want in [
        ((0.2, 5.0, 5), (2.480046, 9.609491, 2.537405, 0.059985)),
        ((0.1, 10.0, 6), (3.169270, 14.707604, 2.730166, 0.062511)),
    ]:
        m = geomm(e, r, c)
        with jax.enable_x64(True):
            got = [float(m.mean_abs()), float(m.second_moment()), float(m.entropy()), float(m.tail_mass())]
        np.testing.assert_allclose(got, want, atol=6e-7)
    m = geomm(*HEAD)
    with jax.enable_x64(True):
        a1, a2 = m.weights()
        p0, pc = np.exp(float(m.noise_log_prob(0.0))), np.exp(float(m.noise_log_prob(5.0)))
    np.testing.assert_allclose([float(a1), float(a2)], [16.551175, 1.405553], atol=6e-7)
    # the spec prints p(0) = 0.140090, p(c) = 0.051541; 1/Z_d = a2,g tanh(ε/2) = 0.1400887 and p(c) = p(0)/e
    # (summation, test above): the printed digits are off by 5e-6
    np.testing.assert_allclose([p0, pc], [0.140090, 0.051541], atol=6e-6)
    assert pc == pytest.approx(p0 * np.exp(-1.0), rel=1e-12)


@pytest.mark.slow  # (the default suite meets r = 1, c = 0 mixtures in the tuner's baseline rows)
def test_limits_are_the_plain_kernels():
    with jax.enable_x64(True):
        x = jnp.linspace(-9.0, 9.0, 37)
        lap = dpjax.Laplace(jnp.float64(2.0))
        for m in (
            dpjax.LaplaceMixture(jnp.float64(2.0), jnp.float64(2.0), jnp.float64(3.0)),  # r = 1
            dpjax.LaplaceMixture(jnp.float64(0.5), jnp.float64(2.0), jnp.float64(0.0)),
        ):  # c = 0
            np.testing.assert_allclose(m.noise_log_prob(x), lap.noise_log_prob(x), rtol=1e-13)
            np.testing.assert_allclose(m.noise_cdf(x), lap.noise_cdf(x), rtol=1e-13)
            np.testing.assert_allclose(float(m.mean_abs()), 2.0, rtol=1e-13)
        g = dpjax.GeometricMixture(jnp.float64(2.0), jnp.float64(2.0), 3)
        dl = dpjax.DiscreteLaplace(jnp.float64(2.0))
        k = jnp.arange(-9.0, 10.0)
        np.testing.assert_allclose(g.noise_log_prob(k), dl.noise_log_prob(k), rtol=1e-13)


@pytest.mark.slow
def test_icdf_inverts_cdf_and_gradients_are_finite():
    with jax.enable_x64(True):
        u = jnp.asarray([1e-7, 0.003, 0.05, 0.3, 0.5, 0.51, 0.9, 0.97, 1 - 1e-7], jnp.float64)
        ms = [lapm(*HEAD), lapm(1.0, 0.1, 4.5), lapm(9.0, 0.3, 0.375)]
        # one batched kernel (one compilation), built from stacked parameters: members differ in their
        # static log-concavity (r ≥ 1 or not), the batch's is that of every member
        m = dpjax.LaplaceMixture(
            *(jnp.stack([getattr(k, n) for k in ms]) for n in ("inner_scale", "outer_scale", "breakpoint"))
        )
        back = jax.jit(lambda mm: mm.noise_cdf(mm.noise_icdf(u[:, None])))(m)
        np.testing.assert_allclose(back, np.broadcast_to(np.asarray(u)[:, None], back.shape), rtol=1e-10)
        g = jax.jit(jax.grad(lambda mm: jnp.sum(mm.mean_abs() + mm.entropy() + jnp.sum(mm.noise_icdf(u[:, None]), 0))))(
            m
        )
        assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree_util.tree_leaves(g))
        for m in (geomm(*HEAD), geomm(2.0, 0.3, 1, 3.0)):
            k = m.noise_icdf(u)
            assert np.all(np.asarray(m.noise_cdf(k)) >= np.asarray(u) * (1 - 1e-12))
            assert np.all(np.asarray(m.noise_cdf(k - 1.0)) < np.asarray(u))


@pytest.mark.parametrize(
    "build",
    [lambda: dpjax.LaplaceMixture.from_epsilon(0.2, 5, 5), lambda: dpjax.LaplaceMixture.from_epsilon(1.0, 0.1, 4.5)],
)
def test_release_samples_ks(build):
    m = build()
    x = np.asarray(dpjax.release(jax.random.key(3), jnp.zeros(20_000), m), np.float64)
    with jax.enable_x64(True):
        m64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), m)
        assert stats.kstest(x, lambda y: np.asarray(m64.noise_cdf(jnp.asarray(y)))).pvalue > 1e-4


def _chi2(m, x):
    ks, counts = np.unique(x, return_counts=True)
    with jax.enable_x64(True):
        m64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), m)
        p = np.exp(np.asarray(m64.noise_log_prob(jnp.asarray(ks, jnp.float64))))
    keep = p * x.size > 20
    obs = np.append(counts[keep], x.size - counts[keep].sum())
    exp = np.append(p[keep] * x.size, x.size * (1 - p[keep].sum()))
    return stats.chisquare(obs, exp).pvalue


def test_geometric_release_chi_square():
    m = dpjax.GeometricMixture.from_epsilon(0.2, 5, 5)
    x = np.asarray(dpjax.release(jax.random.key(4), jnp.zeros(20_000, jnp.int32), m))
    assert _chi2(m, x) > 1e-4


@pytest.mark.slow
@pytest.mark.parametrize(
    "params", [(0.2, 5, 5, 1.0), (0.1, 10, 4.5, 1.0), (1.0, 0.1, 4.5, 1.0), (0.5, 2, 3, 2.0), (1e-4, 5000, 2, 1.0)]
)
def test_samplers_at_a_million_draws(params):
    e, r, c, d = params
    m = dpjax.LaplaceMixture.from_epsilon(e, r, c, d)
    x = np.asarray(dpjax.release(jax.random.key(11), jnp.zeros(1_000_000), m), np.float64)
    with jax.enable_x64(True):
        m64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), m)
        assert stats.kstest(x, lambda y: np.asarray(m64.noise_cdf(jnp.asarray(y)))).pvalue > 1e-4
    if c == int(c) and e >= 0.1:
        g = dpjax.GeometricMixture.from_epsilon(e, r, int(c), d)
        xg = np.asarray(dpjax.release(jax.random.key(12), jnp.zeros(1_000_000, jnp.int32), g))
        assert _chi2(g, xg) > 1e-4


# ----------------------------------------------------------------------------------
# exact privacy
# ----------------------------------------------------------------------------------
def _brute_pure(eps, r, c, d, discrete):
    """sup over shifts 0 < s ≤ Δ and outputs of |log f(y) − log f(y − s)| on fine grids."""
    shifts = np.arange(1, int(d) + 1) if discrete else np.linspace(d / 64, d, 64)
    y = np.arange(-60, 61) if discrete else np.linspace(-3 * c - 3 * d - 5, 3 * c + 3 * d + 5, 200_001)
    best = 0.0
    for s in shifts:
        best = max(best, np.max(np.abs(_ref_logpdf(y, eps, r, c, d) - _ref_logpdf(y - s, eps, r, c, d))))
    return best


_PURE = [(0.2, 5.0, 5.0, 1.0), (9.0, 0.3, 0.375, 1.0), (1.0, 0.5, 0.3, 2.0)]  # headline; r < 1, c < Δ


@pytest.mark.parametrize(
    "cfg",
    _PURE
    + [
        pytest.param(c, marks=pytest.mark.slow)
        for c in CONFIGS + [(1.0, 0.1, 0.5, 1.0), (0.25, 4.0, 0.3, 1.0)]
        if c not in _PURE
    ],
)
def test_pure_epsilon_is_tight(cfg):
    eps, r, c, d = cfg
    with jax.enable_x64(True):
        got = float(lapm(eps, r, c, d).pure_epsilon(d))
    brute = _brute_pure(eps, r, c, d, False)
    assert got >= brute - 1e-12 and got <= brute + 1e-9 * max(1.0, brute), (got, brute)
    if r < 1 and c < d:  # spec Erratum: [ε min(c, Δ) + rε (Δ − c)]/Δ < max(ε, rε)
        assert got == pytest.approx((eps * min(c, d) + r * eps * (d - c)) / d, rel=1e-12)
        assert got < max(eps, r * eps)


@pytest.mark.parametrize(
    "cfg", [(0.2, 5.0, 5, 1.0), (1.0, 0.1, 5, 1.0), (0.5, 4.0, 4, 2.0), (0.5, 4.0, 4, 3.0), (2.0, 0.3, 1, 3.0)]
)
def test_geometric_pure_epsilon_is_tight(cfg):
    eps, r, c, d = cfg
    with jax.enable_x64(True):
        got = float(geomm(eps, r, c, d).pure_epsilon(d))
    assert got == pytest.approx(_brute_pure(eps, r, c, d, True), rel=1e-12)


@pytest.mark.slow
def test_headline_exact_privacy():
    with jax.enable_x64(True):
        m, g = lapm(*HEAD), geomm(*HEAD)
        assert float(m.pure_epsilon(1.0)) == pytest.approx(1.0, abs=1e-12)
        assert float(g.pure_epsilon(1.0)) == pytest.approx(1.0, abs=1e-12)
        eps = jnp.asarray([0.2, 0.328, 0.5, 0.75, 1.0])
        np.testing.assert_allclose(
            np.asarray(_hs(m, eps, 0.0, 1.0)), [0.04617, 0.03815, 0.02776, 0.01345, 0], atol=6e-6
        )
        np.testing.assert_allclose(
            np.asarray(_hs(g, eps, 0.0, 1.0)), [0.04490, 0.03989, 0.03208, 0.01803, 0], atol=6e-6
        )
    e5 = float(accounting.exact.epsilon(dpjax.LaplaceMixture.from_epsilon(*HEAD), 1e-5))
    assert e5 == pytest.approx(0.99981, abs=2e-5)


@pytest.mark.slow
def test_headline_geometric_mixture_is_only_0328_dp_at_delta_004():
    assert float(accounting.exact.epsilon(dpjax.GeometricMixture.from_epsilon(*HEAD), 0.0399)) == pytest.approx(
        0.328, abs=2e-3
    )


@pytest.mark.parametrize("cfg", CONFIGS)
def test_hockey_stick_against_quadrature(cfg):
    eps, r, c, d = cfg
    m = lapm(eps, r, c, d)
    pure = float(m.pure_epsilon(d))
    grid = np.array([-0.5, 0.0, 0.3 * pure, 0.7 * pure, 0.98 * pure])
    big = 60.0 * d / (r * eps) + c + 50
    for s in (d, 0.37 * d):
        with jax.enable_x64(True):
            closed = np.asarray(_hs(m, jnp.asarray(grid), 0.0, s))
            back = np.asarray(_hs(m, jnp.asarray(grid), s, 0.0))
        pts = [-c, 0.0, c, s - c, s, s + c]
        for e, got, got_b in zip(grid, closed, back):
            f = lambda y: max(np.exp(_ref_logpdf(y, eps, r, c, d)) - np.exp(e + _ref_logpdf(y - s, eps, r, c, d)), 0.0)  # noqa: E731,B023
            ref = _quad(f, -big, big, pts)
            assert got == pytest.approx(ref, rel=1e-7, abs=1e-13) and got_b == pytest.approx(got, rel=1e-10, abs=1e-15)


@pytest.mark.parametrize(
    "cfg", [(0.2, 5.0, 5, 1.0), (2.0, 0.3, 1, 3.0), pytest.param((1.0, 0.1, 5, 1.0), marks=pytest.mark.slow)]
)
def test_geometric_hockey_stick_against_summation(cfg):
    eps, r, c, d = cfg
    m = geomm(eps, r, c, d)
    ks = np.arange(-20000, 20001, dtype=float)
    p = _ref_pmf(ks, eps, r, c, d)
    grid = np.array([-0.3, 0.0, 0.1, 0.4, 0.9, 1.5])
    for s in range(1, int(d) + 1):
        q = np.roll(p, s)
        with jax.enable_x64(True):
            closed = np.asarray(_hs(m, jnp.asarray(grid), 0.0, float(s)))
        ref = [np.sum(np.maximum(p - np.exp(e) * q, 0.0)) for e in grid]
        np.testing.assert_allclose(closed, ref, rtol=1e-9, atol=1e-15)


@pytest.mark.slow  # the default suite: tests/contract.py's LaplaceMixture case (r < 1, c < Δ) scans the shifts
def test_exact_accountant_examines_every_shift():
    # r < 1, c < Δ: the shift Δ is not the worst everywhere; the accountant's profile bounds every shift
    with jax.enable_x64(True):
        m = lapm(1.0, 0.5, 0.3, 2.0)
        eps = jnp.asarray([0.1, 0.4, 0.7])
        shifts = jnp.linspace(0.01, 2.0, 400)
        worst = np.max(np.asarray(_hs(m, eps[:, None], 0.0, shifts[None, :])), axis=1)
    declared = np.asarray(
        accounting.exact.privacy_profile(dpjax.LaplaceMixture.from_epsilon(1.0, 0.5, 0.3, 2.0), eps, 2.0)
    )
    assert np.all(declared >= worst - 1e-12)


@pytest.mark.slow
def test_ten_fold_composition_of_the_headline_geometric_mixture():
    pld = accounting.pld(dpjax.GeometricMixture.from_epsilon(*HEAD))
    assert float(pld.pure_epsilon()) == pytest.approx(1.0, abs=1e-9)
    e10 = float(pld.self_compose(10).get_epsilon_for_delta(1e-6))
    assert e10 == pytest.approx(6.694, abs=2e-3)
    assert e10 > mp.compose_budgets(*[0.328106] * 10)  # ζ's "composition" is not the privacy


# ----------------------------------------------------------------------------------
# paper mode (NOT CERTIFIED)
# ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_paper_budget_values():
    g, m = dpjax.GeometricMixture.from_epsilon(*HEAD), dpjax.LaplaceMixture.from_epsilon(*HEAD)
    assert float(mp.general_privacy_budget(g, form="eq25")) == pytest.approx(0.328106, abs=1e-6)
    assert float(mp.general_privacy_budget(g)) == pytest.approx(
        float(mp.general_privacy_budget(g, form="eq25")), rel=1e-12
    )
    assert float(mp.general_privacy_budget(m)) == pytest.approx(0.31262, abs=1e-5)
    z27 = float(mp.general_privacy_budget(m, form="eq27"))
    assert z27 == pytest.approx(0.309063, abs=1e-6)
    assert float(mp.laplace_epsilon_for_budget(z27)) == pytest.approx(0.331881, abs=1e-5)
    np.testing.assert_allclose(
        mp.rounded_laplace_budget(np.array([0.1, 0.332, 0.5, 1.0])), [0.097647, 0.309167, 0.452321, 0.845310], atol=1e-6
    )
    fig1 = dpjax.LaplaceMixture.from_epsilon(0.1, 10, 4.5)
    assert float(mp.general_privacy_budget(fig1, form="naive")) == pytest.approx(0.297540, abs=1e-6)
    assert float(mp.general_privacy_budget(fig1)) == pytest.approx(0.29545, abs=1e-5)
    fig3 = dpjax.GeometricMixture.from_epsilon(0.1, 10, 5)
    assert float(mp.general_privacy_budget(fig3, form="eq25")) == pytest.approx(0.289375, abs=1e-6)
    # ζ of a plain geometric is its ε; ζ never exceeds the pure ε and is far below the headline's
    assert float(mp.general_privacy_budget(dpjax.DiscreteLaplace(1 / 0.3))) == pytest.approx(0.3, rel=1e-9)
    assert float(mp.general_privacy_budget(g)) < float(g.pure_epsilon(1.0))


def test_paper_budget_definition_against_summation():
    eps, r, c = 0.3, 3.0, 2
    ks = np.arange(-20000, 20001, dtype=float)
    p = _ref_pmf(ks, eps, r, c)
    q = np.roll(p, 1)
    ok = (p > 0) & (q > 0)
    ref = np.log(np.sum(np.exp(np.abs(np.log(p[ok] / q[ok]))) * p[ok]))
    with jax.enable_x64(True):
        got = float(mp.general_privacy_budget(geomm(eps, r, c)))
    assert got == pytest.approx(ref, rel=1e-9)


def test_usefulness_and_composition_labels():
    m = dpjax.LaplaceMixture.from_epsilon(*HEAD)
    u = mp.usefulness(m, 0.01)
    assert float(u.radius) == pytest.approx(7.344, abs=1e-3) and bool(u.valid) and "NOT CERTIFIED" in u.label
    assert float(u.laplace_radius) == pytest.approx(23.03, abs=1e-2)
    g = dpjax.GeometricMixture.from_epsilon(*HEAD)
    paper, fixed = mp.usefulness(g, 0.01, corrected=False), mp.usefulness(g, 0.01)
    with jax.enable_x64(True):  # corrected: the smallest integer t* > c with P(|Y| >= t*) <= δ
        g64 = geomm(*HEAD)
        tail = lambda t: 2 * float(jnp.exp(g64.noise_log_sf(t - 1.0)))  # noqa: E731
        t = float(fixed.radius)
        assert tail(t) <= 0.01 < tail(t - 1.0)
        # the printed proof's tail a1,g e^{-rεt} understates the true one by 2α1/(α1 + 1) (spec E6)
        a1 = float(g64.weights()[0])
        assert tail(9.0) == pytest.approx(a1 * np.exp(-9.0) * 2 * np.e / (np.e + 1), rel=1e-10)
    assert float(paper.radius) == pytest.approx(np.log(a1 / 0.01), rel=1e-10)
    assert mp.compose_budgets(0.1, 0.2) == pytest.approx(0.3)
    for fn in (
        mp.general_privacy_budget,
        mp.compose_budgets,
        mp.usefulness,
        mp.rounded_laplace_budget,
        mp.laplace_epsilon_for_budget,
    ):
        assert "NOT CERTIFIED" in fn.__doc__
    with pytest.raises(ValueError, match="form"):
        mp.general_privacy_budget(g, form="eq27")


def test_table_one_headline_row():
    m = dpjax.LaplaceMixture.from_epsilon(*HEAD)
    e_abs, e_sq = mp.rounded_moments(m)
    assert float(e_abs) == pytest.approx(2.49, abs=6e-3) and float(e_sq) == pytest.approx(9.63, abs=1e-2)
    e_lap = mp.laplace_epsilon_for_budget(mp.general_privacy_budget(m, form="eq27"))
    la, lv = mp.rounded_moments(dpjax.Laplace(1 / float(e_lap)))
    assert float(la) == pytest.approx(3.00, rel=1e-2) and float(lv) == pytest.approx(18.24, rel=1e-2)


# ----------------------------------------------------------------------------------
# tuning
# ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_tune_mixture_finds_the_gain_only_where_it_exists():
    targets = np.array([1.0, 2.0, 4.0, 5.0625, 6.0])
    res = optimize.tune_mixture(targets)
    ratio = np.asarray(res.ratio)
    np.testing.assert_array_equal(ratio[:2], 1.0)
    assert not np.any(res.improved[:2]) and np.all(res.improved[2:])
    assert np.all(ratio[2:] < 1.0)
    assert np.all(np.asarray(res.pure_epsilon) <= targets)
    assert float(res.objective[3]) <= 0.1663  # the Erratum's (9, 0.3, 0.375) mixture has 0.1662
    np.testing.assert_allclose(res.baseline_objective, 1.0 / targets, rtol=1e-6)
    with jax.enable_x64(True):  # the batched mechanism's exact pure ε, recomputed
        assert np.all(np.asarray(res.mechanism.pure_epsilon(1.0)) <= targets)
        np.testing.assert_allclose(res.mechanism.mean_abs(), res.objective, rtol=1e-12)
    one = optimize.tune_mixture(2.0)
    assert isinstance(one.mechanism, dpjax.Laplace) and float(one.ratio) == 1.0


@pytest.mark.slow
def test_tune_mixture_variance_and_geometric():
    res = optimize.tune_mixture(np.array([2.0, 5.0]), objective="variance")
    assert float(res.ratio[0]) == 1.0 and float(res.ratio[1]) < 1.0
    geo = optimize.tune_mixture(np.array([1.0, 8.0]), kernel="geometric")  # Δ = 1: c < Δ only at c = 0
    np.testing.assert_array_equal(np.asarray(geo.ratio), 1.0)
    geo3 = optimize.tune_mixture(8.0, kernel="geometric", sensitivity=3)
    assert bool(geo3.improved) and float(geo3.pure_epsilon) <= 8.0
    b2, b1 = float(geo3.mechanism.inner_scale), float(geo3.mechanism.outer_scale)
    assert float(geo3.pure_epsilon) == pytest.approx(
        _brute_pure(3.0 / b2, b2 / b1, geo3.mechanism.breakpoint, 3.0, True), rel=1e-12
    )
    with pytest.raises(ValueError, match="objective"):
        optimize.tune_mixture(1.0, objective="entropy")


@pytest.mark.slow
def test_tune_mixture_epsilon_delta_target():
    eps0, delta = 5.0, 1e-6
    res = optimize.tune_mixture(eps0, delta=delta)
    m = res.mechanism
    assert isinstance(m, dpjax.LaplaceMixture) and bool(res.improved) and res.delta == delta
    exact = float(accounting.exact.epsilon(m, delta))  # recomputed: every shift up to Δ, safe side
    assert exact <= eps0 and exact == pytest.approx(float(res.epsilon), abs=1e-12) and exact > eps0 - 1e-6
    with jax.enable_x64(True):
        assert float(m.mean_abs()) == pytest.approx(float(res.objective), rel=1e-12)
        assert float(m.pure_epsilon(1.0)) > eps0  # the gain uses δ: the mixture is not ε0-DP
    # baseline: the Laplace at exact (ε0, δ): δ(ε) = 1 − e^{(ε − 1/b)/2}, b = 1/(ε0 − 2 log(1 − δ))
    assert float(res.baseline_objective) == pytest.approx(1.0 / (eps0 - 2.0 * np.log1p(-delta)), rel=1e-8)
    assert float(res.ratio) < 0.9
    with pytest.raises(ValueError, match="delta"):
        optimize.tune_mixture(eps0, delta=1.5)
    with pytest.raises(ValueError, match="delta"):
        optimize.tune_mixture(eps0, delta=1e-6, kernel="geometric")


@pytest.mark.slow
def test_tune_mixture_epsilon_delta_batched_never_claims_a_gain_it_lacks():
    targets, delta = np.array([0.5, 2.0, 6.0]), 1e-5
    for objective in ("mean_abs", "variance"):
        res = optimize.tune_mixture(targets, delta=delta, objective=objective, grid=6)
        assert np.all(np.asarray(res.ratio) <= 1.0) and np.all(np.asarray(res.epsilon) <= targets)
        assert isinstance(res.mechanism, tuple) and len(res.mechanism) == targets.size
        exact = np.asarray([float(accounting.exact.epsilon(k, delta)) for k in res.mechanism])
        assert np.all(exact <= targets)
        b = 1.0 / (targets - 2.0 * np.log1p(-delta))
        np.testing.assert_allclose(res.baseline_objective, b if objective == "mean_abs" else 2 * b * b, rtol=1e-8)
        with jax.enable_x64(True):
            mix = [
                k if isinstance(k, dpjax.LaplaceMixture) else dpjax.LaplaceMixture(k.scale, k.scale, 0.0)
                for k in res.mechanism
            ]  # a plain row: the r = 1, c = 0 law
            got = [float(k.mean_abs() if objective == "mean_abs" else k.variance()) for k in mix]
        np.testing.assert_allclose(got, res.objective, rtol=1e-12)
        assert res.ratio[-1] < 0.9
        np.testing.assert_array_equal(res.improved, np.asarray(res.ratio) < 1.0)


# ----------------------------------------------------------------------------------
# protocol integration and validation
# ----------------------------------------------------------------------------------
def test_boosted_mixture_release():
    b = dpjax.PrivacyBoosted(dpjax.LaplaceMixture.from_epsilon(*HEAD), dpjax.AbsoluteError(tau=4.0), 0.9)
    out = dpjax.release(jax.random.key(0), jnp.arange(5.0), b)
    assert out.shape == (5,) and np.all(np.isfinite(np.asarray(out)))
    assert dpjax.kernels.by_name("laplace-mixture") is dpjax.LaplaceMixture


@pytest.mark.slow
def test_boosted_mixture_exact_epsilon():
    m = dpjax.LaplaceMixture.from_epsilon(*HEAD)
    b = dpjax.PrivacyBoosted(m, dpjax.AbsoluteError(tau=4.0), 0.9)
    e = float(accounting.exact.epsilon(b, 1e-6))
    assert np.isfinite(e) and e > 0


def test_validation_names_the_parameter():
    with pytest.raises(ValueError, match="inner_scale"):
        dpjax.LaplaceMixture(0.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="breakpoint"):
        dpjax.GeometricMixture(1.0, 1.0, 1.5)
    with pytest.raises(ValueError, match="r"):
        dpjax.LaplaceMixture.from_epsilon(0.2, -1.0, 5.0)
    with pytest.raises(ValueError, match="c"):
        dpjax.GeometricMixture.from_epsilon(0.2, 5.0, 2.5)


def test_cli_mixture_is_the_papers_shape_with_a_calibrated_scale():
    """``--mechanism laplace-mixture --r R --c C``: the paper's Lap_m(ε, rε) with breakpoint c is the template
    whose scale the table release calibrates to the whole release's --epsilon (main released it as it was,
    at pure ε = r·ε, under --epsilon ε)."""
    import argparse

    from dpjax.cli.release import _noise

    def args(**kw):
        return argparse.Namespace(**{"mechanism": "laplace-mixture", "epsilon": 0.2, "r": None, "c": None, **kw})

    m = _noise(args(r=5.0, c=5.0))
    assert isinstance(m, dpjax.LaplaceMixture) and float(m.inner_scale) == 5.0 and float(m.outer_scale) == 1.0
    with pytest.raises(ValueError, match="--r and --c"):
        _noise(args(mechanism="geometric-mixture"))


@pytest.mark.slow
def test_cli_release_with_a_mixture(capsys):
    import json

    from dpjax import cli

    rc = cli.main(
        [
            "release",
            "--mechanism",
            "geometric-mixture",
            "--epsilon",
            "0.2",
            "--r",
            "5",
            "--c",
            "5",
            "--statistic",
            "count",
            "--seed",
            "1",
            "--json",
        ]
    )
    got = json.loads(capsys.readouterr().out)
    assert rc == 0 and got["noise"] == "GeometricMixture" and 0.199 <= got["epsilon"] <= 0.2
