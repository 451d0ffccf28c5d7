"""``dpjax calibrate``: the noise (or the steps, or the batch) that meets a privacy target.

* ``dpjax calibrate dpsgd --epsilon E --delta D`` with two of ``--noise-multiplier``,
  ``--steps`` and ``--sampling-prob`` (or ``--num-examples`` for the batch size) gives the third:
  the noise multiplier (:func:`accounting.calibrate_noise_multiplier`), the largest number of
  steps (:func:`accounting.calibrate_num_steps`) or the largest expected batch size
  (:func:`accounting.calibrate_batch_size`), each by the exact PLD of
  :func:`accounting.dpsgd_epsilon`. ``--mechanism`` picks the noise kernel (Gaussian by default).
* ``dpjax calibrate plan --epsilon E --delta D --mechanism ... [--mechanism ...]`` gives the
  common scale (each kernel's scale leaf: σ, or b) at which the composed plan (groups as in
  ``dpjax account``, without their scales) spends at most ε at δ: the smallest such scale to a
  relative 1e-4, found on the exact PLD of the plan (:class:`accounting.Accountant`).
"""

from __future__ import annotations


from dpjax.cli._common import (check_positive, check_probability, check_steps, describe, reported,
                               kernel_class, kernel_names, progress, refuse_flags)

__all__ = ["add_parser", "plan_scale"]

#: relative tolerance on the common scale of a plan
PLAN_RTOL = 1e-4


def _dpsgd(args):
    import accounting

    eps = check_positive("--epsilon", args.epsilon)
    delta = check_probability("--delta", args.delta)
    cls = kernel_class(args.mechanism, "--mechanism") if args.mechanism is not None else None
    unknown = [f for f in ("noise_multiplier", "steps") if getattr(args, f) is None]
    if args.num_examples is not None:
        refuse_flags(args, ["sampling_prob"], "with --num-examples (the batch size is what is calibrated)")
        unknown.append("batch_size")
    elif args.sampling_prob is None:
        unknown.append("sampling_prob")
    if len(unknown) != 1:
        raise ValueError("--noise-multiplier, --steps, --sampling-prob (or --num-examples): give all but the one "
                         f"to calibrate (missing: {', '.join('--' + u.replace('_', '-') for u in unknown) or 'none'})")
    what = unknown[0]
    if what == "sampling_prob":
        raise ValueError("--sampling-prob: to calibrate the batch size give --num-examples N (q = B / N)")
    with progress("calibrating"):
        if what == "noise_multiplier":
            sampling_prob = check_probability("--sampling-prob", args.sampling_prob)
            steps = check_steps("--steps", args.steps)
            value = float(accounting.calibrate_noise_multiplier(eps, delta, sampling_prob, steps, mechanism=cls))
            setting = dict(noise_multiplier=value, sampling_prob=sampling_prob, steps=steps)
        elif what == "steps":
            z = check_positive("--noise-multiplier", args.noise_multiplier)
            sampling_prob = check_probability("--sampling-prob", args.sampling_prob)
            value = int(accounting.calibrate_num_steps(eps, delta, z, sampling_prob, mechanism=cls))
            setting = dict(noise_multiplier=z, sampling_prob=sampling_prob, steps=value)
        else:
            z, steps = check_positive("--noise-multiplier", args.noise_multiplier), check_steps("--steps", args.steps)
            n = check_steps("--num-examples", args.num_examples)
            value = int(accounting.calibrate_batch_size(eps, delta, z, steps, n, mechanism=cls))
            setting = dict(noise_multiplier=z, sampling_prob=value / n, steps=steps, batch_size=value,
                           num_examples=n)
        spent = (float(accounting.dpsgd_epsilon(setting["noise_multiplier"], setting["sampling_prob"],
                                                setting["steps"], delta, mechanism=cls))
                 if value else float("inf"))
    noise = cls.__name__ if cls is not None else "Gaussian"
    payload = {"calibrated": what, what: value, **setting, "mechanism": noise, "target_epsilon": eps,
               "delta": delta, "epsilon": spent}
    lines = [f"dpjax calibrate dpsgd — {noise} noise, target epsilon {eps:g} at delta {delta:g}",
             f"{what.replace('_', ' ')} = {value:.6g}" if what == "noise_multiplier" else
             f"{what.replace('_', ' ')} = {value}",
             "setting: " + ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in setting.items()),
             f"epsilon = {spent:.6g} at delta = {delta:g} (accounting.dpsgd_epsilon, exact PLD; never above the "
             "target)"]
    if value == 0:
        lines[-1] = "not even one step (or one example per batch) meets the target"
    return payload, lines


def plan_scale(groups_at, epsilon: float, delta: float) -> float:
    """The smallest common scale s (to :data:`PLAN_RTOL`) at which the plan ``groups_at(s)`` spends at
    most ``epsilon`` at ``delta`` (its exact PLD): a doubling bracket, then a log-space bisection
    (ε decreases in every kernel's scale), returning the feasible end."""
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
    payload = {"calibrated": "scale", "scale": scale, "target_epsilon": eps, "delta": delta, "epsilon": spent,
               "plan": [{"mechanism": describe(m), "sensitivity": s, "sampling_prob": sampling_prob, "steps": t}
                        for m, s, sampling_prob, t in groups]}
    lines = [f"dpjax calibrate plan — the common scale for epsilon {eps:g} at delta {delta:g}",
             f"scale = {scale:.6g} (each kernel's scale leaf; the least feasible to a relative {PLAN_RTOL:g})"]
    lines += [f"  {t} x {describe(m)} at sensitivity {s:g}" + (
        f", Poisson sampling rate {sampling_prob:g}" if sampling_prob < 1 else "")
              for m, s, sampling_prob, t in groups]
    lines.append(f"epsilon = {spent:.6g} at delta = {delta:g} (exact PLD, composed; never above the target)")
    return payload, lines


def add_parser(sub) -> None:
    from dpjax.cli.account import add_group_flags

    p = sub.add_parser("calibrate", help="the noise, steps or batch size for a privacy target",
                       description=__doc__.split("\n\n")[0])
    targets = p.add_subparsers(dest="target", required=True, metavar="{dpsgd,plan}")
    d = targets.add_parser("dpsgd", help="DP-SGD: noise multiplier, steps or batch size",
                           description="Give all of --noise-multiplier, --steps, --sampling-prob (or --num-examples) "
                                       "but the one to calibrate.")
    d.add_argument("--epsilon", type=float, required=True, help="target epsilon")
    d.add_argument("--delta", type=float, required=True, help="at this delta")
    d.add_argument("--noise-multiplier", type=float, help="noise scale / clipping norm")
    d.add_argument("--steps", type=int, help="number of noisy steps")
    d.add_argument("--sampling-prob", type=float, help="Poisson sampling rate of a step")
    d.add_argument("--num-examples", type=int, help="training set size: calibrates the expected batch size")
    d.add_argument("--mechanism", metavar="{" + ",".join(kernel_names()) + ",package.module:Class}",
                   help="noise kernel (default gaussian; laplace, discrete-gaussian, or a class)")
    d.add_argument("--json", action="store_true", help="print the result as one JSON object")
    d.set_defaults(run=reported(_dpsgd))
    sampling_prob = targets.add_parser("plan", help="the common scale of a composed plan",
                           description="Groups as in dpjax account, without their scales.")
    sampling_prob.add_argument("--epsilon", type=float, required=True, help="target epsilon")
    sampling_prob.add_argument("--delta", type=float, required=True, help="at this delta")
    add_group_flags(sampling_prob, scales=False)
    sampling_prob.add_argument("--json", action="store_true", help="print the result as one JSON object")
    sampling_prob.set_defaults(run=reported(_plan))
