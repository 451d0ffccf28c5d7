"""The statistics of a table release, what each needs aggregated, and its sensitivity.

A statistic is a small frozen description (``count()``, ``sum("steps", low, high)``, …).
After contribution bounding a privacy unit holds at most ``K = max_groups_per_unit``
groups and at most ``M = max_rows_per_group`` rows in each. Every statistic is released
as one or more noisy *components* per group; a component has a per-group sensitivity ``s``
(how far adding or removing one unit moves it in one group) and a *multiplicity* ``m``
(how many of its elements per group one unit can move, each by at most ``s``). Removing a
unit therefore moves at most ``K·m`` elements of a component, each by at most ``s``: the
release of the component is dominated by ``K·m`` compositions of the kernel at sensitivity
``s`` (for Gaussian noise, the L2 sensitivity ``√(K·m)·s``; for Laplace the L1 ``K·m·s``).

| statistic | components (sensitivity, multiplicity) | released value |
|---|---|---|
| ``count()`` | rows (M, 1) | noisy number of kept rows |
| ``count_units()`` | units (1, 1) | noisy number of units with a kept row |
| ``sum(c, lo, hi)`` | Σx (M·max(|lo|,|hi|), 1) | noisy sum of values clipped to [lo, hi] |
| ``mean(c, lo, hi)`` | rows (M, 1), Σ(x−mid) (M·r, 1) | mid + noisy Σ(x−mid) / max(noisy rows, 1), clipped to [lo, hi] |
| ``variance(c, lo, hi)`` | rows (M, 1), Σ(x−mid) (M·r, 1), Σ(x−mid)² (M·r², 1) | noisy second moment − noisy mean², clipped to [0, r²] |
| ``quantile(c, q, lo, hi)`` | tree node counts (1, depth) | descent of a noisy binary tree |

``mid`` is the middle of [lo, hi] (rounded down to an integer for integer-valued kernels) and
``r = max(mid − lo, hi − mid)``: centring shrinks the sensitivity of the sums that mean and
variance use when [lo, hi] is far from 0. Mean and variance need a noisy row count: components
with the same name are drawn once per release and shared (``count()``, ``mean`` and
``variance`` of one release use the same noisy row count, paid for once).

**Quantile**: the binary tree of depth ``D`` (default 10) over [lo, hi] cut into ``2**D`` equal
leaves. Each unit contributes **one** value per kept group (its first kept row in the keyed
random order), so it moves one node per level by 1: multiplicity D, sensitivity 1. Every node
count gets the kernel's noise (drawn only for the nodes the descent visits; the noise of a node
is keyed by (key, component, group, node), so this is the release of the whole noisy tree). The
descent goes from the root to a leaf, at each node choosing the child where the target rank
falls among the two noisy child counts (clipped at 0) — the quantile-tree method of PipelineDP
and of Qardaji, Yang & Li ("Understanding hierarchical methods for differentially private
histograms", VLDB 2013); the answer is the leaf's point at the remaining rank, a post-processing
of the noisy tree, whose privacy is exactly that of its node counts.

Sums are aggregated exactly, as integers: a clipped value ``x`` is stored as
``a = round((x − lo)/u)`` with ``u = (hi − lo)/2**32`` (``u = 1`` and integer values for
integer-valued kernels), and the square term as ``round((x̃ − mid)²/v)`` with ``v = r²/2**32``
(``v = 1``). Integer sums do not depend on the order of the rows or on how a backend partitions
them: a Spark run and a pyarrow run aggregate to the same integers. ``x̃ = lo + a·u`` lies in
[lo, hi], so the sensitivities above hold for what is summed.
"""

from __future__ import annotations

import ast
import dataclasses
import math

import numpy as np

__all__ = ["Statistic", "Component", "count", "count_units", "sum", "mean", "variance", "quantile"]

_FRACTION_BITS = 32


@dataclasses.dataclass(frozen=True)
class Component:
    """One noisy quantity per group: ``name`` (an aggregate), per-group sensitivity ``s``,
    ``multiplicity`` (elements per group one unit moves), ``elements`` (noisy elements per group)."""

    name: str
    sensitivity: float
    multiplicity: int
    elements: int = 1


@dataclasses.dataclass(frozen=True)
class Statistic:
    """A statistic of a table release; build with :func:`count`, :func:`count_units`,
    :func:`sum`, :func:`mean`, :func:`variance`, :func:`quantile`."""

    kind: str
    column: str | None = None
    low: float | None = None
    high: float | None = None
    q: float | None = None
    depth: int = 10

    @property
    def name(self) -> str:
        """The output column: ``count``, ``count_units``, ``sum_<col>``, ``quantile_<q>_<col>``…"""
        if self.kind in ("count", "count_units"):
            return self.kind
        if self.kind == "quantile":
            return f"quantile_{self.q:g}_{self.column}"
        return f"{self.kind}_{self.column}"

    # -- the value domain ------------------------------------------------------------------
    def bounds_key(self):
        """The aggregates of a column are shared between statistics with the same bounds."""
        return (self.column, float(self.low), float(self.high))

    def centre(self, integer: bool) -> float:
        mid = (self.low + self.high) / 2
        return float(math.floor(mid)) if integer else mid

    def radius(self, integer: bool) -> float:
        c = self.centre(integer)
        return max(c - self.low, self.high - c)

    def unit(self, integer: bool) -> float:
        """The integer step ``u`` of the stored clipped values."""
        return 1.0 if integer else (self.high - self.low) / 2.0**_FRACTION_BITS

    def square_unit(self, integer: bool) -> float:
        return 1.0 if integer else self.radius(integer) ** 2 / 2.0**_FRACTION_BITS

    # -- what is released ------------------------------------------------------------------
    def components(self, max_rows: int, integer: bool) -> list[Component]:
        """The noisy components of this statistic (sensitivities for ``max_rows`` rows per group)."""
        m = max_rows
        if self.kind == "count":
            return [Component("rows", m, 1)]
        if self.kind == "count_units":
            return [Component("units", 1, 1)]
        if self.kind == "sum":
            return [Component(f"sum:{self.bounds_key()}", m * max(abs(self.low), abs(self.high)), 1)]
        r = self.radius(integer)
        centred = Component(f"centred:{self.bounds_key()}:{integer}", m * r, 1)
        if self.kind == "mean":
            return [Component("rows", m, 1), centred]
        if self.kind == "variance":
            return [Component("rows", m, 1), centred, Component(f"squares:{self.bounds_key()}:{integer}", m * r * r, 1)]
        return [Component(f"tree:{self.bounds_key()}:{self.depth}", 1, self.depth, 2 ** (self.depth + 1) - 2)]

    def finish(self, noisy: list[np.ndarray], integer: bool) -> np.ndarray:
        """The released column from the noisy components (post-processing only)."""
        if self.kind in ("count", "count_units", "sum"):
            return noisy[0]
        n = np.maximum(noisy[0], 1.0)
        c, r = self.centre(integer), self.radius(integer)
        mean = noisy[1] / n
        if self.kind == "mean":
            return np.clip(c + mean, self.low, self.high)
        return np.clip(noisy[2] / n - mean**2, 0.0, r * r)


_COMPONENT_WORDS = {"sum": "sum", "centred": "centred sum", "squares": "centred sum of squares",
                    "tree": "quantile tree"}


def component_label(name: str) -> str:
    """A reader's label for a component name of :meth:`Statistic.components` (``"sum:('steps', -2.0, 2.0)"`` →
    ``"sum of steps in [-2, 2]"``); names without a column (``rows``, ``units``, ``selection``) as they are."""
    kind, _, rest = name.partition(":")
    if kind not in _COMPONENT_WORDS:
        return name
    key, _, extra = rest.rpartition(")")
    column, low, high = ast.literal_eval(key + ")")
    depth = f" (depth {extra[1:]})" if kind == "tree" else ""
    return f"{_COMPONENT_WORDS[kind]} of {column} in [{low:.15g}, {high:.15g}]{depth}"


def _column(name, column):
    if not isinstance(column, str) or not column:
        raise ValueError(f"{name}: column must be a column name (a non-empty string), got {column!r}")


def _bounds(name, low, high):
    for label, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
            raise ValueError(f"{name}: {label} must be a finite number, got {v!r}")
    if not low < high:
        raise ValueError(f"{name}: low must be below high, got low={low!r} > high={high!r}" if low > high
                         else f"{name}: low must be below high, got low = high = {low!r}")
    return float(low), float(high)


def count() -> Statistic:
    """The number of (kept) rows per group."""
    return Statistic("count")


def count_units() -> Statistic:
    """The number of privacy units per group."""
    return Statistic("count_units")


def sum(column: str, low: float, high: float) -> Statistic:  # noqa: A001 - the contract's name
    """The sum of ``column`` per group, each value clipped to ``[low, high]``."""
    _column("sum", column)
    return Statistic("sum", column, *_bounds(f"sum({column!r})", low, high))


def mean(column: str, low: float, high: float) -> Statistic:
    """The mean of ``column`` per group (values clipped to ``[low, high]``)."""
    _column("mean", column)
    return Statistic("mean", column, *_bounds(f"mean({column!r})", low, high))


def variance(column: str, low: float, high: float) -> Statistic:
    """The (population) variance of ``column`` per group (values clipped to ``[low, high]``)."""
    _column("variance", column)
    return Statistic("variance", column, *_bounds(f"variance({column!r})", low, high))


def quantile(column: str, q: float, low: float, high: float, *, depth: int = 10) -> Statistic:
    """The ``q``-quantile of ``column`` per group on ``[low, high]`` (resolution ``(high − low)/2**depth``)."""
    _column("quantile", column)
    if isinstance(q, bool) or not isinstance(q, (int, float, np.floating)) or not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile({column!r}): q must be in [0, 1], got {q!r}")
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or not 1 <= depth <= 20:
        raise ValueError(f"quantile({column!r}): depth must be an integer in [1, 20], got {depth!r}")
    return Statistic("quantile", column, *_bounds(f"quantile({column!r})", low, high), q=float(q), depth=int(depth))


def split(text: str) -> list[str]:
    """The items of a comma-separated list of the command line, quoted as in CSV: a double-quoted
    stretch keeps its commas (``"a,b",c`` → ``a,b`` and ``c``; ``sum:"a,b":0:9`` → ``sum:a,b:0:9``), and
    ``""`` inside it is one quote; items are stripped, empty ones dropped.

    Raises:
      ValueError: a quote left open.
    """
    items, item, quoted, i = [], [], False, 0
    text = str(text)
    while i < len(text):
        ch = text[i]
        if ch == '"':
            if quoted and text[i + 1:i + 2] == '"':
                item.append('"')
                i += 1
            else:
                quoted = not quoted
        elif ch == "," and not quoted:
            items.append("".join(item))
            item = []
        else:
            item.append(ch)
        i += 1
    if quoted:
        raise ValueError(f"a quote is left open in {text!r}")
    items.append("".join(item))
    return [x.strip() for x in items if x.strip()]


def parse(spec: str) -> Statistic:
    """A statistic from its command-line spelling: ``count``, ``count_units``,
    ``sum:COL:LOW:HIGH``, ``mean:COL:LOW:HIGH``, ``variance:COL:LOW:HIGH``, ``quantile:COL:Q:LOW:HIGH``
    (the numbers are the last fields, so ``COL`` may hold colons; commas by quoting, :func:`split`)."""
    parts = str(spec).strip().split(":")
    kind, args = parts[0], parts[1:]
    try:
        if kind in ("count", "count_units") and not args:
            return count() if kind == "count" else count_units()
        if kind in ("sum", "mean", "variance") and len(args) >= 3:
            return {"sum": sum, "mean": mean, "variance": variance}[kind](":".join(args[:-2]), float(args[-2]),
                                                                        float(args[-1]))
        if kind == "quantile" and len(args) >= 4:
            return quantile(":".join(args[:-3]), float(args[-3]), float(args[-2]), float(args[-1]))
    except ValueError as exc:
        raise ValueError(f"statistic {spec!r}: {exc}") from None
    raise ValueError(f"statistic {spec!r}: expected count, count_units, sum:COL:LOW:HIGH, mean:COL:LOW:HIGH, "
                     "variance:COL:LOW:HIGH or quantile:COL:Q:LOW:HIGH")
