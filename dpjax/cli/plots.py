"""The pictures of ``--plot FILE.png`` (the ``plot`` extra: matplotlib).

ε against DP-SGD steps, a plan's privacy profile ε(δ), and a release's values with their noise intervals per
group.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check", "steps_grid", "steps_plot", "profile_plot", "release_plot"]

#: points of the ε-against-steps curve
STEPS_POINTS = 12


def _pyplot():
    """matplotlib's pyplot on the file-only Agg backend; a clear error naming the extra when it is missing."""
    try:
        import matplotlib
    except ImportError:
        raise ValueError("--plot needs matplotlib: pip install 'dpjax[plot]' (or pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check(path) -> None:
    """Refuse, before any work, a ``--plot`` that is not a .png file or cannot be drawn (no matplotlib).

    Args:
      path: the ``--plot`` value (``None``: no plot).

    Raises:
      ValueError: not a .png name, or matplotlib missing (the ``plot`` extra).
    """
    if path is None:
        return
    if not str(path).lower().endswith(".png"):
        raise ValueError(f"--plot: name a .png file, got {path!r}")
    _pyplot()


def _save(fig, path: str) -> None:
    try:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    except OSError as exc:
        raise ValueError(f"--plot: cannot write {path!r} ({exc})") from None


def steps_grid(steps: int, points: int = STEPS_POINTS) -> list:
    """``points`` step counts from steps/points to ``steps`` (distinct, increasing).

    Args:
      steps: the largest count.
      points: how many counts at most.

    Returns:
      A sorted list of ints.
    """
    return sorted({max(1, round(steps * k / points)) for k in range(1, points + 1)})


def steps_plot(path, pld_steps, pld, rdp_steps, rdp, delta, noise) -> None:
    """Draw ε at ``delta`` against the number of DP-SGD steps: the exact PLD, and the RDP bound if given.

    Args:
      path: the .png file.
      pld_steps: the step counts of the PLD curve.
      pld: ε of the exact PLD at each.
      rdp_steps: the step counts of the RDP curve.
      rdp: ε of the RDP bound at each, or ``None``.
      delta: the δ of every ε.
      noise: the noise kernel's name, for the title.

    Raises:
      ValueError: the file cannot be written.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(pld_steps, pld, "o-", label="exact PLD (accounting.dpsgd_epsilon)")
    if rdp is not None:
        ax.plot(rdp_steps, rdp, "s--", label="RDP bound (sampled Gaussian)")
    ax.set_xlabel("steps")
    ax.set_ylabel(f"epsilon at delta = {delta:g}")
    ax.set_title(f"DP-SGD with {noise} noise: privacy spent against steps")
    ax.grid(alpha=0.3)
    ax.legend()
    _save(fig, path)
    plt.close(fig)


def profile_plot(path, curve) -> None:
    """Draw the privacy profile: ε against δ, δ on a log axis.

    Args:
      path: the .png file.
      curve: ``[(δ, ε or None), ...]`` (``None``: below the plan's round-off floor, left out).

    Raises:
      ValueError: no δ of the curve is above the round-off floor; the file cannot be written.
    """
    plt = _pyplot()
    points = [(d, e) for d, e in curve if e is not None]
    if not points:
        raise ValueError("--plot: no delta of the curve is above the plan's round-off floor")
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([e for _, e in points], [d for d, _ in points], "o-")
    ax.set_yscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("delta(epsilon)")
    ax.set_title("privacy profile of the plan (exact PLD)")
    ax.grid(alpha=0.3, which="both")
    _save(fig, path)
    plt.close(fig)


def release_plot(path, table, by, names, accuracy, alpha, true) -> None:
    """Draw each released statistic per group (one panel per statistic).

    Each with its (1 − alpha) noise interval as an error bar where ``accuracy`` gives one, and the true value as
    a cross where ``true`` is given.

    Args:
      path: the .png file.
      table: the released table (pyarrow).
      by: the group columns.
      names: the statistics' columns.
      accuracy: ``{name: (std, half-width)}`` (:func:`dpjax.cli.release.accuracy`).
      alpha: the intervals' level is ``1 − alpha``.
      true: ``{name: true values}``, or ``None``.

    Raises:
      ValueError: the file cannot be written.
    """
    plt = _pyplot()
    keys = [",".join(str(v) for v in k) for k in zip(*(table.column(c).to_pylist() for c in by))]
    fig, axes = plt.subplots(len(names), 1, figsize=(max(6, 0.5 * len(keys) + 2), 3 * len(names)), squeeze=False)
    x = np.arange(len(keys))
    for ax, name in zip(axes[:, 0], names):
        values = np.asarray([np.nan if v is None else v for v in table.column(name).to_pylist()], dtype=float)
        err = (
            np.asarray([np.nan if h is None else h for h in accuracy[name][1]], dtype=float)
            if name in accuracy
            else None
        )
        ax.errorbar(
            x,
            values,
            yerr=err,
            fmt="o",
            capsize=4,
            label=f"released ± {1 - alpha:.0%} noise interval" if err is not None else "released",
        )
        if true is not None:
            ax.plot(x, true[name], "x", color="black", label="true (not private)")
        ax.set_xticks(x, keys, rotation=45 if len(keys) > 6 else 0, ha="right" if len(keys) > 6 else "center")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    if not keys:
        axes[0, 0].set_title("no group was released (none passed the private selection)")
    axes[-1, 0].set_xlabel(",".join(by))
    _save(fig, path)
    plt.close(fig)
