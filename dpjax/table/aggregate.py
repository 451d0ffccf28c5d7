"""Per-group aggregates of the bounded rows, as exact integers.

Everything a release needs from the data is a few integer sums per group (see
:mod:`dpjax.table.statistics` for the fixed-point encoding of values): ``rows`` (kept rows),
``units`` (units with a kept row), per value domain ``(column, low, high)`` the sum of the
encoded clipped values and of the encoded squares, and per quantile tree the leaf counts of the
units' first rows. Integer sums are exact and do not depend on order, so partial aggregates from
any partitioning (record batches, Spark tasks) add up to the same arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = ["aggregate", "merge", "component_values", "needed"]


def needed(statistics, integer: bool):
    """The aggregate arrays the statistics need: ``{name: (column, low, high, kind, extra)}``."""
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
    """``a = round((clip(x) − low)/u)``: the stored integer of each clipped value."""
    a = np.clip(x, stat.low, stat.high)  # the one float64 temporary, worked on in place
    a -= stat.low
    a /= stat.unit(integer)
    return np.rint(a, out=a).astype(np.int64)


def aggregate(statistics, group: np.ndarray, first: np.ndarray, columns: dict, size: int, integer: bool):
    """The integer aggregates of the kept rows (``group``: their group indices in ``[0, size)``,
    ``first``: whether each is its unit's first in its group, ``columns``: their values)."""
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
            t = np.clip((x[first] - stat.low) / (stat.high - stat.low), 0.0, 1.0)
            leaf = np.minimum((t * leaves).astype(np.int64), leaves - 1)
            out[name] = np.bincount(group[first].astype(np.int64) * leaves + leaf, minlength=size * leaves).reshape(
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
    """The aggregates of the union of disjoint sets of rows (the sum of their aggregates)."""
    return {k: np.sum([p[k] for p in parts], axis=0) for k in parts[0]}


def component_values(component, stat, agg: dict, integer: bool) -> np.ndarray:
    """The true (float64) values of a scalar component per group, from the integer aggregates."""
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
