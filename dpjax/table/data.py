"""Reading and normalising the input of a table release (columnar, pyarrow).

Accepted: a ``pyarrow.Table`` (or ``RecordBatch``), a pandas or Polars DataFrame, a dict of
numpy arrays, a path to a CSV or Parquet file (``.csv``/``.csv.gz``/``.parquet``/``.pq``), or a
binary CSV stream (standard input). The input is read in record batches — a Parquet file by
``ParquetFile.iter_batches``, CSV text by ``pyarrow.csv.open_csv`` one block at a time — holding
only the columns the release uses, and each batch is turned at once into compact arrays: group
keys and unit ids dictionary-encoded (``int32`` codes and the batch's distinct values, the
dictionaries unified at the end; an integer column of nearly one distinct value per row, such as
unit ids, kept as read and encoded once at the end), values float64. Neither the text of the table nor a Python
object per field is ever in memory: only the *distinct* keys and units are hashed
(:mod:`dpjax.table.keys`; integer unit ids vectorised). The codes do not depend on how the input
was cut into batches up to a relabelling, which no step of a release depends on: an in-memory
table and the same table streamed from a file release bitwise the same.
"""

from __future__ import annotations

import dataclasses
import itertools
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dpjax.table.keys import hash_int64, hash_values

__all__ = [
    "batches",
    "csv_batches",
    "read",
    "rows",
    "Rows",
    "Prepared",
    "group_index",
    "unit_hashes",
    "public_groups",
    "words_to_u64",
]


def words_to_u64(words: np.ndarray) -> np.ndarray:
    """One ``uint64`` per pair of ``uint32`` hash words.

    Args:
      words: ``uint32[n, 2]``.

    Returns:
      ``uint64[n]``, ``(w0 << 32) | w1``.
    """
    return (words[:, 0].astype(np.uint64) << np.uint64(32)) | words[:, 1].astype(np.uint64)


#: bytes of CSV text per record batch (the text of one block is in memory at a time)
CSV_BLOCK_BYTES = 16 << 20
#: rows per Parquet record batch
PARQUET_BATCH_ROWS = 1 << 20


def _is_parquet(path: str) -> bool:
    return path.endswith((".parquet", ".pq"))


def _in_memory(data) -> pa.Table:
    """An in-memory input as a pyarrow Table."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, dict):
        try:
            return pa.table(
                {k: np.asarray(v) if not isinstance(v, (pa.Array, pa.ChunkedArray)) else v for k, v in data.items()}
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as exc:
            raise ValueError(f"data: a dict of equal-length arrays is needed ({exc})") from exc
    if type(data).__module__.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if type(data).__module__.startswith("polars"):
        return data.to_arrow()
    raise ValueError(
        "data must be a pyarrow Table, a pandas/Polars/Spark DataFrame, a dict of arrays, a "
        f"CSV/Parquet path or a binary CSV stream, got {type(data).__name__}"
    )


def csv_batches(
    source,
    columns: list[str],
    *,
    label: str = "the input stream",
    value_columns=(),
    text_columns=(),
    column_names=None,
    invalid_row=None,
    quoted_newlines: bool = False,
    refused=None,
):
    """Record batches of a CSV file or binary stream, :data:`CSV_BLOCK_BYTES` of text at a time.

    Args:
      source: a path or a binary stream.
      columns: the columns to keep (the others are not parsed).
      label: how messages name the input.
      value_columns: columns parsed as float64.
      text_columns: columns kept as strings (the others typed by pyarrow).
      column_names: the names of the columns, when the text has no header line (the caller read it).
      invalid_row: pyarrow's handler of a row of another width (``"skip"`` or ``"error"``).
      quoted_newlines: whether newlines may occur inside quoted values (a slower parse).
      refused: ``refused(exc) -> ValueError``, pyarrow's error as a ``ValueError`` (by default the table
        layer's messages, naming ``label``).

    Yields:
      pyarrow record batches holding ``columns``.

    Raises:
      ValueError: an unknown column, a non-numeric value in a value column, or text that is not CSV.
    """
    import pyarrow.csv as pacsv

    types = {c: pa.float64() for c in value_columns}
    types.update({c: pa.string() for c in text_columns})
    convert = pacsv.ConvertOptions(include_columns=columns, column_types=types)
    read = pacsv.ReadOptions(block_size=CSV_BLOCK_BYTES, column_names=column_names)
    parse = pacsv.ParseOptions(invalid_row_handler=invalid_row, newlines_in_values=quoted_newlines)

    def table_refused(exc):
        text = str(exc).splitlines()[0]
        if isinstance(exc, (KeyError, pa.ArrowKeyError)) and "include_columns" in text:
            return _unknown_csv_columns(source, columns, label, text)
        if "conversion error to double" in text:
            names = ", ".join(repr(c) for c in value_columns)
            return ValueError(f"column {names} must be numeric ({label}: {text})")
        return ValueError(f"data: {label} is not a readable CSV table ({text})")

    refused = refused or table_refused
    try:
        reader = pacsv.open_csv(source, read_options=read, parse_options=parse, convert_options=convert)
    except (pa.ArrowException, KeyError) as exc:
        raise refused(exc) from None
    with reader:
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except (pa.ArrowException, KeyError) as exc:
                raise refused(exc) from None
            yield batch


def _unknown_csv_columns(source, columns, label, text) -> ValueError:
    """The refusal of CSV text that lacks some of ``columns``: the missing names and, for a file, the
    header it has (a header of one field holding a ``;``, tab or ``|`` is named as another delimiter).
    ``text``: pyarrow's message, which names the first missing column only."""
    import pyarrow.csv as pacsv

    if not isinstance(source, (str, os.PathLike)):
        named = text.split("'")[1] if text.count("'") >= 2 else text
        return ValueError(f"data: unknown column(s) [{named!r}] in {label}")
    with pacsv.open_csv(source) as reader:
        names = reader.schema.names
    missing = [c for c in columns if c not in names]
    hint = ""
    if len(names) == 1:
        sep = next((d for d in (";", "\t", "|") if d in names[0]), None)
        if sep is not None:
            hint = f" (the header looks {sep!r}-separated: the input must be comma-separated CSV)"
    return ValueError(f"data: unknown column(s) {missing} in {label}; the table has {names}{hint}")


def batches(data, columns: list[str], value_columns=()):
    """``data`` as an iterable of pyarrow record batches holding exactly ``columns``.

    A path is read lazily: Parquet by ``ParquetFile.iter_batches`` (only these columns), CSV by
    ``pyarrow.csv.open_csv`` one block at a time; a binary stream (``read``) is read as CSV the same way
    (standard input: ``sys.stdin.buffer``).

    Args:
      data: a pyarrow Table or RecordBatch, a pandas/Polars DataFrame, a dict of arrays, a CSV/Parquet path or
        a binary CSV stream.
      columns: the columns to keep.
      value_columns: the columns a CSV parse reads as float64.

    Returns:
      An iterable of record batches.

    Raises:
      ValueError: a missing file, an unreadable Parquet or CSV input, an unknown column (by name), or an input
        of another type.
    """
    if isinstance(data, (str, os.PathLike)):
        path = os.fspath(data)
        if not os.path.isfile(path):
            raise ValueError(f"data: no such file {path!r}")
        if _is_parquet(path):
            import pyarrow.parquet as pq

            try:
                reader = pq.ParquetFile(path)
            except pa.ArrowException as exc:
                raise ValueError(f"data: {path!r} is not a readable Parquet file ({exc})") from None
            missing = [c for c in columns if c not in reader.schema_arrow.names]
            if missing:
                raise ValueError(f"data: unknown column(s) {missing} in {path!r}")
            return reader.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns)
        return csv_batches(path, columns, label=repr(path), value_columns=value_columns)
    if hasattr(data, "read"):
        return csv_batches(data, columns, value_columns=value_columns)
    table = _in_memory(data)
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise ValueError(f"data: unknown column(s) {missing}; the table has {table.column_names}")
    return table.select(columns).to_batches()


def read(data, columns: list[str]) -> pa.Table:
    """``data`` as a pyarrow Table holding exactly ``columns``.

    For small inputs (public groups); a release streams its input (:func:`rows`).

    Args:
      data: as :func:`batches`.
      columns: the columns to keep.

    Returns:
      A pyarrow Table.

    Raises:
      ValueError: as :func:`batches`, or an empty table.
    """
    parts = list(batches(data, columns))
    table = pa.Table.from_batches(parts) if parts else None
    if table is None or table.num_rows == 0:
        raise ValueError("data: the table is empty")
    return table


class _Codes:
    """Dictionary codes of one key column over record batches: each batch dictionary-encoded as it
    comes (``int32`` codes and its distinct values), the dictionaries unified at the end — or, for
    an integer column held in memory anyway (``keep_integers``: the input was an in-memory table)
    or whose first batch has many distinct values (unit ids: nearly one per row), the batches kept
    as they are (8 bytes a row, less than a batch's codes and its nearly full dictionary) and the
    whole column encoded once at the end (:func:`_dense_codes` when its values span a compact
    range, else one hash pass; no unification)."""

    def __init__(self, keep_integers: bool = False):
        self.chunks, self.nulls, self.nans, self.raw, self.keep_integers = [], 0, 0, None, keep_integers

    def add(self, col) -> None:
        self.nulls += col.null_count
        col, nans = canonical_keys(col)
        self.nans += nans
        if self.raw is None and self.keep_integers and pa.types.is_integer(col.type):
            self.raw = True
        if self.raw:
            self.chunks.append(col)
            return
        encoded = col if pa.types.is_dictionary(col.type) else pc.dictionary_encode(col)
        if self.raw is None:
            self.raw = pa.types.is_integer(col.type) and 4 * len(encoded.dictionary) > len(col)
        self.chunks.append(col if self.raw else encoded)

    def finish(self) -> tuple[np.ndarray, pa.Array]:
        """``(code, dictionary)``: ``int32[n]`` codes into the distinct values (written into one
        array, each batch's encoding released once copied); a null is one value of its own, the
        dictionary's last."""
        unified = pa.chunked_array(self.chunks, type=self.chunks[0].type)
        self.chunks = []
        if self.raw:
            dense = _dense_codes(unified)
            if dense is not None:
                return dense
            unified = pc.dictionary_encode(unified)
        else:
            unified = unified.unify_dictionaries()
        dictionary = unified.chunk(0).dictionary if unified.num_chunks else pa.array([], unified.type.value_type)
        if len(dictionary) + 1 >= 2**31:
            raise ValueError(f"data: {len(dictionary)} distinct keys in one column, above 2**31 - 2")
        code = np.empty(len(unified), np.int32)
        chunks, at = unified.chunks, 0
        del unified
        for i, c in enumerate(chunks):
            indices = c.indices
            code[at : at + len(c)] = (indices.fill_null(len(dictionary)) if indices.null_count else indices).to_numpy()
            at += len(c)
            chunks[i] = None
        if self.nulls:
            dictionary = pa.concat_arrays([dictionary, pa.nulls(1, dictionary.type)])
        return code, dictionary


def canonical_keys(col):
    """``(column, NaN count)``: a key or unit column in its canonical form before any grouping or
    hashing — a float column's ``-0.0`` made ``0.0`` (equal keys are one group, whose hash and noise
    are then one; the hash already takes an integral float as its integer), other types as they
    are. NaN keys are counted (the caller refuses them: NaN is not null, and a NaN group would not
    be one group on every backend)."""
    if pa.types.is_dictionary(col.type) and pa.types.is_floating(col.type.value_type):
        col = col.dictionary_decode()
    if not pa.types.is_floating(col.type):
        return col, 0
    nans = pc.sum(pc.is_nan(col)).as_py() or 0
    return pc.add(col, pa.scalar(0.0, col.type)), int(nans)


def refuse_nan_keys(nans: int, name: str, unit: bool = False) -> None:
    """The error of ``nans`` NaN keys in the group column (``unit``: the privacy-unit column) ``name``."""
    if nans:
        what = (
            f"privacy_unit column {name!r} has {nans} NaN id(s)"
            if unit
            else f"by: group column {name!r} has {nans} NaN key(s)"
        )
        raise ValueError(
            f"{what}: NaN is not a key (nor null); make them null (pandas' NaN is read as null) or drop those rows"
        )


#: an integer column whose values span at most this many entries per row (or 2**20 in all) is
#: encoded by counting (:func:`_dense_codes`) instead of hashing
_DENSE_SPAN_PER_ROW = 4


def _dense_codes(column: pa.ChunkedArray):
    """``(code, dictionary)`` of an integer column without nulls whose values span a compact range
    (at most ``_DENSE_SPAN_PER_ROW`` per row, or 2**20): the present values in increasing order as
    the dictionary, found by one count over the range — a few numpy passes, cheaper than the hash
    table of ``dictionary_encode``. ``None`` when the column has nulls or a wider
    range (the caller hashes it)."""
    n = len(column)
    if column.null_count or n == 0:
        return None
    bounds = pc.min_max(column)
    lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
    limit = max(_DENSE_SPAN_PER_ROW * n, 1 << 20)
    if hi - lo + 1 > limit:
        return None
    if 0 <= lo and hi < limit:  # counted from 0: int64 values index the counts as they are, no copy
        lo = 0
    span = hi - lo + 1
    parts = [c.to_numpy() for c in column.chunks if len(c)]
    base = np.array(lo, parts[0].dtype).astype(np.int64)  # wraps for uint64 above 2**63: so does every x

    def offsets(x):  # x − lo, in [0, span): exact in wrapping int64 arithmetic, whatever the integer type
        if lo == 0 and x.dtype == np.int64:
            return x
        d = x.astype(np.int64)
        d -= base
        return d

    counts = np.zeros(span, np.int64)
    for x in parts:
        counts += np.bincount(offsets(x), minlength=span)
    present = np.flatnonzero(counts)
    del counts
    remap = np.zeros(span, np.int32)
    remap[present] = np.arange(len(present), dtype=np.int32)
    code = np.empty(n, np.int32)
    at = 0
    for x in parts:
        code[at : at + len(x)] = remap[offsets(x)]
        at += len(x)
    dictionary = pa.array((present + base).astype(parts[0].dtype), type=column.type)
    return code, dictionary


def _values(col, name: str) -> np.ndarray:
    """A value column of one batch as float64, refusing non-numeric types by name."""
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_decimal(col.type)):
        raise ValueError(f"column {name!r} must be numeric, got type {col.type}")
    if pa.types.is_decimal(col.type):
        return pc.cast(col, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    return col.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)


@dataclasses.dataclass
class Rows:
    """The rows of a release as compact arrays.

    Attributes:
      group: ``int32[n]``, the group index of each row.
      keys: the distinct group keys, a table of ``G`` rows (the by-columns).
      group_words: ``uint32[G, 2]``, their hashes.
      unit: ``int32[n]``, the unit code of each row (``None`` without a unit).
      unit_words: ``uint32[U, 2]``, the hash of each distinct unit (``None`` without a unit).
      values: ``{column: float64[n]}``, each value column.
    """

    group: np.ndarray  # int32[n]
    keys: pa.Table  # G rows, the by-columns
    group_words: np.ndarray  # uint32[G, 2]
    unit: np.ndarray | None  # int32[n]
    unit_words: np.ndarray | None  # uint32[U, 2]
    values: dict  # column -> float64[n]


def rows(data, by: list[str], privacy_unit: str | None, value_columns) -> Rows:
    """Read ``data`` batch by batch into :class:`Rows`.

    Keys and units dictionary-encoded per batch (no Python object per field; only the distinct values are
    hashed), values converted to float64.

    Args:
      data: as :func:`batches`.
      by: the group columns.
      privacy_unit: the unit column, or ``None``.
      value_columns: the columns of the statistics' values.

    Returns:
      The :class:`Rows`.

    Raises:
      ValueError: as :func:`batches`; a non-numeric value column, nulls in the unit or a value column, NaN
        values or keys, or an empty table (each by name).
    """
    value_columns = list(value_columns)
    columns = list(dict.fromkeys(list(by) + ([privacy_unit] if privacy_unit else []) + value_columns))
    in_memory = not (isinstance(data, (str, os.PathLike)) or hasattr(data, "read"))  # else read batch by batch
    keys = {c: _Codes(keep_integers=in_memory) for c in by}
    unit = _Codes(keep_integers=in_memory) if privacy_unit else None
    values = {c: [] for c in value_columns}
    nulls = dict.fromkeys(value_columns, 0)
    nans = dict.fromkeys(value_columns, 0)
    n = 0
    for batch in batches(data, columns, value_columns):
        n += batch.num_rows
        for c in by:
            keys[c].add(batch.column(c))
        if unit is not None:
            unit.add(batch.column(privacy_unit))
        for c in value_columns:
            col = batch.column(c)
            x = _values(col, c)
            nulls[c] += col.null_count
            nans[c] += int(np.count_nonzero(np.isnan(x))) - col.null_count
            values[c].append(x)
    if n == 0:
        raise ValueError("data: the table is empty")
    for c in value_columns:
        if nulls[c]:
            raise ValueError(f"column {c!r} has {nulls[c]} null value(s); fill or drop them first")
        if nans[c]:
            raise ValueError(f"column {c!r} has NaN value(s); fill or drop them first")
    for c in by:
        refuse_nan_keys(keys[c].nans, c)
    if unit is not None and unit.nulls:
        raise ValueError(f"privacy_unit column {privacy_unit!r} has {unit.nulls} null id(s)")
    if unit is not None:
        refuse_nan_keys(unit.nans, privacy_unit, unit=True)
    merged = {}
    for c in value_columns:
        merged[c], values[c] = _concatenate(values[c], n), None
    prep = _group_index([keys[c].finish() for c in by], by)
    code, words = _unit_words(unit.finish()) if unit is not None else (None, None)
    pa.default_memory_pool().release_unused()  # the batches' buffers, freed, go back to the system
    return Rows(prep.group, prep.keys, prep.group_words, code, words, merged)


def _concatenate(parts: list, n: int) -> np.ndarray:
    """``np.concatenate(parts)`` (``n`` entries), each part released once copied (the peak is the
    result and one part, not twice the column)."""
    out = np.empty(n, parts[0].dtype)
    at = 0
    for i, part in enumerate(parts):
        out[at : at + len(part)] = part
        at += len(part)
        parts[i] = None
    return out


def _unit_words(encoded) -> tuple[np.ndarray, np.ndarray]:
    """``(code, words)``: the hash of each distinct unit id, an integral float hashed as its integer
    (:func:`hash_int64`, as integer ids are), so that a unit's id read as float or as integer draws
    the same bounding."""
    code, dictionary = encoded
    if pa.types.is_integer(dictionary.type):
        return code, hash_int64(dictionary.to_numpy())
    if pa.types.is_floating(dictionary.type):
        x = dictionary.to_numpy(zero_copy_only=False).astype(np.float64)
        integral = np.flatnonzero((np.trunc(x) == x) & (np.abs(x) < 2.0**63))
        other = np.setdiff1d(np.arange(len(x)), integral)
        words = np.empty((len(x), 2), np.uint32)
        words[integral] = hash_int64(x[integral].astype(np.int64))
        words[other] = hash_values(x[other].tolist())
        return code, words
    return code, hash_values(dictionary.to_pylist())


def _encoded(table: pa.Table, name: str) -> _Codes:
    codes = _Codes(keep_integers=True)
    for batch in table.select([name]).to_batches():
        codes.add(batch.column(0))
    return codes


def unit_hashes(table: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Each row's unit as a dictionary code and the hash of each distinct unit id (hashing the dictionary).

    Args:
      table: a pyarrow Table.
      name: the unit column.

    Returns:
      ``(code, words)``: ``int32[n]`` and ``uint32[U, 2]``.

    Raises:
      ValueError: null or NaN unit ids.
    """
    codes = _encoded(table, name)
    if codes.nulls:
        raise ValueError(f"privacy_unit column {name!r} has {codes.nulls} null id(s)")
    refuse_nan_keys(codes.nans, name, unit=True)
    return _unit_words(codes.finish())


@dataclasses.dataclass
class Prepared:
    """The rows as arrays: the group index per row, the distinct group keys (a table) and their hashes.

    Attributes:
      group: ``int32[n]``, the group index of each row.
      keys: the distinct group keys, a table of ``G`` rows (the by-columns).
      group_words: ``uint32[G, 2]``, their hashes.
    """

    group: np.ndarray  # int32[n]
    keys: pa.Table  # G rows, the by-columns
    group_words: np.ndarray  # uint32[G, 2]


def group_index(table: pa.Table, by: list[str]) -> Prepared:
    """The group index of every row of ``table`` and the distinct keys (null is a key of its own).

    Args:
      table: a pyarrow Table.
      by: the group columns.

    Returns:
      The :class:`Prepared` rows.

    Raises:
      ValueError: a NaN key.
    """
    encoded = []
    for c in by:
        codes = _encoded(table, c)
        refuse_nan_keys(codes.nans, c)
        encoded.append(codes.finish())
    return _group_index(encoded, by)


def _group_index(encoded, by: list[str]) -> Prepared:
    """:class:`Prepared` from each by-column's ``(code, dictionary)``."""
    codes = [c for c, _ in encoded]
    dicts = [d for _, d in encoded]
    if len(by) == 1:  # the dictionary's indices are already dense group indices
        keys = pa.table({by[0]: dicts[0]})
        return Prepared(codes[0], keys, key_hashes(keys))
    combined = codes[0].astype(np.int64)
    for c, d in zip(codes[1:], dicts[1:]):
        combined = combined * len(d) + c
    uniq, group = np.unique(combined, return_inverse=True)
    parts, rest = [], uniq
    for d in reversed(dicts):
        parts.append(d.take(pa.array(rest % len(d))))
        rest = rest // len(d)
    keys = pa.table(dict(zip(by, reversed(parts))))
    return Prepared(group.astype(np.int32), keys, key_hashes(keys))


def _key_kind(t: pa.DataType):
    """The kind of keys a column type holds, as the hash sees them: numbers (integers and floats hash
    alike: an integral float is its integer), text, or the type itself; ``None`` for the null type."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_null(t):
        return None
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "numbers"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    return str(t)


def check_public_types(public: pa.Table, schema: pa.Schema) -> None:
    """Refuse public groups whose values are of another kind than the data's key column (``"0"`` for an integer one).

    No data row could ever fall in them, and their release would be noise alone.

    Args:
      public: the public groups (:func:`public_groups`).
      schema: the data's schema.

    Raises:
      ValueError: a column whose public values are of another kind, naming it.
    """
    for name in public.column_names:
        want, got = _key_kind(schema.field(name).type), _key_kind(public.schema.field(name).type)
        if want is not None and got is not None and want != got:
            raise ValueError(
                f"groups: the public groups of column {name!r} are {public.schema.field(name).type} "
                f"values, the column holds {schema.field(name).type}: no row matches them; "
                "give the keys as the column's type"
            )


def key_hashes(keys: pa.Table) -> np.ndarray:
    """The hashes of the group keys (tuples of canonical values, one per group).

    Args:
      keys: a table of group keys.

    Returns:
      ``uint32[G, 2]``.
    """
    return hash_values(list(zip(*(keys.column(c).to_pylist() for c in keys.column_names))))


def public_groups(groups, by: list[str]) -> pa.Table:
    """The public groups as a table of keys.

    Args:
      groups: a list (of values, or of tuples for several columns), a dict column → list of values (their cross
        product), or a table of keys (anything :func:`read` reads).
      by: the group columns.

    Returns:
      A pyarrow Table of the keys, canonical (:func:`canonical_keys`), one row per group.

    Raises:
      ValueError: a dict of other columns, tuples of another length, an empty list, a NaN key, a duplicated
        group, or an unreadable table.
    """
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
    for c in by:
        col = table.column(c)
        if pa.types.is_floating(col.type) and pc.any(pc.is_nan(col)).as_py():
            raise ValueError(f"groups: a public group of column {c!r} is NaN: NaN is not a key (nor null)")
        col, _ = canonical_keys(col.combine_chunks())
        table = table.set_column(table.column_names.index(c), c, col)
    words = key_hashes(table)
    u64 = words_to_u64(words)
    uniq, counts = np.unique(u64, return_counts=True)
    if (counts > 1).any():
        dup = int(np.flatnonzero(u64 == uniq[np.argmax(counts)])[0])
        raise ValueError(f"groups: duplicated public group {table.slice(dup, 1).to_pylist()[0]}")
    return table
