"""The ``dpjax`` command line (the ``dpjax`` script, or ``python -m dpjax.cli``).

One module per subcommand, at the top of the import graph (it imports :mod:`accounting` and
:mod:`optimize` lazily, nothing imports it):

* ``dpjax release`` (:mod:`dpjax.cli.release`) — aggregate a table by group and release it;
* ``dpjax account`` (:mod:`dpjax.cli.account`) — the privacy of a plan of releases;
* ``dpjax calibrate`` (:mod:`dpjax.cli.calibrate`) — the noise (or steps, batch size) for a target;
* ``dpjax tune`` (:mod:`dpjax.cli.tune`) — the PB-DP, mixture and composite tuners.

Every subcommand takes ``--json``; bad input ends with one line on stderr and exit 2 (a
malformed flag with a usage hint); a flag that does not apply, or a flag given twice, is refused
by name; anything slow shows an indicator on stderr when stderr is a terminal.
"""

from __future__ import annotations

import sys

from dpjax.cli._common import Parser, UsageError

__all__ = ["main"]


def _parser() -> Parser:
    from dpjax.cli import account, calibrate, release, tune

    p = Parser(prog="dpjax", description="Differential privacy on JAX: releases, accounting, calibration, tuning.")
    sub = p.add_subparsers(dest="command", required=True, metavar="{release,account,calibrate,tune}")
    for module in (release, account, calibrate, tune):
        module.add_parser(sub)
    return p


def main(argv=None) -> int:
    """Run ``dpjax`` on ``argv`` (default ``sys.argv[1:]``); returns the exit status (0, 2 for bad
    input, 70 for an internal error)."""
    try:
        args = _parser().parse_args(argv)
    except UsageError as exc:
        print(f"dpjax: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    try:
        return args.run(args)
    except (ValueError, OverflowError, OSError) as exc:
        print(f"dpjax: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 — one line, never a traceback, for any input
        print(f"dpjax: internal error ({type(exc).__name__}): {_one_line(exc)}; please report it", file=sys.stderr)
        return 70


def _one_line(exc) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
