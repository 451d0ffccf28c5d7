"""``dpjax release --per-record-budget COLUMN`` (dpjax.cli.release_prdp) and the embedded budget column; its padding
is in proportion to the rows."""

from __future__ import annotations

import csv
import io

import jax
import numpy as np
import pytest

from dpjax.cli import main
from dpjax.data import BUDGET_MENU, load_budgets, load_steps, load_steps_with_budgets, make_budget_table


def test_shipped_budgets_match_their_recipe_and_join_the_steps():
    assert load_budgets() == make_budget_table()
    rows = list(csv.DictReader(io.StringIO(load_steps_with_budgets())))
    steps = list(csv.DictReader(io.StringIO(load_steps())))
    assert len(rows) == len(steps) == 4000
    assert all(r["steps"] == s["steps"] and r["user_id"] == s["user_id"] for r, s in zip(rows, steps))
    chosen = {float(r["privacy_budget"]) for r in rows}
    assert chosen == set(BUDGET_MENU.values())


@pytest.mark.slow
def test_per_record_budget_release_prints_values_and_ledger(tmp_path, capsys):
    out = tmp_path / "prdp.csv"
    assert (
        main(
            [
                "release",
                "--per-record-budget",
                "privacy_budget",
                "--seed",
                "3",
                "--output",
                str(out),
                "--include-true-values",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "per-record DP sum of 'steps' by age_group" in text
    assert "privacy ledger" in text and "remaining on every level: 0" in text
    ledger = [line.split() for line in text.splitlines() if line.strip()[:1].isdigit() and "]" in line]
    assert len(ledger) == 8  # [0.02, 4]: L = 8 levels
    for row in ledger:
        floor, charged, spent = map(float, row[-3:])
        assert spent <= charged == floor
    with open(out) as fh:
        table = list(csv.DictReader(fh))
    assert [r["group"] for r in table] == ["18-29", "30-44", "45-59", "60-74", "75+"]
    true = np.array([float(r["true_sum"]) for r in table])
    prdp = np.array([float(r["prdp_sum"]) for r in table])
    naive = np.array([float(r["naive_sum"]) for r in table])
    assert np.median(np.abs(prdp - true) / true) < 0.1  # the standard users' budget, not the strict 0.02
    assert np.median(np.abs(naive - true) / true) > 0.9  # the global minimum 0.02 for everyone
    assert {float(r["epsilon_tau"]) for r in table} <= {0.02 * 2**k for k in range(8)}


def test_per_record_budget_errors(tmp_path, capsys):
    assert main(["release", "--per-record-budget", "nope"]) == 2
    assert "--per-record-budget" in capsys.readouterr().err
    data = tmp_path / "d.csv"
    data.write_text("g,v,b\na,1,0.5\nb,2,1.0\n")
    base = ["release", "--input", str(data), "--value-column", "v", "--group-by", "g", "--per-record-budget", "b"]
    assert main(base + ["--eps-min", "0.5", "--eps-max", "2"]) == 2
    assert "--groups" in capsys.readouterr().err  # no private selection: the keys must be public
    groups = tmp_path / "groups.csv"
    groups.write_text("g\na\nb\n")
    base += ["--groups", str(groups)]
    assert main(base) == 2
    assert "--eps-min" in capsys.readouterr().err  # the range must be given: never taken from the data
    assert main(base + ["--eps-min", "0.75", "--eps-max", "2"]) == 2
    assert "--eps-min" in capsys.readouterr().err  # a budget below the declared least budget
    assert main(base + ["--eps-min", "0.5", "--eps-max", "2", "--beta", "1.5"]) == 2
    assert "--beta" in capsys.readouterr().err


@pytest.mark.slow
def test_per_record_release_pads_in_proportion_to_the_rows(tmp_path, monkeypatch, capsys):
    """30 one-row groups and one of 1000 rows: padded to (31, 1000) before, 30 + 1024 entries now."""
    rows = [f"s{i},1,1.0" for i in range(30)] + ["big,1,1.0"] * 1000
    path = tmp_path / "b.csv"
    path.write_text("g,v,b\n" + "\n".join(rows) + "\n")
    padded, vmap = [], jax.vmap

    def recording_vmap(fn, *a, **k):
        batched = vmap(fn, *a, **k)

        def record(*args):  # the padded (groups, width) values of one call
            padded.append(int(np.prod(np.shape(args[1]))))
            return batched(*args)

        return record

    monkeypatch.setattr(jax, "vmap", recording_vmap)
    groups = tmp_path / "groups.csv"
    groups.write_text("g\n" + "".join(f"s{i}\n" for i in range(30)) + "big\n")
    assert (
        main(
            [
                "release",
                "--input",
                str(path),
                "--group-by",
                "g",
                "--value-column",
                "v",
                "--per-record-budget",
                "b",
                "--eps-min",
                "1",
                "--eps-max",
                "2",
                "--statistic",
                "count",
                "--seed",
                "0",
                "--show",
                "0",
                "--groups",
                str(groups),
            ]
        )
        == 0
    )
    assert 0 < sum(padded) <= 2 * len(rows)
