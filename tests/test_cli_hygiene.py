"""CLI and API hygiene: where the output goes and what it holds, flags that do not apply, errors
that name the flag, standard input on a terminal, per-record memory, float16, the README's code."""

import csv
import doctest
import io
import os
import re
import stat
import sys
import threading
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax
from dpjax.cli import main

ROOT = Path(__file__).resolve().parents[1]
GOOD = "g,v\na,5\nb,7\na,9\n"
SMALL = ["--group-by", "g", "--value-column", "v", "--clip", "10", "--seed", "0"]


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text(GOOD)
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
# flags: not applicable, repeated, malformed
# ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args,flag",
    [
        (["--mechanism", "gaussian", "--scale", "3"], "--scale"),
        (["--sigma", "3"], "--sigma"),
        (["--mechanism", "gaussian", "--kernel", "laplace"], "--kernel"),
        (["--r", "2"], "--r"),
        (["--rho", "0.5"], "--rho"),
        (["--beta", "0.5"], "--beta"),
        (["--activation", "triangle"], "--activation"),
        (["--mechanism", "boosted", "--epsilon", "2"], "--epsilon"),
        (["--mechanism", "boosted", "--region", "absolute", "--theta", "0.1"], "--theta"),
        (["--per-record-budget", "privacy_budget", "--mechanism", "gaussian", "--epsilon", "7"], "--epsilon"),
        (["--scale", "3", "--epsilon", "2"], "--scale"),
        (["--mechanism", "composite", "--window", "0", "1", "--delta", "1e-5"], "--delta"),
        (["--mechanism", "composite", "--window", "0", "1", "--numerics", "exact"], "--numerics exact"),
    ],
)
def test_flags_that_do_not_apply_are_refused_by_name(args, flag, capsys):
    assert main(["release", "--seed", "0", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpjax: error: " + flag) and err.count("\n") == 1


def test_a_flag_given_twice_is_refused(capsys):
    assert main(["release", "--epsilon", "1", "--epsilon", "2"]) == 2
    assert "--epsilon given twice" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["release", "--epsilon", "x"], ["release", "--bogus"], ["nosuch"], []])
def test_a_malformed_command_line_ends_with_one_line_and_a_usage_hint(args, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    if "--bogus" in args:  # an unknown flag: the subcommand's usage, then the one line
        usage, _, err = err.partition("dpjax: error:")
        assert usage.startswith("usage: dpjax release") and "--privacy-unit" in usage
        err = "dpjax: error:" + err
    assert err.startswith("dpjax: error:") and err.count("\n") == 1 and "--help" in err


def test_show_must_not_be_negative(capsys):
    assert main(["release", "--show", "-1"]) == 2
    assert "--show" in capsys.readouterr().err


# ----------------------------------------------------------------------------------
# errors name the flag
# ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args,words",
    [
        # (a kernel release: the input file of one row per person; the default run is a table release)
        (
            ["--mechanism", "geometric-mixture", "--r", "0.5", "--c", "5", "--epsilon", "0.2"],
            "sensitivity 140000 per group",
        ),
    ],
)
def test_errors_name_the_flag_not_an_internal_parameter(args, words, capsys):
    assert main(["release", "--seed", "0", *args]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_boosted_exact_is_refused_before_any_tuning(monkeypatch, capsys):
    import optimize

    def no_tuning(*a, **k):
        raise AssertionError("tuned before refusing")

    monkeypatch.setattr(optimize, "tune_boosted", no_tuning)
    assert main(["release", "--mechanism", "boosted", "--numerics", "exact", "--seed", "0"]) == 2
    assert "--numerics exact" in capsys.readouterr().err


# ----------------------------------------------------------------------------------
# standard input on a terminal
# ----------------------------------------------------------------------------------
class _Terminal(io.TextIOWrapper):
    def isatty(self):
        return True


@pytest.mark.slow
def test_standard_input_on_a_terminal_is_announced(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", _Terminal(io.BytesIO(GOOD.encode())))
    assert main(["release", "--input", "-", *SMALL]) == 0
    assert "reading standard input" in capsys.readouterr().err


# ----------------------------------------------------------------------------------
# per-record DP: memory proportional to the rows
# ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_per_record_release_pads_in_proportion_to_the_rows(tmp_path, monkeypatch, capsys):
    """30 one-row groups and one of 1000 rows: padded to (31, 1000) before, 30 + 1024 entries now."""
    rows = [f"s{i},1,1.0" for i in range(30)] + ["big,1,1.0"] * 1000
    path = tmp_path / "b.csv"
    path.write_text("g,v,b\n" + "\n".join(rows) + "\n")
    padded, vmap = [], jax.vmap

    def recording_vmap(fn, *a, **k):
        batched = vmap(fn, *a, **k)

        def record(*args):  # the padded (groups, width) values of one call
            padded.append(int(np.prod(np.shape(args[1]))))
            return batched(*args)

        return record

    monkeypatch.setattr(jax, "vmap", recording_vmap)
    groups = tmp_path / "groups.csv"
    groups.write_text("g\n" + "".join(f"s{i}\n" for i in range(30)) + "big\n")
    assert (
        main(
            [
                "release",
                "--input",
                str(path),
                "--group-by",
                "g",
                "--value-column",
                "v",
                "--per-record-budget",
                "b",
                "--eps-min",
                "1",
                "--eps-max",
                "2",
                "--statistic",
                "count",
                "--seed",
                "0",
                "--show",
                "0",
                "--groups",
                str(groups),
            ]
        )
        == 0
    )
    assert 0 < sum(padded) <= 2 * len(rows)


# ----------------------------------------------------------------------------------
# API and docs
# ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_release_widens_half_precision_jax_arrays(dtype):
    out = dpjax.release(jax.random.key(0), jnp.ones(4, dtype), dpjax.Laplace(1.0), numerics="float")
    assert out.dtype == jnp.float32


@pytest.mark.slow
def test_readme_custom_kernel_snippet_runs_verbatim():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Your own noise kernel", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    code = code.replace("optimize.tune_boosted(", "(lambda **k: k)(")  # the tuner's run is test_kernel_protocol's
    exec(compile(code, "README.md", "exec"), {})


@pytest.mark.slow
def test_kernel_class_found_from_the_repository_root_without_pythonpath(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".") and Path(p).resolve() != ROOT])
    for name in [m for m in sys.modules if m == "examples" or m.startswith("examples.")]:
        monkeypatch.delitem(sys.modules, name)
    assert main(["release", "--mechanism", "examples.custom_kernel:Logistic", "--seed", "1", "--show", "0"]) == 0
    assert "noise Logistic" in capsys.readouterr().out
    assert str(ROOT) not in sys.path  # the folder was searched for that import only


@pytest.mark.slow
def test_accountant_docstring_example_runs():
    import accounting.accountant

    result = doctest.testmod(accounting.accountant, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 5 and result.failed == 0


def test_readme_names_the_examples_extra():
    # (that no text points outside the repository: tests/test_self_contained.py)
    assert ".[examples]" in (ROOT / "README.md").read_text()


class _TerminalErr(io.StringIO):
    def isatty(self):
        return True


def test_progress_indicator_only_on_a_terminal():
    import time

    from dpjax.cli._common import progress

    tty, pipe = _TerminalErr(), io.StringIO()
    for stream in (tty, pipe):
        with progress("tuning", stream):
            time.sleep(0.6)
    assert "tuning" in tty.getvalue() and tty.getvalue().endswith("\r")
    assert pipe.getvalue() == ""
