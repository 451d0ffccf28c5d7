"""``dpjax tune`` (dpjax.cli.tune): the same kernels as the Python API's tuners, in-process; bad input is refused by
name."""

import numpy as np
import pytest
from cli_run import json_of

import dpjax
import optimize
from dpjax.cli import main


@pytest.mark.slow
def test_tune_boosted_as_the_api(capsys):
    argv = [
        "tune",
        "boosted",
        "--region",
        "absolute",
        "--tau",
        "5",
        "--rho",
        "0.8",
        "--sensitivity",
        "4",
        "--delta",
        "1e-5",
    ]
    got = json_of(capsys, argv)
    res = optimize.tune_boosted(
        kernel="gaussian", region=dpjax.AbsoluteError(5.0), rho=0.8, sensitivity=4.0, delta=1e-5
    )
    assert got["epsilon"] == pytest.approx(float(res.epsilon), rel=1e-9)
    assert got["baseline_epsilon"] == pytest.approx(float(res.baseline_epsilon), rel=1e-9)
    assert got["tuned"]["kernel"]["sigma"] == pytest.approx(float(res.sigma), rel=1e-9)
    assert got["epsilon"] < got["baseline_epsilon"]


@pytest.mark.slow
def test_tune_mixture_and_composite_as_the_api(capsys):
    got = json_of(capsys, ["tune", "mixture", "--epsilon", "0.5", "--kernel", "geometric", "--objective", "variance"])
    res = optimize.tune_mixture(0.5, kernel="geometric", objective="variance")
    assert got["value"] == pytest.approx(float(res.objective), rel=1e-9)
    assert got["baseline_value"] == pytest.approx(float(res.baseline_objective), rel=1e-9)
    got = json_of(capsys, ["tune", "composite", "--epsilon", "1", "--window", "0", "10"])
    res = optimize.tune_composite(1.0, window=(0.0, 10.0))
    assert got["variance"] == pytest.approx(float(np.asarray(res.variance)), rel=1e-9)
    assert got["ratio"] < 1.0


@pytest.mark.parametrize(
    "argv,words",
    [
        (["boosted", "--tau", "5", "--rho", "0.8", "--delta", "1e-5", "--theta", "0.1"], "--theta does not apply"),
        (["boosted", "--tau", "5", "--rho", "1.5", "--delta", "1e-5"], "--rho"),
        (["boosted", "--tau", "5", "--rho", "0.8"], "--delta"),
        (["mixture", "--epsilon", "1", "--kernel", "gaussian"], "--kernel"),
        (["composite", "--epsilon", "1", "--window", "1", "0"], "--window"),
        (["composite", "--epsilon", "1", "--window", "0", "1", "--delta", "1e-5"], "--delta"),
    ],
)
def test_tune_bad_input(argv, words, capsys):
    assert main(["tune", *argv]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert words in last and last.startswith("dpjax: error")
    assert err.count("\n") == 1 or err.startswith("usage: dpjax tune")  # an unknown flag: the usage first
