"""The Spark backend of :func:`dpjax.table.release`: bounding and aggregation run in Spark.

No row reaches the driver. The rows are hash-partitioned by unit into buckets (all the rows of a unit land
in one bucket; no sort; one bucket per core, more for a large input: :func:`_buckets`), and each bucket runs
the *same* numpy code as the local backend (:func:`dpjax.table.release._local_aggregates`: keyed bounding,
exact integer aggregates) on its rows as one Arrow table (``mapInArrow``: no pandas conversion). The per-bucket,
per-group integer aggregates (a few rows per group) are collected as one Arrow table and summed on the
driver in int64 (quantile-tree leaves exploded to (group, leaf, count) and summed by Spark first); the
data checks are observed on that one job (``DataFrame.observe``) and read before any noise. Integer sums
are exact, the bounding draws depend on the units' own rows, and the noise on (key, component,
group): the released table is bitwise the table of the local backend on the same data and key.

A plain scan of local Parquet files (:func:`_parquet_files`) skips the JVM's rows: each bucket's task reads
the files itself with pyarrow and keeps the rows of its units (:func:`_read_units`), so no row crosses from
the JVM to Python and none is shuffled; the workers refuse bad rows as the local backend does.

Install with ``pip install 'dpjax[spark]'`` (pyspark; Java 17).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re
import sys
import urllib.parse
import urllib.request

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dpjax.table import data as _data

__all__ = ["spark_aggregates", "WorkerError"]

#: the prefix of the message a worker raises when its dpjax is not the driver's (found in Spark's error text)
_MISMATCH = "dpjax-spark-worker: "


class WorkerError(RuntimeError):
    """Spark's Python workers cannot run the release: they lack pyarrow or dpjax, or run another dpjax."""


@functools.cache
def _fingerprint() -> str:
    """A hash of the source of the table layer (this package's modules): the code the workers must run, the
    driver's, for the bounding to be the one the privacy argument and the bitwise equality with pyarrow assume."""
    folder = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(f for f in os.listdir(folder) if f.endswith(".py")):
        with open(os.path.join(folder, name), "rb") as f:
            digest.update(name.encode() + b"\0" + f.read())
    return digest.hexdigest()


def _worker_python(spark) -> str:
    """The interpreter Spark's Python workers run (``spark.pyspark.python``, ``PYSPARK_PYTHON``, else python3)."""
    return spark.conf.get("spark.pyspark.python", None) or os.environ.get("PYSPARK_PYTHON") or "python3"


def _run(spark, action):
    """``action()`` (a Spark job running Python workers), with a worker that cannot import pyarrow or dpjax,
    or runs another dpjax than the driver, reported as :class:`WorkerError` saying how to fix it."""
    try:
        return action()
    except Exception as exc:
        text = str(exc)
        fix = (
            f"install pyarrow and this dpjax on every worker (pip install 'dpjax[spark]'), or point "
            f"PYSPARK_PYTHON (or spark.pyspark.python) at an interpreter that has them, e.g. this driver's "
            f"{sys.executable}, before the Spark session starts"
        )
        missing = re.search(r"No module named '([\w.]+)'", text)
        if missing:
            raise WorkerError(
                f"data: Spark's Python workers ({_worker_python(spark)}) cannot import {missing.group(1)!r}: {fix}"
            ) from None
        mismatch = re.search(re.escape(_MISMATCH) + r"([^\n]*)", text)
        detail = mismatch.group(1) if mismatch else None
        if re.search(r"module 'dpjax[\w.]*' has no attribute|Can't get attribute '\w+' on <module 'dpjax", text):
            detail = "run another dpjax than the driver (theirs lacks a function the driver's calls)"
        if detail:
            raise WorkerError(f"data: Spark's Python workers ({_worker_python(spark)}) {detail}: {fix}") from None
        raise


def _check_worker(expected: str) -> None:
    """In a worker: refuse to run a dpjax whose table layer is not the driver's."""
    here = _fingerprint()
    if here != expected:
        import dpjax

        raise RuntimeError(
            f"{_MISMATCH}run another dpjax than the driver (theirs at {dpjax.__file__}, table "
            f"layer {here}; the driver's {expected})"
        )


_NUMERIC = ("ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType", "DecimalType")


def _checks(req, df):
    """The data checks of the local backend as Spark aggregate expressions (the column and type checks, which
    read the schema only, are made here): ``(expressions, keyed float columns)``, read by :func:`_refuse`."""
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
    keyed = [
        c
        for c in dict.fromkeys(list(req.by) + ([req.privacy_unit] if req.privacy_unit else []))
        if types[c] in ("FloatType", "DoubleType")
    ]
    for c in keyed:
        checks.append(F.sum(F.isnan(F.col(c)).cast("long")).alias(f"__nan_{c}"))
    return checks, keyed


def _refuse(req, row, keyed):
    """Refuse the data by the counts of :func:`_checks` (``row``: their values), as the local backend does."""
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


#: the input bytes (as Spark's optimizer estimates them) per bucket of units above one bucket per core
_BUCKET_BYTES = 128 << 20


def _buckets(df) -> int:
    """The number of buckets the rows are hash-partitioned into by unit: one per core (each bucket is a Python
    task with a cost of its own, and its rows all cross to Python anyway), more when the input is large (about
    ``_BUCKET_BYTES`` of it per bucket, as Spark's optimizer estimates the input's size, so that a bucket fits a
    worker's memory), never more than ``spark.sql.shuffle.partitions``; that setting alone where the session
    gives no size estimate (Spark Connect)."""
    spark = df.sparkSession
    most = int(spark.conf.get("spark.sql.shuffle.partitions"))
    try:
        cores = spark.sparkContext.defaultParallelism
        size = int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
    except AttributeError:  # no JVM handle on this session (Spark Connect): the user's setting
        return most
    return min(most, max(cores, -(-size // _BUCKET_BYTES)))


#: a plain Parquet scan up to this many input bytes (as Spark's optimizer estimates them) is read by the workers
#: themselves (:func:`_parquet_files`): each bucket's task reads all of it, so its cost grows with the buckets
_DIRECT_BYTES = 1 << 30
#: the Spark types of a unit column that :func:`_unit_buckets` hashes, and of any column a worker reads from
#: Parquet as Spark does
_DIRECT_UNIT_TYPES = ("ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType")
_DIRECT_TYPES = ("BooleanType", "StringType", *_DIRECT_UNIT_TYPES)


@dataclasses.dataclass(frozen=True)
class _Files:
    """The local Parquet files of a plain scan and their number of rows (their footers')."""

    paths: tuple
    rows: int


def _parquet_files(df, req, row_schema: pa.Schema) -> _Files | None:
    """The files of ``df`` when its workers can read the release's rows themselves, else ``None``.

    That is: a release with a privacy unit on a plain scan of local Parquet files (the optimized plan a
    relation of Parquet files without partition columns, under a projection of its columns at most: no
    filter, no computed column, not cached) of at most ``_DIRECT_BYTES``, whose needed columns are of
    :data:`_DIRECT_TYPES` (the unit's of :data:`_DIRECT_UNIT_TYPES`) and, in every file's footer, of the
    type Spark gives them (``row_schema``), so that pyarrow reads the rows Spark would."""
    if not req.privacy_unit:
        return None
    try:
        plan = df._jdf.queryExecution().optimizedPlan()
    except AttributeError:  # no JVM handle on this session (Spark Connect)
        return None
    if plan.getClass().getSimpleName() == "Project":
        projected = plan.projectList()
        if any(projected.apply(i).getClass().getSimpleName() != "AttributeReference" for i in range(projected.size())):
            return None
        plan = plan.child()
    if plan.getClass().getSimpleName() != "LogicalRelation":
        return None
    relation = plan.relation()
    if (
        relation.getClass().getSimpleName() != "HadoopFsRelation"
        or relation.fileFormat().getClass().getSimpleName() != "ParquetFileFormat"
        or relation.partitionSchema().size()
        or int(str(plan.stats().sizeInBytes())) > _DIRECT_BYTES
    ):
        return None
    types = {f.name: type(f.dataType).__name__ for f in df.schema.fields}
    if any(types[c] not in _DIRECT_TYPES for c in req.columns) or types[req.privacy_unit] not in _DIRECT_UNIT_TYPES:
        return None
    import pyarrow.parquet as pq

    paths, rows = [], 0
    for uri in df.inputFiles():
        parsed = urllib.parse.urlparse(uri)
        if parsed.scheme != "file":
            return None
        paths.append(urllib.request.url2pathname(parsed.path))
        meta = pq.read_metadata(paths[-1])
        schema = meta.schema.to_arrow_schema()
        for field in row_schema:
            got = schema.field(field.name).type if field.name in schema.names else None
            if got != field.type and not (got == pa.large_string() and field.type == pa.string()):
                return None
        rows += meta.num_rows
    return _Files(tuple(paths), rows)


def _unit_buckets(col, buckets: int) -> np.ndarray:
    """The bucket number of each row's unit: the top 32 bits of the 64 bits of its canonical id (a float
    ``-0.0`` as ``0.0``; a null one as ``0``, refused in that bucket) times an odd constant (Fibonacci
    hashing), scaled to ``[0, buckets)``."""
    if pa.types.is_floating(col.type):
        col = pc.cast(_data.canonical_keys(col)[0], pa.float64()).fill_null(0.0)
    else:
        col = pc.cast(col, pa.int64()).fill_null(0)
    x = col.to_numpy().view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    x >>= np.uint64(32)
    x *= np.uint64(buckets)
    x >>= np.uint64(32)
    return x


def _read_units(files: _Files, schema: pa.Schema, unit: str, bucket: int, buckets: int) -> pa.Table:
    """The rows of the units of bucket number ``bucket`` (of ``buckets``: :func:`_unit_buckets`) in ``files``,
    read by pyarrow a batch at a time (only the columns of ``schema``, cast to its types: Spark's), as one
    table."""
    import pyarrow.parquet as pq

    parts = []
    for path in files.paths:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=_data.PARQUET_BATCH_ROWS, columns=schema.names):
            part = pa.Table.from_batches([batch]).select(schema.names).cast(schema)
            parts.append(part.filter(pa.array(_unit_buckets(part.column(unit), buckets) == bucket)))
    return pa.concat_tables(parts).combine_chunks() if parts else schema.empty_table()


def _to_arrow(df) -> pa.Table:
    """``df`` collected to the driver as one Arrow table (``DataFrame.toArrow``, pyspark ≥ 4; before, the Arrow
    batches it is made of)."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    from pyspark.sql.pandas.types import to_arrow_schema

    batches = df._collect_as_arrow()
    return pa.Table.from_batches(batches) if batches else to_arrow_schema(df.schema).empty_table()


def spark_aggregates(req, df, public, bound_key, local_aggregates):
    """The group keys, their hashes and the integer aggregates of a Spark DataFrame, as the local backend gives them.

    Bounding and aggregation run in Spark, each bucket of rows by the local backend itself; the checks are
    observed on the rows as the release's job reads them, before any noise is drawn.

    Args:
      req: the validated :class:`~dpjax.table.release.Request`.
      df: a ``pyspark.sql.DataFrame``.
      public: the public groups (a pyarrow Table of keys), or ``None`` for private selection.
      bound_key: the key pair of the bounding draws (:meth:`dpjax.table.keys.KeyWords.bounding`).
      local_aggregates: ``local_aggregates(req, table, public, bound_key)``, the local backend, run on each
        bucket (passed in by :func:`dpjax.table.release.release`, so that this module does not import its
        caller).

    Returns:
      ``(keys, group hashes, aggregates)``: a pyarrow Table of the group keys, ``uint32[G, 2]`` and
      ``{name: int64 array over the groups}``.

    Raises:
      ValueError: an unknown or non-numeric column, nulls or NaN in a value or unit column, an empty table,
        public groups of another type than the key column.
      WorkerError: Spark's Python workers lack pyarrow or dpjax, or run another dpjax.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_schema

    from dpjax.table.aggregate import needed

    from pyspark.sql import Observation

    checks, keyed = _checks(req, df)
    original = df
    row_schema = to_arrow_schema(df.select(*req.columns).schema)
    direct = _parquet_files(df, req, row_schema)
    buckets = _buckets(df)
    if direct is None:
        # the checks are observed on the rows as the release's own job reads them (no pass of their own) and
        # read before any noise; where bad data stops that job in a worker, one aggregation finds and names it
        observation = Observation("dpjax_table_checks")
        df = df.select(*req.columns).observe(observation, *checks)
    else:  # the workers refuse bad rows as the local backend does (then one aggregation names the fault)
        observation = None
        df = df.select(*req.columns)
        if not direct.rows:
            raise ValueError("data: the table is empty")
    df = _canonical(df, list(req.by) + ([req.privacy_unit] if req.privacy_unit else []))
    key_schema = to_arrow_schema(T.StructType([df.schema[c] for c in req.by]))
    if public is not None:
        _data.check_public_types(public, key_schema)
    names = list(needed(req.statistics, req.discrete))
    trees = [n for n in names if n.startswith("tree:")]
    scalars = [n for n in names if n not in trees]
    alias = {n: f"a{i}" for i, n in enumerate(names)}
    out_schema = T.StructType(
        [df.schema[c] for c in req.by]
        + [T.StructField("__h0", T.LongType()), T.StructField("__h1", T.LongType())]
        + [T.StructField(alias[n], T.LongType()) for n in scalars]
        + [T.StructField(alias[n], T.ArrayType(T.LongType())) for n in trees]
    )
    out_arrow = to_arrow_schema(out_schema)
    public_dict = public.to_pydict() if public is not None else None
    public_schema = public.schema if public is not None else None
    fingerprint = _fingerprint()

    def aggregates(table):
        """The bounding and integer aggregates of all the rows of some units (one Arrow table), as one Arrow
        batch of its groups with a kept row (the only candidates); ``None`` for no row."""
        if not table.num_rows:
            return None
        table = table.cast(
            pa.schema(
                [pa.field(f.name, key_schema.field(f.name).type) if f.name in req.by else f for f in table.schema]
            )
        )
        pub = pa.table(public_dict, schema=public_schema) if public_dict is not None else None
        keys, words, agg = local_aggregates(req, table, pub, bound_key)
        present = pa.array(np.flatnonzero(agg["units"] > 0))
        idx = present.to_numpy()
        columns = [keys.column(c).take(present).combine_chunks() for c in req.by]
        columns += [pa.array(words[idx, 0].astype(np.int64)), pa.array(words[idx, 1].astype(np.int64))]
        columns += [pa.array(agg[n][idx]) for n in scalars]
        for n in trees:
            hist = agg[n][idx]
            offsets = np.arange(len(idx) + 1, dtype=np.int32) * hist.shape[1]
            columns.append(pa.ListArray.from_arrays(pa.array(offsets), pa.array(hist.ravel())))
        return pa.RecordBatch.from_arrays(columns, schema=out_arrow)

    def bucket(batches):
        """:func:`aggregates` of one partition (all the rows of its units), its rows sent by Spark."""
        _check_worker(fingerprint)
        batches = list(batches)
        if batches:
            table = pa.Table.from_batches(batches).combine_chunks()  # one batch: codes and hashes in one pass
            del batches
            out = aggregates(table)
            if out is not None:
                yield out

    def read_bucket(ids):
        """:func:`aggregates` of the units of each bucket number in ``ids``, their rows read from the files by
        this worker (:func:`_read_units`)."""
        _check_worker(fingerprint)
        for batch in ids:
            for b in batch.column(0).to_pylist():
                out = aggregates(_read_units(direct, row_schema, req.privacy_unit, b, buckets))
                if out is not None:
                    yield out

    # Arrow batches in and out of the workers (mapInArrow: no pandas conversion, NaN and null kept apart), and
    # the rows of each unit brought together by hash partitioning, not by applyInPandas's sort of every row
    spark = df.sparkSession
    if direct is not None:  # each bucket's worker reads the files itself: no row crosses from the JVM
        partial = spark.range(0, buckets, 1, buckets).mapInArrow(read_bucket, out_schema)
    elif req.privacy_unit:
        partial = df.repartition(buckets, F.col(req.privacy_unit)).mapInArrow(bucket, out_schema)
    else:  # each row its own unit: nothing to bound, aggregate each partition where it is
        partial = df.mapInArrow(bucket, out_schema)
    if trees:
        partial = partial.cache()  # scanned twice: the scalars, then the exploded leaves
    # the per-bucket, per-group rows (a few per group) come to the driver as one Arrow table, no Row objects and
    # no shuffle of their own, and are summed there exactly (int64)
    try:
        got = _run(spark, lambda: _to_arrow(partial.select("__h0", "__h1", *req.by, *[alias[n] for n in scalars])))
    except Exception:
        _refuse(req, original.agg(*checks).collect()[0].asDict(), keyed)
        raise
    if observation is not None:
        _refuse(req, observation.get, keyed)
    h = np.stack([got.column("__h0").to_numpy(), got.column("__h1").to_numpy()], axis=1).astype(np.uint32)
    u64 = _data.words_to_u64(h)
    distinct, first, inverse = np.unique(u64, return_index=True, return_inverse=True)
    if public is not None:
        words = _data.key_hashes(public)
        keys = public
    else:
        words = h[first]
        keys = got.select(list(req.by)).take(pa.array(first)).cast(key_schema)
    order = np.argsort(_data.words_to_u64(words))
    where = order[np.searchsorted(_data.words_to_u64(words)[order], distinct)]  # row of each distinct group
    agg = {}
    for n in scalars:
        agg[n] = np.zeros(len(words), np.int64)
        np.add.at(agg[n], where[inverse], got.column(alias[n]).to_numpy().astype(np.int64))
    for n in trees:
        leaves = 1 << int(n.rsplit(":", 1)[1])
        cells = _run(
            spark,
            lambda n=n: _to_arrow(
                partial.select("__h0", "__h1", F.posexplode(alias[n]).alias("leaf", "c"))
                .where("c > 0")
                .groupBy("__h0", "__h1", "leaf")
                .agg(F.sum("c").alias("c"))
            ),
        )
        cw = np.stack([cells.column("__h0").to_numpy(), cells.column("__h1").to_numpy()], axis=1).astype(np.uint32)
        row = where[np.searchsorted(distinct, _data.words_to_u64(cw))]
        hist = np.zeros((len(words), leaves), np.int64)
        hist[row, cells.column("leaf").to_numpy()] = cells.column("c").to_numpy()
        agg[n] = hist
    if trees:
        partial.unpersist()
    return keys, words, agg
