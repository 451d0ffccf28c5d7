"""``dpjax release --per-record-budget COLUMN``: per-record DP releases (:mod:`dpjax.prdp`), one per group.

Each beside the naive release at the global least budget, with the per-level ledger.
"""

from __future__ import annotations

import csv
import io

import numpy as np

from dpjax.cli._common import emit
from dpjax.cli.io import check_output, read_table
from dpjax.cli._release_common import (
    _DEMO,
    _PRDP,
    _allow,
    _key,
    _print_rows,
    _report,
    _true_shown,
    _write,
    public_groups,
    released,
)

__all__ = ["release_per_record"]


def _prdp_table(args):
    """(public group names, each kept row's group index, values, budgets) for a per-record-budget release
    (rows of groups not listed dropped, :func:`dpjax.cli._release_common.public_groups`); the embedded table
    has ``privacy_budget``."""
    from dpjax.data import AGE_GROUPS, BUDGET_MENU, REGIONS, load_steps_with_budgets

    if args.input is not None:
        names, inverse, values, budgets = read_table(
            args.input, args.value_column, args.group_by, budget_column=args.per_record_budget
        )
    else:
        rows = list(csv.DictReader(io.StringIO(load_steps_with_budgets())))
        for name, flag in (
            (args.value_column, "--value-column"),
            (args.per_record_budget, "--per-record-budget"),
            (args.group_by, "--group-by"),
        ):
            if name is not None and name not in rows[0]:
                raise ValueError(f"{flag}: {name!r} is not a column of the embedded dataset (columns: {list(rows[0])})")
        if args.eps_min is None:
            args.eps_min = min(BUDGET_MENU.values())
        if args.eps_max is None:
            args.eps_max = max(BUDGET_MENU.values())
        names, inverse = np.unique([r[args.group_by] if args.group_by else "all" for r in rows], return_inverse=True)
        values = np.asarray([float(r[args.value_column]) for r in rows])
        budgets = np.asarray([float(r[args.per_record_budget]) for r in rows])
    names, inverse = public_groups(args, names, inverse, {"age_group": AGE_GROUPS, "region": REGIONS})
    kept = inverse >= 0
    return names, inverse[kept], values[kept], budgets[kept]


def _size_buckets(sizes):
    """Groups bucketed by their size rounded up to a power of two: ``[(width, group indices), ...]``.
    Each bucket is padded to its width only, so the padded rows are fewer than twice the table's
    (not groups × largest group), and there is one compiled program per width."""
    widths = 2 ** np.ceil(np.log2(np.maximum(sizes, 1))).astype(np.int64)
    return [(int(w), np.flatnonzero(widths == w)) for w in np.unique(widths)]


def release_per_record(args) -> int:
    """``dpjax release --per-record-budget COLUMN``: per-record DP releases (dpjax.prdp), one per group.

    Each row r may be charged at most its own budget E(r) (the column). The budget range
    ``[--eps-min, --eps-max]`` must be public and data-independent (for the embedded dataset: the
    app's menu of settings). Groups of similar sizes are padded to one size and released in one
    vmapped call (memory proportional to the rows); groups are disjoint, so a row is charged only
    by its own group's release (parallel composition). The naive release at the global minimum
    ε̌ is shown alongside.

    Args:
      args: the parsed flags.

    Returns:
      The exit status (0).

    Raises:
      ValueError: a flag that does not apply to a per-record release, ``--statistic mean``, ``--eps-min`` or
        ``--eps-max`` missing, ``--beta`` outside (0, 1), a budget below ``--eps-min`` or not finite, or any
        refusal of the input, the output or the release (naming the flag).

    References:
      Chen, Sun, Xu, Dong, "A General Framework for Per-record Differential Privacy", SIGMOD 2025.
    """
    import jax

    import accounting
    from dpjax import prdp

    _allow(
        args,
        _PRDP,
        "to a per-record-budget release (--per-record-budget: each row's own budget, no --mechanism to choose)",
    )
    if args.statistic == "mean":
        raise ValueError("--per-record-budget: releases sums or counts, not means")
    args.statistic = args.statistic or "sum"
    check_output(args.output, [args.input])
    names, inverse, values, budgets = _prdp_table(args)
    if args.eps_min is None or args.eps_max is None:
        raise ValueError(
            "--eps-min/--eps-max: give the public budget range of the domain (never the data's own "
            "least budget, which is private)"
        )
    if not (0.0 < args.beta < 1.0):
        raise ValueError(f"--beta must lie in (0, 1), got {args.beta}")
    if not np.isfinite(budgets).all() or (budgets.size and budgets.min() < args.eps_min):
        raise ValueError(f"--per-record-budget: every budget must be a finite number >= --eps-min = {args.eps_min:g}")
    ledger = accounting.PrDPLedger(eps_min=args.eps_min, eps_max=args.eps_max)
    share = ledger.record(1.0, label=f"{args.statistic} by {args.group_by or '(all)'}")
    order = np.argsort(inverse, kind="stable")
    sizes = np.bincount(inverse, minlength=len(names))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    vals_sorted = np.clip(values[order], 0.0, args.clip)
    buds_sorted = np.asarray(share.budgets(budgets[order]))
    kw = dict(eps_min=share.eps_min, eps_max=share.eps_max)

    def both(key, v, b, m):
        k_prdp, k_naive = jax.random.split(key)
        if args.statistic == "count":
            return (prdp.count(k_prdp, b, beta=args.beta, mask=m, **kw), prdp.naive_count(k_naive, b, mask=m, **kw))
        return (
            prdp.sum(k_prdp, v, b, beta=args.beta, upper=args.clip, method=args.prdp_method, mask=m, **kw),
            prdp.naive_sum(k_naive, v, b, beta=args.beta, upper=args.clip, mask=m, **kw),
        )

    keys = jax.random.split(_key(args.seed), len(names))
    run = jax.jit(jax.vmap(both))
    parts = []
    for width, idx in _size_buckets(sizes):
        col = np.arange(width)
        mask = col[None, :] < sizes[idx, None]
        rows = np.where(mask, starts[idx, None] + col[None, :], 0)
        vals = np.where(mask, vals_sorted[rows], 0.0)
        buds = np.where(mask, buds_sorted[rows], float(args.eps_max))
        with jax.enable_x64(True):
            parts.append((idx, jax.tree.map(np.asarray, run(keys[idx], vals, buds, mask))))
    where = np.concatenate([idx for idx, _ in parts])
    back = np.argsort(where)
    res, naive = jax.tree.map(lambda *x: np.concatenate(x)[back], *[p for _, p in parts])
    ledger.verify(res)
    true = (
        sizes
        if args.statistic == "count"
        else np.bincount(inverse, weights=np.clip(values, 0.0, args.clip), minlength=len(names))
    ).astype(float)
    estimates, naive_released = np.asarray(res.estimate), np.asarray(naive.estimate)
    released(args, args.input is not None)

    _write(
        args,
        ["group", f"prdp_{args.statistic}", "epsilon_tau", "level", f"naive_{args.statistic}"],
        list(zip(names, estimates, np.asarray(res.epsilon_tau), np.asarray(res.level), naive_released)),
        [(f"true_{args.statistic}", true)],
    )
    spent = np.asarray(res.level_epsilon)[:, : ledger.num_levels].max(axis=0)
    payload = {
        "statistic": args.statistic,
        "eps_min": args.eps_min,
        "eps_max": args.eps_max,
        "beta": args.beta,
        "groups": [
            {"group": str(n), "prdp": float(r), "epsilon_tau": float(t), "level": int(lv), "naive": float(nv)}
            for n, r, t, lv, nv in zip(
                names, estimates, np.asarray(res.epsilon_tau), np.asarray(res.level), naive_released
            )
        ],
        "ledger": [
            {"level": i + 1, "floor": float(f), "charged": float(ledger.spent[i]), "spent": float(spent[i])}
            for i, f in enumerate(ledger.floors)
        ],
    }
    with _report(args):
        if args.json:
            return emit(args, payload, ()) or 0
        source = args.input or f"{_DEMO}, with their budgets"
        method = (
            "Algorithm 1" if args.statistic == "count" else f"{args.prdp_method}, values clipped to [0, {args.clip:g}]"
        )
        print(
            f"dpjax release — per-record DP {args.statistic} of {args.value_column!r} by "
            f"{args.group_by or '(all)'} ({source})"
        )
        print(
            f"budgets: column {args.per_record_budget!r}, public range [{args.eps_min:g}, {args.eps_max:g}], "
            f"beta = {args.beta:g}; PrDP: {method}; naive: the global minimum {args.eps_min:g} for every row"
        )
        _print_rows(
            names,
            true if _true_shown(args) else None,
            [estimates, naive_released],
            ["PrDP", "naive"],
            args.show,
            args.output,
        )
        lev = np.asarray(res.level)
        print(
            "selected level per group (eps_tau = its floor): "
            + ", ".join(
                f"{n}: {int(lv)} ({float(t):g})"
                for n, lv, t in zip(names[: args.show], lev, np.asarray(res.epsilon_tau))
            )
        )
        print(
            "privacy ledger (pure epsilon per privacy level; a row of level i has budget >= its floor; groups "
            "are disjoint, so each row pays only its group's release):"
        )
        print(f"{'level':>6}{'budgets':>22}{'floor':>10}{'charged':>10}{'spent (max over groups)':>26}")
        for i, floor in enumerate(ledger.floors):
            top = min(2 * floor, args.eps_max)
            rng = f"[{floor:g}, {top:g}]" if i == 0 else f"({floor:g}, {top:g}]"
            print(f"{i + 1:>6}{rng:>22}{floor:>10.4g}{ledger.spent[i]:>10.4g}{spent[i]:>26.4g}")
        print(f"remaining on every level: {ledger.remaining.max():g} (this release used each row's whole budget)")
    return 0
