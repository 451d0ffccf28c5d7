"""``dpjax tune``: the tuners of :mod:`optimize`, each printed beside its baseline.

* ``dpjax tune boosted --region absolute --tau 5 --rho 0.8 --sensitivity 4 --delta 1e-5``:
  the PB-DP kernel scale of least exact ε (:func:`optimize.tune_boosted`; ``--kernel``, any
  registry kernel or ``package.module:Class``; ``--compositions T`` for T releases) beside the
  plain kernel meeting the same utility constraint.
* ``dpjax tune mixture --epsilon E``: the piecewise mixture (``--kernel laplace`` or
  ``geometric``) of least E|X| (or E X², ``--objective variance``) at an exact pure ε — or an
  (ε, δ) target with ``--delta`` (:func:`optimize.tune_mixture`) — beside the plain kernel.
* ``dpjax tune composite --epsilon E --window LO HI``: the least-variance bounded, unbiased
  composite mechanism (:func:`optimize.tune_composite`) beside Laplace(W/ε).
"""

from __future__ import annotations

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
    refuse_flags,
    reported,
)

__all__ = ["add_parser"]


def _f(x) -> float:
    return float(np.asarray(x))


def _boosted(args):
    import optimize

    from dpjax.cli.release_public import build_region

    rho = check_probability("--rho", args.rho)
    delta = check_probability("--delta", args.delta)
    sensitivity = check_positive("--sensitivity", args.sensitivity)
    tau = check_positive("--tau", args.tau)
    if args.region == "relative":
        check_positive("--theta", args.theta)
    else:
        refuse_flags(args, ["theta"], "to --region absolute (theta is the relative region's)")
    compositions = check_steps("--compositions", args.compositions)
    cls = kernel_class(args.kernel)
    region = build_region(args.region, args.theta, tau)
    with progress("tuning"):
        res = optimize.tune_boosted(
            kernel=cls(**{cls.scale_name: 1.0}),
            region=region,
            rho=rho,
            sensitivity=sensitivity,
            delta=delta,
            compositions=compositions,
        )
    eps, base_eps = _f(res.epsilon), _f(res.baseline_epsilon)
    payload = {
        "tuned": parameters(res.mechanism),
        "epsilon": eps,
        "boosting_rate": _f(res.boosting_rate),
        "baseline": parameters(res.baseline) if res.baseline is not None else None,
        "baseline_epsilon": base_eps,
        "delta": delta,
        "compositions": compositions,
        "improvement": _f(res.improvement),
    }
    over = f" over {compositions} releases" if compositions > 1 else ""
    lines = [
        f"dpjax tune boosted — PB-DP meeting Pr[release in S(Q)] >= {rho:g}, S = {describe(region)}, "
        f"sensitivity {sensitivity:g}",
        f"PB-DP: {describe(res.mechanism)}, boosting rate q = {_f(res.boosting_rate):.4f}",
        f"  privacy: epsilon = {eps:.6g} at delta = {delta:g}{over} (exact)",
    ]
    if res.baseline is None:
        lines.append(f"baseline: no plain {cls.__name__} meets the constraint")
    else:
        lines += [
            f"baseline: {describe(res.baseline)} (the plain kernel meeting the same constraint)",
            f"  privacy: epsilon = {base_eps:.6g} at delta = {delta:g}{over} (exact); "
            f"PB-DP saves {_f(res.improvement):.1%}",
        ]
    return payload, lines


def _mixture(args):
    import optimize

    eps = check_positive("--epsilon", args.epsilon)
    delta = None if args.delta is None else check_probability("--delta", args.delta)
    sensitivity = check_positive("--sensitivity", args.sensitivity)
    kernel = args.kernel.replace("-", "_")
    if kernel not in ("laplace", "geometric"):
        raise ValueError(
            f"--kernel: dpjax tune mixture tunes laplace (Lap_m) or geometric (Geom_m), got {args.kernel!r}"
        )
    objective = args.objective or "mean_abs"
    if objective not in ("mean_abs", "variance"):
        raise ValueError(f"--objective: mean_abs or variance for a mixture, got {objective!r}")
    with progress("tuning"):
        res = optimize.tune_mixture(eps, delta=delta, sensitivity=sensitivity, kernel=kernel, objective=objective)
    name = "E|X|" if objective == "mean_abs" else "E X^2"
    target = f"pure epsilon {eps:g}" if delta is None else f"epsilon {eps:g} at delta {delta:g}"
    payload = {
        "tuned": parameters(res.mechanism),
        "objective": objective,
        "value": _f(res.objective),
        "baseline_value": _f(res.baseline_objective),
        "ratio": _f(res.ratio),
        "pure_epsilon": _f(res.pure_epsilon),
        "improved": bool(np.asarray(res.improved)),
        "target_epsilon": eps,
        "delta": delta,
        "epsilon": None if res.epsilon is None else _f(res.epsilon),
    }
    lines = [
        f"dpjax tune mixture — the {kernel} mixture of least {name} at {target}, sensitivity {sensitivity:g}",
        f"tuned: {describe(res.mechanism)}: {name} = {_f(res.objective):.6g}, exact pure epsilon = "
        f"{_f(res.pure_epsilon):.6g}" + ("" if res.epsilon is None else f", epsilon = {_f(res.epsilon):.6g}"),
        f"baseline: the plain kernel at the same target: {name} = {_f(res.baseline_objective):.6g} "
        f"(ratio {_f(res.ratio):.4f}" + ("" if bool(np.asarray(res.improved)) else ", no mixture beats it") + ")",
    ]
    return payload, lines


def _composite(args):
    import optimize

    eps = check_positive("--epsilon", args.epsilon)
    if args.window is None:
        raise ValueError("--window: dpjax tune composite needs the public input window --window LO HI")
    lo, hi = (float(x) for x in args.window)
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise ValueError(f"--window must be two finite numbers LO < HI, got {lo:g} {hi:g}")
    objective = args.objective or "centre"
    with progress("tuning"):
        res = optimize.tune_composite(
            eps, window=(lo, hi), activation=args.activation, base=args.base, objective=objective
        )
    m = res.mechanism
    payload = {
        "tuned": parameters(m),
        "objective": objective,
        "variance": _f(res.variance),
        "baseline_variance": _f(res.baseline_variance),
        "ratio": _f(res.ratio),
        "centre_variance": _f(res.centre_variance),
        "worst_variance": _f(res.worst_variance),
    }
    lines = [
        f"dpjax tune composite — least {objective} variance at epsilon {eps:g} on the window [{lo:g}, {hi:g}]",
        f"tuned: composite {m.label} (eps={_f(m.epsilon):.6g}, k={_f(m.k):.6g}, m={_f(m.m):.6g}, "
        f"y={_f(m.y):.6g}): variance {_f(res.variance):.6g} (centre {_f(res.centre_variance):.6g}, "
        f"worst {_f(res.worst_variance):.6g})",
        f"baseline: Laplace(W/eps): variance {_f(res.baseline_variance):.6g} (ratio {_f(res.ratio):.4f})",
    ]
    return payload, lines


def add_parser(sub) -> None:
    """Add the ``tune`` subcommand (its ``boosted``, ``mixture`` and ``composite`` tuners) to the subparsers ``sub``.

    Args:
      sub: the ``dpjax`` parser's subparsers.
    """
    p = sub.add_parser(
        "tune",
        help="the PB-DP, mixture and composite tuners, beside their baselines",
        description=__doc__.split("\n\n")[0],
    )
    tuners = p.add_subparsers(dest="tuner", required=True, metavar="{boosted,mixture,composite}")
    b = tuners.add_parser("boosted", help="the PB-DP kernel scale of least exact epsilon")
    b.add_argument(
        "--kernel",
        default="gaussian",
        metavar="{" + ",".join(kernel_names()) + ",package.module:Class}",
        help="kernel the boost re-weights (default gaussian)",
    )
    b.add_argument(
        "--region",
        choices=("relative", "absolute"),
        default="absolute",
        help="preferred region: absolute |Y-Q| <= tau (default) or relative |Y-Q| <= theta|Q| + tau",
    )
    b.add_argument("--tau", type=float, required=True, help="absolute error / offset")
    b.add_argument("--theta", type=float, default=0.05, help="relative error (relative region; default 0.05)")
    b.add_argument("--rho", type=float, required=True, help="required Pr[release in S(Q)]")
    b.add_argument("--sensitivity", type=float, default=1.0, help="the query's sensitivity (default 1)")
    b.add_argument("--delta", type=float, required=True, help="minimise epsilon at this delta")
    b.add_argument("--compositions", type=int, default=1, help="number of releases T (default 1)")
    m = tuners.add_parser("mixture", help="the piecewise mixture of least E|X| (or E X^2) at an exact epsilon")
    m.add_argument("--epsilon", type=float, required=True, help="the exact pure epsilon target (or epsilon at --delta)")
    m.add_argument("--delta", type=float, help="an (epsilon, delta) target instead (laplace only)")
    m.add_argument("--sensitivity", type=float, default=1.0, help="the query's sensitivity (default 1)")
    m.add_argument("--kernel", default="laplace", help="laplace (Lap_m, default) or geometric (Geom_m)")
    m.add_argument("--objective", help="mean_abs (default) or variance")
    c = tuners.add_parser("composite", help="the least-variance bounded, unbiased composite mechanism")
    c.add_argument("--epsilon", type=float, required=True, help="the nominal epsilon")
    c.add_argument("--window", type=float, nargs=2, required=True, metavar=("LO", "HI"), help="public input window")
    c.add_argument("--activation", default="rectangle", help="rectangle (A1, default), half_sine (A2), triangle (A3)")
    c.add_argument("--base", default="uniform", help="uniform (B1, default) or quartic (B2)")
    c.add_argument("--objective", help="centre (default), worst or average")
    for q, compute in ((b, _boosted), (m, _mixture), (c, _composite)):
        q.add_argument("--json", action="store_true", help="print the result as one JSON object")
        q.set_defaults(run=reported(compute))
