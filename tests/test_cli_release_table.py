"""``dpjax release`` through the table layer: privacy unit, bounds, several statistics, public
groups, Parquet input, refused flag combinations (in-process, small data)."""

import csv

import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from dpjax.cli import main


def _data(tmp_path):
    rows = [(f"u{i % 30}", "ab"[i % 2], float(i % 7)) for i in range(300)]
    path = tmp_path / "t.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["user", "g", "v"])
        w.writerows(rows)
    return path


BASE = [
    "release",
    "--seed",
    "0",
    "--group-by",
    "g",
    "--value-column",
    "v",
    "--window",
    "0",
    "10",
    "--mechanism",
    "gaussian",
]


def test_several_statistics_with_a_unit_and_public_groups(tmp_path):
    path, out, groups = _data(tmp_path), tmp_path / "out.csv", tmp_path / "groups.csv"
    groups.write_text("g\na\nb\nc\n")
    assert (
        main(
            [
                *BASE,
                "--input",
                str(path),
                "--privacy-unit",
                "user",
                "--max-groups-per-unit",
                "1",
                "--max-rows-per-group",
                "5",
                "--statistic",
                "count,sum,mean",
                "--groups",
                str(groups),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    got = list(csv.reader(open(out)))
    accuracy = ["_std", "_ci_low", "_ci_high"]
    assert got[0] == ["g"] + [f"{s}{a}" for s in ("count", "sum_v", "mean_v") for a in [""] + accuracy]
    assert [r[0] for r in got[1:]] == ["a", "b", "c"]  # public groups, the absent one too


def test_no_unit_says_each_row_is_a_person_and_reads_parquet(tmp_path, capsys):
    path = _data(tmp_path)
    pq.write_table(pcsv.read_csv(path), tmp_path / "t.parquet")
    assert main([*BASE, "--input", str(tmp_path / "t.parquet"), "--statistic", "count"]) == 0
    captured = capsys.readouterr()
    assert "each row is taken as a different person" in captured.err
    assert "epsilon" in captured.out


def test_refused_combinations_name_the_flag(tmp_path, capsys):
    path = _data(tmp_path)
    assert main([*BASE, "--input", str(path), "--privacy-unit", "user", "--scale", "3"]) == 2
    assert "--scale" in capsys.readouterr().err
    assert main([*BASE, "--input", str(path), "--max-rows-per-group", "3"]) == 2
    assert "--max-rows-per-group" in capsys.readouterr().err
    assert main([*BASE, "--input", str(path), "--statistic", "median"]) == 2
    assert "--statistic" in capsys.readouterr().err


# ----------------------------------------------------------------------------------
# the default run, --json, standard input, true values, errors naming the flag
# ----------------------------------------------------------------------------------
def test_shipped_daily_log_matches_its_recipe_and_has_several_rows_per_user():
    from importlib import resources

    from dpjax.data import DAILY_STEPS_CSV, make_daily_steps_table

    text = resources.files("dpjax.data").joinpath(DAILY_STEPS_CSV).read_text()
    assert text == make_daily_steps_table()
    users = [line.split(",")[0] for line in text.splitlines()[1:]]
    assert len(set(users)) == 1000 and len(users) > 3 * len(set(users))


def test_default_run_uses_the_user_as_unit_and_shows_true_values_on_screen_only(tmp_path, capsys):
    out = tmp_path / "out.csv"
    assert main(["release", "--seed", "0", "--output", str(out)]) == 0
    captured = capsys.readouterr()
    assert "privacy unit 'user_id'" in captured.out and "7 row(s) per group" in captured.out
    assert "true sum_steps" in captured.out and "rel. error" in captured.out
    assert "different person" not in captured.err
    rows = list(csv.reader(open(out)))
    released = ["sum_steps", "sum_steps_std", "sum_steps_ci_low", "sum_steps_ci_high"]
    assert rows[0] == ["age_group"] + released  # the file: released values (and their accuracy) only
    assert [r[0] for r in rows[1:]] == ["18-29", "30-44", "45-59", "60-74", "75+"]
    assert main(["release", "--seed", "0", "--output", str(out), "--include-true-values"]) == 0
    assert "warning: --include-true-values" in capsys.readouterr().err
    rows = list(csv.reader(open(out)))
    assert rows[0] == ["age_group", "true_sum_steps"] + released
    from importlib import resources

    import pyarrow.compute as pc

    daily = pcsv.read_csv(str(resources.files("dpjax.data").joinpath("steps_daily.csv")))
    young = pc.sum(daily.filter(pc.equal(daily["age_group"], "18-29"))["steps"]).as_py()
    assert float(rows[1][1]) == young  # the true value is every row's, unbounded


def test_json_gives_one_object_with_the_release_and_its_privacy(capsys):
    import json

    assert (
        main(
            [
                "release",
                "--seed",
                "0",
                "--json",
                "--statistic",
                "count,count_units,sum",
                "--window",
                "0",
                "20000",
                "--mechanism",
                "gaussian",
            ]
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    assert payload["privacy_unit"] == "user_id" and payload["row_level"] is False
    assert payload["statistics"] == ["count", "count_units", "sum_steps"]
    names = ("count", "count_units", "sum_steps")
    assert len(payload["rows"]) == 5 and set(payload["rows"][0]) == {"age_group"} | {
        n + a for n in names for a in ("", "_std", "_ci_low", "_ci_high")
    }
    assert set(payload["noise_std"]) == set(names)
    assert 0.999 <= payload["epsilon"] <= 1.0 and payload["delta"] <= 1e-6
    true = {r["age_group"]: r for r in payload["true"]}
    assert sum(r["count_units"] for r in true.values()) == 1000  # each user in one age group


def test_standard_input_releases_what_the_file_releases(tmp_path, capsys, monkeypatch):
    import io
    import sys

    path = _data(tmp_path)
    args = [*BASE, "--privacy-unit", "user", "--max-rows-per-group", "3", "--statistic", "count,sum"]
    assert main([*args, "--input", str(path), "--output", str(tmp_path / "a.csv")]) == 0
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    assert main([*args, "--input", "-", "--output", str(tmp_path / "b.csv")]) == 0
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert "standard input" in capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    assert main([*args, "--input", "-", "--include-true-values", "--output", str(tmp_path / "c.csv")]) == 2
    assert "--include-true-values" in capsys.readouterr().err


def test_a_user_file_shows_released_values_only_unless_asked(tmp_path, capsys):
    path = _data(tmp_path)
    args = [*BASE, "--input", str(path), "--privacy-unit", "user", "--statistic", "count"]
    assert main(args) == 0
    assert "true count" not in capsys.readouterr().out
    assert main([*args, "--include-true-values"]) == 0
    assert "true count" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra,flag",
    [
        (["--group-by", "nope"], "--group-by"),
        (["--privacy-unit", "nope"], "--privacy-unit"),
        (["--value-column", "nope"], "--value-column"),
        (["--value-column", "user"], "--value-column"),
        (["--max-groups-per-unit", "0"], "--max-groups-per-unit"),
        (["--epsilon", "-1"], "--epsilon"),
        (["--input", "/no/such.csv"], "--input"),
        (["--group-by", "age_group"], "--group-by"),
    ],
)
def test_table_errors_are_one_line_naming_the_flag(tmp_path, capsys, extra, flag):
    path = _data(tmp_path)
    args = [
        "release",
        "--seed",
        "0",
        "--group-by",
        "g",
        "--value-column",
        "v",
        "--window",
        "0",
        "10",
        "--input",
        str(path),
        "--privacy-unit",
        "user",
    ]
    for i in range(0, len(extra), 2):  # a flag given in extra replaces the base one
        if extra[i] in args:
            j = args.index(extra[i])
            del args[j : j + 2]
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dpjax: error: {flag}") and err.count("\n") == 1, err
    if "--group-by" in extra and "age_group" in extra:  # the default names the embedded dataset's column
        assert "defaults to the embedded dataset's age_group" in err


def test_true_values_are_every_rows_statistics_per_group():
    import numpy as np
    import pyarrow as pa

    from dpjax import table
    from dpjax.cli.release import true_values

    rng = np.random.default_rng(0)
    d = {"g": rng.integers(0, 3, 500), "u": rng.integers(0, 40, 500), "x": rng.normal(5, 2, 500)}
    stats = [
        table.count(),
        table.count_units(),
        table.sum("x", 0, 1),
        table.mean("x", 0, 1),
        table.variance("x", 0, 1),
        table.quantile("x", 0.3, 0, 1),
    ]
    keys = pa.table({"g": [2, 0, 7]})  # 7: a public group without rows
    got = true_values(d, ["g"], stats, "u", keys)
    for i, g in enumerate([2, 0]):
        x = d["x"][d["g"] == g]
        assert got["count"][i] == len(x) and got["count_units"][i] == len(set(d["u"][d["g"] == g]))
        np.testing.assert_allclose(
            [got["sum_x"][i], got["mean_x"][i], got["variance_x"][i], got["quantile_0.3_x"][i]],
            [x.sum(), x.mean(), x.var(), np.quantile(x, 0.3)],
            rtol=1e-12,
        )
    assert got["count"][2] == 0 and got["sum_x"][2] == 0 and np.isnan(got["mean_x"][2])


def test_component_labels_read_as_the_statistic():
    from dpjax.table import statistics as st

    labels = {
        c.name: st.component_label(c.name)
        for s in (st.variance("steps", -2.5, 20000), st.quantile("a:b)", 0.5, 0, 8))
        for c in s.components(3, False)
    }
    assert labels == {
        "rows": "rows",
        "centred:('steps', -2.5, 20000.0):False": "centred sum of steps in [-2.5, 20000]",
        "squares:('steps', -2.5, 20000.0):False": "centred sum of squares of steps in [-2.5, 20000]",
        "rank:('a:b)', 0.0, 8.0):10:0.5": "exponential-mechanism quantile of a:b) in [0, 8] (q = 0.5, 1025 candidates)",
    }
    assert st.component_label("selection") == "selection"


def test_window_bounds_are_exact_and_names_with_commas_are_quoted(tmp_path, capsys):
    """Issue 28: --window 0 1234567 is [0, 1234567] (it was printed to 6 digits and read back as 1234570);
    a column whose name holds a comma is named by CSV quoting in --group-by and --statistic; an open
    quote is refused naming the flag."""
    import json

    path = tmp_path / "c.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["user", "g,h", "v,w"])
        w.writerows((f"u{i % 40}", "ab"[i % 2], float(i % 7)) for i in range(200))
    groups = tmp_path / "groups.csv"
    groups.write_text('"g,h"\na\nb\n')
    args = [
        "release",
        "--seed",
        "0",
        "--json",
        "--input",
        str(path),
        "--privacy-unit",
        "user",
        "--groups",
        str(groups),
        "--group-by",
        '"g,h"',
        "--value-column",
        "v,w",
        "--mechanism",
        "gaussian",
    ]
    assert main([*args, "--window", "0", "1234567", "--statistic", 'sum,"mean:v,w:0:10",count']) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["by"] == ["g,h"] and payload["statistics"] == ["sum_v,w", "mean_v,w", "count"]
    assert "centred sum of v,w in [0, 1234567]" in payload["scales"]  # the bounds as given, not rounded
    assert [r["g,h"] for r in payload["rows"]] == ["a", "b"]
    assert main([*args, "--window", "0", "1", "--statistic", 'mean:"v,w:0:10']) == 2
    assert capsys.readouterr().err.startswith("dpjax: error: --statistic: a quote is left open")
    assert main([*args, "--window", "5", "5"]) == 2
    assert capsys.readouterr().err.startswith("dpjax: error: --window")
