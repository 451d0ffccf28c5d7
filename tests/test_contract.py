"""Every mechanism of the engine against the mechanism contract (cases in ``tests/contract.py``)."""

from __future__ import annotations

import functools
import math
import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import accounting
import dpjax
from accounting.privacy_loss import profiles as _profiles
from contract import CASE_IDS, CASES, float64

ALPHA = 1e-4  # goodness-of-fit threshold (fixed seeds: deterministic)
EPS = np.array([-0.5, 0.0, 0.1, 0.3, 0.7, 1.0, 2.0])
cases = pytest.mark.parametrize("case", CASES, ids=CASE_IDS)


def cases_slow_at(*slow_ids):
    """Every contract case, those named running in the slow suite only: the heaviest cases of a check,
    whose family keeps a lighter case (or a closed-form check) in the default suite."""
    unknown = set(slow_ids) - set(CASE_IDS)
    if unknown:
        raise ValueError(f"no contract case {sorted(unknown)}")
    return pytest.mark.parametrize(
        "case",
        [pytest.param(c, marks=pytest.mark.slow) if i in slow_ids else c for c, i in zip(CASES, CASE_IDS)],
        ids=CASE_IDS,
    )


def _draw_answers(case, n):
    m = case.build()
    dt = jnp.int32 if m.discrete else jnp.float32
    return jnp.asarray(np.resize(np.asarray(case.values), n), dt)


def _categories(m) -> int:
    return getattr(m, "num_categories", None) or m.domain_size


def _points(case, m, v):
    """Outputs where the law of answer v is to be compared (integers on a discrete support)."""
    if case.points is not None:
        return np.asarray(case.points, dtype=float)
    if case.categorical:
        return np.arange(_categories(m), dtype=float)
    if m.discrete:
        return np.arange(v - 6, v + 7, dtype=float)
    return v + np.linspace(-6.0, 6.0, 25) + 0.013


# ----------------------------------------------------------------------------------
# pytree, jit, vmap, grad
# ----------------------------------------------------------------------------------
@cases_slow_at(
    "BoundedRange",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "RandomizedResponse",
    "LaplaceMixture",
    "BoostedRandomizedResponse",
    "PB-Gaussian-Absolute",
    "PB-Laplace-Relative",
    "PB-Gaussian-Fixed",
    "PB-DiscreteLaplace-Relative",
    "PB-DiscreteGaussian-Absolute",
    "PB-Logistic-Absolute",
    "PB-Logistic-Relative-rejection",
    "Composite-A1B1",
)
def test_pytree_jit_vmap_grad_round_trip(case):
    m = case.build()
    v = case.values[1]
    y = jnp.asarray(_points(case, m, v)[:5], jnp.float32)
    leaves, treedef = jax.tree_util.tree_flatten(m)
    again = jax.tree_util.tree_unflatten(treedef, leaves)
    lp = np.asarray(m.log_prob(y, v))
    np.testing.assert_array_equal(np.asarray(again.log_prob(y, v)), lp)
    np.testing.assert_allclose(np.asarray(jax.jit(lambda mm: mm.log_prob(y, v))(m)), lp, rtol=1e-6)
    batch = jax.tree_util.tree_map(lambda x: jnp.stack([x, x, x]), m)
    assert batch.batch_shape[:1] == (3,)
    out = np.asarray(jax.vmap(lambda mm: mm.log_prob(y, v))(batch))
    np.testing.assert_allclose(out, np.broadcast_to(lp, out.shape), rtol=1e-6)
    grads = jax.grad(lambda mm: jnp.sum(jnp.where(jnp.isfinite(lp), mm.log_prob(y, v), 0.0)))(m)
    for g in jax.tree_util.tree_leaves(grads):
        assert np.all(np.isfinite(np.asarray(g)))
    assert any(np.any(np.asarray(g) != 0) for g in jax.tree_util.tree_leaves(grads))


# ----------------------------------------------------------------------------------
# samples against the law
# ----------------------------------------------------------------------------------
def _goodness_of_fit(case, n, seed):
    m = case.build()
    v = case.values[1]
    x = np.asarray(
        m.sample(jax.random.key(seed), jnp.asarray(v, jnp.int32 if m.discrete else jnp.float32), (n,)), np.float64
    )
    with jax.enable_x64(True):
        m64 = float64(m)
        if not m.discrete:
            return stats.kstest(x, lambda y: np.asarray(m64.cdf(jnp.asarray(y), v))).pvalue
        ks, counts = np.unique(x, return_counts=True)
        support = np.arange(ks.min(), ks.max() + 1)
        probs = np.exp(np.asarray(m64.log_prob(jnp.asarray(support), v)))
        below = float(m64.cdf(support[0] - 1.0, v))
        above = 1.0 - float(m64.cdf(support[-1], v))
    observed = np.zeros(support.size)
    observed[np.searchsorted(support, ks)] = counts
    expected = probs * n
    # merge bins with expected < 5 into their neighbour towards the mode, tails into the end bins
    expected[0] += below * n
    expected[-1] += above * n
    keep = expected >= 5
    obs, exp = [], []
    o_acc = e_acc = 0.0
    for o, e, k in zip(observed, expected, keep):
        o_acc += o
        e_acc += e
        if e_acc >= 5:
            obs.append(o_acc)
            exp.append(e_acc)
            o_acc = e_acc = 0.0
    if e_acc > 0 and exp:
        obs[-1] += o_acc
        exp[-1] += e_acc
    obs, exp = np.asarray(obs), np.asarray(exp)
    return stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue


@cases_slow_at(
    "Gaussian",
    "DiscreteLaplace",
    "DiscreteGaussian",
    "LaplaceMixture",
    "GeometricMixture",
    "RandomizedResponse",
    "BoostedRandomizedResponse",
    "PB-Gaussian-Absolute",
    "PB-Laplace-Relative",
    "PB-Gaussian-Fixed",
    "PB-DiscreteLaplace-Relative",
    "PB-DiscreteGaussian-Absolute",
    "PB-Logistic-Absolute",
    "PB-Logistic-Relative-rejection",
    "Composite-A1B1",
)
def test_samples_match_cdf(case):
    assert _goodness_of_fit(case, 20_000, 1) > ALPHA


@pytest.mark.slow
@cases
def test_samples_match_cdf_at_a_million_draws(case):
    assert _goodness_of_fit(case, 1_000_000, 2) > ALPHA


def _exact_capable(case):
    try:
        case.build().exact_lattice()
    except ValueError:  # the default hook refuses, naming the mechanism
        return False
    return True


EXACT_CASES = [c for c in CASES if _exact_capable(c)]


#: the heaviest lattice laws (their χ² samples) run in the slow suite
_SLOW_EXACT = ("Gaussian", "DiscreteGaussian", "DiscreteLaplace", "PB-DiscreteGaussian-Absolute")


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.slow) if c.id in _SLOW_EXACT else c for c in EXACT_CASES],
    ids=[c.id for c in EXACT_CASES],
)
def test_exact_release_matches_the_lattice_law(case):
    """Every exact-capable mechanism through ``dpjax.release(..., numerics="exact")``: outputs on the lattice
    gℤ and distributed as the lattice mechanism's law (``mech.exact_lattice()``, the one the accountant
    charges), χ² over 20 bins at the sample's quantiles (categories for randomized response)."""
    m = case.build()
    lat = m.exact_lattice()
    v = case.values[1]
    n = 20_000
    x = jnp.full(n, v, jnp.int32 if m.discrete else jnp.float32)
    out = np.asarray(dpjax.release(jax.random.key(3), x, m, numerics="exact"), np.float64)
    with jax.enable_x64(True):
        if case.categorical:
            cats = np.arange(_categories(m))
            probs = np.exp(np.asarray(lat.log_prob(jnp.asarray(cats, jnp.float64), v)))
            obs = np.array([(out == c).sum() for c in cats])
        else:
            g = float(lat.granularity)
            y = out / g
            np.testing.assert_array_equal(y, np.round(y))  # on the lattice
            index = math.floor(v / g + 0.5)
            edges = np.unique(np.quantile(y, np.linspace(0.05, 0.95, 19), method="lower"))
            cdf = np.asarray(lat.cdf(jnp.asarray(edges, jnp.float64), float(index)))
            probs = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
            obs = np.histogram(y, np.concatenate([[-np.inf], edges + 0.5, [np.inf]]))[0]
    assert obs.sum() == n
    assert stats.chisquare(obs, probs * n / probs.sum()).pvalue > ALPHA


# ----------------------------------------------------------------------------------
# log_prob against cdf
# ----------------------------------------------------------------------------------
@cases_slow_at(
    "DiscreteGaussian",
    "PB-Gaussian-Absolute",
    "PB-Laplace-Relative",
    "PB-Gaussian-Fixed",
    "PB-DiscreteLaplace-Relative",
    "PB-DiscreteGaussian-Absolute",
    "PB-Logistic-Absolute",
    "PB-Logistic-Relative-rejection",
)
def test_log_prob_matches_cdf(case):
    m = case.build()
    v = case.values[1]
    with jax.enable_x64(True):
        m64 = float64(m)
        y = _points(case, m, v)
        if m.discrete:
            jumps = np.asarray(m64.cdf(y, v)) - np.asarray(m64.cdf(y - 1.0, v))
            np.testing.assert_allclose(jumps, np.exp(np.asarray(m64.log_prob(y, v))), rtol=1e-9, atol=1e-15)
            return
        h = 1e-5
        if m.output_breakpoints is not None:  # the density jumps there: keep away
            bp = np.asarray(m64.output_breakpoints(v, v)).ravel()
            y = y[np.min(np.abs(y[:, None] - bp[None, :]), axis=1) > 10 * h]
        slope = (np.asarray(m64.cdf(y + h, v)) - np.asarray(m64.cdf(y - h, v))) / (2 * h)
        np.testing.assert_allclose(slope, np.exp(np.asarray(m64.log_prob(y, v))), rtol=1e-6, atol=1e-12)


# ----------------------------------------------------------------------------------
# accounting hooks against the generic accountant and quadrature
# ----------------------------------------------------------------------------------
@functools.partial(jax.jit, static_argnames=("count", "cells"))
def _profiles_jit(me, va, nva, klo, eps, count, cells):
    out = []
    for pessimistic in (False, True):
        if count:
            (f, tf), _ = _profiles._discrete_pair(me, va[..., None], nva[..., None], klo[..., None], count, pessimistic)
        else:
            (f, tf), _ = _profiles._grid_pair(me, va[..., None], nva[..., None], cells, pessimistic)
        out.append(_profiles.atoms_profile(*f, tf)(eps[None, :]).reshape(-1))
    return out


def _generic_profiles(m64, v, nv, eps, cells=2**14):
    """(optimistic, pessimistic) δ(ε) of the pair from the generic accountant's own profile
    sources: exact atoms on the integers, or the output grid."""
    me = _profiles.expand(m64)
    va, nva = jnp.asarray([v], jnp.float64), jnp.asarray([nv], jnp.float64)
    klo, count = jnp.zeros(1), 0
    if m64.discrete:
        plan = _profiles.discrete_plan(me, va, nva)
        klo, count = plan["klo"], plan["count"]
    return [np.asarray(x) for x in _profiles_jit(me, va, nva, klo, jnp.asarray(eps, jnp.float64), count, cells)]


def _worst_declared_pair(m64, sensitivity):
    v, nv = (np.asarray(a).ravel() for a in m64.neighbour_pairs(sensitivity))
    return float(v[0]), float(nv[0])


@cases_slow_at(
    "BoundedRange",
    "Laplace",
    "Gaussian",
    "DiscreteLaplace",
    "LaplaceMixture",
    "GeometricMixture",
    "RandomizedResponse",
    "BoostedRandomizedResponse",
    "PB-Gaussian-Absolute",
    "PB-Laplace-Relative",
    "PB-Gaussian-Fixed",
    "PB-DiscreteLaplace-Relative",
    "PB-DiscreteGaussian-Absolute",
    "PB-Logistic-Absolute",
    "PB-Logistic-Relative-rejection",
    "Composite-A1B1",
)
def test_closed_form_profile_within_generic_accountant(case):
    m = case.build()
    if m.hockey_stick is None:
        pytest.skip(f"{case.id} has no closed-form hockey_stick: the generic accountant is its only profile")
    with jax.enable_x64(True):
        m64 = float64(m)
        q = case.scan[len(case.scan) // 2]
        pairs = [(q, q + case.sensitivity)] if not case.categorical else [_worst_declared_pair(m64, 1.0)]
        for v, nv in pairs + [(b, a) for a, b in pairs]:
            closed = np.asarray(m64.hockey_stick(jnp.asarray(EPS), v, nv))
            opt, pess = _generic_profiles(m64, v, nv, EPS)
            assert np.all(closed >= opt - 1e-9), (closed, opt)
            assert np.all(closed <= pess + 1e-9), (closed, pess)
            np.testing.assert_allclose(closed, pess, atol=1e-3)


def _quadrature_renyi(m64, alpha, v, nv):
    """D_α by Gauss–Legendre quadrature between the law's breakpoints (or the exact sum)."""
    if m64.discrete:
        k = np.arange(min(v, nv) - 400, max(v, nv) + 401, dtype=float)
        lp, lq = np.asarray(m64.log_prob(k, v)), np.asarray(m64.log_prob(k, nv))
        t = np.where(np.isneginf(lp), -np.inf, alpha * lp + (1 - alpha) * lq)
        return float(np.logaddexp.reduce(t) / (alpha - 1))
    cuts = [min(v, nv) - 60.0, v, nv, max(v, nv) + 60.0]
    if m64.output_breakpoints is not None:
        cuts += list(np.asarray(m64.output_breakpoints(v, nv)).ravel())
    edges = np.unique(np.concatenate([np.linspace(c0, c1, 400) for c0, c1 in zip(sorted(cuts)[:-1], sorted(cuts)[1:])]))
    x, w = np.polynomial.legendre.leggauss(12)
    a, b = edges[:-1, None], edges[1:, None]
    y = (a + (b - a) * (x + 1) / 2).ravel()
    ww = ((b - a) / 2 * w).ravel()
    lp, lq = np.asarray(m64.log_prob(y, v)), np.asarray(m64.log_prob(y, nv))
    t = np.where(np.isneginf(lp), -np.inf, alpha * lp + (1 - alpha) * lq) + np.log(ww)
    return float(np.logaddexp.reduce(t) / (alpha - 1))


@cases_slow_at(
    "LaplaceMixture",
    "GeometricMixture",
    "BoostedRandomizedResponse",
    "PB-Gaussian-Absolute",
    "PB-Laplace-Relative",
    "PB-Gaussian-Fixed",
    "PB-DiscreteLaplace-Relative",
    "PB-DiscreteGaussian-Absolute",
    "PB-Logistic-Absolute",
    "PB-Logistic-Relative-rejection",
)
def test_closed_form_renyi_matches_quadrature(case):
    m = case.build()
    if m.renyi_divergence is None:
        pytest.skip(f"{case.id} has no closed-form renyi_divergence (accounting.rdp integrates its law)")
    with jax.enable_x64(True):
        m64 = float64(m)
        v, nv = (
            _worst_declared_pair(m64, case.sensitivity)
            if case.categorical
            else (case.scan[0], case.scan[0] + case.sensitivity)
        )
        for alpha in (2.0, 5.0):
            closed = float(m64.renyi_divergence(alpha, v, nv))
            np.testing.assert_allclose(closed, _quadrature_renyi(m64, alpha, v, nv), rtol=1e-6, atol=1e-9)


@cases_slow_at(
    "BoundedRange",
    "Gaussian",
    "DiscreteLaplace",
    "RandomizedResponse",
    "LaplaceMixture",
    "GeometricMixture",
    "BoostedRandomizedResponse",
    "PB-Gaussian-Absolute",
    "PB-Laplace-Relative",
    "PB-Gaussian-Fixed",
    "PB-DiscreteLaplace-Relative",
    "PB-DiscreteGaussian-Absolute",
    "PB-Logistic-Absolute",
    "PB-Logistic-Relative-rejection",
    "Composite-A1B1",
)
def test_exact_epsilon_gradient_matches_finite_differences(case):
    """d ε(δ)/dθ of the exact single-release accountant along a direction of every parameter leaf,
    against central differences of the exact value."""
    m = case.build()
    if m.hockey_stick is None:
        pytest.skip(f"{case.id} has no closed-form hockey_stick")
    delta = 1e-3
    with jax.enable_x64(True):
        m64 = float64(m)
        leaves, treedef = jax.tree_util.tree_flatten(m64)
        direction = [0.01 * (1.0 + 0.1 * i) * jnp.abs(x) for i, x in enumerate(leaves)]

        def eps(t):
            moved = jax.tree_util.tree_unflatten(treedef, [x + t * d for x, d in zip(leaves, direction)])
            return accounting.exact.epsilon(moved, delta, case.sensitivity)

        grad = float(jax.grad(eps)(jnp.float64(0.0)))
        # (a supremum over answers bisected to 1/4096 of a grid step moves in small jumps: two steps)
        fds = [(float(eps(jnp.float64(h))) - float(eps(jnp.float64(-h)))) / (2 * h) for h in (1e-3, 1e-5)]
    assert any(abs(grad - fd) <= 2e-3 * abs(fd) + 1e-7 for fd in fds), (grad, fds)


@cases_slow_at(
    "DiscreteGaussian",
    "LaplaceMixture",
    "GeometricMixture",
    "Logistic",
    "BoostedRandomizedResponse",
    "PB-Gaussian-Absolute",
    "PB-Laplace-Relative",
    "PB-Gaussian-Fixed",
    "PB-DiscreteLaplace-Relative",
    "PB-DiscreteGaussian-Absolute",
    "PB-Logistic-Absolute",
    "PB-Logistic-Relative-rejection",
    "Composite-A1B1",
)
def test_declared_worst_pair_is_the_worst_of_a_scan(case):
    """No pair (Q, Q + d), 0 < d ≤ Δ, Q from the case's scan, either order, has a larger δ(ε) than
    the accountant's worst case over the declared pairs."""
    m = case.build()
    eps = np.array([0.1, 0.5, 1.0])
    with jax.enable_x64(True):
        m64 = float64(m)
        delta = case.sensitivity
        if case.categorical:
            k = _categories(m)
            scan = [(a, b) for a in range(k) for b in range(k) if a != b]
        else:
            shifts = np.arange(1, int(delta) + 1) if m.discrete else np.linspace(delta / 8, delta, 8)
            scan = [(q, q + d) for q in case.scan for d in shifts]
        closed = m.hockey_stick is not None
        found = np.zeros_like(eps)
        for v, nv in scan + [(b, a) for a, b in scan]:
            d = (
                np.asarray(m64.hockey_stick(jnp.asarray(eps), v, nv))
                if closed
                else _generic_profiles(m64, v, nv, eps)[0]
            )
            found = np.maximum(found, d)
        if closed:
            declared = np.asarray(accounting.exact.privacy_profile(m, eps, delta))
        else:
            vs, nvs = (np.asarray(a).ravel() for a in m64.neighbour_pairs(delta))
            declared = np.max(
                [
                    np.maximum(_generic_profiles(m64, a, b, eps)[1], _generic_profiles(m64, b, a, eps)[1])
                    for a, b in zip(vs, nvs)
                ],
                axis=0,
            )
    assert np.all(found <= declared + 1e-9), (found, declared)


@cases
def test_log_concave_claim(case):
    """A kernel that claims ``log_concave`` has a concave log density (second differences ≤ 0 on
    a fine grid over its bulk and tails); one that does not declares its kinks."""
    m = case.build()
    if not isinstance(m, dpjax.AdditiveMechanism):
        pytest.skip(f"{case.id} is not an additive kernel")
    with jax.enable_x64(True):
        k = float64(m)
        reach = float(k.noise_reach())
        n = np.arange(-np.floor(reach), np.floor(reach) + 1.0) if m.discrete else np.linspace(-reach, reach, 20_001)
        lp = np.asarray(k.noise_log_prob(jnp.asarray(n)))
    if m.log_concave:
        second = np.diff(lp, 2)
        assert np.all(second <= 1e-9 * np.max(np.abs(lp))), np.max(second)
    else:
        assert np.asarray(m.noise_kinks()).shape[-1] > 0


# ----------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------
@cases
def test_validation_errors_name_the_parameter(case):
    assert case.invalid, f"{case.id}: give at least one invalid construction"
    for build, name in case.invalid:
        with pytest.raises(ValueError, match=name):
            build()


# ----------------------------------------------------------------------------------
# releases bitwise identical on 1, 2 and 4 devices
# ----------------------------------------------------------------------------------
_RECORDS = (1 << 16) + 3  # sharded above 2^16 records; not a multiple of 2 or 4: padded

_DEVICE_SCRIPT = textwrap.dedent(
    """
    import sys
    import jax, numpy as np
    sys.path.insert(0, sys.argv[3])
    import dpjax
    import contract, test_contract
    assert len(jax.devices()) == int(sys.argv[1]), jax.devices()
    outs = {c.id: np.asarray(dpjax.release(jax.random.key(7), test_contract._draw_answers(c, contract_n), c.build(),
                                           numerics="float"))
            for c in contract.CASES}
    np.savez(sys.argv[2], **outs)
    """
).replace("contract_n", str(_RECORDS))


def _release_on(devices, tmp_path):
    script = tmp_path / "devices.py"
    script.write_text(_DEVICE_SCRIPT)
    path = tmp_path / f"out{devices}.npz"
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    tests = str(pathlib.Path(__file__).resolve().parent)
    subprocess.run([sys.executable, str(script), str(devices), str(path), tests], check=True, env=env, timeout=600)
    return np.load(path)


def _check_devices(counts, tmp_path):
    import dpjax

    one = {
        c.id: np.asarray(dpjax.release(jax.random.key(7), _draw_answers(c, _RECORDS), c.build(), numerics="float"))
        for c in CASES
    }
    for n in counts:
        other = _release_on(n, tmp_path)
        for cid in CASE_IDS:
            np.testing.assert_array_equal(one[cid], other[cid], err_msg=f"{cid}: 1 vs {n} devices")


# a subprocess compiling every case again; tests/test_release.py and test_exact_lattice.py keep 1 vs 4 devices
@pytest.mark.slow
def test_release_is_identical_on_1_and_4_devices(tmp_path):
    _check_devices((4,), tmp_path)


@pytest.mark.slow
def test_release_is_identical_on_1_and_2_devices(tmp_path):
    _check_devices((2,), tmp_path)
