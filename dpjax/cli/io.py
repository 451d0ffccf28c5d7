"""CSV tables for the ``dpjax release`` command: the input read, the output checked and written.

The input is streamed in record batches by the table layer's columnar reader (a file, standard input,
announced on stderr when it is a terminal, or the embedded dataset; a BOM and blank lines tolerated; a row
of another width than the header refused with its line number, a malformed field or text that is not UTF-8
refused). The output is checked before any work and written atomically, never over an input (``-``:
standard output; devices and FIFOs written through; a link followed, never replaced; the user's umask kept).
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import stat
import sys
import tempfile

import numpy as np

__all__ = ["read_table", "check_input", "check_output", "write_csv"]

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
    """A binary handle on ``path`` (``-``: standard input) and its size in bytes (0: unknown)."""
    if path == "-":
        if sys.stdin.isatty():  # else a silent wait for a terminal the user does not know is read
            print("dpjax: reading standard input… (end it with Ctrl-D)", file=sys.stderr, flush=True)
        return sys.stdin.buffer, 0
    check_input(path)
    if stat.S_ISFIFO(os.stat(path).st_mode) and sys.stderr.isatty():
        print(f"dpjax: reading the pipe {path}… (waiting for a writer)", file=sys.stderr, flush=True)
    return open(path, "rb"), os.path.getsize(path)


def check_input(path: str) -> None:
    """Refuse an ``--input`` that is a folder or does not exist (``-``: standard input).

    Args:
      path: the ``--input`` value.

    Raises:
      ValueError: ``path`` a folder, or missing.
    """
    if path == "-":
        return
    if os.path.isdir(path):
        raise ValueError(f"--input: {path!r} is a directory, not a CSV file")
    if not os.path.exists(path):
        raise ValueError(f"--input: no such file {path!r}")


def _header(handle):
    """The first non-blank line of the binary ``handle`` parsed as CSV, its names stripped (a UTF-8
    BOM dropped); ``None`` at the end of the text."""
    lines = 0
    for raw in iter(handle.readline, b""):
        lines += 1
        try:
            text = raw.decode("utf-8-sig" if lines == 1 else "utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"--input: line {lines}: not UTF-8 text") from None
        row = next(csv.reader([text]), [])
        if any(c.strip() for c in row):
            return [c.strip() for c in row]
    return None


def _line_of_bad_row(path: str, width: int):
    """The line number of the first non-blank row of another width than the header's, found again
    (an error path only) by the ``csv`` module; ``None`` when ``path`` cannot be read again."""
    if path in (None, "-") or not os.path.isfile(path):
        return None
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as handle:
        reader = csv.reader(handle)
        header = False
        for row in reader:
            if not any(c.strip() for c in row):
                continue
            if header and len(row) != width:
                return reader.line_num
            header = True
    return None


def read_table(path: str | None, value_column: str, group_by: str | None, *, budget_column: str | None = None):
    """Read the groups and values of a CSV file (``-``: standard input) or of the embedded dataset.

    Streamed in record batches by the table layer's columnar reader (:func:`dpjax.table.data.csv_batches`; only
    these columns, the groups dictionary-encoded per batch and only the distinct ones sorted): memory for the
    columns, never for the text or a Python object per field. Blank lines, and rows blank in every column read,
    are skipped.

    Args:
      path: the ``--input`` file, ``-``, or ``None`` for the embedded dataset.
      value_column: the column of the values.
      group_by: the group column, or ``None``: one group ``"all"``.
      budget_column: the column of the per-record budgets (``--per-record-budget``), or ``None``.

    Returns:
      ``(names, inverse, values)`` — ``(names, inverse, values, budgets)`` with ``budget_column``: the distinct
      group texts in sorted order, each row's index into them (``np.unique(groups, return_inverse=True)``),
      the value column (and the budgets) as float64.

    Raises:
      ValueError: naming the flag: a missing or empty file, a column not in the header, a row of another
        width than the header (with its line number), a field over the ``csv`` module's limit, a malformed
        field, text that is not UTF-8, a non-numeric, NaN or infinite value, no rows.
    """
    import pyarrow.compute as pc

    from dpjax.table import data as table_data

    if path is None:
        from dpjax.data import load_steps

        handle, total = io.BytesIO(load_steps().encode()), 0
    else:
        handle, total = _open_input(path)
    show = total >= _PROGRESS_MIN_BYTES
    with handle if path not in (None, "-") else contextlib.nullcontext():
        header = _header(handle)
        if header is None:
            raise ValueError("--input: the file is empty")
        for flag, name in (
            ("--value-column", value_column),
            ("--group-by", group_by),
            ("--per-record-budget", budget_column),
        ):
            if name is not None and name not in header:
                raise ValueError(f"{flag}: {name!r} is not a column of the input (columns: {header})")
        columns = list(dict.fromkeys(c for c in (value_column, group_by, budget_column) if c is not None))
        bad = []

        def invalid(row):
            if not row.text.strip(" \t\r\n,"):  # a blank row: spaces and commas only
                return "skip"
            bad.append(row)
            return "error"

        def refused(exc):
            text = str(exc).splitlines()[0]
            if bad:
                line = _line_of_bad_row(path, len(header))
                where = f"line {line}" if line is not None else f"the row {bad[0].text!r}"
                return ValueError(f"--input: {where} has {bad[0].actual_columns} fields, the header has {len(header)}")
            if "UTF8" in text:
                return ValueError(f"--input: not UTF-8 text ({text})")
            if text.startswith("Empty CSV file"):  # nothing after the header
                return ValueError("--input: the table has no rows")
            return ValueError(f"--input: malformed CSV ({text})")

        limit = csv.field_size_limit()
        groups = table_data._Codes()
        values, budgets = [], []
        n = 0
        for batch in table_data.csv_batches(
            handle,
            columns,
            label="--input",
            text_columns=columns,
            column_names=header,
            invalid_row=invalid,
            quoted_newlines=True,
            refused=refused,
        ):
            for c in columns:
                longest = pc.max(pc.binary_length(batch.column(c))).as_py()
                if longest is not None and longest > limit:
                    raise ValueError(
                        f"--input: malformed CSV (a field of column {c!r} is larger than the field limit ({limit}))"
                    )
            trimmed = {c: pc.utf8_trim_whitespace(batch.column(c)) for c in columns}
            blank = None
            for c in columns:
                b = pc.equal(trimmed[c], "")
                blank = b if blank is None else pc.and_(blank, b)
            if pc.any(blank).as_py():  # a row blank in every column read (spaces only) is skipped
                keep = pc.invert(blank)
                batch = batch.filter(keep)
                trimmed = {c: t.filter(keep) for c, t in trimmed.items()}
            n += batch.num_rows
            values.append(_numeric_column(trimmed[value_column], value_column, "--value-column"))
            if group_by is not None:
                groups.add(batch.column(group_by))
            if budget_column is not None:
                budgets.append(_numeric_column(trimmed[budget_column], budget_column, "--per-record-budget"))
            if show:
                _progress(handle.tell(), total, "reading")
        if show:
            _progress(total, total, "reading")
    if not n:
        raise ValueError("--input: the table has no rows")
    if group_by is None:
        names, inverse = np.asarray(["all"]), np.zeros(n, np.intp)
    else:
        code, dictionary = groups.finish()
        names, remap = np.unique(np.asarray(dictionary.to_pylist()), return_inverse=True)
        inverse = remap[code]
    out = (names, inverse, table_data._concatenate(values, n))  # each batch's part freed once copied
    return out if budget_column is None else out + (table_data._concatenate(budgets, n),)


def _numeric_column(col, name: str, flag: str) -> np.ndarray:
    """A text column of one batch (surrounding spaces dropped) as float64; a malformed, NaN or
    infinite value refused, naming the column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        arr = pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)
    except pa.ArrowInvalid as exc:
        raise ValueError(f"{flag}: column {name!r} is not numeric ({exc})") from None
    if not np.isfinite(arr).all():
        raise ValueError(f"{flag}: column {name!r} contains NaN or infinite values")
    return arr


def _target(output: str) -> str:
    """Where ``--output`` writes: the path itself, or the file a symbolic link points to (the link is
    followed, never replaced)."""
    return os.path.realpath(output)


def check_output(output: str | None, inputs) -> None:
    """Refuse, before any work, an ``--output`` that would overwrite an input or cannot be written.

    ``-`` is standard output; devices and FIFOs are written through.

    Args:
      output: the ``--output`` value (``None``: no file).
      inputs: the input paths (``None`` or ``-`` ignored).

    Raises:
      ValueError: a folder (``DIR/``), the input itself (also through a link), a socket, a missing or
        read-only folder, a read-only file.
    """
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
    """Write a CSV table: ``-`` to standard output; a device or FIFO written through; a regular file atomically.

    A regular file is written to a temporary file beside it, renamed over it when complete, with the mode an
    ordinary ``open`` would give it (the existing file's, else 0666 less the umask). A symbolic link is
    followed: the file it points to is replaced, the link kept.

    Args:
      path: the output path, or ``-``.
      header: the column names.
      rows: the rows (iterables of values).

    Raises:
      OSError: the file cannot be written (the temporary file is removed).
    """
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
