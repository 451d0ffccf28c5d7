"""optimize.clipped_grad: clipped sums without materialised per-example gradients, against the vmap reference."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax
import optimize
from optimize.clipping import _analyse


@functools.partial(jax.jit, static_argnums=(0,))
def _per_example(loss, params, *batch):
    grads = jax.vmap(jax.grad(loss), in_axes=(None,) + (0,) * len(batch))(params, *batch)
    norms = jnp.sqrt(sum(jnp.sum(jnp.square(g).reshape(g.shape[0], -1), 1) for g in jax.tree_util.tree_leaves(grads)))
    return grads, norms


def _reference(loss, params, *batch, clip, mask=None):
    """Σ_i clip(∇loss(params, example_i)) from vmapped per-example gradients and optimize.clipped_sum."""
    grads, norms = _per_example(loss, params, *batch)
    return optimize.clipped_sum(grads, clip, mask=mask), norms


def _rel(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    num = sum(np.sum(np.square(np.asarray(x, np.float64) - np.asarray(y, np.float64))) for x, y in zip(la, lb))
    return np.sqrt(num / sum(np.sum(np.square(np.asarray(y, np.float64))) for y in lb))


def _fallback(loss, params, *batch):
    leaves = jax.tree_util.tree_leaves(params)
    closed = jax.make_jaxpr(loss)(params, *(x[0] for x in batch))
    return _analyse(closed.jaxpr, len(leaves)).fallback


def _check(loss, params, *batch, mask=None, tol=1e-5):
    """clipped_grad against the reference at C = the median per-example norm: the clip binds for some
    examples and not for others, so both branches of min(1, C/‖g‖) are exercised."""
    clip = float(np.nanmedian(np.asarray(_per_example(loss, params, *batch)[1])))
    got = jax.jit(lambda p, *b: optimize.clipped_grad(loss, clip)(p, *b, mask=mask))(params, *batch)
    ref, norms = _reference(loss, params, *batch, clip=clip, mask=mask)
    assert isinstance(got, optimize.ClippedSum) and got.l2_norm_clip == clip
    assert jax.tree_util.tree_structure(got.grads) == jax.tree_util.tree_structure(params)
    assert _rel(got.grads, ref) <= tol
    np.testing.assert_allclose(np.asarray(got.norms), np.asarray(norms), rtol=tol)
    return got


_K = jax.random.split(jax.random.key(0), 16)


def _mlp():
    params = {
        "w1": jax.random.normal(_K[0], (12, 16)) * 0.4,
        "b1": jnp.full(16, 0.1),
        "w2": jax.random.normal(_K[1], (16, 5)) * 0.4,
        "b2": jnp.zeros(5),
    }
    x = jax.random.normal(_K[2], (24, 12))
    y = jax.random.randint(_K[3], (24,), 0, 5)

    def loss(p, x, y):
        return -jax.nn.log_softmax(jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"])[y]

    return loss, params, x, y


def _cnn():
    params = {
        "k1": jax.random.normal(_K[4], (4, 1, 3, 3)) * 0.5,
        "k2": jax.random.normal(_K[5], (6, 4, 3, 3)) * 0.3,
        "w": jax.random.normal(_K[6], (6 * 3 * 3, 4)) * 0.2,
        "c": jnp.full(6, 0.05),
    }
    x = jax.random.normal(_K[7], (10, 10, 10))
    y = jax.random.randint(_K[3], (10,), 0, 4)

    def loss(p, x, y):
        h = jnp.tanh(jax.lax.conv_general_dilated(x[None, None], p["k1"], (2, 2), "SAME"))  # 10 -> 5
        h = jax.lax.conv_general_dilated(h, p["k2"], (1, 1), "VALID") + p["c"][:, None, None]  # 5 -> 3
        return -jax.nn.log_softmax(jax.nn.relu(h).reshape(-1) @ p["w"])[y]

    return loss, params, x, y


_V, _T, _D, _H = 20, 6, 8, 2


def _block(tied=False):
    """Embedding + positional table, layer norm, 2-head self-attention, MLP; a vocabulary read-out that is
    the embedding itself (``tied``: one weight used twice, by a gather and a dot_general) or a head."""
    k = jax.random.split(jax.random.key(1), 12)
    params = {
        "emb": jax.random.normal(k[0], (_V, _D)) * 0.5,
        "pos": jax.random.normal(k[1], (_T, _D)) * 0.1,
        "ln_s": jnp.full(_D, 1.1),
        "ln_b": jnp.full(_D, 0.05),
        **{n: jax.random.normal(k[2 + i], (_D, _D)) * 0.4 for i, n in enumerate(("wq", "wk", "wv", "wo"))},
        "w1": jax.random.normal(k[6], (_D, 16)) * 0.4,
        "b1": jnp.zeros(16),
        "w2": jax.random.normal(k[7], (16, _D)) * 0.4,
    }
    if not tied:
        params["head"] = jax.random.normal(k[8], (_D, _V)) * 0.4
    tokens = jax.random.randint(k[9], (12, _T), 0, _V)
    target = jax.random.randint(k[10], (12,), 0, _V)

    def loss(p, t, y):
        x = p["emb"][t] + p["pos"]
        mu = x.mean(-1, keepdims=True)
        h = (x - mu) / jnp.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * p["ln_s"] + p["ln_b"]
        q, kk, v = ((h @ p[n]).reshape(_T, _H, -1) for n in ("wq", "wk", "wv"))
        att = jax.nn.softmax(jnp.einsum("thd,shd->hts", q, kk) / 2.0, -1)
        x = x + jnp.einsum("hts,shd->thd", att, v).reshape(_T, _D) @ p["wo"]
        x = x + jax.nn.gelu(x @ p["w1"] + p["b1"]) @ p["w2"]
        head = p["emb"].T if tied else p["head"]
        return -jax.nn.log_softmax(x.mean(0) @ head)[y]

    return loss, params, tokens, target


@pytest.mark.slow
def test_mlp_matches_the_vmap_reference_without_fallback():
    loss, params, x, y = _mlp()
    assert not _fallback(loss, params, x, y)
    _check(loss, params, x, y)


@pytest.mark.slow
def test_cnn_matches_the_vmap_reference_without_fallback():
    loss, params, x, y = _cnn()
    assert not _fallback(loss, params, x, y)
    _check(loss, params, x, y)
    # a non-finite example is left out by zeroed rows in the batched weight gradients: no branch, no loop
    fn = jax.jit(lambda p, *b: optimize.clipped_grad(loss, 1.0)(p, *b))
    hlo = fn.lower(params, x, y).compile().as_text()
    assert "conditional(" not in hlo and "while(" not in hlo
    got = fn(params, x.at[2, 4, 4].set(jnp.nan), y)
    keep = np.arange(10) != 2
    ref, _ = _reference(loss, params, x[keep], y[keep], clip=1.0)
    assert _rel(got.grads, ref) <= 1e-5 and np.isnan(np.asarray(got.norms)[2])


@pytest.mark.slow  # the tied block (test_a_weight_used_twice_...) runs the same layers by default
def test_embedding_attention_block_matches_the_vmap_reference():
    loss, params, t, y = _block()
    assert not _fallback(loss, params, t, y)
    _check(loss, params, t, y)


@pytest.mark.slow
def test_a_weight_used_twice_gets_the_norm_of_its_summed_gradient():
    loss, params, t, y = _block(tied=True)
    plan = _analyse(jax.make_jaxpr(loss)(params, t[0], y[0]).jaxpr, len(params))
    emb = sorted(params).index("emb")
    assert not plan.fallback and len(plan.uses[emb]) == 2
    _check(loss, params, t, y)


@pytest.mark.slow
def test_masked_and_nonfinite_examples_contribute_nothing():
    loss, params, x, y = _mlp()
    mask = jnp.arange(24) % 4 != 1
    got = _check(loss, params, x, y, mask=mask)
    assert got.masked
    kept = np.asarray(mask)
    ref, _ = _reference(loss, params, x[kept], y[kept], clip=got.l2_norm_clip)
    assert _rel(got.grads, ref) <= 1e-5
    bad = x.at[3, 2].set(jnp.nan).at[5, 0].set(jnp.inf)
    got = jax.jit(lambda *a: optimize.clipped_grad(loss, 1.0)(*a, mask=mask))(params, bad, y)
    keep = kept & ~np.isin(np.arange(24), [3, 5])
    ref, _ = _reference(loss, params, x[keep], y[keep], clip=1.0)
    assert _rel(got.grads, ref) <= 1e-5
    assert not np.isfinite(np.asarray(got.norms)[[3, 5]]).any()


@pytest.mark.slow
def test_an_operation_the_fast_path_does_not_know_still_gives_the_right_sum():
    """Leaves consumed inside a custom_jvp function (relu) and a scan get vmapped per-example gradients."""
    loss0, params, x, y = _mlp()

    def loss(p, x, y):
        def body(c, _):
            return jnp.tanh(c @ p["w1"][:, :12] + p["b1"][:12]), None

        c, _ = jax.lax.scan(body, x, None, length=2)
        return loss0({**p, "w1": jax.nn.relu(p["w1"])}, c, y)

    assert _fallback(loss, params, x, y) == {sorted(params).index("b1"), sorted(params).index("w1")}
    _check(loss, params, x, y)


@pytest.mark.slow
@pytest.mark.parametrize("model", [_mlp, pytest.param(functools.partial(_block, tied=True), marks=pytest.mark.slow)])
def test_float64_matches_to_round_off(model):
    with jax.enable_x64(True):
        loss, params, *batch = model()
        params = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), params)
        batch = [b.astype(jnp.float64) if jnp.issubdtype(b.dtype, jnp.floating) else b for b in batch]
        got = _check(loss, params, *batch, tol=1e-12)
        assert jax.tree_util.tree_leaves(got.grads)[0].dtype == jnp.float64


@pytest.mark.slow
def test_no_per_example_gradients_in_the_compiled_program():
    """The compiled clipped_grad holds less than a tenth of the per-example gradients' bytes."""
    k = jax.random.split(jax.random.key(2), 3)
    params = {"w1": jax.random.normal(k[0], (300, 64)) * 0.05, "w2": jax.random.normal(k[1], (64, 10)) * 0.1}
    x = jax.random.normal(k[2], (64, 300))

    def loss(p, x):
        return jnp.sum(jnp.tanh(x @ p["w1"]) @ p["w2"]) ** 2

    fn = jax.jit(lambda p, x: optimize.clipped_grad(loss, 1.0)(p, x))
    temp = fn.lower(params, x).compile().memory_analysis().temp_size_in_bytes
    per_example = 64 * (300 * 64 + 64 * 10) * 4
    assert temp < per_example / 10
    ref = jax.jit(lambda p, x: optimize.clipped_grad(loss, 1.0, method="per_example")(p, x))
    assert ref.lower(params, x).compile().memory_analysis().temp_size_in_bytes > per_example


@pytest.mark.slow
def test_private_aggregate_takes_the_clipped_sum():
    loss, params, x, y = _mlp()
    mask = jnp.arange(24) < 20
    key = jax.random.key(5)
    tx = optimize.dpsgd(0.1, 1.0, 1.3, key, expected_batch_size=20.0)
    per_example = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(params, x, y)
    ref, _ = tx.update(per_example, tx.init(params), params, mask=mask)
    got, state = tx.update(optimize.clipped_grad(loss, 0.5)(params, x, y, mask=mask), tx.init(params), params)
    got1, _ = tx.update(optimize.clipped_grad(loss, 1.0)(params, x, y, mask=mask), tx.init(params), params)
    assert int(state[0].step) == 1
    assert _rel(got1, ref) <= 1e-5  # the same noise (key, step): only the clipped sums' round-off differs
    assert _rel(got, ref) > 1e-3  # a smaller clip is accepted (and changes the sum)
    agg = optimize.private_aggregate(1.0, 1.0, key)
    summed = optimize.clipped_grad(loss, 1.0)(params, x, y)
    with pytest.raises(ValueError, match="l2_norm_clip"):
        agg.update(optimize.clipped_grad(loss, 1.5)(params, x, y), agg.init(params))
    with pytest.raises(ValueError, match="mask"):
        agg.update(summed, agg.init(params), mask=mask)
    with pytest.raises(ValueError, match="expected_batch_size"):
        agg.update(optimize.clipped_grad(loss, 1.0)(params, x, y, mask=mask), agg.init(params))
    for mech, extra in ((dpjax.Laplace, {}), (dpjax.DiscreteGaussian, {"grid_step": 1e-3})):
        other = optimize.private_aggregate(1.0, 1.0, key, mechanism=mech, **extra)
        with pytest.raises(ValueError, match="mechanism"):
            other.update(summed, other.init(params))
    upd, _ = agg.update(summed, agg.init(params))  # normalised by the physical batch (24 examples)
    assert jax.tree_util.tree_structure(upd) == jax.tree_util.tree_structure(params)


def test_clipped_grad_validation():
    loss, params, x, y = _mlp()
    with pytest.raises(ValueError, match="l2_norm_clip"):
        optimize.clipped_grad(loss, 0.0)
    with pytest.raises(ValueError, match="method"):
        optimize.clipped_grad(loss, 1.0, method="vmap")
    with pytest.raises(ValueError, match="batch"):
        optimize.clipped_grad(loss, 1.0)(params, x, y[:5])
    with pytest.raises(ValueError, match="mask"):
        optimize.clipped_grad(loss, 1.0)(params, x, y, mask=jnp.ones(5, bool))
    with pytest.raises(ValueError, match="loss_fn"):
        optimize.clipped_grad(lambda p, x, y: jnp.tanh(x @ p["w1"]), 1.0)(params, x, y)
