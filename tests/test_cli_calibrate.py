"""``dpjax calibrate`` (dpjax.cli.calibrate): the same numbers as the Python API, in-process; DP-SGD's batch size
keeps the epochs; bad input is refused by name."""

import json

import numpy as np
import pytest
from cli_run import json_of, run_cli

import accounting
import dpjax
from dpjax.cli import main


@pytest.mark.slow
def test_calibrate_batch_size_keeps_the_epochs(capsys):
    import accounting

    rc, out, err = run_cli(
        [
            "calibrate",
            "dpsgd",
            "--epsilon",
            "2",
            "--delta",
            "1e-5",
            "--noise-multiplier",
            "1.0",
            "--num-examples",
            "6000",
            "--epochs",
            "3",
            "--json",
        ],
        capsys,
    )
    assert rc == 0, err
    got = json.loads(out)
    b, t = got["batch_size"], got["steps"]
    assert t == int(np.ceil(3 * 6000 / b)) and got["epochs"] == 3
    assert got["epsilon"] <= 2
    over = float(accounting.dpsgd_epsilon(1.0, (b + 1) / 6000, int(np.ceil(3 * 6000 / (b + 1))), 1e-5))
    assert over > 2  # the next batch size spends more than the target


@pytest.mark.slow
def test_calibrate_dpsgd_noise_multiplier_as_the_api(capsys):
    got = json_of(
        capsys, ["calibrate", "dpsgd", "--epsilon", "2", "--delta", "1e-5", "--sampling-prob", "0.01", "--steps", "10"]
    )
    z = float(accounting.calibrate_noise_multiplier(2.0, 1e-5, 0.01, 10))
    assert got["calibrated"] == "noise_multiplier" and got["noise_multiplier"] == pytest.approx(z, rel=1e-12)
    assert got["epsilon"] <= 2.0


@pytest.mark.slow
def test_calibrate_dpsgd_steps_as_the_api(capsys):
    got = json_of(
        capsys,
        [
            "calibrate",
            "dpsgd",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--sampling-prob",
            "0.01",
            "--noise-multiplier",
            "2",
            "--mechanism",
            "laplace",
        ],
    )
    assert got["steps"] == int(accounting.calibrate_num_steps(1.0, 1e-5, 2.0, 0.01, mechanism=dpjax.Laplace))
    assert got["epsilon"] <= 1.0


def test_calibrate_plan_common_scale_of_one_gaussian(capsys):
    got = json_of(capsys, ["calibrate", "plan", "--epsilon", "1", "--delta", "1e-5", "--mechanism", "gaussian"])
    sigma = float(dpjax.kernels.analytic_gaussian_sigma(1.0, 1e-5, 1.0))
    assert got["scale"] == pytest.approx(sigma, rel=2e-4) and got["epsilon"] <= 1.0


@pytest.mark.parametrize(
    "argv,words",
    [
        (["dpsgd", "--epsilon", "1", "--delta", "1e-5", "--steps", "10"], "missing"),
        (
            [
                "dpsgd",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
                "--steps",
                "10",
                "--sampling-prob",
                "0.1",
                "--num-examples",
                "100",
            ],
            "--sampling-prob does not apply",
        ),
        (["dpsgd", "--epsilon", "-1", "--delta", "1e-5", "--steps", "10", "--sampling-prob", "0.1"], "--epsilon"),
        (["dpsgd", "--delta", "1e-5"], "--epsilon"),
        (["plan", "--epsilon", "1", "--delta", "1e-5", "--mechanism", "gaussian", "--sigma", "1"], "--sigma"),
    ],
)
def test_calibrate_bad_input(argv, words, capsys):
    assert main(["calibrate", *argv]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert words in last and last.startswith("dpjax: error")
    # one line, after the subcommand's usage for a flag it does not know
    assert err.count("\n") == 1 or err.startswith("usage: dpjax calibrate plan")
