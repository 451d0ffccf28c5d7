"""What every ``dpjax release`` path shares.

The flag sets each path allows (the table release of :mod:`dpjax.cli.release`, the PB-DP and composite
releases of :mod:`dpjax.cli.release_public`, the per-record release of :mod:`dpjax.cli.release_prdp`), the
release key, the public groups, and the report and release file.
"""

from __future__ import annotations

import contextlib
import sys

import numpy as np

from dpjax.cli._common import refuse_flags
from dpjax.cli.io import write_csv

#: flags every release takes
_COMMON = {
    "groups",
    "input",
    "value_column",
    "group_by",
    "statistic",
    "clip",
    "mechanism",
    "seed",
    "output",
    "show",
    "include_true_values",
    "json",
}
#: flags of the table release only
_TABLE = {"privacy_unit", "max_groups_per_unit", "max_rows_per_group", "alpha", "plot", "r", "c"}
_PRDP = {"per_record_budget", "eps_min", "eps_max", "beta", "prdp_method"}
_BOOSTED = {"kernel", "region", "theta", "tau", "rho", "scale", "sigma"}
_COMPOSITE = {"window", "activation", "base"}
_EVERY = _COMMON | _TABLE | _PRDP | _BOOSTED | _COMPOSITE | {"epsilon", "delta", "numerics"}
_DEMO = "embedded dataset: daily steps of 4000 synthetic health-app users"
#: the report's numerics line of a float-tier release
FLOAT_NUMERICS = "numerics: float (idealized floating-point noise; see docs/threat-model.md)"


def _key(seed):
    """The release key: a fresh key from the OS (:func:`dpjax.random.secure_key`), or ``jax.random.key(seed)``
    (:func:`released` then warns that the release is reproducible)."""
    import jax

    import dpjax

    if seed is None:
        return dpjax.random.secure_key()
    if not 0 <= seed < 2**63:
        raise ValueError(f"--seed must be an integer in [0, 2**63), got {seed}")
    return jax.random.key(seed)


def released(args, row_level: bool) -> None:
    """What a release says once on stderr after it is made.

    That each row was taken as a person (no ``--privacy-unit``), and under ``--seed`` that the release is
    reproducible (and must not be repeated with that seed).

    Args:
      args: the parsed flags.
      row_level: whether no privacy unit was given.
    """
    if row_level:
        print(
            "dpjax: no --privacy-unit: each row is taken as a different person (the guarantee is per row)",
            file=sys.stderr,
        )
    if args.seed is not None:
        print(
            f"dpjax: warning: --seed {args.seed} makes this release reproducible: its noise is a function of the "
            "seed. Never release the same data twice with one seed, nor publish the seed (two releases with one "
            "key differ by exactly the true difference)",
            file=sys.stderr,
        )


def _allow(args, allowed, why: str) -> None:
    """Refuse every given flag outside ``allowed`` (and the common ones), naming it."""
    refuse_flags(args, sorted(_EVERY - _COMMON - set(allowed)), why)


def public_groups(args, names, inverse, embedded_domains):
    """The public groups of a release without private group selection, and each row's index into them.

    The keys of ``--groups FILE``, or for the embedded dataset the public domain of its column; a release by no
    column is one group, ``all``. Otherwise refused: a key read from the data is never printed.

    Args:
      args: the parsed flags.
      names: the distinct group texts of the data (:func:`dpjax.cli.io.read_table`).
      inverse: each row's index into ``names``.
      embedded_domains: ``{column: public values}`` of the embedded dataset.

    Returns:
      ``(public names, each row's index into them, -1 for a row of an unlisted group)``.

    Raises:
      ValueError: ``--group-by`` of several columns, an unreadable ``--groups`` file, or no public source of
        the keys.
    """
    if args.group_by is None:
        return names, inverse
    if "," in args.group_by:
        raise ValueError(f"--group-by: a release on public groups groups by one column, got {args.group_by!r}")
    if args.groups is not None:
        from dpjax.table.data import public_groups as read_groups

        try:
            keys = read_groups(args.groups, [args.group_by])
        except ValueError as exc:
            raise ValueError(f"--groups: {exc}") from None
        public = np.asarray([str(k) for k in keys.column(args.group_by).to_pylist()])
    elif args.input is None and args.group_by in embedded_domains:
        public = np.asarray(embedded_domains[args.group_by])
    else:
        raise ValueError(
            "--groups FILE: this release has no private group selection, so its group keys must be "
            "public (a CSV/Parquet of the keys); a key read from the data is never printed"
        )
    order = np.argsort(public)
    pos = np.minimum(np.searchsorted(public[order], names), len(public) - 1)
    to_public = np.where(public[order][pos] == names, order[pos], -1)
    return public, to_public[inverse]


def _print_rows(names, true, released, labels, show, output):
    """The first ``show`` groups: released values, with the true ones and the relative errors when
    ``true`` is given (the demo dataset or ``--include-true-values``)."""
    if true is None:
        print(f"{'group':<14}" + "".join(f"{label:>16}" for label in labels))
        for i, name in enumerate(names[:show]):
            print(f"{str(name):<14}" + "".join(f"{float(r[i]):>16,.1f}" for r in released))
    else:
        print(f"{'group':<14}{'true':>16}" + "".join(f"{label:>16}{'rel. error':>12}" for label in labels))
        for i, (name, t) in enumerate(zip(names[:show], true[:show])):
            cells = "".join(f"{float(r[i]):>16,.1f}{abs(r[i] - t) / max(abs(t), 1e-12):>12.3%}" for r in released)
            print(f"{str(name):<14}{t:>16,.1f}{cells}")
    if len(names) > show:
        print(f"... {len(names) - show} more groups" + (f" in {output}" if output not in (None, "-") else ""))


def _true_shown(args):
    """Whether the true values are shown on screen: for the synthetic demo dataset, or on request."""
    return args.input is None or args.include_true_values


def _write(args, header, rows, true_columns, keys: int = 1) -> None:
    """The release file: key and released columns; the true columns ``[(name, values), ...]``, after
    the ``keys`` key columns, only with ``--include-true-values``."""
    if args.output is None:
        return
    if args.include_true_values:
        print(
            f"dpjax: warning: --include-true-values writes the true, unprotected values to {args.output}: "
            "the file is no longer a differentially private release",
            file=sys.stderr,
        )
        header = header[:keys] + [name for name, _ in true_columns] + header[keys:]
        rows = [
            tuple(r[:keys]) + tuple(t) + tuple(r[keys:])
            for r, t in zip(rows, zip(*(values for _, values in true_columns)))
        ]
    write_csv(args.output, header, rows)


@contextlib.contextmanager
def _report(args):
    """Where the human-readable report goes: stdout, or stderr when the CSV itself goes to stdout."""
    if args.output == "-":
        with contextlib.redirect_stdout(sys.stderr):
            yield
    else:
        yield
