"""Table releases: ``dpjax.table.release`` against PipelineDP and OpenDP on the same table.

The table (issue 18): ``--rows`` rows (10^6), one user in ``--rows / 10`` (10^5 users), 1000 groups,
a numeric column ``steps`` in [0, 25000) clipped to [0, 20000]; generated once from a fixed seed and
cached as Parquet under ``out/tables/`` (git-ignored). The release, the same in every tool: per group,
count + sum of ``steps``; privacy unit = ``user_id``; each user keeps at most 3 groups and 2 rows per
group; (epsilon, delta) = (1, 1e-6); Laplace noise (the noise OpenDP's context uses for an (epsilon,
delta) budget; PipelineDP and dpjax are given the same); the groups selected privately by each tool's
own partition selection (``--public-groups``: the 1000 groups given as public keys to all three).

    python benchmarks/tables.py                    # 10^6 rows: PipelineDP, OpenDP, dpjax in one run
    python benchmarks/tables.py --rows 1e5         # smaller
    python benchmarks/tables.py --parquet 1e8      # dpjax on a 10^8-row Parquet path: time, peak RSS
    python benchmarks/tables.py --csv 2e9          # `dpjax release` on a 2 GB CSV, from the file and stdin
    python benchmarks/tables.py --spark            # 10^7 rows: dpjax on a Parquet path and on Spark DataFrames
                                                   # of it (the Spark / Parquet ratio), then 10^6 rows on
                                                   # Spark: PipelineDP beside dpjax
    python benchmarks/tables.py --stages           # dpjax alone: the time of each stage of a warm release

Each tool runs in a fresh Python process (this script with ``--worker``) so that none inherits another's
imports, threads or memory; the clock starts once the table is in memory in the tool's own input form
(PipelineDP's local backend: a list of row tuples; OpenDP: a Polars DataFrame; dpjax: a pyarrow Table)
and stops when the released table is materialised; the building of that input is not timed (it favours
PipelineDP most: its list of tuples is the slowest to build). dpjax's first call (JIT compilation) is
reported apart from its warm calls (best of ``--repeats``, each with a fresh key). Peak RSS is the
worker process's ``ru_maxrss`` (with Spark, the Python driver's only: the JVM and Python workers are
other processes).

PipelineDP, OpenDP, polars and pyspark are benchmark-only installs (``pip install -e '.[bench]'``), not
dpjax dependencies. OpenDP's Polars plugin only runs with the exact polars version it was built
against (0.16.0: polars==1.36.1); when the installed polars is another, the OpenDP worker is given
that version from ``out/opendp-polars`` (made with ``pip install --no-deps --target out/opendp-polars
polars==1.36.1 polars-runtime-32==1.36.1``) and is skipped, saying so, when that folder is absent.

The scale modes write their file once under ``/tmp`` (a fresh folder, deleted at the end, never
inside the repository): ``--parquet N`` an N-row Parquet file (the table above, 10^7-row chunks),
timed through ``dpjax.table.release`` on its path (the input streamed in record batches);
``--csv BYTES`` a CSV of about that size with the columns of a real export (string user ids, a
date, a string group among 1000, three value columns, a free-text column), released by the
command line — ``dpjax release --input FILE`` and ``--input -`` with the file on standard input —
each in a fresh process whose peak RSS (``wait4``) and wall time are printed.

The load average is printed with every figure: on a shared machine, ratios are only comparable within
one run.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]  # benchmarks/accounting.py

import numpy as np  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "out"
CACHE = OUT / "tables"
OPENDP_POLARS = OUT / "opendp-polars"

GROUPS = 1000
LOW, HIGH = 0, 20000
MAX_GROUPS_PER_UNIT, MAX_ROWS_PER_GROUP = 3, 2
EPSILON, DELTA = 1.0, 1e-6
CHUNK = 10_000_000
SEED = 0


# ---------------------------------------------------------------- data


def _chunk(rng, n, users):
    import pyarrow as pa

    return pa.table(
        {
            "user_id": pa.array(rng.integers(0, users, n, dtype=np.int64)),
            "group": pa.array(rng.integers(0, GROUPS, n, dtype=np.int64)),
            "steps": pa.array(rng.integers(0, 25000, n, dtype=np.int64)),
        }
    )


def _write_parquet(path, rows):
    import pyarrow.parquet as pq

    rng = np.random.default_rng(SEED)
    users = max(rows // 10, 1)
    writer = None
    for start in range(0, rows, CHUNK):
        chunk = _chunk(rng, min(CHUNK, rows - start), users)
        if writer is None:
            writer = pq.ParquetWriter(path, chunk.schema)
        writer.write_table(chunk, row_group_size=1 << 20)
    writer.close()


CSV_ROWS_PER_CHUNK = 2_000_000


def _csv_chunk(rng, n, users):
    """Rows of a realistic export: about 75 bytes of text each."""
    import pyarrow as pa
    import pyarrow.compute as pc

    groups = pa.array([f"region-{g:04d}" for g in range(GROUPS)])
    devices = pa.array(["android phone", "ios phone", "wrist band v2", "smart watch (beta)"])
    user = rng.integers(0, users, n)
    return pa.table(
        {
            "user_id": pc.binary_join_element_wise("user-", pc.cast(pa.array(user), pa.string()), ""),
            "date": pa.array((np.datetime64("2026-01-01") + rng.integers(0, 365, n)).astype("datetime64[D]")),
            "group": groups.take(pa.array(rng.integers(0, GROUPS, n))),
            "steps": pa.array(rng.integers(0, 25000, n)),
            "active_minutes": pa.array(rng.integers(0, 300, n)),
            "heart_rate": pa.array(rng.normal(72, 9, n).round(1)),
            "device": devices.take(pa.array(rng.integers(0, len(devices), n))),
        }
    )


def _write_csv(path, size):
    """A CSV of about ``size`` bytes, written chunk by chunk; returns its number of rows."""
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(SEED)
    rows = 0
    with open(path, "wb") as f:
        writer = None
        while f.tell() < size:
            chunk = _csv_chunk(rng, CSV_ROWS_PER_CHUNK, users=max(int(size / 75 / 10), 1))
            if writer is None:
                writer = pacsv.CSVWriter(f, chunk.schema)
            writer.write_table(chunk)
            rows += chunk.num_rows
            f.flush()
        writer.close()
    return rows


def _child(cmd, stdin=None):
    """Run ``cmd``; (exit status, wall seconds, peak RSS MiB, last line of stderr) of that process alone."""
    import tempfile

    with tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = (err.read().decode(errors="replace").strip().splitlines() or [""])[-1]
    return p.returncode, wall, usage.ru_maxrss / 1024, tail


def csv_scale(size):
    """``dpjax release`` on a CSV of about ``size`` bytes, from the file and from standard input."""
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="dpjax-tables-", dir="/tmp")
    try:
        path = os.path.join(folder, "export.csv")
        t = time.perf_counter()
        rows = _write_csv(path, size)
        print(
            f"  wrote {path}: {os.path.getsize(path) / 1e9:.2f} GB, {rows:.3e} rows in {time.perf_counter() - t:.0f} s"
        )
        root = Path(__file__).resolve().parent.parent
        cmd = [
            sys.executable,
            "-m",
            "dpjax.cli",
            "release",
            "--seed",
            "0",
            "--group-by",
            "group",
            "--privacy-unit",
            "user_id",
            "--max-groups-per-unit",
            str(MAX_GROUPS_PER_UNIT),
            "--max-rows-per-group",
            str(MAX_ROWS_PER_GROUP),
            "--statistic",
            "count,sum",
            "--value-column",
            "steps",
            "--window",
            str(LOW),
            str(HIGH),
            "--epsilon",
            str(EPSILON),
            "--delta",
            str(DELTA),
            "--output",
            os.path.join(folder, "released.csv"),
        ]
        env_path = os.pathsep.join([p for p in (os.environ.get("PYTHONPATH"), str(root)) if p])
        os.environ["PYTHONPATH"] = env_path
        out = {}
        for label, extra, stdin in (("from the file", ["--input", path], None), ("from stdin", ["--input", "-"], path)):
            load = os.getloadavg()[0]
            if stdin is None:
                code, wall, rss, tail = _child(cmd + extra, subprocess.DEVNULL)
            else:
                with open(stdin, "rb") as handle:
                    code, wall, rss, tail = _child(cmd + extra, handle)
            status = "ok" if code == 0 else f"exit {code}: {tail}"
            print(
                f"  dpjax release {label:<14} {wall:8.1f} s  peak RSS {rss:7.0f} MiB  "
                f"({rows / wall:.3e} rows/s)  load {load:.2f}  {status}"
            )
            out[label] = {"seconds": wall, "peak_rss_mib": rss, "rows": rows, "load": load, "exit": code}
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def parquet_scale(rows, args):
    """``dpjax.table.release`` on the path of an ``rows``-row Parquet file written under /tmp (deleted after)."""
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="dpjax-tables-", dir="/tmp")
    try:
        path = Path(folder) / f"rows{rows}.parquet"
        t = time.perf_counter()
        _write_parquet(path, rows)
        print(
            f"Parquet, {rows:.0e} rows, {path.stat().st_size / 2**20:.0f} MiB written in "
            f"{time.perf_counter() - t:.0f} s; load {os.getloadavg()[0]:.2f}"
        )
        return run_tool("dpjax-parquet", path, args, "dpjax.table (Parquet path)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def table_path(rows):
    """The cached Parquet file of ``rows`` rows (``rows // 10`` users), written in chunks of 10^7 rows
    (never the whole table in memory) on the first call."""
    path = CACHE / f"rows{rows}_seed{SEED}.parquet"
    if path.exists():
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    t = time.perf_counter()
    _write_parquet(tmp, rows)
    tmp.rename(path)
    print(f"  wrote {path} ({path.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t:.1f} s")
    return path


# ---------------------------------------------------------------- the tools (run inside --worker)


def _pipelinedp_local(path, public, repeats):
    import pipeline_dp
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    rows = list(zip(*(t.column(c).to_pylist() for c in ("user_id", "group", "steps"))))
    del t

    def run():
        accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPSILON, total_delta=DELTA)
        engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
        params = pipeline_dp.AggregateParams(
            noise_kind=pipeline_dp.NoiseKind.LAPLACE,
            metrics=[pipeline_dp.Metrics.COUNT, pipeline_dp.Metrics.SUM],
            max_partitions_contributed=MAX_GROUPS_PER_UNIT,
            max_contributions_per_partition=MAX_ROWS_PER_GROUP,
            min_value=LOW,
            max_value=HIGH,
        )
        extractors = pipeline_dp.DataExtractors(
            privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1], value_extractor=lambda r: r[2]
        )
        result = engine.aggregate(rows, params, extractors, public_partitions=list(range(GROUPS)) if public else None)
        accountant.compute_budgets()
        return list(result)  # the local backend is lazy: the release happens here

    return _timed(run, repeats, len(rows), lambda out: {"groups": len(out)})


def _opendp_polars(path, public, repeats):
    import opendp.prelude as dp
    import polars as pl
    import pyarrow.parquet as pq

    dp.enable_features("contrib")
    df = pl.from_arrow(pq.read_table(path))
    n = df.height

    def run():
        context = dp.Context.compositor(
            data=df.lazy(),
            privacy_unit=dp.unit_of(contributions=1, identifier="user_id"),
            privacy_loss=dp.loss_of(epsilon=EPSILON, delta=DELTA),
            split_evenly_over=1,
            # OpenDP needs a public bound on the table's length to bound an integer sum's overflow
            margins=[dp.polars.Margin(max_length=n)],
        )
        # keep="first" for the groups: 0.16.0's keep="sample" fails on a single key column ("multiple fields
        # with name 'group'": it builds struct(hash(struct(by)), struct(by)), two fields of one name)
        query = (
            context.query()
            .truncate_per_group(MAX_ROWS_PER_GROUP, by=["group"])
            .truncate_num_groups(MAX_GROUPS_PER_UNIT, by=["group"], keep="first")
            .group_by("group")
            .agg(dp.len(), pl.col("steps").dp.sum((LOW, HIGH)))
        )
        if public:
            query = query.with_keys(pl.LazyFrame({"group": pl.Series(range(GROUPS), dtype=pl.Int64)}))
        return query.release().collect()

    return _timed(run, repeats, n, lambda out: {"groups": out.height})


def _release(key, data, public):
    """The benchmark's release through ``dpjax.table.release`` (the query in the module docstring)."""
    from dpjax import table

    return table.release(
        key,
        data,
        by="group",
        statistics=[table.count(), table.sum("steps", low=LOW, high=HIGH)],
        privacy_unit="user_id",
        max_groups_per_unit=MAX_GROUPS_PER_UNIT,
        max_rows_per_group=MAX_ROWS_PER_GROUP,
        epsilon=EPSILON,
        delta=DELTA,
        groups=list(range(GROUPS)) if public else None,
        noise="laplace",
    )


def _dpjax_release(data, public, n, repeats, after_first_call=None):
    import jax

    keys = iter(jax.random.split(jax.random.key(SEED), repeats + 1))

    def run():  # the released pyarrow Table is materialised when release returns
        return _release(next(keys), data, public)

    t = time.perf_counter()
    run()
    cold = time.perf_counter() - t
    if after_first_call is not None:
        after_first_call()
    res = _timed(
        run, repeats, n, lambda rel: {"groups": rel.table.num_rows, "epsilon": rel.epsilon, "delta": rel.delta}
    )
    res.update(cold_s=cold, cold_rows_per_s=n / cold)
    return res


#: the stages of a warm release timed by ``--stages``: (label, module, function) — each function
#: wrapped in a timer where ``release`` looks it up
_STAGES = [
    ("read: columns, codes, hashes", "dpjax.table.release", "_data.rows"),
    ("bound: keyed contribution bounding", "dpjax.table.release", "bound"),
    ("aggregate: integer sums per group", "dpjax.table.release", "aggregate"),
    ("calibrate (remembered)", "dpjax.table.release", "calibrate"),
    ("selection threshold (remembered)", "dpjax.table.release", "threshold"),
    ("selection delta", "dpjax.table.release", "selection_delta"),
    ("noise draws", "dpjax.table.release", "draw"),
    ("finish: selection, noise, output table", "dpjax.table.release", "finish"),
]


def _dpjax_stages(path, public, repeats):
    """Where a warm release's time goes: the mean over ``repeats`` warm calls of each stage of
    :data:`_STAGES` (a stage's time includes the stages it calls: ``finish`` holds the noise)."""
    import functools
    import importlib

    import pyarrow.parquet as pq

    spent = {}
    for label, module, name in _STAGES:
        owner = importlib.import_module(module)
        *parents, attr = name.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        fn = getattr(owner, attr)

        def timed(*a, _fn=fn, _label=label, **k):
            t = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                spent[_label] = spent.get(_label, 0.0) + time.perf_counter() - t

        setattr(owner, attr, functools.wraps(fn)(timed))
    t = pq.read_table(path)
    res = _dpjax_release(t, public, t.num_rows, repeats, after_first_call=spent.clear)  # warm calls only
    res["stages_ms"] = {label: 1000 * spent.get(label, 0.0) / repeats for label, _, _ in _STAGES}
    return res


def _dpjax_arrow(path, public, repeats):
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    return _dpjax_release(t, public, t.num_rows, repeats)


def _dpjax_path(path, public, repeats):
    import pyarrow.parquet as pq

    n = pq.ParquetFile(path).metadata.num_rows
    return _dpjax_release(str(path), public, n, repeats)


def _spark_session():
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers run this interpreter and its packages
    return (
        SparkSession.builder.master("local[*]")
        .appName("dpjax-tables-bench")
        .config("spark.driver.memory", "6g")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )


def _spark_frame(path):
    """``(DataFrame, rows, seconds to start Spark)``: the JVM's start-up is reported, not timed in the release."""
    t = time.perf_counter()
    spark = _spark_session()
    start = time.perf_counter() - t
    sdf = spark.read.parquet(str(path)).cache()
    return sdf, sdf.count(), start  # the clock starts with the rows cached in Spark's memory


#: the forms of the rows ``--spark`` times dpjax on, alternating in one process
_SPARK_FORMS = {
    "parquet": "dpjax.table (Parquet path, warm)",
    "spark": "dpjax.table (Spark, Parquet scan)",
    "spark-cached": "dpjax.table (Spark, cached rows)",
}


def _dpjax_spark(path, public, repeats):
    """dpjax on the same rows as the Parquet path, as a Spark DataFrame scanning that file (its workers read
    it), and as that DataFrame cached in Spark's memory (its rows pass from the JVM), alternating in this one
    process: each form's first call, then ``repeats`` rounds of one warm call of each (the cache made and
    dropped around its call, untimed: cached, the plan of the scan would read the cache too)."""
    import jax
    import pyarrow.parquet as pq

    t = time.perf_counter()
    spark = _spark_session()
    start = time.perf_counter() - t
    n = pq.ParquetFile(path).metadata.num_rows
    keys = iter(jax.random.split(jax.random.key(SEED), 3 * (repeats + 1)))

    def run(data):
        return _release(next(keys), data, public)

    def data(form):
        if form == "parquet":
            return str(path)
        sdf = spark.read.parquet(str(path))
        if form == "spark-cached":
            sdf = sdf.cache()
            sdf.count()
        return sdf

    times = {form: [] for form in _SPARK_FORMS}
    groups = {}
    for i in range(repeats + 1):
        for form in _SPARK_FORMS:
            rows = data(form)
            load = os.getloadavg()[0]
            t = time.perf_counter()
            groups[form] = run(rows).table.num_rows
            if i:  # the first round: each form's first call (compilation, the workers' imports)
                times[form].append((time.perf_counter() - t, load))
            if form == "spark-cached":
                rows.unpersist(blocking=True)
    forms = {}
    for form in _SPARK_FORMS:
        best, load = min(times[form])
        forms[form] = {"seconds": best, "load": load, "rows_per_s": n / best, "groups": groups[form]}
    return {**forms["spark"], "rows": n, "forms": forms, "spark_start_s": start}


def _pipelinedp_spark(path, public, repeats):
    import pipeline_dp
    from pipeline_dp import dataframes

    sdf, n, start = _spark_frame(path)

    def run():
        query = (
            dataframes.QueryBuilder(sdf, "user_id")
            .groupby(
                "group",
                max_groups_contributed=MAX_GROUPS_PER_UNIT,
                max_contributions_per_group=MAX_ROWS_PER_GROUP,
                public_keys=list(range(GROUPS)) if public else None,
            )
            .count()
            .sum("steps", min_value=LOW, max_value=HIGH)
            .build_query()
        )
        return query.run_query(dataframes.Budget(EPSILON, DELTA), noise_kind=pipeline_dp.NoiseKind.LAPLACE).collect()

    return {**_timed(run, repeats, n, lambda out: {"groups": len(out)}), "spark_start_s": start}


WORKERS = {
    "pipelinedp": _pipelinedp_local,
    "opendp": _opendp_polars,
    "dpjax": _dpjax_arrow,
    "dpjax-parquet": _dpjax_path,
    "dpjax-spark": _dpjax_spark,
    "pipelinedp-spark": _pipelinedp_spark,
    "dpjax-stages": _dpjax_stages,
}


def _timed(run, repeats, n, describe):
    times = []
    out = None
    for _ in range(repeats):
        load = os.getloadavg()[0]
        t = time.perf_counter()
        out = run()
        times.append((time.perf_counter() - t, load))
    best, load = min(times)
    return {"rows": n, "seconds": best, "rows_per_s": n / best, "load": load, **describe(out)}


def worker(tool, path, public, repeats):
    res = WORKERS[tool](path, public, repeats)
    res["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(res), flush=True)


# ---------------------------------------------------------------- driver


def _opendp_env():
    """The environment for the OpenDP worker: the polars version OpenDP pins, from out/opendp-polars when the
    installed one differs; None when it differs and that folder is absent."""
    pins = [r for r in importlib.metadata.requires("opendp") or () if r.startswith("polars==")]
    want = pins[0].split(";")[0].split("==")[1].strip() if pins else None
    env = dict(os.environ)
    if want is None or importlib.metadata.version("polars") == want:
        return env
    if not (OPENDP_POLARS / "polars").is_dir():
        print(
            f"  OpenDP skipped: it needs polars=={want} (installed: {importlib.metadata.version('polars')}); "
            f"pip install --no-deps --target {OPENDP_POLARS} polars=={want} polars-runtime-32=={want}"
        )
        return None
    env["PYTHONPATH"] = os.pathsep.join([str(OPENDP_POLARS), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def run_tool(tool, path, args, label, env=None):
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ) if env is None else env
    env["PYTHONPATH"] = os.pathsep.join([p for p in (env.get("PYTHONPATH"), str(root)) if p])
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        tool,
        "--path",
        str(path),
        "--repeats",
        str(args.repeats if tool.startswith("dpjax") else args.peer_repeats),
    ]
    if args.public_groups:
        cmd.append("--public-groups")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [line for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
        print(f"  {label}: failed ({tail[0]})")
        return None
    res = json.loads(lines[-1][len("RESULT ") :])
    extra = ""
    if "stages_ms" in res:
        for stage, ms in res["stages_ms"].items():
            print(f"    {stage:<42}{ms:9.1f} ms")
        print(f"    {'whole warm call (best)':<42}{1000 * res['seconds']:9.1f} ms  load {res['load']:.2f}")
        return res
    if "forms" in res:
        for form, r in res["forms"].items():
            print(
                f"  {_SPARK_FORMS[form]:<34}{r['rows_per_s']:>12.3e} rows/s  {r['seconds']:8.2f} s  "
                f"groups {r['groups']:>5}  load {r['load']:.2f}"
            )
        parquet = res["forms"]["parquet"]["seconds"]
        print(
            f"  Spark / Parquet path: {res['forms']['spark']['seconds'] / parquet:.2f}x (Parquet scan), "
            f"{res['forms']['spark-cached']['seconds'] / parquet:.2f}x (cached rows); peak RSS (driver) "
            f"{res['peak_rss_mib']:.0f} MiB; Spark session start (not timed) {res['spark_start_s']:.1f} s"
        )
        return res
    if "cold_s" in res:
        extra = (
            f"; first call (JIT) {res['cold_s']:.2f} s = {res['cold_rows_per_s']:.3e} rows/s; "
            f"released eps={res['epsilon']:.4g} delta={res['delta']:.3g}"
        )
    if "spark_start_s" in res:
        extra += f"; Spark session start (not timed above) {res['spark_start_s']:.1f} s"
    print(
        f"  {label:<34}{res['rows_per_s']:>12.3e} rows/s  {res['seconds']:8.2f} s  groups {res['groups']:>5}  "
        f"peak RSS {res['peak_rss_mib']:7.0f} MiB  load {res['load']:.2f}{extra}"
    )
    return res


def machine():
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = []
    for pkg in ("jax", "pyarrow", "pipeline-dp", "python-dp", "opendp", "polars", "pyspark"):
        try:
            versions.append(f"{pkg} {importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{pkg} absent")
    return f"{os.cpu_count()} cores, {model}; python {platform.python_version()}; " + ", ".join(versions)


def _add_cold(rates):
    if rates.get("dpjax"):
        rates["dpjax (first call)"] = {"rows_per_s": rates["dpjax"]["cold_rows_per_s"]}


def _ratios(rates, pairs):
    for num, den in pairs:
        if rates.get(num) and rates.get(den):
            print(f"  {num} / {den}: {rates[num]['rows_per_s'] / rates[den]['rows_per_s']:.1f}x")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=float, default=None, help="rows of the table (default 10^6; 10^7 with --spark)")
    p.add_argument("--repeats", type=int, default=3, help="dpjax's warm calls, best kept")
    p.add_argument("--peer-repeats", type=int, default=1, help="PipelineDP's and OpenDP's calls, best kept")
    p.add_argument("--public-groups", action="store_true", help="the 1000 groups as public keys in every tool")
    p.add_argument(
        "--parquet",
        type=float,
        default=0,
        metavar="N",
        help="instead: dpjax.table.release on the path of an N-row Parquet file (time, peak RSS)",
    )
    p.add_argument(
        "--csv",
        type=float,
        default=0,
        metavar="BYTES",
        help="instead: `dpjax release` on a CSV of about BYTES (from the file and from stdin): time, peak RSS",
    )
    p.add_argument(
        "--stages",
        action="store_true",
        help="instead: dpjax alone, the mean time of each stage of a warm release (--repeats calls)",
    )
    p.add_argument(
        "--spark",
        action="store_true",
        help="instead: 10^7 rows (or --rows if given) as a local-Spark DataFrame, dpjax and PipelineDP",
    )
    p.add_argument(
        "--peer-rows",
        type=float,
        default=None,
        help="with --spark: PipelineDP's rows (default the smaller of --rows and 10^6), dpjax timed beside it",
    )
    p.add_argument("--no-pipelinedp", action="store_true", help="with --spark: dpjax alone")
    p.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.path, args.public_groups, args.repeats)

    print(f"machine: {machine()}")
    print(
        f"release: count + sum(steps in [{LOW}, {HIGH}]) by group; unit user_id, <= {MAX_GROUPS_PER_UNIT} groups "
        f"and <= {MAX_ROWS_PER_GROUP} rows per group; eps={EPSILON}, delta={DELTA}; Laplace noise; groups "
        + ("public (all 1000)" if args.public_groups else "selected privately by each tool")
    )
    rates = {}
    if args.parquet:
        rates["dpjax"] = parquet_scale(int(args.parquet), args)
    elif args.csv:
        print(f"CSV of about {args.csv / 1e9:.2f} GB through the command line; load {os.getloadavg()[0]:.2f}")
        rates["cli"] = csv_scale(int(args.csv))
    elif args.stages:
        rows = int(args.rows or 1e6)
        print(f"dpjax stages, {rows:.0e} rows in memory; load {os.getloadavg()[0]:.2f}")
        rates["dpjax"] = run_tool("dpjax-stages", table_path(rows), args, "dpjax.table (pyarrow, warm), per stage:")
    elif args.spark:
        rows = int(args.rows or 1e7)
        path = table_path(rows)
        print(f"local Spark, {rows:.0e} rows; load {os.getloadavg()[0]:.2f}")
        print("  dpjax on the rows of a Parquet file: its path, and Spark DataFrames of it (alternating):")
        rates["dpjax"] = run_tool("dpjax-spark", path, args, "dpjax.table (Spark DataFrame)")
        peer_rows = int(args.peer_rows or min(rows, 10**6))
        if not args.no_pipelinedp:
            peer_path = table_path(peer_rows)
            print(f"local Spark, {peer_rows:.0e} rows, PipelineDP beside dpjax; load {os.getloadavg()[0]:.2f}")
            if peer_rows != rows:
                rates["dpjax"] = run_tool("dpjax-spark", peer_path, args, "dpjax.table (Spark DataFrame)")
            rates["PipelineDP"] = run_tool("pipelinedp-spark", peer_path, args, "PipelineDP (Spark, dataframes API)")
            if rates.get("dpjax"):
                rates["dpjax, cached rows"] = rates["dpjax"]["forms"]["spark-cached"]
            _ratios(rates, [("dpjax", "PipelineDP"), ("dpjax, cached rows", "PipelineDP")])
    else:
        rows = int(args.rows or 1e6)
        path = table_path(rows)
        print(f"in memory, {rows:.0e} rows, {rows // 10:.0e} users, {GROUPS} groups; load {os.getloadavg()[0]:.2f}")
        rates["PipelineDP"] = run_tool("pipelinedp", path, args, "PipelineDP (local backend)")
        env = _opendp_env()
        rates["OpenDP"] = run_tool("opendp", path, args, "OpenDP (Polars context)", env) if env is not None else None
        rates["dpjax"] = run_tool("dpjax", path, args, "dpjax.table (pyarrow, warm)")
        _add_cold(rates)
        _ratios(
            rates,
            [
                ("dpjax", "PipelineDP"),
                ("dpjax", "OpenDP"),
                ("dpjax (first call)", "PipelineDP"),
                ("dpjax (first call)", "OpenDP"),
            ],
        )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return rates


if __name__ == "__main__":
    main()
