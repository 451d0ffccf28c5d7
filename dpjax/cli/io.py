"""CSV tables for the ``dpjax release`` command. The input is read in one pass (a file, standard
input, announced on stderr when it is a terminal, or the embedded dataset; a BOM and blank lines
tolerated; a short row, a malformed field or text that is not UTF-8 refused with its line
number). The output is checked before any work and written atomically, never over an input
(``-``: standard output; devices and FIFOs written through; a link followed, never replaced;
the user's umask kept)."""

from __future__ import annotations

import csv
import io
import os
import stat
import sys
import tempfile

import numpy as np

__all__ = ["read_table", "check_output", "write_csv"]

_PROGRESS_MIN_BYTES = 8 << 20


def _progress(done: int, total: int, label: str) -> None:
    width = 30
    frac = min(done / total, 1.0) if total else 1.0
    bar = "#" * int(frac * width)
    sys.stderr.write(f"\r{label} [{bar:<{width}}] {frac:6.1%}")
    if frac >= 1.0:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _open_input(path: str):
    """A text handle on ``path`` (``-``: standard input), UTF-8 with an optional BOM."""
    if path == "-":
        if sys.stdin.isatty():  # else a silent wait for a terminal the user does not know is read
            print("dpjax: reading standard input… (end it with Ctrl-D)", file=sys.stderr, flush=True)
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8-sig", newline=""), 0
    if os.path.isdir(path):
        raise ValueError(f"--input: {path!r} is a directory, not a CSV file")
    if not os.path.exists(path):
        raise ValueError(f"--input: no such file {path!r}")
    if stat.S_ISFIFO(os.stat(path).st_mode) and sys.stderr.isatty():
        print(f"dpjax: reading the pipe {path}… (waiting for a writer)", file=sys.stderr, flush=True)
    return open(path, newline="", encoding="utf-8-sig"), os.path.getsize(path)


def read_table(path: str | None, value_column: str, group_by: str | None, *, budget_column: str | None = None):
    """Read (groups, values) columns — (groups, values, budgets) with ``budget_column`` — from a
    CSV file (``-``: standard input) or the embedded dataset, in one pass. Blank lines are skipped; a short row, a malformed field or text that is not UTF-8
    is refused with its line number."""
    if path is None:
        from dpjax.data import load_steps

        handle, total = io.StringIO(load_steps()), 0
    else:
        handle, total = _open_input(path)
    show = total >= _PROGRESS_MIN_BYTES
    consumed = [0]

    def lines():
        for line in handle:
            consumed[0] += len(line)
            yield line

    reader = csv.reader(lines())
    try:
        with handle:
            header = next((row for row in reader if any(c.strip() for c in row)), None)
            if header is None:
                raise ValueError("--input: the file is empty")
            cols = {name.strip(): i for i, name in enumerate(header)}
            if value_column not in cols:
                raise ValueError(f"--value-column: {value_column!r} is not a column of the input (columns: {header})")
            if group_by is not None and group_by not in cols:
                raise ValueError(f"--group-by: {group_by!r} is not a column of the input (columns: {header})")
            if budget_column is not None and budget_column not in cols:
                raise ValueError(f"--per-record-budget: {budget_column!r} is not a column of the input "
                                 f"(columns: {header})")
            vi, gi = cols[value_column], (cols[group_by] if group_by else None)
            bi = cols[budget_column] if budget_column is not None else None
            need = max(i for i in (vi, gi, bi, 0) if i is not None)
            values, groups, budgets = [], [], []
            for n, row in enumerate(reader):
                if not any(c.strip() for c in row):
                    continue
                if len(row) <= need:
                    raise ValueError(f"--input: line {reader.line_num} has {len(row)} fields, "
                                     f"the header has {len(header)}")
                values.append(row[vi])
                groups.append(row[gi] if gi is not None else "all")
                if bi is not None:
                    budgets.append(row[bi])
                if show and n % 200_000 == 0:
                    _progress(consumed[0], total, "reading")
            if show:
                _progress(total, total, "reading")
    except csv.Error as exc:
        raise ValueError(f"--input: line {reader.line_num}: malformed CSV ({exc})") from None
    except UnicodeDecodeError:
        raise ValueError(f"--input: line {reader.line_num + 1}: not UTF-8 text") from None
    if not values:
        raise ValueError("--input: the table has no rows")
    arr = _numeric_column(values, value_column, "--value-column")
    if budget_column is None:
        return np.asarray(groups), arr
    return np.asarray(groups), arr, _numeric_column(budgets, budget_column, "--per-record-budget")


def _numeric_column(cells, name: str, flag: str):
    try:
        arr = np.asarray(cells, dtype=float)
    except ValueError as exc:
        raise ValueError(f"{flag}: column {name!r} is not numeric ({exc})") from None
    if not np.isfinite(arr).all():
        raise ValueError(f"{flag}: column {name!r} contains NaN or infinite values")
    return arr


def _target(output: str) -> str:
    """Where ``--output`` writes: the path itself, or the file a symbolic link points to (the link is
    followed, never replaced)."""
    return os.path.realpath(output)


def check_output(output: str | None, inputs) -> None:
    """Refuse, before any work, an ``--output`` that would overwrite an input or cannot be written:
    a folder (``DIR/``), the input itself (also through a link), a socket, a missing or read-only
    folder, a read-only file. ``-`` is standard output; devices and FIFOs are written through."""
    if output is None or output == "-":
        return
    if output.endswith(("/", os.sep)) or os.path.isdir(output):
        raise ValueError(f"--output: {output!r} is a directory; name a file in it")
    target = _target(output)
    for path in inputs:
        if path not in (None, "-") and os.path.exists(target) and os.path.samefile(path, target):
            raise ValueError(f"--output: {output!r} is the input file; it is never overwritten")
    if os.path.exists(target):
        mode = os.stat(target).st_mode
        if stat.S_ISSOCK(mode):
            raise ValueError(f"--output: {output!r} is a socket")
        if not os.access(target, os.W_OK):
            raise ValueError(f"--output: {output!r} is not writable")
        if not stat.S_ISREG(mode):
            return  # a device or FIFO: written through
    folder = os.path.dirname(target)
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise ValueError(f"--output: cannot write to the folder {folder!r}")


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def write_csv(path: str, header, rows) -> None:
    """Write a CSV table: ``-`` to standard output; a device or FIFO written through; a regular file
    atomically (a temporary file beside it, renamed over it when complete) with the mode an
    ordinary ``open`` would give it (the existing file's, else 0666 less the umask). A symbolic
    link is followed: the file it points to is replaced, the link kept."""
    if path == "-":
        w = csv.writer(sys.stdout)
        w.writerow(header)
        w.writerows(rows)
        sys.stdout.flush()
        return
    target = _target(path)
    if os.path.exists(target) and not stat.S_ISREG(os.stat(target).st_mode):
        with open(target, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows(rows)
        return
    mode = stat.S_IMODE(os.stat(target).st_mode) if os.path.exists(target) else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".dpjax-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows(rows)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
