"""Tuning of PB-DP kernels against the exact accountant (spec §4, Tables A/B/E)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import accounting
import dpjax
import optimize
from optimize import _exact

# Table A (spec §7.2): ΔQ, ρ, δ, |S|, ε_G, ε_exact^opt, σ_x
TABLE_A = np.array([
    [1, 0.9, 1e-5, 5, 2.7127, 1.7260, 2.160], [1, 0.9, 1e-5, 10, 1.2528, 1.0030, 3.606],
    [1, 0.9, 1e-5, 20, 0.5860, 0.5274, 6.583], [1, 0.9, 1e-5, 40, 0.2753, 0.2622, 12.607],
    [1, 0.9, 1e-7, 5, 3.3608, 1.8932, 2.465], [1, 0.9, 1e-7, 10, 1.5851, 1.1754, 3.907],
    [1, 0.9, 1e-7, 20, 0.7571, 0.6529, 6.879], [1, 0.9, 1e-7, 40, 0.3637, 0.3385, 12.902],
    [4, 0.8, 1e-5, 5, 10.3094, 2.6179, 5.879], [4, 0.8, 1e-5, 10, 4.5055, 1.9317, 7.793],
    [4, 0.8, 1e-5, 20, 2.0494, 1.2775, 11.488], [4, 0.8, 1e-5, 40, 0.9520, 0.7471, 19.003],
    [4, 0.8, 1e-7, 5, 12.2672, 2.7080, 7.059], [4, 0.8, 1e-7, 10, 5.5014, 2.0619, 9.137],
    [4, 0.8, 1e-7, 20, 2.5587, 1.4318, 12.954], [4, 0.8, 1e-7, 40, 1.2136, 0.8864, 20.527],
])

# Table B (spec §7.3): ΔQ, ρ, α, |S|, ε_G, exact^opt, σ_x
TABLE_B = np.array([
    [1, 0.9, 2, 5, 0.4329, 0.4154, 1.672], [1, 0.9, 2, 10, 0.1082, 0.1065, 3.171],
    [1, 0.9, 2, 20, 0.0271, 0.0268, 6.209], [1, 0.9, 10, 5, 2.1644, 1.3237, 1.972],
    [1, 0.9, 10, 10, 0.5411, 0.4942, 3.237], [1, 0.9, 100, 5, 21.6443, 2.5972, 4.387],
    [1, 0.9, 100, 10, 5.4111, 1.7382, 5.361], [4, 0.8, 2, 5, 4.2045, 1.8730, 4.100],
    [4, 0.8, 2, 10, 1.0511, 0.8326, 5.377], [4, 0.8, 10, 5, 21.0224, 2.4201, 5.885],
    [4, 0.8, 10, 20, 1.3139, 0.8551, 9.905], [4, 0.8, 100, 10, 52.5560, 2.6762, 17.303],
])


def _tune_a(method, rows=TABLE_A):
    sens, rho, delta, size = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
    return optimize.tune_boosted(region=dpjax.AbsoluteError(size / 2), rho=rho, sensitivity=sens, delta=delta,
                                 method=method)


def _tune_b(method, rows=TABLE_B):
    sens, rho, order, size = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
    return optimize.tune_boosted(region=dpjax.AbsoluteError(size / 2), rho=rho, sensitivity=sens, order=order,
                                 method=method)


@pytest.fixture(scope="module")
def table_a_gradient():
    return _tune_a("gradient")


def test_table_a_gradient_reaches_exact_optimum(table_a_gradient):
    r = table_a_gradient
    np.testing.assert_allclose(r.epsilon, TABLE_A[:, 5], rtol=5e-3)  # spec: the gradient method within 0.5%
    np.testing.assert_allclose(r.sigma, TABLE_A[:, 6], rtol=1e-2)
    np.testing.assert_allclose(r.baseline_epsilon, TABLE_A[:, 4], rtol=1e-3)
    # the headline row: ΔQ=4, ρ=0.8, |S|=10, δ=1e-5 → 1.9317
    assert abs(float(r.epsilon[9]) - 1.9317) < 1e-3
    assert r.mechanism.batch_shape == (16,)
    assert isinstance(r.baseline, dpjax.Gaussian)


def test_table_a_tuned_never_worse_than_plain_kernel(table_a_gradient):
    r = table_a_gradient
    assert np.all(np.asarray(r.epsilon) <= np.asarray(r.baseline_epsilon) + 1e-9)
    assert np.all(np.asarray(r.sigma) >= np.asarray(r.sigma_base) * (1 - 1e-12))
    assert np.all((np.asarray(r.boosting_rate) >= 0) & (np.asarray(r.boosting_rate) < 1))
    # the tuned mechanism meets the utility constraint exactly at its hardest answer
    with jax.enable_x64(True):
        cov = r.mechanism.coverage(jnp.zeros(16))
    np.testing.assert_allclose(cov, TABLE_A[:, 1], atol=1e-9)
    # the baseline is the plain Gaussian: its exact ε agrees with the accountant's analytic one
    eps_g = [float(accounting.pld(dpjax.Gaussian(float(s)), sensitivity=float(d)).get_epsilon_for_delta(float(dl)))
             for s, d, dl in zip(np.asarray(r.sigma_base), TABLE_A[:, 0], TABLE_A[:, 2])]
    np.testing.assert_allclose(eps_g, r.baseline_epsilon, rtol=1e-6)


def test_table_b_rdp_gradient_and_ternary_agree():
    g = _tune_b("gradient")
    t = _tune_b("ternary")
    # (the table prints 4 decimals: 0.0268 carries a rounding error of 0.2%)
    np.testing.assert_allclose(g.epsilon, TABLE_B[:, 5], rtol=5e-3, atol=5e-5)
    np.testing.assert_allclose(g.sigma, TABLE_B[:, 6], rtol=1e-2)
    np.testing.assert_allclose(g.baseline_epsilon, TABLE_B[:, 4], rtol=1e-3, atol=5e-5)
    np.testing.assert_allclose(g.epsilon, t.epsilon, rtol=1e-6)
    np.testing.assert_allclose(g.sigma, t.sigma, rtol=1e-4)
    assert np.all(np.asarray(g.epsilon) <= np.asarray(g.baseline_epsilon) + 1e-12)
    assert np.all(np.asarray(g.steps) < np.asarray(t.steps))
    assert g.objective == "rdp" and t.method == "ternary"


@pytest.mark.slow
def test_table_a_gradient_and_ternary_agree(table_a_gradient):
    t = _tune_a("ternary")
    np.testing.assert_allclose(table_a_gradient.epsilon, t.epsilon, rtol=1e-6)
    np.testing.assert_allclose(t.epsilon, TABLE_A[:, 5], rtol=5e-3)


def test_exact_accountant_is_the_mechanism_hook():
    """optimize's exact δ / D_α are the mechanism's hooks (no second copy): worst pair, both directions."""
    with jax.enable_x64(True):
        mech = dpjax.PrivacyBoosted(dpjax.Gaussian(7.793), dpjax.AbsoluteError(5.0), 0.8)
        eps = jnp.array([0.3, 1.9317, 4.0])
        np.testing.assert_allclose(optimize.exact_delta(mech, eps, 4.0), mech.hockey_stick(eps, 0.0, 4.0), rtol=1e-12)
        np.testing.assert_allclose(optimize.exact_renyi(mech, 10.0, 4.0), mech.renyi_divergence(10.0, 0.0, 4.0),
                                   rtol=1e-12)
        # Table A headline: ΔQ=4, ρ=0.8, |S|=10, δ=1e-5 at σ_x = 7.793 → 1.9317
        np.testing.assert_allclose(optimize.exact_epsilon(mech, 1e-5, 4.0), 1.9317349, atol=1e-6)


def test_epsilon_and_slope_matches_implicit_derivative():
    """The tuner's fused root + slope (one Newton loop, two tangents) equals ε and its implicit derivative."""
    with jax.enable_x64(True):
        def log_delta(e, u, tau):
            mech = dpjax.PrivacyBoosted(dpjax.Gaussian(3.04 * jnp.exp(u)), dpjax.AbsoluteError(tau), 0.9)
            return jnp.log(_exact.delta(mech, e, 1.0))

        @jax.jit
        def both(u):
            fused = _exact.epsilon_and_slope(log_delta, u, 5.0, 1e-5, 1.0)
            eps = lambda x: _exact.epsilon_for_delta(lambda e, p: log_delta(e, p, 5.0), x, 1e-5)  # noqa: E731
            return fused, jax.value_and_grad(eps)(u)

        (e1, s1), (e2, s2) = both(jnp.float64(0.4))
        np.testing.assert_allclose(e1, e2, rtol=1e-10)
        np.testing.assert_allclose(s1, s2, rtol=1e-8)


@pytest.mark.slow
def test_exact_hooks_reference_values():
    """Spec reference pairs through the exact accountant; the fused boost evaluation equals eq. (3)."""
    from accounting import pbdp_exact

    with jax.enable_x64(True):
        mech = dpjax.PrivacyBoosted(dpjax.Gaussian(7.793), dpjax.AbsoluteError(5.0), 0.8)
        rel = dpjax.PrivacyBoosted(dpjax.Gaussian(3.04), dpjax.RelativeError(0.2, 2.5), 0.9)
        fixed = dpjax.PrivacyBoosted(dpjax.Gaussian(10.0), dpjax.FixedInterval(-10.0, 10.0), 0.8)
        # relative error (spec §7.9 item 7): the worst pair is far from (0, Δ)
        np.testing.assert_allclose(rel.hockey_stick(2.2554, 15.0, 16.0), 0.0048086, rtol=1e-4)
        np.testing.assert_allclose(optimize.exact_renyi(mech, 10.0, 4.0),
                                   jnp.max(mech.renyi_divergence(10.0, jnp.array([0.0, 4.0]), jnp.array([4.0, 0.0]))),
                                   rtol=1e-12)
        for m in (mech, rel, fixed):
            l1mq, lz, lz2 = jax.jit(lambda x: x._boost_parts(jnp.float64(0.0), jnp.float64(1.0)))(m)
            np.testing.assert_allclose(-jnp.expm1(l1mq), m.boosting_rate, rtol=1e-12)
            np.testing.assert_allclose(lz, m.log_normalizer(0.0), rtol=1e-12)
            np.testing.assert_allclose(lz2, m.log_normalizer(1.0), rtol=1e-12)
        np.testing.assert_allclose(optimize.exact_epsilon(fixed, 1e-5, 1.0),
                                   pbdp_exact.epsilon_for_delta(fixed, 1e-5), rtol=1e-6)


@pytest.mark.slow
def test_exact_epsilon_implicit_gradient_matches_differences():
    def eps(sigma):
        mech = dpjax.PrivacyBoosted(dpjax.Gaussian(sigma), dpjax.AbsoluteError(5.0), 0.9)
        return optimize.exact_epsilon(mech, 1e-5, 1.0)

    with jax.enable_x64(True):
        s, h = 4.5, 1e-5  # away from the kink at the optimum: smooth
        g = jax.jit(jax.grad(eps))(jnp.float64(s))
        vals = eps(jnp.array([s - h, s + h, s]))  # one batched call
        np.testing.assert_allclose(g, (vals[1] - vals[0]) / (2 * h), rtol=1e-5)
        assert float(vals[2]) > 0


def test_scale_by_bracket_minimises_smooth_and_kinked_functions():
    import optax

    for f, x_star in ((lambda x: (x - 0.3) ** 2, 0.3), (lambda x: jnp.maximum(2.0 * (0.7 - x), 0.5 * (x - 0.7)), 0.7)):
        opt = optimize.scale_by_bracket(0.0, 2.0)

        @jax.jit
        def run(x):
            def body(_, carry):
                x, state = carry
                v, g = jax.value_and_grad(f)(x)
                upd, state = opt.update(g, state, x, value=v)
                return optax.apply_updates(x, upd), state

            return jax.lax.fori_loop(0, 60, body, (x, opt.init(x)))[0]

        assert abs(float(run(jnp.asarray(0.0))) - x_star) < 1e-6


def test_validation_names_the_parameter():
    region = dpjax.AbsoluteError(5.0)
    with pytest.raises(ValueError, match="kernel"):
        optimize.tune_boosted(kernel="cauchy", region=region, delta=1e-5)
    with pytest.raises(ValueError, match="region"):
        optimize.tune_boosted(region=None, delta=1e-5)
    with pytest.raises(ValueError, match="rho"):
        optimize.tune_boosted(region=region, rho=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="delta"):
        optimize.tune_boosted(region=region, delta=1e-5, order=2.0)
    with pytest.raises(ValueError, match="method"):
        optimize.tune_boosted(region=region, delta=1e-5, method="golden")
    with pytest.raises(ValueError, match="compositions"):
        optimize.tune_boosted(region=region, delta=1e-5, compositions=0)
    with pytest.raises(ValueError, match="order"):
        optimize.tune_boosted(region=region, order=1.0)
    with pytest.raises(ValueError, match="mech"):
        optimize.exact_epsilon(dpjax.Gaussian(1.0), 1e-5)


def test_base_sigma():
    with jax.enable_x64(True):
        np.testing.assert_allclose(optimize.base_sigma(dpjax.AbsoluteError(5.0), 0.9), 3.0398, atol=1e-4)
        np.testing.assert_allclose(optimize.base_sigma(dpjax.AbsoluteError(10.0), 0.8), 7.8030, atol=1e-4)
        assert np.isnan(optimize.base_sigma(dpjax.FixedInterval(-10.0, 10.0), 0.8))


@pytest.mark.slow
def test_composition_table_e():
    # Table E: T=10, ΔQ=3, |S|=10, ρ=0.9, δ=1e-5: Gaussian 17.553, exact PB at k=1.25 is 16.07
    g = optimize.tune_boosted(region=dpjax.AbsoluteError(5.0), rho=0.9, sensitivity=3.0, delta=1e-5, compositions=10,
                              tol=1e-3, value_discretization_interval=1e-2)
    t = optimize.tune_boosted(region=dpjax.AbsoluteError(5.0), rho=0.9, sensitivity=3.0, delta=1e-5, compositions=10,
                              tol=1e-3, value_discretization_interval=1e-2, method="ternary")
    np.testing.assert_allclose(g.baseline_epsilon, 17.553, rtol=2e-3)
    assert float(g.epsilon) < 16.07 and float(g.epsilon) < float(g.baseline_epsilon)
    np.testing.assert_allclose(g.epsilon, t.epsilon, rtol=1e-4)


@pytest.mark.slow
def test_relative_region_never_worse_than_plain_kernel():
    r = optimize.tune_boosted(region=dpjax.RelativeError(np.array([0.05, 0.2]), 5.0), rho=0.9, sensitivity=1.0,
                              delta=1e-5, num_pairs=101)
    assert np.all(np.asarray(r.epsilon) <= np.asarray(r.baseline_epsilon) + 1e-9)


@pytest.mark.parametrize("kernel", [dpjax.Laplace, dpjax.DiscreteLaplace])
def test_pure_dp_epsilon_root_where_delta_reaches_zero(kernel):
    """δ(ε) of a pure-DP kernel is exactly 0 from its pure ε on (log δ = −∞): the root stays sound
    (δ(ε) ≤ target) and within 1e-11 of a bisection, with a finite implicit derivative."""
    from accounting import pbdp_exact

    region = dpjax.AbsoluteError(5.0)

    def mech(scale):
        return dpjax.PrivacyBoosted(kernel(scale), region, 0.8)

    with jax.enable_x64(True):
        deltas = jnp.array([1e-5, 1e-14, 1e-300])
        eps_and_slope = jax.jit(lambda s: jax.jvp(lambda x: optimize.exact_epsilon(mech(x), deltas, 4.0), (s,), (1.0,)))
        eps, slope = eps_and_slope(3.2)
        assert np.all(np.asarray(optimize.exact_delta(mech(jnp.full(3, 3.2)), eps, 4.0)) <= deltas)
        bisection = [pbdp_exact.epsilon_for_delta(mech(3.2), float(d), sensitivity=4.0) for d in deltas]
        np.testing.assert_allclose(eps, bisection, atol=1e-11)
        h = 1e-5
        np.testing.assert_allclose(slope, (eps_and_slope(3.2 + h)[0] - eps_and_slope(3.2 - h)[0]) / (2 * h), rtol=1e-4)

        # the tuner's fused root and slope, warm-started past the pure ε (where δ = 0)
        def log_delta(e, u, _):
            return jnp.log(_exact.delta(mech(3.2 * jnp.exp(u)), e, 4.0))

        fused = jax.jit(lambda x0: _exact.epsilon_and_slope(log_delta, jnp.float64(0.1), None, 1e-5, x0))
        (e0, s0), (e1, s1) = fused(0.0), fused(50.0)
        np.testing.assert_allclose([e1, s1], [e0, s0], rtol=1e-10)
        assert np.isfinite(float(s0))
