"""dpjax.table on a local Spark session: bitwise the table of the pyarrow run, for the same key."""

import functools
import os
import shutil
import sys

import jax
import numpy as np
import pyarrow as pa
import pytest

import dpjax
from dpjax import table


def _spark():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.skip("pyspark is not installed (pip install 'dpjax[spark]')")
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        pytest.skip("Java is not installed: a local Spark session needs Java 17")
    from pyspark.sql import SparkSession

    # the Python workers run this interpreter (its pyarrow and dpjax), not whatever python3 is on PATH,
    # and import the dpjax under test (this checkout's, first on their path), not the one installed
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    root = os.path.dirname(os.path.dirname(os.path.abspath(dpjax.__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])

    return (
        SparkSession.builder.master("local[2]")
        .appName("dpjax-table-test")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "512m")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )


@pytest.fixture(scope="module")
def spark():
    session = _spark()
    yield session
    session.stop()


def _data(seed=0, n=6000):
    """Issue 28's keys too: -0.0 beside 0.0 (one group), float unit ids (their integers), -0.0 beside 0.0
    (one unit), and a unit with a row in each of 300 groups of its own, all but one emptied by the
    bounding (no candidates: never released)."""
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 6, n).astype(float)
    g[::97] = np.nan  # a null key is a group of its own
    g[(g == 0) & (np.arange(n) % 2 == 0)] = -0.0
    units = rng.integers(0, 3000, n).astype(np.float64)
    units[(units == 0) & (np.arange(n) % 2 == 0)] = -0.0
    return pa.table(
        {
            "user_id": np.concatenate([units, np.full(300, 5000.0)]),
            "g": pa.array(np.concatenate([g, np.arange(300) + 10.0]), from_pandas=True),
            "steps": np.concatenate([rng.integers(0, 20000, n), np.zeros(300)]).astype(np.float64),
        }
    )


STATS = [
    table.count(),
    table.count_units(),
    table.sum("steps", 0, 20000),
    table.mean("steps", 0, 20000),
    table.variance("steps", 0, 20000),
    table.quantile("steps", 0.5, 0, 20000),
]
#: the unit, contribution bounds and budget of the Spark-against-pyarrow releases below
BOUNDED = dict(privacy_unit="user_id", max_groups_per_unit=2, max_rows_per_group=3, epsilon=1.0, delta=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(
    "groups", [pytest.param(None, marks=pytest.mark.slow), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, None]]
)
def test_spark_equals_pyarrow_bitwise(spark, groups):
    t = _data()
    kw = dict(
        by="g",
        statistics=STATS,
        **BOUNDED,
        groups=groups,
        noise="gaussian",
    )  # (the exact tier: the test below)
    local = table.release(jax.random.key(5), t, **kw)
    df = spark.createDataFrame(t.to_pandas()).repartition(3)
    remote = table.release(jax.random.key(5), df, **kw)
    assert remote.table.equals(local.table), (remote.table.to_pandas(), local.table.to_pandas())
    assert (remote.epsilon, remote.delta) == (local.epsilon, local.delta)
    assert local.table.num_rows >= 3
    assert set(local.table.column("g").to_pylist()) <= {0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, None}
    assert len(set(local.table.column("g").to_pylist())) == local.table.num_rows


@pytest.mark.slow
def test_spark_equals_pyarrow_bitwise_on_the_exact_tier(spark):
    """Integer-only noise addressed by (key, component, group key): the same bits from Spark."""
    t = _data()
    kw = dict(
        by="g",
        statistics=[table.count(), table.sum("steps", 0, 20000), table.quantile("steps", 0.5, 0, 20000)],
        **BOUNDED,
        noise="laplace",
        numerics="exact",
    )
    local = table.release(jax.random.key(5), t, **kw)
    remote = table.release(jax.random.key(5), spark.createDataFrame(t.to_pandas()).repartition(3), **kw)
    assert local.numerics == remote.numerics == "exact"
    assert remote.table.equals(local.table), (remote.table.to_pandas(), local.table.to_pandas())
    assert local.table.num_rows >= 3


@pytest.mark.slow
def test_spark_row_level_and_bad_input(spark):
    t = _data(seed=1)
    df = spark.createDataFrame(t.to_pandas())
    kw = dict(by="g", statistics=[table.count(), table.sum("steps", 0, 20000)], epsilon=1.0, delta=1e-6)
    assert table.release(jax.random.key(1), df, **kw).table.equals(table.release(jax.random.key(1), t, **kw).table)
    with pytest.raises(ValueError, match="unknown column"):
        table.release(jax.random.key(1), df, by="nope", statistics=[table.count()], epsilon=1.0, delta=1e-6)
    bad = spark.createDataFrame([(1, 1.0, None), (2, 2.0, 3.0)], "user_id long, g double, steps double")
    with pytest.raises(ValueError, match="column 'steps' has 1 null"):
        table.release(jax.random.key(1), bad, by="g", statistics=[table.sum("steps", 0, 1)], epsilon=1.0, delta=1e-6)
    _workers_that_cannot_run_the_release_say_how_to_fix_it(spark, df)
    nan = spark.createDataFrame([(1, float("nan"), 1.0), (2, 2.0, 3.0)], "user_id long, g double, steps double")
    with pytest.raises(ValueError, match="by: group column 'g' has 1 NaN key"):
        table.release(jax.random.key(1), nan, by="g", statistics=[table.count()], epsilon=1.0, delta=1e-6)
    with pytest.raises(ValueError, match="groups: the public groups of column 'g' are string"):
        table.release(
            jax.random.key(1), df, by="g", statistics=[table.count()], epsilon=1.0, delta=1e-6, groups=["0", "1"]
        )


def _workers_that_cannot_run_the_release_say_how_to_fix_it(spark, df):
    """Issue 28: a worker without dpjax (here: the bucket code from a module the workers cannot import), or
    running another dpjax than the driver, is reported as such, with the fix (PYSPARK_PYTHON / install)."""
    import types

    import importlib

    table_release = importlib.import_module("dpjax.table.release")  # the module (the package's name is the function)
    table_spark = importlib.import_module("dpjax.table.spark")

    req = table_release.validate("g", [table.count()], None, None, None, 1.0, 1e-6, None, "gaussian")
    key = (np.uint32(1), np.uint32(2))
    elsewhere = types.ModuleType("dpjax_nowhere")  # importable on the driver only
    exec("def local(req, t, pub, key, run=None):\n    return run(req, t, pub, key)", elsewhere.__dict__)
    sys.modules["dpjax_nowhere"] = elsewhere
    try:
        local = functools.partial(elsewhere.local, run=table_release._local_aggregates)
        with pytest.raises(
            table_spark.WorkerError,
            match="cannot import 'dpjax_nowhere': install pyarrow and this dpjax on every worker .* PYSPARK_PYTHON",
        ):
            table_spark.spark_aggregates(req, df, None, key, local)
    finally:
        del sys.modules["dpjax_nowhere"]
    fingerprint = table_spark._fingerprint
    table_spark._fingerprint = lambda: "another"
    try:
        with pytest.raises(table_spark.WorkerError, match="run another dpjax than the driver"):
            table_spark.spark_aggregates(req, df, None, key, table_release._local_aggregates)
    finally:
        table_spark._fingerprint = fingerprint


@pytest.mark.slow
def test_spark_buckets_one_per_core_more_for_a_large_input(spark):
    """The rows cross to Python once per bucket of units: one bucket per core for an input that fits them
    (not spark.sql.shuffle.partitions tasks), more as Spark's size estimate grows, never above that setting."""
    import importlib

    table_spark = importlib.import_module("dpjax.table.spark")
    cores = spark.sparkContext.defaultParallelism
    small = spark.range(1000)
    huge = spark.range(10**6).crossJoin(spark.range(10**6))  # an estimate of 16 TB: bounded by the setting
    assert table_spark._buckets(small) == min(cores, 4)
    assert table_spark._buckets(huge) == 4
    spark.conf.set("spark.sql.shuffle.partitions", "1000")
    try:
        assert table_spark._buckets(small) == cores
        assert cores < table_spark._buckets(huge) == 1000
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "4")


@pytest.mark.slow
def test_spark_parquet_scan_read_by_the_workers_equals_pyarrow_bitwise(spark, tmp_path):
    """A plain scan of local Parquet files is read by the bucket workers themselves (no row crosses from the JVM):
    bitwise the pyarrow table (-0.0 and 0.0 units in one bucket, null and float keys, two files), public groups
    and private; any other plan (a filter, a cache, a string unit) takes the JVM's rows, bitwise the same; bad
    rows are refused by name; an empty file is refused."""
    import importlib

    import pyarrow.parquet as pq

    table_release = importlib.import_module("dpjax.table.release")
    table_spark = importlib.import_module("dpjax.table.spark")
    t = _data()
    folder = tmp_path / "t"
    folder.mkdir()
    pq.write_table(t.slice(0, 4000), folder / "a.parquet")
    pq.write_table(t.slice(4000), folder / "b.parquet")
    df = spark.read.parquet(str(folder))
    kw = dict(
        by="g",
        statistics=STATS,
        **BOUNDED,
        noise="gaussian",
    )
    req = table_release.validate("g", STATS, "user_id", 2, 3, 1.0, 1e-6, None, "gaussian")
    schema = pa.schema([("user_id", pa.float64()), ("g", pa.float64()), ("steps", pa.float64())])
    files = table_spark._parquet_files(df, req, schema)
    assert files is not None and files.rows == t.num_rows and len(files.paths) == 2
    for groups in ([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, None], None):
        local = table.release(jax.random.key(5), t, groups=groups, **kw)
        remote = table.release(jax.random.key(5), df, groups=groups, **kw)
        assert remote.table.equals(local.table), (remote.table.to_pandas(), local.table.to_pandas())
        assert local.table.num_rows >= 3
    filtered = df.where("steps >= 0")  # every row: the same release, through the JVM's rows
    assert table_spark._parquet_files(filtered, req, schema) is None
    assert table.release(jax.random.key(5), filtered, **kw).table.equals(local.table)  # private groups
    cached = spark.read.parquet(str(folder)).cache()
    assert table_spark._parquet_files(cached, req, schema) is None
    cached.unpersist()
    pq.write_table(t.set_column(0, "user_id", t.column("user_id").cast(pa.string())), tmp_path / "s.parquet")
    text = spark.read.parquet(str(tmp_path / "s.parquet"))
    assert table_spark._parquet_files(text, req, schema.set(0, pa.field("user_id", pa.string()))) is None

    bad = pa.table({"user_id": [1, 2], "g": [1.0, 2.0], "steps": pa.array([None, 3.0], pa.float64())})
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match="column 'steps' has 1 null"):
        table.release(
            jax.random.key(1),
            spark.read.parquet(str(tmp_path / "bad.parquet")),
            by="g",
            statistics=[table.sum("steps", 0, 1)],
            privacy_unit="user_id",
            max_groups_per_unit=1,
            max_rows_per_group=1,
            epsilon=1.0,
            delta=1e-6,
        )
    pq.write_table(bad.slice(0, 0), tmp_path / "empty.parquet")
    with pytest.raises(ValueError, match="the table is empty"):
        table.release(
            jax.random.key(1),
            spark.read.parquet(str(tmp_path / "empty.parquet")),
            by="g",
            statistics=[table.count()],
            privacy_unit="user_id",
            max_groups_per_unit=1,
            max_rows_per_group=1,
            epsilon=1.0,
            delta=1e-6,
        )


def test_parquet_workers_split_the_rows_by_unit(tmp_path):
    """The workers' own read of a Parquet scan (no Spark needed): every row in exactly one bucket, all the rows
    of a unit in the same one (-0.0 with 0.0, as Spark's canonical ids; a null id with 0, refused there), the
    columns cast to Spark's types in its order, the buckets about even."""
    import importlib

    import pyarrow.parquet as pq

    table_spark = importlib.import_module("dpjax.table.spark")
    t = _data()
    pq.write_table(t.slice(0, 4000), tmp_path / "a.parquet", row_group_size=1000)
    pq.write_table(t.slice(4000), tmp_path / "b.parquet")
    files = table_spark._Files((str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")), t.num_rows)
    schema = pa.schema([("steps", pa.float64()), ("g", pa.float64()), ("user_id", pa.float64())])
    parts = [table_spark._read_units(files, schema, "user_id", b, 3) for b in range(3)]
    assert all(p.schema.equals(schema) for p in parts)
    assert sum(p.num_rows for p in parts) == t.num_rows
    assert all(p.num_rows > t.num_rows / 5 for p in parts)
    units = [set(p.column("user_id").to_pylist()) for p in parts]
    assert not (units[0] & units[1]) and not (units[0] & units[2]) and not (units[1] & units[2])
    whole = pa.concat_tables([p.select(t.column_names) for p in parts])
    key = [("user_id", "ascending"), ("g", "ascending"), ("steps", "ascending")]
    assert whole.sort_by(key).equals(t.sort_by(key))
    ids = pa.chunked_array([pa.array([-0.0, 0.0, None, 5.0, 5.0])])
    b = table_spark._unit_buckets(ids, 7)
    assert b[0] == b[1] == b[2] and b[3] == b[4]
    b = table_spark._unit_buckets(pa.chunked_array([pa.array([0, None, 5, 5], pa.int32())]), 7)
    assert b[0] == b[1] and b[2] == b[3]
