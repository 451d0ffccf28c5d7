"""``dpjax.table.release``: several statistics per group of a table, under one exact budget.

Steps (each its own module): read the input columnar (:mod:`.data`); bound each unit's
contributions (:mod:`.bounding`); aggregate per group as exact integers (:mod:`.aggregate`);
calibrate one noise ratio on the composed PLD (:mod:`.calibration`); select groups privately
(:mod:`.selection`) or take the public ones; add the noise keyed by (key, component, group)
(:mod:`.noise`); post-process into the statistics (:mod:`.statistics`). Every check runs
before any noise is drawn.

Numerics: on the exact tier (the default for Laplace and the integer-valued kernels) every noisy
value — statistics and the selection's unit counts — is the kernel's lattice mechanism
(``kernel.exact_lattice()``: the value rounded to the lattice gℤ plus integer-only noise,
:mod:`dpjax.exact`), calibrated and accounted as that mechanism at its lattice sensitivity; on the
float tier the kernel's float sampler runs (docs/threat-model.md).
"""

from __future__ import annotations

import dataclasses
import math
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dpjax.mechanism import overrides
from dpjax.random import check_key
from dpjax.table import data as _data
from dpjax.table.aggregate import aggregate, component_values
from dpjax.table.bounding import bound
from dpjax.table.calibration import calibrate, has_pure_epsilon, kernel_of
from dpjax.table.keys import KeyWords
from dpjax.table.noise import draw, run_scale
from dpjax.table.selection import candidates, selection_delta, threshold
from dpjax.table.statistics import Statistic

__all__ = ["release", "TableRelease", "Request"]

#: the share of δ that private selection gets (the rest goes to the noisy statistics)
SELECTION_DELTA_SHARE = 0.5
#: the budgets ε a release calibrates: others are refused (issue 28: each of them calibrates or is refused)
EPSILON_RANGE = (1e-6, 1e6)
#: the largest per-group sensitivity an integer-valued kernel is calibrated for (the discrete
#: accountant's window grows with the shift)
MAX_DISCRETE_SENSITIVITY = 4096


@dataclasses.dataclass(frozen=True)
class TableRelease:
    """The result of :func:`release` (immutable).

    ``table``: the group column(s), then one column per statistic. ``epsilon``, ``delta``: the
    exact privacy of the whole release (every statistic and the group selection), ≤ the
    request. ``row_level``: ``True`` when no privacy unit was given — each row is then taken as
    a different person (the guarantee is per row, not per person). ``scales``: the noise scale of
    each component, as run (on the exact tier the lattice's: g times its integer noise's scale);
    ``threshold``: the selection threshold τ on the noisy unit count (``None`` with public groups).
    ``numerics``: ``"exact"`` (integer-only noise on the lattice ``granularity``·ℤ of each component,
    ``{name: g}``) or ``"float"`` (the kernel's float sampler; ``granularity`` empty).
    """

    table: pa.Table
    epsilon: float
    delta: float
    row_level: bool
    privacy_unit: str | None
    max_groups_per_unit: int
    max_rows_per_group: int
    noise: str
    scales: dict
    threshold: float | None
    selection_delta: float
    numerics: str = "float"
    granularity: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Request:
    """A validated release request (what the Spark backend needs besides the data)."""

    by: list
    statistics: list
    privacy_unit: str | None
    max_groups: int
    max_rows: int
    epsilon: float
    delta: float
    make: object
    discrete: bool
    noise_name: str
    numerics: str = "float"

    def noise(self, scale):
        """The noise run at ``scale``: the kernel, or on the exact tier its lattice mechanism."""
        kernel = self.make(scale)
        return kernel.exact_lattice() if self.numerics == "exact" else kernel

    @property
    def value_columns(self):
        return sorted({s.column for s in self.statistics if s.column is not None})

    @property
    def columns(self):
        cols = list(self.by) + ([self.privacy_unit] if self.privacy_unit else []) + self.value_columns
        return list(dict.fromkeys(cols))

    def components(self):
        """The distinct noisy components and, for each, the statistic that defines it."""
        out = {}
        for s in self.statistics:
            for c in s.components(self.max_rows, self.discrete):
                out.setdefault(c.name, (c, s))
        return out


def _positive_int(name, x):
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1:
        raise ValueError(f"{name} must be a positive integer, got {x!r}")
    return int(x)


def numerics_of(probe, numerics) -> str:
    """The tier a release runs: ``numerics`` (``"exact"`` refused for a kernel without an exact sampler: a
    one-scale discrete Laplace or discrete Gaussian lattice, :meth:`exact_lattice`), or by default
    ``"exact"`` where the kernel ``probe`` has one and its lattice calibrates about as fast as the kernel —
    the integer-valued kernels, and a lattice with a closed-form hockey-stick (Laplace's discrete Laplace);
    else ``"float"``: the Gaussian, whose lattice (a discrete Gaussian accounted from its atoms, seconds per
    PLD) would turn a millisecond calibration into about a minute (``numerics="exact"`` runs it)."""
    if numerics not in (None, "exact", "float"):
        raise ValueError(f"numerics must be 'exact', 'float' or None (exact where the noise has an exact sampler), "
                         f"got {numerics!r}")
    if numerics == "float":
        return "float"
    try:
        lattice = probe.exact_lattice() if overrides(probe, "exact_lattice") else None
    except ValueError:
        lattice = None
    if lattice is None or lattice.sampler not in ("dl", "dg"):
        if numerics == "exact":
            raise ValueError(f"numerics: 'exact' needs a noise kernel with an exact sampler (gaussian, laplace, "
                             f"discrete_gaussian, discrete_laplace), got {type(probe).__name__}")
        return "float"
    if numerics == "exact" or probe.discrete or overrides(lattice, "hockey_stick"):
        return "exact"
    return "float"


def validate(by, statistics, privacy_unit, max_groups_per_unit, max_rows_per_group, epsilon, delta, groups,
             noise, numerics=None) -> Request:
    """Every argument check of :func:`release` (nothing about the data's content)."""
    by = [by] if isinstance(by, str) else list(by) if isinstance(by, (list, tuple)) else by
    if not isinstance(by, list) or not by or not all(isinstance(c, str) and c for c in by):
        raise ValueError(f"by must be a column name or a non-empty list of column names, got {by!r}")
    if len(set(by)) != len(by):
        raise ValueError(f"by: duplicated column in {by}")
    if not isinstance(statistics, (list, tuple)) or not statistics:
        raise ValueError("statistics must be a non-empty list (table.count(), table.sum(col, low, high), ...)")
    for s in statistics:
        if not isinstance(s, Statistic):
            raise ValueError(f"statistics: {s!r} is not a table statistic (table.count(), table.mean(...), ...)")
    names = [s.name for s in statistics]
    if len(set(names)) != len(names):
        raise ValueError(f"statistics: duplicated statistic in {names}")
    for s in statistics:
        if s.column is not None and s.column in by:
            raise ValueError(f"statistics: {s.name} uses the group column {s.column!r} as a value")
    if privacy_unit is None:
        for name, v in (("max_groups_per_unit", max_groups_per_unit), ("max_rows_per_group", max_rows_per_group)):
            if v is not None and _positive_int(name, v) != 1:
                raise ValueError(f"{name}: without privacy_unit each row is its own unit (one group, one row); "
                                 f"got {v!r}")
        k = m = 1
    else:
        if not isinstance(privacy_unit, str) or not privacy_unit:
            raise ValueError(f"privacy_unit must be a column name or None, got {privacy_unit!r}")
        if privacy_unit in by:
            raise ValueError(f"privacy_unit {privacy_unit!r} is also a group column")
        if max_groups_per_unit is None or max_rows_per_group is None:
            raise ValueError("max_groups_per_unit and max_rows_per_group are required with a privacy_unit")
        k = _positive_int("max_groups_per_unit", max_groups_per_unit)
        m = _positive_int("max_rows_per_group", max_rows_per_group)
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.floating)) or \
            not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    if not EPSILON_RANGE[0] <= epsilon <= EPSILON_RANGE[1]:
        raise ValueError(f"epsilon: {epsilon!r} is outside [{EPSILON_RANGE[0]:g}, {EPSILON_RANGE[1]:g}], the budgets a "
                         "table release calibrates (above, a release protects no one; below, its noise hides "
                         "every group)")
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating)) or not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")
    if groups is None and delta == 0:
        raise ValueError("delta must be positive when groups are selected privately (groups=None); "
                         "pass the public groups to release with delta=0")
    make = kernel_of(noise)
    probe = make(1.0)
    if delta == 0 and not has_pure_epsilon(probe):
        raise ValueError(f"delta: {type(probe).__name__} noise needs delta > 0 (no scale of it gives a pure "
                         "epsilon-DP release); give delta > 0, or noise='laplace' for delta = 0")
    if probe.discrete:
        for s in statistics:
            if s.low is not None and not (float(s.low).is_integer() and float(s.high).is_integer()):
                raise ValueError(f"statistics: {s.name} needs integer low/high with the integer-valued noise "
                                 f"{type(probe).__name__} (values are rounded to integers)")
        for s in statistics:
            for c in s.components(m, True):
                if c.sensitivity > MAX_DISCRETE_SENSITIVITY:
                    raise ValueError(f"statistics: {s.name} has sensitivity {c.sensitivity:g} per group, above "
                                     f"{MAX_DISCRETE_SENSITIVITY} for the integer-valued noise {type(probe).__name__} "
                                     "(its exact accounting sums atoms over the shift); narrow low/high or use "
                                     "noise='gaussian' or 'laplace'")
    noise_name = noise if isinstance(noise, str) else type(probe).__name__
    return Request(by, list(statistics), privacy_unit, k, m, float(epsilon), float(delta), make,
                   bool(probe.discrete), noise_name, numerics_of(probe, numerics))


def _local_aggregates(req: Request, data, public, bound_key):
    """(keys, group hashes, integer aggregates) of ``data`` read by pyarrow: the local backend."""
    prepared = _data.rows(data, req.by, req.privacy_unit, req.value_columns)
    values, unit, unit_words = prepared.values, prepared.unit, prepared.unit_words
    group, keys, words = prepared.group, prepared.keys, prepared.group_words
    if public is not None:  # rows of unlisted groups are dropped before bounding; indices become public ones
        _data.check_public_types(public, keys.schema)
        pub_words = _data.key_hashes(public)
        pub_u64 = _data.words_to_u64(pub_words)
        order = np.argsort(pub_u64)
        pos = np.searchsorted(pub_u64[order], _data.words_to_u64(words))
        pos = np.minimum(pos, len(order) - 1)
        found = pub_u64[order][pos] == _data.words_to_u64(words)
        to_public = np.where(found, order[pos], -1).astype(group.dtype)
        rows = to_public[group] >= 0
        group = to_public[group][rows]
        values = {c: v[rows] for c, v in values.items()}
        unit = unit[rows] if unit is not None else None
        keys, words = public, pub_words
    if len(values) == 1:  # a view, not a copy
        matrix = next(iter(values.values()))[:, None]
    else:
        matrix = np.stack([values[c] for c in req.value_columns], axis=1) if values else np.zeros((len(group), 0))
    kept, first = bound(bound_key, unit, unit_words, group, words, matrix, req.max_groups, req.max_rows)
    agg = aggregate(req.statistics, group[kept], first, {c: v[kept] for c, v in values.items()}, len(words),
                    req.discrete)
    return keys, words, agg


def _quantile(stat, kernel_for, pair, words, hist, quantile_rank):
    """The noisy-tree descent of :mod:`dpjax.table.statistics` for every group at once."""
    g = hist.shape[0]
    node = np.zeros(g, np.int64)
    rank = np.full(g, quantile_rank)
    for level in range(1, stat.depth + 1):
        width = 1 << (stat.depth - level)
        left = 2 * node
        children = np.stack([left, left + 1], axis=1)
        counts = hist.reshape(g, 1 << level, width).sum(axis=2)[np.arange(g)[:, None], children].astype(np.float64)
        elements = (1 << level) - 2 + children
        noisy = np.maximum(draw(kernel_for, pair, words, elements, counts), 0.0)
        total = noisy.sum(axis=1)
        go_left = np.where(total > 0, rank * total <= noisy[:, 0], rank <= 0.5)
        rank = np.where(total > 0,
                        np.where(go_left, rank * total / np.where(noisy[:, 0] > 0, noisy[:, 0], 1.0),
                                 (rank * total - noisy[:, 0]) / np.where(noisy[:, 1] > 0, noisy[:, 1], 1.0)),
                        rank)
        rank = np.clip(rank, 0.0, 1.0)
        node = np.where(go_left, left, left + 1)
    leaf_width = (stat.high - stat.low) / (1 << stat.depth)
    return stat.low + (node + rank) * leaf_width


def _selection(req: Request, cal):
    """(noise, threshold τ, δ_sel) of private selection (:mod:`.selection`). On the exact tier the noisy
    unit count is g·(k + N), k the lattice index of the count and N integer: a group of one unit
    (k₁ = ⌊1/g + ½⌋) is kept when N > h, h the integer threshold of the lattice noise in lattice units, so
    τ = g·(k₁ + h) and δ_sel = K·Pr[N > h]·e^ε."""
    kernel = req.noise(cal.ratio)
    share = req.delta * SELECTION_DELTA_SHARE
    if req.numerics != "exact":
        tau = threshold(kernel, req.max_groups, req.epsilon, share)
        return kernel, tau, selection_delta(kernel, tau, req.max_groups, cal.epsilon)
    g = float(np.asarray(kernel.granularity))
    h = math.floor(threshold(kernel.noise, req.max_groups, req.epsilon, share) - 1.0)  # Pr[N > h] = Pr[N > ⌊h⌋]
    return kernel, g * (math.floor(1.0 / g + 0.5) + h), selection_delta(kernel.noise, h + 1.0, req.max_groups,
                                                                         cal.epsilon)


def finish(req: Request, key_words: KeyWords, cal, keys: pa.Table, words: np.ndarray, agg: dict,
           public: bool) -> TableRelease:
    """Selection, noise and post-processing, from the integer aggregates (both backends)."""
    components = req.components()
    kernels = {name: req.noise(cal.ratio * c.sensitivity) for name, (c, _) in components.items()}
    tau, d_sel = None, 0.0
    if not public:
        sel_kernel, tau, d_sel = _selection(req, cal)
        kernels["selection"] = sel_kernel
        present = candidates(agg)
        keys, words = keys.take(pa.array(present)), words[present]
        agg = {k: v[present] for k, v in agg.items()}
        noisy_units = draw(sel_kernel, key_words.component("selection"), words, np.zeros((len(words), 1)),
                           agg["units"].astype(np.float64)[:, None])[:, 0]
        kept = np.flatnonzero(noisy_units > tau)
        keys, words = keys.take(pa.array(kept)), words[kept]
        agg = {k: v[kept] for k, v in agg.items()}
        order = pc.sort_indices(keys, sort_keys=[(c, "ascending", "at_end") for c in req.by])
        order = order.to_numpy()
        keys, words = keys.take(pa.array(order)), words[order]
        agg = {k: v[order] for k, v in agg.items()}
    noisy = {}
    columns = {c: keys.column(c) for c in req.by}
    for s in req.statistics:
        parts = []
        for c in s.components(req.max_rows, req.discrete):
            if c.name not in noisy:
                kernel = kernels[c.name]
                pair = key_words.component(c.name)
                if c.name.startswith("tree:"):
                    noisy[c.name] = (kernel, pair)
                else:
                    values = component_values(c, s, agg, req.discrete)[:, None]
                    noisy[c.name] = draw(kernel, pair, words, np.zeros(values.shape), values)[:, 0]
            parts.append(noisy[c.name])
        if s.kind == "quantile":
            kernel, pair = parts[0]
            out = _quantile(s, kernel, pair, words, agg[f"tree:{s.bounds_key()}:{s.depth}"], s.q)
        else:
            out = s.finish(parts, req.discrete)
        if req.discrete and s.kind in ("count", "count_units", "sum"):
            out = np.rint(out).astype(np.int64)
        columns[s.name] = pa.array(out)
    table = pa.table(columns)
    scales = {name: run_scale(k) for name, k in kernels.items()}
    steps = {name: float(np.asarray(k.granularity)) for name, k in kernels.items()} if req.numerics == "exact" else {}
    # the composition's δ share plus selection's K·p·e^ε at the reported ε (≤ the requested ε, so ≤ its share)
    return TableRelease(table, cal.epsilon, cal.delta + d_sel, req.privacy_unit is None, req.privacy_unit,
                        req.max_groups, req.max_rows, req.noise_name, scales, tau, d_sel, req.numerics, steps)


def release(key, data, *, by, statistics, privacy_unit=None, max_groups_per_unit=None, max_rows_per_group=None,
            epsilon, delta=0.0, groups=None, noise="gaussian", numerics=None) -> TableRelease:
    """Release ``statistics`` per group of ``data`` under (``epsilon``, ``delta``) for the whole release.

    Args:
      key: a Threefry PRNG key, consumed once.
      data: a pyarrow Table, a pandas/Polars DataFrame, a dict of numpy arrays, a CSV/Parquet
        path, or a ``pyspark.sql.DataFrame`` (bounding and aggregation then run in Spark).
      by: the group column, or a list of them. A null key is a group of its own.
      statistics: ``[table.count(), table.count_units(), table.sum(col, low, high),
        table.mean(...), table.variance(...), table.quantile(col, q, low, high)]`` (any subset).
      privacy_unit: the column identifying a person; ``None``: each row is a different person
        (``TableRelease.row_level`` says so).
      max_groups_per_unit, max_rows_per_group: the contribution bounds (required with a unit).
      epsilon, delta: the budget of the whole release; ``delta > 0`` when groups are selected.
      groups: ``None`` (private selection), or the public groups: a list of keys (tuples for
        several columns), a dict column → list of values (their cross product), or a table of keys.
      noise: ``"gaussian"``, ``"laplace"``, ``"discrete_laplace"``, ``"discrete_gaussian"``,
        a kernel class of the protocol (:mod:`dpjax.kernels`) or a kernel instance.
      numerics: ``"exact"`` — integer-only noise, each noisy value the kernel's lattice mechanism
        (``kernel.exact_lattice()``: rounded to the lattice gℤ, discrete Laplace or discrete Gaussian noise
        drawn by integer comparisons only), calibrated and accounted as that mechanism (lattice sensitivity
        ⌈Δ/g⌉); ``"float"`` — the kernel's float sampler (docs/threat-model.md); ``None`` (default): exact
        for ``"laplace"`` and the integer-valued kernels, float for ``"gaussian"`` (its exact lattice, a
        discrete Gaussian accounted from its atoms, calibrates in about a minute: ask for it) and for
        kernels without an exact sampler (:func:`numerics_of`). ``TableRelease.numerics`` says which ran.

    Every check (arguments, columns, value types, nulls, duplicated public groups, empty table)
    raises ``ValueError`` before any noise is drawn.
    """
    req = validate(by, statistics, privacy_unit, max_groups_per_unit, max_rows_per_group, epsilon, delta, groups,
                   noise, numerics)
    key = check_key(key)
    public = _data.public_groups(groups, req.by) if groups is not None else None
    cal = calibrate(req.make, [c for c, _ in req.components().values()], req.max_groups, public is None,
                    req.epsilon, req.delta * (1 - SELECTION_DELTA_SHARE) if public is None else req.delta,
                    req.discrete, req.numerics == "exact")
    key_words = KeyWords(key)
    if type(data).__module__.startswith("pyspark"):
        from dpjax.table.spark import spark_aggregates

        keys, words, agg = spark_aggregates(req, data, public, key_words.bounding(), _local_aggregates)
    else:
        keys, words, agg = _local_aggregates(req, data, public, key_words.bounding())
    return finish(req, key_words, cal, keys, words, agg, public is not None)


def release_file(key, path, *, by, statistics, **options) -> TableRelease:
    """:func:`release` of a CSV or Parquet file — the command line's entry point: ``path`` a file
    (CSV, or Parquet by its extension) or ``"-"``, CSV text on standard input; ``by`` a column
    name or a comma-separated list, ``statistics`` statistics or their spellings
    (``"count"``, ``"sum:steps:0:20000"``, ``"quantile:steps:0.5:0:20000"``; a comma-separated
    string for several; a name holding a comma double-quoted as in CSV, ``'"a,b",c'``,
    :func:`dpjax.table.statistics.split`); ``groups`` may be the path of a CSV/Parquet file of public keys.
    Only the columns the release uses are read, in record batches (:mod:`dpjax.table.data`)."""
    from dpjax.table.statistics import parse, split

    if isinstance(by, str):
        try:
            by = split(by)
        except ValueError as exc:
            raise ValueError(f"by: {exc}") from None
    if isinstance(statistics, str):
        try:
            statistics = split(statistics)
        except ValueError as exc:
            raise ValueError(f"statistics: {exc}") from None
    statistics = [parse(s) if isinstance(s, str) else s for s in statistics]
    if path == "-":
        if sys.stdin.isatty():  # else a silent wait for a terminal the user does not know is read
            print("dpjax: reading standard input… (end it with Ctrl-D)", file=sys.stderr, flush=True)
        path = sys.stdin.buffer
    return release(key, path, by=by, statistics=statistics, **options)
