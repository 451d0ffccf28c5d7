"""The table release's lean paths at scale (issue 18), exercised on small inputs by shrinking their
sizes: the bounding run per bucket of units with its per-row hash in chunks, and the jitted hash
in fixed chunks — each must give exactly what the one-piece computation gives."""

import jax
import numpy as np
import pyarrow as pa
import pytest

from dpjax import table
from dpjax.table import bounding, keys
from dpjax.table.data import group_index, unit_hashes
from dpjax.table.keys import KeyWords


def _data(n=6000, seed=3):
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "u": rng.integers(0, 400, n),
            "g": rng.integers(0, 30, n),
            "h": rng.integers(0, 2, n),
            "x": rng.integers(0, 4, n) * 1.0,
        }
    )  # few values: many tied rows inside a pair


def test_bounding_per_bucket_keeps_the_rows_of_one_piece(monkeypatch):
    """Bucketed (about 40 buckets of units) and chunked (hash chunks of 128 rows), the bounding
    keeps the same multiset of (unit, group, value, first) as in one piece."""
    d = _data()
    prep = group_index(d, ["g"])
    code, words = unit_hashes(d, "u")
    values = d.column("x").to_numpy()[:, None]

    def kept():
        rows, first = bounding.bound(
            KeyWords(jax.random.key(5)).bounding(), code, words, prep.group, prep.group_words, values, 3, 2
        )
        assert rows.dtype == np.int32
        out = np.stack([code[rows], prep.group[rows], values[rows, 0], first], axis=1)
        return out[np.lexsort(out.T[::-1])]

    whole = kept()
    monkeypatch.setattr(bounding, "_BUCKET_ROWS", 150)
    monkeypatch.setattr(bounding, "_CHUNK", 128)
    assert np.array_equal(kept(), whole)
    assert len(whole) < len(d)  # the bounds did drop rows


@pytest.mark.slow
def test_release_per_bucket_is_bitwise_the_release_in_one_piece(monkeypatch):
    d = _data(seed=4)
    kw = dict(
        by=["g", "h"],
        statistics=[
            table.count(),
            table.count_units(),
            table.mean("x", low=0, high=3),
            table.quantile("x", 0.5, low=0, high=4),
        ],
        privacy_unit="u",
        max_groups_per_unit=2,
        max_rows_per_group=2,
        epsilon=2.0,
        delta=1e-6,
    )
    whole = table.release(jax.random.key(8), d, **kw).table
    monkeypatch.setattr(bounding, "_BUCKET_ROWS", 200)
    monkeypatch.setattr(bounding, "_CHUNK", 64)
    assert table.release(jax.random.key(8), d, **kw).table.equals(whole)


def test_jitted_hash_in_chunks_is_the_numpy_hash(monkeypatch):
    """Inputs longer than a chunk are hashed chunk by chunk (the last one padded), with or without
    the gathers of their words fused in: numpy's bits."""
    from dpjax.random import threefry2x32

    monkeypatch.setattr(keys, "_JIT_CHUNK", keys._JIT_MIN)
    rng = np.random.default_rng(2)
    n = 2 * keys._JIT_MIN + 5
    k0, k1, x0, x1 = (rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) for _ in range(4))
    with np.errstate(over="ignore"):
        want = threefry2x32(k0, k1, x0, x1)
        want_scalar = threefry2x32(np.uint32(7), np.uint32(9), x0, x1)
    assert all(np.array_equal(a, b) for a, b in zip(keys._h(k0, k1, x0, x1), want))
    assert all(np.array_equal(a, b) for a, b in zip(keys._h(7, 9, x0, x1), want_scalar))
    # the gathers fused into the jitted hash: tables of odd sizes (padded), indices in chunks
    i, j = rng.integers(0, 1001, n), rng.integers(0, 37, n)
    with np.errstate(over="ignore"):
        want = threefry2x32(k0[:1001][i], k1[:1001][i], x0[:37][j], x1[:37][j])
    got = keys._h_gathered(k0[:1001], k1[:1001], x0[:37], x1[:37], i, j)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


@pytest.mark.slow
def test_integer_ids_kept_as_read_and_encoded_once(tmp_path, monkeypatch):
    """An integer column with nearly one distinct value per row (unit ids) is held as read and
    encoded once at the end; a column of few values is encoded batch by batch. Either way each
    row's code points at its own value (a null at the dictionary's null), and a Parquet file read
    97 rows at a time releases bitwise what the table in memory releases."""
    import pyarrow.parquet as pq

    from dpjax.table import data as table_data

    rng = np.random.default_rng(6)
    n = 4000
    ids = pa.array(rng.integers(0, 10**9, n), mask=rng.random(n) < 0.02)
    few = pa.array(rng.integers(0, 5, n))
    for col, raw in ((ids, True), (few, False)):
        codes = table_data._Codes()
        for start in range(0, n, 97):
            codes.add(col.slice(start, 97))
        assert codes.raw is raw
        code, dictionary = codes.finish()
        assert code.dtype == np.int32
        assert dictionary.take(pa.array(code)).to_pylist() == col.to_pylist()

    d = _data(seed=7).append_column(
        "id", pa.array(rng.integers(0, 10**9, 400)).take(pa.array(rng.integers(0, 400, 6000)))
    )
    path = tmp_path / "d.parquet"
    pq.write_table(d, path)
    kw = dict(
        by="g",
        statistics=[table.count(), table.count_units(), table.sum("x", low=0, high=3)],
        privacy_unit="id",
        max_groups_per_unit=2,
        max_rows_per_group=1,
        epsilon=1.0,
        delta=1e-6,
    )
    whole = table.release(jax.random.key(9), d, **kw).table
    monkeypatch.setattr(table_data, "PARQUET_BATCH_ROWS", 97)
    assert table.release(jax.random.key(9), str(path), **kw).table.equals(whole)


def test_dense_integer_codes_point_at_their_values():
    """An integer column held in memory is encoded by counting over its range (no hash table): each
    row's code points at its own value, for narrow, negative and above-2**63 values, over several
    chunks; a column with nulls or a range far wider than its rows is left to the hash encoding."""
    from dpjax.table import data as table_data

    rng = np.random.default_rng(8)
    cases = [
        pa.array(rng.integers(-128, 128, 3000).astype(np.int8), pa.int8()),
        pa.array(rng.integers(-(2**62), -(2**62) + 500, 3000), pa.int64()),
        pa.array(rng.integers(0, 5000, 3000).astype(np.uint64) + np.uint64(2**64 - 6000), pa.uint64()),
    ]
    for col in cases:
        chunked = pa.chunked_array([col.slice(0, 1000), col.slice(1000, 0), col.slice(1000)])
        code, dictionary = table_data._dense_codes(chunked)
        assert code.dtype == np.int32 and dictionary.type == col.type
        assert dictionary.to_pylist() == sorted(set(col.to_pylist()))
        assert dictionary.take(pa.array(code)).to_pylist() == col.to_pylist()
    assert table_data._dense_codes(pa.chunked_array([pa.array([1, None, 3])])) is None
    assert table_data._dense_codes(pa.chunked_array([pa.array([0, 2**40])])) is None
