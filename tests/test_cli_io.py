"""The command line's input and output (dpjax.cli.io): malformed inputs and flags give a non-zero exit, one line on
stderr naming the problem, no traceback, no file written or overwritten; outputs are atomic, written through symbolic
links, character devices and FIFOs with the user's umask, ``-`` is standard output, and a release file holds no true
values unless asked; standard input (announced on a terminal), BOMs."""

import csv
import io
import os
import stat
import sys
import threading

import numpy as np
import pytest

from dpjax import cli
from dpjax.cli import main, release

GOOD = "age_group,steps\n18-29,5000\n30-44,7000\n18-29,9000\n"


def _table(tmp_path, text, name="in.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return str(path)


# (what the input file holds or None for the embedded data, extra flags, words the error names)
CASES = {
    "short row": ("age_group,steps\n18-29,5000\n30-44\n", [], "expected 2 columns, got 1"),
    "not utf-8": (b"age_group,steps\n18-29,5\xff00\n", [], "--value-column"),
    "non-numeric": ("age_group,steps\n18-29,many\n", [], "must be numeric"),
    "header only": ("age_group,steps\n", [], "empty"),
    "empty file": ("", [], "empty"),
    "blank lines only": ("\n\n", [], "empty"),
    "missing column": (GOOD, ["--value-column", "nope"], "--value-column"),
    "scale 0": (None, ["--scale", "0"], "scale"),
    "sigma 0": (None, ["--mechanism", "gaussian", "--sigma", "0"], "sigma"),
    "negative scale": (None, ["--scale", "-1"], "scale"),
    "seed 2**70": (None, ["--seed", str(2**70)], "--seed"),
    "negative seed": (None, ["--seed", "-1"], "--seed"),
    "epsilon 0": (None, ["--epsilon", "0"], "epsilon"),
    "epsilon nan": (None, ["--epsilon", "nan"], "epsilon"),
    "delta 1": (None, ["--mechanism", "gaussian", "--delta", "1"], "delta"),
    "clip inf": (None, ["--clip", "inf"], "--clip"),
    "rho 1": (None, ["--mechanism", "boosted", "--rho", "1"], "--rho"),
    "unknown mechanism": (None, ["--mechanism", "cauchy"], "--mechanism"),
    "unknown kernel class": (None, ["--mechanism", "nosuch.module:Kernel"], "nosuch"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_input_exits_with_one_line_and_writes_nothing(case, tmp_path, capsys):
    text, flags, words = CASES[case]
    args = ["release", "--seed", "0", "--output", str(tmp_path / "out.csv")] + flags
    if text is not None:
        path = tmp_path / "in.csv"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        args += ["--input", str(path)]
    if "--seed" in flags:
        args = args[:1] + args[3:]
    code = cli.main(args)
    err = capsys.readouterr().err
    assert code != 0
    assert err.startswith("dpjax: error:") and err.count("\n") == 1 and "Traceback" not in err
    assert words.lower() in err.lower()
    assert sorted(os.listdir(tmp_path)) == (["in.csv"] if text is not None else [])


def test_input_is_a_directory(tmp_path, capsys):
    assert cli.main(["release", "--input", str(tmp_path), "--seed", "0"]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_output_equal_to_input_is_refused_and_the_input_kept(tmp_path, capsys):
    path = _table(tmp_path, GOOD)
    assert cli.main(["release", "--input", path, "--output", path, "--seed", "0"]) == 2
    assert "input file" in capsys.readouterr().err
    assert open(path).read() == GOOD


def test_unwritable_output_is_refused_before_the_release(tmp_path, capsys):
    missing = tmp_path / "no" / "such" / "out.csv"
    assert cli.main(["release", "--seed", "0", "--output", str(missing)]) == 2
    err = capsys.readouterr()
    assert "--output" in err.err and err.out == ""


@pytest.mark.slow
def test_failure_after_the_release_leaves_no_file(tmp_path, capsys, monkeypatch):
    """An error raised late (here: in the accountant) leaves neither the output nor a temporary file."""

    def boom(*a, **k):
        raise ValueError("accounting failed")

    monkeypatch.setattr(release, "accuracy", boom)
    assert cli.main(["release", "--seed", "0", "--output", str(tmp_path / "out.csv")]) == 2
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_output_is_replaced_atomically(tmp_path, capsys):
    out = tmp_path / "out.csv"
    out.write_text("old\n")
    assert cli.main(["release", "--seed", "0", "--output", str(out)]) == 0
    assert out.read_text().startswith("age_group,sum_steps")
    assert os.listdir(tmp_path) == ["out.csv"]


@pytest.mark.slow
def test_bom_blank_lines_and_crlf_are_tolerated(tmp_path, capsys):
    text = "\ufeffage_group,steps\r\n18-29,5000\r\n\r\n30-44,7000\r\n\r\n\r\n"
    path = _table(tmp_path, text)
    groups = _table(tmp_path, "age_group\n18-29\n30-44\n", name="groups.csv")
    assert cli.main(["release", "--input", path, "--seed", "0", "--statistic", "count", "--groups", groups]) == 0
    out = capsys.readouterr().out
    assert "18-29" in out and "30-44" in out


@pytest.mark.slow
def test_standard_input(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(GOOD.encode())))
    out = tmp_path / "out.csv"
    assert (
        cli.main(
            [
                "release",
                "--input",
                "-",
                "--seed",
                "0",
                "--output",
                str(out),
                "--statistic",
                "count",
                "--include-true-values",
            ]
        )
        == 0
    )
    rows = list(csv.reader(open(out)))
    assert [r[:2] for r in rows[1:]] == [["18-29", "2.0"], ["30-44", "1.0"]]


@pytest.mark.slow
def test_gaussian_at_epsilon_1000_is_calibrated_not_an_overflow(capsys):
    assert cli.main(["release", "--seed", "0", "--mechanism", "gaussian", "--epsilon", "1000"]) == 0
    assert "Gaussian(sigma=" in capsys.readouterr().out


@pytest.mark.slow
def test_discrete_sums_beyond_int32_are_released_in_int64(tmp_path, capsys):
    """A sum of 2.4e9 must not wrap through int32 (it came out as -2,147,478,272)."""
    rows = "".join(f"a,{10**9}\n" for _ in range(3)) + "b,5\n"
    path = _table(tmp_path, "g,v\n" + rows)
    out = tmp_path / "out.csv"
    args = [
        "release",
        "--input",
        path,
        "--group-by",
        "g",
        "--value-column",
        "v",
        "--clip",
        str(10**9),
        "--mechanism",
        "discrete-laplace",
        "--scale",
        "2",
        "--seed",
        "0",
        "--output",
        str(out),
    ]
    assert cli.main(args) == 0
    got = {r[0]: float(r[1]) for r in list(csv.reader(open(out)))[1:]}
    assert abs(got["a"] - 3e9) < 100 and got["a"] == np.round(got["a"])


def test_the_public_groups_reader_streams_the_csv_in_record_batches(tmp_path, monkeypatch):
    """The reader of the PB-DP, composite and per-record releases (:func:`dpjax.cli.io.read_table`) goes
    through the table layer's columnar reader, one block of text at a time (here blocks of 256 bytes: many
    batches), and reads what it reads from the file in one block: a BOM, CRLF, quoted commas, padded
    fields, a blank row."""
    from dpjax.cli import io as tables
    from dpjax.table import data as table_data

    rng = np.random.default_rng(4)
    names = ['"a,b"'] + [f"g{g:02d}" for g in range(1, 12)]
    lines = [f"{names[g]}, {v} ,x" for g, v in zip(rng.integers(0, 12, 400), rng.integers(0, 900, 400))]
    path = _table(
        tmp_path,
        "\ufeffgroup, steps ,other\r\n"
        + "\r\n".join(lines[:200])
        + "\r\n\r\n , ,\r\n"
        + "\r\n".join(lines[200:])
        + "\r\n",
    )
    whole = tables.read_table(path, "steps", "group")
    seen = []
    real = table_data.csv_batches

    def spy(*a, **k):
        for batch in real(*a, **k):
            seen.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(table_data, "csv_batches", spy)
    monkeypatch.setattr(table_data, "CSV_BLOCK_BYTES", 256)
    batched = tables.read_table(path, "steps", "group")
    for a, b in zip(whole, batched):
        np.testing.assert_array_equal(a, b)
    assert len(seen) > 10 and sum(seen) == 401  # the blank-field row is read, then skipped
    assert "a,b" in list(whole[0]) and "g11" in list(whole[0]) and len(whole[2]) == 400


TINY = "g,v\na,5\nb,7\na,9\n"
SMALL = ["--group-by", "g", "--value-column", "v", "--clip", "10", "--seed", "0"]


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text(TINY)
    (tmp_path / "groups.csv").write_text("g\na\nb\n")
    return str(path)


def _release(table, *extra):
    """A release of ``table`` on its public groups (beside it: groups.csv)."""
    return main(
        ["release", "--input", table, *SMALL, "--groups", os.path.join(os.path.dirname(table), "groups.csv"), *extra]
    )


# ----------------------------------------------------------------------------------
# --output
# ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_output_through_a_symlink_writes_the_target_and_keeps_the_link(table, tmp_path, capsys):
    target, link = tmp_path / "target.csv", tmp_path / "link.csv"
    target.write_text("old\n")
    link.symlink_to(target)
    assert _release(table, "--output", str(link)) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().startswith("g,sum_v")


@pytest.mark.slow
def test_output_onto_a_character_device_is_written_through(table, tmp_path, capsys):
    """Through a link of the test's own (code that replaces what it writes to replaces the link,
    never the system's /dev/null, which a run as root would otherwise destroy)."""
    link = tmp_path / "null"
    link.symlink_to(os.devnull)
    assert _release(table, "--output", str(link)) == 0
    assert link.is_symlink() and stat.S_ISCHR(os.stat(os.devnull).st_mode)


@pytest.mark.slow
def test_output_onto_a_fifo_is_written_through(table, tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()), daemon=True)
    reader.start()
    assert _release(table, "--output", str(fifo)) == 0
    reader.join(timeout=60)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and got and got[0].startswith("g,sum_v")


@pytest.mark.slow
def test_output_keeps_the_users_umask(table, tmp_path, capsys):
    old = os.umask(0o022)
    try:
        assert _release(table, "--output", str(tmp_path / "out.csv")) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "out.csv").st_mode) == 0o644


def test_output_dash_is_standard_output_and_the_report_goes_to_stderr(table, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _release(table, "--output", "-") == 0
    out, err = capsys.readouterr()
    assert list(csv.reader(io.StringIO(out)))[0][:2] == ["g", "sum_v"] and "privacy of the whole release" in err
    assert not (tmp_path / "-").exists()


def test_output_folder_is_refused_before_any_work(table, tmp_path, capsys):
    assert _release(table, "--output", str(tmp_path / "new") + "/") == 2
    out, err = capsys.readouterr()
    assert "--output" in err and "directory" in err and out == ""
    assert not (tmp_path / "new").exists()


# ----------------------------------------------------------------------------------
# what a release file holds
# ----------------------------------------------------------------------------------
def test_release_file_holds_no_true_values_unless_asked(table, tmp_path, capsys):
    out = tmp_path / "out.csv"
    assert _release(table, "--output", str(out)) == 0
    released = ["sum_v", "sum_v_std", "sum_v_ci_low", "sum_v_ci_high"]
    assert list(csv.reader(out.open()))[0] == ["g"] + released
    text = capsys.readouterr()
    assert "true" not in text.out.splitlines()[1]  # the user's own data: released values only on screen
    assert _release(table, "--output", str(out), "--include-true-values") == 0
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["g", "true_sum_v"] + released and rows[1][:2] == ["a", "14.0"]
    assert "--include-true-values" in capsys.readouterr().err


# ----------------------------------------------------------------------------------
# standard input on a terminal
# ----------------------------------------------------------------------------------
class _Terminal(io.TextIOWrapper):
    def isatty(self):
        return True


@pytest.mark.slow
def test_standard_input_on_a_terminal_is_announced(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", _Terminal(io.BytesIO(TINY.encode())))
    assert main(["release", "--input", "-", *SMALL]) == 0
    assert "reading standard input" in capsys.readouterr().err
