"""Accuracy of table releases: ``dpjax.table.release`` against PipelineDP (local backend) and OpenDP (Polars)
on the same heavy-tailed table, at the same (epsilon, delta) and contribution bounds.

The table (issue 28; generated from ``--seed-data``, cached as Parquet under ``out/tables/``, git-ignored):
``--rows`` rows (10^6), ``rows / 10`` users whose row budgets are Pareto (shape 1.1, at most 10^4 rows), 300
groups — 150 small (95 to 1000 users, log-spaced), 128 medium (1000 to 10^4) and 22 large (10^4 to 65 000);
a group's users are drawn with probability proportional to their row budget (heavy users sit in many groups),
each membership holds at least one of the user's rows and the rest of the budget falls on the user's groups
at random; the value ``v`` is lognormal (median 20, σ 1) times a per-user lognormal factor (σ 0.5), and 0.5 %
of the rows are outliers (times 50). A smaller ``--rows`` scales the users and the group sizes with it.

The release, the same in every tool: per group count, sum, mean, variance and median of ``v`` clamped to
[0, 200]; privacy unit ``user``; at most K = 4 groups per user and M = 3 rows per group; (epsilon, delta) = (1,
1e-6); Laplace and Gaussian noise; the groups public (all 300 given) or selected privately by each tool's own
partition selection. Each tool releases all the statistics it offers in ONE call under that one budget:
PipelineDP COUNT, SUM, MEAN, VARIANCE, PERCENTILE(50) (its variance combiner gives count, sum, mean and
variance from one budget share; the percentile has its own; selection its own); OpenDP ``len``, ``sum``,
``mean`` and ``median`` (it has no variance; its (epsilon, delta) context uses Laplace noise, so it runs in the
Laplace rows only; median candidates: the 1025 points of [0, 200] that dpjax's depth-10 quantile considers);
dpjax all five. OpenDP's groups per user are bounded with ``keep="first"`` (0.16.0's ``keep="sample"`` fails on
one key column, see benchmarks/tables.py).

For each tool, noise, group mode and seed the script prints per size class the number of groups released and
the median, over the released groups, of the relative error ``|released − true| / |true|`` of each statistic,
``true`` the statistic of the bounded, clamped table (the quantity every tool estimates; the bounding's bias,
the same for every tool with uniform bounding, is left out: :func:`truth`); the figures are the medians over
the seeds. ``--private-common``: also the error of each tool on the groups that every tool
released (the "no worse error on the groups both release" check).

    python benchmarks/table_utility.py                       # 10^6 rows, 3 seeds, all tools
    python benchmarks/table_utility.py --rows 1e5 --seeds 2  # a quick run
    python benchmarks/table_utility.py --tools dpjax         # dpjax alone

PipelineDP and OpenDP are benchmark-only installs (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]  # benchmarks/accounting.py

import numpy as np  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "out"
CACHE = OUT / "tables"

LOW, HIGH = 0.0, 200.0
K, M = 4, 3
EPSILON, DELTA = 1.0, 1e-6
DEPTH = 10
CLASSES = (("small", 0, 1000), ("medium", 1000, 10_000), ("large", 10_000, 10**9))
STATS = ("count", "sum", "mean", "variance", "median")
GROUPS = 300
#: group popularity ∝ 1/rank^ZIPF; groups per user 1 + Poisson(GROUPS_PER_USER − 1); rows per user Pareto
ZIPF, GROUPS_PER_USER, PARETO, MAX_ROWS_PER_USER = 1.14, 2.9, 1.1, 10_000


# ---------------------------------------------------------------- data


def generate(rows: int, seed: int):
    """The heavy-tailed table (module docstring) as a pyarrow Table ``user``, ``group``, ``v``."""
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    users = max(rows // 10, 100)
    popularity = 1.0 / np.arange(1, GROUPS + 1) ** ZIPF
    popularity /= popularity.sum()
    n_groups = np.minimum(1 + rng.poisson(GROUPS_PER_USER - 1, users), GROUPS)
    # each user's groups: drawn by popularity without replacement (Gumbel top-k, one sort per user block)
    member_user, member_group = [], []
    for lo in range(0, users, 4096):
        hi = min(lo + 4096, users)
        keys = np.log(popularity)[None, :] - np.log(-np.log(rng.random((hi - lo, GROUPS))))
        ranked = np.argsort(-keys, axis=1)
        take = np.arange(GROUPS)[None, :] < n_groups[lo:hi, None]
        member_user.append(np.broadcast_to(np.arange(lo, hi)[:, None], take.shape)[take])
        member_group.append(ranked[take])
    mu, mg = np.concatenate(member_user), np.concatenate(member_group)
    budget = np.minimum(rng.pareto(PARETO, users) + 1, MAX_ROWS_PER_USER)
    extra = rng.multinomial(max(rows - len(mu), 0), budget / budget.sum())
    extra = np.minimum(extra, MAX_ROWS_PER_USER - n_groups)
    start = np.concatenate([[0], np.cumsum(n_groups)])  # mu is sorted by user
    extra_user = np.repeat(np.arange(users), extra)
    pick = start[extra_user] + (rng.random(len(extra_user)) * n_groups[extra_user]).astype(np.int64)
    user = np.concatenate([mu, extra_user])
    group = np.concatenate([mg, mg[pick]])
    factor = rng.lognormal(0.0, 0.5, users)
    v = rng.lognormal(np.log(20.0), 1.0, len(user)) * factor[user]
    v[rng.random(len(user)) < 0.005] *= 50
    perm = rng.permutation(len(user))
    return pa.table({"user": pa.array(user[perm]), "group": pa.array(group[perm]), "v": pa.array(v[perm])})


def table_path(rows: int, seed: int) -> Path:
    path = CACHE / f"utility_rows{rows}_seed{seed}.parquet"
    if not path.exists():
        import pyarrow.parquet as pq

        CACHE.mkdir(parents=True, exist_ok=True)
        pq.write_table(generate(rows, seed), path.with_suffix(".part"))
        path.with_suffix(".part").rename(path)
    return path


def truth(t):
    """Per group: users (of the raw table), and the statistics every tool estimates — those of the table after
    contribution bounding (K groups per user, M rows per group, uniformly at random) with values clamped:
    count, sum, mean and variance from the expectation over the bounding of the count, the sum and the sum of
    squares (mean = E[sum]/E[count], variance = E[squares]/E[count] − mean²); the median of one bounding drawn
    by dpjax's keyed bounding under a key of its own (independent of every release)."""
    import jax
    import pandas as pd

    from dpjax.table.bounding import bound
    from dpjax.table.data import group_index, unit_hashes
    from dpjax.table.keys import KeyWords

    prep = group_index(t, ["group"])
    code, words = unit_hashes(t, "user")
    v = np.clip(t.column("v").to_numpy(), LOW, HIGH)
    kept, _ = bound(
        KeyWords(jax.random.key(10**6)).bounding(), code, words, prep.group, prep.group_words, v[:, None], K, M
    )
    keys = np.asarray(prep.keys.column("group").to_pylist())
    df = pd.DataFrame({"group": keys[prep.group[kept]], "v": v[kept]})
    gb = df.groupby("group")
    raw = pd.DataFrame(
        {"user": t.column("user").to_numpy(), "group": t.column("group").to_numpy(), "v": v, "v2": v * v}
    )
    # count, sum and sum of squares (and from them the mean and the variance): their expectation under uniform
    # bounding — a pair (user, group) of r rows kept with probability min(1, K/groups of the user), then min(r, M)
    # of its r rows — free of the sampling noise of one bounding draw
    pairs = raw.groupby(["user", "group"]).agg(size=("v", "size"), sum=("v", "sum"), squares=("v2", "sum"))
    pairs = pairs.reset_index()
    per_user = pairs.groupby("user").size()
    keep = np.minimum(1.0, K / per_user.loc[pairs["user"]].to_numpy())
    pairs["count"] = keep * np.minimum(pairs["size"], M)
    pairs["sum"] = pairs["count"] * pairs["sum"] / pairs["size"]
    pairs["squares"] = pairs["count"] * pairs["squares"] / pairs["size"]
    expected = pairs.groupby("group")[["count", "sum", "squares"]].sum()
    mean = expected["sum"] / expected["count"]
    return pd.DataFrame(
        {
            "users": raw.groupby("group")["user"].nunique(),
            "count": expected["count"],
            "sum": expected["sum"],
            "mean": mean,
            "variance": expected["squares"] / expected["count"] - mean**2,
            "median": gb["v"].median(),
        }
    )


# ---------------------------------------------------------------- the tools: {group: {stat: value}}


def run_dpjax(t, noise, public, seed):
    import jax

    from dpjax import table

    stats = [
        table.count(),
        table.sum("v", LOW, HIGH),
        table.mean("v", LOW, HIGH),
        table.variance("v", LOW, HIGH),
        table.quantile("v", 0.5, LOW, HIGH, depth=DEPTH),
    ]
    rel = table.release(
        jax.random.key(seed),
        t,
        by="group",
        statistics=stats,
        privacy_unit="user",
        max_groups_per_unit=K,
        max_rows_per_group=M,
        epsilon=EPSILON,
        delta=DELTA,
        groups=groups_of(t) if public else None,
        noise=noise,
    )
    r = rel.table.to_pydict()
    names = {"count": "count", "sum": "sum_v", "mean": "mean_v", "variance": "variance_v", "median": "quantile_0.5_v"}
    return {g: {s: float(r[c][i]) for s, c in names.items()} for i, g in enumerate(r["group"])}


def groups_of(t):
    import pyarrow.compute as pc

    return sorted(pc.unique(t.column("group")).to_pylist())


def run_pipelinedp(t, noise, public, seed):
    import pipeline_dp

    rows = list(zip(t.column("user").to_pylist(), t.column("group").to_pylist(), t.column("v").to_pylist()))
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPSILON, total_delta=DELTA)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE if noise == "laplace" else pipeline_dp.NoiseKind.GAUSSIAN,
        metrics=[
            pipeline_dp.Metrics.COUNT,
            pipeline_dp.Metrics.SUM,
            pipeline_dp.Metrics.MEAN,
            pipeline_dp.Metrics.VARIANCE,
            pipeline_dp.Metrics.PERCENTILE(50),
        ],
        max_partitions_contributed=K,
        max_contributions_per_partition=M,
        min_value=LOW,
        max_value=HIGH,
    )
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1], value_extractor=lambda r: r[2]
    )
    result = engine.aggregate(rows, params, extractors, public_partitions=groups_of(t) if public else None)
    accountant.compute_budgets()
    out = {}
    for g, m in result:
        out[g] = {"count": m.count, "sum": m.sum, "mean": m.mean, "variance": m.variance, "median": m.percentile_50}
    return out


def run_opendp(t, noise, public, seed):
    import opendp.prelude as dp
    import polars as pl

    if noise != "laplace":
        return None
    dp.enable_features("contrib")
    df = pl.from_arrow(t)
    candidates = list(np.linspace(LOW, HIGH, (1 << DEPTH) + 1))
    context = dp.Context.compositor(
        data=df.lazy(),
        privacy_unit=dp.unit_of(contributions=1, identifier="user"),
        privacy_loss=dp.loss_of(epsilon=EPSILON, delta=DELTA),
        split_evenly_over=1,
        # the public bounds OpenDP asks for: the table's length, and per group key the number of groups (the
        # domain's 300; its mean and quantile refuse to run without it)
        margins=[
            dp.polars.Margin(max_length=df.height),
            dp.polars.Margin(by=["group"], max_groups=len(groups_of(t)), max_length=df.height),
        ],
    )
    v = pl.col("v").clip(LOW, HIGH)
    query = (
        context.query()
        .truncate_per_group(M, by=["group"])
        .truncate_num_groups(K, by=["group"], keep="first")
        .group_by("group")
        .agg(
            dp.len(),
            v.dp.sum((LOW, HIGH)).alias("sum"),
            v.dp.mean((LOW, HIGH)).alias("mean"),
            v.dp.quantile(0.5, candidates).alias("median"),
        )
    )
    if public:
        query = query.with_keys(pl.LazyFrame({"group": pl.Series(groups_of(t), dtype=df.schema["group"])}))
    r = query.release().collect().to_dict(as_series=False)
    return {
        g: {"count": r["len"][i], "sum": r["sum"][i], "mean": r["mean"][i], "variance": None, "median": r["median"][i]}
        for i, g in enumerate(r["group"])
    }


TOOLS = {"dpjax": run_dpjax, "pipelinedp": run_pipelinedp, "opendp": run_opendp}


# ---------------------------------------------------------------- scoring


def size_class(users, scale=1.0):
    for name, lo, hi in CLASSES:
        lo, hi = lo * scale, hi * scale
        if lo <= users < hi:
            return name
    raise AssertionError(users)


def score(out, true, only=None):
    """``{class: {"released": n, stat: median relative error}}`` of one run (``only``: those groups)."""
    res = {}
    for name, _, _ in CLASSES:
        gs = [g for g in true.index if true.loc[g, "class"] == name and g in out and (only is None or g in only)]
        row = {"released": len(gs), "of": int((true["class"] == name).sum())}
        for s in STATS:
            errs = [
                abs(out[g][s] - true.loc[g, s]) / abs(true.loc[g, s])
                for g in gs
                if out[g][s] is not None and np.isfinite(out[g][s])
            ]
            row[s] = float(np.median(errs)) if errs else None
        res[name] = row
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=float, default=1e6)
    ap.add_argument("--seeds", type=int, default=3, help="noise seeds per configuration")
    ap.add_argument("--seed-data", type=int, default=0)
    ap.add_argument("--tools", default="dpjax,pipelinedp,opendp")
    ap.add_argument("--noises", default="laplace,gaussian")
    ap.add_argument("--modes", default="public,private")
    args = ap.parse_args(argv)
    import pyarrow.parquet as pq

    rows = int(args.rows)
    t = pq.read_table(table_path(rows, args.seed_data))
    true = truth(t)
    scale = (t.column("user").to_numpy().max() + 1) / 100_000  # the size classes scale with the users
    true["class"] = [size_class(u, scale) for u in true["users"]]
    counts = {name: int((true["class"] == name).sum()) for name, _, _ in CLASSES}
    print(
        f"table: {t.num_rows} rows, {t.column('user').to_numpy().max() + 1} users, {len(true)} groups "
        f"({', '.join(f'{n} {c}' for c, n in counts.items())}; users per group {true['users'].min()}"
        f"–{true['users'].max()}); eps={EPSILON}, delta={DELTA}, K={K}, M={M}, clamp [{LOW:g}, {HIGH:g}]; "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    results = {}
    for mode in args.modes.split(","):
        for noise in args.noises.split(","):
            runs = {}
            for tool in args.tools.split(","):
                outs = []
                for seed in range(args.seeds):
                    start = time.perf_counter()
                    out = TOOLS[tool](t, noise, mode == "public", seed)
                    if out is None:
                        break
                    outs.append(out)
                    print(
                        f"  {mode:7s} {noise:8s} {tool:10s} seed {seed}: {len(out)} groups, "
                        f"{time.perf_counter() - start:.1f} s",
                        flush=True,
                    )
                if outs:
                    runs[tool] = outs
            common = [set.intersection(*(set(runs[tool][i]) for tool in runs)) for i in range(args.seeds)]
            for tool, outs in runs.items():
                scores = [score(o, true) for o in outs]
                scores_common = [score(o, true, common[i]) for i, o in enumerate(outs)]
                results[(mode, noise, tool)] = (_median_over(scores), _median_over(scores_common))
            _print({k: v for k, v in results.items() if k[:2] == (mode, noise)})
    print("\nall:")
    _print(results)
    return results


def _median_over(scores):
    out = {}
    for name in scores[0]:
        out[name] = {}
        for k in scores[0][name]:
            vals = [s[name][k] for s in scores if s[name][k] is not None]
            out[name][k] = float(np.median(vals)) if vals else None
    return out


def _print(results):
    print()
    head = f"{'groups':8s} {'noise':8s} {'tool':10s} " + " ".join(f"{c:>22s}" for c, _, _ in CLASSES)
    print(
        "released groups and median relative error per size class (small / medium / large); "
        "each cell: released of all, then count sum mean variance median"
    )
    print(head)
    for (mode, noise, tool), (all_groups, common) in results.items():
        for label, res in (("", all_groups), ("∩", common)):
            if label and mode == "public":
                continue
            cells = []
            for c, _, _ in CLASSES:
                r = res[c]
                # below .01 a fourth decimal: the large groups' cells sit at .003–.004, where rounding decides
                errs = " ".join(
                    "  -  " if r[s] is None else f"{r[s]:.3f}" if r[s] >= 0.01 else f"{r[s]:.4f}" for s in STATS
                )
                cells.append(f"{r['released']:.0f}/{r['of']:.0f} {errs}")
            print(f"{mode + label:8s} {noise:8s} {tool:10s} " + " | ".join(cells))


if __name__ == "__main__":
    main()
