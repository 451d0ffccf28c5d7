"""The command line's shared machinery (dpjax.cli._common): flags that do not apply, given twice or malformed are
refused by name with a usage hint, a kernel class named by its module is found from the repository root, the
progress indicator shows only on a terminal."""

import io
import sys
from pathlib import Path

import pytest

from dpjax.cli import main

ROOT = Path(__file__).resolve().parents[1]


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
        pytest.param(
            ["--mechanism", "composite", "--window", "0", "1", "--numerics", "exact"],
            "--numerics exact",
            marks=pytest.mark.slow,
        ),
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


@pytest.mark.slow
def test_kernel_class_found_from_the_repository_root_without_pythonpath(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".") and Path(p).resolve() != ROOT])
    for name in [m for m in sys.modules if m == "examples" or m.startswith("examples.")]:
        monkeypatch.delitem(sys.modules, name)
    assert main(["release", "--mechanism", "examples.custom_kernel:Logistic", "--seed", "1", "--show", "0"]) == 0
    assert "noise Logistic" in capsys.readouterr().out
    assert str(ROOT) not in sys.path  # the folder was searched for that import only


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
