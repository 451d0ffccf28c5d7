"""The embedded default datasets: a week of daily step counts from a health app.

PB-DP's motivating example (Jiang et al., S&P 2025, §1) is a health app that
publishes aggregate activity statistics. ``steps.csv`` is a synthetic,
deterministic stand-in: one row per user with the user's age group, region and
average daily step count over one week. ``steps_daily.csv`` is the app's log
for the first 1000 of those users: one row per user and logged day (a user logs
1 to 7 days of the week), so that a person has several rows and the privacy
unit matters — the default ``dpjax release`` runs on it with ``user_id`` as the
unit. Each was produced by its recipe (:func:`make_steps_table`, seed 2025;
:func:`make_daily_steps_table`, seed 2026) and is checked against it by the
tests, so the shipped files and their recipes cannot drift apart. (numpy's
generator, seeded explicitly, only synthesises these fixed tables; no release
noise comes from it.) :func:`path` gives a file's location, to read it as any
other table: ``dpjax.table.release(key, dpjax.data.path("steps_daily.csv"), ...)``.
"""

from __future__ import annotations

import csv
import io
from importlib import resources

import numpy as np

__all__ = [
    "AGE_GROUPS",
    "REGIONS",
    "path",
    "make_steps_table",
    "load_steps",
    "STEPS_CSV",
    "DAILY_STEPS_CSV",
    "make_daily_steps_table",
    "BUDGET_MENU",
    "BUDGETS_CSV",
    "make_budget_table",
    "load_budgets",
    "load_steps_with_budgets",
]

AGE_GROUPS = ("18-29", "30-44", "45-59", "60-74", "75+")
REGIONS = ("north", "south", "east", "west")
STEPS_CSV = "steps.csv"
_MEAN_STEPS = (8600.0, 7900.0, 7100.0, 6000.0, 4300.0)


def path(name: str) -> str:
    """The file system path of an embedded dataset, to pass where a CSV file is read.

    Args:
      name: ``"steps.csv"`` (one row per user), ``"steps_daily.csv"`` (one row per user and logged
        day; several rows per user) or ``"budgets.csv"`` (each user's privacy budget).

    Returns:
      The path of the shipped file, as a string.

    Raises:
      ValueError: ``name`` is not one of the embedded datasets.
    """
    names = (STEPS_CSV, DAILY_STEPS_CSV, BUDGETS_CSV)
    if name not in names:
        raise ValueError(f"name must be one of {', '.join(names)} (the embedded datasets), got {name!r}")
    return str(resources.files(__package__).joinpath(name))


def make_steps_table(num_users: int = 4000, seed: int = 2025) -> str:
    """CSV text of the synthetic one-row-per-user steps table (deterministic for a given seed).

    Args:
      num_users: the number of users (rows).
      seed: the generator's seed.

    Returns:
      The CSV text, header ``user_id,age_group,region,steps``.
    """
    rng = np.random.default_rng(seed)
    age = rng.choice(len(AGE_GROUPS), size=num_users, p=[0.24, 0.28, 0.24, 0.16, 0.08])
    region = rng.choice(len(REGIONS), size=num_users)
    mean = np.asarray(_MEAN_STEPS)[age] * (1.0 + 0.04 * (region - 1.5))
    # log-normal daily steps (a heavy right tail, as in real activity data), some inactive users
    steps = rng.lognormal(np.log(mean) - 0.5 * 0.45**2, 0.45)
    steps = np.where(rng.random(num_users) < 0.03, rng.integers(0, 900, num_users), steps)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["user_id", "age_group", "region", "steps"])
    for i in range(num_users):
        w.writerow([f"u{i:05d}", AGE_GROUPS[age[i]], REGIONS[region[i]], int(round(steps[i]))])
    return out.getvalue()


def load_steps() -> str:
    """The shipped CSV text."""
    return resources.files(__package__).joinpath(STEPS_CSV).read_text()


DAILY_STEPS_CSV = "steps_daily.csv"
DAYS = 7


def make_daily_steps_table(num_users: int = 1000, seed: int = 2026) -> str:
    """CSV text ``user_id,day,age_group,region,steps``: a week of daily steps (deterministic for a given seed).

    The first ``num_users`` users of :func:`make_steps_table`, each logging a random non-empty subset of the 7
    days of the week (each day with probability 0.75), a day's steps log-normal around the user's weekly
    average.

    Args:
      num_users: the number of users.
      seed: the generator's seed.

    Returns:
      The CSV text.
    """
    users = list(csv.reader(io.StringIO(make_steps_table())))[1 : num_users + 1]
    rng = np.random.default_rng(seed)
    logged = rng.random((num_users, DAYS)) < 0.75
    logged[np.arange(num_users), rng.integers(0, DAYS, num_users)] = True
    average = np.maximum(np.asarray([float(u[3]) for u in users]), 300.0)
    daily = rng.lognormal(np.log(average)[:, None] - 0.5 * 0.35**2, 0.35, (num_users, DAYS))
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["user_id", "day", "age_group", "region", "steps"])
    for i, (user_id, age_group, region, _) in enumerate(users):
        for day in np.flatnonzero(logged[i]):
            w.writerow([user_id, int(day) + 1, age_group, region, int(round(daily[i, day]))])
    return out.getvalue()


# Per-record privacy budgets (dpjax.prdp): each user picked a setting from the app's public menu
# (strict, standard, relaxed: ε = 0.02, 1, 4). The menu is public and data-independent, so the
# budget range [ε̌, ε̂] = [0.02, 4] is too; which setting a user chose stays private (PrDP: Chen, Sun, Xu, Dong,
# SIGMOD 2025, §3.3).
BUDGET_MENU = {"strict": 0.02, "standard": 1.0, "relaxed": 4.0}
BUDGETS_CSV = "budgets.csv"


def make_budget_table(num_users: int = 4000, seed: int = 2026) -> str:
    """CSV text ``user_id,privacy_budget``: 2 % strict, 73 % standard, 25 % relaxed (deterministic).

    Args:
      num_users: the number of users (rows).
      seed: the generator's seed.

    Returns:
      The CSV text.
    """
    rng = np.random.default_rng(seed)
    choice = rng.choice(len(BUDGET_MENU), size=num_users, p=[0.02, 0.73, 0.25])
    eps = np.asarray(list(BUDGET_MENU.values()))[choice]
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["user_id", "privacy_budget"])
    for i in range(num_users):
        w.writerow([f"u{i:05d}", f"{eps[i]:g}"])
    return out.getvalue()


def load_budgets() -> str:
    """The shipped budget CSV text."""
    return resources.files(__package__).joinpath(BUDGETS_CSV).read_text()


def load_steps_with_budgets() -> str:
    """The step table with each user's ``privacy_budget`` appended as a last column (joined on user_id)."""
    budgets = dict(csv.reader(io.StringIO(load_budgets())))
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    for row in csv.reader(io.StringIO(load_steps())):
        w.writerow(row + [budgets[row[0]]])
    return out.getvalue()
