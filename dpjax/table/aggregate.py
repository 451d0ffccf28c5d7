"""Per-group aggregates of the bounded rows, as exact integers.

Everything a release needs from the data is a few integer sums per group (see
:mod:`dpjax.table.statistics` for the fixed-point encoding of values): ``rows`` (kept rows),
``units`` (units with a kept row), per value domain ``(column, low, high)`` the sum of the
encoded clipped values and of the encoded squares, and per quantile tree the leaf counts of the
kept rows. Integer sums are exact and do not depend on order, so partial aggregates from
any partitioning (record batches, Spark tasks) add up to the same arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = ["aggregate", "merge", "component_values", "needed"]


def needed(statistics, integer: bool):
    """The aggregate arrays the statistics need.

    Args:
      statistics: the release's :class:`~dpjax.table.statistics.Statistic` list.
      integer: whether the kernel is integer-valued.

    Returns:
      ``{name: (statistic, kind) or None}``: ``rows`` and ``units`` (``None``: counted, no column), and per
      column and bounds ``S1`` (the sum of the stored integers), ``S2`` (of the stored squares) or ``tree``
      (the quantile's leaf histogram).
    """
    out = {"rows": None, "units": None}
    for s in statistics:
        if s.kind in ("sum", "mean", "variance"):
            out[f"S1:{s.bounds_key()}"] = (s, "S1")
        if s.kind == "variance":
            out[f"S2:{s.bounds_key()}"] = (s, "S2")
        if s.kind == "quantile":
            out[f"tree:{s.bounds_key()}:{s.depth}"] = (s, "tree")
    return out


def _group_sum(group, weights, size):
    """Exact int64 per-group sums of non-negative integers below 2**34 (two 17-bit halves through
    ``bincount``'s float64 accumulator, exact up to 2**36 rows)."""
    hi, lo = weights >> 17, weights & ((1 << 17) - 1)
    return (np.rint(np.bincount(group, hi.astype(np.float64), size)).astype(np.int64) << 17) + np.rint(
        np.bincount(group, lo.astype(np.float64), size)
    ).astype(np.int64)


def encode(stat, x: np.ndarray, integer: bool) -> np.ndarray:
    """``a = round((clip(x) − low)/u)``: the stored integer of each clipped value.

    Args:
      stat: the :class:`~dpjax.table.statistics.Statistic` whose bounds and step apply.
      x: the values, float64.
      integer: whether the kernel is integer-valued.

    Returns:
      int64 array of ``x``'s shape, in ``[0, 2**32]``.
    """
    a = np.clip(x, stat.low, stat.high)  # the one float64 temporary, worked on in place
    a -= stat.low
    a /= stat.unit(integer)
    return np.rint(a, out=a).astype(np.int64)


def aggregate(statistics, group: np.ndarray, first: np.ndarray, columns: dict, size: int, integer: bool):
    """The exact integer aggregates of the kept rows.

    Args:
      statistics: the release's :class:`~dpjax.table.statistics.Statistic` list.
      group: the kept rows' group indices in ``[0, size)``.
      first: whether each kept row is its unit's first in its group.
      columns: ``{column: values}`` of the kept rows.
      size: the number of groups.
      integer: whether the kernel is integer-valued.

    Returns:
      ``{name: int64 array over the groups}`` for each name of :func:`needed` (a quantile's tree
      ``[size, 2**depth]``).
    """
    out = {
        "rows": np.bincount(group, minlength=size).astype(np.int64),
        "units": np.bincount(group[first], minlength=size).astype(np.int64),
    }
    for name, spec in needed(statistics, integer).items():
        if spec is None:
            continue
        stat, kind = spec
        x = columns[stat.column]
        if kind == "tree":
            leaves = 1 << stat.depth
            t = np.clip((x - stat.low) / (stat.high - stat.low), 0.0, 1.0)
            leaf = np.minimum((t * leaves).astype(np.int64), leaves - 1)
            out[name] = np.bincount(group.astype(np.int64) * leaves + leaf, minlength=size * leaves).reshape(
                size, leaves
            )
            continue
        a = encode(stat, x, integer)
        if kind == "S1":
            out[name] = _group_sum(group, a, size)
        else:
            y = stat.low + a * stat.unit(integer) - stat.centre(integer)
            out[name] = _group_sum(group, np.rint(y * y / stat.square_unit(integer)).astype(np.int64), size)
    return out


def merge(parts: list[dict]) -> dict:
    """The aggregates of the union of disjoint sets of rows (the sum of their aggregates).

    Args:
      parts: the aggregates of each set (:func:`aggregate`), with the same names and groups.

    Returns:
      The summed aggregates.
    """
    return {k: np.sum([p[k] for p in parts], axis=0) for k in parts[0]}


def component_values(component, stat, agg: dict, integer: bool) -> np.ndarray:
    """The true (float64) values of a scalar component per group, from the integer aggregates.

    Args:
      component: a :class:`~dpjax.table.statistics.Component` of ``stat`` (not an exponential mechanism).
      stat: the statistic it measures for.
      agg: the aggregates (:func:`aggregate`).
      integer: whether the kernel is integer-valued.

    Returns:
      float64 array over the groups.
    """
    rows = agg["rows"].astype(np.float64)
    if component.name in ("rows", "units"):
        return agg[component.name].astype(np.float64)
    s1 = agg[f"S1:{stat.bounds_key()}"].astype(np.float64) * stat.unit(integer)
    if component.name.startswith("sum:"):
        return stat.low * rows + s1
    if component.name.startswith("centred:"):
        return s1 + (stat.low - stat.centre(integer)) * rows
    # Σ((x − mid)² − h), exactly in integers: h is 2**31 stored steps (integer values: an integer)
    h = round(stat.square_centre(integer) / stat.square_unit(integer))
    return (agg[f"S2:{stat.bounds_key()}"] - h * agg["rows"]).astype(np.float64) * stat.square_unit(integer)
