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

from dpjax.random import check_key
from dpjax.table import data as _data
from dpjax.table.aggregate import aggregate, component_values
from dpjax.table.bounding import bound
from dpjax.exact import ExactLattice
from dpjax.kernels import by_name
from dpjax.table.calibration import (
    Run,
    calibrate,
    has_pure_epsilon,
    kernel_key,
    kernel_of,
    remembered,
    split,
)
from dpjax.table.keys import KeyWords
from dpjax.table.noise import draw, exponential_mechanism, run_scale
from dpjax.table.selection import candidates, selection_delta, tail_point, threshold
from dpjax.table.statistics import Component, Statistic

__all__ = ["release", "TableRelease", "Request"]

#: the share of δ that private selection gets (the rest goes to the noisy statistics)
SELECTION_DELTA_SHARE = 0.5
#: the weight of private selection's error in the budget split, against a statistic's 1 (a user's ``weights``
#: may set it as ``"selection"``): a group left out loses every statistic at once, not one
SELECTION_WEIGHT = 3.0
#: the budgets ε a release calibrates: others are refused (each one in it calibrates)
EPSILON_RANGE = (1e-6, 1e6)
#: the largest per-group sensitivity an integer-valued kernel is calibrated for (the discrete
#: accountant's window grows with the shift)
MAX_DISCRETE_SENSITIVITY = 4096


@dataclasses.dataclass(frozen=True, kw_only=True)
class TableRelease:
    """The result of :func:`release` (immutable; built with keyword arguments).

    Attributes:
      table: the group column(s), then per statistic ``<stat>`` its released value, ``<stat>_std`` the
        standard deviation of the noise in it, and ``<stat>_ci_low``, ``<stat>_ci_high`` a ``1 − alpha``
        confidence interval of the true (bounded, clipped) statistic given the noise — each computed from
        the noise scales and the released values only; null for a quantile (its exponential mechanism errs in rank,
        which no released value converts to a value). Counts on the exact tier are integers.
      epsilon: the exact ε of the whole release (every statistic and the group selection), ≤ the request.
      delta: the exact δ of the whole release (the composition's plus the selection's), ≤ the request.
      row_level: ``True`` when no privacy unit was given — each row is then taken as a different person (the
        guarantee is per row, not per person).
      privacy_unit: the unit column, or ``None``.
      max_groups_per_unit: the contribution bound ``K`` applied (1 without a unit).
      max_rows_per_group: the contribution bound ``M`` applied (1 without a unit).
      noise: the noise kernel's name (or class name).
      scales: the noise scale of each measurement, as run (on the exact tier the lattice's: g times its
        integer noise's scale; a quantile's: the scale β of its exponential mechanism, weights ``exp(score/β)``).
      threshold: the selection threshold τ on the noisy unit count (``None`` with public groups).
      selection_delta: the δ the private selection spends (0 with public groups).
      numerics: ``"exact"`` (integer-only noise on the lattice ``granularity``·ℤ of each measurement) or
        ``"float"`` (the kernel's float sampler).
      granularity: ``{measurement name: g}`` of the additive measurements on the exact tier (a quantile draws its
        exponential mechanism exactly, on no lattice); empty on the float tier.
      ratios: each measurement's noise-to-sensitivity ratio (its share of the budget, the split of
        docs/tables.md).
      alpha: the confidence intervals' level is ``1 − alpha``.
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
    ratios: dict = dataclasses.field(default_factory=dict)
    alpha: float = 0.05


@dataclasses.dataclass(frozen=True)
class Request:
    """A validated release request (what the Spark backend needs besides the data); built by :func:`validate`.

    Attributes:
      by: the group columns.
      statistics: the :class:`~dpjax.table.statistics.Statistic` list.
      privacy_unit: the unit column, or ``None`` (row-level).
      max_groups: the contribution bound ``K``.
      max_rows: the contribution bound ``M``.
      epsilon: the budget's ε.
      delta: the budget's δ.
      make: ``scale -> kernel``, the noise family.
      discrete: whether the kernel is integer-valued.
      noise_name: the kernel's name, as reported.
      numerics: ``"exact"`` or ``"float"``, the tier that runs (:func:`numerics_of`).
      weights: the budget split's weights, ``((name, w), ...)`` sorted.
      alpha: the confidence intervals' level is ``1 − alpha``.
    """

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
    weights: tuple = ()
    alpha: float = 0.05

    def noise(self, scale):
        """The noise run at ``scale``: the kernel, or on the exact tier its lattice mechanism.

        Args:
          scale: the kernel's scale parameter.

        Returns:
          A kernel instance, or its :class:`~dpjax.exact.ExactLattice` on the exact tier.
        """
        kernel = self.make(scale)
        return kernel.exact_lattice() if self.numerics == "exact" else kernel

    @property
    def value_columns(self):
        return sorted({s.column for s in self.statistics if s.column is not None})

    @property
    def columns(self):
        cols = list(self.by) + ([self.privacy_unit] if self.privacy_unit else []) + self.value_columns
        return list(dict.fromkeys(cols))

    @property
    def with_rows(self) -> bool:
        """Whether the release measures the row count anyway (a sum then comes from it and a centred sum)."""
        return any(s.kind in ("count", "mean", "variance") for s in self.statistics)

    def stat_components(self, stat):
        """The noisy measurements of one statistic of this request.

        Args:
          stat: one of :attr:`statistics`.

        Returns:
          :meth:`Statistic.components <dpjax.table.statistics.Statistic.components>` at this request's bounds.
        """
        return stat.components(self.max_rows, self.discrete, self.with_rows)

    def measurements(self, selection: bool) -> dict:
        """The distinct noisy measurements of the release, each with its loss in the budget split.

        The loss of a measurement is ``Σ w·e·s̃²`` over the statistics that use it (``w`` the statistic's weight,
        ``e`` how much the measurement's error enters its relative variance, ``s̃`` the normalised sensitivity);
        private selection adds its weight times ``L²`` on the noisy unit count (:meth:`selection_tail`).

        Args:
          selection: whether groups are selected privately.

        Returns:
          ``{name: (Component, loss)}``.
        """
        weights = dict(self.weights)
        out = {}
        for s in self.statistics:
            w = weights.get(s.name, 1.0)
            for c, e in zip(self.stat_components(s), s.error_weights(self.discrete, self.with_rows)):
                prev = out.get(c.name, (c, 0.0))[1]
                out[c.name] = (c, prev + w * e * c.normalised_sensitivity**2)
        if selection:
            # a group is released when its noisy unit count clears τ ≈ L·b (b the count's noise scale): relative to
            # a group of n units the selection errs by L·b/n — a measurement of normalised sensitivity L
            units = Component("units", 1, 1)
            loss = weights.get("selection", SELECTION_WEIGHT) * self.selection_tail() ** 2
            out["units"] = (units, out.get("units", (units, 0.0))[1] + loss)
        return out

    def selection_tail(self) -> float:
        """``L``: the selection threshold in units of the count's noise scale.

        ``L`` with ``K·Pr[Z > L] = δ_sel`` for the kernel at scale 1 (about ``log(K/(2δ_sel))`` for Laplace);
        remembered.

        Returns:
          ``L``, a float.
        """
        share = self.delta * SELECTION_DELTA_SHARE
        kernel = self.make(1.0)
        return remembered(
            ("selection_tail", *kernel_key(kernel), self.max_groups, share),
            lambda: tail_point(kernel, math.log(share / (1 + share) / self.max_groups)),
        )

    def plan(self, selection: bool):
        """The budget split (:func:`.calibration.split`); remembered.

        Args:
          selection: whether groups are selected privately.

        Returns:
          ``(measurements, {name: weight v}, runs)``: :meth:`measurements`, the weights, and the
          :class:`~dpjax.table.calibration.Run` of each measurement for :func:`~dpjax.table.calibration.calibrate`.
        """
        meas = self.measurements(selection)
        v = split(meas, self.max_groups, self.make(1.0).pure_epsilon is not None)
        runs = tuple(
            Run(v[n], float(c.sensitivity), self.max_groups * c.multiplicity, c.noisy_max) for n, (c, _) in meas.items()
        )
        return meas, v, runs


def _positive_int(name, x):
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1:
        raise ValueError(f"{name} must be a positive integer, got {x!r}")
    return int(x)


def numerics_of(probe, numerics) -> str:
    """The tier a release runs.

    Args:
      probe: the kernel at scale 1.
      numerics: ``"exact"`` (refused for a kernel without a table sampler: a one-scale discrete Laplace or
        discrete Gaussian lattice, ``exact_lattice()``), ``"float"``, or ``None``: ``"exact"`` where ``probe``
        has one and its lattice calibrates about as fast as the kernel — the integer-valued kernels, and a
        lattice with a closed-form hockey-stick (Laplace's discrete Laplace); else ``"float"`` (the Gaussian,
        whose lattice, a discrete Gaussian accounted from its atoms, calibrates far slower than the analytic
        Gaussian; ``numerics="exact"`` runs it).

    Returns:
      ``"exact"`` or ``"float"``.

    Raises:
      ValueError: ``numerics`` not ``"exact"``, ``"float"`` or ``None``; ``"exact"`` for a kernel without an
        exact table sampler.
    """
    if numerics not in (None, "exact", "float"):
        raise ValueError(
            f"numerics must be 'exact', 'float' or None (exact where the noise has an exact sampler), got {numerics!r}"
        )
    if numerics == "float":
        return "float"
    try:
        lattice = probe.exact_lattice()
    except ValueError:
        lattice = None
    if lattice is None or not lattice.sampler.for_tables:
        if numerics == "exact":
            raise ValueError(
                f"numerics: 'exact' needs a noise kernel with an exact sampler (gaussian, laplace, "
                f"discrete_gaussian, discrete_laplace), got {type(probe).__name__}"
            )
        return "float"
    if numerics == "exact" or probe.discrete or lattice.hockey_stick is not None:
        return "exact"
    return "float"


def _weights(weights, statistics, selection: bool) -> tuple:
    if weights is None:
        return ()
    if not isinstance(weights, dict):
        raise ValueError(
            f"weights must be a dict of statistic name (or 'selection') to a positive number, got {weights!r}"
        )
    names = {s.name for s in statistics} | ({"selection"} if selection else set())
    for k, w in weights.items():
        if k not in names:
            raise ValueError(f"weights: {k!r} is not a statistic of this release (one of {sorted(names)})")
        if (
            isinstance(w, bool)
            or not isinstance(w, (int, float, np.integer, np.floating))
            or not (math.isfinite(w) and w > 0)
        ):
            raise ValueError(f"weights: the weight of {k!r} must be a positive finite number, got {w!r}")
    return tuple(sorted((k, float(w)) for k, w in weights.items()))


def validate(
    by,
    statistics,
    privacy_unit,
    max_groups_per_unit,
    max_rows_per_group,
    epsilon,
    delta,
    groups,
    noise,
    numerics=None,
    weights=None,
    alpha=0.05,
) -> Request:
    """Every argument check of :func:`release` (nothing about the data's content).

    Args:
      by: as :func:`release`.
      statistics: as :func:`release`.
      privacy_unit: as :func:`release`.
      max_groups_per_unit: as :func:`release`.
      max_rows_per_group: as :func:`release`.
      epsilon: as :func:`release`.
      delta: as :func:`release`.
      groups: as :func:`release` (only whether it is ``None`` is read here).
      noise: as :func:`release`.
      numerics: as :func:`release`.
      weights: as :func:`release`.
      alpha: as :func:`release`.

    Returns:
      The :class:`Request`.

    Raises:
      ValueError: naming the argument: ``by`` empty, not column names or duplicated; ``statistics`` empty,
        not table statistics, duplicated, or using a group column as a value; bounds above 1 without a
        ``privacy_unit``, or missing with one; ``privacy_unit`` not a column name or a group column;
        ``epsilon`` not positive and finite or outside :data:`EPSILON_RANGE`; ``delta`` outside [0, 1), or 0
        with private selection or with a kernel without a pure ε; non-integer bounds or a per-group
        sensitivity above :data:`MAX_DISCRETE_SENSITIVITY` with an integer-valued kernel; ``noise`` unknown;
        ``numerics``, ``weights`` or ``alpha`` invalid.
    """
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
                raise ValueError(
                    f"{name}: without privacy_unit each row is its own unit (one group, one row); got {v!r}"
                )
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
    if (
        isinstance(epsilon, bool)
        or not isinstance(epsilon, (int, float, np.floating))
        or not (math.isfinite(epsilon) and epsilon > 0)
    ):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    if not EPSILON_RANGE[0] <= epsilon <= EPSILON_RANGE[1]:
        raise ValueError(
            f"epsilon: {epsilon!r} is outside [{EPSILON_RANGE[0]:g}, {EPSILON_RANGE[1]:g}], the budgets a "
            "table release calibrates (above, a release protects no one; below, its noise hides "
            "every group)"
        )
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating)) or not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")
    if groups is None and delta == 0:
        raise ValueError(
            "delta must be positive when groups are selected privately (groups=None); "
            "pass the public groups to release with delta=0"
        )
    make = kernel_of(noise)
    probe = make(1.0)
    if delta == 0 and not has_pure_epsilon(probe):
        raise ValueError(
            f"delta: {type(probe).__name__} noise needs delta > 0 (no scale of it gives a pure "
            "epsilon-DP release); give delta > 0, or noise='laplace' for delta = 0"
        )
    if probe.discrete:
        for s in statistics:
            if s.low is not None and not (float(s.low).is_integer() and float(s.high).is_integer()):
                raise ValueError(
                    f"statistics: {s.name} needs integer low/high with the integer-valued noise "
                    f"{type(probe).__name__} (values are rounded to integers)"
                )
        for s in statistics:
            for c in s.components(m, True, any(t.kind in ("count", "mean", "variance") for t in statistics)):
                if c.sensitivity > MAX_DISCRETE_SENSITIVITY:
                    raise ValueError(
                        f"statistics: {s.name} has sensitivity {c.sensitivity:g} per group, above "
                        f"{MAX_DISCRETE_SENSITIVITY} for the integer-valued noise {type(probe).__name__} "
                        "(its exact accounting sums atoms over the shift); narrow low/high or use "
                        "noise='gaussian' or 'laplace'"
                    )
    noise_name = noise if isinstance(noise, str) else type(probe).__name__
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1) (the confidence intervals' level is 1 − alpha), got {alpha!r}")
    return Request(
        by,
        list(statistics),
        privacy_unit,
        k,
        m,
        float(epsilon),
        float(delta),
        make,
        bool(probe.discrete),
        noise_name,
        numerics_of(probe, numerics),
        _weights(weights, statistics, groups is None),
        float(alpha),
    )


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
    agg = aggregate(
        req.statistics, group[kept], first, {c: v[kept] for c, v in values.items()}, len(words), req.discrete
    )
    return keys, words, agg


def _quantile(stat, scale, pair, words, hist):
    """The exponential-mechanism quantile of every group (:func:`.noise.exponential_mechanism` at ``scale``):
    candidates the ``2**depth + 1`` edges ``e_j`` of the leaves, scores ``−|L_j − q·n|`` (``L_j`` the kept rows'
    values below ``e_j``, ``n`` all of them; a unit's at most M rows move every score by at most
    ``M·max(q, 1 − q)``)."""
    leaves = hist.shape[1]
    below = np.concatenate([np.zeros((len(hist), 1), np.int64), np.cumsum(hist, axis=1)], axis=1)
    best = exponential_mechanism(pair, words, below, below[:, -1], stat.q, scale)
    return stat.low + best * ((stat.high - stat.low) / leaves)


def _selection(req: Request, kernel):
    """(threshold τ, δ_sel) of private selection on the noisy unit count drawn by ``kernel`` (:mod:`.selection`).
    On the exact tier the noisy unit count is g·(k + N), k the lattice index of the count and N integer: a
    group of one unit (k₁ = ⌊1/g + ½⌋) is kept when N > h, h the integer threshold of the lattice noise in
    lattice units, so τ = g·(k₁ + h) and δ_sel = a/(1 − a), a = K·Pr[N > h]."""
    share = req.delta * SELECTION_DELTA_SHARE
    if req.numerics != "exact":
        tau = threshold(kernel, req.max_groups, share)
        return tau, selection_delta(kernel, tau, req.max_groups)
    g = float(np.asarray(kernel.granularity))
    h = math.floor(threshold(kernel.noise, req.max_groups, share) - 1.0)  # Pr[N > h] = Pr[N > ⌊h⌋]
    return g * (math.floor(1.0 / g + 0.5) + h), selection_delta(kernel.noise, h + 1.0, req.max_groups)


def noise_std(kernel) -> float:
    """The standard deviation of the noise ``kernel`` adds, in the values' units.

    Args:
      kernel: a Gaussian, Laplace, discrete Gaussian or discrete Laplace kernel, or the
        :class:`~dpjax.exact.ExactLattice` of one.

    Returns:
      The standard deviation, a float (NaN for a kernel family not known here).
    """
    noise = kernel.noise if isinstance(kernel, ExactLattice) else kernel
    g = float(np.asarray(kernel.granularity)) if isinstance(kernel, ExactLattice) else 1.0
    scale = float(np.asarray(getattr(noise, noise.scale_name)))
    family = type(noise)
    if family in (by_name("gaussian"), by_name("discrete_gaussian")):  # (the discrete one's variance is ≤ σ²)
        return g * scale
    if family is by_name("discrete_laplace"):
        q = math.exp(-1.0 / scale)
        return g * math.sqrt(2 * q) / (1 - q)
    if family is by_name("laplace"):
        return g * math.sqrt(2) * scale
    return math.nan


def half_width(kernel, alpha: float) -> float:
    """``w`` with ``Pr[|error| > w] ≤ alpha`` for the error of a value released by ``kernel``.

    Its noise, and on the exact tier the rounding to the lattice (at most g/2). Remembered per
    (kernel, alpha).

    Args:
      kernel: a kernel, or its :class:`~dpjax.exact.ExactLattice`.
      alpha: the two-sided tail probability.

    Returns:
      ``w``, a float.
    """

    def compute():
        if isinstance(kernel, ExactLattice):
            g = float(np.asarray(kernel.granularity))
            return g * tail_point(kernel.noise, math.log(alpha / 2)) + g / 2
        return tail_point(kernel, math.log(alpha / 2))

    return remembered(("half_width", *kernel_key(kernel), float(alpha)), compute)


def finish(
    req: Request, key_words: KeyWords, cal, keys: pa.Table, words: np.ndarray, agg: dict, public: bool
) -> TableRelease:
    """Selection, noise and post-processing, from the integer aggregates (both backends).

    Args:
      req: the validated request.
      key_words: the release's keyed words (:class:`~dpjax.table.keys.KeyWords`).
      cal: the calibration (:class:`~dpjax.table.calibration.Calibration`).
      keys: the groups' keys, one row per group.
      words: the groups' hash words, aligned with ``keys``.
      agg: the exact integer aggregates per group (:mod:`dpjax.table.aggregate`).
      public: whether the groups are public (no selection).

    Returns:
      The :class:`TableRelease`.
    """
    meas, weight, _ = req.plan(not public)
    exact = req.numerics == "exact"
    kernels = {
        name: req.noise(cal.ratio * weight[name] * c.sensitivity) for name, (c, _) in meas.items() if not c.noisy_max
    }
    # the exponential mechanisms' scales β (drawn exactly on both tiers)
    choices = {name: cal.ratio * weight[name] * c.sensitivity for name, (c, _) in meas.items() if c.noisy_max}
    noisy = {}
    tau, d_sel = None, 0.0
    if not public:
        tau, d_sel = _selection(req, kernels["units"])
        present = candidates(agg)  # only groups with a kept row after bounding are candidates
        keys, words = keys.take(pa.array(present)), words[present]
        agg = {k: v[present] for k, v in agg.items()}
        noisy_units = draw(
            kernels["units"],
            key_words.component("units"),
            words,
            np.zeros((len(words), 1)),
            agg["units"].astype(np.float64)[:, None],
        )[:, 0]
        kept = np.flatnonzero(noisy_units > tau)
        keys, words = keys.take(pa.array(kept)), words[kept]
        agg = {k: v[kept] for k, v in agg.items()}
        noisy["units"] = noisy_units[kept]  # the count thresholded is the count released
        order = pc.sort_indices(keys, sort_keys=[(c, "ascending", "at_end") for c in req.by])
        order = order.to_numpy()
        keys, words = keys.take(pa.array(order)), words[order]
        agg = {k: v[order] for k, v in agg.items()}
        noisy["units"] = noisy["units"][order]
    columns = {c: keys.column(c) for c in req.by}
    n = len(words)
    for s in req.statistics:
        comps = req.stat_components(s)
        for c in comps:
            if c.name not in noisy and not c.noisy_max:
                values = component_values(c, s, agg, req.discrete)[:, None]
                noisy[c.name] = draw(
                    kernels[c.name], key_words.component(c.name), words, np.zeros(values.shape), values
                )[:, 0]
        if s.kind == "quantile":
            c = comps[0]
            out = _quantile(
                s, choices[c.name], key_words.component(c.name), words, agg[f"tree:{s.bounds_key()}:{s.depth}"]
            )
            columns[s.name] = pa.array(out)
            for suffix in ("std", "ci_low", "ci_high"):
                columns[f"{s.name}_{suffix}"] = pa.nulls(n, pa.float64())
            continue
        parts = [noisy[c.name] for c in comps]
        out = s.finish(parts, req.discrete)
        lo, hi = s.interval(parts, [half_width(kernels[c.name], req.alpha / len(comps)) for c in comps], req.discrete)
        std = s.std(parts, [noise_std(kernels[c.name]) for c in comps], req.discrete)
        if s.kind in ("count", "count_units") and (req.discrete or exact) or req.discrete and s.kind == "sum":
            out = np.rint(out).astype(np.int64)
        columns[s.name] = pa.array(out)
        columns[f"{s.name}_std"] = pa.array(np.asarray(std, np.float64))
        columns[f"{s.name}_ci_low"] = pa.array(np.asarray(lo, np.float64))
        columns[f"{s.name}_ci_high"] = pa.array(np.asarray(hi, np.float64))
    table = pa.table(columns)
    scales = {name: run_scale(k) for name, k in kernels.items()} | choices
    steps = {name: float(np.asarray(k.granularity)) for name, k in kernels.items()} if exact else {}
    ratios = {name: cal.ratio * weight[name] for name in meas}
    # the composition's δ share plus selection's a/(1 − a)
    return TableRelease(
        table=table,
        epsilon=cal.epsilon,
        delta=cal.delta + d_sel,
        row_level=req.privacy_unit is None,
        privacy_unit=req.privacy_unit,
        max_groups_per_unit=req.max_groups,
        max_rows_per_group=req.max_rows,
        noise=req.noise_name,
        scales=scales,
        threshold=tau,
        selection_delta=d_sel,
        numerics=req.numerics,
        granularity=steps,
        ratios=ratios,
        alpha=req.alpha,
    )


def release(
    key,
    data,
    *,
    by,
    statistics,
    privacy_unit=None,
    max_groups_per_unit=None,
    max_rows_per_group=None,
    epsilon,
    delta=0.0,
    groups=None,
    noise="laplace",
    numerics=None,
    weights=None,
    alpha=0.05,
) -> TableRelease:
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
      max_groups_per_unit: the most groups a unit contributes to (required with a unit).
      max_rows_per_group: the most rows a unit contributes to one group (required with a unit).
      epsilon: the ε of the whole release.
      delta: the δ of the whole release; ``delta > 0`` when groups are selected.
      groups: ``None`` (private selection), or the public groups: a list of keys (tuples for
        several columns), a dict column → list of values (their cross product), or a table of keys.
      noise: ``"laplace"`` (default, as ``dpjax release``), ``"gaussian"``, ``"discrete_laplace"``,
        ``"discrete_gaussian"``, a kernel class of the protocol (:mod:`dpjax.kernels`) or a kernel instance.
      numerics: ``"exact"`` — integer-only noise, each noisy value the kernel's lattice mechanism
        (``kernel.exact_lattice()``: rounded to the lattice gℤ, discrete Laplace or discrete Gaussian noise
        drawn by integer comparisons only), calibrated and accounted as that mechanism (lattice sensitivity
        ⌈Δ/g⌉); ``"float"`` — the kernel's float sampler (docs/threat-model.md); ``None`` (default): exact
        for ``"laplace"`` and the integer-valued kernels, float for ``"gaussian"`` (its exact lattice, a
        discrete Gaussian accounted from its atoms, calibrates far slower: ask for it) and for
        kernels without an exact sampler (:func:`numerics_of`). ``TableRelease.numerics`` says which ran.
      weights: ``{statistic name or "selection": w}`` (default 1 each): how much each statistic's error (and the
        selection's, through the noise of the unit count it thresholds) weighs in the budget split; a larger
        weight gives that statistic's measurements a larger share of (ε, δ) (docs/tables.md, "One budget").
      alpha: the confidence intervals' level is ``1 − alpha`` (the ``<stat>_ci_low``/``_ci_high`` columns).

    Returns:
      A :class:`TableRelease`: the released table and the exact (ε, δ) of the release.

    Raises:
      ValueError: every check (the arguments, as :func:`validate`; the key; the columns, value types, nulls,
        duplicated public groups, an empty table) raises before any noise is drawn.

    References:
      McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007 (the quantile's exponential
      mechanism); Dong, Durfee & Rogers, "Optimal differential privacy composition for exponential mechanisms",
      ICML 2020 (its accounting as a bounded-range mechanism); docs/tables.md (bounding, selection and the budget
      split).
    """
    req = validate(
        by,
        statistics,
        privacy_unit,
        max_groups_per_unit,
        max_rows_per_group,
        epsilon,
        delta,
        groups,
        noise,
        numerics,
        weights,
        alpha,
    )
    key = check_key(key)
    public = _data.public_groups(groups, req.by) if groups is not None else None
    cal = calibrate(
        req.make,
        req.plan(public is None)[2],
        req.epsilon,
        req.delta * (1 - SELECTION_DELTA_SHARE) if public is None else req.delta,
        req.discrete,
        req.numerics == "exact",
    )
    key_words = KeyWords(key)
    if type(data).__module__.startswith("pyspark"):
        from dpjax.table.spark import spark_aggregates

        keys, words, agg = spark_aggregates(req, data, public, key_words.bounding(), _local_aggregates)
    else:
        keys, words, agg = _local_aggregates(req, data, public, key_words.bounding())
    return finish(req, key_words, cal, keys, words, agg, public is not None)


def release_file(key, path, *, by, statistics, **options) -> TableRelease:
    """:func:`release` of a CSV or Parquet file — the command line's entry point.

    Only the columns the release uses are read, in record batches (:mod:`dpjax.table.data`).

    Args:
      key: a Threefry PRNG key, consumed once.
      path: a file (CSV, or Parquet by its extension) or ``"-"``, CSV text on standard input.
      by: a column name or a comma-separated list of them (or a list).
      statistics: statistics or their spellings (``"count"``, ``"sum:steps:0:20000"``,
        ``"quantile:steps:0.5:0:20000"``; a comma-separated string for several; a name holding a comma
        double-quoted as in CSV, ``'"a,b",c'``, :func:`dpjax.table.statistics.split`).
      **options: the other keyword arguments of :func:`release`; ``groups`` may be the path of a CSV/Parquet
        file of public keys.

    Returns:
      The :class:`TableRelease`.

    Raises:
      ValueError: a quote left open in ``by`` or ``statistics``, a statistic's spelling not understood, or
        any refusal of :func:`release`.
    """
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
