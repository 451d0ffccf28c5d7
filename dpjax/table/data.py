"""Reading and normalising the input of a table release (columnar, pyarrow).

Accepted: a ``pyarrow.Table`` (or ``RecordBatch``), a pandas or Polars DataFrame, a dict of
numpy arrays, a path to a CSV or Parquet file (``.csv``/``.csv.gz``/``.parquet``/``.pq``; only
the columns the release uses are read, by pyarrow's multithreaded readers). Nothing is turned
into a Python object per field: group keys and unit ids are dictionary-encoded and only their
*distinct* values are hashed (:mod:`dpjax.table.keys`); integer unit ids are hashed vectorised.
"""

from __future__ import annotations

import dataclasses
import itertools
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dpjax.table.keys import hash_int64, hash_values

__all__ = ["read", "Prepared", "prepare", "public_groups", "words_to_u64"]


def words_to_u64(words: np.ndarray) -> np.ndarray:
    """One ``uint64`` per pair of ``uint32`` hash words."""
    return (words[:, 0].astype(np.uint64) << np.uint64(32)) | words[:, 1].astype(np.uint64)


def _path_columns(path: str) -> list[str]:
    if path.endswith((".parquet", ".pq")):
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    import pyarrow.csv as pacsv

    with pacsv.open_csv(path) as reader:
        return list(reader.schema.names)


def read(data, columns: list[str]) -> pa.Table:
    """``data`` as a pyarrow Table holding exactly ``columns`` (unknown ones refused by name)."""
    if isinstance(data, (str, os.PathLike)):
        path = os.fspath(data)
        if not os.path.exists(path):
            raise ValueError(f"data: no such file {path!r}")
        missing = [c for c in columns if c not in _path_columns(path)]
        if missing:
            raise ValueError(f"data: unknown column(s) {missing} in {path!r}")
        if path.endswith((".parquet", ".pq")):
            import pyarrow.parquet as pq

            table = pq.read_table(path, columns=columns)
        else:
            import pyarrow.csv as pacsv

            table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(include_columns=columns))
    elif isinstance(data, pa.Table):
        table = data
    elif isinstance(data, pa.RecordBatch):
        table = pa.Table.from_batches([data])
    elif isinstance(data, dict):
        try:
            table = pa.table({k: np.asarray(v) if not isinstance(v, (pa.Array, pa.ChunkedArray)) else v
                              for k, v in data.items()})
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as exc:
            raise ValueError(f"data: a dict of equal-length arrays is needed ({exc})") from exc
    elif type(data).__module__.startswith("pandas"):
        table = pa.Table.from_pandas(data, preserve_index=False)
    elif type(data).__module__.startswith("polars"):
        table = data.to_arrow()
    else:
        raise ValueError("data must be a pyarrow Table, a pandas/Polars/Spark DataFrame, a dict of arrays or a "
                         f"CSV/Parquet path, got {type(data).__name__}")
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise ValueError(f"data: unknown column(s) {missing}; the table has {table.column_names}")
    table = table.select(columns)
    if table.num_rows == 0:
        raise ValueError("data: the table is empty")
    return table


def value_column(table: pa.Table, name: str) -> np.ndarray:
    """A value column as float64, refusing non-numeric types and nulls (NaN included) by name."""
    col = table.column(name)
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_decimal(col.type)):
        raise ValueError(f"column {name!r} must be numeric, got type {col.type}")
    if col.null_count:
        raise ValueError(f"column {name!r} has {col.null_count} null value(s); fill or drop them first")
    x = col.to_numpy().astype(np.float64, copy=False)
    if np.isnan(x).any():
        raise ValueError(f"column {name!r} has NaN value(s); fill or drop them first")
    return x


def unit_hashes(table: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(code, words)``: each row's unit as a dictionary code (``int64[n]``) and the hash of each
    distinct unit id (``uint32[U, 2]``; nulls refused). Hashing the dictionary, not the rows."""
    col = table.column(name)
    if col.null_count:
        raise ValueError(f"privacy_unit column {name!r} has {col.null_count} null id(s)")
    enc = pc.dictionary_encode(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
    code = enc.indices.to_numpy().astype(np.int64)
    if pa.types.is_integer(col.type):
        return code, hash_int64(enc.dictionary.to_numpy())
    return code, hash_values(enc.dictionary.to_pylist())


@dataclasses.dataclass
class Prepared:
    """The rows as arrays: group index per row, the distinct group keys (a table) and their hashes."""

    group: np.ndarray          # int64[n]
    keys: pa.Table             # G rows, the by-columns
    group_words: np.ndarray    # uint32[G, 2]


def group_index(table: pa.Table, by: list[str]) -> Prepared:
    """Group index of every row (null is a key of its own) and the distinct keys."""
    codes, dicts = [], []
    for name in by:
        col = table.column(name)
        enc = pc.dictionary_encode(col.combine_chunks(), null_encoding="encode")
        codes.append(enc.indices.to_numpy().astype(np.int64))
        dicts.append(enc.dictionary)
    if len(by) == 1:  # the dictionary's indices are already dense group indices
        keys = pa.table({by[0]: dicts[0]})
        return Prepared(codes[0], keys, key_hashes(keys))
    combined = codes[0]
    for c, d in zip(codes[1:], dicts[1:]):
        combined = combined * len(d) + c
    uniq, group = np.unique(combined, return_inverse=True)
    parts, rest = [], uniq
    for d in reversed(dicts):
        parts.append(d.take(pa.array(rest % len(d))))
        rest = rest // len(d)
    keys = pa.table(dict(zip(by, reversed(parts))))
    return Prepared(group.astype(np.int64), keys, key_hashes(keys))


def key_hashes(keys: pa.Table) -> np.ndarray:
    """``uint32[G, 2]``: hashes of the group keys (tuples of canonical values, one per group)."""
    return hash_values(list(zip(*(keys.column(c).to_pylist() for c in keys.column_names))))


def public_groups(groups, by: list[str]) -> pa.Table:
    """The public groups as a table of keys: a list (of values, or of tuples for several
    columns), a dict column → list of values (their cross product), or a table of keys."""
    if isinstance(groups, dict):
        if sorted(groups) != sorted(by):
            raise ValueError(f"groups: a dict must have exactly the columns {by}, got {list(groups)}")
        rows = list(itertools.product(*(list(groups[c]) for c in by)))
        table = pa.table({c: pa.array([r[i] for r in rows]) for i, c in enumerate(by)})
    elif isinstance(groups, (list, tuple)):
        if len(by) == 1:
            values = [g[0] if isinstance(g, tuple) and len(g) == 1 else g for g in groups]
            table = pa.table({by[0]: pa.array(values)})
        else:
            if not all(isinstance(g, tuple) and len(g) == len(by) for g in groups):
                raise ValueError(f"groups: with by={by} each public group must be a tuple of {len(by)} values")
            table = pa.table({c: pa.array([g[i] for g in groups]) for i, c in enumerate(by)})
    else:
        try:
            table = read(groups, by)
        except ValueError as exc:
            raise ValueError(f"groups: {exc}") from exc
    if table.num_rows == 0:
        raise ValueError("groups: the list of public groups is empty")
    words = key_hashes(table)
    u64 = words_to_u64(words)
    uniq, counts = np.unique(u64, return_counts=True)
    if (counts > 1).any():
        dup = int(np.flatnonzero(u64 == uniq[np.argmax(counts)])[0])
        raise ValueError(f"groups: duplicated public group {table.slice(dup, 1).to_pylist()[0]}")
    return table
