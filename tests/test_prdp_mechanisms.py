"""The PrDP mechanisms: API, jit/vmap, validation, the per-release ledger (A2), Algorithm 2's hand-off to
M (A3), the PrLDP randomizer (A4) and the samplers (A5), and direct checks that the
noise sits at each level's *floor* and that M gets ``ε_τ/2`` (the two bugs of the spec's Erratum).

Programs are compiled once per (mechanism, shapes): the tests share one small dataset and key batch.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax import prdp
from dpjax.prdp import _noise

R = 400  # repetitions per batched call
EPS_MIN, EPS_MAX, BETA = 0.01, 2.0, 0.1  # L = 8 levels, floors 0.01 ... 1.28


def _data(n=600, seed=0):
    """Budgets log-uniform over [ε̌, ε̂] (every level populated), values E^{-1}-like: v = 1/E."""
    rng = np.random.default_rng(seed)
    e = EPS_MIN * np.exp(rng.uniform(0, np.log(EPS_MAX / EPS_MIN), n))
    e[:3] = [EPS_MIN, 2 * EPS_MIN, 4 * EPS_MIN]  # exact powers of two (closed first level)
    return np.floor(1.0 / e), e


X, E = _data()
KW = dict(eps_min=EPS_MIN, eps_max=EPS_MAX, beta=BETA)
FLOORS = np.ldexp(EPS_MIN, np.arange(8))


def _keys(n=R, seed=0):
    return jax.random.split(jax.random.key(seed), n)


def _batched(fn, seed=0, n=R):
    return jax.vmap(fn)(_keys(n, seed))


@pytest.mark.slow
def test_results_are_pytrees_through_jit_and_vmap_float64_with_the_flag_on_or_off():
    assert not jax.config.jax_enable_x64
    keys = _keys(4)
    res = jax.jit(jax.vmap(lambda k: prdp.count(k, E, **KW)))(keys)
    assert isinstance(res, prdp.PrDPResult)
    assert res.estimate.shape == (4,) and res.estimate.dtype == jnp.float64
    assert res.level_floor.shape == (4, 8) and res.level.dtype == jnp.int32
    assert len(jax.tree_util.tree_leaves(res)) == 8
    assert not jax.config.jax_enable_x64  # never flipped
    assert len(set(np.asarray(res.estimate).tolist())) == 4  # keys differ -> noise differs
    with jax.enable_x64(True):  # the global flag on: the same release, bit for bit, unbatched
        one = prdp.count(keys[2], E, **KW)
    assert float(one.estimate) == float(res.estimate[2])
    assert float(one.epsilon_tau) == FLOORS[int(one.level) - 1]


def test_validation_names_the_parameter():
    key = jax.random.key(0)
    bad = [
        (dict(budgets=E, eps_min=0.0), "eps_min"),
        (dict(budgets=E, eps_min=-1.0), "eps_min"),
        (dict(budgets=E, eps_max=0.005), "eps_max"),
        (dict(budgets=E, eps_max=float("inf")), "eps_max"),
        (dict(budgets=E, beta=0.0), "beta"),
        (dict(budgets=E, beta=1.0), "beta"),
        (dict(budgets=E, beta=float("nan")), "beta"),
        (dict(budgets=np.array([])), "budgets"),
        (dict(budgets=np.array([0.1, np.nan])), "budgets"),
        (dict(budgets=np.array([0.1, np.inf])), "budgets"),
        (dict(budgets=np.array([0.1, 0.001])), "budgets"),
        (dict(budgets=E.reshape(2, -1)), "budgets"),
        (dict(budgets=E, mask=np.ones(3, bool)), "mask"),
        (dict(budgets=E, mask=np.ones(E.shape)), "mask"),
        (dict(budgets=E, max_levels=4), "max_levels"),
    ]
    for kw, name in bad:
        args = {**KW, **kw}
        budgets = args.pop("budgets")
        with pytest.raises(ValueError, match=name):
            prdp.count(key, budgets, **args)
    with pytest.raises(ValueError, match="key"):
        prdp.count(0, E, **KW)
    for values, upper, name in [
        (-X, 100.0, "values"),
        (X, 10.0, "values"),
        (X[:5], 100.0, "values"),
        (np.where(X > 5, np.nan, X), 100.0, "values"),
        (X, -1.0, "upper"),
        (X, np.zeros(8), "upper"),
        (X, 2.0**70, "upper"),
    ]:
        with pytest.raises(ValueError, match=name):
            prdp.sum(key, values, E, upper=upper, **KW)
    with pytest.raises(ValueError, match="method"):
        prdp.sum(key, X, E, upper=100.0, method="naive", **KW)
    with pytest.raises(ValueError, match="threshold"):
        prdp.local_count(key, E, threshold="gaussian", **KW)
    with pytest.raises(ValueError, match="kappa"):
        prdp.local_sum(key, X, E, upper=100.0, kappa=0.0, **KW)
    with pytest.raises(ValueError, match="max_levels"):  # a sweep over ε̌ needs a static level count
        jax.vmap(lambda lo: prdp.count(key, E, eps_min=lo, eps_max=EPS_MAX, beta=BETA))(jnp.array([0.01, 0.02]))


def test_sweep_over_the_budget_range_with_padded_levels_and_records():
    """vmap over ε̌ (static max_levels) and over datasets padded with a mask: one program."""
    fn = jax.jit(
        jax.vmap(
            lambda lo, e, m: prdp.count(
                jax.random.key(1), e, eps_min=lo, eps_max=EPS_MAX, beta=BETA, mask=m, max_levels=8
            ),
            in_axes=(0, None, None),
        )
    )
    res = fn(jnp.array([0.01, 0.04, 0.3]), E, np.ones(E.size, bool))
    np.testing.assert_array_equal(np.asarray(res.num_levels), [8, 6, 3])
    assert np.all(np.asarray(res.level_floor)[1, 6:] == 0) and np.all(np.asarray(res.level_epsilon)[2, 3:] == 0)
    assert np.all(np.asarray(res.within_floors()))
    # a padded record never matters: change the padding rows' budgets, get the same release
    mask = np.arange(E.size) < 400
    other = E.copy()
    other[400:] = EPS_MAX
    a, b = fn(jnp.array([0.01]), E, mask), fn(jnp.array([0.01]), other, mask)
    np.testing.assert_array_equal(np.asarray(a.estimate), np.asarray(b.estimate))
    c = fn(jnp.array([0.01]), other, np.ones(E.size, bool))
    assert float(c.estimate[0]) != float(a.estimate[0])  # unmasked, they count


@jax.jit
def _all_releases(keys):
    upper = 1.0 / EPS_MIN

    def one(k):
        return {
            "extension": prdp.sum(k, X, E, upper=upper, method="extension", **KW),
            "max": prdp.max(k, X, E, upper=upper, **KW),
            "local_count": prdp.local_count(k, E, **KW),
            "local_sum": prdp.local_sum(k, X, E, upper=upper, **KW),
            "naive_count": prdp.naive_count(k, E, eps_min=EPS_MIN, eps_max=EPS_MAX),
        }

    return jax.vmap(one)(keys)


@pytest.mark.slow
def test_ledger_of_every_mechanism_A2():
    """A2 for the extension (sup v/cap_i = lo_i), PrLDP count (lo_i), the framework max and Algorithm 5
    (lo_i/2 + [i ≥ ℓ]·lo_ℓ/2) and the naive count (ε̌ everywhere); all within the floors."""
    res = _all_releases(_keys(50, 9))
    for name in ("extension", "local_count"):
        np.testing.assert_array_equal(np.asarray(res[name].level_epsilon), np.broadcast_to(FLOORS, (50, 8)))
    for name in ("max", "local_sum"):
        ell = np.asarray(res[name].level)[:, None]
        want = FLOORS / 2 + np.where(np.arange(1, 9)[None, :] >= ell, FLOORS[ell - 1] / 2, 0.0)
        np.testing.assert_array_equal(np.asarray(res[name].level_epsilon), want)
    np.testing.assert_array_equal(np.asarray(res["naive_count"].level_epsilon), np.full((50, 8), EPS_MIN))
    for name, r in res.items():
        assert np.all(np.asarray(r.within_floors())), name
    assert np.all(np.asarray(res["max"].estimate) == np.round(np.asarray(res["max"].estimate)))
    assert np.all((0 <= np.asarray(res["max"].estimate)) & (np.asarray(res["max"].estimate) <= 100))


@pytest.mark.slow
def test_local_sum_utility_with_larger_budgets():
    """Algorithm 5 with the reference LDP sum: 0.77 % at α = 10^6 on 2·10^5 normal values (docs/prdp.md);
    at the paper's α = 10^4 Round IIa's threshold exceeds n and τ = 1 (≈ 100 %)."""
    rng = np.random.default_rng(0)
    x = np.floor(np.abs(rng.normal(5e4, 5e4, 200_000)))
    fn = prdp.PrivacyFunction.inverse(1e12, alpha=1e6)
    e, upper = np.asarray(fn(x)), np.asarray(fn.level_upper())
    kw = dict(eps_min=float(fn.eps_min), eps_max=100.0, beta=0.1)
    with jax.enable_x64(True):
        est = jax.jit(
            jax.vmap(lambda k, x, e: prdp.local_sum(k, x, e, upper=upper, **kw).estimate, in_axes=(0, None, None))
        )(_keys(50, 3), x, e)
    re = np.sort(np.abs(np.asarray(est) - x.sum()) / x.sum())[10:40].mean()
    assert re < 0.02


def _spy(key, values, weights, epsilon, beta, upper):
    return {"weights": weights, "epsilon": epsilon, "beta": beta, "upper": upper, "sum": jnp.sum(values * weights)}


@pytest.mark.slow
def test_framework_hands_M_the_levels_from_ell_with_half_of_eps_tau_A3():
    """A3: M (any user mechanism) sees exactly the records of level ≥ ℓ, budget lo_ℓ/2, failure β/2 and
    the domain U_ℓ; the ledger is lo_i/2 + [i ≥ ℓ]·lo_ℓ/2 (A2)."""
    bounds = np.floor(1.0 / np.maximum(FLOORS, EPS_MIN))
    res = _batched(lambda k: prdp.framework(k, X, E, _spy, upper=bounds, **KW))
    ell = np.asarray(res.level)
    levels = np.clip(np.ceil(np.log2(E / EPS_MIN)).astype(int), 1, 8)  # exact here: E is not a power of 2
    levels[:3] = [1, 1, 2]
    np.testing.assert_array_equal(np.asarray(res.estimate["weights"]), levels[None, :] >= ell[:, None])
    np.testing.assert_array_equal(np.asarray(res.estimate["epsilon"]), FLOORS[ell - 1] / 2)
    np.testing.assert_allclose(np.asarray(res.estimate["beta"]), BETA / 2)
    np.testing.assert_array_equal(np.asarray(res.estimate["upper"]), bounds[ell - 1])
    assert len(np.unique(ell)) >= 3
    i = np.arange(1, 9)[None, :]
    want = FLOORS / 2 + np.where(i >= ell[:, None], FLOORS[ell - 1][:, None] / 2, 0.0)
    np.testing.assert_array_equal(np.asarray(res.level_epsilon), want)
    assert np.all(np.asarray(res.within_floors()))


def _top_level_data(n):
    """n records, all values 1, all in the top level (8, budgets (1.28, 2]): ℓ = 8 unless an empty lower
    level's noise crosses its threshold (probability ≤ β)."""
    return np.ones(n), np.full(n, 1.9)


@pytest.mark.slow
def test_count_noise_is_calibrated_to_the_level_floor():
    """Erratum bug 1: Lap(1/lo_ℓ) — not 1/(2 lo_ℓ), the level's upper edge — on the selected level."""
    _, e = _top_level_data(5000)
    res = _batched(lambda k: prdp.count(k, e, **KW), seed=11, n=4000)
    top = np.asarray(res.level) == 8
    assert top.mean() > 0.9
    err = np.asarray(res.estimate)[top] - 5000  # given ℓ = 8 the error is level 8's noise alone
    scale = 1.0 / FLOORS[7]
    assert stats.kstest(err, stats.laplace(scale=scale).cdf).pvalue > 1e-3
    assert stats.kstest(err, stats.laplace(scale=scale / 2).cdf).pvalue < 1e-6  # the upper-edge bug is visible


@pytest.mark.slow
def test_framework_sum_gives_M_half_of_eps_tau():
    """Erratum bug 2: the universal sum runs with lo_ℓ/2 (its Laplace step with lo_ℓ/4), not lo_ℓ."""
    x, e = _top_level_data(20000)  # upper = 1: one candidate, τ = 1
    res = _batched(lambda k: prdp.sum(k, x, e, upper=1.0, **KW), seed=12, n=4000)
    top = np.asarray(res.level) == 8
    assert top.mean() > 0.9
    err = np.asarray(res.estimate)[top] - 20000.0
    lo = FLOORS[7]
    assert stats.kstest(err, stats.laplace(scale=1.0 / (lo / 4)).cdf).pvalue > 1e-3
    assert stats.kstest(err, stats.laplace(scale=1.0 / (lo / 2)).cdf).pvalue < 1e-6  # M given ε_τ: visible


def test_local_randomizer_ratio_against_bottom_A4():
    """A4: each user's message is 1[level = i] + Lap(1/lo_i) per coordinate (KS per level), so the log
    density ratio against ⊥ is Σ_i (|y_i| − |y_i − q_i|)·lo_i ≤ lo_{i(r)} ≤ E(r), attained."""
    n = 4000
    e = np.repeat(FLOORS * 1.5, n // 8)
    msgs = np.asarray(prdp.local_randomizer(jax.random.key(5), e, eps_min=EPS_MIN, eps_max=EPS_MAX))
    assert msgs.shape == (n, 8)
    level = np.repeat(np.arange(8), n // 8)
    for i in range(8):
        own = msgs[level == i, i] - 1.0
        other = msgs[level != i, i]
        scale = 1.0 / FLOORS[i]
        assert stats.kstest(own, stats.laplace(scale=scale).cdf).pvalue > 1e-3
        assert stats.kstest(other, stats.laplace(scale=scale).cdf).pvalue > 1e-3
    log_ratio = np.sum((np.abs(msgs) - np.abs(msgs - np.eye(8)[level])) * FLOORS, axis=1)
    assert np.all(log_ratio <= FLOORS[level] * (1 + 1e-12))
    assert np.all(log_ratio <= e)
    assert np.all(
        np.isclose(np.max(np.where(level[:, None] == np.arange(8), log_ratio[:, None], -1), axis=0), FLOORS, rtol=1e-9)
    )  # tight: y_i ≥ 1 gives exactly lo_i
    bottom = np.asarray(
        prdp.local_randomizer(jax.random.key(5), e, eps_min=EPS_MIN, eps_max=EPS_MAX, mask=np.arange(n) < 10)
    )
    assert np.all(bottom[10:] == 0)  # padded rows send nothing


@jax.jit
def _sampler_draws(key):
    noise = _noise.Stream(key)
    alphas = jnp.repeat(jnp.asarray([1.0, 3.0, 50.0, 2e5]), 5000)
    diff = noise.gamma(1, jnp.full((2, 20000), 3.0))
    return {
        "laplace": noise.laplace(0, (20000,)),
        "gumbel": noise.gumbel(1, (20000,)),
        "uniform": noise.uniform(2, (20000,)),
        "gamma": noise.gamma(0, alphas),
        "gamma_diff": diff[0] - diff[1],
        "laplace_sum": jnp.sum(noise.laplace(3, (20000, 3)), axis=1),
        "gamma_zero": noise.gamma(2, jnp.zeros((3,))),
    }


@pytest.mark.slow
def test_samplers_A5():
    """A5: the float64 samplers against their exact CDFs (KS), and Gamma(3) − Gamma(3) against a sum of
    3 Laplace draws (two-sample KS)."""
    with jax.enable_x64(True):
        d = {k: np.asarray(v) for k, v in _sampler_draws(jax.random.key(7)).items()}
    assert d["laplace"].dtype == np.float64
    assert stats.kstest(d["laplace"], stats.laplace.cdf).pvalue > 1e-3
    assert stats.kstest(d["gumbel"], stats.gumbel_r.cdf).pvalue > 1e-3
    assert stats.kstest(d["uniform"], stats.uniform.cdf).pvalue > 1e-3
    assert 0 < d["uniform"].min() and d["uniform"].max() < 1
    alphas = np.repeat([1.0, 3.0, 50.0, 2e5], 5000)
    for a in (1.0, 3.0, 50.0, 2e5):
        assert stats.kstest(d["gamma"][alphas == a], stats.gamma(a).cdf).pvalue > 1e-3, a
    assert stats.ks_2samp(d["gamma_diff"], d["laplace_sum"]).pvalue > 1e-3
    assert np.all(d["gamma_zero"] == 0.0)  # an empty sum


@pytest.mark.slow
def test_local_count_fast_path_has_the_law_of_the_per_user_protocol():
    """The exact aggregate (Gamma differences) against every user's L-vector, and Algorithm 4 on messages."""
    fast = _batched(lambda k: prdp.local_count(k, E, **KW), seed=21, n=1500)
    slow = _batched(lambda k: prdp.local_count(k, E, per_user=True, **KW), seed=22, n=1500)
    assert stats.ks_2samp(np.asarray(fast.estimate), np.asarray(slow.estimate)).pvalue > 1e-3
    assert stats.ks_2samp(np.asarray(fast.level), np.asarray(slow.level)).pvalue > 1e-3
    msgs = prdp.local_randomizer(jax.random.key(3), E, eps_min=EPS_MIN, eps_max=EPS_MAX)
    res = prdp.local_analyzer(msgs, **KW)
    agg = np.asarray(msgs).sum(0)
    ell = int(res.level)
    assert float(res.estimate) == pytest.approx(agg[ell - 1 :].sum())
