"""The Spark backend of :func:`dpjax.table.release`: bounding and aggregation run in Spark.

No row reaches the driver. The rows are shuffled into buckets of units (``pmod(xxhash64(unit),
B)``: all the rows of a unit land in one bucket), and each bucket runs the *same* numpy code as
the local backend (:func:`dpjax.table.release._local_aggregates`: keyed bounding, exact integer
aggregates) through ``applyInPandas``. The per-bucket, per-group integer aggregates are summed by
Spark (``groupBy(group hash).sum``; quantile-tree leaves exploded to (group, leaf, count) first)
and only those per-group sums are collected. Integer sums are exact, the bounding draws depend on
the units' own rows, and the noise on (key, component, group): the released table is bitwise
the table of the local backend on the same data and key.

Install with ``pip install 'dpjax[spark]'`` (pyspark; Java 17).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dpjax.table import data as _data

__all__ = ["spark_aggregates"]

_NUMERIC = ("ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType", "DecimalType")


def _check(req, df):
    """The data checks of the local backend, as one Spark aggregation (before any noise)."""
    from pyspark.sql import functions as F

    missing = [c for c in req.columns if c not in df.columns]
    if missing:
        raise ValueError(f"data: unknown column(s) {missing}; the table has {df.columns}")
    types = {f.name: type(f.dataType).__name__ for f in df.schema.fields}
    for c in req.value_columns:
        if types[c] not in _NUMERIC:
            raise ValueError(f"column {c!r} must be numeric, got type {types[c]}")
    checks = [F.count(F.lit(1)).alias("__rows")]
    for c in req.value_columns:
        bad = F.col(c).isNull() | (F.isnan(F.col(c)) if types[c] in ("FloatType", "DoubleType") else F.lit(False))
        checks.append(F.sum(bad.cast("long")).alias(f"__null_{c}"))
    if req.privacy_unit:
        checks.append(F.sum(F.col(req.privacy_unit).isNull().cast("long")).alias("__null_unit"))
    keyed = [c for c in dict.fromkeys(list(req.by) + ([req.privacy_unit] if req.privacy_unit else []))
             if types[c] in ("FloatType", "DoubleType")]
    for c in keyed:
        checks.append(F.sum(F.isnan(F.col(c)).cast("long")).alias(f"__nan_{c}"))
    row = df.agg(*checks).collect()[0].asDict()
    if not row["__rows"]:
        raise ValueError("data: the table is empty")
    for c in req.value_columns:
        if row[f"__null_{c}"]:
            raise ValueError(f"column {c!r} has {row[f'__null_{c}']} null or NaN value(s); fill or drop them first")
    if req.privacy_unit and row["__null_unit"]:
        raise ValueError(f"privacy_unit column {req.privacy_unit!r} has {row['__null_unit']} null id(s)")
    for c in keyed:
        _data.refuse_nan_keys(row[f"__nan_{c}"], c, unit=c == req.privacy_unit)


def _canonical(df, names):
    """``df`` with its float key columns canonical as :func:`dpjax.table.data.canonical_keys` makes
    them (``-0.0`` → ``0.0``) before the units are bucketed and the keys hashed: one unit id, one
    group, as on pyarrow."""
    from pyspark.sql import functions as F

    for c in names:
        t = df.schema[c].dataType
        if type(t).__name__ in ("FloatType", "DoubleType"):
            df = df.withColumn(c, F.when(F.col(c) == 0, F.lit(0.0)).otherwise(F.col(c)).cast(t))
    return df


def spark_aggregates(req, df, public, bound_key, local_aggregates):
    """``(keys, group hashes, aggregates)`` of a Spark DataFrame, as the local backend gives them;
    ``local_aggregates(req, table, public, bound_key)`` is the local backend itself, run on each
    bucket (passed in by :func:`dpjax.table.release.release`, so that this module does not import
    its caller)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_schema

    from dpjax.table.aggregate import needed

    _check(req, df)
    df = _canonical(df.select(*req.columns), list(req.by) + ([req.privacy_unit] if req.privacy_unit else []))
    key_schema = to_arrow_schema(T.StructType([df.schema[c] for c in req.by]))
    if public is not None:
        _data.check_public_types(public, key_schema)
    names = list(needed(req.statistics, req.discrete))
    trees = [n for n in names if n.startswith("tree:")]
    scalars = [n for n in names if n not in trees]
    alias = {n: f"a{i}" for i, n in enumerate(names)}
    out_schema = T.StructType([df.schema[c] for c in req.by] + [T.StructField("__h0", T.LongType()),
                              T.StructField("__h1", T.LongType())] +
                              [T.StructField(alias[n], T.LongType()) for n in scalars] +
                              [T.StructField(alias[n], T.ArrayType(T.LongType())) for n in trees])
    public_dict = public.to_pydict() if public is not None else None
    public_schema = public.schema if public is not None else None

    def bucket(pdf):
        import pandas as pd

        table = pa.Table.from_pandas(pdf, preserve_index=False)
        table = table.cast(pa.schema([pa.field(f.name, key_schema.field(f.name).type) if f.name in req.by else f
                                      for f in table.schema]))
        pub = pa.table(public_dict, schema=public_schema) if public_dict is not None else None
        keys, words, agg = local_aggregates(req, table, pub, bound_key)
        present = np.flatnonzero(agg["units"] > 0)  # groups with a kept row: the only candidates
        frame = {c: keys.column(c).take(pa.array(present)).to_pandas() for c in req.by}
        frame["__h0"] = words[present, 0].astype(np.int64)
        frame["__h1"] = words[present, 1].astype(np.int64)
        for n in scalars:
            frame[alias[n]] = agg[n][present]
        for n in trees:
            frame[alias[n]] = list(agg[n][present])
        return pd.DataFrame(frame)

    if req.privacy_unit:
        buckets = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
        grouped = df.groupBy(F.pmod(F.xxhash64(req.privacy_unit), F.lit(buckets)).alias("__bucket"))
        partial = grouped.applyInPandas(bucket, out_schema)
    else:  # each row its own unit: nothing to bound, aggregate each partition where it is
        partial = df.mapInPandas(lambda frames: (bucket(pdf) for pdf in frames), out_schema)
    partial = partial.cache()
    rows = partial.groupBy("__h0", "__h1").agg(*[F.first(c).alias(c) for c in req.by],
                                               *[F.sum(alias[n]).alias(alias[n]) for n in scalars]).collect()
    h = np.array([[r["__h0"], r["__h1"]] for r in rows], np.int64).astype(np.uint32).reshape(-1, 2)
    if public is not None:
        words = _data.key_hashes(public)
        keys = public
    else:
        words = h
        keys = pa.table({c: pa.array([r[c] for r in rows], type=key_schema.field(c).type) for c in req.by})
    index = {(int(a), int(b)): i for i, (a, b) in enumerate(words)}
    where = np.array([index[(int(a), int(b))] for a, b in h], np.int64)
    agg = {}
    for n in scalars:
        agg[n] = np.zeros(len(words), np.int64)
        agg[n][where] = [r[alias[n]] for r in rows]
    for n in trees:
        leaves = 1 << int(n.rsplit(":", 1)[1])
        cells = (partial.select("__h0", "__h1", F.posexplode(alias[n]).alias("leaf", "c")).where("c > 0")
                 .groupBy("__h0", "__h1", "leaf").agg(F.sum("c").alias("c")).collect())
        hist = np.zeros((len(words), leaves), np.int64)
        for r in cells:
            hist[index[(int(r["__h0"]) & 0xFFFFFFFF, int(r["__h1"]) & 0xFFFFFFFF)], r["leaf"]] = r["c"]
        agg[n] = hist
    partial.unpersist()
    return keys, words, agg
