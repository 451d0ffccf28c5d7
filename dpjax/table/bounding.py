"""Contribution bounding: each privacy unit keeps at most K groups and M rows per group.

The choice is uniformly random and keyed: a unit's (unit, group) pairs are ranked by the
priority ``H(H(bound key, unit), group)`` and the first ``K`` are kept; inside a kept pair the
rows, sorted by their values, are ranked by ``H(pair, rank)`` and the first ``M`` are kept
(:mod:`dpjax.table.keys`). Every draw is a function of (key, unit, group key, the multiset of
the unit's rows) — not of row order, of how the rows were read or partitioned — so any backend
that runs this function on all the rows of each unit (pyarrow here, a Spark task per bucket of
units) keeps the same rows (a unit's pairs tied on the priority are ordered by their group's
hash). Vectorised: the units come as dictionary codes (a hash pass or a count, no sort), the unit
hashes are taken per distinct unit; the rows are cut into buckets of consecutive unit codes (one
radix sort of the bucket numbers) and in each bucket a unit's K first pairs are found — for K ≤ 8
by K rounds of a per-unit minimum of the rows' 64-bit order keys (priority, group rank), a few
passes over the rows each and no sort; above, by one value sort over the bucket's rows (unit code,
the pair priority's top bits and the row index, packed in one int64; an ``argsort`` on all the
priority's bits where those tie) — then one ``lexsort`` over the rows of kept pairs with several
rows only, element-wise hashes in fixed chunks; no Python loop per row or unit, and no per-row
temporary larger than a bucket's beside the bucket permutation (``int32``).
"""

from __future__ import annotations

import numpy as np

from dpjax.table.keys import _h, _h_gathered

__all__ = ["bound"]


def _runs(*keys):
    """Start flags of the runs of equal consecutive entries of the (sorted) ``keys``."""
    n = len(keys[0])
    start = np.zeros(n, bool)
    if n:
        start[0] = True
        for k in keys:
            start[1:] |= k[1:] != k[:-1]
    return start


def _rank_in_runs(start):
    """0, 1, 2, … inside each run (``start`` flags the runs' first entries)."""
    idx = np.arange(len(start))
    return idx - np.maximum.accumulate(np.where(start, idx, 0))


#: the packed sort is used when at least this many top bits of the priority fit beside the unit
#: code and the row index (ties of those bits fall back to the sort on all 32)
_MIN_PACKED_BITS = 16


def _priority_bits(units: int, n: int) -> int:
    """How many top bits of the 32-bit pair priority fit in an int64 beside a unit code (``units``
    distinct) and a row index (``n`` rows)."""
    return min(32, 63 - max(units - 1, 1).bit_length() - max(n - 1, 1).bit_length())


#: rows per bucket of units: the bounding runs on one bucket of units at a time (its temporaries, a few
#: tens of MB, are a bucket's, and its unit codes and row indices leave most of an int64 to the priority)
_BUCKET_ROWS = 1 << 20
#: rows per chunk of the per-row hash (its gathers and words are a chunk's)
_CHUNK = 1 << 20


def _index_dtype(n: int):
    return np.int32 if n < 2**31 else np.int64


def _pair_priority(unit_pair, code, group, gw0, gw1):
    """``(p0, p1)``: the priority ``H(H(bound key, unit), group)`` of each row's (unit, group) pair."""
    return _h_gathered(unit_pair[0], unit_pair[1], gw0, gw1, code, group)


def bound(
    bound_key,
    unit: np.ndarray | None,
    unit_words: np.ndarray | None,
    group: np.ndarray,
    group_words: np.ndarray,
    values: np.ndarray,
    max_groups: int,
    max_rows: int,
):
    """The rows each unit keeps: at most ``max_groups`` groups per unit, ``max_rows`` rows per (unit, group).

    A unit's groups and rows are chosen uniformly at random by keyed priorities of (unit, group, rank). The
    units are cut into buckets of consecutive codes of about ``_BUCKET_ROWS`` rows (a radix sort of the bucket
    numbers) and each bucket is bounded on its own: a unit's rows are all in one bucket and its choice depends
    on them only, so the kept rows are the same whatever the cut — only their order differs, which no
    aggregate depends on.

    Args:
      bound_key: the key pair of the bounding draws (:meth:`KeyWords.bounding`).
      unit: ``int[n]`` unit code per row, an index into ``unit_words`` (one code per distinct
        unit id, below ``2**31``: the indices of a dictionary encoding), or ``None``: each row
        its own unit.
      unit_words: ``uint32[U, 2]`` the 64-bit hash of each code's unit id.
      group: ``int[n]`` group index per row.
      group_words: ``uint32[G, 2]`` group key hashes.
      values: ``float64[n, k]`` the value columns (ties of the row order are broken by them).
      max_groups: the most groups a unit keeps.
      max_rows: the most rows a unit keeps in one group.

    Returns:
      ``(rows, first)``: indices of the kept rows (``int32`` below ``2**31`` rows), and for each
      whether it is its unit's first kept row in its group (the one row a unit gives to a
      quantile; one per (unit, group)).
    """
    n = len(group)
    if unit is None:
        return np.arange(n, dtype=_index_dtype(n)), np.ones(n, bool)
    units = len(unit_words)
    # the group hash words per group, one column at a time (a 1-D take is cheaper than numpy's 2-D row gather)
    gw0, gw1 = (np.ascontiguousarray(group_words[:, j]) for j in (0, 1))
    unit_pair = _h(bound_key[0], bound_key[1], unit_words[:, 0], unit_words[:, 1])  # per distinct unit
    grank = np.empty(len(gw0), np.uint64)  # each group's rank by (gw0, gw1): a unit's pairs tie on it
    grank[np.lexsort((gw1, gw0))] = np.arange(len(gw0), dtype=np.uint64)
    buckets = max(min(-(-n // _BUCKET_ROWS), units, 1 << 16), 1)  # numbered in uint16
    if buckets == 1:
        rows, first = _bound_units(unit_pair, unit, group, gw0, gw1, grank, values, max_groups, max_rows, units)
        return rows.astype(_index_dtype(n), copy=False), first
    bucket = (np.asarray(unit, np.int64) * buckets // units).astype(np.uint16)
    order = np.argsort(bucket, kind="stable").astype(_index_dtype(n))  # a radix sort: rows by bucket
    ends = np.cumsum(np.bincount(bucket, minlength=buckets))
    del bucket
    kept, firsts = [], []
    for b in range(buckets):
        rows = order[ends[b - 1] if b else 0 : ends[b]]
        if not len(rows):
            continue
        lo = b * units // buckets + (b * units % buckets > 0)  # the bucket's first code: ceil(b·U/B)
        hi = (b + 1) * units // buckets + ((b + 1) * units % buckets > 0)
        pair = (unit_pair[0][lo:hi], unit_pair[1][lo:hi])
        code = unit[rows] - lo
        r, f = _bound_units(pair, code, group[rows], gw0, gw1, grank, values[rows], max_groups, max_rows, hi - lo)
        kept.append(rows[r])
        firsts.append(f)
    return np.concatenate(kept), np.concatenate(firsts)


#: up to this many groups per unit, a unit's groups are chosen by ``max_groups`` rounds of a per-unit
#: minimum (:func:`_pairs_by_rounds`, no sort); above it, by one sort of the rows (:func:`_pairs_by_sort`)
_MAX_ROUNDS = 8
#: the 64-bit "no pair left" mark of a unit in a round (no order key reaches it: its low word is
#: above any group rank) and the order key of a row already chosen
_EMPTY, _TAKEN = np.uint64(2**64 - 2), np.uint64(2**64 - 1)


def _bound_units(unit_pair, code, group, gw0, gw1, grank, values, max_groups: int, max_rows: int, units: int):
    """:func:`bound` of rows whose unit codes are below ``units`` (``unit_pair``: each unit's key
    pair; ``grank``: each group's rank in the order of its hash words, which breaks ties of a unit's
    pair priorities). A unit keeps its ``max_groups`` pairs of smallest (priority, group rank), then
    inside each kept pair the rows of :func:`_rows_in_pairs`."""
    if max_groups <= _MAX_ROUNDS:
        rows, pid = _pairs_by_rounds(unit_pair, code, group, gw0, gw1, grank, max_groups, units)
    else:
        rows, pid = _pairs_by_sort(unit_pair, code, group, gw0, gw1, max_groups, units)
    return _rows_in_pairs(unit_pair, code, group, gw0, gw1, values, rows, pid, max_rows)


def _pairs_by_rounds(unit_pair, code, group, gw0, gw1, grank, max_groups: int, units: int):
    """``(rows, pair id)`` of the rows of each unit's ``max_groups`` first pairs, in rounds: each
    row's order key ``priority · 2^32 + group rank`` (equal for the rows of one pair, distinct
    between a unit's pairs), and in round ``r`` each unit's smallest key not yet taken (an unbuffered
    ``minimum.at`` over the units) marks its ``r``-th pair — a few passes over the rows per round
    instead of a sort of them. The pair id is ``unit · max_groups + r``."""
    n = len(group)
    order_key = np.empty(n, np.uint64)
    for s in range(0, n, _CHUNK):
        sl = slice(s, s + _CHUNK)
        p0 = _pair_priority(unit_pair, code[sl], group[sl], gw0, gw1)[0]
        order_key[sl] = (p0.astype(np.uint64) << np.uint64(32)) | grank[group[sl]]
    rnd = np.full(n, max_groups, np.int8)
    smallest = np.empty(units, np.uint64)
    for r in range(max_groups):
        smallest.fill(_EMPTY)
        np.minimum.at(smallest, code, order_key)
        hit = order_key == smallest[code]
        rnd[hit] = r
        order_key[hit] = _TAKEN
    del order_key
    rows = np.flatnonzero(rnd < max_groups)
    return rows, code[rows].astype(np.int64) * max_groups + rnd[rows]


def _pairs_by_sort(unit_pair, code, group, gw0, gw1, max_groups: int, units: int):
    """``(rows, pair id)`` of the rows of each unit's ``max_groups`` first pairs, by one sort of the
    rows by (unit, pair priority); a unit's pairs come out in its order of choice (the order of the
    units among themselves is irrelevant: aggregates are order-free integer sums)."""
    n = len(group)
    code = np.asarray(code, np.int64)
    bits = _priority_bits(units, n)
    if bits >= _MIN_PACKED_BITS:
        # a value sort (numpy's SIMD sort, faster than argsort) of (unit code, the priority's
        # top bits, row index) packed in one int64; the row index comes back as the permutation
        row_bits = max(n - 1, 1).bit_length()
        packed = np.empty(n, np.int64)
        for s in range(0, n, _CHUNK):
            sl = slice(s, s + _CHUNK)
            p0 = _pair_priority(unit_pair, code[sl], group[sl], gw0, gw1)[0]
            packed[sl] = (
                (code[sl] << (bits + row_bits))
                | ((p0.astype(np.int64) >> (32 - bits)) << row_bits)
                | np.arange(s, min(s + _CHUNK, n))
            )
        packed.sort()
        order = packed & ((1 << row_bits) - 1)
        packed >>= row_bits
        c, g = packed, group[order]
        del packed
        pair_start = _runs(c, g)
    if bits < _MIN_PACKED_BITS or (~_runs(c) & pair_start).any():  # or two pairs' top bits tied: all 32 bits
        bits = 32
        composite = (code << 32) | _pair_priority(unit_pair, code, group, gw0, gw1)[0].astype(np.int64)
        order = np.argsort(composite)
        c, g = composite[order], group[order]
        pair_start = _runs(c, g)
        if (~_runs(c) & pair_start).any():  # two of a unit's pairs drew the same priority: order them by group hash
            order = np.lexsort((gw1[group], gw0[group], composite))
            c, g = composite[order], group[order]
            pair_start = _runs(c, g)
    del g
    first_rows = np.flatnonzero(pair_start)
    pair_kept = _rank_in_runs(_runs(c[first_rows] >> bits)) < max_groups
    del c
    pair_id = np.cumsum(pair_start, dtype=np.int64) - 1
    kept = np.flatnonzero(pair_kept[pair_id])
    return order[kept], pair_id[kept]


def _rows_in_pairs(unit_pair, code, group, gw0, gw1, values, rows, pid, max_rows: int):
    """``(rows, first)`` kept of the rows ``rows`` of the kept pairs (``pid``: their pair ids): a
    pair's rows, sorted by their values (the multiset decides), draw priorities ``H(pair, rank)``
    and the first ``max_rows`` are kept; ``first`` marks the first of each pair (a row alone in its
    pair is kept, first)."""
    multi = np.flatnonzero(np.bincount(pid)[pid] > 1)
    keep = np.ones(len(rows), bool)
    first = np.ones(len(rows), bool)
    if len(multi):
        sub, pid = rows[multi], pid[multi]
        value_keys = [values[sub, j] for j in range(values.shape[1] - 1, -1, -1)]
        by_value = np.lexsort((*value_keys, pid))
        multi, sub, pid = multi[by_value], sub[by_value], pid[by_value]
        rank = _rank_in_runs(_runs(pid)).astype(np.uint32)
        p0, p1 = _pair_priority(unit_pair, code[sub], group[sub], gw0, gw1)
        priority, _ = _h(p0, p1, rank, np.full(len(sub), 1, np.uint32))
        by_priority = np.lexsort((rank, priority, pid))
        rrank = np.empty(len(sub), np.int64)
        rrank[by_priority] = _rank_in_runs(_runs(pid[by_priority]))
        keep[multi] = rrank < max_rows
        first[multi] = rrank == 0
    return rows[keep], first[keep]
