"""``dpjax release``: aggregate a table by group and release it with noise, through :mod:`dpjax.table`.

Every kernel release — CSV (a file, gzip-compressed ``.csv.gz``, or standard input ``-``), Parquet, one
statistic or several, one ``--group-by`` column or several — is a :func:`dpjax.table.release_file`: a
privacy unit with contribution bounds (``--privacy-unit``; without it each row is taken as a person, said
once on stderr), the statistics under one exactly-accounted budget calibrated to ``--epsilon`` /
``--delta``, and group keys that appear only when they are public (``--groups FILE``) or selected
privately (a noisy unit count above a threshold: a key held by a few people is dropped). The default run
(no ``--input``) releases the embedded daily step log (:mod:`dpjax.data`, several rows per user) with
``user_id`` as the privacy unit, each user keeping at most ``--max-groups-per-unit`` (1) group and
``--max-rows-per-group`` (7, the days of a week) rows in it.

``--statistic`` and ``--group-by`` are comma-separated lists (a name holding a comma double-quoted as
in CSV: ``--group-by '"a,b",c'``); each ``--statistic`` item is ``count``, ``count_units``, or
``sum``/``mean``/``variance`` (on ``--value-column``, bounds ``--window LO HI``, else
``[-clip, clip]``), or the full spelling of :func:`dpjax.table.statistics.parse`
(``sum:COL:LOW:HIGH``, ``quantile:COL:Q:LOW:HIGH``). ``--mechanism`` is the noise kernel (a registry
name or ``package.module:Class``); a piecewise mixture takes its shape from ``--r``/``--c`` and its scale
from the calibration. Each released count and sum comes with its noise standard deviation and a
(1 − ``--alpha``) confidence interval. The output file holds only released values (the true ones too
with ``--include-true-values``, a warning says so); on screen the true values (every row, unclipped,
unbounded) are shown beside the released ones for the embedded dataset and with
``--include-true-values``. Errors name the flag they come from.

``--mechanism boosted`` (PB-DP) and ``--mechanism composite`` (bounded, unbiased means) and
``--per-record-budget`` (per-record DP) release on public groups only (:mod:`dpjax.cli.release_public`,
:mod:`dpjax.cli.release_prdp`).

Numerics: the exact tier (integer-only noise on each component's lattice, accounted as the mechanism
run) wherever the kernel has one, as :func:`dpjax.table.release` decides (``--numerics exact|float``
to choose); the report's ``numerics:`` line says which ran.
"""

from __future__ import annotations

import re

import numpy as np

from dpjax.cli._common import emit, given, kernel_class, kernel_names, progress, refuse_flags
from dpjax.cli._release_common import _BOOSTED, _COMPOSITE, _PRDP, FLOAT_NUMERICS, _key, _report, _write, released
from dpjax.cli.io import check_input, check_output

__all__ = ["add_parser", "run", "statistics", "true_values", "accuracy"]

#: flags of the releases on public groups (PB-DP, composite, per-record DP), refused here
_REFUSED = sorted((_BOOSTED | _COMPOSITE | _PRDP) - {"window", "scale", "sigma"})
#: the embedded dataset of the default run, its privacy unit and bounds (a user logs up to 7 days)
EMBEDDED = "steps_daily.csv"
EMBEDDED_UNIT, EMBEDDED_MAX_GROUPS, EMBEDDED_MAX_ROWS = "user_id", 1, 7
EMBEDDED_GROUP_BY = "age_group"
_DEMO = "embedded dataset: a week of daily steps of 1000 synthetic health-app users, several rows per user"


def statistics(args):
    """The ``--statistic`` list as table statistics.

    ``sum``, ``mean`` and ``variance`` are on ``--value-column`` with bounds ``--window LO HI`` (else
    ``[-clip, clip]``); other items are spelled as :func:`dpjax.table.statistics.parse` reads them.

    Args:
      args: the parsed flags.

    Returns:
      A list of :class:`dpjax.table.Statistic`.

    Raises:
      ValueError: an item not understood (naming ``--statistic``), or ``--window`` bounds in the wrong order.
    """
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
    named = re.findall(r"'([^']+)'", message.split("; the table has")[0])
    if message.startswith("column "):  # the content of a value column
        return "--value-column" if args.value_column in named else "--statistic"
    if "unknown column" in message:
        if any(n in by for n in named):
            return "--group-by"
        if unit is not None and unit in named:
            return "--privacy-unit"
        return "--value-column" if args.value_column in named else "--statistic"
    for prefix, flag in (
        ("privacy_unit", "--privacy-unit"),
        ("max_groups_per_unit", "--max-groups-per-unit"),
        ("max_rows_per_group", "--max-rows-per-group"),
        ("epsilon", "--epsilon"),
        ("delta", "--delta"),
        ("groups", "--groups"),
        ("statistic", "--statistic"),
        ("noise", "--mechanism"),
        ("by", "--group-by"),
        ("numerics", "--numerics"),
    ):
        if message.startswith(prefix):
            return flag
    return "--input"


def true_values(data, by, stats, unit, keys):
    """The true statistics of every row of ``data`` (no bounding, no clipping, no noise) for the groups of ``keys``.

    Args:
      data: the input (anything :func:`dpjax.table.data.rows` reads).
      by: the group columns.
      stats: the released statistics.
      unit: the privacy-unit column, or ``None``.
      keys: the released groups, a table of by-columns.

    Returns:
      ``{statistic name: values aligned with keys}`` (a group without rows: counts 0, the rest NaN).
    """
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


# ----------------------------------------------------------------------------------
# accuracy of each released value
# ----------------------------------------------------------------------------------
def accuracy(t, names) -> dict:
    """The noise of each released value, for the statistics whose release carries it.

    Read from the table's ``<name>_std``, ``_ci_low``, ``_ci_high`` columns (:func:`dpjax.table.release`);
    quantiles (an exponential mechanism, whose error is in rank) get none, nor a kernel whose variance is not
    known (NaN std).

    Args:
      t: the released table (pyarrow).
      names: the statistics' columns.

    Returns:
      ``{statistic name: (noise std per group, half-width of the (1 − alpha) interval per group)}``.
    """
    out = {}
    for n in names:
        if f"{n}_std" not in t.column_names:
            continue
        std = t.column(f"{n}_std").to_pylist()
        if all(v is None or not np.isfinite(v) for v in std):
            continue
        lo, hi = t.column(f"{n}_ci_low").to_pylist(), t.column(f"{n}_ci_high").to_pylist()
        out[n] = (std, [None if a is None or b is None else (b - a) / 2 for a, b in zip(lo, hi)])
    return out


def _span(values) -> str:
    """One figure, or the range of a per-group figure (a mean's noise depends on its group's count)."""
    v = [x for x in values if x is not None]
    if not v:
        return "-"
    lo, hi = min(v), max(v)
    return f"{lo:,.4g}" if lo == hi else f"{lo:,.4g}–{hi:,.4g}"


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return f"{'-':>16}"
    if isinstance(v, float):
        return f"{v:>16,.1f}" if abs(v) < 1e12 else f"{v:>16.6g}"
    return f"{v:>16,}" if isinstance(v, int) else f"{str(v):>16}"


def _print(t, by, names, true, acc, alpha, show, output):
    """The first ``show`` groups: released values with their ± half-width of the (1 − alpha) interval,
    beside the true ones and the relative errors when ``true`` is given."""
    label = ",".join(by)
    head = f"{label:<16}"
    for name in names:
        head += f"{'true ' + name:>16}" if true is not None else ""
        head += f"{name:>16}" + (f"{f'± {1 - alpha:.0%} CI':>14}" if name in acc else "")
        head += f"{'rel. error':>12}" if true is not None else ""
    print(head)
    columns = {c: t.column(c).to_pylist() for c in t.column_names}
    for i in range(min(show, t.num_rows)):
        line = f"{','.join(str(columns[c][i]) for c in by):<16}"
        for name in names:
            r = columns[name][i]
            line += _cell(float(true[name][i])) if true is not None else ""
            half = acc[name][1][i] if name in acc else None
            line += _cell(r) + ((f"{half:>14,.1f}" if half is not None else f"{'-':>14}") if name in acc else "")
            if true is not None:
                tv = float(true[name][i])
                err = abs(r - tv) / max(abs(tv), 1e-12) if np.isfinite(tv) and r is not None else float("nan")
                line += f"{err:>12.3%}"
        print(line)
    if t.num_rows > show:
        print(f"... {t.num_rows - show} more groups" + (f" in {output}" if output not in (None, "-") else ""))


def _noise(args):
    """The ``noise`` of the table release: a kernel class, or for a piecewise mixture the paper's
    ``from_epsilon(--epsilon, --r, --c)`` at sensitivity 1 as the template whose scale the release
    calibrates (the shape r and, for the Laplace mixture, c relative to the scale, kept)."""
    from dpjax.cli._common import calibration_parameters

    cls = kernel_class(args.mechanism, "--mechanism")
    shape = calibration_parameters(cls)
    if not shape:
        refuse_flags(args, ["r", "c"], f"to --mechanism {args.mechanism} (a piecewise mixture's shape)")
        return cls
    missing = [f"--{p}" for p in shape if getattr(args, p) is None]
    if missing:
        raise ValueError(
            f"{' and '.join(missing)}: --mechanism {args.mechanism} needs its shape "
            f"{' and '.join('--' + p for p in shape)}; its scale is calibrated to --epsilon"
        )
    try:
        return cls.from_epsilon(args.epsilon, **{p: getattr(args, p) for p in shape})
    except ValueError as exc:
        raise ValueError(f"--r/--c: {exc}") from None


def release_table(args) -> int:
    """A kernel release through :func:`dpjax.table.release_file` (the module docstring)."""
    from importlib import resources

    from dpjax import table
    from dpjax.table.statistics import component_label

    refuse_flags(args, _REFUSED, f"to --mechanism {args.mechanism} (a table release calibrated to --epsilon)")
    for dest in ("scale", "sigma"):
        if dest in given(args):
            raise ValueError(
                f"{given(args)[dest]} does not apply: dpjax release calibrates the noise to --epsilon "
                "and --delta (the privacy of a given scale: dpjax account)"
            )
    if not (0.0 < args.alpha < 1.0):
        raise ValueError(f"--alpha must lie in (0, 1), got {args.alpha}")
    noise = _noise(args)
    if args.plot:
        from dpjax.cli import plots

        plots.check(args.plot)
    embedded = args.input is None
    if args.input == "-" and args.include_true_values:
        raise ValueError(
            "--include-true-values: the true values need a second pass over the input; standard "
            "input is read once (give --input a file)"
        )
    if args.input is not None:
        check_input(args.input)
    check_output(args.output, [args.input] if args.input else [])
    by = group_columns(args)
    stats = statistics(args)
    unit = args.privacy_unit or (EMBEDDED_UNIT if embedded else None)
    if unit is None:
        refuse_flags(args, ["max_groups_per_unit", "max_rows_per_group"], "without --privacy-unit")
        options = {}
    else:
        k, m = (EMBEDDED_MAX_GROUPS, EMBEDDED_MAX_ROWS) if embedded else (1, 1)
        options = dict(
            privacy_unit=unit,
            max_groups_per_unit=k if args.max_groups_per_unit is None else args.max_groups_per_unit,
            max_rows_per_group=m if args.max_rows_per_group is None else args.max_rows_per_group,
        )
    path = str(resources.files("dpjax.data").joinpath(EMBEDDED)) if embedded else args.input
    key = _key(args.seed)
    try:
        with progress("calibrating and releasing"):
            rel = table.release_file(
                key,
                path,
                by=by,
                statistics=stats,
                epsilon=args.epsilon,
                delta=args.delta,
                groups=args.groups,
                noise=noise,
                numerics=args.numerics,
                alpha=args.alpha,
                **options,
            )
    except ValueError as exc:
        message = str(exc)
        if message.startswith("--"):
            raise
        flag = _flag(message, args, by, unit)
        if flag == "--group-by" and args.group_by == EMBEDDED_GROUP_BY and "unknown column" in message:
            message += f" (--group-by defaults to the embedded dataset's {EMBEDDED_GROUP_BY}: name a column of yours)"
        raise ValueError(f"{flag}: {message}") from None
    released(args, rel.row_level)
    t = rel.table
    names = [s.name for s in stats]  # (beside each in the table: _std, _ci_low, _ci_high)
    acc = accuracy(t, names)
    shown = embedded or args.include_true_values
    true = true_values(path, by, stats, unit, t.select(by)) if shown else None
    rows = t.to_pylist()
    header = t.column_names
    _write(
        args,
        header,
        [tuple(r.values()) for r in rows],
        [(f"true_{n}", true[n].tolist()) for n in names] if true is not None else [],
        keys=len(by),
    )
    if args.plot:
        plots.release_plot(args.plot, t, by, names, acc, args.alpha, true)
    payload = {
        "by": by,
        "statistics": names,
        "privacy_unit": rel.privacy_unit,
        "row_level": rel.row_level,
        "max_groups_per_unit": rel.max_groups_per_unit,
        "max_rows_per_group": rel.max_rows_per_group,
        "groups": "public" if args.groups else "selected privately",
        "noise": rel.noise,
        "numerics": rel.numerics,
        "epsilon": rel.epsilon,
        "delta": rel.delta,
        "requested": {"epsilon": args.epsilon, "delta": args.delta},
        "alpha": args.alpha,
        "noise_std": {n: a[0] for n, a in acc.items()},  # per group, as the rows
        "scales": {component_label(c): s for c, s in rel.scales.items()},
        "granularity": {component_label(c): g for c, g in rel.granularity.items()},
        "threshold": rel.threshold,
        "rows": rows,
    }
    if true is not None:
        payload["true"] = [
            dict(zip(by, k), **{n: float(true[n][i]) for n in names})
            for i, k in enumerate(zip(*(t.column(c).to_pylist() for c in by)))
        ]
    with _report(args):
        if args.json:
            return emit(args, payload, ()) or 0
        source = _DEMO if embedded else ("standard input" if args.input == "-" else args.input)
        print(f"dpjax release — {', '.join(names)} by {','.join(by)} ({source})")
        _print(t, by, names, true, acc, args.alpha, args.show, args.output)
        if rel.privacy_unit:
            print(
                f"privacy unit {rel.privacy_unit!r}: each keeps at most {rel.max_groups_per_unit} group(s) and "
                f"{rel.max_rows_per_group} row(s) per group (chosen at random); true values: every row, unbounded"
            )
        print(
            "groups "
            + (
                "public (--groups)"
                if args.groups
                else f"selected privately (noisy unit count above {rel.threshold:.1f})"
            )
        )
        print(
            f"noise {rel.noise}, scale per component: "
            + ", ".join(f"{component_label(name)} {scale:,.4g}" for name, scale in rel.scales.items())
        )
        if acc:
            print(
                "noise std: "
                + ", ".join(f"{n} {_span(a[0])}" for n, a in acc.items())
                + f"; ± the half-width of the {1 - args.alpha:.0%} interval of the noise (--alpha)"
            )
        print(numerics_line(rel))
        print(
            f"privacy of the whole release: epsilon = {rel.epsilon:.4f}, delta = {rel.delta:.3g} "
            f"(composed exact PLD of every statistic and the group selection)"
        )
    return 0


def numerics_line(rel) -> str:
    """The report's numerics line: the tier that ran and, on the exact tier, each component's lattice."""
    from dpjax.table.statistics import component_label

    if rel.numerics != "exact":
        return FLOAT_NUMERICS
    lattices = ", ".join(f"{component_label(name)} {g:g}·Z" for name, g in rel.granularity.items())
    return (
        f"numerics: exact (integer-only noise on the lattice of each component: {lattices}; accounted as the "
        f"mechanisms run, integer noise at the lattice sensitivity ⌈Δ/g⌉)"
    )


# ----------------------------------------------------------------------------------
# the command line
# ----------------------------------------------------------------------------------
def run(args) -> int:
    """Run ``dpjax release``: a per-record, PB-DP or composite release, or a kernel release through the table layer.

    Args:
      args: the parsed flags.

    Returns:
      The exit status (0).

    Raises:
      ValueError: an invalid flag (naming it), or any refusal of the release.
    """
    if args.show < 0:
        raise ValueError(f"--show must be a non-negative number of groups, got {args.show}")
    if args.clip <= 0 or not np.isfinite(args.clip):
        raise ValueError(f"--clip must be a positive finite number, got {args.clip}")
    if args.per_record_budget is not None:
        from dpjax.cli.release_prdp import release_per_record

        return release_per_record(args)
    refuse_flags(args, sorted(_PRDP - {"per_record_budget"}), "without --per-record-budget")
    if args.mechanism in ("boosted", "composite"):
        from dpjax.cli import release_public

        return release_public.run(args)
    return release_table(args)


def add_parser(sub) -> None:
    """Add the ``release`` subcommand to the subparsers ``sub``.

    Args:
      sub: the ``dpjax`` parser's subparsers.
    """
    from dpjax.cli.release_public import REGIONS

    kernels = kernel_names()
    mechanisms = kernels + ("boosted", "composite")
    r = sub.add_parser(
        "release",
        help="aggregate a table by group and release it with calibrated noise",
        description=__doc__.split("\n\n")[0],
    )
    r.add_argument(
        "--input",
        help="CSV file (.csv.gz too) with a header row, a Parquet file, or - for CSV on "
        "standard input (default: the embedded step-count dataset)",
    )
    r.add_argument("--value-column", default="steps", help="numeric column to aggregate (default: steps)")
    r.add_argument(
        "--group-by",
        default=EMBEDDED_GROUP_BY,
        help=f"column(s) to group by, comma-separated (default: {EMBEDDED_GROUP_BY})",
    )
    r.add_argument(
        "--statistic",
        help="sum (default), count, count_units, mean, variance, or several comma-separated; full "
        "spellings sum:COL:LOW:HIGH, quantile:COL:Q:LOW:HIGH",
    )
    r.add_argument(
        "--clip",
        type=float,
        default=20000.0,
        help="values clipped to [-clip, clip] for sum/mean/variance without --window (default 20000)",
    )
    r.add_argument(
        "--mechanism",
        default="laplace",
        metavar="{" + ",".join(mechanisms) + ",package.module:Class}",
        help="noise kernel (default laplace), calibrated to --epsilon/--delta for the whole release",
    )
    r.add_argument("--epsilon", type=float, default=1.0, help="epsilon of the whole release (default 1)")
    r.add_argument("--delta", type=float, default=1e-6, help="delta of the whole release (default 1e-6)")
    r.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="each count and sum comes with its (1 - alpha) noise interval (default 0.05)",
    )
    r.add_argument("--r", type=float, help="laplace-mixture / geometric-mixture: outer/inner scale ratio r")
    r.add_argument(
        "--c",
        type=float,
        help="laplace-mixture / geometric-mixture: breakpoint c of the paper's "
        "parametrisation at --epsilon (integer for geometric-mixture)",
    )
    r.add_argument(
        "--numerics",
        choices=("exact", "float"),
        help="noise tier: exact (integer-only sampler on a data-independent lattice, the default where the "
        "mechanism has one) or float (idealized numerics; the default where it has none)",
    )
    r.add_argument(
        "--seed",
        type=int,
        help="integer seed: a reproducible release, never to be repeated on the same "
        "data (default: a fresh key from the OS)",
    )
    r.add_argument(
        "--output",
        help="write the released table to this CSV file; - for standard output (the report then goes to stderr)",
    )
    r.add_argument(
        "--include-true-values",
        action="store_true",
        help="demo only: also write the true, unprotected values (a warning says so)",
    )
    r.add_argument("--show", type=int, default=10, help="groups shown on screen (default 10)")
    r.add_argument(
        "--plot",
        metavar="FILE.png",
        help="draw each released value with its interval, per group (needs the plot extra: matplotlib)",
    )
    r.add_argument("--json", action="store_true", help="print the result as one JSON object instead of the report")
    t = r.add_argument_group("privacy unit, contribution bounds, public groups")
    t.add_argument("--privacy-unit", metavar="COL", help="column identifying a person (default: each row is one)")
    t.add_argument("--max-groups-per-unit", type=int, metavar="K", help="groups a unit may contribute to (default 1)")
    t.add_argument(
        "--max-rows-per-group", type=int, metavar="M", help="rows a unit may contribute per group (default 1)"
    )
    t.add_argument("--groups", metavar="FILE", help="CSV/Parquet of public group keys (default: private selection)")
    b = r.add_argument_group("boosted (PB-DP): a utility constraint instead of a budget, on public groups")
    b.add_argument(
        "--kernel",
        default="gaussian",
        metavar="{" + ",".join(kernels) + ",package.module:Class}",
        help="kernel the boost re-weights, compared with the same plain kernel meeting the constraint "
        "(default gaussian)",
    )
    b.add_argument(
        "--region",
        choices=REGIONS,
        default="relative",
        help="preferred region S(Q): relative error |Y-Q| <= theta|Q| + tau, or absolute |Y-Q| <= tau",
    )
    b.add_argument("--theta", type=float, default=0.05, help="relative error (default 0.05)")
    b.add_argument("--tau", type=float, help="absolute error / offset (default: 2 x sensitivity)")
    b.add_argument("--rho", type=float, default=0.9, help="required Pr[release in S(Q)] (default 0.9)")
    b.add_argument("--scale", type=float, help="boosted: the kernel's scale (no tuning)")
    b.add_argument("--sigma", type=float, help="boosted: the kernel's sigma (no tuning)")
    k = r.add_argument_group("composite (bounded, unbiased): group means on a public window and public groups")
    k.add_argument(
        "--window",
        type=float,
        nargs=2,
        metavar=("LO", "HI"),
        help="public input window: values are clipped to it (also the bounds of sum/mean/variance)",
    )
    k.add_argument("--activation", default="rectangle", help="rectangle (A1, default), half_sine (A2), triangle (A3)")
    k.add_argument("--base", default="uniform", help="uniform (B1, default) or quartic (B2)")
    g = r.add_argument_group("per-record DP (dpjax.prdp): each row's own budget, on public groups")
    g.add_argument(
        "--per-record-budget",
        metavar="COLUMN",
        help="column with each row's privacy budget E(r); releases --statistic per group under "
        "per-record DP (embedded dataset: privacy_budget)",
    )
    g.add_argument(
        "--eps-min",
        type=float,
        help="least budget of the domain, public (embedded dataset: 0.02, the strictest setting)",
    )
    g.add_argument("--eps-max", type=float, help="largest budget (cap), public (embedded dataset: 4)")
    g.add_argument("--beta", type=float, default=0.1, help="failure probability of the level search (default 0.1)")
    g.add_argument(
        "--prdp-method",
        choices=("framework", "extension"),
        default="framework",
        help="sum: Algorithm 2 with the universal sum (default) or the Section 5.2 extension",
    )
    r.set_defaults(run=run)
