"""The `dpjax release` command (dpjax.cli.release) and its embedded dataset; its errors name the flag."""

import csv
import json

import numpy as np
import pytest
from cli_run import json_of, run_cli

import dpjax
import optimize
from dpjax import cli
from dpjax.cli import io as tables
from dpjax.cli import main
from dpjax.data import load_steps, make_steps_table


def test_shipped_dataset_matches_its_recipe():
    assert load_steps() == make_steps_table()


@pytest.mark.slow
def test_default_release_prints_table_mechanism_and_privacy(capsys):
    assert cli.main(["release", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    for group in ("18-29", "30-44", "45-59", "60-74", "75+"):
        assert group in out
    assert "noise Laplace" in out
    eps = float(out.split("epsilon = ")[1].split(",")[0])
    assert 0.999 <= eps <= 1.0


@pytest.mark.parametrize(
    "mechanism,statistic",
    [
        ("gaussian", "sum"),
        pytest.param("discrete-laplace", "count", marks=pytest.mark.slow),
        pytest.param("discrete-gaussian", "count", marks=pytest.mark.slow),
    ],
)
def test_release_with_each_mechanism_and_csv_output(mechanism, statistic, tmp_path, capsys):
    out_csv = tmp_path / "out.csv"
    args = [
        "release",
        "--seed",
        "1",
        "--mechanism",
        mechanism,
        "--output",
        str(out_csv),
        "--group-by",
        "region",
        "--statistic",
        statistic,
    ]
    assert cli.main(args) == 0
    rows = list(csv.reader(open(out_csv)))
    name = "sum_steps" if statistic == "sum" else "count"
    # a release file holds only what is released: each value with its noise std and 95% interval
    assert rows[0] == ["region", name, f"{name}_std", f"{name}_ci_low", f"{name}_ci_high"]
    assert {r[0] for r in rows[1:]} == {"north", "south", "east", "west"}
    released = np.array([float(r[1]) for r in rows[1:]])
    assert np.isfinite(released).all()
    text = capsys.readouterr().out
    assert f"true {name}" in text  # the embedded dataset: true values on screen, never in the file
    eps, delta = (float(text.split(f"{w} = ")[1].split()[0].rstrip(",")) for w in ("epsilon", "delta"))
    assert 0.99 <= eps <= 1.0 and delta <= 1e-6  # the whole release, within the request


@pytest.mark.slow
def test_release_from_file_with_counts(tmp_path, capsys):
    """Groups of one or two people: none passes the private selection, no key is printed (main printed both)."""
    path = tmp_path / "in.csv"
    path.write_text("city,income\nA,10\nA,20\nB,30\n")
    assert (
        cli.main(
            [
                "release",
                "--input",
                str(path),
                "--value-column",
                "income",
                "--group-by",
                "city",
                "--statistic",
                "count",
                "--seed",
                "3",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "selected privately" in out and "\nA " not in out and "\nB " not in out


@pytest.mark.parametrize(
    "args,message",
    [
        (["--input", "/no/such.csv"], "no such file"),
        (["--value-column", "nope"], "--value-column"),
        (["--group-by", "nope"], "--group-by"),
        (["--epsilon", "0"], "epsilon"),
        (["--epsilon", "nan"], "epsilon"),
        (["--clip", "-1"], "--clip"),
    ],
)
def test_bad_arguments_give_clear_errors(args, message, capsys):
    assert cli.main(["release", "--seed", "0", *args]) == 2
    assert message in capsys.readouterr().err


def test_nan_in_input_is_refused(tmp_path, capsys):
    path = tmp_path / "in.csv"
    path.write_text("g,v\na,1\na,nan\n")
    assert cli.main(["release", "--input", str(path), "--value-column", "v", "--group-by", "g"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpjax: error: --value-column") and "null" in err and err.count("\n") == 1


@pytest.mark.slow
def test_progress_bar_on_large_inputs(tmp_path, capsys, monkeypatch):
    """The reader of the releases on public groups (PB-DP, composite, per-record) shows its progress."""
    monkeypatch.setattr(tables, "_PROGRESS_MIN_BYTES", 10)
    path = tmp_path / "in.csv"
    path.write_text("g,v\n" + "".join(f"{i % 3},{i}\n" for i in range(1000)))
    names, inverse, values = tables.read_table(str(path), "v", "g")
    assert list(names) == ["0", "1", "2"] and len(values) == 1000
    assert "reading [" in capsys.readouterr().err


def _epsilons(text):
    return [float(line.split("epsilon = ")[1].split()[0]) for line in text.splitlines() if "privacy: epsilon" in line]


@pytest.mark.slow
def test_boosted_release_beats_the_gaussian_meeting_the_same_utility(tmp_path, capsys):
    out_csv = tmp_path / "out.csv"
    assert (
        cli.main(
            [
                "release",
                "--seed",
                "0",
                "--mechanism",
                "boosted",
                "--region",
                "absolute",
                "--output",
                str(out_csv),
                "--include-true-values",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "AbsoluteError(tau=40000)" in text and "boosting rate q" in text
    eps_boosted, eps_gauss = _epsilons(text)
    # Table-A-like setting: ΔQ/τ = 0.5, ρ = 0.9 — boosting roughly halves ε (exact 3.917 -> ~2.08)
    assert eps_gauss == pytest.approx(3.9172, abs=2e-3)
    assert eps_boosted < 0.6 * eps_gauss
    rows = list(csv.reader(open(out_csv)))
    assert rows[0] == ["group", "true_sum", "pbdp_sum", "gaussian_sum"]
    true = np.array([float(r[1]) for r in rows[1:]])
    for col in (2, 3):
        released = np.array([float(r[col]) for r in rows[1:]])
        assert np.isfinite(released).all() and not np.array_equal(released, true)


@pytest.mark.slow
def test_boosted_release_with_given_sigma_reports_its_exact_epsilon(capsys):
    from accounting import exact

    args = [
        "release",
        "--seed",
        "0",
        "--mechanism",
        "boosted",
        "--theta",
        "0.1",
        "--tau",
        "30000",
        "--rho",
        "0.8",
        "--sigma",
        "40000",
    ]
    assert cli.main(args) == 0
    text = capsys.readouterr().out
    assert "RelativeError(theta=0.1, tau=30000)" in text
    mech = dpjax.PrivacyBoosted(dpjax.Gaussian(sigma=40000.0), dpjax.RelativeError(0.1, 30000.0), 0.8)
    expected = float(exact.epsilon(mech, 1e-6, sensitivity=20000.0))
    assert _epsilons(text)[0] == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize(
    "args,message", [(["--rho", "1.5"], "--rho"), (["--tau", "-1"], "tau"), (["--theta", "nan"], "theta")]
)
def test_boosted_bad_arguments(args, message, capsys):
    assert cli.main(["release", "--seed", "0", "--mechanism", "boosted", *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow  # the default suite tunes a boosted kernel through the CLI in the discrete-kernel test below
def test_boosted_release_with_a_laplace_kernel_against_the_plain_laplace(tmp_path, capsys):
    out_csv = tmp_path / "out.csv"
    assert (
        cli.main(
            [
                "release",
                "--seed",
                "0",
                "--mechanism",
                "boosted",
                "--kernel",
                "laplace",
                "--region",
                "absolute",
                "--output",
                str(out_csv),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "PrivacyBoosted(Laplace(scale=" in text and "Laplace: Laplace(scale=17371.8)" in text
    eps_boosted, eps_plain = _epsilons(text)
    # the plain Laplace meeting P(|N| <= tau) = 1 - e^{-tau/b} = 0.9: exact ε = Δ/b − 2δ at δ = 1e-6
    assert eps_plain == pytest.approx(20000 * np.log(10) / 40000 - 2e-6, abs=1e-4)
    assert eps_boosted <= eps_plain  # the boost never costs privacy (here it buys almost nothing)
    assert list(csv.reader(open(out_csv)))[0] == ["group", "pbdp_sum", "laplace_sum"]


@pytest.mark.slow
def test_boosted_release_with_a_discrete_kernel_releases_integers(tmp_path, capsys):
    out_csv = tmp_path / "out.csv"
    assert (
        cli.main(
            [
                "release",
                "--seed",
                "0",
                "--mechanism",
                "boosted",
                "--kernel",
                "discrete_laplace",
                "--statistic",
                "count",
                "--region",
                "absolute",
                "--rho",
                "0.8",
                "--output",
                str(out_csv),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "PrivacyBoosted(DiscreteLaplace(scale=" in text and "DiscreteLaplace: DiscreteLaplace(scale=" in text
    rows = list(csv.reader(open(out_csv)))
    assert rows[0] == ["group", "pbdp_count", "discretelaplace_count"]
    released = np.array([[float(r[1]), float(r[2])] for r in rows[1:]])
    assert np.array_equal(released, np.round(released))
    eps_boosted, eps_plain = _epsilons(text)
    assert eps_boosted <= eps_plain


@pytest.mark.slow
def test_boosted_discrete_gaussian_beats_the_plain_discrete_gaussian(capsys):
    assert (
        cli.main(
            [
                "release",
                "--seed",
                "0",
                "--mechanism",
                "boosted",
                "--kernel",
                "discrete-gaussian",
                "--statistic",
                "count",
                "--region",
                "absolute",
            ]
        )
        == 0
    )
    eps_boosted, eps_plain = _epsilons(capsys.readouterr().out)
    assert eps_boosted < 0.7 * eps_plain  # 1.757 against 3.039


@pytest.mark.parametrize(
    "args,message",
    [
        (["--kernel", "laplace", "--sigma", "3"], "--sigma does not apply to a laplace kernel"),
        (["--kernel", "gaussian", "--scale", "3"], "--scale does not apply to a gaussian kernel"),
        # one listed pair per region width up to the kernel's reach: hundreds of millions on these sums
        (["--kernel", "discrete-laplace", "--region", "relative"], "with a relative region lists one pair"),
    ],
)
def test_boosted_kernel_bad_arguments(args, message, capsys):
    assert cli.main(["release", "--seed", "0", "--mechanism", "boosted", *args]) == 2
    assert message in capsys.readouterr().err


def test_boosted_unknown_kernel_is_refused(capsys):
    assert cli.main(["release", "--mechanism", "boosted", "--kernel", "cauchy"]) == 2
    assert "--kernel" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_exact_refused_for_boosted_float_kept(capsys):
    argv = ["release", "--seed", "0", "--mechanism", "boosted", "--kernel", "laplace", "--scale", "20000"]
    assert cli.main(argv) == 0
    assert "numerics: float" in capsys.readouterr().out
    assert cli.main([*argv, "--numerics", "exact"]) == 2
    assert "PrivacyBoosted" in capsys.readouterr().err


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

    def no_tuning(*a, **k):
        raise AssertionError("tuned before refusing")

    monkeypatch.setattr(optimize, "tune_boosted", no_tuning)
    assert main(["release", "--mechanism", "boosted", "--numerics", "exact", "--seed", "0"]) == 2
    assert "--numerics exact" in capsys.readouterr().err


@pytest.mark.slow
def test_a_mixture_release_spends_the_epsilon_asked_for(capsys):
    """main released at pure ε 5 under --epsilon 1 (the paper's inner ε) and exited 0."""
    rc, out, err = run_cli(
        [
            "release",
            "--mechanism",
            "laplace-mixture",
            "--r",
            "5",
            "--c",
            "5",
            "--epsilon",
            "1",
            "--statistic",
            "count",
            "--json",
        ],
        capsys,
    )
    assert rc == 0
    assert 0.99 <= json.loads(out)["epsilon"] <= 1.0


@pytest.mark.slow
def test_release_json_holds_the_released_values_and_their_privacy(tmp_path, capsys):
    path = tmp_path / "in.csv"
    path.write_text("g,v\na,5\nb,7\na,9\n")
    groups = tmp_path / "groups.csv"
    groups.write_text("g\na\nb\n")
    got = json_of(
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
    # the statistics by name, each with its noise std per group (as the rows): Laplace(b) has std b·√2, b the
    # calibrated scale
    (scale,) = got["scales"].values()
    assert got["noise_std"] == {"sum_v": [pytest.approx(scale * np.sqrt(2))] * 2}
    assert list(got["scales"]) == ["sum of v in [-10, 10]"]
    # the user's own data: no true value in the output (no "true…" field; "row_level": true is a flag)
    assert not any(k.startswith("true") for k in got) and not any(k.startswith("true") for r in got["rows"] for k in r)
