"""Safe by default (issue 29): one release path that never prints a key read from the data unless it is
public or privately selected, fresh randomness unless --seed (and then a warning), every request run as
asked or refused with a non-zero exit, DP-SGD in users' units, the accuracy of each released value, the
compilation cache, --version, a closed pipe, --plot."""

import gzip
import io
import json
import sys

import numpy as np
import pytest

from dpjax import cli

SECRET = "SECRET_ALICE"
#: many rows in two groups, and one group key held by a single row
ROWS = "".join(f"{c},{r},{10 + i % 7},u{i}\n" for i, (c, r) in enumerate([("FR", "n"), ("DE", "s")] * 150))
TABLE = "country,region,amount,user\n" + ROWS + f"{SECRET},x,1000,u999\n"


@pytest.fixture
def files(tmp_path):
    csv_path = tmp_path / "data.csv"
    csv_path.write_text(TABLE)
    gz_path = tmp_path / "data.csv.gz"
    gz_path.write_bytes(gzip.compress(TABLE.encode()))
    return {"csv": str(csv_path), "gz": str(gz_path), "dir": tmp_path}


def _run(argv, capsys, stdin=None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


BASE = ["release", "--value-column", "amount", "--group-by", "country", "--epsilon", "3"]


@pytest.mark.slow
def test_a_single_row_key_is_never_printed_by_the_plain_release(files, capsys):
    """The plain CSV release (main printed SECRET_ALICE with its noisy sum) selects its groups privately."""
    out_file = files["dir"] / "out.csv"
    rc, out, err = _run(BASE + ["--input", files["csv"], "--output", str(out_file)], capsys)
    assert rc == 0 and SECRET not in out + err + out_file.read_text()
    assert err.count("each row is taken as a different person") == 1
    rc, out, err = _run(BASE + ["--input", files["csv"], "--json", "--statistic", "count,sum"], capsys)
    assert rc == 0 and SECRET not in out + err


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["gz", "parquet", "stdin", "two-columns", "several", "discrete", "gaussian"])
def test_a_single_row_key_is_never_printed_by_any_release_variant(variant, files, capsys, monkeypatch):
    stdin = None
    args = BASE + ["--input", files["csv"]]
    if variant == "gz":
        args = BASE + ["--input", files["gz"]]
    elif variant == "parquet":
        import pyarrow.csv as pacsv
        import pyarrow.parquet as pq

        path = files["dir"] / "data.parquet"
        pq.write_table(pacsv.read_csv(files["csv"]), path)
        args = BASE + ["--input", str(path)]
    elif variant == "stdin":
        args, stdin = BASE + ["--input", "-"], TABLE
        monkeypatch.setattr(
            sys, "stdin", type("S", (), {"buffer": io.BytesIO(TABLE.encode()), "isatty": staticmethod(lambda: False)})()
        )
        stdin = None
    elif variant == "two-columns":
        args = BASE[:4] + ["country,region"] + BASE[5:] + ["--input", files["csv"]]
    elif variant == "several":
        args += ["--statistic", "count,sum,mean", "--window", "0", "1000"]
    elif variant == "discrete":
        args += ["--mechanism", "discrete-laplace", "--statistic", "count"]
    else:
        args += ["--mechanism", "gaussian", "--json"]
    rc, out, err = _run(args, capsys, stdin, monkeypatch)
    assert rc == 0, err
    assert SECRET not in out + err
    assert "FR" in out  # the large groups pass the selection: the release is not empty


@pytest.mark.parametrize(
    "mechanism",
    [
        ["--mechanism", "boosted"],
        ["--mechanism", "composite", "--window", "0", "9"],
        ["--per-record-budget", "amount", "--eps-min", "1", "--eps-max", "2"],
    ],
)
def test_releases_without_private_selection_need_public_groups(mechanism, files, capsys):
    rc, out, err = _run(BASE[:-2] + ["--input", files["csv"]] + mechanism, capsys)
    assert rc == 2 and "--groups" in err and SECRET not in out + err


@pytest.mark.slow
def test_public_groups_release_the_listed_keys_only(files, capsys):
    groups = files["dir"] / "groups.csv"
    groups.write_text("country\nFR\nDE\nIT\n")
    rc, out, err = _run(BASE + ["--input", files["csv"], "--groups", str(groups), "--json", "--seed", "1"], capsys)
    assert rc == 0 and SECRET not in out
    rows = json.loads(out)["rows"]
    assert [r["country"] for r in rows] == ["FR", "DE", "IT"]  # the public list, in its order
    assert set(rows[0]) == {"country", "sum_amount", "sum_amount_std", "sum_amount_ci_low", "sum_amount_ci_high"}
    # the interval is the released value ± the same half-width for every group
    half = {round(r["sum_amount_ci_high"] - r["sum_amount"], 6) for r in rows}
    assert len(half) == 1 and half.pop() > 0
    # PB-DP on the same public groups: the listed keys, the unlisted single-row key dropped
    rc, out, err = _run(
        BASE[:-2]
        + [
            "--input",
            files["csv"],
            "--groups",
            str(groups),
            "--mechanism",
            "boosted",
            "--kernel",
            "laplace",
            "--scale",
            "20",
            "--seed",
            "1",
        ],
        capsys,
    )
    assert rc == 0 and SECRET not in out and "IT" in out


def test_two_runs_without_a_seed_differ_and_a_seed_warns(files, capsys):
    groups = files["dir"] / "groups.csv"
    groups.write_text("country\nFR\nDE\n")
    args = BASE + ["--input", files["csv"], "--groups", str(groups), "--json"]
    runs = []
    for _ in range(2):
        rc, out, err = _run(args, capsys)
        assert rc == 0 and "--seed" not in err
        runs.append([r["sum_amount"] for r in json.loads(out)["rows"]])
    assert runs[0] != runs[1]
    rc, out, err = _run(args + ["--seed", "7"], capsys)
    assert rc == 0 and "reproducible" in err and "Never release the same data twice" in err
    assert _run(args + ["--seed", "7"], capsys)[1] == out


# ----------------------------------------------------------------------------------
# the request is what runs, or it is refused
# ----------------------------------------------------------------------------------
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
    rc, out, err = _run(argv, capsys)
    assert rc == 2 and words in err and out == ""
    assert len(err.strip().splitlines()) <= 2 and len(err) < 400


@pytest.mark.slow
def test_a_mixture_release_spends_the_epsilon_asked_for(capsys):
    """main released at pure ε 5 under --epsilon 1 (the paper's inner ε) and exited 0."""
    rc, out, err = _run(
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


def test_help_offers_only_what_works_and_unknown_flags_show_the_usage(capsys):
    rc, out, _ = _run(["calibrate", "dpsgd", "--help"], capsys)
    assert rc == 0 and "discrete-laplace" not in out and "geometric-mixture" not in out and "--epochs" in out
    rc, out, err = _run(["calibrate", "dpsgd", "--epsilon", "1", "--delta", "1e-5", "--bogus"], capsys)
    assert rc == 2 and "usage: dpjax calibrate dpsgd" in err and "--bogus" in err
    rc, out, err = _run(["account", "dpsgd", "--delta", "1e-5", "--bogus", "1"], capsys)
    assert rc == 2 and "usage: dpjax account dpsgd" in err


def test_version(capsys):
    import dpjax

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
    import jax

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


# ----------------------------------------------------------------------------------
# DP-SGD in users' units
# ----------------------------------------------------------------------------------
def test_sampled_gaussian_rdp_at_fractional_orders_matches_the_integral():
    """log A_α / (α − 1) against mpmath's quadrature of E_{μ0}[(μ/μ0)^α] (Mironov et al., Sec. 3.3)."""
    import mpmath as mp

    from accounting.rdp import sampled_gaussian_rdp_at

    mp.mp.dps = 30
    q, z = 256 / 60000, 1.1
    orders = [1.5, 2.0, 8.1, 12.35]
    got = sampled_gaussian_rdp_at(z, q, orders)
    for a, g in zip(orders, got):
        area = mp.quad(
            lambda x: mp.npdf(x, 0, z) * ((1 - q) + q * mp.exp((2 * x - 1) / (2 * z * z))) ** a,
            [-mp.inf, -10, 0, 0.5, 1, 10, mp.inf],
        )
        exact = float(mp.log(area) / (a - 1))
        assert g == pytest.approx(exact, rel=1e-9)


def test_rdp_epsilon_is_at_least_as_tight_as_dp_accountings():
    """z 1.1, q 256/60000, 14063 steps, δ 1e-5: dp_accounting's RDP accountant gives 2.5967 (main: 2.797)."""
    import dp_accounting

    from accounting.rdp import SAMPLED_GAUSSIAN_ORDERS, rdp_to_epsilon, sampled_gaussian_rdp_at

    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(256 / 60000, dp_accounting.GaussianDpEvent(1.1)), 14063
        )
    )
    ours = float(rdp_to_epsilon(SAMPLED_GAUSSIAN_ORDERS, 14063 * sampled_gaussian_rdp_at(1.1, 256 / 60000), 1e-5))
    assert ours <= acc.get_epsilon(1e-5)
    assert ours == pytest.approx(acc.get_epsilon(1e-5), rel=1e-6)


@pytest.mark.slow
def test_account_dpsgd_in_users_units_against_dp_accounting(capsys, tmp_path):
    import dp_accounting

    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(256 / 60000, dp_accounting.GaussianDpEvent(1.1)), 14063
    )
    pld, rdp = dp_accounting.pld.PLDAccountant(), dp_accounting.rdp.RdpAccountant()
    pld.compose(event)
    rdp.compose(event)
    rc, out, err = _run(
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
    rc, out2, _ = _run(
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


@pytest.mark.slow
def test_calibrate_batch_size_keeps_the_epochs(capsys):
    import accounting

    rc, out, err = _run(
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


# ----------------------------------------------------------------------------------
# pictures
# ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_plots_are_pngs(files, capsys, tmp_path):
    groups = files["dir"] / "groups.csv"
    groups.write_text("country\nFR\nDE\n")
    png = tmp_path / "release.png"
    rc, out, err = _run(BASE + ["--input", files["csv"], "--groups", str(groups), "--plot", str(png)], capsys)
    assert rc == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    png = tmp_path / "profile.png"
    rc, out, err = _run(
        ["account", "--mechanism", "laplace", "--scale", "1", "--steps", "3", "--delta", "1e-5", "--plot", str(png)],
        capsys,
    )
    assert rc == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rc, out, err = _run(
        ["account", "--mechanism", "laplace", "--scale", "1", "--delta", "1e-5", "--plot", "x.pdf"], capsys
    )
    assert rc == 2 and ".png" in err
