"""The ``dpjax`` command line (the ``dpjax`` script, or ``python -m dpjax.cli``).

One module per subcommand, at the top of the import graph (it imports :mod:`accounting` and
:mod:`optimize` lazily, nothing imports it):

* ``dpjax release`` (:mod:`dpjax.cli.release`) — aggregate a table by group and release it through
  :mod:`dpjax.table` (PB-DP, composite and per-record releases on public groups:
  :mod:`dpjax.cli.release_public`, :mod:`dpjax.cli.release_prdp`);
* ``dpjax account`` (:mod:`dpjax.cli.account`) — the privacy of a plan of releases, or of DP-SGD;
* ``dpjax calibrate`` (:mod:`dpjax.cli.calibrate`) — the noise (or steps, epochs, batch size) for a target;
* ``dpjax tune`` (:mod:`dpjax.cli.tune`) — the PB-DP, mixture and composite tuners.

Every subcommand takes ``--json``; bad input, or a request that cannot be met, ends with one line on
stderr and exit 2 (a malformed flag with a usage hint, an unknown one after the subcommand's usage); a
flag that does not apply, or a flag given twice, is refused by name; anything slow shows an indicator on
stderr when stderr is a terminal; ``--plot FILE.png`` draws (:mod:`dpjax.cli.plots`). Compiled programs
are kept in a persistent cache (:mod:`dpjax.compilation_cache`; ``DPJAX_COMPILATION_CACHE=off``).
"""

from __future__ import annotations

import os
import sys

from dpjax.cli._common import Parser, UsageError

__all__ = ["main"]


def _parser() -> Parser:
    from dpjax import __version__
    from dpjax.cli import account, calibrate, release, tune

    p = Parser(prog="dpjax", description="Differential privacy on JAX: releases, accounting, calibration, tuning.")
    p.add_argument("--version", action="version", version=f"dpjax {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="{release,account,calibrate,tune}")
    for module in (release, account, calibrate, tune):
        module.add_parser(sub)
    _name_leaves(p)
    return p


def _name_leaves(parser) -> None:
    """Record on every leaf subcommand's namespace its own parser (``args.parser``), so that an unknown
    flag is reported with that subcommand's usage."""
    subs = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    if not subs:
        parser.set_defaults(parser=parser)
    for action in subs:
        for child in action.choices.values():
            _name_leaves(child)


def _compilation_cache() -> None:
    """The persistent compilation cache (:mod:`dpjax.compilation_cache`) unless
    ``DPJAX_COMPILATION_CACHE`` is ``off``/``0``; a path there moves it."""
    from dpjax.compilation_cache import ENVIRONMENT_VARIABLE, enable_compilation_cache

    setting = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if setting.lower() in ("off", "0", "false", "no"):
        return
    try:
        enable_compilation_cache(setting or None)
    except ValueError as exc:
        print(f"dpjax: warning: {ENVIRONMENT_VARIABLE}: {_one_line(exc)}; compiling without a cache", file=sys.stderr)


def main(argv=None) -> int:
    """Run ``dpjax`` on ``argv``: parse the subcommand and its flags, run it, and report any error in one line.

    Args:
      argv: the arguments (default ``sys.argv[1:]``).

    Returns:
      The exit status: 0; 2 for bad input or a request that cannot be met; 70 for an internal error; 141 when
      the reader of the output closed it, as for a program ended by SIGPIPE, without a word.
    """
    try:
        parser = _parser()
        args, extra = parser.parse_known_args(argv)
        if extra:
            leaf = getattr(args, "parser", parser)
            print(leaf.format_usage().rstrip(), file=sys.stderr)
            leaf.error(f"unrecognized arguments: {' '.join(extra)}")
    except UsageError as exc:
        print(f"dpjax: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    try:
        _compilation_cache()
        return args.run(args)
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    except (ValueError, OverflowError, OSError) as exc:
        print(f"dpjax: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 — one line, never a traceback, for any input
        print(f"dpjax: internal error ({type(exc).__name__}): {_one_line(exc)}; please report it", file=sys.stderr)
        return 70


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's flush at exit finds no closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # an in-process stdout without a descriptor (a test's capture)
        pass


def _one_line(exc) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
