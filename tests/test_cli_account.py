"""``dpjax account``, ``calibrate`` and ``tune``: the same numbers as the Python API, in-process."""

import json

import jax
import numpy as np
import pytest

import accounting
import dpjax
import optimize
from dpjax.cli import main


def _json(capsys, argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_help_lists_the_four_subcommands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(cmd in out for cmd in ("release", "account", "calibrate", "tune"))


# ----------------------------------------------------------------------------------
# account
# ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_account_dpsgd_matches_dpsgd_epsilon(capsys):
    argv = [
        "account",
        "--mechanism",
        "gaussian",
        "--sigma",
        "1.1",
        "--sampling-prob",
        "0.004",
        "--steps",
        "15000",
        "--delta",
        "1e-5",
    ]
    assert main(argv) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("epsilon ="))
    expected = float(accounting.dpsgd_epsilon(1.1, 0.004, 15000, 1e-5))
    assert float(line.split()[2]) == pytest.approx(expected, rel=1e-5)


@pytest.mark.slow
def test_account_composes_groups_as_the_pld_api(capsys):
    got = _json(
        capsys,
        [
            "account",
            "--mechanism",
            "gaussian",
            "--sigma",
            "2",
            "--steps",
            "3",
            "--mechanism",
            "laplace",
            "--scale",
            "4",
            "--sensitivity",
            "2",
            "--delta",
            "1e-5",
            "--curve",
        ],
    )
    pld = (
        accounting.pld(dpjax.Gaussian(2.0)).self_compose(3).compose(accounting.pld(dpjax.Laplace(4.0), sensitivity=2.0))
    )
    assert got["epsilon"] == pytest.approx(float(pld.get_epsilon_for_delta(1e-5)), rel=1e-6)
    assert [g["steps"] for g in got["plan"]] == [3, 1] and got["plan"][1]["sensitivity"] == 2.0
    curve = {c["delta"]: c["epsilon"] for c in got["curve"]}
    assert curve[1e-3] == pytest.approx(float(pld.get_epsilon_for_delta(1e-3)), rel=1e-6)


def test_account_delta_at_epsilon_plan_file_and_rdp(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"mechanism": "gaussian", "sigma": 3.0, "steps": 4}]))
    got = _json(capsys, ["account", "--plan", str(plan), "--epsilon", "1.5", "--rdp"])
    pld = accounting.pld(dpjax.Gaussian(3.0)).self_compose(4)
    assert got["delta"] == pytest.approx(float(pld.get_delta_for_epsilon(1.5)), rel=1e-6)
    from accounting.rdp import SAMPLED_GAUSSIAN_ORDERS as orders

    with jax.enable_x64(True):
        rdp = 4 * np.asarray(accounting.rdp(dpjax.Gaussian(3.0), orders))
    assert got["rdp_delta"] == pytest.approx(float(accounting.rdp_to_delta(orders, rdp, 1.5)), rel=1e-9)
    assert got["rdp_delta"] >= got["delta"]


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--mechanism", "laplace", "--sigma", "1", "--delta", "1e-5"], "--sigma does not apply"),
        (["--steps", "3", "--mechanism", "gaussian", "--sigma", "1", "--delta", "1e-5"], "--steps comes after"),
        (["--mechanism", "gaussian", "--sigma", "1", "--sigma", "2", "--delta", "1e-5"], "--sigma given twice"),
        (["--mechanism", "gaussian", "--sigma", "1", "--delta", "1e-5", "--epsilon", "1"], "exactly one"),
        (["--mechanism", "gaussian", "--sigma", "1", "--sampling-prob", "1.5", "--delta", "1e-5"], "--sampling-prob"),
        (["--mechanism", "gaussian", "--delta", "1e-5"], "--sigma"),
        (["--mechanism", "cauchy", "--scale", "1", "--delta", "1e-5"], "--mechanism"),
        (["--delta", "1e-5"], "--mechanism"),
    ],
)
def test_account_bad_input_is_one_line_naming_the_flag(argv, words, capsys):
    assert main(["account", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


# ----------------------------------------------------------------------------------
# calibrate
# ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_calibrate_dpsgd_noise_multiplier_as_the_api(capsys):
    got = _json(
        capsys, ["calibrate", "dpsgd", "--epsilon", "2", "--delta", "1e-5", "--sampling-prob", "0.01", "--steps", "10"]
    )
    z = float(accounting.calibrate_noise_multiplier(2.0, 1e-5, 0.01, 10))
    assert got["calibrated"] == "noise_multiplier" and got["noise_multiplier"] == pytest.approx(z, rel=1e-12)
    assert got["epsilon"] <= 2.0


@pytest.mark.slow
def test_calibrate_dpsgd_steps_as_the_api(capsys):
    got = _json(
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
    got = _json(capsys, ["calibrate", "plan", "--epsilon", "1", "--delta", "1e-5", "--mechanism", "gaussian"])
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


# ----------------------------------------------------------------------------------
# tune
# ----------------------------------------------------------------------------------
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
    got = _json(capsys, argv)
    res = optimize.tune_boosted(
        kernel="gaussian", region=dpjax.AbsoluteError(5.0), rho=0.8, sensitivity=4.0, delta=1e-5
    )
    assert got["epsilon"] == pytest.approx(float(res.epsilon), rel=1e-9)
    assert got["baseline_epsilon"] == pytest.approx(float(res.baseline_epsilon), rel=1e-9)
    assert got["tuned"]["kernel"]["sigma"] == pytest.approx(float(res.sigma), rel=1e-9)
    assert got["epsilon"] < got["baseline_epsilon"]


@pytest.mark.slow
def test_tune_mixture_and_composite_as_the_api(capsys):
    got = _json(capsys, ["tune", "mixture", "--epsilon", "0.5", "--kernel", "geometric", "--objective", "variance"])
    res = optimize.tune_mixture(0.5, kernel="geometric", objective="variance")
    assert got["value"] == pytest.approx(float(res.objective), rel=1e-9)
    assert got["baseline_value"] == pytest.approx(float(res.baseline_objective), rel=1e-9)
    got = _json(capsys, ["tune", "composite", "--epsilon", "1", "--window", "0", "10"])
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


@pytest.mark.slow
def test_release_json_holds_the_released_values_and_their_privacy(tmp_path, capsys):
    path = tmp_path / "in.csv"
    path.write_text("g,v\na,5\nb,7\na,9\n")
    groups = tmp_path / "groups.csv"
    groups.write_text("g\na\nb\n")
    got = _json(
        capsys,
        [
            "release",
            "--input",
            str(path),
            "--group-by",
            "g",
            "--value-column",
            "v",
            "--clip",
            "10",
            "--groups",
            str(groups),
            "--numerics",
            "float",
            "--seed",
            "0",
        ],
    )
    assert [r["g"] for r in got["rows"]] == ["a", "b"] and got["statistics"] == ["sum_v"]
    assert got["numerics"] == "float" and got["epsilon"] <= 1.0 and got["row_level"] is True
    # the statistics by name, each with its noise std: Laplace(b) has std b·√2, b the calibrated scale
    (scale,) = got["scales"].values()
    assert got["noise_std"] == {"sum_v": pytest.approx(scale * np.sqrt(2))}
    assert list(got["scales"]) == ["sum of v in [-10, 10]"]
    assert "true" not in json.dumps(got)  # the user's own data: no true value in the output
