"""Safe by default (issue 29), the release's groups (dpjax.cli.release_public): one release path that never prints a
key read from the data unless it is public or privately selected, and fresh randomness unless --seed (and then a
warning)."""

import io
import json
import sys

import pytest
from cli_run import BASE, SECRET, TABLE, run_cli, write_tables


@pytest.fixture
def files(tmp_path):
    return write_tables(tmp_path)


@pytest.mark.slow
def test_a_single_row_key_is_never_printed_by_the_plain_release(files, capsys):
    """The plain CSV release (main printed SECRET_ALICE with its noisy sum) selects its groups privately."""
    out_file = files["dir"] / "out.csv"
    rc, out, err = run_cli(BASE + ["--input", files["csv"], "--output", str(out_file)], capsys)
    assert rc == 0 and SECRET not in out + err + out_file.read_text()
    assert err.count("each row is taken as a different person") == 1
    rc, out, err = run_cli(BASE + ["--input", files["csv"], "--json", "--statistic", "count,sum"], capsys)
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
    rc, out, err = run_cli(args, capsys, stdin, monkeypatch)
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
    rc, out, err = run_cli(BASE[:-2] + ["--input", files["csv"]] + mechanism, capsys)
    assert rc == 2 and "--groups" in err and SECRET not in out + err


@pytest.mark.slow
def test_public_groups_release_the_listed_keys_only(files, capsys):
    groups = files["dir"] / "groups.csv"
    groups.write_text("country\nFR\nDE\nIT\n")
    rc, out, err = run_cli(BASE + ["--input", files["csv"], "--groups", str(groups), "--json", "--seed", "1"], capsys)
    assert rc == 0 and SECRET not in out
    rows = json.loads(out)["rows"]
    assert [r["country"] for r in rows] == ["FR", "DE", "IT"]  # the public list, in its order
    assert set(rows[0]) == {"country", "sum_amount", "sum_amount_std", "sum_amount_ci_low", "sum_amount_ci_high"}
    # the interval is the released value ± the same half-width for every group
    half = {round(r["sum_amount_ci_high"] - r["sum_amount"], 6) for r in rows}
    assert len(half) == 1 and half.pop() > 0
    # PB-DP on the same public groups: the listed keys, the unlisted single-row key dropped
    rc, out, err = run_cli(
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
        rc, out, err = run_cli(args, capsys)
        assert rc == 0 and "--seed" not in err
        runs.append([r["sum_amount"] for r in json.loads(out)["rows"]])
    assert runs[0] != runs[1]
    rc, out, err = run_cli(args + ["--seed", "7"], capsys)
    assert rc == 0 and "reproducible" in err and "Never release the same data twice" in err
    assert run_cli(args + ["--seed", "7"], capsys)[1] == out
