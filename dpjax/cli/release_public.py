"""``dpjax release``: aggregate a table by group and release it with noise.

With no arguments it releases the embedded default dataset (weekly-average daily step counts of
4000 synthetic health-app users, :mod:`dpjax.data`): the sum of steps per age group, each
user's contribution clipped to ``--clip``. Groups are disjoint, so the whole table costs the
privacy of one release (parallel composition); the privacy spent is computed exactly by
:mod:`accounting` from the output law of the mechanism actually run.

Mechanisms come from the kernel registry (:func:`dpjax.kernels.by_name`) or a kernel class
``package.module:Class``, calibrated by the class's own calibrator unless its scale is given.
``--mechanism boosted`` states a utility constraint instead of a budget: the release lies in
the preferred region ``S(Q)`` with probability ``--rho``; the command tunes the scale of the
privacy-boosted (PB-DP) kernel (``--kernel``) for the least exact ε at ``--delta`` and prints
it next to the plain kernel meeting the same constraint. ``--mechanism composite --window LO
HI`` releases group means with the bounded, unbiased composite mechanism and prints its true
worst-case ε*. ``--per-record-budget COLUMN`` releases under per-record DP (:mod:`dpjax.prdp`;
:mod:`dpjax.cli.release_prdp`).

What is released and what is not: the output file holds the group names and the released
values only; the true values are written only with ``--include-true-values`` (a demo: a
warning says the file is then no release). On screen the true values are shown beside the
released ones for the embedded demo dataset (synthetic) and with ``--include-true-values``;
for the user's own ``--input`` only the released values are shown. A flag that does not apply
to the chosen mechanism is refused, naming it.
"""

from __future__ import annotations

import contextlib

import numpy as np

from dpjax.cli._common import (calibrated_kernel, calibration_parameters, check_probability, describe, emit, given,
                               kernel_class, kernel_names, parameters, progress, refuse_flags, scale_flag)
from dpjax.cli._release_common import (_BOOSTED, _COMPOSITE, _DEMO, _PRDP, FLOAT_NUMERICS, _allow, _key, _print_rows,
                                       _report, _true_shown, _write)
from dpjax.cli.io import check_output, read_table

__all__ = ["add_parser", "run", "aggregate", "build_mechanism"]

REGIONS = ("relative", "absolute")
PRDP_METHODS = ("framework", "extension")


def aggregate(names, inverse, values, statistic: str, clip: float):
    """Per-group sums of clipped values (or counts) and the query's L1 sensitivity (``names``, ``inverse``:
    the groups as :func:`dpjax.cli.io.read_table` gives them).

    Values are clipped to ``[-clip, clip]`` so that adding or removing one row
    changes one group's sum by at most ``clip``; a count changes by at most 1.
    """
    if statistic == "count":
        return names, np.bincount(inverse, minlength=len(names)).astype(float), 1.0
    clipped = np.clip(values, -clip, clip)
    return names, np.bincount(inverse, weights=clipped, minlength=len(names)), float(clip)


def build_mechanism(name: str, sensitivity: float, epsilon: float, delta: float, scale=None, **shape):
    """The kernel ``name`` (a registry name or ``package.module:Class``) at ``scale`` if given, else
    calibrated to (ε, δ) at ``sensitivity`` by its class (a piecewise mixture: the paper's
    parametrisation ε, r, c, given as ``shape``)."""
    cls = kernel_class(name, "--mechanism")
    if scale is not None:
        try:
            return cls(**{cls.scale_name: scale})
        except TypeError as exc:  # a class with required parameters beyond its scale
            raise ValueError(f"{scale_flag(cls)}: --mechanism {name} needs more than its scale ({exc})") from None
    missing = [f"--{p}" for p in calibration_parameters(cls) if shape.get(p) is None]
    if missing:
        raise ValueError(f"{' and '.join(missing)}: --mechanism {name} is calibrated from --epsilon with "
                         f"{', '.join(missing)} (the paper's parametrisation)")
    return calibrated_kernel(cls, epsilon, delta, sensitivity,
                             **{p: shape[p] for p in calibration_parameters(cls)})


def _clip_text(args, sensitivity) -> str:
    if args.statistic == "count":
        return "the count's sensitivity 1"
    return f"--clip {args.clip:g} (the sensitivity {sensitivity:g})"


@contextlib.contextmanager
def _named(origin: str):
    """Re-raise a ``ValueError`` that names an internal parameter as one naming the flag it came from."""
    try:
        yield
    except ValueError as exc:
        if str(exc).startswith("--"):
            raise
        raise ValueError(f"{origin}: {exc}") from None


def _privacy_spent(mech, sensitivity: float, delta: float):
    """(ε at δ, pure ε or inf) of one release of ``mech`` at ``sensitivity``: the exact PLD, pessimistic."""
    import accounting

    pld = accounting.pld(mech, sensitivity=sensitivity)
    eps = float(np.asarray(pld.get_epsilon_for_delta(delta)))
    pure = getattr(pld, "pure_epsilon", None)
    pure = float(np.asarray(pure() if callable(pure) else pure)) if pure is not None else float("inf")
    return eps, pure


def _privacy_text(eps, pure, delta) -> str:
    text = f"epsilon = {eps:.4f} at delta = {delta:g} (exact PLD accounting, pessimistic)"
    if np.isfinite(pure):
        text += f"; pure epsilon = {pure:.4f}"
    return text


def build_region(name: str, theta: float, tau: float):
    """The preferred region of a ``--mechanism boosted`` release."""
    import dpjax

    if name == "relative":
        return dpjax.RelativeError(theta=theta, tau=tau)
    if name == "absolute":
        return dpjax.AbsoluteError(tau=tau)
    raise ValueError(f"--region must be one of {REGIONS}, got {name!r}")


def build_boosted(region, rho: float, sensitivity: float, delta: float, scale=None, kernel: str = "gaussian"):
    """PB-DP with a ``kernel`` (a ``--kernel`` choice) meeting ``Pr[M(Q) ∈ S(Q)] ≥ rho``, and the
    plain kernel meeting it too.

    The kernel scale is ``scale`` if given, else tuned for the least exact ε at ``delta``
    (:func:`optimize.tune_boosted`); the plain kernel has the largest scale meeting the
    constraint alone (:func:`optimize.base_sigma`). Returns ``[(label, mechanism, exact ε), ...]``,
    the boosted mechanism first. Both ε are exact single-release ε at ``delta`` from the same
    accountant (:func:`accounting.exact.epsilon`: closed forms of the output laws, worst
    neighbouring pair; the plain kernel's as the boosted mechanism at its scale, where q = 0
    and the law is the kernel's own), computed for the mechanisms as built, in the default
    float precision they sample with.
    """
    import dpjax
    import optimize
    from accounting import exact

    check_probability("--rho", rho)
    check_probability("--delta", delta)
    cls = kernel_class(kernel)
    template = cls(**{cls.scale_name: 1.0})
    if scale is None:
        with progress("tuning the PB-DP kernel scale"):
            scale = float(optimize.tune_boosted(kernel=template, region=region, rho=rho, sensitivity=sensitivity,
                                                delta=delta).sigma)

    def boost(s):  # the kernel at scale s, boosted
        mech = dpjax.PrivacyBoosted(cls(**{cls.scale_name: s}), region, rho)
        return mech, float(exact.epsilon(mech, delta, sensitivity))

    boosted, eps = boost(scale)
    at_base, plain_eps = boost(float(optimize.base_sigma(region, rho, template)))
    plain = at_base.kernel
    return [("PB-DP", boosted, eps), (type(plain).__name__, plain, plain_eps)]


def _release_values(key, true, mech, numerics="float"):
    """``dpjax.release`` of the group answers: floats through a continuous mechanism; for a
    discrete one, the rounded answers as integers end to end (int32, or int64 in an x64 context
    where a sum does not fit int32 with room for the noise), never through a float.
    ``numerics="exact"``: the exact tier (integer-only noise on a lattice), float64 answers in."""
    import jax

    import dpjax

    if not mech.discrete:
        if numerics == "exact":
            with jax.enable_x64(True):
                return np.asarray(dpjax.release(key, true.astype(np.float64), mech, numerics="exact"), dtype=float)
        return np.asarray(dpjax.release(key, true.astype(np.float32), mech), dtype=float)
    ints = np.floor(true + 0.5)  # half up: answers Δ apart stay ⌈Δ⌉ apart (half to even: 0.5, 1.5 → 0, 2)
    if np.abs(ints).max() < 2**30:
        return np.asarray(dpjax.release(key, ints.astype(np.int32), mech, numerics=numerics)).astype(np.int64)
    if np.abs(ints).max() >= 2**62:
        raise ValueError(f"--statistic: a group's answer {np.abs(ints).max():.3g} is beyond the "
                         "int64 range of a discrete release")
    with jax.enable_x64(True):
        return np.asarray(dpjax.release(key, ints.astype(np.int64), mech, numerics=numerics))


def _numerics(requested, mech):
    """(tier, mechanism accounted): the exact tier and ``mech.exact_lattice()`` (the mechanism actually
    run) where ``mech`` has one, unless ``--numerics float``; ``--numerics exact`` on a mechanism
    without an exact sampler is refused, naming the flag."""
    if requested == "float":
        return "float", mech
    try:
        return "exact", mech.exact_lattice()
    except ValueError as exc:
        if requested == "exact":
            raise ValueError(f"--numerics exact: {exc}") from None
        return "float", mech


def _numerics_line(tier, lattice) -> str:
    if tier == "float":
        return FLOAT_NUMERICS
    g = float(np.asarray(lattice.granularity))
    return (f"numerics: exact (integer-only noise on the lattice {g:g}·Z; accounted as the mechanism run, "
            f"{describe(lattice.noise)} at the lattice sensitivity)")


# ----------------------------------------------------------------------------------
# composite
# ----------------------------------------------------------------------------------
def build_composite(window, epsilon: float, activation: str = "rectangle", base: str = "uniform"):
    """``--mechanism composite``: the least-variance :class:`dpjax.Composite` at ``epsilon`` on the
    public ``window`` (variance at the window's centre, the paper's objective), built with
    ``clip=True`` so that float32 rounding of an answer at the window's edge stays inside."""
    import dpjax
    import optimize

    if window is None:
        raise ValueError("--window: --mechanism composite needs the public input window --window LO HI")
    lo, hi = (float(x) for x in window)
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise ValueError(f"--window must be two finite numbers LO < HI, got {lo:g} {hi:g}")
    t = optimize.tune_composite(float(epsilon), window=(lo, hi), activation=activation, base=base).mechanism
    return dpjax.Composite(t.activation, t.base, *(float(np.asarray(x)) for x in (t.epsilon, t.k, t.m, t.y)),
                           window=(lo, hi), clip=True)


def _composite_command(args) -> int:
    """Group means of the value column clipped to ``--window``, released by the composite mechanism."""
    import jax

    import accounting

    _allow(args, _COMPOSITE | {"epsilon", "numerics"}, "to --mechanism composite (a bounded release of means on "
                                                      "--window; its privacy is the exact ε*, no δ)")
    if args.statistic not in (None, "mean"):
        raise ValueError(f"--statistic: --mechanism composite releases group means, got {args.statistic!r}")
    mech = build_composite(args.window, args.epsilon, args.activation, args.base)
    tier, _ = _numerics(args.numerics, mech)
    lo, hi = (float(x) for x in args.window)
    check_output(args.output, [args.input])
    names, inverse, values = read_table(args.input, args.value_column, args.group_by)
    clipped = np.clip(values, lo, hi)
    true = np.bincount(inverse, weights=clipped) / np.bincount(inverse)
    released = _release_values(_key(args.seed), true, mech)
    star = accounting.composite.epsilon_star(mech)
    _write(args, ["group", "released_mean"], list(zip(names, released)), [("true_mean", true)])
    width = hi - lo
    with jax.enable_x64(True):
        out_lo, out_hi = (float(np.asarray(x)) for x in mech.output_range())
        var = float(np.asarray(mech.variance(0.5 * (lo + hi))))
    lap = 2.0 * (width / args.epsilon) ** 2
    payload = {"statistic": "mean", "mechanism": parameters(mech), "epsilon_star": float(star.epsilon),
               "nominal_epsilon": float(star.nominal), "numerics": tier, "output_range": [out_lo, out_hi],
               "groups": [{"group": str(n), "released": float(r)} for n, r in zip(names, released)]}
    with _report(args):
        if args.json:
            return emit(args, payload, ()) or 0
        source = args.input or _DEMO
        print(f"dpjax release — mean of {args.value_column!r} by {args.group_by or '(all)'} ({source})")
        _print_rows(names, true if _true_shown(args) else None, [released], ["released"], args.show, args.output)
        print(f"values clipped to the window [{lo:g}, {hi:g}]; any two answers of the window are neighbours "
              f"(W = {width:g}); groups are disjoint (parallel composition)")
        print(f"mechanism: composite {mech.label} (eps={float(mech.epsilon):.6g}, k={float(mech.k):.6g}, "
              f"m={float(mech.m):.6g}, y={float(mech.y):.6g}); unbiased, every release in "
              f"[{out_lo:,.1f}, {out_hi:,.1f}]")
        print(f"variance at the window's centre {var:.4g} (Laplace(W/eps) on the same window: {lap:.4g}, "
              f"ratio {var / lap:.3f})")
        print(f"privacy: epsilon* = {float(star.epsilon):.4f} (exact worst pair over the window, never below the "
              f"truth); nominal epsilon = {float(star.nominal):.4f}")
        print(_numerics_line(tier, None))
    return 0


# ----------------------------------------------------------------------------------
# kernels and PB-DP
# ----------------------------------------------------------------------------------
def _check_kernel_flags(args):
    """Refuse the flags that do not apply to ``--mechanism``; return its class (None for boosted)."""
    if args.mechanism == "boosted":
        cls = kernel_class(args.kernel)
        own = {"sigma" if cls.scale_name == "sigma" else "scale"}
        for dest in ({"scale", "sigma"} - own) & set(given(args)):
            raise ValueError(f"{given(args)[dest]} does not apply to a {args.kernel} kernel: its scale is "
                             f"{scale_flag(cls)}")
        if args.region != "relative":
            refuse_flags(args, ["theta"], f"to --region {args.region} (theta is the relative region's)")
        _allow(args, _BOOSTED | own | {"delta", "numerics"},
               "to --mechanism boosted (a utility constraint --region/--tau/--rho instead of a budget; the "
               "kernel's scale is tuned, or given by " + scale_flag(cls) + ")")
        return None
    cls = kernel_class(args.mechanism, "--mechanism")
    flag = scale_flag(cls)
    own = "sigma" if flag == "--sigma" else "scale"
    if own not in given(args) and "scale" not in given(args) and "sigma" not in given(args):
        shape = set(calibration_parameters(cls))
        _allow(args, {"epsilon", "delta", "numerics"} | shape, f"to --mechanism {args.mechanism}")
        return cls
    if ({"scale", "sigma"} - {own}) & set(given(args)):
        other = "--scale" if own == "sigma" else "--sigma"
        raise ValueError(f"{given(args).get(other.strip('-'), other)} does not apply to --mechanism "
                         f"{args.mechanism}: its scale is {flag}")
    _allow(args, {own, "delta", "numerics"}, f"to --mechanism {args.mechanism} with {flag} (the scale is given, "
                                             "not calibrated)")
    return cls


def _release_command(args) -> int:
    import jax

    if args.mechanism == "composite":
        return _composite_command(args)
    if args.statistic == "mean":
        raise ValueError("--statistic mean: only with --mechanism composite (a mean is released on a public window)")
    cls = _check_kernel_flags(args)
    args.statistic = args.statistic or "sum"
    check_output(args.output, [args.input])
    names, inverse, values = read_table(args.input, args.value_column, args.group_by)
    names, true, sensitivity = aggregate(names, inverse, values, args.statistic, args.clip)
    if (kernel_class(args.kernel) if args.mechanism == "boosted" else cls).discrete:
        # a discrete release rounds the answers half up to the integers (_release_values): rounded
        # neighbours differ by up to ⌈Δ⌉, the sensitivity the release has (calibrated and accounted)
        sensitivity = float(np.ceil(sensitivity))
    origin = _clip_text(args, sensitivity)
    if args.mechanism == "boosted":
        import dpjax

        region = build_region(args.region, args.theta, args.tau if args.tau is not None else 2.0 * sensitivity)
        kcls = kernel_class(args.kernel)
        check_probability("--rho", args.rho)
        # the exact tier is a capability of the mechanism: refused before any tuning where it has none
        tier, _ = _numerics(args.numerics, dpjax.PrivacyBoosted(kcls(**{kcls.scale_name: 1.0}), region, args.rho))
        given_scale = args.sigma if kcls.scale_name == "sigma" else args.scale
        with _named(origin):
            releases = build_boosted(region, args.rho, sensitivity, args.delta, given_scale, args.kernel)
        runs = [_numerics(tier, mech)[1] for _, mech, _ in releases]
        if tier == "exact":  # the privacy of the lattice mechanisms actually run
            with _named(origin):
                releases = [(label, mech, _privacy_spent(run, sensitivity, args.delta)[0])
                            for (label, mech, _), run in zip(releases, runs)]
    else:
        user_scale = args.sigma if cls.scale_name == "sigma" else args.scale
        with _named(scale_flag(cls) if user_scale is not None else f"{origin} with --epsilon {args.epsilon:g}"):
            mech = build_mechanism(args.mechanism, sensitivity, args.epsilon, args.delta, user_scale,
                                   r=args.r, c=args.c)
        releases = [("released", mech, None)]
        tier, ran = _numerics(args.numerics, mech)
        runs = [ran]
        try:
            with _named(origin):
                eps, pure = _privacy_spent(ran, sensitivity, args.delta)
        except ValueError as exc:
            if tier != "exact":
                raise
            raise ValueError(f"{exc}; the exact tier's lattice mechanism cannot be accounted here: use "
                             f"--numerics float or a larger {scale_flag(cls)}") from None
    key = _key(args.seed)
    keys = jax.random.split(key, len(releases)) if len(releases) > 1 else [key]
    released = [_release_values(k, true, mech, tier) for k, (_, mech, _) in zip(keys, releases)]

    labels = [label for label, _, _ in releases]
    cols = ["released"] if len(labels) == 1 else [label.lower().replace("-", "") for label in labels]
    _write(args, ["group"] + [f"{c}_{args.statistic}" for c in cols], list(zip(names, *released)),
           [(f"true_{args.statistic}", true)])
    payload = {"statistic": args.statistic, "sensitivity": sensitivity, "delta": args.delta, "numerics": tier,
               "releases": [{"label": label, "mechanism": parameters(mech), "run": parameters(run),
                             "values": {str(n): float(v) for n, v in zip(names, vals)}}
                            for (label, mech, _), run, vals in zip(releases, runs, released)]}
    if args.mechanism == "boosted":
        for entry, (_, _, e) in zip(payload["releases"], releases):
            entry["epsilon"] = e
    else:
        payload["releases"][0].update(epsilon=eps, pure_epsilon=pure)
    with _report(args):
        if args.json:
            return emit(args, payload, ()) or 0
        source = args.input or _DEMO
        print(f"dpjax release — {args.statistic} of {args.value_column!r} by {args.group_by or '(all)'} ({source})")
        _print_rows(names, true if _true_shown(args) else None, released, labels, args.show, args.output)
        print(f"sensitivity {sensitivity:g} (values clipped to ±{args.clip:g}); groups are disjoint "
              "(parallel composition)")
        if args.mechanism == "boosted":
            region = releases[0][1].region
            print(f"utility: Pr[release in S(Q)] >= {args.rho:g} for every true answer, S = {describe(region)}")
            for label, mech, e in releases:
                extra = f", boosting rate q = {float(mech.boosting_rate):.4f}" if label == "PB-DP" else ""
                print(f"{label}: {describe(mech)}{extra}")
                print(f"  privacy: epsilon = {e:.4f} at delta = {args.delta:g} (exact, worst neighbouring pair)")
            print(_numerics_line(tier, runs[0] if tier == "exact" else None))
        else:
            print(f"mechanism: {describe(mech)}")
            print(f"privacy: {_privacy_text(eps, pure, args.delta)}")
            print(_numerics_line(tier, ran))
            if calibration_parameters(type(mech)):
                print(_mixture_line(mech, sensitivity))
    return 0


def _mixture_line(mech, sensitivity: float) -> str:
    """The exact pure ε next to the paper's general privacy budget ζ (NOT CERTIFIED)."""
    import jax

    from accounting import mixture_paper

    zeta = float(np.asarray(mixture_paper.general_privacy_budget(mech, sensitivity)))
    with jax.enable_x64(True):
        pure = float(np.asarray(mech.pure_epsilon(sensitivity)))
    return (f"exact pure epsilon = {pure:.4f} (tight); the paper's general privacy budget zeta = {zeta:.4f} "
            "(NOT CERTIFIED: an average of the loss, not a DP guarantee)")


# ----------------------------------------------------------------------------------
# the command line
# ----------------------------------------------------------------------------------
def run(args) -> int:
    if args.show < 0:
        raise ValueError(f"--show must be a non-negative number of groups, got {args.show}")
    if args.clip <= 0 or not np.isfinite(args.clip):
        raise ValueError(f"--clip must be a positive finite number, got {args.clip}")
    if args.per_record_budget is not None:
        if args.statistic not in (None, "sum", "count", "mean"):
            raise ValueError(f"--statistic: --per-record-budget releases one of sum, count, mean, got {args.statistic!r}")
        from dpjax.cli.release_prdp import release_per_record

        return release_per_record(args)
    refuse_flags(args, sorted(_PRDP - {"per_record_budget"}), "without --per-record-budget")
    from dpjax.cli import release_table

    if release_table.wanted(args):
        return release_table.release_table(args, _key(args.seed))
    return _release_command(args)


def add_parser(sub) -> None:
    kernels = kernel_names()
    mechanisms = kernels + ("boosted", "composite")
    r = sub.add_parser("release", help="aggregate a table by group and release it with calibrated noise",
                       description=__doc__.split("\n\n")[0])
    r.add_argument("--input", help="CSV file with a header row, - for standard input (default: the embedded "
                                   "step-count dataset)")
    r.add_argument("--value-column", default="steps", help="numeric column to aggregate (default: steps)")
    r.add_argument("--group-by", default="age_group", help="column to group by (default: age_group)")
    r.add_argument("--statistic",
                   help="sum (default) or count; mean with --mechanism composite (its default); several, comma-"
                        "separated (count,count_units,sum,mean,variance or sum:COL:LOW:HIGH, quantile:COL:Q:LOW:HIGH), "
                        "go through the table layer")
    r.add_argument("--clip", type=float, default=20000.0, help="per-row clipping bound for sums (default 20000)")
    r.add_argument("--mechanism", default="laplace", metavar="{" + ",".join(mechanisms) + ",package.module:Class}",
                   help="noise mechanism (default laplace); a kernel class is calibrated by its own "
                        "from_epsilon, or released at its --scale/--sigma")
    r.add_argument("--epsilon", type=float, default=1.0, help="target epsilon for calibration (default 1)")
    r.add_argument("--delta", type=float, default=1e-6, help="delta for Gaussian calibration and reporting")
    r.add_argument("--scale", type=float,
                   help="the kernel's scale for a scale-parametrised kernel (instead of --epsilon); boosted: the "
                        "kernel's scale (no tuning)")
    r.add_argument("--sigma", type=float,
                   help="the kernel's sigma for a Gaussian-type kernel (instead of --epsilon); boosted: the "
                        "kernel's sigma (no tuning)")
    b = r.add_argument_group("boosted (PB-DP): a utility constraint instead of a budget")
    b.add_argument("--kernel", default="gaussian", metavar="{" + ",".join(kernels) + ",package.module:Class}",
                   help="kernel the boost re-weights, compared with the same plain kernel meeting the constraint "
                        "(default gaussian); any dpjax.AdditiveMechanism subclass as package.module:Class")
    b.add_argument("--region", choices=REGIONS, default="relative",
                   help="preferred region S(Q): relative error |Y-Q| <= theta|Q| + tau, or absolute |Y-Q| <= tau")
    b.add_argument("--theta", type=float, default=0.05, help="relative error (default 0.05)")
    b.add_argument("--tau", type=float, help="absolute error / offset (default: 2 x sensitivity)")
    b.add_argument("--rho", type=float, default=0.9, help="required Pr[release in S(Q)] (default 0.9)")
    r.add_argument("--r", type=float, help="laplace-mixture / geometric-mixture: outer/inner ratio r (outer eps = r*eps)")
    r.add_argument("--c", type=float, help="laplace-mixture / geometric-mixture: breakpoint c (output units; integer "
                                           "for geometric-mixture)")
    k = r.add_argument_group("composite (bounded, unbiased): group means on a public window")
    k.add_argument("--window", type=float, nargs=2, metavar=("LO", "HI"),
                   help="public input window: values are clipped to it; every pair of it is neighbouring")
    k.add_argument("--activation", default="rectangle", help="rectangle (A1, default), half_sine (A2), triangle (A3)")
    k.add_argument("--base", default="uniform", help="uniform (B1, default) or quartic (B2)")
    r.add_argument("--numerics", choices=("exact", "float"),
                   help="noise tier: exact (integer-only sampler on a data-independent lattice, the default where the "
                        "mechanism has one) or float (idealized numerics; the default where it has none)")
    r.add_argument("--seed", type=int, help="integer seed (default: a secure key from os.urandom)")
    r.add_argument("--output", help="write the released values (group,released) to this CSV file; - for standard "
                                    "output (the report then goes to stderr)")
    r.add_argument("--include-true-values", action="store_true",
                   help="demo only: also write the true, unprotected values (a warning says so)")
    r.add_argument("--show", type=int, default=10, help="groups shown on screen (default 10)")
    r.add_argument("--json", action="store_true", help="print the result as one JSON object instead of the report")
    t = r.add_argument_group("table release (dpjax.table): privacy unit, contribution bounds, group selection")
    t.add_argument("--privacy-unit", metavar="COL", help="column identifying a person (default: each row is one)")
    t.add_argument("--max-groups-per-unit", type=int, metavar="K", help="groups a unit may contribute to (default 1)")
    t.add_argument("--max-rows-per-group", type=int, metavar="M", help="rows a unit may contribute per group (default 1)")
    t.add_argument("--groups", metavar="FILE", help="CSV/Parquet of public group keys (default: private selection)")
    g = r.add_argument_group("per-record DP (dpjax.prdp): each row's own budget")
    g.add_argument("--per-record-budget", metavar="COLUMN",
                   help="column with each row's privacy budget E(r); releases --statistic per group under "
                        "per-record DP (embedded dataset: privacy_budget)")
    g.add_argument("--eps-min", type=float,
                   help="least budget of the domain, public (embedded dataset: 0.02, the strictest setting)")
    g.add_argument("--eps-max", type=float, help="largest budget (cap), public (embedded dataset: 4)")
    g.add_argument("--beta", type=float, default=0.1, help="failure probability of the level search (default 0.1)")
    g.add_argument("--prdp-method", choices=PRDP_METHODS, default="framework",
                   help="sum: Algorithm 2 with the universal sum (default) or the Section 5.2 extension")
    r.set_defaults(run=run)
