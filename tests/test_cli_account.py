"""``dpjax account`` (dpjax.cli.account): the same numbers as the Python API, in-process; DP-SGD in users' units against
dp_accounting; bad input is one line naming the flag."""

import json

import jax
import numpy as np
import pytest
from cli_run import json_of, run_cli

import accounting
import dpjax
from dpjax.cli import main


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
    got = json_of(
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
    got = json_of(capsys, ["account", "--plan", str(plan), "--epsilon", "1.5", "--rdp"])
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


@pytest.mark.slow
def test_account_dpsgd_in_users_units_against_dp_accounting(capsys, tmp_path):
    import dp_accounting

    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(256 / 60000, dp_accounting.GaussianDpEvent(1.1)), 14063
    )
    pld, rdp = dp_accounting.pld.PLDAccountant(), dp_accounting.rdp.RdpAccountant()
    pld.compose(event)
    rdp.compose(event)
    rc, out, err = run_cli(
        [
            "account",
            "dpsgd",
            "--noise-multiplier",
            "1.1",
            "--batch-size",
            "256",
            "--num-examples",
            "60000",
            "--epochs",
            "60",
            "--delta",
            "1e-5",
            "--json",
        ],
        capsys,
    )
    got = json.loads(out)
    assert rc == 0 and got["steps"] == 14063 and got["sampling_prob"] == 256 / 60000
    assert abs(got["epsilon"] - pld.get_epsilon(1e-5)) <= 1e-3
    assert got["rdp_epsilon"] <= rdp.get_epsilon(1e-5)
    # the same run as a rate and steps
    rc, out2, _ = run_cli(
        [
            "account",
            "dpsgd",
            "--noise-multiplier",
            "1.1",
            "--sampling-prob",
            str(256 / 60000),
            "--steps",
            "14063",
            "--delta",
            "1e-5",
            "--json",
        ],
        capsys,
    )
    assert rc == 0 and json.loads(out2)["epsilon"] == got["epsilon"]
