"""``dpjax calibrate``: the noise (or the steps, or the batch) that meets a privacy target.

* ``dpjax calibrate dpsgd --epsilon E --delta D`` with the setting in users' units
  (``--noise-multiplier``, ``--batch-size``, ``--num-examples``, ``--epochs``) or as a rate and steps
  (``--noise-multiplier``, ``--sampling-prob``, ``--steps``) less one gives that one: the noise
  multiplier (:func:`accounting.calibrate_noise_multiplier`), the largest number of steps or epochs
  (:func:`accounting.calibrate_num_steps`) or the largest expected batch size with the epochs kept
  (a search on :func:`accounting.dpsgd_epsilon`, from the sampled Gaussian's RDP answer), each by the
  exact PLD. ``--mechanism`` picks the noise kernel (Gaussian by default; only kernels with DP-SGD
  accounting are offered). A target that cannot be met exits non-zero, saying why.
* ``dpjax calibrate plan --epsilon E --delta D --mechanism ... [--mechanism ...]`` gives the
  common scale (each kernel's scale leaf: σ, or b) at which the composed plan (groups as in
  ``dpjax account``, without their scales) spends at most ε at δ: the smallest such scale to a
  relative 1e-4, found on the exact PLD of the plan (:class:`accounting.Accountant`).
"""

from __future__ import annotations

import numpy as np

from dpjax.cli._common import (
    check_positive,
    check_probability,
    check_steps,
    describe,
    given,
    progress,
    refuse_flags,
    reported,
)
from dpjax.cli._dpsgd import add_setting_flags, dpsgd_kernel, epochs_of, steps_of

__all__ = ["add_parser", "plan_scale"]

#: relative tolerance on the common scale of a plan
PLAN_RTOL = 1e-4


def _out_of_reach(eps, delta, what) -> ValueError:
    return ValueError(f"--epsilon {eps:g} at --delta {delta:g} is out of reach: {what}")


def _dpsgd(args):
    import accounting

    eps = check_positive("--epsilon", args.epsilon)
    delta = check_probability("--delta", args.delta)
    cls = dpsgd_kernel(args)
    users = [d for d in ("batch_size", "num_examples", "epochs") if d in given(args)]
    if users:
        refuse_flags(
            args, ["sampling_prob", "steps"], "with --batch-size/--num-examples/--epochs (give the setting in one form)"
        )
        if args.num_examples is None:
            raise ValueError("--num-examples: the setting in users' units needs the training set size")
        n = check_steps("--num-examples", args.num_examples)
        names = ("noise_multiplier", "batch_size", "epochs")
    else:
        names = ("noise_multiplier", "sampling_prob", "steps")
    unknown = [f for f in names if getattr(args, f) is None]
    if len(unknown) != 1:
        flags = ", ".join("--" + f.replace("_", "-") for f in names)
        raise ValueError(
            f"{flags}: give all but the one to calibrate (missing: "
            f"{', '.join('--' + u.replace('_', '-') for u in unknown) or 'none'})"
        )
    what = unknown[0]
    if what == "sampling_prob":
        raise ValueError(
            "--sampling-prob: to calibrate the batch size give --num-examples N and --epochs E (the epochs are kept)"
        )
    z = None if what == "noise_multiplier" else check_positive("--noise-multiplier", args.noise_multiplier)
    if users:
        b = None if what == "batch_size" else check_steps("--batch-size", args.batch_size)
        if b is not None and b > n:
            raise ValueError(f"--batch-size {b} is larger than --num-examples {n}")
        epochs = None if what == "epochs" else check_positive("--epochs", args.epochs)
    with progress("calibrating", total=None) as bar:
        if what == "noise_multiplier":
            q, steps = (
                (b / n, steps_of(epochs, b, n))
                if users
                else (check_probability("--sampling-prob", args.sampling_prob), check_steps("--steps", args.steps))
            )
            value = float(accounting.calibrate_noise_multiplier(eps, delta, q, steps, mechanism=cls))
            z = value
        elif what in ("steps", "epochs"):
            q = b / n if users else check_probability("--sampling-prob", args.sampling_prob)
            steps = int(accounting.calibrate_num_steps(eps, delta, z, q, mechanism=cls))
            if steps == 0:
                raise _out_of_reach(
                    eps, delta, f"not even one step at noise multiplier {z:g} and sampling rate {q:g} meets it"
                )
            value = steps if what == "steps" else epochs_of(steps, b, n)
        else:
            b = _batch_size(eps, delta, z, epochs, n, cls, bar)
            q, steps, value = b / n, steps_of(epochs, b, n), b
        spent = float(accounting.dpsgd_epsilon(z, q, steps, delta, mechanism=cls))
    noise = cls.__name__ if cls is not None else "Gaussian"
    setting = {"noise_multiplier": z, "sampling_prob": q, "steps": steps}
    if users:
        setting.update(batch_size=b, num_examples=n, epochs=epochs_of(steps, b, n) if what == "epochs" else epochs)
    payload = {
        "calibrated": what,
        what: value,
        **setting,
        "mechanism": noise,
        "target_epsilon": eps,
        "delta": delta,
        "epsilon": spent,
    }
    shown = f"{value:.6g}" if isinstance(value, float) else str(value)
    lines = [
        f"dpjax calibrate dpsgd — {noise} noise, target epsilon {eps:g} at delta {delta:g}",
        f"{what.replace('_', ' ')} = {shown}" + (" (the epochs kept)" if what == "batch_size" else ""),
        "setting: " + ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in setting.items()),
        f"epsilon = {spent:.6g} at delta = {delta:g} (accounting.dpsgd_epsilon, exact PLD; never above the target)",
    ]
    return payload, lines


def _batch_size(eps, delta, z, epochs, n, cls, bar) -> int:
    """The largest expected batch size B ≤ ``n`` whose ``epochs`` (T = ⌈E·N/B⌉ steps at rate B/N) spend at most
    ``eps`` at ``delta`` by the exact PLD: from the sampled Gaussian's RDP answer (an upper bound, so
    feasible) for Gaussian noise, then ε ∝ √B to bracket it, then a bisection on the integers, each
    candidate one :func:`accounting.dpsgd_epsilon` (``bar`` counts them)."""
    import accounting

    def feasible(b):
        e = float(accounting.dpsgd_epsilon(z, b / n, steps_of(epochs, b, n), delta, mechanism=cls))
        bar.advance()
        return e <= eps, e

    bar.total = 12
    lo = _rdp_batch_size(eps, delta, z, epochs, n) if cls is None else 1
    ok, e = feasible(lo)
    if not ok:
        if lo > 1:
            ok, e = feasible(1)
        if not ok:
            raise _out_of_reach(
                eps, delta, f"even a batch of 1 over {epochs:g} epochs at noise multiplier {z:g} spends epsilon {e:.4g}"
            )
        lo, hi = 1, lo
    else:
        hi = min(n + 1, max(lo + 1, int(lo * (eps / max(e, 1e-300)) ** 2) + 1))
        while hi <= n:
            ok, e = feasible(hi)
            if not ok:
                break
            lo, hi = hi, min(n + 1, 2 * hi)
    bar.total = bar.done + max(1, (hi - lo).bit_length())
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if feasible(mid)[0]:
            lo = mid
        else:
            hi = mid
    return lo


def _rdp_batch_size(eps, delta, z, epochs, n) -> int:
    """The largest B whose sampled-Gaussian RDP bound over ``epochs`` meets ``eps`` (at least 1): a bisection
    on the host-side RDP curve (:func:`accounting.rdp.sampled_gaussian_rdp_at`)."""
    from accounting.rdp import SAMPLED_GAUSSIAN_ORDERS, rdp_to_epsilon, sampled_gaussian_rdp_at

    orders = SAMPLED_GAUSSIAN_ORDERS[SAMPLED_GAUSSIAN_ORDERS == np.round(SAMPLED_GAUSSIAN_ORDERS)]

    def ok(b):
        curve = sampled_gaussian_rdp_at(z, b / n, orders)
        return float(rdp_to_epsilon(orders, steps_of(epochs, b, n) * curve, delta)) <= eps

    lo, hi = 1, n + 1
    if not ok(1):
        return 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def plan_scale(groups_at, epsilon: float, delta: float) -> float:
    """The smallest common scale s (to :data:`PLAN_RTOL`) at which the plan spends at most ``epsilon`` at ``delta``.

    The plan's exact PLD; a doubling bracket, then a log-space bisection (ε decreases in every kernel's scale),
    returning the feasible end.

    Args:
      groups_at: ``groups_at(s)``, the plan's groups with every kernel at scale s
        (:func:`dpjax.cli.account.plan_groups`).
      epsilon: the target ε.
      delta: the δ at which ε is measured.

    Returns:
      s, a float.

    Raises:
      ValueError: ``epsilon`` out of reach (a common scale above 1e12), or met at every scale down to 1e-12.
    """
    from accounting._root import log_bisect
    from dpjax.cli.account import plan_accountant

    def eps(s):
        return float(plan_accountant(groups_at(s)).spent_epsilon(delta))

    hi = 1.0
    while eps(hi) > epsilon:
        hi *= 4.0
        if hi > 1e12:
            raise ValueError(f"--epsilon: {epsilon:g} is out of reach (common scale > 1e12)")
    lo = hi / 4.0
    while eps(lo) <= epsilon:
        lo, hi = lo / 4.0, lo
        if lo < 1e-12:
            raise ValueError(f"--epsilon: {epsilon:g} is met at every scale down to 1e-12")
    return log_bisect(eps, lo, hi, epsilon, rtol=PLAN_RTOL)


def _plan(args):
    from dpjax.cli.account import plan_accountant, plan_groups

    eps = check_positive("--epsilon", args.epsilon)
    delta = check_probability("--delta", args.delta)
    plan_groups(args, 1.0)  # every group checked before any work
    with progress("calibrating"):
        scale = plan_scale(lambda s: plan_groups(args, s), eps, delta)
        groups = plan_groups(args, scale)
        spent = float(plan_accountant(groups).spent_epsilon(delta))
    payload = {
        "calibrated": "scale",
        "scale": scale,
        "target_epsilon": eps,
        "delta": delta,
        "epsilon": spent,
        "plan": [
            {"mechanism": describe(m), "sensitivity": s, "sampling_prob": sampling_prob, "steps": t}
            for m, s, sampling_prob, t in groups
        ],
    }
    lines = [
        f"dpjax calibrate plan — the common scale for epsilon {eps:g} at delta {delta:g}",
        f"scale = {scale:.6g} (each kernel's scale leaf; the least feasible to a relative {PLAN_RTOL:g})",
    ]
    lines += [
        f"  {t} x {describe(m)} at sensitivity {s:g}"
        + (f", Poisson sampling rate {sampling_prob:g}" if sampling_prob < 1 else "")
        for m, s, sampling_prob, t in groups
    ]
    lines.append(f"epsilon = {spent:.6g} at delta = {delta:g} (exact PLD, composed; never above the target)")
    return payload, lines


def add_parser(sub) -> None:
    """Add the ``calibrate`` subcommand (its ``dpsgd`` and ``plan`` forms) to the subparsers ``sub``.

    Args:
      sub: the ``dpjax`` parser's subparsers.
    """
    from dpjax.cli.account import add_group_flags

    p = sub.add_parser(
        "calibrate", help="the noise, steps or batch size for a privacy target", description=__doc__.split("\n\n")[0]
    )
    targets = p.add_subparsers(dest="target", required=True, metavar="{dpsgd,plan}")
    d = targets.add_parser(
        "dpsgd",
        help="DP-SGD: noise multiplier, steps or epochs, or batch size",
        description="Give the setting --noise-multiplier with --batch-size --num-examples --epochs "
        "(or --sampling-prob --steps) less the one to calibrate; the batch size is "
        "calibrated with the epochs kept.",
    )
    d.add_argument("--epsilon", type=float, required=True, help="target epsilon")
    d.add_argument("--delta", type=float, required=True, help="at this delta")
    add_setting_flags(d)
    d.add_argument("--json", action="store_true", help="print the result as one JSON object")
    d.set_defaults(run=reported(_dpsgd))
    sampling_prob = targets.add_parser(
        "plan",
        help="the common scale of a composed plan",
        description="Groups as in dpjax account, without their scales.",
    )
    sampling_prob.add_argument("--epsilon", type=float, required=True, help="target epsilon")
    sampling_prob.add_argument("--delta", type=float, required=True, help="at this delta")
    add_group_flags(sampling_prob, scales=False)
    sampling_prob.add_argument("--json", action="store_true", help="print the result as one JSON object")
    sampling_prob.set_defaults(run=reported(_plan))
