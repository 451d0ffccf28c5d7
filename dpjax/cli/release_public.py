"""``dpjax release --mechanism boosted|composite``: releases on public groups without a calibrated kernel.

They state a utility constraint or a bounded output instead of a kernel calibrated to a budget, on public
groups only (they have no private group selection: the keys come from ``--groups FILE``, or for the embedded
dataset from its public domain, :data:`dpjax.data.AGE_GROUPS` and :data:`dpjax.data.REGIONS`; rows of other
groups are dropped, a listed group without rows is released from an empty sum).

``--mechanism boosted`` states a utility constraint instead of a budget: the release lies in
the preferred region ``S(Q)`` with probability ``--rho``; the command tunes the scale of the
privacy-boosted (PB-DP) kernel (``--kernel``) for the least exact ε at ``--delta`` and prints
it next to the plain kernel meeting the same constraint. ``--mechanism composite --window LO
HI`` releases group means with the bounded, unbiased composite mechanism and prints its true
worst-case ε*. Each row is one person (said once on stderr for the user's own ``--input``).
Groups are disjoint, so the whole table costs the privacy of one release (parallel composition);
the privacy spent is computed exactly by :mod:`accounting` from the output law of the mechanism
actually run.
"""

from __future__ import annotations

import contextlib

import numpy as np

from dpjax.cli._common import (
    check_probability,
    describe,
    emit,
    given,
    kernel_class,
    parameters,
    progress,
    refuse_flags,
    scale_flag,
)
from dpjax.cli._release_common import (
    _BOOSTED,
    _COMPOSITE,
    _DEMO,
    FLOAT_NUMERICS,
    _allow,
    _key,
    _print_rows,
    _report,
    _true_shown,
    _write,
    public_groups,
    released,
)
from dpjax.cli.io import check_output, read_table

__all__ = ["run", "aggregate", "build_region", "build_boosted", "build_composite", "public_table"]

REGIONS = ("relative", "absolute")


def public_table(args):
    """The rows of ``--input`` (or the embedded one-row-per-user table) on the public groups.

    The public groups as :func:`dpjax.cli._release_common.public_groups` reads them; rows of other groups are
    dropped.

    Args:
      args: the parsed flags.

    Returns:
      ``(names, inverse, values)``: the public group names, each kept row's group index, its value.

    Raises:
      ValueError: any refusal of the input or of ``--groups`` (naming the flag).
    """
    from dpjax.data import AGE_GROUPS, REGIONS as AREAS

    names, inverse, values = read_table(args.input, args.value_column, args.group_by)
    names, inverse = public_groups(args, names, inverse, {"age_group": AGE_GROUPS, "region": AREAS})
    kept = inverse >= 0
    return names, inverse[kept], values[kept]


def aggregate(names, inverse, values, statistic: str, clip: float):
    """Per-group sums of clipped values (or counts) and the query's L1 sensitivity.

    Values are clipped to ``[-clip, clip]`` so that adding or removing one row changes one group's sum by at
    most ``clip``; a count changes by at most 1.

    Args:
      names: the group names (:func:`public_table`).
      inverse: each row's group index.
      values: each row's value.
      statistic: ``"sum"`` or ``"count"``.
      clip: the clipping bound.

    Returns:
      ``(names, per-group answers, sensitivity)``.
    """
    if statistic == "count":
        return names, np.bincount(inverse, minlength=len(names)).astype(float), 1.0
    clipped = np.clip(values, -clip, clip)
    return names, np.bincount(inverse, weights=clipped, minlength=len(names)), float(clip)


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


def _privacy_spent(mech, sensitivity: float, delta: float) -> float:
    """ε at δ of one release of ``mech`` at ``sensitivity``: the exact PLD, pessimistic."""
    import accounting

    return float(np.asarray(accounting.pld(mech, sensitivity=sensitivity).get_epsilon_for_delta(delta)))


def build_region(name: str, theta: float, tau: float):
    """The preferred region of a ``--mechanism boosted`` release.

    Args:
      name: ``"relative"`` or ``"absolute"`` (``--region``).
      theta: the relative error bound (``--theta``; the relative region only).
      tau: the absolute error bound (``--tau``; with ``theta``, the relative region's floor).

    Returns:
      A :class:`dpjax.RelativeError` or :class:`dpjax.AbsoluteError`.

    Raises:
      ValueError: an unknown region, or its refusal of the bound.
    """
    import dpjax

    if name == "relative":
        return dpjax.RelativeError(theta=theta, tau=tau)
    if name == "absolute":
        return dpjax.AbsoluteError(tau=tau)
    raise ValueError(f"--region must be one of {REGIONS}, got {name!r}")


def build_boosted(region, rho: float, sensitivity: float, delta: float, scale=None, kernel: str = "gaussian"):
    """PB-DP with a ``kernel`` meeting ``Pr[M(Q) ∈ S(Q)] ≥ rho``, and the plain kernel meeting it too.

    The kernel scale is ``scale`` if given, else tuned for the least exact ε at ``delta``
    (:func:`optimize.tune_boosted`); the plain kernel has the largest scale meeting the constraint alone
    (:func:`optimize.base_sigma`). Both ε are exact single-release ε at ``delta`` from the same accountant
    (:func:`accounting.exact.epsilon`: closed forms of the output laws, worst neighbouring pair; the plain
    kernel's as the boosted mechanism at its scale, where q = 0 and the law is the kernel's own), computed for
    the mechanisms as built, in the default float precision they sample with.

    Args:
      region: the preferred region (:func:`build_region`).
      rho: the probability of landing in it, in (0, 1).
      sensitivity: the query's sensitivity.
      delta: the δ of the ε reported, in (0, 1).
      scale: the kernel scale (``None``: tuned).
      kernel: a ``--kernel`` choice (a registry name or ``package.module:Class``).

    Returns:
      ``[(label, mechanism, exact ε), ...]``, the boosted mechanism first.

    Raises:
      ValueError: ``rho`` or ``delta`` outside (0, 1), an unknown kernel, or a refusal of the tuner or the
        mechanism.

    References:
      Jiang, Zhang et al., privacy-boosted mechanisms (PB-DP), IEEE S&P 2025.
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
            scale = float(
                optimize.tune_boosted(
                    kernel=template, region=region, rho=rho, sensitivity=sensitivity, delta=delta
                ).sigma
            )

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
        raise ValueError(
            f"--statistic: a group's answer {np.abs(ints).max():.3g} is beyond the int64 range of a discrete release"
        )
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
    return (
        f"numerics: exact (integer-only noise on the lattice {g:g}·Z; accounted as the mechanism run, "
        f"{describe(lattice.noise)} at the lattice sensitivity)"
    )


def build_composite(window, epsilon: float, activation: str = "rectangle", base: str = "uniform"):
    """``--mechanism composite``: the least-variance :class:`dpjax.Composite` at ``epsilon`` on the public ``window``.

    Variance at the window's centre, the paper's objective; built with ``clip=True`` so that float32 rounding
    of an answer at the window's edge stays inside.

    Args:
      window: ``(lo, hi)``, the public window (``--window``).
      epsilon: the budget ε.
      activation: the composite's activation (``--activation``).
      base: the composite's base law (``--base``).

    Returns:
      The tuned :class:`dpjax.Composite`.

    Raises:
      ValueError: ``--window`` missing, not finite or empty, or a refusal of the tuner.
    """
    import dpjax
    import optimize

    if window is None:
        raise ValueError("--window: --mechanism composite needs the public input window --window LO HI")
    lo, hi = (float(x) for x in window)
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise ValueError(f"--window must be two finite numbers LO < HI, got {lo:g} {hi:g}")
    t = optimize.tune_composite(float(epsilon), window=(lo, hi), activation=activation, base=base).mechanism
    return dpjax.Composite(
        t.activation, t.base, *(float(np.asarray(x)) for x in (t.epsilon, t.k, t.m, t.y)), window=(lo, hi), clip=True
    )


def _composite_command(args) -> int:
    """Group means of the value column clipped to ``--window``, released by the composite mechanism."""
    import jax

    import accounting

    _allow(
        args,
        _COMPOSITE | {"epsilon", "numerics"},
        "to --mechanism composite (a bounded release of means on --window; its privacy is the exact ε*, no δ)",
    )
    if args.statistic not in (None, "mean"):
        raise ValueError(f"--statistic: --mechanism composite releases group means, got {args.statistic!r}")
    mech = build_composite(args.window, args.epsilon, args.activation, args.base)
    tier, _ = _numerics(args.numerics, mech)
    lo, hi = (float(x) for x in args.window)
    check_output(args.output, [args.input])
    names, inverse, values = public_table(args)
    clipped = np.clip(values, lo, hi)
    sizes = np.bincount(inverse, minlength=len(names))
    with np.errstate(invalid="ignore", divide="ignore"):
        true = np.bincount(inverse, weights=clipped, minlength=len(names)) / sizes
    # a listed group without rows is released from the window's centre (its existence is not revealed)
    out = _release_values(_key(args.seed), np.where(sizes > 0, true, 0.5 * (lo + hi)), mech)
    released(args, args.input is not None)
    star = accounting.composite.epsilon_star(mech)
    _write(args, ["group", "released_mean"], list(zip(names, out)), [("true_mean", true)])
    width = hi - lo
    with jax.enable_x64(True):
        out_lo, out_hi = (float(np.asarray(x)) for x in mech.output_range())
        var = float(np.asarray(mech.variance(0.5 * (lo + hi))))
    lap = 2.0 * (width / args.epsilon) ** 2
    payload = {
        "statistic": "mean",
        "mechanism": parameters(mech),
        "epsilon_star": float(star.epsilon),
        "nominal_epsilon": float(star.nominal),
        "numerics": tier,
        "output_range": [out_lo, out_hi],
        "groups": [{"group": str(n), "released": float(r)} for n, r in zip(names, out)],
    }
    with _report(args):
        if args.json:
            return emit(args, payload, ()) or 0
        source = args.input or _DEMO
        print(f"dpjax release — mean of {args.value_column!r} by {args.group_by or '(all)'} ({source})")
        _print_rows(names, true if _true_shown(args) else None, [out], ["released"], args.show, args.output)
        print(
            f"values clipped to the window [{lo:g}, {hi:g}]; any two answers of the window are neighbours "
            f"(W = {width:g}); groups are public and disjoint (parallel composition)"
        )
        print(
            f"mechanism: composite {mech.label} (eps={float(mech.epsilon):.6g}, k={float(mech.k):.6g}, "
            f"m={float(mech.m):.6g}, y={float(mech.y):.6g}); unbiased, every release in "
            f"[{out_lo:,.1f}, {out_hi:,.1f}]"
        )
        print(
            f"variance at the window's centre {var:.4g} (Laplace(W/eps) on the same window: {lap:.4g}, "
            f"ratio {var / lap:.3f})"
        )
        print(
            f"privacy: epsilon* = {float(star.epsilon):.4f} (exact worst pair over the window, never below the "
            f"truth); nominal epsilon = {float(star.nominal):.4f}"
        )
        print(_numerics_line(tier, None))
    return 0


# ----------------------------------------------------------------------------------
# PB-DP
# ----------------------------------------------------------------------------------
def _check_boosted_flags(args):
    """Refuse the flags that do not apply to ``--mechanism boosted``."""
    cls = kernel_class(args.kernel)
    own = {"sigma" if cls.scale_name == "sigma" else "scale"}
    for dest in ({"scale", "sigma"} - own) & set(given(args)):
        raise ValueError(
            f"{given(args)[dest]} does not apply to a {args.kernel} kernel: its scale is {scale_flag(cls)}"
        )
    if args.region != "relative":
        refuse_flags(args, ["theta"], f"to --region {args.region} (theta is the relative region's)")
    _allow(
        args,
        (_BOOSTED - {"scale", "sigma"}) | own | {"delta", "numerics"},
        "to --mechanism boosted (a utility constraint --region/--tau/--rho instead of a budget; the "
        "kernel's scale is tuned, or given by " + scale_flag(cls) + ")",
    )


def _boosted_command(args) -> int:
    import jax

    import dpjax

    if args.statistic == "mean":
        raise ValueError("--statistic mean: only with --mechanism composite (a mean is released on a public window)")
    _check_boosted_flags(args)
    args.statistic = args.statistic or "sum"
    if args.statistic not in ("sum", "count"):
        raise ValueError(f"--statistic: --mechanism boosted releases a sum or a count, got {args.statistic!r}")
    check_output(args.output, [args.input])
    names, inverse, values = public_table(args)
    names, true, sensitivity = aggregate(names, inverse, values, args.statistic, args.clip)
    kcls = kernel_class(args.kernel)
    if kcls.discrete:
        # a discrete release rounds the answers half up to the integers (_release_values): rounded
        # neighbours differ by up to ⌈Δ⌉, the sensitivity the release has (calibrated and accounted)
        sensitivity = float(np.ceil(sensitivity))
    origin = _clip_text(args, sensitivity)
    region = build_region(args.region, args.theta, args.tau if args.tau is not None else 2.0 * sensitivity)
    check_probability("--rho", args.rho)
    # the exact tier is a capability of the mechanism: refused before any tuning where it has none
    tier, _ = _numerics(args.numerics, dpjax.PrivacyBoosted(kcls(**{kcls.scale_name: 1.0}), region, args.rho))
    given_scale = args.sigma if kcls.scale_name == "sigma" else args.scale
    with _named(origin):
        releases = build_boosted(region, args.rho, sensitivity, args.delta, given_scale, args.kernel)
    runs = [_numerics(tier, mech)[1] for _, mech, _ in releases]
    if tier == "exact":  # the privacy of the lattice mechanisms actually run
        with _named(origin):
            releases = [
                (label, mech, _privacy_spent(run, sensitivity, args.delta))
                for (label, mech, _), run in zip(releases, runs)
            ]
    keys = jax.random.split(_key(args.seed), len(releases))
    values = [_release_values(k, true, mech, tier) for k, (_, mech, _) in zip(keys, releases)]
    released(args, args.input is not None)

    labels = [label for label, _, _ in releases]
    cols = [label.lower().replace("-", "") for label in labels]
    _write(
        args,
        ["group"] + [f"{c}_{args.statistic}" for c in cols],
        list(zip(names, *values)),
        [(f"true_{args.statistic}", true)],
    )
    payload = {
        "statistic": args.statistic,
        "sensitivity": sensitivity,
        "delta": args.delta,
        "numerics": tier,
        "releases": [
            {
                "label": label,
                "mechanism": parameters(mech),
                "run": parameters(run),
                "epsilon": e,
                "values": {str(n): float(v) for n, v in zip(names, vals)},
            }
            for (label, mech, e), run, vals in zip(releases, runs, values)
        ],
    }
    with _report(args):
        if args.json:
            return emit(args, payload, ()) or 0
        source = args.input or _DEMO
        print(f"dpjax release — {args.statistic} of {args.value_column!r} by {args.group_by or '(all)'} ({source})")
        _print_rows(names, true if _true_shown(args) else None, values, labels, args.show, args.output)
        print(
            f"sensitivity {sensitivity:g} (values clipped to ±{args.clip:g}); groups are public and disjoint "
            "(parallel composition)"
        )
        print(f"utility: Pr[release in S(Q)] >= {args.rho:g} for every true answer, S = {describe(region)}")
        for label, mech, e in releases:
            extra = f", boosting rate q = {float(mech.boosting_rate):.4f}" if label == "PB-DP" else ""
            print(f"{label}: {describe(mech)}{extra}")
            print(f"  privacy: epsilon = {e:.4f} at delta = {args.delta:g} (exact, worst neighbouring pair)")
        print(_numerics_line(tier, runs[0] if tier == "exact" else None))
    return 0


def run(args) -> int:
    """Run ``dpjax release --mechanism boosted|composite``.

    Args:
      args: the parsed flags.

    Returns:
      The exit status (0).

    Raises:
      ValueError: an invalid flag (naming it), or any refusal of the release.
    """
    return _composite_command(args) if args.mechanism == "composite" else _boosted_command(args)
