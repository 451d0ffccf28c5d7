"""dpjax.Composite: law, sampler, unbiasedness, validation, exact ε*, PLD, tuning (spec composite.md)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

import accounting
import dpjax
import optimize
from optimize.composite import canonical_variance

FUNCS = [(a, b) for a in ("rectangle", "half_sine", "triangle") for b in ("uniform", "quartic")]
ids = [f"{a}-{b}" for a, b in FUNCS]
funcs = pytest.mark.parametrize("act,base", FUNCS, ids=ids)
PARAMS = [(1.0, 0.481, 0.843, 0.280), (2.0, 0.3, 1.0, 0.2)]  # settings (ε; k, m, y)


def mech64(act, base, eps=1.0, k=0.481, m=0.843, y=0.280, window=(2.0, 5.0)):
    mech = dpjax.Composite(act, base, eps, k, m, y, window=window)
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), mech)


def _pieces(mech, v):
    d = mech._derived()
    l, u = (float(x) for x in mech.output_range())
    a = float(mech.bump_start(v))
    pts = [l, u] + [float(d["mid"] + (a + f * float(d["m"])) / d["C"]) for f in (0.0, 0.5, 1.0)]
    pts += [float(d["mid"])]
    pts = sorted(p for p in set(pts) if l <= p <= u)
    return list(zip(pts[:-1], pts[1:]))


# one compiled program per (activation, base), shared by every test of the module
_LOG_PROB = jax.jit(lambda mech, o, v: mech.log_prob(o, v))
_CDF = jax.jit(lambda mech, o, v: mech.cdf(o, v))
_LAW = lambda mech, x, xo, o, v: (  # eager: its primitives are shared by the six functions
    (jnp.exp(mech.log_prob(x, v)), jnp.exp(mech.log_prob(xo, v)), mech.cdf(o, v), mech.variance(v))
)
_GL_X, _GL_W = np.polynomial.legendre.leggauss(64)


def _gauss_legendre(parts):
    """Nodes and weights of a 64-point Gauss-Legendre rule on each smooth piece of the density
    (pieces cut at the bump's ends and peak and at 0: exact to round-off for the polynomial and
    sine pieces)."""
    a, b = np.asarray(parts).T
    x = 0.5 * (b - a)[:, None] * _GL_X + 0.5 * (a + b)[:, None]
    return x, 0.5 * (b - a)[:, None] * _GL_W


@pytest.mark.slow
@funcs
@pytest.mark.parametrize("setting", PARAMS)
def test_density_integrates_to_one_unbiased_and_variance_matches_quadrature(act, base, setting):
    with jax.enable_x64(True):
        mech = mech64(act, base, *setting)
        for v in (2.0, 3.3, 5.0):  # window ends included (closed window)
            parts = _pieces(mech, v)
            x, w = _gauss_legendre(parts)
            # cdf = integral of the density: whole pieces below o plus [a, o] of o's piece
            mids = np.asarray([0.5 * (a + b) for a, b in parts])
            xo, wo = _gauss_legendre([(a, o) for (a, _), o in zip(parts, mids)])
            f, fo, cdf, var = (np.asarray(r) for r in _LAW(mech, x, xo, mids, v))
            assert abs(np.sum(w * f) - 1.0) < 1e-9
            assert abs(np.sum(w * x * f) - v) < 1e-9
            assert abs(np.sum(w * (x - v) ** 2 * f) / var - 1.0) < 1e-9
            below = np.concatenate([[0.0], np.cumsum(np.sum(w * f, 1))[:-1]])
            np.testing.assert_allclose(cdf, below + np.sum(wo * fo, 1), rtol=0, atol=1e-9)


@pytest.mark.slow
@funcs
@pytest.mark.parametrize("setting", PARAMS)
def test_density_matches_adaptive_quadrature(act, base, setting):
    """The same checks with scipy's adaptive quadrature (independent of the piece cuts' rule)."""
    with jax.enable_x64(True):
        mech = mech64(act, base, *setting)
        for v in (2.0, 3.3, 5.0):
            f = lambda o: float(jnp.exp(_LOG_PROB(mech, o, v)))  # noqa: E731
            parts = _pieces(mech, v)
            q = lambda g: sum(integrate.quad(g, a, b, limit=200, epsabs=1e-13, epsrel=1e-13)[0] for a, b in parts)  # noqa: E731
            assert abs(q(f) - 1.0) < 1e-9
            assert abs(q(lambda o: o * f(o)) - v) < 1e-9
            assert abs(q(lambda o: (o - v) ** 2 * f(o)) / float(mech.variance(v)) - 1.0) < 1e-9
            for a, b in parts[:3]:
                o = 0.5 * (a + b)
                assert (
                    abs(
                        float(_CDF(mech, o, v))
                        - sum(integrate.quad(f, a2, min(b2, o), limit=200)[0] for a2, b2 in parts if a2 < o)
                    )
                    < 1e-9
                )


@funcs
def test_outputs_bounded_and_cdf_reaches_one(act, base):
    with jax.enable_x64(True):
        mech = mech64(act, base)
        l, u = mech.output_range()
        assert float(mech.cdf(u, 5.0)) == pytest.approx(1.0, abs=1e-12)
        assert float(mech.cdf(l, 2.0)) == pytest.approx(0.0, abs=1e-12)
        assert np.isneginf(float(mech.log_prob(u + 1e-6, 3.0)))


def _ks(act, base, n, seed):
    mech = dpjax.Composite(act, base, 1.0, 0.481, 0.843, 0.280, window=(2.0, 5.0))
    out = []
    for j, v in enumerate((2.0, 4.1, 5.0)):
        x = np.asarray(dpjax.release(jax.random.key(seed + j), jnp.full((n,), v, jnp.float32), mech), np.float64)
        with jax.enable_x64(True):
            m64 = mech64(act, base)
            p = stats.kstest(x, lambda o: np.asarray(m64.cdf(jnp.asarray(o), v))).pvalue
            l, u = (float(z) for z in m64.output_range())
            sd = math.sqrt(float(m64.variance(v)))
        assert x.min() >= l - 1e-5 and x.max() <= u + 1e-5
        assert abs(x.mean() - v) < 4.5 * sd / math.sqrt(n)
        out.append(p)
    return out


@pytest.mark.parametrize("act,base", [("rectangle", "uniform"), ("half_sine", "quartic"), ("triangle", "uniform")])
def test_sampler_matches_cdf(act, base):
    assert min(_ks(act, base, 20000, 10)) > 1e-4


@pytest.mark.slow
@funcs
def test_sampler_matches_cdf_at_a_million_draws(act, base):
    assert min(_ks(act, base, 10**6, 20)) > 1e-4


def test_release_of_large_query_values_keeps_the_position():
    """f − mid before scaling: a window far from 0 in float32."""
    mech = dpjax.Composite("rectangle", "uniform", 1.0, 0.5115, 0.7907, 0.2977, window=(1e6, 1e6 + 1.0))
    v = jnp.full((200000,), 1e6 + 0.75, jnp.float32)
    x = np.asarray(dpjax.release(jax.random.key(3), v, mech), np.float64)
    sd = math.sqrt(float(mech.variance(1e6 + 0.75)))
    assert abs(x.mean() - (1e6 + 0.75)) < 4.5 * sd / math.sqrt(x.size) + 0.07  # float32 spacing at 1e6 is 0.0625


def test_validation_names_the_parameter():
    ok = dict(epsilon=1.0, k=0.5, m=0.8, y=0.3, window=(0.0, 1.0))
    cases = [
        (dict(k=0.9), "k"),
        (dict(k=-1.0), "k"),
        (dict(m=0.0), "m"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(window=(1.0, 0.0)), "window"),
        (dict(m=2.5, k=0.45, y=0.3), "k"),
    ]
    for change, name in cases:
        with pytest.raises(ValueError, match=name):
            dpjax.Composite("rectangle", "uniform", **{**ok, **change})
    with pytest.raises(ValueError, match="activation"):
        dpjax.Composite("cosine", "uniform", **ok)
    with pytest.raises(ValueError, match="base"):
        dpjax.Composite("A1", "B3", **ok)
    with pytest.raises(ValueError, match="m"):  # the bump does not fit
        dpjax.Composite("A1", "B1", 1.0, 0.17, 5.0, 0.1, window=(0.0, 1.0))
    mech = dpjax.Composite("A1", "B1", **ok)
    with pytest.raises(ValueError, match="values"):
        dpjax.release(jax.random.key(0), jnp.asarray([0.5, 1.5]), mech)
    clipped = dpjax.Composite("A1", "B1", **ok, clip=True)
    assert np.isfinite(np.asarray(dpjax.release(jax.random.key(0), jnp.asarray([0.5, 1.5]), clipped))).all()
    assert float(clipped.mean(1.5)) == 1.0  # clipping biases towards the window


def test_pytree_jit_vmap_grad():
    mech = dpjax.Composite("half_sine", "quartic", 1.0, 0.481, 0.843, 0.280, window=(0.0, 1.0))
    lp = mech.log_prob(0.3, 0.6)
    assert np.allclose(jax.jit(lambda mm: mm.log_prob(0.3, 0.6))(mech), lp)
    batch = jax.tree_util.tree_map(lambda x: jnp.stack([jnp.asarray(x)] * 3), mech)
    assert np.allclose(jax.jit(jax.vmap(lambda mm: mm.log_prob(0.3, 0.6)))(batch), lp)
    g = jax.jit(jax.grad(lambda mm: mm.variance(0.7)))(mech)
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree_util.tree_leaves(g))
    assert float(g.m) != 0.0


# ----------------------------------------------------------------------------------
# privacy
# ----------------------------------------------------------------------------------
EPS_CASES = [
    pytest.param(a, b, s, id=f"{a}-{b}-{i}", marks=() if (a, b, i) == ("rectangle", "quartic", 0) else pytest.mark.slow)
    for a, b in FUNCS
    for i, s in enumerate(PARAMS)
]


@pytest.mark.parametrize("act,base,setting", EPS_CASES)
def test_epsilon_star_never_below_brute_force_and_close(act, base, setting):
    mech = mech64(act, base, *setting, window=(0.0, 1.0))
    rep = accounting.composite.epsilon_star(mech)
    bf = accounting.composite.brute_force_epsilon(mech, num_answers=21, num_outputs=8001)
    assert float(rep.epsilon) >= bf - 1e-12
    assert float(rep.epsilon) <= bf + 2e-3
    assert float(rep.epsilon) <= float(rep.sup_inf) + 1e-12 <= setting[0] + 1e-6


def test_epsilon_star_spec_values():
    """A1B2 1.6926 (ε = 2), 0.1273 (ε = 0.2); A2B1 m/L = 1.422 → 0.972."""
    r = accounting.composite.epsilon_star(dpjax.Composite("A1", "B2", 2.0, 0.3, 1.0, 0.2, window=(0, 1)))
    assert float(r.epsilon) == pytest.approx(1.6926, abs=1e-4)
    r = accounting.composite.epsilon_star(dpjax.Composite("A1", "B2", 0.2, 0.05, 1.5, 0.4, window=(0, 1)))
    assert float(r.epsilon) == pytest.approx(0.1273, abs=1e-4)
    q, s = math.e - 1, 2 / math.pi
    y = 1 / (2 + q * s * 1.422)
    r = accounting.composite.epsilon_star(dpjax.Composite("A2", "B1", 1.0, q * y, 1.422, y, window=(0, 1)))
    assert float(r.epsilon) == pytest.approx(0.972, abs=1e-3)


@pytest.mark.slow
def test_smaller_sensitivity_never_raises_epsilon_star():
    mech = mech64("triangle", "quartic", 2.0, 0.3, 1.0, 0.2, window=(0.0, 1.0))
    full = float(dpjax.composite.privacy.epsilon_star(mech))
    part = float(dpjax.composite.privacy.epsilon_star(mech, 0.3))
    bf = accounting.composite.brute_force_epsilon(mech, 0.3, num_answers=31, num_outputs=4001)
    assert bf - 1e-12 <= part <= full


def test_a1b1_on_the_boundary_loses_epsilon_for_every_distinct_pair():
    eps = 1.3
    q = math.expm1(eps)
    y = 1 / (2 + q * 0.7)
    with jax.enable_x64(True):
        mech = mech64("A1", "B1", eps, q * y, 0.7, y, window=(0.0, 1.0))
        L = float(mech.half_domain)
        xs = jnp.linspace(-L, L, 20001)
        answers = np.linspace(0.0, 1.0, 15)
        logp = np.log([np.asarray(_DENSITY_X(mech, xs, v)) for v in answers])
        for i in range(15):
            for j in range(15):
                if i != j:
                    assert np.max(logp[i] - logp[j]) == pytest.approx(eps, abs=1e-12)
    assert float(accounting.composite.epsilon_star(mech).epsilon) == pytest.approx(eps, abs=1e-12)


@pytest.mark.slow
def test_a1b1_pld_is_the_three_atoms():
    """δ(ε') = S1·e^ε/(e^ε − 1)·(1 − e^{ε'−ε}); ε = 1 optimum S1 = 0.4045."""
    eps, m = 1.0, 0.7907
    q = math.expm1(eps)
    y = 1 / (2 + q * m)
    mech = dpjax.Composite("A1", "B1", eps, q * y, m, y, window=(0.0, 1.0))
    s1 = q * y * m
    assert s1 == pytest.approx(0.4045, abs=1e-4)
    assert s1 * math.exp(eps) / q == pytest.approx(0.6399, abs=1e-4)
    p = accounting.pld(mech)
    for e in (0.0, 0.25, 0.6, 0.95):
        exact = s1 * math.exp(eps) / q * (1 - math.exp(e - eps))
        got = float(p.get_delta_for_epsilon(e))
        assert exact - 1e-12 <= got <= exact + 1e-8
    assert float(p.get_delta_for_epsilon(1.0)) == 0.0


# compiled once per (activation, base) and shared by the two hockey-stick tests
_HOCKEY = jax.jit(lambda mm, e, a, b: mm.hockey_stick(e, a, b))
_DENSITY_X = jax.jit(lambda mm, x, v: mm.density_x(x, v))
HS_EPS = (-0.3, 0.0, 0.3, 0.6, 0.8)


@pytest.mark.parametrize(
    "act,base",
    [
        pytest.param("half_sine", "uniform", marks=pytest.mark.slow),
        pytest.param("triangle", "quartic", marks=pytest.mark.slow),
        ("half_sine", "quartic"),
    ],
)
def test_cell_profile_bounds_the_true_hockey_stick(act, base):
    with jax.enable_x64(True):
        mech = mech64(act, base, window=(0.0, 1.0))
        L = float(mech.half_domain)
        xs = np.linspace(-L, L, 400001)
        e = jnp.asarray(HS_EPS)
        for v, nv in ((0.0, 1.0), (0.2, 0.5), (1.0, 0.0)):
            p, pp = np.asarray(_DENSITY_X(mech, xs, v)), np.asarray(_DENSITY_X(mech, xs, nv))
            got = np.asarray(_HOCKEY(mech, e, v, nv))
            for j, ej in enumerate(HS_EPS):
                true = np.trapezoid(np.maximum(p - math.exp(ej) * pp, 0), xs)
                assert true - 1e-6 <= got[j] <= true + 3e-4


@pytest.mark.slow
def test_declared_pairs_are_the_worst_of_a_shift_scan():
    with jax.enable_x64(True):
        mech = mech64("half_sine", "quartic", window=(0.0, 1.0))
        e = jnp.asarray(HS_EPS)
        both = lambda a, b: np.maximum(np.asarray(_HOCKEY(mech, e, a, b)), np.asarray(_HOCKEY(mech, e, b, a)))  # noqa: E731
        declared = np.max([both(a, b) for a, b in zip(*mech.neighbour_pairs(None))], 0)
        for a in np.linspace(0.0, 0.9, 7):
            for s in {0.05, 0.3, 1.0 - a}:
                if a + s <= 1.0:  # pairs of the window only
                    assert np.all(both(a, a + s) <= declared + 2e-4)


# ----------------------------------------------------------------------------------
# tuning
# ----------------------------------------------------------------------------------
EPS8 = np.array([0.2, 0.3, 0.4, 0.5, 1.0, 2.0, 3.0, 5.0])


@pytest.fixture(scope="module")
def tuned():
    """A1B1, centre objective, W = Δf = 1: one compiled program shared by the tuning tests."""
    return optimize.tune_composite(EPS8, window=(0.0, 1.0))


@pytest.mark.slow
def test_tune_composite_reaches_the_dense_scan_optimum(tuned):
    idx = [0, 4, 6, 7]  # ε = 0.2, 1, 3, 5
    with jax.enable_x64(True):
        ms = jnp.linspace(1e-4, 2 - 1e-4, 200_001)  # step 1e-5: the scan's own error is ~1e-9 relative
        for i in idx:
            dense = float(jnp.min(canonical_variance("rectangle", ms, EPS8[i])))
            assert abs(tuned.variance[i] / dense - 1) < 1e-5
            assert tuned.variance[i] <= dense * (1 + 1e-12)
    np.testing.assert_allclose(np.abs(tuned.closed_form["relative_gap"]), 0, atol=1e-9)


@pytest.mark.slow
def test_tune_composite_reproduces_the_spec_ratios_and_tables(tuned):
    np.testing.assert_allclose(tuned.ratio, [0.619, 0.596, 0.574, 0.553, 0.459, 0.317, 0.218, 0.100], atol=6e-4)
    np.testing.assert_allclose(
        np.asarray(tuned.mechanism.m), [0.9565, 0.9350, 0.9137, 0.8926, 0.7907, 0.6102, 0.4645, 0.2621], atol=1e-4
    )
    r = optimize.tune_composite(EPS8, window=(10.0, 12.0))  # W = 2: variances scale by W², same program
    np.testing.assert_allclose(r.ratio, tuned.ratio, rtol=1e-9)
    np.testing.assert_allclose(r.centre_variance[4] / 4, 0.9175, rtol=1e-4)


@pytest.mark.slow
def test_tune_composite_worst_objective_and_half_sine_match_the_spec_tables():
    w = optimize.tune_composite([1.0], window=(0.0, 1.0), objective="worst")
    assert float(w.mechanism.m[0]) == pytest.approx(0.8738, abs=1e-4)
    assert float(w.variance[0]) == pytest.approx(1.2664, rel=1e-4)
    a2 = optimize.tune_composite(1.0, window=(0.0, 1.0), activation="half_sine")
    assert float(a2.mechanism.m) == pytest.approx(0.8679, abs=1e-4)
    assert float(a2.variance) == pytest.approx(1.7886, rel=1e-4)


@pytest.mark.slow
def test_tune_composite_compiles_once_per_configuration(tuned):
    """Warm calls reuse the compiled program (any ε count up to the padded bucket, any window)."""
    import time

    from optimize.composite import _gradient_program

    before = _gradient_program.cache_info().misses
    t = time.perf_counter()
    optimize.tune_composite(EPS8[:5], window=(-3.0, 4.0))
    assert _gradient_program.cache_info().misses == before
    assert time.perf_counter() - t < 1.0  # a recompilation takes seconds


@pytest.mark.slow
def test_tuned_mechanism_is_valid_and_private_at_epsilon(tuned):
    mech = jax.tree_util.tree_map(lambda p: p[jnp.asarray([3, 5])] if jnp.ndim(p) else p, tuned.mechanism)  # ε = 0.5, 2
    rep = accounting.composite.epsilon_star(mech)
    np.testing.assert_allclose(rep.epsilon, [0.5, 2.0], rtol=1e-9)
    one = jax.tree_util.tree_map(lambda p: p[5] if jnp.ndim(p) else p, tuned.mechanism)
    dpjax.Composite(one.activation, one.base, one.epsilon, one.k, one.m, one.y, window=one.window)  # validates
    x = dpjax.release(jax.random.key(0), jnp.zeros(4), one)
    assert np.isfinite(np.asarray(x)).all()


def test_paper_grid_is_close_to_the_gradient_optimum(tuned):
    p = optimize.tune_composite(np.array([0.2, 1.0]), window=(0.0, 1.0), method="paper_grid")
    g = tuned.variance[[0, 4]]
    assert np.all(p.variance >= g * (1 - 1e-12))
    assert np.all(p.variance <= g * 1.01)
    assert p.h1[0] == pytest.approx(9.382, abs=1e-3)  # Table 2, A1B1, ε = 0.2


@pytest.mark.slow
def test_paper_grid_reproduces_table_2_h1_for_b1():
    """The released grid's loop bounds: A1B1 and A3B1 all five ε exact, A2B1
    four of five (ε = 0.2: the grid gives 14.429, the paper prints 15.308)."""
    eps = np.array([0.2, 0.3, 0.4, 0.5, 1.0])
    table = {
        "rectangle": [9.382, 6.082, 4.447, 3.456, 1.466],
        "half_sine": [14.429, 9.103, 6.711, 5.166, 2.093],
        "triangle": [18.263, 11.713, 8.456, 6.481, 2.588],
    }
    for act, h1 in table.items():
        p = optimize.tune_composite(eps, window=(0.0, 1.0), activation=act, method="paper_grid")
        np.testing.assert_allclose(p.h1, h1, atol=5e-4)


def test_tune_composite_validation():
    with pytest.raises(ValueError, match="objective"):
        optimize.tune_composite(1.0, window=(0, 1), objective="median")
    with pytest.raises(ValueError, match="window"):
        optimize.tune_composite(1.0, window=(1, 0))
    with pytest.raises(ValueError, match="epsilon"):
        optimize.tune_composite(-1.0, window=(0, 1))


# ----------------------------------------------------------------------------------
# command line
# ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_cli_releases_group_means_on_a_window_with_epsilon_star(tmp_path, capsys, tuned):
    from dpjax import cli
    from dpjax.cli import io as tables
    from dpjax.cli import release_public as release

    out = tmp_path / "means.csv"
    assert (
        cli.main(
            [
                "release",
                "--mechanism",
                "composite",
                "--window",
                "0",
                "20000",
                "--seed",
                "3",
                "--output",
                str(out),
                "--include-true-values",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "epsilon* = 1.0000" in text and "nominal epsilon = 1.0000" in text and "A1B1" in text
    rows = np.genfromtxt(out, delimiter=",", names=True, dtype=None, encoding="utf-8")
    names, inverse, values = tables.read_table(None, "steps", "age_group")
    groups = names[inverse]
    for g, t, r in zip(rows["group"], rows["true_mean"], rows["released_mean"]):
        assert t == pytest.approx(np.mean(np.clip(values[groups == g], 0, 20000)), rel=1e-12)
        assert -30884 < r < 50884  # the output range [mid − L/C, mid + L/C] of the tuned A1B1 (ε = 1)
    mech = release.build_composite((0, 20000), 1.0)
    np.testing.assert_allclose(float(mech.m), float(tuned.mechanism.m[4]), rtol=1e-6)  # the tuner's ε = 1 optimum
    assert cli.main(["release", "--mechanism", "composite", "--seed", "3"]) == 2  # no window
    assert cli.main(["release", "--mechanism", "composite", "--window", "5", "1"]) == 2
    assert cli.main(["release", "--mechanism", "composite", "--window", "0", "1", "--statistic", "count"]) == 2
    assert cli.main(["release", "--scale", "20000", "--statistic", "mean", "--seed", "3"]) == 2  # needs the window
    err = capsys.readouterr().err
    assert "--window" in err and "--statistic" in err
