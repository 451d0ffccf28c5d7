"""``dpjax`` command line: ``dpjax release`` aggregates a table by group and releases it with noise.

With no arguments it releases the embedded default dataset (weekly-average
daily step counts of 4000 synthetic health-app users, :mod:`dpjax.data`): the
sum of steps per age group, each user's contribution clipped to ``--clip``.
Groups are disjoint, so the whole table costs the privacy of one release
(parallel composition); the privacy spent is computed exactly by
:mod:`accounting` from the mechanism's output law.

``--mechanism boosted`` states a utility constraint instead of a budget: the release
lies in the preferred region ``S(Q)`` (relative error ``--theta`` plus ``--tau``, or
absolute error ``--tau``) with probability ``--rho``. The command tunes the scale of the
privacy-boosted mechanism's (PB-DP) kernel (``--kernel``: Gaussian by default, Laplace,
discrete Laplace, discrete Gaussian, or any kernel class as ``package.module:Class``) for
the least exact ε at ``--delta`` and prints it next to the plain kernel that meets the
same constraint, both released and both with their exact ε. A kernel class also works
as ``--mechanism package.module:Class --scale B``.

``--mechanism composite --window LO HI`` releases the group means of the value column
clipped to the public window with the bounded, unbiased composite mechanism
(:class:`dpjax.Composite`, ``--activation``/``--base``, parameters tuned by
:func:`optimize.tune_composite`): every release lies in a bounded interval, and the true
worst-case ε* over every pair of the window is printed next to the nominal ε.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys

import numpy as np

from dpjax.tables import check_output, read_table, write_csv

__all__ = ["main", "aggregate", "build_mechanism"]

MECHANISMS = ("laplace", "gaussian", "discrete-laplace", "discrete-gaussian", "boosted", "laplace-mixture",
              "geometric-mixture", "composite")
#: the piecewise mixtures (issue 10): ``--epsilon E --r R --c C`` is the paper's Lap_m / Geom_m(ε, rε), breakpoint c
_MIXTURES = {"laplace-mixture": "LaplaceMixture", "geometric-mixture": "GeometricMixture"}
KERNELS = ("gaussian", "laplace", "discrete-laplace", "discrete-gaussian")
#: the CLI's alias table: built-in kernels by their CLI name
_KERNEL_ALIASES = {"gaussian": "Gaussian", "laplace": "Laplace", "discrete-laplace": "DiscreteLaplace",
                   "discrete-gaussian": "DiscreteGaussian"}
REGIONS = ("relative", "absolute")
def _key(seed):
    """The release key: ``jax.random.key(seed)``, or a secure key from ``os.urandom``."""
    import jax

    import dpjax

    if seed is None:
        return dpjax.random.secure_key()
    if not 0 <= seed < 2**63:
        raise ValueError(f"--seed must be an integer in [0, 2**63), got {seed}")
    return jax.random.key(seed)


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


def kernel_class(spec: str):
    """The kernel class a ``--kernel`` / ``--mechanism`` value names: a built-in alias
    (``gaussian``, ``laplace``, ``discrete-laplace``, ``discrete-gaussian``) or
    ``package.module:Class``, an additive kernel (a ``dpjax.AdditiveMechanism`` subclass)."""
    import importlib

    import dpjax

    spec = str(spec)
    if spec.replace("_", "-") in _KERNEL_ALIASES:
        return getattr(dpjax, _KERNEL_ALIASES[spec.replace("_", "-")])
    if ":" not in spec:
        raise ValueError(f"--kernel must be one of {KERNELS} or package.module:Class, got {spec!r}")
    module, _, name = spec.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--kernel: cannot load {spec!r} ({exc})") from None
    if not (isinstance(cls, type) and issubclass(cls, dpjax.AdditiveMechanism)):
        raise ValueError(f"--kernel: {spec!r} is not a dpjax.AdditiveMechanism subclass")
    return cls


def make_kernel(spec: str, scale):
    """The kernel ``spec`` at ``scale`` (its scale leaf, validated by its constructor)."""
    cls = kernel_class(spec)
    return cls(**{cls.scale_name: scale})


def scale_flag(spec: str) -> str:
    """The option that sets the kernel's scale: ``--sigma`` for a σ-scaled kernel, else ``--scale``."""
    return "--sigma" if kernel_class(spec).scale_name == "sigma" else "--scale"


def build_mechanism(name: str, sensitivity: float, epsilon: float, delta: float, scale=None, sigma=None, r=None,
                    c=None):
    """The mechanism a CLI user asked for, calibrated to (ε, δ) unless a scale/σ is given (a mixture:
    the paper's parametrisation ε, r, c)."""
    import dpjax

    if name in _MIXTURES:
        if r is None or c is None:
            raise ValueError(f"--r and --c: --mechanism {name} needs the ratio r and the breakpoint c")
        return getattr(dpjax, _MIXTURES[name]).from_epsilon(epsilon, r, c, sensitivity)
    if name == "laplace":
        return dpjax.Laplace(scale=scale) if scale is not None else dpjax.Laplace.from_epsilon(epsilon, sensitivity)
    if name == "discrete-laplace":
        if scale is not None:
            return dpjax.DiscreteLaplace(scale=scale)
        return dpjax.DiscreteLaplace.from_epsilon(epsilon, sensitivity)
    if name == "gaussian":
        if sigma is not None:
            return dpjax.Gaussian(sigma=sigma)
        return dpjax.Gaussian.from_epsilon_delta(epsilon, delta, sensitivity)
    if name == "discrete-gaussian":
        from dpjax.kernels import analytic_gaussian_sigma

        return dpjax.DiscreteGaussian(sigma=sigma if sigma is not None else
                                      analytic_gaussian_sigma(epsilon, delta, sensitivity))
    if ":" in str(name):
        given = scale if scale is not None else sigma
        if given is None:
            raise ValueError(f"--scale: a kernel class ({name}) is released at a given scale (--scale B)")
        return make_kernel(name, given)
    raise ValueError(f"--mechanism must be one of {MECHANISMS} or package.module:Class, got {name!r}")


def _describe(obj) -> str:
    """``Name(param=value, ...)`` of a mechanism or region, nested pytrees included."""
    import dataclasses

    import jax

    parts = []
    for field in dataclasses.fields(obj):
        v = getattr(obj, field.name)
        if isinstance(v, (float, jax.Array, np.ndarray)):
            parts.append(f"{field.name}={float(np.asarray(v)):.6g}")
        elif dataclasses.is_dataclass(v):
            parts.append(_describe(v))
    return f"{type(obj).__name__}({', '.join(parts)})"


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

    if not (0.0 < rho < 1.0):
        raise ValueError(f"--rho must lie in (0, 1), got {rho}")
    if not (0.0 < delta < 1.0):
        raise ValueError(f"--delta must lie in (0, 1), got {delta}")
    template = make_kernel(kernel, 1.0)
    if scale is None:
        scale = float(optimize.tune_boosted(kernel=template, region=region, rho=rho, sensitivity=sensitivity,
                                            delta=delta).sigma)

    def boost(s):  # the kernel at scale s, boosted
        mech = dpjax.PrivacyBoosted(make_kernel(kernel, s), region, rho)
        return mech, float(exact.epsilon(mech, delta, sensitivity))

    boosted, eps = boost(scale)
    at_base, plain_eps = boost(float(optimize.base_sigma(region, rho, template)))
    plain = at_base.kernel
    return [("PB-DP", boosted, eps), (type(plain).__name__, plain, plain_eps)]


def _print_rows(names, true, released, labels, show, output):
    header = f"{'group':<14}{'true':>16}" + "".join(f"{label:>16}{'rel. error':>12}" for label in labels)
    print(header)
    for i, (name, t) in enumerate(zip(names[:show], true[:show])):
        cells = "".join(f"{float(r[i]):>16,.1f}{abs(r[i] - t) / max(abs(t), 1e-12):>12.3%}" for r in released)
        print(f"{str(name):<14}{t:>16,.1f}{cells}")
    if len(names) > show:
        print(f"... {len(names) - show} more groups" + (f" in {output}" if output else ""))


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
    without an exact sampler is refused."""
    if requested == "float":
        return "float", mech
    try:
        return "exact", mech.exact_lattice()
    except ValueError:
        if requested == "exact":
            raise
        return "float", mech


def _numerics_line(tier, lattice) -> str:
    if tier == "float":
        return "numerics: float (idealized floating-point noise; see docs/threat-model.md)"
    g = float(np.asarray(lattice.granularity))
    return (f"numerics: exact (integer-only noise on the lattice {g:g}·Z; accounted as the mechanism run, "
            f"{_describe(lattice.noise)} at the lattice sensitivity)")


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

    if args.statistic not in (None, "mean"):
        raise ValueError(f"--statistic: --mechanism composite releases group means, got {args.statistic!r}")
    mech = build_composite(args.window, args.epsilon, args.activation, args.base)
    lo, hi = (float(x) for x in args.window)
    check_output(args.output, [args.input])
    groups, values = read_table(args.input, args.value_column, args.group_by)
    names, inverse = np.unique(groups, return_inverse=True)
    clipped = np.clip(values, lo, hi)
    true = np.bincount(inverse, weights=clipped) / np.bincount(inverse)
    released = _release_values(_key(args.seed), true, mech)
    star = accounting.composite.epsilon_star(mech)
    if args.output:
        write_csv(args.output, ["group", "true_mean", "released_mean"], zip(names, true, released))
    source = args.input or "embedded dataset: daily steps of 4000 synthetic health-app users"
    print(f"dpjax release — mean of {args.value_column!r} by {args.group_by or '(all)'} ({source})")
    _print_rows(names, true, [released], ["released"], args.show, args.output)
    width = hi - lo
    with jax.enable_x64(True):
        out_lo, out_hi = (float(np.asarray(x)) for x in mech.output_range())
        var = float(np.asarray(mech.variance(0.5 * (lo + hi))))
    print(f"values clipped to the window [{lo:g}, {hi:g}]; any two answers of the window are neighbours (W = {width:g}); "
          "groups are disjoint (parallel composition)")
    print(f"mechanism: composite {mech.label} (eps={float(mech.epsilon):.6g}, k={float(mech.k):.6g}, "
          f"m={float(mech.m):.6g}, y={float(mech.y):.6g}); unbiased, every release in [{out_lo:,.1f}, {out_hi:,.1f}]")
    lap = 2.0 * (width / args.epsilon) ** 2
    print(f"variance at the window's centre {var:.4g} (Laplace(W/eps) on the same window: {lap:.4g}, "
          f"ratio {var / lap:.3f})")
    print(f"privacy: epsilon* = {float(star.epsilon):.4f} (exact worst pair over the window, never below the truth); "
          f"nominal epsilon = {float(star.nominal):.4f}")
    return 0


def _release_command(args) -> int:
    import jax

    import dpjax

    if args.mechanism == "composite":
        return _composite_command(args)
    if args.statistic == "mean":
        raise ValueError("--statistic mean: only with --mechanism composite (a mean is released on a public window)")
    args.statistic = args.statistic or "sum"
    check_output(args.output, [args.input])
    groups, values = read_table(args.input, args.value_column, args.group_by)
    names, true, sensitivity = aggregate(groups, values, args.statistic, args.clip)
    spec = args.kernel if args.mechanism == "boosted" else args.mechanism
    if (getattr(dpjax, _MIXTURES[spec]) if spec in _MIXTURES else kernel_class(spec)).discrete:
        # a discrete release rounds the answers half up to the integers (_release_values): rounded
        # neighbours differ by up to ⌈Δ⌉, the sensitivity the release has (calibrated and accounted)
        sensitivity = float(np.ceil(sensitivity))
    if args.mechanism == "boosted":
        region = build_region(args.region, args.theta, args.tau if args.tau is not None else 2.0 * sensitivity)
        flag = scale_flag(args.kernel)
        given, wrong = (args.sigma, args.scale) if flag == "--sigma" else (args.scale, args.sigma)
        if wrong is not None:
            other = "--scale" if flag == "--sigma" else "--sigma"
            raise ValueError(f"{other} does not apply to a {args.kernel} kernel: its scale is {flag}")
        releases = build_boosted(region, args.rho, sensitivity, args.delta, given, args.kernel)
    else:
        mech = build_mechanism(args.mechanism, sensitivity, args.epsilon, args.delta, args.scale, args.sigma,
                               args.r, args.c)
        releases = [("released", mech, None)]
    key = _key(args.seed)
    keys = jax.random.split(key, len(releases)) if len(releases) > 1 else [key]
    tier, ran = _numerics(args.numerics, releases[0][1])  # PB-DP has no exact sampler: float, or refused
    released = [_release_values(k, true, mech, tier) for k, (_, mech, _) in zip(keys, releases)]
    privacy = None if args.mechanism == "boosted" else _privacy_spent(ran, sensitivity, args.delta)

    labels = [label for label, _, _ in releases]
    if args.output:
        cols = ["released"] if len(labels) == 1 else [label.lower().replace("-", "") for label in labels]
        write_csv(args.output, ["group", f"true_{args.statistic}"] + [f"{c}_{args.statistic}" for c in cols],
                   zip(names, true, *released))
    source = args.input or "embedded dataset: daily steps of 4000 synthetic health-app users"
    print(f"dpjax release — {args.statistic} of {args.value_column!r} by {args.group_by or '(all)'} ({source})")
    _print_rows(names, true, released, labels, args.show, args.output)
    print(f"sensitivity {sensitivity:g} (values clipped to ±{args.clip:g}); groups are disjoint (parallel composition)")
    if args.mechanism == "boosted":
        region = releases[0][1].region
        print(f"utility: Pr[release in S(Q)] >= {args.rho:g} for every true answer, S = {_describe(region)}")
        for label, mech, eps in releases:
            extra = f", boosting rate q = {float(mech.boosting_rate):.4f}" if label == "PB-DP" else ""
            print(f"{label}: {_describe(mech)}{extra}")
            print(f"  privacy: epsilon = {eps:.4f} at delta = {args.delta:g} (exact, worst neighbouring pair)")
        print(_numerics_line("float", None))
    else:
        mech = releases[0][1]
        print(f"mechanism: {_describe(mech)}")
        print(f"privacy: {privacy}")
        print(_numerics_line(tier, ran))
        if args.mechanism in _MIXTURES:
            print(_mixture_line(mech, sensitivity))
    return 0


def _mixture_line(mech, sensitivity: float) -> str:
    """The exact pure ε next to the paper's general privacy budget ζ (NOT CERTIFIED)."""
    from accounting import mixture_paper

    zeta = float(np.asarray(mixture_paper.general_privacy_budget(mech, sensitivity)))
    import jax

    with jax.enable_x64(True):
        pure = float(np.asarray(mech.pure_epsilon(sensitivity)))
    return (f"exact pure epsilon = {pure:.4f} (tight); the paper's general privacy budget zeta = {zeta:.4f} "
            "(NOT CERTIFIED: an average of the loss, not a DP guarantee)")


PRDP_METHODS = ("framework", "extension")


def _prdp_table(args):
    """(groups, values, budgets) for a per-record-budget release; the embedded table has ``privacy_budget``."""
    if args.input is not None:
        return read_table(args.input, args.value_column, args.group_by, budget_column=args.per_record_budget)
    from dpjax.data import BUDGET_MENU, load_steps_with_budgets

    rows = list(csv.DictReader(io.StringIO(load_steps_with_budgets())))
    for name, flag in ((args.value_column, "--value-column"), (args.per_record_budget, "--per-record-budget"),
                       (args.group_by, "--group-by")):
        if name is not None and name not in rows[0]:
            raise ValueError(f"{flag}: {name!r} is not a column of the embedded dataset (columns: {list(rows[0])})")
    if args.eps_min is None:
        args.eps_min = min(BUDGET_MENU.values())
    if args.eps_max is None:
        args.eps_max = max(BUDGET_MENU.values())
    groups = np.asarray([r[args.group_by] if args.group_by else "all" for r in rows])
    return (groups, np.asarray([float(r[args.value_column]) for r in rows]),
            np.asarray([float(r[args.per_record_budget]) for r in rows]))


def _prdp_release_command(args) -> int:
    """``dpjax release --per-record-budget COLUMN``: per-record DP releases (dpjax.prdp), one per group.

    Each row r may be charged at most its own budget E(r) (the column). The budget range
    ``[--eps-min, --eps-max]`` must be public and data-independent (for the embedded dataset: the
    app's menu of settings). The groups are padded to one size and released in one vmapped call;
    groups are disjoint, so a row is charged only by its own group's release (parallel composition).
    The naive release at the global minimum ε̌ is shown alongside.
    """
    import jax

    import accounting
    from dpjax import prdp

    check_output(args.output, [args.input])
    groups, values, budgets = _prdp_table(args)
    if args.eps_min is None or args.eps_max is None:
        raise ValueError("--eps-min/--eps-max: give the public budget range of the domain (never the data's own "
                         "least budget, which is private)")
    if not (0.0 < args.beta < 1.0):
        raise ValueError(f"--beta must lie in (0, 1), got {args.beta}")
    if not np.isfinite(budgets).all() or budgets.min() < args.eps_min:
        raise ValueError(f"--per-record-budget: every budget must be a finite number >= --eps-min = {args.eps_min:g}")
    ledger = accounting.PrDPLedger(eps_min=args.eps_min, eps_max=args.eps_max)
    share = ledger.record(1.0, label=f"{args.statistic} by {args.group_by or '(all)'}")
    names, inverse = np.unique(groups, return_inverse=True)
    size = int(np.bincount(inverse).max())
    shape = (len(names), size)
    mask, vals, buds = np.zeros(shape, bool), np.zeros(shape), np.full(shape, float(args.eps_max))
    for g in range(len(names)):
        rows = inverse == g
        k = int(rows.sum())
        mask[g, :k], vals[g, :k], buds[g, :k] = True, np.clip(values[rows], 0.0, args.clip), budgets[rows]
    true = (mask.sum(1) if args.statistic == "count" else vals.sum(1)).astype(float)
    kw = dict(eps_min=share.eps_min, eps_max=share.eps_max)

    def both(key, v, b, m):
        k_prdp, k_naive = jax.random.split(key)
        if args.statistic == "count":
            return (prdp.count(k_prdp, b, beta=args.beta, mask=m, **kw), prdp.naive_count(k_naive, b, mask=m, **kw))
        return (prdp.sum(k_prdp, v, b, beta=args.beta, upper=args.clip, method=args.prdp_method, mask=m, **kw),
                prdp.naive_sum(k_naive, v, b, beta=args.beta, upper=args.clip, mask=m, **kw))

    key = _key(args.seed)
    with jax.enable_x64(True):
        res, naive = jax.jit(jax.vmap(both))(jax.random.split(key, len(names)), vals, share.budgets(buds), mask)
    ledger.verify(res)
    released, naive_released = np.asarray(res.estimate), np.asarray(naive.estimate)

    if args.output:
        write_csv(args.output, ["group", f"true_{args.statistic}", f"prdp_{args.statistic}", "epsilon_tau", "level",
                                 f"naive_{args.statistic}"],
                   zip(names, true, released, np.asarray(res.epsilon_tau), np.asarray(res.level), naive_released))
    source = args.input or "embedded dataset: daily steps of 4000 synthetic health-app users, with their budgets"
    method = "Algorithm 1" if args.statistic == "count" else f"{args.prdp_method}, values clipped to [0, {args.clip:g}]"
    print(f"dpjax release — per-record DP {args.statistic} of {args.value_column!r} by {args.group_by or '(all)'} "
          f"({source})")
    print(f"budgets: column {args.per_record_budget!r}, public range [{args.eps_min:g}, {args.eps_max:g}], "
          f"beta = {args.beta:g}; PrDP: {method}; naive: the global minimum {args.eps_min:g} for every row")
    _print_rows(names, true, [released, naive_released], ["PrDP", "naive"], args.show, args.output)
    lev = np.asarray(res.level)
    print("selected level per group (eps_tau = its floor): "
          + ", ".join(f"{n}: {int(lv)} ({float(t):g})" for n, lv, t in zip(names[:args.show], lev,
                                                                          np.asarray(res.epsilon_tau))))
    print("privacy ledger (pure epsilon per privacy level; a row of level i has budget >= its floor; groups are "
          "disjoint, so each row pays only its group's release):")
    print(f"{'level':>6}{'budgets':>22}{'floor':>10}{'charged':>10}{'spent (max over groups)':>26}")
    spent = np.asarray(res.level_epsilon)[:, :ledger.num_levels].max(axis=0)
    for i, floor in enumerate(ledger.floors):
        top = min(2 * floor, args.eps_max)
        rng = f"[{floor:g}, {top:g}]" if i == 0 else f"({floor:g}, {top:g}]"
        print(f"{i + 1:>6}{rng:>22}{floor:>10.4g}{ledger.spent[i]:>10.4g}{spent[i]:>26.4g}")
    print(f"remaining on every level: {ledger.remaining.max():g} (this release used each row's whole budget)")
    return 0


def _add_prdp_arguments(r) -> None:
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


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dpjax", description="Differentially private batch releases on JAX.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("release", help="aggregate a table by group and release it with calibrated noise")
    r.add_argument("--input", help="CSV file with a header row (default: the embedded step-count dataset)")
    r.add_argument("--value-column", default="steps", help="numeric column to aggregate (default: steps)")
    r.add_argument("--group-by", default="age_group", help="column to group by (default: age_group)")
    r.add_argument("--statistic", choices=("sum", "count", "mean"),
                   help="sum (default) or count; mean with --mechanism composite (its default)")
    r.add_argument("--clip", type=float, default=20000.0, help="per-row clipping bound for sums (default 20000)")
    r.add_argument("--mechanism", default="laplace", metavar="{" + ",".join(MECHANISMS) + ",package.module:Class}",
                   help="noise mechanism (default laplace); a kernel class is released at --scale")
    r.add_argument("--epsilon", type=float, default=1.0, help="target epsilon for calibration (default 1)")
    r.add_argument("--delta", type=float, default=1e-6, help="delta for Gaussian calibration and reporting")
    r.add_argument("--scale", type=float,
                   help="Laplace / discrete Laplace scale (overrides --epsilon); boosted: the Laplace kernel's "
                        "scale (no tuning)")
    r.add_argument("--sigma", type=float,
                   help="Gaussian / discrete Gaussian sigma (overrides --epsilon); boosted: the Gaussian kernel's "
                        "sigma (no tuning)")
    b = r.add_argument_group("boosted (PB-DP): a utility constraint instead of a budget")
    b.add_argument("--kernel", type=lambda s: s if ":" in s else s.replace("_", "-"), default="gaussian",
                   metavar="{" + ",".join(KERNELS) + ",package.module:Class}",
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
                        "mechanism has one) or float (idealized numerics; the default for boosted / mixture / custom)")
    r.add_argument("--seed", type=int, help="integer seed (default: a secure key from os.urandom)")
    r.add_argument("--output", help="write group,true,released rows to this CSV file")
    r.add_argument("--show", type=int, default=10, help="groups shown on screen (default 10)")
    _add_prdp_arguments(r)
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "release":
            if args.clip <= 0 or not np.isfinite(args.clip):
                raise ValueError(f"--clip must be a positive finite number, got {args.clip}")
            if args.per_record_budget is not None:
                if args.statistic == "mean" or args.mechanism == "composite":
                    raise ValueError("--per-record-budget: releases sums or counts, not composite means")
                args.statistic = args.statistic or "sum"
                return _prdp_release_command(args)
            return _release_command(args)
    except (ValueError, OverflowError, OSError) as exc:
        print(f"dpjax: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 — one line, never a traceback, for any input
        print(f"dpjax: internal error ({type(exc).__name__}): {_one_line(exc)}; please report it", file=sys.stderr)
        return 70
    return 1


def _one_line(exc) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
