"""The statistics of a table release, the noisy measurements each is derived from, and their sensitivities.

A statistic is a small frozen description (``count()``, ``sum("steps", low, high)``, …).
After contribution bounding a privacy unit holds at most ``K = max_groups_per_unit``
groups and at most ``M = max_rows_per_group`` rows in each. Every statistic is a post-processing of one
or more noisy *measurements* per group, shared between the statistics of a release (one draw, paid once);
a measurement has a per-group sensitivity ``s`` (how far adding or removing one unit moves it in one
group) and a *multiplicity* ``m`` (how many of its elements per group one unit can move, each by at most
``s``). Removing a unit therefore moves at most ``K·m`` elements of a measurement, each by at most ``s``.

| statistic | measurements (sensitivity, multiplicity) | released value |
|---|---|---|
| ``count()`` | rows (M, 1) | noisy number of kept rows |
| ``count_units()`` | units (1, 1) | noisy number of units with a kept row (the count selection thresholds) |
| ``sum(c, lo, hi)`` | rows, Σ(x−mid) (M·r, 1) when rows are measured | Σ(x−mid) + mid·rows (as PipelineDP) |
| ``sum(c, lo, hi)`` alone | Σx (M·max(|lo|,|hi|), 1) | noisy sum of values clipped to [lo, hi] |
| ``mean(c, lo, hi)`` | rows (M, 1), Σ(x−mid) (M·r, 1) | mid + Σ(x−mid) / max(rows, 1), in [lo, hi] |
| ``variance(c, lo, hi)`` | rows, Σ(x−mid), Σ((x−mid)² − h) (M·(r² − h), 1) | (Σ(…) + h·rows)/rows − mean², in [0, r²] |
| ``quantile(c, q, lo, hi)`` | exponential mechanism, 2**depth + 1 candidates (M·max(q, 1−q), 1) | a candidate |

``mid`` is the middle of [lo, hi] (rounded down to an integer for integer-valued kernels) and
``r = max(mid − lo, hi − mid)``: centring shrinks the sensitivity of the sums when [lo, hi] is far
from 0. The squares ``(x − mid)²`` lie in [0, r²] and are centred too, on ``h = r²/2`` (rounded down for
integer-valued kernels), which halves their sensitivity; the second moment is then
``Σ((x − mid)² − h)/rows + h`` from the noisy row count the variance measures anyway. Rows are measured when
the release has a ``count``, ``mean`` or ``variance``; a ``sum`` then costs no measurement of its own.

**Quantile**: the candidates are the ``2**D + 1`` edges ``e_j`` of [lo, hi] cut into ``2**D`` equal
leaves (default D = 10), over every kept row (up to M per unit and group: the quantile of the same bounded
rows the other statistics describe); the score of ``e_j`` is ``−|L_j − q·n|`` (``L_j`` the values below it,
``n`` all), which one unit's ``m ≤ M`` rows move by ``ΔL − q·m ∈ [−q·m, (1 − q)·m]``, at most
``Δ = M·max(q, 1 − q)``. The release is candidate ``j`` drawn with probability ∝ ``exp(u_j/β)``, the
exponential mechanism (McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007), drawn
exactly on both tiers (:func:`dpjax.table.noise.exponential_mechanism`, keyed by (key, measurement, group)):
pure ``ε = 2Δ/β``, and ε-bounded-range, so its composition is accounted by the pair that dominates every
ε-bounded-range mechanism (:class:`dpjax.BoundedRange`; Dong, Durfee & Rogers, "Optimal differential privacy
composition for exponential mechanisms", ICML 2020) — the candidates and scores of OpenDP's quantile
(``make_quantile_score_candidates``), not a noisy tree.

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
    """One noisy measurement per group, with what the budget split needs to know of it.

    Attributes:
      name: the aggregate measured (``"rows"``, ``"units"``, ``"sum:…"``, ``"centred:…"``, ``"squares:…"``,
        ``"rank:…"``; :func:`component_label` spells it for a reader).
      sensitivity: the per-group sensitivity ``s``: how far adding or removing one unit moves one element.
      multiplicity: how many of its elements per group one unit can move, each by at most ``s``.
      elements: noisy elements per group (the candidates of an exponential mechanism).
      norm: the size of the values it measures, for the budget split: its error counts relative to ``n·norm``.
      noisy_max: the exponential mechanism (report-noisy-max with Gumbel noise) choosing among ``elements``
        candidates instead of an additive measurement.
    """

    name: str
    sensitivity: float
    multiplicity: int
    elements: int = 1
    norm: float = 1.0
    noisy_max: bool = False

    @property
    def normalised_sensitivity(self) -> float:
        return self.sensitivity / self.norm


#: how much a rank error of the quantile weighs against the relative error of a sum or a count in the budget
#: split: a relative rank error ρ moves a quantile of a unimodal law by about ρ/(f(x)·x) (2.5ρ at a lognormal's
#: median, f(x)·x ≈ 0.4), and the exponential mechanism errs by a few scales β (the log of the number of
#: candidates near the quantile); 6 balances the median's error against the sums' on the heavy-tailed table of
#: ``benchmarks/table_utility.py`` (docs/tables.md)
RANK_WEIGHT = 6.0
#: how much the row count's relative error weighs in the variance's, against the squares' (the budget split's
#: model): ``(h + (mean − mid)² − variance)/r²`` squared, ≈ 0.5 for ``(mean − mid)² ≈ r²/3`` (the mean's model)
#: and a variance of ``r²/9``
VARIANCE_ROWS_WEIGHT = 0.5


@dataclasses.dataclass(frozen=True)
class Statistic:
    """A statistic of a table release.

    Build one with :func:`count`, :func:`count_units`, :func:`sum`, :func:`mean`, :func:`variance` or
    :func:`quantile` (they validate their arguments); the methods below are what the release asks of it.
    Methods taking ``integer`` answer for an integer-valued kernel (``True``: integer centre and steps) or a
    continuous one.

    Attributes:
      kind: ``"count"``, ``"count_units"``, ``"sum"``, ``"mean"``, ``"variance"`` or ``"quantile"``.
      column: the column aggregated (``None`` for the counts).
      low: the clipping bound below (``None`` for the counts).
      high: the clipping bound above (``None`` for the counts).
      q: the quantile's level in [0, 1] (``None`` for the others).
      depth: the quantile's tree depth: ``2**depth + 1`` candidates.
    """

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
        """``mid``: the middle of ``[low, high]``, rounded down to an integer for integer-valued kernels.

        Args:
          integer: whether the kernel is integer-valued.

        Returns:
          The centre, a float.
        """
        mid = (self.low + self.high) / 2
        return float(math.floor(mid)) if integer else mid

    def radius(self, integer: bool) -> float:
        """``r = max(mid − low, high − mid)``: how far a clipped value lies from the centre at most.

        Args:
          integer: whether the kernel is integer-valued.

        Returns:
          The radius, a float.
        """
        c = self.centre(integer)
        return max(c - self.low, self.high - c)

    def unit(self, integer: bool) -> float:
        """The integer step ``u`` of the stored clipped values (``a = round((x − low)/u)``).

        Args:
          integer: whether the kernel is integer-valued (then ``u = 1``).

        Returns:
          ``u``, a float.
        """
        return 1.0 if integer else (self.high - self.low) / 2.0**_FRACTION_BITS

    def square_unit(self, integer: bool) -> float:
        """The integer step ``v`` of the stored squares ``(x − mid)²`` (``v = r²/2**32``, or 1 for integer values).

        Args:
          integer: whether the kernel is integer-valued.

        Returns:
          ``v``, a float.
        """
        return 1.0 if integer else self.radius(integer) ** 2 / 2.0**_FRACTION_BITS

    def square_centre(self, integer: bool) -> float:
        """``h``: the centre of the squares ``(x − mid)² ∈ [0, r²]``.

        ``r²/2`` (rounded down for integer values; on the stored lattice of squares ``2**31`` steps), so that
        ``|(x − mid)² − h| ≤ r² − h``.

        Args:
          integer: whether the kernel is integer-valued.

        Returns:
          ``h``, a float.
        """
        r2 = self.radius(integer) ** 2
        return float(math.floor(r2 / 2)) if integer else r2 / 2

    # -- what is released ------------------------------------------------------------------
    def components(self, max_rows: int, integer: bool, with_rows: bool = False) -> list[Component]:
        """The noisy measurements of this statistic.

        Args:
          max_rows: the contribution bound ``M`` of rows per group (the sensitivities scale with it).
          integer: whether the kernel is integer-valued.
          with_rows: the release measures the row count anyway (a ``count``, ``mean`` or ``variance``): a sum is
            then the centred sum plus ``mid`` times the noisy row count, else its own measurement.

        Returns:
          A list of :class:`Component`, in the order :meth:`finish` reads the noisy values.
        """
        m = max_rows
        rows = Component("rows", m, 1)
        if self.kind == "count":
            return [rows]
        if self.kind == "count_units":
            return [Component("units", 1, 1)]
        r = self.radius(integer)
        if self.kind == "sum" and not with_rows:
            return [Component(f"sum:{self.bounds_key()}", m * max(abs(self.low), abs(self.high)), 1, norm=r)]
        centred = Component(f"centred:{self.bounds_key()}:{integer}", m * r, 1, norm=r)
        if self.kind in ("sum", "mean"):
            return [rows, centred]
        if self.kind == "variance":
            half = r * r - self.square_centre(integer)
            return [rows, centred, Component(f"squares:{self.bounds_key()}:{integer}", m * half, 1, norm=r * r)]
        leaves = 1 << self.depth
        return [
            Component(
                f"rank:{self.bounds_key()}:{self.depth}:{self.q!r}",
                m * max(self.q, 1 - self.q),
                1,
                leaves + 1,
                norm=1 / RANK_WEIGHT,
                noisy_max=True,
            )
        ]

    def error_weights(self, integer: bool, with_rows: bool = False) -> list[float]:
        """How much each measurement's noise (relative to ``n·norm``) weighs in this statistic's relative variance.

        The budget split's model: values of size ``r`` about ``mid``.

        Args:
          integer: whether the kernel is integer-valued.
          with_rows: as in :meth:`components`.

        Returns:
          One weight per component of :meth:`components`, in its order.
        """
        if self.kind == "sum" and with_rows:
            return [(self.centre(integer) / self.radius(integer)) ** 2, 1.0]  # sum = Σ(x − mid) + mid·rows
        if self.kind == "mean":  # mean − mid = Σ(x − mid)/rows: rows' error weighs (mean − mid)²/r², ≈ 1/3
            return [1 / 3, 1.0]
        if self.kind == "variance":  # variance = Σ((x − mid)² − h)/rows + h − (mean − mid)²: rows' error weighs
            return [VARIANCE_ROWS_WEIGHT, 1.0, 1.0]  # (h + (mean − mid)² − variance)²/r⁴
        return [1.0]

    def finish(self, noisy: list[np.ndarray], integer: bool) -> np.ndarray:
        """The released column from the noisy measurements (post-processing only).

        Args:
          noisy: the noisy values of :meth:`components`, one array over the groups each, in its order.
          integer: whether the kernel is integer-valued.

        Returns:
          The released values, one per group (means clipped to ``[low, high]``, variances to ``[0, r²]``).
        """
        if self.kind in ("count", "count_units") or (self.kind == "sum" and len(noisy) == 1):
            return noisy[0]
        if self.kind == "sum":
            return noisy[1] + self.centre(integer) * noisy[0]
        n = np.maximum(noisy[0], 1.0)
        c, r = self.centre(integer), self.radius(integer)
        mean = noisy[1] / n
        if self.kind == "mean":
            return np.clip(c + mean, self.low, self.high)
        second = np.clip((noisy[2] + self.square_centre(integer) * noisy[0]) / n, 0.0, r * r)
        return np.clip(second - mean**2, 0.0, r * r)

    def interval(self, noisy: list[np.ndarray], half: list[float], integer: bool):
        """The values of this statistic over the box of measurements ``noisy ± half``.

        Each measurement within its half-width; a post-processing of the released values only.

        Args:
          noisy: the noisy values of :meth:`components`, one array over the groups each.
          half: each measurement's half-width, in the same order.
          integer: whether the kernel is integer-valued.

        Returns:
          ``(low, high)``: arrays over the groups (the whole range where the noisy count may be about 0).
        """
        if self.kind in ("count", "count_units") or (self.kind == "sum" and len(noisy) == 1):
            return noisy[0] - half[0], noisy[0] + half[0]
        if self.kind == "sum":
            c = self.centre(integer)
            w = half[1] + abs(c) * half[0]
            v = noisy[1] + c * noisy[0]
            return v - w, v + w
        n_lo = noisy[0] - half[0]
        n_hi = noisy[0] + half[0]
        c_lo, c_hi = noisy[1] - half[1], noisy[1] + half[1]
        known = n_lo >= 1.0  # else the count may be about 0: nothing is known of the ratio
        n_lo = np.maximum(n_lo, 1.0)
        n_hi = np.maximum(n_hi, 1.0)
        m = np.stack([c_lo / n_lo, c_lo / n_hi, c_hi / n_lo, c_hi / n_hi])
        m_lo, m_hi = m.min(axis=0), m.max(axis=0)
        c, r = self.centre(integer), self.radius(integer)
        if self.kind == "mean":
            lo = np.where(known, np.clip(c + m_lo, self.low, self.high), self.low)
            hi = np.where(known, np.clip(c + m_hi, self.low, self.high), self.high)
            return lo, hi
        h = self.square_centre(integer)  # the second moment is Σ((x − mid)² − h)/rows + h, in [0, r²]
        q = np.stack(
            [
                (noisy[2] - half[2]) / n_lo,
                (noisy[2] - half[2]) / n_hi,
                (noisy[2] + half[2]) / n_lo,
                (noisy[2] + half[2]) / n_hi,
            ]
        )
        s_lo, s_hi = np.clip(q.min(axis=0) + h, 0.0, r * r), np.clip(q.max(axis=0) + h, 0.0, r * r)
        sq_lo = np.where((m_lo <= 0) & (m_hi >= 0), 0.0, np.minimum(m_lo**2, m_hi**2))
        sq_hi = np.maximum(m_lo**2, m_hi**2)
        lo = np.where(known, np.clip(s_lo - sq_hi, 0.0, r * r), 0.0)
        hi = np.where(known, np.clip(s_hi - sq_lo, 0.0, r * r), r * r)
        return lo, hi

    def std(self, noisy: list[np.ndarray], std: list[float], integer: bool) -> np.ndarray:
        """The noise's standard deviation in the released value.

        The delta method for mean and variance, from released values only.

        Args:
          noisy: the noisy values of :meth:`components`, one array over the groups each.
          std: each measurement's noise standard deviation, in the same order.
          integer: whether the kernel is integer-valued.

        Returns:
          One standard deviation per group.
        """
        if self.kind in ("count", "count_units") or (self.kind == "sum" and len(noisy) == 1):
            return np.full(len(noisy[0]), std[0])
        if self.kind == "sum":
            return np.full(len(noisy[0]), math.hypot(std[1], self.centre(integer) * std[0]))
        n = np.maximum(noisy[0], 1.0)
        m = noisy[1] / n
        if self.kind == "mean":
            return np.sqrt(std[1] ** 2 + (m * std[0]) ** 2) / n
        second = noisy[2] / n  # the centred second moment: ∂variance/∂rows = (2m² − Σ(…)/rows)/rows
        return np.sqrt(std[2] ** 2 + (2 * m * std[1]) ** 2 + ((second - 2 * m * m) * std[0]) ** 2) / n


_COMPONENT_WORDS = {
    "sum": "sum",
    "centred": "centred sum",
    "squares": "centred sum of squares",
    "rank": "exponential-mechanism quantile",
}


def component_label(name: str) -> str:
    """A reader's label for a component name of :meth:`Statistic.components`.

    ``"sum:('steps', -2.0, 2.0)"`` → ``"sum of steps in [-2, 2]"``; names without a column (``rows``,
    ``units``, ``selection``) are returned as they are.

    Args:
      name: a :attr:`Component.name`.

    Returns:
      The label, a string.
    """
    kind, _, rest = name.partition(":")
    if kind not in _COMPONENT_WORDS:
        return name
    key, _, extra = rest.rpartition(")")
    column, low, high = ast.literal_eval(key + ")")
    depth = ""
    if kind == "rank":
        d, _, q = extra[1:].partition(":")
        depth = f" (q = {float(q):g}, {(1 << int(d)) + 1} candidates)"
    return f"{_COMPONENT_WORDS[kind]} of {column} in [{low:.15g}, {high:.15g}]{depth}"


def _column(name, column):
    if not isinstance(column, str) or not column:
        raise ValueError(f"{name}: column must be a column name (a non-empty string), got {column!r}")


def _bounds(name, low, high):
    for label, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
            raise ValueError(f"{name}: {label} must be a finite number, got {v!r}")
    if not low < high:
        raise ValueError(
            f"{name}: low must be below high, got low={low!r} > high={high!r}"
            if low > high
            else f"{name}: low must be below high, got low = high = {low!r}"
        )
    return float(low), float(high)


def count() -> Statistic:
    """The number of (kept) rows per group.

    Returns:
      A :class:`Statistic` (output column ``count``).
    """
    return Statistic("count")


def count_units() -> Statistic:
    """The number of privacy units per group.

    Returns:
      A :class:`Statistic` (output column ``count_units``).
    """
    return Statistic("count_units")


def sum(column: str, low: float, high: float) -> Statistic:  # noqa: A001 - the contract's name
    """The sum of ``column`` per group, each value clipped to ``[low, high]``.

    Args:
      column: the column's name.
      low: the clipping bound below (finite).
      high: the clipping bound above (finite, above ``low``).

    Returns:
      A :class:`Statistic` (output column ``sum_<column>``).

    Raises:
      ValueError: ``column`` not a non-empty string; ``low`` or ``high`` not a finite number, or
        ``low >= high``.
    """
    _column("sum", column)
    return Statistic("sum", column, *_bounds(f"sum({column!r})", low, high))


def mean(column: str, low: float, high: float) -> Statistic:
    """The mean of ``column`` per group (values clipped to ``[low, high]``).

    Args:
      column: the column's name.
      low: the clipping bound below (finite).
      high: the clipping bound above (finite, above ``low``).

    Returns:
      A :class:`Statistic` (output column ``mean_<column>``).

    Raises:
      ValueError: ``column`` not a non-empty string; ``low`` or ``high`` not a finite number, or
        ``low >= high``.
    """
    _column("mean", column)
    return Statistic("mean", column, *_bounds(f"mean({column!r})", low, high))


def variance(column: str, low: float, high: float) -> Statistic:
    """The (population) variance of ``column`` per group (values clipped to ``[low, high]``).

    Args:
      column: the column's name.
      low: the clipping bound below (finite).
      high: the clipping bound above (finite, above ``low``).

    Returns:
      A :class:`Statistic` (output column ``variance_<column>``).

    Raises:
      ValueError: ``column`` not a non-empty string; ``low`` or ``high`` not a finite number, or
        ``low >= high``.
    """
    _column("variance", column)
    return Statistic("variance", column, *_bounds(f"variance({column!r})", low, high))


def quantile(column: str, q: float, low: float, high: float, *, depth: int = 10) -> Statistic:
    """The ``q``-quantile of ``column`` per group on ``[low, high]``.

    The exponential mechanism over the ``2**depth + 1`` edges of ``[low, high]`` cut into equal leaves (module
    docstring), so the resolution is ``(high − low)/2**depth``.

    Args:
      column: the column's name.
      q: the level, in [0, 1].
      low: the lower end of the candidates (finite).
      high: the upper end of the candidates (finite, above ``low``).
      depth: an integer in [1, 20].

    Returns:
      A :class:`Statistic` (output column ``quantile_<q>_<column>``).

    Raises:
      ValueError: ``column`` not a non-empty string; ``q`` outside [0, 1]; ``depth`` not an integer in
        [1, 20]; ``low`` or ``high`` not a finite number, or ``low >= high``.

    References:
      McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007. Dong, Durfee & Rogers,
      "Optimal differential privacy composition for exponential mechanisms", ICML 2020.
    """
    _column("quantile", column)
    if isinstance(q, bool) or not isinstance(q, (int, float, np.floating)) or not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile({column!r}): q must be in [0, 1], got {q!r}")
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or not 1 <= depth <= 20:
        raise ValueError(f"quantile({column!r}): depth must be an integer in [1, 20], got {depth!r}")
    return Statistic("quantile", column, *_bounds(f"quantile({column!r})", low, high), q=float(q), depth=int(depth))


def split(text: str) -> list[str]:
    """The items of a comma-separated list of the command line, quoted as in CSV.

    A double-quoted stretch keeps its commas (``"a,b",c`` → ``a,b`` and ``c``; ``sum:"a,b":0:9`` →
    ``sum:a,b:0:9``), and ``""`` inside it is one quote; items are stripped, empty ones dropped.

    Args:
      text: the flag's value.

    Returns:
      The items, a list of strings.

    Raises:
      ValueError: a quote left open.
    """
    items, item, quoted, i = [], [], False, 0
    text = str(text)
    while i < len(text):
        ch = text[i]
        if ch == '"':
            if quoted and text[i + 1 : i + 2] == '"':
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
    """A statistic from its command-line spelling.

    ``count``, ``count_units``, ``sum:COL:LOW:HIGH``, ``mean:COL:LOW:HIGH``, ``variance:COL:LOW:HIGH``,
    ``quantile:COL:Q:LOW:HIGH`` (the numbers are the last fields, so ``COL`` may hold colons; commas by
    quoting, :func:`split`).

    Args:
      spec: one item of the ``--statistic`` list.

    Returns:
      The :class:`Statistic`.

    Raises:
      ValueError: an unknown spelling, or the statistic's own refusal, quoting ``spec``.
    """
    parts = str(spec).strip().split(":")
    kind, args = parts[0], parts[1:]
    try:
        if kind in ("count", "count_units") and not args:
            return count() if kind == "count" else count_units()
        if kind in ("sum", "mean", "variance") and len(args) >= 3:
            return {"sum": sum, "mean": mean, "variance": variance}[kind](
                ":".join(args[:-2]), float(args[-2]), float(args[-1])
            )
        if kind == "quantile" and len(args) >= 4:
            return quantile(":".join(args[:-3]), float(args[-3]), float(args[-2]), float(args[-1]))
    except ValueError as exc:
        raise ValueError(f"statistic {spec!r}: {exc}") from None
    raise ValueError(
        f"statistic {spec!r}: expected count, count_units, sum:COL:LOW:HIGH, mean:COL:LOW:HIGH, "
        "variance:COL:LOW:HIGH or quantile:COL:Q:LOW:HIGH"
    )
