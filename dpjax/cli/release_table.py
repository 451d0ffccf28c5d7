"""``dpjax release`` through the table layer (:mod:`dpjax.table`): a privacy unit with contribution
bounds, several statistics in one run under one exactly-accounted budget, public groups
(``--groups FILE``) or private group selection, CSV (a file or standard input) or Parquet input.

The default run — no ``--input``, a kernel calibrated by ``--epsilon`` — goes this way too: the
embedded daily step log (:mod:`dpjax.data`, several rows per user) with ``user_id`` as the privacy
unit, each user keeping at most ``--max-groups-per-unit`` (1) group and ``--max-rows-per-group``
(7, the days of a week) rows in it.

``--statistic`` and ``--group-by`` are comma-separated lists (a name holding a comma double-quoted as
in CSV: ``--group-by '"a,b",c'``); each ``--statistic`` item is ``count``, ``count_units``, or
``sum``/``mean``/``variance`` (on ``--value-column``, bounds ``--window LO HI``, else
``[-clip, clip]``), or the full spelling of :func:`dpjax.table.statistics.parse`
(``sum:COL:LOW:HIGH``, ``quantile:COL:Q:LOW:HIGH``). The input is read in record batches, only the
columns the release uses (:mod:`dpjax.table.data`). The output file holds only released values
(the true ones too with ``--include-true-values``, a warning says so); on screen the true values
(every row, unclipped, unbounded) are shown beside the released ones for the embedded dataset and
with ``--include-true-values``. Errors name the flag they come from.

Numerics: the exact tier (integer-only noise on each component's lattice, accounted as the mechanism
run) wherever the kernel has one, as :func:`dpjax.table.release` decides (``--numerics exact|float``
to choose); the report's ``numerics:`` line says which ran.
"""

from __future__ import annotations

import re
import sys

import numpy as np

from dpjax.cli._common import calibration_parameters, emit, given, kernel_class, refuse_flags
from dpjax.cli._release_common import FLOAT_NUMERICS
from dpjax.cli.io import check_output
from dpjax.table.statistics import component_label

#: flags that send a release through the table layer
TABLE_FLAGS = ("privacy_unit", "max_groups_per_unit", "max_rows_per_group", "groups")
#: flags of the other releases (a kernel at a given scale, mixtures, PB-DP, composite)
_REFUSED = ("scale", "sigma", "r", "c", "kernel", "region", "theta", "tau", "rho", "activation",
            "base", "per_record_budget", "eps_min", "eps_max", "prdp_method")
#: the embedded dataset of the default run, its privacy unit and bounds (a user logs up to 7 days)
EMBEDDED = "steps_daily.csv"
EMBEDDED_UNIT, EMBEDDED_MAX_GROUPS, EMBEDDED_MAX_ROWS = "user_id", 1, 7
_DEMO = "embedded dataset: a week of daily steps of 1000 synthetic health-app users, several rows per user"


def wanted(args) -> bool:
    """Whether this release goes through the table layer: a table flag, several or table-only
    statistics, a Parquet input, or the default run (the embedded dataset, a kernel calibrated by
    ``--epsilon`` alone: neither ``--scale`` nor ``--sigma``, no mixture, PB-DP or composite)."""
    stat = args.statistic or ""
    if (any(getattr(args, f) is not None for f in TABLE_FLAGS) or stat not in ("", "sum", "count", "mean")
            or str(args.input or "").endswith((".parquet", ".pq"))):
        return True
    if args.input is not None or args.mechanism in ("boosted", "composite"):
        return False
    if set(given(args)) & {"scale", "sigma", "r", "c"}:
        return False
    return not calibration_parameters(kernel_class(args.mechanism, "--mechanism"))


def statistics(args):
    """The ``--statistic`` list as table statistics."""
    from dpjax import table
    from dpjax.table.statistics import parse, split

    lo, hi = (float(x) for x in args.window) if args.window else (-args.clip, args.clip)
    short = {"sum": table.sum, "mean": table.mean, "variance": table.variance}
    out = []
    try:
        for item in split(args.statistic or "sum"):  # the bounds as given: no text round trip
            out.append(short[item](args.value_column, lo, hi) if item in short else parse(item))
    except ValueError as exc:
        flag = "--window" if args.window and "low must be below high" in str(exc) else "--statistic"
        raise ValueError(f"{flag}: {exc}") from None
    return out


def group_columns(args) -> list:
    """The ``--group-by`` list (CSV quoting: ``'"a,b",c'``)."""
    from dpjax.table.statistics import split

    try:
        by = split(args.group_by)
    except ValueError as exc:
        raise ValueError(f"--group-by: {exc}") from None
    return by


def _flag(message: str, args, by, unit) -> str:
    """The flag a table-layer error comes from."""
    named = re.findall(r"'([^']+)'", message)
    if message.startswith("column "):  # the content of a value column
        return "--value-column" if args.value_column in named else "--statistic"
    if "unknown column" in message:
        if any(n in by for n in named):
            return "--group-by"
        if unit is not None and unit in named:
            return "--privacy-unit"
        return "--value-column" if args.value_column in named else "--statistic"
    for prefix, flag in (("privacy_unit", "--privacy-unit"), ("max_groups_per_unit", "--max-groups-per-unit"),
                         ("max_rows_per_group", "--max-rows-per-group"), ("epsilon", "--epsilon"),
                         ("delta", "--delta"), ("groups", "--groups"), ("statistic", "--statistic"),
                         ("noise", "--mechanism"), ("by", "--group-by"), ("numerics", "--numerics")):
        if message.startswith(prefix):
            return flag
    return "--input"


def true_values(data, by, stats, unit, keys):
    """The true statistics of every row of ``data`` (no bounding, no clipping, no noise) for the
    groups of ``keys`` (a table of by-columns; a group without rows: counts 0, the rest NaN)."""
    from dpjax.table import data as table_data

    value_columns = sorted({s.column for s in stats if s.column is not None})
    r = table_data.rows(data, by, unit, value_columns)
    size = len(r.group_words)
    known = table_data.words_to_u64(r.group_words)
    wanted_keys = table_data.words_to_u64(table_data.key_hashes(keys))
    order = np.argsort(known)
    pos = np.minimum(np.searchsorted(known[order], wanted_keys), size - 1)
    where = np.where(known[order][pos] == wanted_keys, order[pos], -1)
    n = np.bincount(r.group, minlength=size).astype(np.float64)
    out = {}
    for s in stats:
        if s.kind == "count":
            v = n
        elif s.kind == "count_units":
            if r.unit is None:
                v = n
            else:
                pairs = np.unique(r.group.astype(np.int64) * (int(r.unit.max()) + 1) + r.unit)
                v = np.bincount(pairs // (int(r.unit.max()) + 1), minlength=size).astype(np.float64)
        else:
            x = r.values[s.column]
            total = np.bincount(r.group, x, size)
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = total / n
                if s.kind == "sum":
                    v = total
                elif s.kind == "mean":
                    v = mean
                elif s.kind == "variance":
                    v = np.bincount(r.group, (x - mean[r.group]) ** 2, size) / n
                else:  # the q-quantile of each group, linear interpolation (numpy's default)
                    by_group = np.lexsort((x, r.group))
                    xs, start = x[by_group], np.cumsum(n.astype(np.int64)) - n.astype(np.int64)
                    at = s.q * np.maximum(n - 1, 0)
                    lo = np.floor(at).astype(np.int64)
                    hi = np.minimum(lo + 1, np.maximum(n.astype(np.int64) - 1, 0))
                    safe = np.minimum(start + lo, len(xs) - 1), np.minimum(start + hi, len(xs) - 1)
                    v = np.where(n > 0, xs[safe[0]] + (at - lo) * (xs[safe[1]] - xs[safe[0]]), np.nan)
        absent = 0.0 if s.kind in ("count", "count_units", "sum") else np.nan
        out[s.name] = np.where(where >= 0, v[np.maximum(where, 0)], absent)
    return out


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:>16,.1f}" if abs(v) < 1e12 else f"{v:>16.6g}"
    return f"{v:>16,}" if isinstance(v, int) else f"{str(v):>16}"


def _print(t, by, names, true, show, output):
    """The first ``show`` groups: released values, beside the true ones and the relative errors when
    ``true`` is given."""
    label = ",".join(by)
    head = f"{label:<16}"
    for name in names:
        head += f"{'true ' + name:>16}{name:>16}{'rel. error':>12}" if true is not None else f"{name:>16}"
    print(head)
    columns = {c: t.column(c).to_pylist() for c in t.column_names}
    for i in range(min(show, t.num_rows)):
        line = f"{','.join(str(columns[c][i]) for c in by):<16}"
        for name in names:
            r = columns[name][i]
            if true is None:
                line += _cell(r)
                continue
            tv = float(true[name][i])
            err = abs(r - tv) / max(abs(tv), 1e-12) if np.isfinite(tv) else float("nan")
            line += f"{_cell(tv)}{_cell(r)}{err:>12.3%}"
        print(line)
    if t.num_rows > show:
        print(f"... {t.num_rows - show} more groups" + (f" in {output}" if output not in (None, "-") else ""))


def release_table(args, key) -> int:
    from importlib import resources

    from dpjax import table
    from dpjax.cli._release_common import _report, _write

    refuse_flags(args, _REFUSED, "with the table release (--privacy-unit, --groups, several statistics, Parquet, "
                                 "the embedded dataset)")
    if args.mechanism in ("boosted", "composite"):
        raise ValueError(f"--mechanism {args.mechanism}: not available with the table release")
    noise = kernel_class(args.mechanism, "--mechanism")
    if calibration_parameters(noise):
        raise ValueError(f"--mechanism {args.mechanism}: not available with the table release (its calibration "
                         "needs --r and --c)")
    embedded = args.input is None
    if args.input == "-" and args.include_true_values:
        raise ValueError("--include-true-values: the true values need a second pass over the input; standard "
                         "input is read once (give --input a file)")
    check_output(args.output, [args.input] if args.input else [])
    by = group_columns(args)
    stats = statistics(args)
    unit = args.privacy_unit or (EMBEDDED_UNIT if embedded else None)
    if unit is None:
        refuse_flags(args, ["max_groups_per_unit", "max_rows_per_group"], "without --privacy-unit")
        print("dpjax: no --privacy-unit: each row is taken as a different person (the guarantee is per row)",
              file=sys.stderr)
        options = {}
    else:
        k, m = (EMBEDDED_MAX_GROUPS, EMBEDDED_MAX_ROWS) if embedded else (1, 1)
        options = dict(privacy_unit=unit,
                       max_groups_per_unit=k if args.max_groups_per_unit is None else args.max_groups_per_unit,
                       max_rows_per_group=m if args.max_rows_per_group is None else args.max_rows_per_group)
    path = str(resources.files("dpjax.data").joinpath(EMBEDDED)) if embedded else args.input
    try:
        rel = table.release_file(key, path, by=by, statistics=stats, epsilon=args.epsilon, delta=args.delta,
                                 groups=args.groups, noise=noise, numerics=args.numerics, **options)
    except ValueError as exc:
        message = str(exc)
        if message.startswith("--"):
            raise
        raise ValueError(f"{_flag(message, args, by, unit)}: {message}") from None
    t = rel.table
    names = t.column_names[len(by):]
    shown = embedded or args.include_true_values
    true = true_values(path, by, stats, unit, t.select(by)) if shown else None
    _write(args, t.column_names, list(zip(*(t.column(c).to_pylist() for c in t.column_names))),
           [(f"true_{n}", true[n].tolist()) for n in names] if true is not None else [], keys=len(by))
    payload = {"by": by, "statistics": names, "privacy_unit": rel.privacy_unit, "row_level": rel.row_level,
               "max_groups_per_unit": rel.max_groups_per_unit, "max_rows_per_group": rel.max_rows_per_group,
               "groups": "public" if args.groups else "selected privately", "noise": rel.noise,
               "numerics": rel.numerics, "granularity": rel.granularity,
               "epsilon": rel.epsilon, "delta": rel.delta, "requested": {"epsilon": args.epsilon, "delta": args.delta},
               "scales": rel.scales, "threshold": rel.threshold, "rows": t.to_pylist()}
    if true is not None:
        payload["true"] = [dict(zip(by, k), **{n: float(true[n][i]) for n in names})
                           for i, k in enumerate(zip(*(t.column(c).to_pylist() for c in by)))]
    with _report(args):
        if args.json:
            return emit(args, payload, ()) or 0
        source = _DEMO if embedded else ("standard input" if args.input == "-" else args.input)
        print(f"dpjax release (table) — {', '.join(names)} by {','.join(by)} ({source})")
        _print(t, by, names, true, args.show, args.output)
        if rel.privacy_unit:
            print(f"privacy unit {rel.privacy_unit!r}: each keeps at most {rel.max_groups_per_unit} group(s) and "
                  f"{rel.max_rows_per_group} row(s) per group (chosen at random); true values: every row, unbounded")
        else:
            print("no privacy unit: each row is taken as a different person (the guarantee is per row)")
        print("groups " + ("public (--groups)" if args.groups else
                           f"selected privately (noisy unit count above {rel.threshold:.1f})"))
        print(f"noise {rel.noise}, scale per component: " +
              ", ".join(f"{component_label(name)} {scale:,.4g}" for name, scale in rel.scales.items()))
        print(numerics_line(rel))
        print(f"privacy of the whole release: epsilon = {rel.epsilon:.4f}, delta = {rel.delta:.3g} "
              f"(composed exact PLD of every statistic and the group selection)")
    return 0


def numerics_line(rel) -> str:
    """The report's numerics line: the tier that ran and, on the exact tier, each component's lattice."""
    if rel.numerics != "exact":
        return FLOAT_NUMERICS
    lattices = ", ".join(f"{component_label(name)} {g:g}·Z" for name, g in rel.granularity.items())
    return (f"numerics: exact (integer-only noise on the lattice of each component: {lattices}; accounted as the "
            f"mechanisms run, integer noise at the lattice sensitivity ⌈Δ/g⌉)")
