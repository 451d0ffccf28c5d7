"""Helpers of the command-line test files (imported as ``from cli_run import ...``: pytest puts ``tests/`` on
``sys.path``)."""

import gzip
import io
import json
import sys

from dpjax import cli

SECRET = "SECRET_ALICE"
#: many rows in two groups, and one group key held by a single row
ROWS = "".join(f"{c},{r},{10 + i % 7},u{i}\n" for i, (c, r) in enumerate([("FR", "n"), ("DE", "s")] * 150))
TABLE = "country,region,amount,user\n" + ROWS + f"{SECRET},x,1000,u999\n"
#: a release of TABLE's amounts by country
BASE = ["release", "--value-column", "amount", "--group-by", "country", "--epsilon", "3"]


def write_tables(folder):
    """TABLE as ``data.csv`` and ``data.csv.gz`` in ``folder``.

    Returns:
      ``{"csv": path, "gz": path, "dir": folder}``.
    """
    csv_path = folder / "data.csv"
    csv_path.write_text(TABLE)
    gz_path = folder / "data.csv.gz"
    gz_path.write_bytes(gzip.compress(TABLE.encode()))
    return {"csv": str(csv_path), "gz": str(gz_path), "dir": folder}


def run_cli(argv, capsys, stdin=None, monkeypatch=None):
    """``dpjax argv`` in-process (``stdin``: the text standard input holds).

    Returns:
      ``(exit code, standard output, standard error)``.
    """
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def json_of(capsys, argv):
    """The ``--json`` output of ``dpjax argv``, which must exit 0."""
    assert cli.main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)
