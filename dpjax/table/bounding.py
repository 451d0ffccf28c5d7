"""Contribution bounding: each privacy unit keeps at most K groups and M rows per group.

The choice is uniformly random and keyed: a unit's (unit, group) pairs are ranked by the
priority ``H(H(bound key, unit), group)`` and the first ``K`` are kept; inside a kept pair the
rows, sorted by their values, are ranked by ``H(pair, rank)`` and the first ``M`` are kept
(:mod:`dpjax.table.keys`). Every draw is a function of (key, unit, group key, the multiset of
the unit's rows) — not of row order, of how the rows were read or partitioned — so any backend
that runs this function on all the rows of each unit (pyarrow here, a Spark task per bucket of
units) keeps the same rows. Vectorised: three ``lexsort`` passes and element-wise hashes, no
Python loop per row or unit.
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


def bound(bound_key, unit: np.ndarray | None, unit_words: np.ndarray | None, group: np.ndarray,
          group_words: np.ndarray, values: np.ndarray, max_groups: int, max_rows: int):
    """The rows each unit keeps.

    Args:
      bound_key: the key pair of the bounding draws (:meth:`KeyWords.bounding`).
      unit: ``uint64[n]`` unit identity per row (its 64-bit hash), or ``None``: each row its own unit.
      unit_words: ``uint32[n, 2]`` the same hash as two words.
      group: ``int64[n]`` group index per row; ``group_words``: ``uint32[G, 2]`` group key hashes.
      values: ``float64[n, k]`` the value columns (ties of the row order are broken by them).

    Returns:
      ``(rows, first)``: indices of the kept rows, and for each whether it is its unit's first
      kept row in its group (the one row a unit gives to a quantile; one per (unit, group)).
    """
    n = len(group)
    if unit is None:
        return np.arange(n), np.ones(n, bool)
    value_keys = [values[:, j] for j in range(values.shape[1] - 1, -1, -1)]
    order = np.lexsort((*value_keys, group, unit))
    u, g = unit[order], group[order]
    pair_start = _runs(u, g)
    rank = _rank_in_runs(pair_start).astype(np.uint32)
    gw = group_words[g]
    uw = unit_words[order]
    p0, p1 = _h(*_h(bound_key[0], bound_key[1], uw[:, 0], uw[:, 1]), gw[:, 0], gw[:, 1])
    # the pairs: keep each unit's max_groups pairs of highest priority (ties: by the group's hash)
    pair_id = np.cumsum(pair_start) - 1
    first_rows = np.flatnonzero(pair_start)
    pu, pp, pg0, pg1 = u[first_rows], p0[first_rows], gw[first_rows, 0], gw[first_rows, 1]
    porder = np.lexsort((pg1, pg0, pp, pu))
    prank = np.empty(len(first_rows), np.int64)
    prank[porder] = _rank_in_runs(_runs(pu[porder]))
    pair_kept = prank < max_groups
    # the rows of a kept pair: keep its max_rows rows of highest priority
    row_priority, _ = _h(p0, p1, rank, np.full(n, 1, np.uint32))
    rorder = np.lexsort((rank, row_priority, pair_id))
    rrank = np.empty(n, np.int64)
    rrank[rorder] = _rank_in_runs(_runs(pair_id[rorder]))
    kept = pair_kept[pair_id] & (rrank < max_rows)
    return order[kept], (rrank == 0)[kept]
