"""dpjax.table reads its input in record batches (issue 18, reading at scale): a CSV file, a CSV
stream (standard input) and a Parquet file, cut into many small batches, release bitwise what the
same table in memory releases; bad content in a late batch is refused by name."""

import io

import jax
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from dpjax import table
from dpjax.table import data as table_data

STATS = [
    table.count(),
    table.count_units(),
    table.sum("steps", 0, 20000),
    table.mean("steps", 0, 20000),
    table.quantile("steps", 0.5, 0, 20000),
]


def _csv(tmp_path, n=3000, seed=0):
    """A CSV with string units, a string and an integer group column (empty integer fields are nulls)."""
    rng = np.random.default_rng(seed)
    user = rng.integers(0, 300, n)
    city = np.array(["oslo", "lima", "pune", "kiev", "rome"])[rng.integers(0, 5, n)]
    band = rng.integers(0, 3, n).astype(str).astype(object)
    band[rng.random(n) < 0.05] = ""
    steps = rng.uniform(0, 25000, n).round(1)
    path = tmp_path / "d.csv"
    with open(path, "w") as f:
        f.write("user_id,city,band,steps,unused\n")
        for row in zip(user, city, band, steps):
            f.write(f"u{row[0]},{row[1]},{row[2]},{row[3]},x\n")
    return path


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(table_data, "CSV_BLOCK_BYTES", 1 << 10)  # ~40 blocks of text
    monkeypatch.setattr(table_data, "PARQUET_BATCH_ROWS", 97)


@pytest.mark.parametrize(
    "groups,by",
    [
        pytest.param("public", ["city", "band"], marks=pytest.mark.slow),
        pytest.param(None, "city", marks=pytest.mark.slow),
        pytest.param(None, ["city", "band"], marks=pytest.mark.slow),
        pytest.param("public", "city", marks=pytest.mark.slow),
    ],
)
def test_streamed_inputs_release_bitwise_what_the_table_in_memory_releases(tmp_path, small_batches, by, groups):
    path = _csv(tmp_path)
    memory = pacsv.read_csv(path)
    assert memory.column("band").null_count > 0  # null keys are a group of their own in every form
    pq.write_table(memory, tmp_path / "d.parquet", row_group_size=500)
    if groups == "public":
        groups = (
            ["oslo", "lima", "pune", "nowhere"]
            if by == "city"
            else {"city": ["oslo", "lima", "pune"], "band": [0, 1, 2, None]}
        )
    kw = dict(
        by=by,
        statistics=STATS,
        privacy_unit="user_id",
        max_groups_per_unit=2,
        max_rows_per_group=3,
        epsilon=4.0,
        delta=1e-6,
        groups=groups,
        noise="gaussian",
    )
    ref = table.release(jax.random.key(5), memory, **kw)
    for source in (str(path), tmp_path / "d.parquet", io.BytesIO(path.read_bytes())):
        got = table.release(jax.random.key(5), source, **kw)
        assert got.table.equals(ref.table), source
        assert (got.epsilon, got.delta) == (ref.epsilon, ref.delta)
    assert ref.table.num_rows >= 3


def test_batches_of_a_file_hold_only_the_needed_columns(tmp_path, small_batches):
    path = _csv(tmp_path)
    parts = list(table_data.batches(str(path), ["city", "steps"], ["steps"]))
    assert len(parts) > 10
    assert all(b.schema.names == ["city", "steps"] and b.schema.field("steps").type == pa.float64() for b in parts)
    assert sum(b.num_rows for b in parts) == 3000


def test_rows_are_compact_codes_and_the_distinct_values(tmp_path, small_batches):
    path = _csv(tmp_path)
    r = table_data.rows(str(path), ["city"], "user_id", ["steps"])
    memory = pacsv.read_csv(path)
    assert r.group.dtype == np.int32 and r.unit.dtype == np.int32 and r.values["steps"].dtype == np.float64
    assert r.keys.column("city").to_pylist() == memory.column("city").unique().to_pylist()
    assert len(r.unit_words) == len(memory.column("user_id").unique())
    cities = np.asarray(r.keys.column("city").to_pylist(), dtype=object)[r.group]
    assert list(cities) == memory.column("city").to_pylist()
    np.testing.assert_array_equal(r.values["steps"], memory.column("steps").to_numpy())


@pytest.mark.parametrize(
    "tail,message",
    [
        ("u1,oslo,1,abc,x\n", "must be numeric"),
        ("u1,oslo,1,,x\n", "column 'steps' has 1 null"),
        ("u1,oslo,1,NaN,x\n", "column 'steps' has 1 null"),  # pyarrow reads NaN in CSV text as a null
        ("u1,oslo,1\n", "not a readable CSV table"),
    ],
)
def test_bad_content_in_a_late_block_is_refused_by_name(tmp_path, small_batches, tail, message):
    path = _csv(tmp_path)
    with open(path, "a") as f:
        f.write(tail)
    for source in (str(path), io.BytesIO(path.read_bytes())):
        with pytest.raises(ValueError, match=message):
            table.release(
                jax.random.key(0),
                source,
                by="city",
                statistics=[table.sum("steps", 0, 10)],
                privacy_unit="user_id",
                max_groups_per_unit=1,
                max_rows_per_group=1,
                epsilon=1.0,
                delta=1e-6,
            )


def test_unknown_column_and_empty_stream_are_refused(tmp_path):
    kw = dict(by="city", statistics=[table.count()], epsilon=1.0, delta=1e-6)
    path = _csv(tmp_path, n=10)
    with pytest.raises(ValueError, match="unknown column.*nope"):
        table.release(jax.random.key(0), io.BytesIO(path.read_bytes()), **{**kw, "by": "nope"})
    with pytest.raises(ValueError, match="data: the table is empty"):
        table.release(jax.random.key(0), io.BytesIO(b"city,steps\n"), **kw)


def test_a_csv_file_missing_columns_is_refused_with_its_header(tmp_path):
    kw = dict(by="city", statistics=[table.sum("steps", 0, 10)], epsilon=1.0, delta=1e-6)
    comma = tmp_path / "comma.csv"
    comma.write_text("city,step\na,1\n")
    with pytest.raises(ValueError, match=r"unknown column\(s\) \['steps'\] in .*; the table has \['city', 'step'\]$"):
        table.release(jax.random.key(0), str(comma), **kw)
    semi = tmp_path / "semi.csv"
    semi.write_text("city;steps\na;1\n")
    with pytest.raises(ValueError, match=r"\['city', 'steps'\] .*looks ';'-separated"):
        table.release(jax.random.key(0), str(semi), **kw)
