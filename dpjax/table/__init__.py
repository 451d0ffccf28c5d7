"""Releases from real tables: privacy units, contribution bounds, group selection, several
statistics under one exactly-accounted budget (docs/tables.md).

::

    from dpjax import table
    rel = table.release(key, data, by="age_group",
                        statistics=[table.count(), table.sum("steps", low=0, high=20000)],
                        privacy_unit="user_id", max_groups_per_unit=3, max_rows_per_group=2,
                        epsilon=1.0, delta=1e-6)
    rel.table, rel.epsilon, rel.delta

Modules, one concept each: :mod:`.data` (reading, normalising), :mod:`.keys` (keyed
randomness), :mod:`.bounding` (contribution bounding), :mod:`.aggregate` (exact per-group
integer aggregates), :mod:`.statistics` (statistics, sensitivities), :mod:`.calibration` (one
budget on the composed PLD), :mod:`.selection` (private partition selection), :mod:`.noise`,
:mod:`.release` (the entry point), :mod:`.spark` (the Spark backend). Unlike the rest of
``dpjax``, this layer imports :mod:`accounting` (the calibration is exact).
"""

from dpjax.table.release import TableRelease, release, release_file
from dpjax.table.statistics import Statistic, count, count_units, mean, quantile, sum, variance

__all__ = [
    "release",
    "release_file",
    "TableRelease",
    "Statistic",
    "count",
    "count_units",
    "sum",
    "mean",
    "variance",
    "quantile",
]
