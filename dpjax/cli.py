"""``dpjax`` command line: ``dpjax release`` aggregates a table by group and releases it with noise.

With no arguments it releases the embedded default dataset (weekly-average
daily step counts of 4000 synthetic health-app users, :mod:`dpjax.data`): the
sum of steps per age group, each user's contribution clipped to ``--clip``.
Groups are disjoint, so the whole table costs the privacy of one release
(parallel composition); the privacy spent is computed exactly by
:mod:`accounting` from the mechanism's output law.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys

import numpy as np

__all__ = ["main", "aggregate", "build_mechanism"]

MECHANISMS = ("laplace", "gaussian", "discrete-laplace", "discrete-gaussian")
_PROGRESS_MIN_BYTES = 8 << 20


def _progress(done: int, total: int, label: str) -> None:
    width = 30
    frac = min(done / total, 1.0) if total else 1.0
    bar = "#" * int(frac * width)
    sys.stderr.write(f"\r{label} [{bar:<{width}}] {frac:6.1%}")
    if frac >= 1.0:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _read_table(path: str | None, value_column: str, group_by: str | None):
    """Read (groups, values) columns from a CSV file or the embedded dataset."""
    if path is None:
        from dpjax.data import load_steps

        handle = io.StringIO(load_steps())
        total = 0
    else:
        if not os.path.exists(path):
            raise ValueError(f"--input: no such file {path!r}")
        total = os.path.getsize(path)
        handle = open(path, newline="")
    show = total >= _PROGRESS_MIN_BYTES
    consumed = [0]

    def lines():
        for line in handle:
            consumed[0] += len(line)
            yield line

    with handle:
        reader = csv.reader(lines())
        header = next(reader, None)
        if header is None:
            raise ValueError("--input: the file is empty")
        cols = {name: i for i, name in enumerate(header)}
        if value_column not in cols:
            raise ValueError(f"--value-column: {value_column!r} is not a column of the input (columns: {header})")
        if group_by is not None and group_by not in cols:
            raise ValueError(f"--group-by: {group_by!r} is not a column of the input (columns: {header})")
        vi, gi = cols[value_column], (cols[group_by] if group_by else None)
        values, groups = [], []
        for n, row in enumerate(reader):
            values.append(row[vi])
            groups.append(row[gi] if gi is not None else "all")
            if show and n % 200_000 == 0:
                _progress(consumed[0], total, "reading")
        if show:
            _progress(total, total, "reading")
    if not values:
        raise ValueError("--input: the table has no rows")
    try:
        arr = np.asarray(values, dtype=float)
    except ValueError as exc:
        raise ValueError(f"--value-column: column {value_column!r} is not numeric ({exc})") from None
    if not np.isfinite(arr).all():
        raise ValueError(f"--value-column: column {value_column!r} contains NaN or infinite values")
    return np.asarray(groups), arr


def aggregate(groups, values, statistic: str, clip: float):
    """Per-group sums of clipped values (or counts) and the query's L1 sensitivity.

    Values are clipped to ``[-clip, clip]`` so that adding or removing one row
    changes one group's sum by at most ``clip``; a count changes by at most 1.
    """
    names, inverse = np.unique(groups, return_inverse=True)
    if statistic == "count":
        return names, np.bincount(inverse, minlength=len(names)).astype(float), 1.0
    clipped = np.clip(values, -clip, clip)
    return names, np.bincount(inverse, weights=clipped, minlength=len(names)), float(clip)


def build_mechanism(name: str, sensitivity: float, epsilon: float, delta: float, scale=None, sigma=None):
    """The mechanism a CLI user asked for, calibrated to (ε, δ) unless a scale/σ is given."""
    import dpjax

    if name == "laplace":
        return dpjax.Laplace(scale=scale) if scale else dpjax.Laplace.from_epsilon(epsilon, sensitivity)
    if name == "discrete-laplace":
        return dpjax.DiscreteLaplace(scale=scale) if scale else dpjax.DiscreteLaplace.from_epsilon(epsilon, sensitivity)
    if name == "gaussian":
        return dpjax.Gaussian(sigma=sigma) if sigma else dpjax.Gaussian.from_epsilon_delta(epsilon, delta, sensitivity)
    if name == "discrete-gaussian":
        from dpjax.kernels import analytic_gaussian_sigma

        return dpjax.DiscreteGaussian(sigma=sigma or analytic_gaussian_sigma(epsilon, delta, sensitivity))
    raise ValueError(f"--mechanism must be one of {MECHANISMS}, got {name!r}")


def _describe(mech) -> str:
    import jax

    params = ", ".join(
        f"{k}={float(np.asarray(v)):.6g}" for k, v in vars(mech).items() if isinstance(v, (float, jax.Array, np.ndarray))
    )
    return f"{type(mech).__name__}({params})"


def _privacy_spent(mech, sensitivity: float, delta: float) -> str:
    import accounting

    pld = accounting.pld(mech, sensitivity=sensitivity)
    eps = float(np.asarray(pld.get_epsilon_for_delta(delta)))
    pure = getattr(pld, "pure_epsilon", None)
    pure = float(np.asarray(pure() if callable(pure) else pure)) if pure is not None else float("inf")
    text = f"epsilon = {eps:.4f} at delta = {delta:g} (exact PLD accounting, pessimistic)"
    if np.isfinite(pure):
        text += f"; pure epsilon = {pure:.4f}"
    return text


def _release_command(args) -> int:
    import jax

    import dpjax

    groups, values = _read_table(args.input, args.value_column, args.group_by)
    names, true, sensitivity = aggregate(groups, values, args.statistic, args.clip)
    mech = build_mechanism(args.mechanism, sensitivity, args.epsilon, args.delta, args.scale, args.sigma)
    key = jax.random.key(args.seed) if args.seed is not None else dpjax.random.secure_key()
    if mech.discrete:
        true_in = np.round(true).astype(np.int32)
    else:
        true_in = true.astype(np.float32)
    released = np.asarray(dpjax.release(key, true_in, mech))

    rows = list(zip(names, true, released))
    if args.output:
        with open(args.output, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["group", f"true_{args.statistic}", f"released_{args.statistic}"])
            w.writerows(rows)
    source = args.input or "embedded dataset: daily steps of 4000 synthetic health-app users"
    print(f"dpjax release — {args.statistic} of {args.value_column!r} by {args.group_by or '(all)'} ({source})")
    print(f"{'group':<14}{'true':>16}{'released':>16}{'rel. error':>12}")
    for name, t, r in rows[: args.show]:
        rel = abs(r - t) / max(abs(t), 1e-12)
        print(f"{str(name):<14}{t:>16,.1f}{float(r):>16,.1f}{rel:>12.3%}")
    if len(rows) > args.show:
        print(f"... {len(rows) - args.show} more groups" + (f" in {args.output}" if args.output else ""))
    print(f"mechanism: {_describe(mech)}; sensitivity {sensitivity:g} (values clipped to ±{args.clip:g})")
    print(f"privacy: {_privacy_spent(mech, sensitivity, args.delta)}; groups are disjoint (parallel composition)")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dpjax", description="Differentially private batch releases on JAX.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("release", help="aggregate a table by group and release it with calibrated noise")
    r.add_argument("--input", help="CSV file with a header row (default: the embedded step-count dataset)")
    r.add_argument("--value-column", default="steps", help="numeric column to aggregate (default: steps)")
    r.add_argument("--group-by", default="age_group", help="column to group by (default: age_group)")
    r.add_argument("--statistic", choices=("sum", "count"), default="sum")
    r.add_argument("--clip", type=float, default=20000.0, help="per-row clipping bound for sums (default 20000)")
    r.add_argument("--mechanism", choices=MECHANISMS, default="laplace")
    r.add_argument("--epsilon", type=float, default=1.0, help="target epsilon for calibration (default 1)")
    r.add_argument("--delta", type=float, default=1e-6, help="delta for Gaussian calibration and reporting")
    r.add_argument("--scale", type=float, help="Laplace / discrete Laplace scale (overrides --epsilon)")
    r.add_argument("--sigma", type=float, help="Gaussian / discrete Gaussian sigma (overrides --epsilon)")
    r.add_argument("--seed", type=int, help="integer seed (default: a secure key from os.urandom)")
    r.add_argument("--output", help="write group,true,released rows to this CSV file")
    r.add_argument("--show", type=int, default=10, help="groups shown on screen (default 10)")
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "release":
            if args.clip <= 0 or not np.isfinite(args.clip):
                raise ValueError(f"--clip must be a positive finite number, got {args.clip}")
            return _release_command(args)
    except ValueError as exc:
        print(f"dpjax: error: {exc}", file=sys.stderr)
        return 2
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
