"""The command line's entry point (dpjax.cli: ``main``): the subcommands and their help, every request run as asked
or refused with a non-zero exit saying why, ``--version``, a closed pipe, the compilation cache switch."""

import io
import sys

import jax
import pytest
from cli_run import run_cli

import dpjax
from dpjax import cli
from dpjax.cli import main


@pytest.mark.parametrize(
    "argv,words",
    [
        (["release", "--sigma", "3", "--mechanism", "gaussian"], "--sigma does not apply"),
        (["release", "--mechanism", "laplace-mixture", "--r", "5"], "--c"),
        (["release", "--mechanism", "laplace", "--r", "5"], "--r does not apply"),
        pytest.param(
            [
                "calibrate",
                "dpsgd",
                "--epsilon",
                "0.01",
                "--delta",
                "1e-5",
                "--noise-multiplier",
                "0.3",
                "--sampling-prob",
                "0.5",
            ],
            "out of reach",
            marks=pytest.mark.slow,  # a search over steps: its accounting compiles
        ),
        (
            [
                "calibrate",
                "dpsgd",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
                "--noise-multiplier",
                "1",
                "--num-examples",
                "100",
                "--steps",
                "10",
            ],
            "--steps does not apply",
        ),
        (
            [
                "calibrate",
                "dpsgd",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
                "--mechanism",
                "discrete-laplace",
                "--sampling-prob",
                "0.1",
                "--steps",
                "10",
            ],
            "invalid choice",
        ),
        (
            [
                "account",
                "dpsgd",
                "--noise-multiplier",
                "1",
                "--batch-size",
                "10",
                "--num-examples",
                "100",
                "--epochs",
                "1",
                "--steps",
                "3",
                "--delta",
                "1e-5",
            ],
            "not both",
        ),
        (
            [
                "account",
                "dpsgd",
                "--noise-multiplier",
                "1",
                "--batch-size",
                "1000",
                "--num-examples",
                "100",
                "--epochs",
                "1",
                "--delta",
                "1e-5",
            ],
            "larger than --num-examples",
        ),
    ],
)
def test_each_cannot_exits_non_zero_saying_why(argv, words, capsys):
    rc, out, err = run_cli(argv, capsys)
    assert rc == 2 and words in err and out == ""
    assert len(err.strip().splitlines()) <= 2 and len(err) < 400


def test_help_offers_only_what_works_and_unknown_flags_show_the_usage(capsys):
    rc, out, _ = run_cli(["calibrate", "dpsgd", "--help"], capsys)
    assert rc == 0 and "discrete-laplace" not in out and "geometric-mixture" not in out and "--epochs" in out
    rc, out, err = run_cli(["calibrate", "dpsgd", "--epsilon", "1", "--delta", "1e-5", "--bogus"], capsys)
    assert rc == 2 and "usage: dpjax calibrate dpsgd" in err and "--bogus" in err
    rc, out, err = run_cli(["account", "dpsgd", "--delta", "1e-5", "--bogus", "1"], capsys)
    assert rc == 2 and "usage: dpjax account dpsgd" in err


def test_version(capsys):

    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"dpjax {dpjax.__version__}"


def test_a_closed_pipe_ends_quietly(monkeypatch, capsys):
    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert cli.main(["account", "--mechanism", "laplace", "--scale", "1", "--delta", "1e-5"]) == 141
    assert capsys.readouterr().err == ""


def test_compilation_cache_switch(tmp_path, monkeypatch):

    import dpjax
    from dpjax.cli import _compilation_cache

    before = jax.config.jax_compilation_cache_dir
    try:
        folder = dpjax.enable_compilation_cache(tmp_path / "c")
        assert folder == str(tmp_path / "c") and jax.config.jax_compilation_cache_dir == folder
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        monkeypatch.setenv("DPJAX_COMPILATION_CACHE", "")
        _compilation_cache()
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "xdg" / "dpjax" / "jax")
        monkeypatch.setenv("DPJAX_COMPILATION_CACHE", "off")
        jax.config.update("jax_compilation_cache_dir", before)
        _compilation_cache()
        assert jax.config.jax_compilation_cache_dir == before
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


def test_help_lists_the_four_subcommands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(cmd in out for cmd in ("release", "account", "calibrate", "tune"))
