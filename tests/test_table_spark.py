"""dpjax.table on a local Spark session: bitwise the table of the pyarrow run, for the same key."""

import os
import shutil
import sys

import jax
import numpy as np
import pyarrow as pa
import pytest

from dpjax import table


def _spark():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.skip("pyspark is not installed (pip install 'dpjax[spark]')")
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        pytest.skip("Java is not installed: a local Spark session needs Java 17")
    from pyspark.sql import SparkSession

    # the Python workers run this interpreter (its pyarrow and dpjax), not whatever python3 is on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    return (SparkSession.builder.master("local[2]").appName("dpjax-table-test")
            .config("spark.sql.shuffle.partitions", "4").config("spark.driver.memory", "512m").config("spark.ui.enabled", "false")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true").getOrCreate())


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
    return pa.table({"user_id": np.concatenate([units, np.full(300, 5000.0)]),
                     "g": pa.array(np.concatenate([g, np.arange(300) + 10.0]), from_pandas=True),
                     "steps": np.concatenate([rng.integers(0, 20000, n), np.zeros(300)]).astype(np.float64)})


STATS = [table.count(), table.count_units(), table.sum("steps", 0, 20000), table.mean("steps", 0, 20000),
         table.variance("steps", 0, 20000), table.quantile("steps", 0.5, 0, 20000)]


@pytest.mark.parametrize("groups", [None, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, None]])
def test_spark_equals_pyarrow_bitwise(spark, groups):
    t = _data()
    kw = dict(by="g", statistics=STATS, privacy_unit="user_id", max_groups_per_unit=2, max_rows_per_group=3,
              epsilon=1.0, delta=1e-6, groups=groups)
    local = table.release(jax.random.key(5), t, **kw)
    df = spark.createDataFrame(t.to_pandas()).repartition(3)
    remote = table.release(jax.random.key(5), df, **kw)
    assert remote.table.equals(local.table), (remote.table.to_pandas(), local.table.to_pandas())
    assert (remote.epsilon, remote.delta) == (local.epsilon, local.delta)
    assert local.table.num_rows >= 3
    assert set(local.table.column("g").to_pylist()) <= {0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, None}
    assert len(set(local.table.column("g").to_pylist())) == local.table.num_rows


def test_spark_equals_pyarrow_bitwise_on_the_exact_tier(spark):
    """Integer-only noise addressed by (key, component, group key): the same bits from Spark."""
    t = _data()
    kw = dict(by="g", statistics=[table.count(), table.sum("steps", 0, 20000), table.quantile("steps", 0.5, 0, 20000)],
              privacy_unit="user_id", max_groups_per_unit=2, max_rows_per_group=3, epsilon=1.0, delta=1e-6,
              noise="laplace", numerics="exact")
    local = table.release(jax.random.key(5), t, **kw)
    remote = table.release(jax.random.key(5), spark.createDataFrame(t.to_pandas()).repartition(3), **kw)
    assert local.numerics == remote.numerics == "exact"
    assert remote.table.equals(local.table), (remote.table.to_pandas(), local.table.to_pandas())
    assert local.table.num_rows >= 3


def test_spark_row_level_and_bad_input(spark):
    t = _data(seed=1)
    df = spark.createDataFrame(t.to_pandas())
    kw = dict(by="g", statistics=[table.count(), table.sum("steps", 0, 20000)], epsilon=1.0, delta=1e-6)
    assert table.release(jax.random.key(1), df, **kw).table.equals(table.release(jax.random.key(1), t, **kw).table)
    with pytest.raises(ValueError, match="unknown column"):
        table.release(jax.random.key(1), df, by="nope", statistics=[table.count()], epsilon=1.0, delta=1e-6)
    bad = spark.createDataFrame([(1, 1.0, None), (2, 2.0, 3.0)], "user_id long, g double, steps double")
    with pytest.raises(ValueError, match="column 'steps' has 1 null"):
        table.release(jax.random.key(1), bad, by="g", statistics=[table.sum("steps", 0, 1)], epsilon=1.0,
                      delta=1e-6)
    nan = spark.createDataFrame([(1, float("nan"), 1.0), (2, 2.0, 3.0)], "user_id long, g double, steps double")
    with pytest.raises(ValueError, match="by: group column 'g' has 1 NaN key"):
        table.release(jax.random.key(1), nan, by="g", statistics=[table.count()], epsilon=1.0, delta=1e-6)
    with pytest.raises(ValueError, match="groups: the public groups of column 'g' are string"):
        table.release(jax.random.key(1), df, by="g", statistics=[table.count()], epsilon=1.0, delta=1e-6,
                      groups=["0", "1"])
