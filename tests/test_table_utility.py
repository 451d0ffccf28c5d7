"""dpjax.table accuracy (issue 28): one budget split over few measurements, the sum from a count and a centred
sum, selection on the released unit count without an e^ε factor, the exponential-mechanism quantile, per-value std and
confidence intervals, and the reported privacy against an independent accountant (dp_accounting)."""

import dataclasses
import math

import jax
import numpy as np
import pytest

from dpjax import table
from dpjax.kernels import Laplace
from dpjax.table import calibration, selection
from dpjax.table.release import TableRelease, validate


def _data(n=6000, users=600, groups=4, seed=0):
    rng = np.random.default_rng(seed)
    return {"u": rng.integers(0, users, n), "g": rng.integers(0, groups, n), "v": rng.lognormal(3.0, 1.0, n)}


KW = dict(by="g", privacy_unit="u", max_groups_per_unit=2, max_rows_per_group=3, epsilon=1.0, delta=1e-6)


def _dp_accounting_epsilon(rel, stats, noise, delta):
    """ε at ``delta`` of the measurements ``rel`` states it ran, composed by dp_accounting: each measurement K·m
    times at its per-group sensitivity and stated scale; an exponential mechanism (scale β, sensitivity Δ) as the
    ε-bounded-range pair at ε = 2Δ/β, its densities ∝ e^{±y/2} on [−ε, ε] integrated over 20 000 cells (a
    post-processing of the pair: never above its δ)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    req = validate(
        KW["by"],
        stats,
        KW["privacy_unit"],
        KW["max_groups_per_unit"],
        KW["max_rows_per_group"],
        1.0,
        delta,
        [0] if rel.threshold is None else None,
        noise,
    )
    total = None
    for name, (c, _) in req.measurements(rel.threshold is not None).items():
        scale, k = rel.scales[name], KW["max_groups_per_unit"] * c.multiplicity
        if c.noisy_max:
            eps = 2 * c.sensitivity / scale
            edges = np.linspace(-eps, eps, 20_001)
            mass = np.diff(np.expm1((edges + eps) / 2)) / np.expm1(eps)  # Pr[cell] on answer 0; answer 1 mirrored
            upper = dict(enumerate(np.log(mass)))
            lower = dict(enumerate(np.log(mass[::-1])))
            p = pld.from_two_probability_mass_functions(lower, upper, value_discretization_interval=1e-4)
        elif noise == "gaussian":
            p = pld.from_gaussian_mechanism(scale, sensitivity=c.sensitivity, value_discretization_interval=1e-4)
        else:
            p = pld.from_laplace_mechanism(scale, sensitivity=c.sensitivity, value_discretization_interval=1e-4)
        p = p.self_compose(k)
        total = p if total is None else total.compose(p)
    return total.get_epsilon_for_delta(delta)


@pytest.mark.parametrize(
    "noise, stats",
    [
        ("gaussian", [table.count(), table.sum("v", 0, 200), table.mean("v", 0, 200), table.variance("v", 0, 200)]),
        pytest.param(
            "laplace", [table.count(), table.sum("v", 0, 200), table.quantile("v", 0.5, 0, 200)], marks=pytest.mark.slow
        ),
    ],
)
def test_reported_privacy_is_at_or_above_dp_accounting(noise, stats):
    """The (ε, δ) a release reports is ≥ dp_accounting's recomputation from the scales it states (within 1e-3
    relative), with the measurements at different noise-to-sensitivity ratios (the budget split)."""
    rel = table.release(jax.random.key(0), _data(), statistics=stats, noise=noise, numerics="float", **KW)
    assert len(set(np.round(list(rel.ratios.values()), 9))) > 1
    eps = _dp_accounting_epsilon(rel, stats, noise, rel.delta - rel.selection_delta)
    assert eps <= rel.epsilon * (1 + 1e-3)
    assert eps >= rel.epsilon * (1 - 1e-2)  # and tight: the calibration spends the budget


def test_sum_is_the_centred_sum_plus_mid_times_the_noisy_count():
    """With a count in the release the sum costs no measurement of its own: sum = Σ(x − mid) + mid·rows from
    the noisy count and the noisy centred sum the mean uses (PipelineDP's way); alone it is one measurement."""
    stats = [table.count(), table.sum("v", 0, 200), table.mean("v", 0, 200)]
    req = validate("g", stats, "u", 2, 3, 1.0, 1e-6, [0], "gaussian")
    assert set(req.measurements(False)) == {"rows", "centred:('v', 0.0, 200.0):False"}
    alone = validate("g", [table.sum("v", 0, 200)], "u", 2, 3, 1.0, 1e-6, [0], "gaussian")
    assert set(alone.measurements(False)) == {"sum:('v', 0.0, 200.0)"}
    rel = table.release(
        jax.random.key(1),
        _data(),
        statistics=stats,
        noise="gaussian",
        groups=[0, 1, 2, 3],
        **{k: v for k, v in KW.items() if k != "by"},
        by="g",
    )
    t = rel.table.to_pydict()
    mean = np.asarray(t["mean_v"])
    # mean = mid + centred / count and sum = centred + mid·count: sum = count·mean with the same noisy values
    np.testing.assert_allclose(np.asarray(t["sum_v"]), np.asarray(t["count"]) * mean, rtol=1e-9)
    # the count's measurement serves three statistics: it gets a smaller ratio (more budget) than the centred sum
    assert rel.ratios["rows"] < rel.ratios["centred:('v', 0.0, 200.0):False"] * 1.5


def test_weights_move_the_budget_and_are_checked():
    stats = [table.count(), table.mean("v", 0, 200)]
    base = validate("g", stats, "u", 2, 3, 1.0, 1e-6, [0], "gaussian").plan(False)[1]
    heavy = validate("g", stats, "u", 2, 3, 1.0, 1e-6, [0], "gaussian", weights={"mean_v": 20.0}).plan(False)[1]
    c = "centred:('v', 0.0, 200.0):False"
    assert heavy[c] / heavy["rows"] < base[c] / base["rows"]
    with pytest.raises(ValueError, match="weights: 'sum_v' is not a statistic"):
        validate("g", stats, "u", 2, 3, 1.0, 1e-6, [0], "gaussian", weights={"sum_v": 1.0})
    with pytest.raises(ValueError, match="weights: the weight of 'count'"):
        validate("g", stats, "u", 2, 3, 1.0, 1e-6, None, "gaussian", weights={"count": 0})
    with pytest.raises(ValueError, match="alpha must be in"):
        validate("g", stats, "u", 2, 3, 1.0, 1e-6, None, "gaussian", alpha=1.5)


def test_selection_threshold_has_no_e_epsilon_factor():
    """δ_sel = a/(1 − a), a = K·Pr[1 + Z > τ]: for Laplace(b) τ = 1 + b·log(K(1 + s)/(2s)), e^ε less in the tail
    than the old K·p·e^ε ≤ s (τ smaller by b·ε; the old one at ε = 1: 1 + b·log(K·e/(2s)))."""
    b, k, share = 15.5, 4, 5e-7
    tau = selection.threshold(Laplace(b), k, share)
    assert tau == pytest.approx(1 + b * math.log(k * (1 + share) / (2 * share)), rel=1e-8)
    assert tau < 1 + b * math.log(k * math.e / (2 * share)) - 0.99 * b
    d = selection.selection_delta(Laplace(b), tau, k)
    assert share * (1 - 1e-6) <= d <= share


def test_selection_thresholds_the_released_unit_count():
    """With count_units released, the selection's noisy count is the released one (one measurement, no
    'selection' component): every released group's count_units is above τ."""
    d = _data(n=20000, users=3000, groups=5, seed=2)
    d["g"] = np.concatenate([d["g"][:-1], [99]])  # a group of one unit
    rel = table.release(jax.random.key(3), d, statistics=[table.count_units(), table.count()], noise="gaussian", **KW)
    assert "units" in rel.scales and "selection" not in rel.scales
    assert 99 not in rel.table.column("g").to_pylist() and rel.table.num_rows == 5
    assert np.all(rel.table.column("count_units").to_numpy() > rel.threshold)
    assert rel.selection_delta <= 0.5e-6 and rel.delta <= 1e-6


def test_exponential_mechanism_quantile_is_accurate_and_its_epsilon_is_two_delta_over_beta():
    assert calibration.noisy_max_epsilon(4.0, 0.5) == pytest.approx(0.25)
    rng = np.random.default_rng(4)
    n = 4000
    d = {"u": np.arange(n), "g": np.zeros(n, np.int64), "v": rng.lognormal(3.0, 1.0, n)}
    rel = table.release(
        jax.random.key(5),
        d,
        by="g",
        statistics=[table.quantile("v", 0.5, 0, 200)],
        privacy_unit="u",
        max_groups_per_unit=1,
        max_rows_per_group=1,
        epsilon=1.0,
        delta=0.0,
        groups=[0],
        noise="laplace",
    )
    assert 0.999 <= rel.epsilon <= 1.0  # pure ε: one exponential mechanism at 2Δ/β
    assert rel.epsilon == pytest.approx(2 * 0.5 / rel.scales["rank:('v', 0.0, 200.0):10:0.5"], rel=1e-6)
    got = rel.table.column("quantile_0.5_v")[0].as_py()
    assert abs(got - np.median(d["v"])) / np.median(d["v"]) < 0.05
    assert rel.table.column("quantile_0.5_v_std").null_count == 1


def test_quantile_is_of_every_kept_row_at_sensitivity_m_times_max_q():
    """The quantile describes the bounded rows (up to M per unit and group), as the other statistics do: 1000
    units of one row at 150 and 600 of three rows at 40, 50 and 60 have their row median in (50, 60] (one row per
    unit: in (60, 150]); one unit's m ≤ M rows move a score by at most M·max(q, 1 − q), so the pure ε is
    2·M·max(q, 1 − q)/b."""
    v = np.concatenate([np.full(1000, 150.0), np.tile([40.0, 50.0, 60.0], 600)])
    u = np.concatenate([np.arange(1000), 1000 + np.repeat(np.arange(600), 3)])
    rel = table.release(
        jax.random.key(6),
        {"u": u, "g": np.zeros(v.size, np.int64), "v": v},
        by="g",
        statistics=[table.quantile("v", 0.5, 0, 200)],
        privacy_unit="u",
        max_groups_per_unit=1,
        max_rows_per_group=3,
        epsilon=1.0,
        delta=0.0,
        groups=[0],
        noise="laplace",
    )
    assert rel.epsilon == pytest.approx(2 * 1.5 / rel.scales["rank:('v', 0.0, 200.0):10:0.5"], rel=1e-6)
    assert 50.0 < rel.table.column("quantile_0.5_v")[0].as_py() <= 60.5


def test_confidence_intervals_cover_and_std_matches():
    """Over 3000 groups of one unit each: the stated std is the noise's, and the 1 − alpha intervals of count,
    sum and mean cover the bounded truth at least 1 − alpha of the time (up to sampling slack)."""
    n = 3000
    d = {"u": np.arange(n), "g": np.arange(n), "v": np.full(n, 50.0)}
    stats = [table.count(), table.sum("v", 0, 200), table.mean("v", 0, 200)]
    rel = table.release(
        jax.random.key(6),
        d,
        by="g",
        statistics=stats,
        privacy_unit="u",
        max_groups_per_unit=1,
        max_rows_per_group=1,
        epsilon=1.0,
        delta=1e-6,
        groups=list(range(n)),
        noise="gaussian",
        alpha=0.1,
    )
    t = rel.table.to_pydict()
    err = np.asarray(t["count"]) - 1.0
    assert np.std(err) == pytest.approx(t["count_std"][0], rel=0.1)
    for name, true in (("count", 1.0), ("sum_v", 50.0), ("mean_v", 50.0)):
        lo, hi = np.asarray(t[f"{name}_ci_low"]), np.asarray(t[f"{name}_ci_high"])
        cover = np.mean((lo <= true) & (true <= hi))
        assert cover >= 0.9 - 3 * math.sqrt(0.09 / n), (name, cover)
        assert np.all(lo <= np.asarray(t[name])) and np.all(np.asarray(t[name]) <= hi)


def test_table_release_takes_keywords_only():
    fields = [f.name for f in dataclasses.fields(TableRelease)]
    assert {"ratios", "alpha"} <= set(fields)
    with pytest.raises(TypeError):
        TableRelease(None, 1.0, 0.0, False, None, 1, 1, "gaussian", {}, None, 0.0)


@pytest.mark.parametrize("integer", [False, True])
def test_variance_squares_are_centred_on_half_their_range(integer):
    """The variance's sum of squares is measured centred on h = r²/2 (PipelineDP measures it uncentred): each row
    moves Σ((x − mid)² − h) by at most r² − h ≈ r²/2, half of Σ(x − mid)²'s r², and the second moment comes back
    as Σ(…)/rows + h from the noisy row count."""
    from dpjax.table.aggregate import aggregate, component_values

    lo, hi = (0, 201) if integer else (0.0, 200.0)
    stat = table.variance("v", lo, hi)
    squares = stat.components(3, integer)[2]
    r = stat.radius(integer)
    assert squares.sensitivity == 3 * (r * r - stat.square_centre(integer)) <= 3 * math.ceil(r * r / 2)
    x = np.array([lo, stat.centre(integer), hi, 37.0, 150.0])
    agg = aggregate([stat], np.arange(5), np.ones(5, bool), {"v": x}, 5, integer)
    per_row = component_values(squares, stat, agg, integer)
    assert np.all(np.abs(per_row) <= squares.sensitivity / 3)
    np.testing.assert_allclose(per_row + stat.square_centre(integer), (x - stat.centre(integer)) ** 2, rtol=1e-6)
    # noiseless measurements give the exact variance back
    n = np.array([5.0])
    centred = np.array([np.sum(x - stat.centre(integer))])
    got = stat.finish([n, centred, np.array([per_row.sum()])], integer)
    np.testing.assert_allclose(got, [x.var()], rtol=1e-6)
    lo_, hi_ = stat.interval([n, centred, np.array([per_row.sum()])], [0.0, 0.0, 0.0], integer)
    np.testing.assert_allclose([lo_[0], hi_[0]], [x.var(), x.var()], rtol=1e-6)
    lo_, hi_ = stat.interval([n, centred, np.array([per_row.sum()])], [0.5, 30.0, 2000.0], integer)
    assert lo_[0] < x.var() < hi_[0]
