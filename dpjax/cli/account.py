"""``dpjax account``: the privacy of a plan of releases, by the exact PLD accountant.

A plan is one or several groups, each ``--mechanism NAME`` (a registry kernel or
``package.module:Class``) with its scale (``--sigma`` or ``--scale``, as the kernel names it),
``--sensitivity`` (default 1), ``--sampling-prob`` (Poisson subsampling rate, default 1: no
sampling) and ``--steps`` (runs, default 1); or ``--plan plan.json``, a JSON list of such groups
(``{"mechanism": "gaussian", "sigma": 1.1, "sampling_prob": 0.004, "steps": 15000}``). The plan
is composed exactly (:class:`accounting.Accountant`: a pessimistic PLD, runs of one group by an
FFT power, groups by convolution) and the command prints ε at ``--delta`` (or δ at
``--epsilon``); ``--rdp`` adds the Rényi-DP bound beside it, ``--curve`` the ε–δ curve.
``--plot FILE.png`` draws the plan's privacy profile ε(δ).

``dpjax account dpsgd --noise-multiplier Z (--batch-size B --num-examples N --epochs E | --sampling-prob Q
--steps T) --delta D``: a DP-SGD run in users' units (q = B/N, T = ⌈E·N/B⌉): its ε by
:func:`accounting.dpsgd_epsilon` (the exact PLD) and, for Gaussian noise, the Rényi-DP bound of the sampled
Gaussian (:func:`accounting.rdp.sampled_gaussian_rdp_at` on :data:`accounting.rdp.SAMPLED_GAUSSIAN_ORDERS`,
dp_accounting's orders among them, converted as dp_accounting does); ``--plot FILE.png`` draws ε against
the steps.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from dpjax.cli._common import (
    check_positive,
    check_probability,
    check_steps,
    describe,
    kernel_class,
    kernel_names,
    parameters,
    progress,
    reported,
    scale_flag,
)
from dpjax.cli._dpsgd import add_setting_flags, dpsgd_kernel, sampling

__all__ = ["add_parser", "plan_groups", "plan_accountant", "plan_rdp", "add_group_flags"]

#: the flags of a group, in the order of the JSON plan's keys
_GROUP = ("mechanism", "sigma", "scale", "sensitivity", "sampling_prob", "steps")
#: the δ of the --curve table (those below a plan's round-off floor are left out, and said so)
CURVE_DELTAS = tuple(10.0**-k for k in range(1, 13))


class _GroupFlag(argparse.Action):
    """A plan group's flag: ``--mechanism`` opens a group, the others set a field of the open one
    (each once per group)."""

    def __call__(self, parser, namespace, values, option_string=None):
        groups = namespace.__dict__.setdefault("groups", None) or []
        namespace.groups = groups
        if self.dest == "mechanism":
            groups.append({"mechanism": values})
            return
        if not groups:
            parser.error(f"{option_string} comes after the --mechanism it belongs to")
        if self.dest in groups[-1]:
            parser.error(f"{option_string} given twice for one --mechanism")
        groups[-1][self.dest] = values


def _group(entry: dict, where: str, scale=None):
    """(mechanism, sensitivity, sampling_prob, steps) of one plan group, each checked by flag; with
    ``scale``, the group gives no scale and its kernel is built at ``scale``."""
    unknown = set(entry) - set(_GROUP)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {sorted(unknown)} (a group has {list(_GROUP)})")
    if "mechanism" not in entry:
        raise ValueError(f"{where}: a group needs its --mechanism")
    cls = kernel_class(entry["mechanism"], "--mechanism")
    own = "sigma" if scale_flag(cls) == "--sigma" else "scale"
    if scale is not None and {"sigma", "scale"} & set(entry):
        raise ValueError(
            f"--{({'sigma', 'scale'} & set(entry)).pop()} does not apply: the common scale is what is calibrated"
        )
    other = ({"sigma", "scale"} - {own}) & set(entry)
    if other:
        raise ValueError(
            f"--{other.pop()} does not apply to --mechanism {entry['mechanism']}: its scale is {scale_flag(cls)}"
        )
    if scale is None and entry.get(own) is None:
        raise ValueError(f"{scale_flag(cls)}: --mechanism {entry['mechanism']} needs its scale")
    scale = check_positive(scale_flag(cls), entry[own] if scale is None else scale)
    sensitivity = check_positive("--sensitivity", entry.get("sensitivity", 1.0))
    sampling_prob = entry.get("sampling_prob", 1.0)
    if not (sampling_prob == 1.0 or 0.0 < sampling_prob < 1.0):
        raise ValueError(f"--sampling-prob must lie in (0, 1], got {sampling_prob}")
    steps = check_steps("--steps", entry.get("steps", 1))
    try:
        mech = cls(**{cls.scale_name: scale})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"--mechanism {entry['mechanism']}: {exc}") from None
    return mech, sensitivity, float(sampling_prob), steps


def plan_groups(args, scale=None):
    """The plan's groups (``--plan`` file or ``--mechanism`` groups).

    Args:
      args: the parsed flags.
      scale: a common scale for every kernel (``dpjax calibrate plan``), or ``None``: each group's own.

    Returns:
      ``[(mechanism, sensitivity, sampling_prob, steps), ...]``.

    Raises:
      ValueError: both ``--plan`` and ``--mechanism`` groups, or neither; an unreadable or malformed plan
        file; a group's invalid kernel or parameters (naming the group and the flag).
    """
    if args.plan is not None:
        if args.groups:
            raise ValueError("--plan: give the plan as a file or as --mechanism groups, not both")
        try:
            with open(args.plan) as fh:
                plan = json.load(fh)
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"--plan: cannot read {args.plan!r} ({exc})") from None
        if not isinstance(plan, list) or not plan or not all(isinstance(g, dict) for g in plan):
            raise ValueError('--plan: a JSON list of groups ({"mechanism": ..., "sigma": ..., ...})')
        return [_group(g, f"--plan group {i + 1}", scale) for i, g in enumerate(plan)]
    if not args.groups:
        raise ValueError("--mechanism: give the plan, one --mechanism group or several (or --plan plan.json)")
    return [_group(g, f"--mechanism group {i + 1}", scale) for i, g in enumerate(args.groups)]


def plan_accountant(groups, delta=None):
    """The :class:`accounting.Accountant` (no budget) holding the plan's releases.

    Args:
      groups: the plan's groups (:func:`plan_groups`).
      delta: the accountant's δ for its ``spent_epsilon`` (``None``: given at the query).

    Returns:
      The accountant.
    """
    import accounting

    acc = accounting.Accountant(delta=delta)
    for mech, sensitivity, sampling_prob, steps in groups:
        acc.record(mech, sensitivity=sensitivity, count=steps, sampling_prob=sampling_prob)
    return acc


def plan_rdp(groups):
    """The RDP of the composed plan: each group's exact RDP times its steps, summed.

    On :data:`accounting.rdp.SAMPLED_GAUSSIAN_ORDERS`; a sampled Gaussian group's is the sampled Gaussian's own
    (:func:`accounting.rdp.sampled_gaussian_rdp_at`), another sampled group's the Poisson-subsampling bound
    (:func:`accounting.rdp.subsampled_rdp`, at the integer orders only: the others are left out, ∞).

    Args:
      groups: the plan's groups (:func:`plan_groups`).

    Returns:
      ``(orders, rdp)``: numpy arrays.

    References:
      Mironov, "Rényi Differential Privacy", CSF 2017; Zhu, Wang, "Poisson Subsampled Rényi Differential
      Privacy", ICML 2019.
    """
    import jax
    import jax.numpy as jnp

    import accounting
    from accounting.rdp import RDP_ORDERS, SAMPLED_GAUSSIAN_ORDERS, sampled_gaussian_rdp_at, subsampled_rdp

    orders = SAMPLED_GAUSSIAN_ORDERS
    total = np.zeros(len(orders))
    with jax.enable_x64(True):
        for mech, sensitivity, sampling_prob, steps in groups:
            if sampling_prob == 1.0:
                r = np.asarray(accounting.rdp(mech, jnp.asarray(orders), sensitivity=sensitivity), dtype=float)
            elif mech.gaussian_pld_mu is not None:  # a Gaussian loss: the sampled Gaussian's own RDP at σ/Δ = 1/μ
                r = sampled_gaussian_rdp_at(
                    1.0 / float(np.asarray(mech.gaussian_pld_mu(sensitivity))), sampling_prob, orders
                )
            else:
                at = subsampled_rdp(lambda a, m=mech, s=sensitivity: accounting.rdp(m, a, sensitivity=s), sampling_prob)
                r = np.full(len(orders), np.inf)
                r[np.isin(orders, RDP_ORDERS)] = np.asarray(at, dtype=float)
            total += steps * r
    return orders, total


def _curve(acc):
    """[(δ, ε(δ) or None), ...] over :data:`CURVE_DELTAS`: None where δ is below what the plan's PLD
    resolves (the accountant refuses an answer dominated by round-off)."""
    out = []
    for d in CURVE_DELTAS:
        try:
            out.append((d, float(acc.spent_epsilon(d))))
        except ValueError:
            out.append((d, None))
    return out


def _account(args):
    import accounting

    if (args.delta is None) == (args.epsilon is None):
        raise ValueError("--delta or --epsilon: give exactly one (ε at δ, or δ at ε)")
    if args.delta is not None:
        check_probability("--delta", args.delta)
    else:
        check_positive("--epsilon", args.epsilon)
    groups = plan_groups(args)
    if args.plot:
        from dpjax.cli import plots

        plots.check(args.plot)
    with progress("accounting"):
        acc = plan_accountant(groups, args.delta)
        if args.delta is not None:
            value = float(acc.spent_epsilon(args.delta))
        else:
            value = float(acc.spent_delta(args.epsilon))
        curve = _curve(acc) if args.curve or args.plot else None
        rdp_value = None
        if args.rdp:
            orders, total = plan_rdp(groups)
            rdp_value = float(
                accounting.rdp_to_epsilon(orders, total, args.delta)
                if args.delta is not None
                else accounting.rdp_to_delta(orders, total, args.epsilon)
            )
    query = (
        ("epsilon", value, "delta", args.delta) if args.delta is not None else ("delta", value, "epsilon", args.epsilon)
    )
    payload = {
        "plan": [
            {"mechanism": parameters(m), "sensitivity": s, "sampling_prob": sampling_prob, "steps": t}
            for m, s, sampling_prob, t in groups
        ],
        query[2]: query[3],
        query[0]: value,
    }
    if rdp_value is not None:
        payload[f"rdp_{query[0]}"] = rdp_value
    if args.plot:
        plots.profile_plot(args.plot, curve)
    if args.curve:
        payload["curve"] = [{"delta": d, "epsilon": e} for d, e in curve]
    lines = ["dpjax account — the exact privacy of the plan (pessimistic PLD, composed exactly)"]
    for m, s, sampling_prob, t in groups:
        sampled = f", Poisson sampling rate {sampling_prob:g}" if sampling_prob < 1.0 else ""
        lines.append(f"  {t} x {describe(m)} at sensitivity {s:g}{sampled}")
    lines.append(f"{query[0]} = {value:.6g} at {query[2]} = {query[3]:g} (exact PLD)")
    if rdp_value is not None:
        lines.append(f"{query[0]} = {rdp_value:.6g} at {query[2]} = {query[3]:g} (RDP bound, never tighter)")
    if args.curve:
        lines.append(f"{'delta':>10}{'epsilon':>14}")
        lines += [
            f"{d:>10.0e}" + (f"{e:>14.6g}" if e is not None else "  below the PLD's round-off floor") for d, e in curve
        ]
    return payload, lines


def _dpsgd(args):
    """``dpjax account dpsgd``: ε of a DP-SGD run (the exact PLD, and the RDP bound for Gaussian noise)."""
    import accounting
    from accounting.rdp import SAMPLED_GAUSSIAN_ORDERS, rdp_to_epsilon, sampled_gaussian_rdp_at

    z = check_positive("--noise-multiplier", args.noise_multiplier)
    delta = check_probability("--delta", args.delta)
    cls = dpsgd_kernel(args)
    q, steps = sampling(args)
    if args.plot:
        from dpjax.cli import plots

        plots.check(args.plot)
    with progress("accounting"):
        eps = float(accounting.dpsgd_epsilon(z, q, steps, delta, mechanism=cls))
        rdp = None
        if cls is None or args.mechanism == "gaussian":
            curve = sampled_gaussian_rdp_at(z, q)
            rdp = float(rdp_to_epsilon(SAMPLED_GAUSSIAN_ORDERS, steps * curve, delta))
    noise = cls.__name__ if cls is not None else "Gaussian"
    setting = {"noise_multiplier": z, "sampling_prob": q, "steps": steps}
    if args.batch_size is not None:
        setting.update(batch_size=args.batch_size, num_examples=args.num_examples, epochs=args.epochs)
    payload = {**setting, "mechanism": noise, "delta": delta, "epsilon": eps, "rdp_epsilon": rdp}
    users = (
        f"batch {args.batch_size} of {args.num_examples} examples, {args.epochs:g} epochs: "
        if args.batch_size is not None
        else ""
    )
    lines = [
        f"dpjax account dpsgd — {noise} noise, noise multiplier {z:g}; {users}sampling rate q = {q:.6g}, {steps} steps",
        f"epsilon = {eps:.6g} at delta = {delta:g} (exact PLD, accounting.dpsgd_epsilon; never below the truth)",
    ]
    if rdp is not None:
        lines.append(
            f"epsilon = {rdp:.6g} at delta = {delta:g} (RDP of the sampled Gaussian at "
            f"{len(SAMPLED_GAUSSIAN_ORDERS)} orders, dp_accounting's among them; never tighter than the PLD)"
        )
    if args.plot:
        points = plots.steps_grid(steps)
        pld_points = plots.steps_grid(steps, 4)
        pld = []
        with progress("accounting the curve", total=len(pld_points) - 1) as bar:
            for t in pld_points[:-1]:  # one exact PLD per step count (each its own grid)
                pld.append(float(accounting.dpsgd_epsilon(z, q, t, delta, mechanism=cls)))
                bar.advance()
        rdp_points = (
            None if rdp is None else [float(rdp_to_epsilon(SAMPLED_GAUSSIAN_ORDERS, t * curve, delta)) for t in points]
        )
        plots.steps_plot(args.plot, pld_points, pld + [eps], points, rdp_points, delta, noise)
        lines.append(f"plot: {args.plot}")
    return payload, lines


def add_parser(sub) -> None:
    """Add the ``account`` subcommand (and its ``dpsgd`` form) to the subparsers ``sub``.

    Args:
      sub: the ``dpjax`` parser's subparsers.
    """
    p = sub.add_parser(
        "account",
        help="the privacy of a plan of releases (exact PLD; RDP beside it), or of DP-SGD",
        description=__doc__.split("\n\n")[0],
    )
    forms = p.add_subparsers(
        dest="form",
        required=False,
        metavar="{dpsgd}",
        help="dpsgd: a DP-SGD run in users' units (without it: a plan, the flags below)",
    )
    d = forms.add_parser(
        "dpsgd",
        help="the epsilon of a DP-SGD run (batch size, dataset size, epochs)",
        description="The epsilon of DP-SGD: --noise-multiplier with --batch-size --num-examples "
        "--epochs, or with --sampling-prob --steps, at --delta.",
    )
    add_setting_flags(d)
    d.add_argument("--delta", type=float, required=True, help="print epsilon at this delta")
    d.add_argument("--plot", metavar="FILE.png", help="draw epsilon against the steps (needs the plot extra)")
    d.add_argument("--json", action="store_true", help="print the result as one JSON object")
    d.set_defaults(run=reported(_dpsgd))
    add_group_flags(p, scales=True)
    p.add_argument("--delta", type=float, help="print epsilon at this delta ...")
    p.add_argument("--epsilon", type=float, help="... or delta at this epsilon")
    p.add_argument(
        "--rdp",
        action="store_true",
        help="also the Renyi-DP bound (Poisson subsampling: the sampled "
        "Gaussian's own, Zhu & Wang 2019 for other kernels)",
    )
    p.add_argument("--curve", action="store_true", help="also the epsilon-delta curve (delta = 1e-1 ... 1e-12)")
    p.add_argument("--plot", metavar="FILE.png", help="draw the privacy profile epsilon(delta) (needs the plot extra)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(run=reported(_account))


def add_group_flags(p, scales: bool) -> None:
    """The plan flags: repeatable ``--mechanism`` groups (with their scales where ``scales``) or ``--plan``.

    Args:
      p: the (sub)command's parser.
      scales: whether a group takes its scale (``--sigma``/``--scale``; not for ``dpjax calibrate plan``).
    """
    g = p.add_argument_group("a plan group (repeat --mechanism for several)")
    g.add_argument(
        "--mechanism",
        action=_GroupFlag,
        metavar="{" + ",".join(kernel_names()) + ",package.module:Class}",
        help="opens a group: the kernel released",
    )
    if scales:
        g.add_argument("--sigma", type=float, action=_GroupFlag, help="the kernel's sigma (Gaussian-type kernels)")
        g.add_argument("--scale", type=float, action=_GroupFlag, help="the kernel's scale (other kernels)")
    g.add_argument("--sensitivity", type=float, action=_GroupFlag, help="the query's sensitivity (default 1)")
    g.add_argument(
        "--sampling-prob",
        type=float,
        action=_GroupFlag,
        help="Poisson subsampling rate q of each run (default 1: no sampling)",
    )
    g.add_argument("--steps", type=int, action=_GroupFlag, help="number of runs (default 1)")
    p.add_argument("--plan", help="the plan as a JSON file: a list of groups with the keys " + ", ".join(_GROUP))
    p.set_defaults(groups=None)
