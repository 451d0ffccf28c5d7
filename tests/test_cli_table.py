"""``dpjax release`` through the table layer: privacy unit, bounds, several statistics, public
groups, Parquet input, refused flag combinations (in-process, small data)."""

import csv

import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from dpjax.cli import main


def _data(tmp_path):
    rows = [(f"u{i % 30}", "ab"[i % 2], float(i % 7)) for i in range(300)]
    path = tmp_path / "t.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["user", "g", "v"])
        w.writerows(rows)
    return path


BASE = ["release", "--seed", "0", "--group-by", "g", "--value-column", "v", "--window", "0", "10",
        "--mechanism", "gaussian"]


def test_several_statistics_with_a_unit_and_public_groups(tmp_path):
    path, out, groups = _data(tmp_path), tmp_path / "out.csv", tmp_path / "groups.csv"
    groups.write_text("g\na\nb\nc\n")
    assert main([*BASE, "--input", str(path), "--privacy-unit", "user", "--max-groups-per-unit", "1",
                 "--max-rows-per-group", "5", "--statistic", "count,sum,mean", "--groups", str(groups),
                 "--output", str(out)]) == 0
    got = list(csv.reader(open(out)))
    assert got[0] == ["g", "count", "sum_v", "mean_v"]
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
