"""Contribution bounding: each privacy unit keeps at most K groups and M rows per group.

The choice is uniformly random and keyed: a unit's (unit, group) pairs are ranked by the
priority ``H(H(bound key, unit), group)`` and the first ``K`` are kept; inside a kept pair the
rows, sorted by their values, are ranked by ``H(pair, rank)`` and the first ``M`` are kept
(:mod:`dpjax.table.keys`). Every draw is a function of (key, unit, group key, the multiset of
the unit's rows) — not of row order, of how the rows were read or partitioned — so any backend
that runs this function on all the rows of each unit (pyarrow here, a Spark task per bucket of
units) keeps the same rows. Vectorised: the units come as dictionary codes (a hash pass, no
sort), the unit hashes are taken per distinct unit; one value sort over the rows (unit code, the
pair priority's top bits and the row index, packed in one int64; an ``argsort`` on all the
priority's bits where those tie), one ``lexsort`` over the rows of pairs with several rows only,
element-wise hashes; no Python loop per row or unit.
"""

from __future__ import annotations

import numpy as np

from dpjax.table.keys import _h

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


def bound(bound_key, unit: np.ndarray | None, unit_words: np.ndarray | None, group: np.ndarray,
          group_words: np.ndarray, values: np.ndarray, max_groups: int, max_rows: int):
    """The rows each unit keeps.

    Args:
      bound_key: the key pair of the bounding draws (:meth:`KeyWords.bounding`).
      unit: ``int64[n]`` unit code per row, an index into ``unit_words`` (one code per distinct
        unit id, below ``2**31``: the indices of a dictionary encoding), or ``None``: each row
        its own unit.
      unit_words: ``uint32[U, 2]`` the 64-bit hash of each code's unit id.
      group: ``int64[n]`` group index per row; ``group_words``: ``uint32[G, 2]`` group key hashes.
      values: ``float64[n, k]`` the value columns (ties of the row order are broken by them).

    Returns:
      ``(rows, first)``: indices of the kept rows, and for each whether it is its unit's first
      kept row in its group (the one row a unit gives to a quantile; one per (unit, group)).
    """
    n = len(group)
    if unit is None:
        return np.arange(n), np.ones(n, bool)
    code = np.asarray(unit, np.int64)
    # the group hash words per row, one column at a time (a 1-D take is ≈ 15× numpy's 2-D row gather)
    gw0, gw1 = (np.ascontiguousarray(group_words[:, j])[group] for j in (0, 1))
    u0, u1 = _h(bound_key[0], bound_key[1], unit_words[:, 0], unit_words[:, 1])  # per distinct unit
    p0, p1 = _h(u0[code], u1[code], gw0, gw1)
    # one sort: by unit, then pair priority; a unit's pairs come out in its order of choice (the
    # order of the units among themselves is irrelevant: aggregates are order-free integer sums)
    bits = _priority_bits(len(unit_words), n)
    if bits >= _MIN_PACKED_BITS:
        # a value sort (numpy's SIMD sort, about twice argsort's speed) of (unit code, the priority's
        # top bits, row index) packed in one int64; the row index comes back as the permutation
        row_bits = max(n - 1, 1).bit_length()
        packed = (code << (bits + row_bits)) | ((p0.astype(np.int64) >> (32 - bits)) << row_bits) | np.arange(n)
        packed.sort()
        order = packed & ((1 << row_bits) - 1)
        c, g = packed >> row_bits, group[order]
        pair_start = _runs(c, g)
    if bits < _MIN_PACKED_BITS or (~_runs(c) & pair_start).any():  # or two pairs' top bits tied: all 32 bits
        bits = 32
        composite = (code << 32) | p0.astype(np.int64)
        order = np.argsort(composite)
        c, g = composite[order], group[order]
        pair_start = _runs(c, g)
    if (~_runs(c) & pair_start).any():  # two of a unit's pairs drew the same priority: order them by group hash
        order = np.lexsort((gw1, gw0, composite))
        c, g = composite[order], group[order]
        pair_start = _runs(c, g)
    first_rows = np.flatnonzero(pair_start)
    pair_kept = _rank_in_runs(_runs(c[first_rows] >> bits)) < max_groups
    pair_id = np.cumsum(pair_start) - 1
    size = np.diff(np.append(first_rows, n))
    kept = pair_kept[pair_id].copy()
    first = np.ones(n, bool)
    # pairs of several rows: rank the rows by value (the multiset decides), draw their priorities, keep M
    multi = np.flatnonzero(size[pair_id] > 1)
    if len(multi):
        sub, pid = order[multi], pair_id[multi]
        value_keys = [values[sub, j] for j in range(values.shape[1] - 1, -1, -1)]
        by_value = np.lexsort((*value_keys, pid))
        multi, sub, pid = multi[by_value], sub[by_value], pid[by_value]
        rank = _rank_in_runs(_runs(pid)).astype(np.uint32)
        priority, _ = _h(p0[sub], p1[sub], rank, np.full(len(sub), 1, np.uint32))
        by_priority = np.lexsort((rank, priority, pid))
        rrank = np.empty(len(sub), np.int64)
        rrank[by_priority] = _rank_in_runs(_runs(pid[by_priority]))
        kept[multi] &= rrank < max_rows
        first[multi] = rrank == 0
    return order[kept], first[kept]
