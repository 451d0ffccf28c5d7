"""DP-SGD's optax plug-in (optimize.dpsgd): the Poisson sampler, clipping, the stated noise, accumulation, the
noise kernels, reproducible noise, validation; the example trains a few epochs."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import optax.contrib
import pytest
from scipy import stats

import accounting
import dpjax
import optimize
from optimize.dpsgd import NOISE_TAG


@pytest.mark.slow
def test_example_trains_a_few_epochs():
    pytest.importorskip("sklearn")
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "examples", "dpsgd_digits.py")
    spec = importlib.util.spec_from_file_location("dpsgd_digits", path)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    data = ex.load_digits()
    delta = 1.0 / len(data[1]) ** 2
    _, curve, z, steps = ex.train_private(data, 8.0, delta, 5, jax.random.key(0), log=lambda *a: None)
    assert curve[-1][1] > 0.85 and curve[-1][2] <= 8.0


# ----------------------------------------------------------------------------------
# the Poisson sampler
# ----------------------------------------------------------------------------------
def test_poisson_sampler_is_bernoulli_per_example():
    n, q, steps = 2000, 0.05, 60
    sampler = dpjax.PoissonSampler(jax.random.key(7), n, q, batch_size=64)
    masks = np.stack([np.asarray(sampler.mask(t)) for t in range(steps)])
    # batch sizes ~ Binomial(n, q): chi-square goodness of fit of the total, KS of per-step sizes
    sizes = masks.sum(axis=1)
    assert stats.kstest(sizes, stats.binom(n, q).cdf).pvalue > 1e-3 or abs(sizes.mean() - n * q) < 3 * math.sqrt(n * q)
    per_example = masks.sum(axis=0)  # Binomial(steps, q) per example, independent across examples
    k = np.arange(0, 9)
    observed = np.asarray([np.sum(per_example == i) for i in k[:-1]] + [np.sum(per_example >= k[-1])])
    pmf = stats.binom(steps, q).pmf(k[:-1])
    expected = np.concatenate([pmf, [1 - pmf.sum()]]) * n
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    assert abs(np.corrcoef(masks[:-1].ravel(), masks[1:].ravel())[0, 1]) < 0.02  # steps independent
    assert sampler.realized_sampling_prob <= q and q - sampler.realized_sampling_prob < 2.0**-23


@jax.debug_key_reuse(True)
def test_poisson_batches_cover_the_sample_once_with_fixed_shapes():
    sampler = dpjax.PoissonSampler(jax.random.key(3), 500, 0.3, batch_size=32)
    idx, mask = sampler.batches(5)
    assert idx.shape == mask.shape and idx.shape[1] == 32
    chosen = np.sort(np.asarray(idx)[np.asarray(mask)])
    np.testing.assert_array_equal(chosen, np.flatnonzero(np.asarray(sampler.mask(5))))
    again, _ = dpjax.PoissonSampler(jax.random.key(3), 500, 0.3, batch_size=32).batches(5)
    np.testing.assert_array_equal(np.asarray(idx), np.asarray(again))  # reproducible from (key, step)
    empty_idx, empty_mask = dpjax.PoissonSampler(jax.random.key(0), 3, 1e-6, batch_size=4).batches(0)
    assert empty_idx.shape == (1, 4) and not np.asarray(empty_mask).any()
    with pytest.raises(ValueError, match="sampling_prob"):
        dpjax.PoissonSampler(jax.random.key(0), 10, 0.0, batch_size=4)


# ----------------------------------------------------------------------------------
# the optax plug-in
# ----------------------------------------------------------------------------------
PARAMS = {"b": jnp.zeros((3,)), "w": jnp.zeros((5, 3))}


def _grads(batch, seed=0, scale=3.0):
    k1, k2 = jax.random.split(jax.random.key(seed))
    return {"b": jax.random.normal(k1, (batch, 3)) * scale, "w": jax.random.normal(k2, (batch, 5, 3)) * scale}


def _flat(tree):
    """An update (a parameter-shaped pytree) as one vector."""
    return jnp.concatenate([x.ravel() for x in jax.tree_util.tree_leaves(tree)])


def _per_example(tree):
    """Per-example gradients (leading axis) as a (batch, d) matrix."""
    return jnp.concatenate([x.reshape(x.shape[0], -1) for x in jax.tree_util.tree_leaves(tree)], axis=-1)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _step_noise(key, mech, size, step=0):
    k = jax.random.fold_in(jax.random.fold_in(key, NOISE_TAG), step)
    return mech.sample_records(k, jnp.zeros((size,)), 0)


def test_zero_gradients_give_the_stated_noise_std():
    params = {"w": jnp.zeros((400, 100))}
    tx = optimize.private_aggregate(2.0, 1.5, jax.random.key(0), expected_batch_size=10.0)
    out, _ = jax.jit(tx.update)({"w": jnp.zeros((4, 400, 100))}, tx.init(params))
    noise = np.asarray(out["w"]).ravel() * 10.0
    # variance of 40 000 N(0, 3²) draws: chi-square interval at 1e-4
    n = noise.size
    lo, hi = stats.chi2.ppf([1e-4, 1 - 1e-4], n - 1) / (n - 1)
    assert lo * 9.0 <= noise.var(ddof=1) <= hi * 9.0
    assert stats.kstest(noise / 3.0, "norm").pvalue > 1e-4


def test_clipping_bounds_every_contribution():
    g = _grads(16, scale=5.0)
    g["w"] = g["w"].at[0].set(1e-3)  # one small example stays unclipped
    for order in (1, 2):
        clipped = jax.jit(optimize.clip_per_example, static_argnames="order")(g, 1.5, order=order)
        norms = np.linalg.norm(np.asarray(_per_example(clipped)), ord=order, axis=1)
        assert np.all(norms <= 1.5 * (1 + 1e-6))
        np.testing.assert_allclose(
            np.asarray(clipped["w"][0]),
            np.asarray(g["w"][0]) * min(1.0, 1.5 / np.linalg.norm(np.asarray(_per_example(g)[0]), ord=order)),
            rtol=1e-6,
        )


@pytest.mark.slow
def test_matches_optax_contrib_with_the_same_noise():
    key = jax.random.key(11)
    g = _grads(64)
    tx11 = optimize.private_aggregate(1.0, 1.1, key)
    ours, state = jax.jit(tx11.update)(g, tx11.init(PARAMS))
    contrib = optax.contrib.differentially_private_aggregate(1.0, 0.0, jax.random.key(0))
    clipped_mean, _ = jax.jit(contrib.update)(g, contrib.init(PARAMS))
    noise = _step_noise(key, dpjax.Gaussian(sigma=1.1), 18)
    np.testing.assert_allclose(np.asarray(_flat(ours)), np.asarray(_flat(clipped_mean) + noise / 64), atol=1e-7)
    # normalised by the expected batch size instead: the same sum, another divisor
    tx = optimize.private_aggregate(1.0, 1.1, key, expected_batch_size=32.0)
    ours32, _ = jax.jit(tx.update)(g, tx.init(PARAMS))
    np.testing.assert_allclose(np.asarray(_flat(ours32)), np.asarray(_flat(ours)) * 2.0, rtol=1e-5, atol=1e-7)
    assert int(state.step) == 1


@pytest.mark.slow
def test_masked_and_nonfinite_examples_contribute_nothing():
    key = jax.random.key(5)
    tx = optimize.private_aggregate(1.0, 1.0, key, expected_batch_size=8.0)
    g = _grads(8)
    mask = jnp.asarray([True] * 5 + [False] * 3)
    upd = jax.jit(tx.update)
    base, _ = upd(g, tx.init(PARAMS), mask=mask)
    poisoned = jax.tree_util.tree_map(lambda x: x.at[5].set(1e6).at[6].set(jnp.nan), g)
    out, _ = upd(poisoned, tx.init(PARAMS), mask=mask)
    np.testing.assert_array_equal(np.asarray(_flat(out)), np.asarray(_flat(base)))
    nan_real = jax.tree_util.tree_map(lambda x: x.at[0].set(jnp.nan), g)  # a real example with a NaN gradient
    out, _ = upd(nan_real, tx.init(PARAMS), mask=mask)
    assert np.isfinite(np.asarray(_flat(out))).all()
    with pytest.raises(ValueError, match="expected_batch_size"):
        plain = optimize.private_aggregate(1.0, 1.0, key)
        plain.update(g, plain.init(PARAMS), mask=mask)


@pytest.mark.slow
def test_accumulation_adds_noise_once_per_logical_batch():
    key = jax.random.key(9)
    tx = optimize.private_aggregate(1.0, 1.2, key, expected_batch_size=16.0)
    g = _grads(16)
    half1 = jax.tree_util.tree_map(lambda x: x[:8], g)
    half2 = jax.tree_util.tree_map(lambda x: x[8:], g)
    upd = jax.jit(tx.update)
    s = tx.init(PARAMS)
    zero, s = upd(half1, s, mask=jnp.ones(8, bool), last_microbatch=False)
    assert float(jnp.abs(_flat(zero)).max()) == 0.0 and int(s.step) == 0
    acc, s = upd(half2, s, mask=jnp.ones(8, bool), last_microbatch=True)
    whole, _ = upd(g, tx.init(PARAMS), mask=jnp.ones(16, bool), last_microbatch=True)
    np.testing.assert_allclose(np.asarray(_flat(acc)), np.asarray(_flat(whole)), rtol=1e-5, atol=1e-7)
    assert int(s.step) == 1 and float(jnp.abs(_flat(s.accumulated)).max()) == 0.0
    nxt, _ = upd(g, s, mask=jnp.ones(16, bool), last_microbatch=True)  # step 1: fresh noise
    assert not np.allclose(np.asarray(_flat(nxt)), np.asarray(_flat(whole)))


@pytest.mark.slow
def test_dpsgd_chain_leaves_momentum_still_while_accumulating():
    opt = optimize.dpsgd(0.1, 1.0, 1.0, jax.random.key(2), momentum=0.9, expected_batch_size=8.0)
    s0 = opt.init(PARAMS)
    g = _grads(8)
    upd = jax.jit(opt.update)
    _, s1 = upd(g, s0, PARAMS, mask=jnp.ones(8, bool), last_microbatch=False)
    for a, b in zip(jax.tree_util.tree_leaves(s0[1]), jax.tree_util.tree_leaves(s1[1])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    u, s2 = upd(g, s1, PARAMS, mask=jnp.ones(8, bool), last_microbatch=True)
    assert float(jnp.abs(_flat(u)).max()) > 0


@pytest.mark.slow
def test_laplace_and_discrete_gaussian_noise():
    key = jax.random.key(4)
    g = _grads(32)
    lap = optimize.private_aggregate(1.0, 0.5, key, mechanism=dpjax.Laplace)
    out, _ = jax.jit(lap.update)(g, lap.init(PARAMS))
    clipped = optimize.clip_per_example(g, 1.0, order=1)
    noise = _step_noise(key, dpjax.Laplace(scale=0.5), 18)
    np.testing.assert_allclose(
        np.asarray(_flat(out)),
        (np.asarray(_per_example(clipped)).sum(0) + np.asarray(noise)) / 32,
        rtol=1e-5,
        atol=1e-6,
    )
    gamma = 1e-3
    dg = optimize.private_aggregate(
        1.0, 1.0, key, mechanism=dpjax.DiscreteGaussian, grid_step=gamma, expected_batch_size=32.0
    )
    out, _ = jax.jit(dg.update)(g, dg.init(PARAMS))
    units = np.asarray(_flat(out)) * 32.0 / gamma
    np.testing.assert_allclose(units, np.round(units), atol=1e-2)  # integer multiples of the grid step
    inner = 1.0 - gamma * math.sqrt(18) / 2
    rounded = np.round(np.asarray(_per_example(optimize.clip_per_example(g, inner))) / gamma) * gamma
    assert np.all(np.linalg.norm(rounded, axis=1) <= 1.0 + 1e-9)  # each rounded contribution within the clip
    with pytest.raises(ValueError, match="grid_step"):
        optimize.private_aggregate(1.0, 1.0, key, mechanism=dpjax.DiscreteGaussian)
    with pytest.raises(ValueError, match="grid_step"):
        bad = optimize.private_aggregate(1.0, 1.0, key, mechanism=dpjax.DiscreteGaussian, grid_step=1.0)
        bad.update(g, bad.init(PARAMS))


@pytest.mark.slow
def test_noise_is_reproducible_from_key_and_step():
    key = jax.random.key(21)
    tx = optimize.private_aggregate(1.0, 1.0, key)
    g = jax.tree_util.tree_map(jnp.zeros_like, _grads(4))
    s = tx.init(PARAMS)
    upd = jax.jit(tx.update)
    a0, s = upd(g, s)
    a1, s = upd(g, s)
    b0, _ = upd(g, tx.init(PARAMS))
    np.testing.assert_array_equal(np.asarray(_flat(a0)), np.asarray(_flat(b0)))
    assert not np.allclose(np.asarray(_flat(a0)), np.asarray(_flat(a1)))
    np.testing.assert_allclose(
        np.asarray(_flat(a1)) * 4, np.asarray(_step_noise(key, dpjax.Gaussian(sigma=1.0), 18, 1)), rtol=1e-6
    )


def test_plugin_validation():
    with pytest.raises(ValueError, match="key"):
        optimize.private_aggregate(1.0, 1.0, 0)
    with pytest.raises(ValueError, match="l2_norm_clip"):
        optimize.private_aggregate(0.0, 1.0, jax.random.key(0))
    with pytest.raises(ValueError, match="noise_multiplier"):
        optimize.private_aggregate(1.0, -1.0, jax.random.key(0))
    with pytest.raises(ValueError, match="mechanism"):
        optimize.private_aggregate(1.0, 1.0, jax.random.key(0), mechanism="gaussian")


def _numpy_pairwise(x):
    """The canonical order, in numpy: pairs (0, 1), (2, 3), …, the odd last row carried up."""
    while x.shape[0] > 1:
        n = x.shape[0]
        s = x[0 : n - n % 2 : 2] + x[1 : n - n % 2 : 2]
        x = np.concatenate([s, x[n - 1 :]]) if n % 2 else s
    return x[0]


@pytest.mark.slow
def test_clipped_sum_adds_in_the_canonical_pairwise_order():
    """The order that makes DP-SGD across processes bitwise one process (tests/test_multihost.py):
    a binary tree over the examples whatever the batch size, and over each example's entries for its
    norm, each clipped example rounded before it is added (no fused multiply-add)."""
    from optimize.dpsgd import _pairwise_sum

    for n in (1, 2, 7, 24, 64):
        x = np.asarray(jax.random.normal(jax.random.key(n), (n, 3, 5)))
        np.testing.assert_array_equal(np.asarray(jax.jit(_pairwise_sum)(x)), _numpy_pairwise(x))
        np.testing.assert_array_equal(
            np.asarray(jax.jit(lambda a: _pairwise_sum(a, axis=1))(x.transpose(1, 0, 2))), _numpy_pairwise(x)
        )
    g = {"w": jax.random.normal(jax.random.key(3), (256, 1000)), "b": jax.random.normal(jax.random.key(4), (256,))}
    clipped = jax.jit(optimize.clip_per_example)(g, 1.0)  # materialized: each product rounded
    got = jax.jit(optimize.clipped_sum)(g, 1.0)  # fused with the sum
    for leaf in ("w", "b"):
        np.testing.assert_array_equal(np.asarray(got[leaf]), _numpy_pairwise(np.asarray(clipped[leaf])))


@pytest.mark.slow
def test_dpsgd_refuses_kernels_with_parameters_besides_their_scale():
    """LaplaceMixture was accepted: accounted at pure ε of scale z while the optimizer added
    LaplaceMixture(inner=C·z) with outer scale and breakpoint unscaled (7.10 for a lower bound of 297.4)."""
    with pytest.raises(ValueError, match="LaplaceMixture.*outer_scale, breakpoint"):
        accounting.dpsgd_epsilon(1.0, 0.01, 100, 1e-5, mechanism=dpjax.LaplaceMixture)
    with pytest.raises(ValueError, match="LaplaceMixture"):
        optimize.dpsgd(0.1, 1.0, 1.0, jax.random.key(0), mechanism=dpjax.LaplaceMixture)
    assert float(accounting.dpsgd_epsilon(1.0, 0.01, 100, 1e-5, mechanism=dpjax.Laplace)) > 0
