"""DP-SGD: step overhead, calibration time, odometer cost — dpjax next to its anchors, one run.

Usage:  python benchmarks/dpsgd.py                 (all cases, each in its own subprocess)
        python benchmarks/dpsgd.py --case NAME     (one case; prints one JSON line)

Cases (every case in a fresh subprocess, so "cold" includes tracing and XLA compilation):

* ``step``: one training step of a 784-256-10 MLP (203 530 parameters) on a batch of 256,
  jitted, best of 20 after warm-up: a non-private step (mean gradient, SGD), the same model
  through ``optax.contrib.dpsgd`` (per-example gradients, clipping, noise, SGD) and through
  ``optimize.dpsgd`` (the same plus record-addressed noise, a mask and the expected-batch
  normaliser). Ratios: ours / non-private and ours / optax.contrib. The inputs are random
  tensors: only the time is measured here (examples/dpsgd_digits.py trains on real data).
* ``calibration``: σ for ε = 1, δ = 1e-5, q = 0.01, T = 1000 (the anchors report's inverse
  problem): ``accounting.calibrate_noise_multiplier`` cold (first call of the process),
  warm (the same call again) and warm on a neighbouring target (ε = 1.05), against
  ``dp_accounting.calibrate_dp_mechanism`` with its ``PLDAccountant`` (no compile step: its
  every call costs the same). Ratio: dp_accounting time / ours.
* ``calibration_new_target``: the event σ for ε = 2.5, δ = 1e-5, q = 0.004, T = 15000 — a first
  ``calibrate_noise_multiplier`` (with its XLA compilations counted) and warm calls for new targets
  (2.4, 2.6; the slower one reported), against ``dp_accounting.calibrate_dp_mechanism`` on the same
  event. Ratios: dp_accounting time / ours, cold and warm.
* ``odometer``: 1000 spends of a Poisson-subsampled Gaussian (σ = 1, q = 0.01) in
  ``accounting.Accountant`` with a budget check at every spend: total seconds, median per
  spend, peak RSS growth; against dp_accounting's ``PLDAccountant`` (``compose`` then
  ``get_epsilon`` per spend), timed on 20 spends.

The 1-minute load average is printed before and after: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import resource
import subprocess
import sys
import time

# benchmarks/accounting.py would shadow the accounting package: keep this folder off sys.path
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import numpy as np  # noqa: E402


def _rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _best(fn, reps):
    best = math.inf
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def case_step():
    import jax
    import jax.numpy as jnp
    import optax
    import optax.contrib

    import optimize

    k = jax.random.split(jax.random.key(0), 4)
    params = {
        "w1": jax.random.normal(k[0], (784, 256)) * 0.05,
        "b1": jnp.zeros(256),
        "w2": jax.random.normal(k[1], (256, 10)) * 0.05,
        "b2": jnp.zeros(10),
    }
    x = jax.random.normal(k[2], (256, 784))
    y = jax.random.randint(k[3], (256,), 0, 10)

    def loss(p, xb, yb):
        h = jnp.tanh(xb @ p["w1"] + p["b1"])
        logits = h @ p["w2"] + p["b2"]
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), yb[..., None], -1)[..., 0]

    per_example = jax.vmap(jax.grad(lambda p, xb, yb: loss(p, xb, yb)), in_axes=(None, 0, 0))
    mask = jnp.ones(256, bool)

    sgd = optax.sgd(0.1)

    @jax.jit
    def plain(p, s):
        g = jax.grad(lambda q: jnp.mean(loss(q, x, y)))(p)
        u, s = sgd.update(g, s, p)
        return optax.apply_updates(p, u), s

    contrib = optax.contrib.dpsgd(0.1, 1.0, 1.1, seed=0)

    @jax.jit
    def theirs(p, s):
        u, s = contrib.update(per_example(p, x, y), s, p)
        return optax.apply_updates(p, u), s

    ours_tx = optimize.dpsgd(0.1, 1.0, 1.1, jax.random.key(1), expected_batch_size=256.0)

    @jax.jit
    def ours(p, s):
        u, s = ours_tx.update(per_example(p, x, y), s, p, mask=mask)
        return optax.apply_updates(p, u), s

    out = {}
    for name, fn, tx in (("nonprivate", plain, sgd), ("optax_contrib", theirs, contrib), ("dpjax", ours, ours_tx)):
        state = tx.init(params)
        t = time.perf_counter()
        jax.block_until_ready(fn(params, state))
        first = time.perf_counter() - t
        out[name] = {
            "cold_s": first,
            "warm_ms": 1e3 * _best(lambda f=fn, s=state: jax.block_until_ready(f(params, s)), 20),
        }
    out["ratio_vs_nonprivate"] = out["dpjax"]["warm_ms"] / out["nonprivate"]["warm_ms"]
    out["ratio_vs_contrib"] = out["dpjax"]["warm_ms"] / out["optax_contrib"]["warm_ms"]
    out["contrib_vs_nonprivate"] = out["optax_contrib"]["warm_ms"] / out["nonprivate"]["warm_ms"]
    return out


def _clipping_models():
    """name -> (per-example loss, params, batch arrays): the MLP of ``step`` (batch 256); a CNN on 28×28 (two
    3×3 stride-2 convolutions with 16 and 32 channels, a 1568-128 dense layer, a 10-way head; 206 912
    parameters; batch 256); a pre-norm transformer block (sequence 64, width 128, 4 heads, MLP 512, mean-pooled
    10-way head; 199 040 parameters; batch 32)."""
    import jax
    import jax.numpy as jnp

    k = iter(jax.random.split(jax.random.key(0), 32))

    def normal(*shape, scale=0.05):
        return jax.random.normal(next(k), shape) * scale

    def xent(logits, y):
        return -jax.nn.log_softmax(logits)[y]

    def mlp(p, x, y):
        return xent(jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"], y)

    def cnn(p, x, y):
        h = x[None, None]
        for name in ("k1", "k2"):  # 3x3, stride 2, SAME: 28 -> 14 -> 7
            h = jnp.tanh(jax.lax.conv_general_dilated(h, p[name], (2, 2), "SAME") + p["c" + name[1]][:, None, None])
        return xent(jnp.tanh(h.reshape(-1) @ p["w"] + p["b"]) @ p["head"], y)

    seq, width, heads = 64, 128, 4

    def layer_norm(x, scale, bias):
        mu = jnp.mean(x, -1, keepdims=True)
        return (x - mu) / jnp.sqrt(jnp.mean(jnp.square(x - mu), -1, keepdims=True) + 1e-5) * scale + bias

    def block(p, x, y):
        h = layer_norm(x, p["ln1_s"], p["ln1_b"])
        q, kk, v = ((h @ p[n]).reshape(seq, heads, -1) for n in ("wq", "wk", "wv"))
        att = jax.nn.softmax(jnp.einsum("thd,shd->hts", q, kk) / jnp.sqrt(width / heads), axis=-1)
        x = x + jnp.einsum("hts,shd->thd", att, v).reshape(seq, width) @ p["wo"]
        h = layer_norm(x, p["ln2_s"], p["ln2_b"])
        x = x + jax.nn.gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
        return xent(jnp.mean(x, 0) @ p["head"], y)

    mlp_p = {"w1": normal(784, 256), "b1": jnp.zeros(256), "w2": normal(256, 10), "b2": jnp.zeros(10)}
    cnn_p = {
        "k1": normal(16, 1, 3, 3, scale=0.3),
        "c1": jnp.zeros(16),
        "k2": normal(32, 16, 3, 3, scale=0.1),
        "c2": jnp.zeros(32),
        "w": normal(32 * 7 * 7, 128),
        "b": jnp.zeros(128),
        "head": normal(128, 10),
    }
    blk_p = {n: normal(width, width, scale=width**-0.5) for n in ("wq", "wk", "wv", "wo")}
    blk_p.update(
        ln1_s=jnp.ones(width),
        ln1_b=jnp.zeros(width),
        ln2_s=jnp.ones(width),
        ln2_b=jnp.zeros(width),
        w1=normal(width, 4 * width, scale=width**-0.5),
        b1=jnp.zeros(4 * width),
        w2=normal(4 * width, width, scale=(4 * width) ** -0.5),
        b2=jnp.zeros(width),
        head=normal(width, 10),
    )
    labels = jax.random.randint(next(k), (256,), 0, 10)
    return {
        "mlp": (mlp, mlp_p, (normal(256, 784, scale=1.0), labels)),
        "cnn": (cnn, cnn_p, (normal(256, 28, 28, scale=1.0), labels)),
        "transformer": (block, blk_p, (normal(32, seq, width, scale=1.0), labels[:32])),
    }


def case_clipping():
    """One training step (jitted, SGD, best of 15 interleaved runs after warm-up) of three models: the
    non-private optax step, optimize.dpsgd on vmapped per-example gradients, optimize.dpsgd on
    optimize.clipped_grad's clipped sum, and optax.contrib.dpsgd; peak memory is XLA's for the step
    (arguments + outputs + temporaries of the compiled program)."""
    import jax
    import jax.numpy as jnp
    import optax
    import optax.contrib

    import optimize

    out = {}
    for model, (loss, params, batch) in _clipping_models().items():
        size = batch[0].shape[0]
        per_example = jax.vmap(jax.grad(loss), in_axes=(None,) + (0,) * len(batch))
        sgd = optax.sgd(0.1)
        ours = optimize.dpsgd(0.1, 1.0, 1.1, jax.random.key(1), expected_batch_size=float(size))
        contrib = optax.contrib.dpsgd(0.1, 1.0, 1.1, seed=0)
        clipped = optimize.clipped_grad(loss, 1.0)

        def step(grads_of, tx):
            def run(p, s, *b):
                u, s = tx.update(grads_of(p, *b), s, p)
                return optax.apply_updates(p, u), s

            return jax.jit(run), tx

        def mean_grad(p, *b):
            return jax.grad(lambda q: jnp.mean(jax.vmap(loss, in_axes=(None,) + (0,) * len(b))(q, *b)))(p)

        variants = {
            "nonprivate": step(mean_grad, sgd),
            "dpsgd_vmap": step(per_example, ours),
            "dpsgd_clipped_grad": step(clipped, ours),
            "optax_contrib": step(per_example, contrib),
        }
        res, runs = {}, {}
        for name, (fn, tx) in variants.items():
            state = tx.init(params)
            t = time.perf_counter()
            compiled = fn.lower(params, state, *batch).compile()
            jax.block_until_ready(compiled(params, state, *batch))
            mem = compiled.memory_analysis()
            peak = mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
            res[name] = {
                "cold_s": time.perf_counter() - t,
                "peak_mb": (peak - mem.alias_size_in_bytes) / 2**20,
                "warm_ms": math.inf,
            }
            runs[name] = (compiled, state)
        for _ in range(15):
            for name, (compiled, state) in runs.items():
                t = time.perf_counter()
                jax.block_until_ready(compiled(params, state, *batch))
                res[name]["warm_ms"] = min(res[name]["warm_ms"], 1e3 * (time.perf_counter() - t))
        base = res["nonprivate"]
        for name in ("dpsgd_vmap", "dpsgd_clipped_grad", "optax_contrib"):
            res[name]["time_vs_nonprivate"] = res[name]["warm_ms"] / base["warm_ms"]
            res[name]["memory_vs_nonprivate"] = res[name]["peak_mb"] / base["peak_mb"]
        res["vmap_vs_clipped_grad"] = res["dpsgd_vmap"]["warm_ms"] / res["dpsgd_clipped_grad"]["warm_ms"]
        res["batch"] = size
        out[model] = res
    return out


def case_calibration():
    logging.getLogger("absl").setLevel(logging.ERROR)
    import accounting

    t = time.perf_counter()
    z = float(accounting.calibrate_noise_multiplier(1.0, 1e-5, 0.01, 1000))
    cold = time.perf_counter() - t
    warm = _best(lambda: accounting.calibrate_noise_multiplier(1.0, 1e-5, 0.01, 1000), 3)
    t = time.perf_counter()
    z2 = float(accounting.calibrate_noise_multiplier(1.05, 1e-5, 0.01, 1000))
    warm_other = time.perf_counter() - t
    eps = float(accounting.dpsgd_epsilon(z, 0.01, 1000, 1e-5))

    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    def event(s):
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(s)), 1000
        )

    t = time.perf_counter()
    ref = dp_accounting.calibrate_dp_mechanism(pld_privacy_accountant.PLDAccountant, event, 1.0, 1e-5)
    t_ref = time.perf_counter() - t
    return {
        "sigma": z,
        "epsilon_at_sigma": eps,
        "sigma_eps_1.05": z2,
        "dp_accounting_sigma": ref,
        "cold_s": cold,
        "warm_s": warm,
        "warm_other_target_s": warm_other,
        "dp_accounting_s": t_ref,
        "ratio_cold": t_ref / cold,
        "ratio_warm": t_ref / warm,
        "ratio_warm_other": t_ref / warm_other,
    }


def case_calibration_new_target():
    """The issue-30 event, σ for ε = 2.5, δ = 1e-5, q = 0.004, T = 15000: ``calibrate_noise_multiplier``
    on a first call (tracing and compiling included) and, warm, for new targets (2.4, 2.6: the programs
    of the first search serve them), against ``dp_accounting.calibrate_dp_mechanism`` with its
    ``PLDAccountant`` on the same event (no compile step)."""
    logging.getLogger("absl").setLevel(logging.ERROR)
    import jax

    import accounting

    compiles = []

    def listener(event, secs, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(secs)

    jax.monitoring.register_event_duration_secs_listener(listener)
    t = time.perf_counter()
    z = float(accounting.calibrate_noise_multiplier(2.5, 1e-5, 0.004, 15000))
    cold, cold_compiles = time.perf_counter() - t, len(compiles)
    warm = []
    for target in (2.4, 2.6):
        t = time.perf_counter()
        accounting.calibrate_noise_multiplier(target, 1e-5, 0.004, 15000)
        warm.append(time.perf_counter() - t)
    warm_compiles = len(compiles) - cold_compiles

    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    def event(s):
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.004, dp_accounting.GaussianDpEvent(s)), 15000
        )

    t = time.perf_counter()
    ref = dp_accounting.calibrate_dp_mechanism(pld_privacy_accountant.PLDAccountant, event, 2.5, 1e-5)
    t_ref = time.perf_counter() - t
    return {
        "sigma": z,
        "dp_accounting_sigma": ref,
        "cold_s": cold,
        "cold_compiles": cold_compiles,
        "warm_new_target_s": max(warm),
        "warm_compiles": warm_compiles,
        "dp_accounting_s": t_ref,
        "ratio_cold": t_ref / cold,
        "ratio_warm_new_target": t_ref / max(warm),
    }


def case_odometer():
    logging.getLogger("absl").setLevel(logging.ERROR)
    import accounting
    import dpjax

    base = _rss_mb()
    acc = accounting.Accountant(epsilon_budget=10.0, delta=1e-5)
    m = dpjax.Gaussian(sigma=1.0)
    per = []
    t0 = time.perf_counter()
    for _ in range(1000):
        t = time.perf_counter()
        eps = acc.record(m, sampling_prob=0.01)
        per.append(time.perf_counter() - t)
    total = time.perf_counter() - t0
    peak = _rss_mb() - base

    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    ref = pld_privacy_accountant.PLDAccountant()
    ev = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0))
    t0 = time.perf_counter()
    for _ in range(20):
        ref.compose(ev, 1)
        ref_eps20 = ref.get_epsilon(1e-5)
    t_ref = (time.perf_counter() - t0) / 20
    return {
        "epsilon_1000": eps,
        "total_s": total,
        "median_ms": 1e3 * float(np.median(per)),
        "peak_rss_growth_mb": peak,
        "rss_after_import_mb": base,
        "dp_accounting_per_spend_s": t_ref,
        "dp_accounting_eps_20": ref_eps20,
        "ratio_per_spend_median": t_ref / float(np.median(per)),
    }


CASES = {
    "step": case_step,
    "clipping": case_clipping,
    "calibration": case_calibration,
    "calibration_new_target": case_calibration_new_target,
    "odometer": case_odometer,
}


def _print_nested(res, indent):
    for k, v in res.items():
        if isinstance(v, dict):
            print(f"{indent}{k}:")
            _print_nested(v, indent + "   ")
        else:
            print(f"{indent}{k}: {v:.6g}" if isinstance(v, float) else f"{indent}{k}: {v}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=sorted(CASES))
    args = ap.parse_args()
    if args.case:
        print(json.dumps(CASES[args.case]()))
        return
    print(f"load average (1 min) before: {os.getloadavg()[0]:.2f}")
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    for name in CASES:
        out = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--case", name], capture_output=True, text=True, env=env
        )
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
        if out.returncode or not line:
            print(name, "FAILED", out.stderr[-2000:])
            continue
        res = json.loads(line[-1])
        print(f"== {name}")
        _print_nested(res, "   ")
    print(f"load average (1 min) after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
