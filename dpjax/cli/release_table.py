"""``dpjax release`` through the table layer (:mod:`dpjax.table`): a privacy unit with contribution
bounds, several statistics in one run under one exactly-accounted budget, public groups
(``--groups FILE``) or private group selection, CSV or Parquet input (by extension).

``--statistic`` is a comma-separated list; each item is ``count``, ``count_units``, or
``sum``/``mean``/``variance`` (on ``--value-column``, bounds ``--window LO HI``, else
``[-clip, clip]``), or the full spelling of :func:`dpjax.table.statistics.parse`
(``sum:COL:LOW:HIGH``, ``quantile:COL:Q:LOW:HIGH``). The output file holds only released values.
"""

from __future__ import annotations

import sys

from dpjax.cli._common import kernel_class, refuse_flags
from dpjax.cli.io import check_output, write_csv

#: flags that send a release through the table layer
TABLE_FLAGS = ("privacy_unit", "max_groups_per_unit", "max_rows_per_group", "groups")
_REFUSED = ("scale", "sigma", "r", "c", "numerics", "kernel", "region", "theta", "tau", "rho", "activation",
            "base", "per_record_budget", "eps_min", "eps_max", "prdp_method", "json")


def wanted(args) -> bool:
    """Whether this release goes through the table layer: a table flag, several or table-only
    statistics, or a Parquet input."""
    stat = args.statistic or ""
    return (any(getattr(args, f) is not None for f in TABLE_FLAGS) or stat not in ("", "sum", "count", "mean") or str(args.input or "").endswith(".parquet"))


def statistics(args):
    """The ``--statistic`` list as table statistics."""
    from dpjax.table.statistics import parse

    lo, hi = (float(x) for x in args.window) if args.window else (-args.clip, args.clip)
    out = []
    for item in (args.statistic or "sum").split(","):
        item = item.strip()
        if item in ("sum", "mean", "variance"):
            item = f"{item}:{args.value_column}:{lo:g}:{hi:g}"
        try:
            out.append(parse(item))
        except ValueError as exc:
            raise ValueError(f"--statistic: {exc}") from None
    return out


def release_table(args, key) -> int:
    from dpjax import table
    from importlib import resources

    refuse_flags(args, _REFUSED, "with the table release (--privacy-unit, --groups, several statistics, Parquet)")
    if args.mechanism in ("boosted", "composite"):
        raise ValueError(f"--mechanism {args.mechanism}: not available with the table release")
    if args.include_true_values:
        raise ValueError("--include-true-values: the table release writes released values only")
    noise = kernel_class(args.mechanism, "--mechanism")
    path = args.input or str(resources.files("dpjax.data").joinpath("steps.csv"))
    if args.input == "-":
        raise ValueError("--input -: the table release reads a CSV or Parquet file, not standard input")
    check_output(args.output, [args.input] if args.input else [])
    if args.privacy_unit is None:
        print("dpjax: no --privacy-unit: each row is taken as a different person (the guarantee is per row)",
              file=sys.stderr)
    options = {}
    if args.privacy_unit is not None:
        options = dict(privacy_unit=args.privacy_unit, max_groups_per_unit=args.max_groups_per_unit or 1,
                       max_rows_per_group=args.max_rows_per_group or 1)
    else:
        refuse_flags(args, ["max_groups_per_unit", "max_rows_per_group"], "without --privacy-unit")
    rel = table.release_file(key, path, by=args.group_by, statistics=statistics(args), epsilon=args.epsilon,
                             delta=args.delta, groups=args.groups, noise=noise, **options)
    t = rel.table
    if args.output is not None:
        write_csv(args.output, t.column_names, list(zip(*(t.column(c).to_pylist() for c in t.column_names))))
    out = sys.stderr if args.output == "-" else sys.stdout
    print(f"dpjax release (table) — {', '.join(t.column_names[len(args.group_by.split(',')):])} by "
          f"{args.group_by} ({args.input or 'embedded dataset'})", file=out)
    print(",".join(t.column_names), file=out)
    for row in list(zip(*(t.column(c).to_pylist() for c in t.column_names)))[:args.show]:
        print(",".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in row), file=out)
    unit = f"unit {rel.privacy_unit!r}" if rel.privacy_unit else "unit: one row"
    print(f"{unit}, at most {rel.max_groups_per_unit} groups and {rel.max_rows_per_group} rows per group; "
          f"groups {'public (--groups)' if args.groups else 'selected privately'}", file=out)
    print(f"privacy of the whole release: epsilon = {rel.epsilon:.4f}, delta = {rel.delta:.3g} "
          f"(composed exact PLD, noise {rel.noise})", file=out)
    return 0
