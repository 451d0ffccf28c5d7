"""dpjax.table on the exact tier (issue 18): integer-only noise on each component's lattice, addressed by
(key, component, group key, element), calibrated and accounted as the lattice mechanism actually run."""

import math

import jax
import numpy as np
import pytest
from scipy import stats as sps

import accounting
import dpjax
from dpjax import table
from dpjax.table import noise as table_noise
from dpjax.table.keys import KeyWords, hash_values


#: a count, a sum and a quantile (its exponential mechanism over many candidates), private selection: one
#: configuration for the tests below, so that its lattice calibration (seconds) runs once per process
EXACT_STATS = [table.count(), table.sum("steps", 0, 20000), table.quantile("steps", 0.5, 0, 20000)]
EXACT_KW = dict(
    statistics=EXACT_STATS,
    privacy_unit="user_id",
    max_groups_per_unit=2,
    max_rows_per_group=3,
    epsilon=1.0,
    delta=1e-6,
    noise="laplace",
)


def _data(n=4000, users=400, groups=8, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "user_id": rng.integers(0, users, n),
        "g": rng.integers(0, groups, n),
        "steps": rng.integers(0, 20000, n).astype(np.float64),
    }


def _chisquare(z, pmf, lo, hi):
    """χ² p-value of integer draws ``z`` against ``pmf(k)``: cells lo..hi (expected count > 5) and the rest."""
    ks = np.arange(lo, hi + 1)
    p = np.asarray(pmf(ks), np.float64)
    inside = (z >= lo) & (z <= hi)
    observed = np.concatenate([np.bincount(z[inside] - lo, minlength=ks.size), [np.count_nonzero(~inside)]])
    expected = np.concatenate([p, [1.0 - p.sum()]]) * z.size
    keep = expected > 5
    return sps.chisquare(observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum()).pvalue


@pytest.mark.parametrize(
    "kernel,lo,hi",
    [
        (dpjax.DiscreteLaplace(2.5), -15, 15),
        (dpjax.DiscreteGaussian(3.0), -12, 12),
        pytest.param(dpjax.Laplace(4.0), None, None, marks=pytest.mark.slow),
    ],
)
def test_exact_table_noise_has_the_law_it_claims(kernel, lo, hi):
    """The integer noise drawn for 40 000 groups (value 0, element 0): χ² against the exact pmf of the
    lattice's integer noise (for the Laplace lattice, t ≈ 2^21: on 40 cells of equal mass)."""
    lat = kernel.exact_lattice()
    groups = 40_000
    words = hash_values(list(range(groups)))
    pair = KeyWords(jax.random.key(3)).component("rows")
    out = table_noise.draw(lat, pair, words, np.zeros((groups, 1)), np.zeros((groups, 1)))[:, 0]
    g = float(lat.granularity)
    z = out / g
    np.testing.assert_array_equal(z, np.round(z))  # points of gZ
    z = z.astype(np.int64)
    with jax.enable_x64(True):
        if lo is not None:
            p = _chisquare(z, lambda k: np.exp(np.asarray(lat.noise.noise_log_prob(k.astype(np.float64)))), lo, hi)
        else:  # cells of equal mass of the discrete Laplace t: edges by its CDF
            cdf = lambda k: np.asarray(lat.noise.noise_cdf(np.asarray(k, np.float64)))  # noqa: E731
            edges = np.asarray(lat.noise.noise_icdf(np.linspace(0, 1, 41)[1:-1]))
            cells = np.searchsorted(edges, z, side="left")
            mass = np.diff(np.concatenate([[0.0], cdf(edges - 1), [1.0]]))
            p = sps.chisquare(np.bincount(cells, minlength=40), mass * z.size).pvalue
    assert p > 1e-3


@pytest.mark.slow
def test_exact_is_the_default_for_laplace_and_its_outputs_lie_on_the_lattice():
    d = _data(n=20000, users=4000)  # ≈ 900 units per group: above the selection threshold (≈ 400)
    rel = table.release(jax.random.key(0), d, by="g", **EXACT_KW)
    assert rel.numerics == "exact" and 0.999 <= rel.epsilon <= 1.0 and rel.delta <= 1e-6
    assert rel.table.num_rows >= 3
    assert rel.table.column("count").type == "int64"  # counts on the exact tier are integers
    assert rel.threshold / rel.granularity["units"] == round(rel.threshold / rel.granularity["units"])
    assert table.release(jax.random.key(0), d, by="g", **{**EXACT_KW, "numerics": "float"}).numerics == "float"
    assert table.release(jax.random.key(0), d, by="g", **{**EXACT_KW, "noise": "gaussian"}).numerics == "float"
    with pytest.raises(ValueError, match="numerics"):
        table.release(jax.random.key(0), d, by="g", **{**EXACT_KW, "numerics": "integer"})


@pytest.mark.slow
def test_exact_noise_is_invariant_to_row_order_and_to_the_other_groups():
    """A group's exact noise depends only on (key, statistic, group key, element): shuffled rows give the same
    table, and a group's draw is bitwise the same whichever other groups are drawn with it."""
    d = _data(n=20000, users=4000, seed=1)
    perm = np.random.default_rng(5).permutation(len(d["g"]))
    shuffled = {c: v[perm] for c, v in d.items()}
    a = table.release(jax.random.key(3), d, by="g", numerics="exact", **EXACT_KW).table
    assert a.num_rows >= 3
    assert a.equals(table.release(jax.random.key(3), shuffled, by="g", numerics="exact", **EXACT_KW).table)
    assert not a.equals(table.release(jax.random.key(4), d, by="g", numerics="exact", **EXACT_KW).table)
    # the draw of a group (its elements too) is the same whichever other groups are drawn beside it
    lat = dpjax.Laplace(3.0).exact_lattice()
    pair = KeyWords(jax.random.key(3)).component("tree:x")
    words = hash_values(list(range(300)))
    values = np.random.default_rng(0).normal(size=(300, 2)) * 100
    elements = np.array([[5, 6]] * 300)
    full = table_noise.draw(lat, pair, words, elements, values)
    few = table_noise.draw(lat, pair, words[[7, 250]], elements[:2], values[[7, 250]])
    np.testing.assert_array_equal(few, full[[7, 250]])


@pytest.mark.slow
def test_exact_accounting_is_that_of_the_lattice_mechanism_run():
    """rel.epsilon is the composed PLD of the integer noise actually drawn — discrete Laplace t = scale/g at the
    lattice sensitivity ⌈Δ/g⌉, rebuilt here from rel.scales and rel.granularity — including a component whose
    sensitivity is off the lattice (rounded up), and it is ≤ the request and ≥ 0.9 of it."""
    stats = [table.count(), table.sum("steps", 0, 0.3)]  # Δ = 2 · 0.3: not a multiple of any power of two
    rel = table.release(
        jax.random.key(0),
        _data(),
        by="g",
        statistics=stats,
        privacy_unit="user_id",
        max_groups_per_unit=3,
        max_rows_per_group=2,
        epsilon=1.0,
        delta=1e-6,
        noise="laplace",
    )
    assert rel.numerics == "exact"
    assert 0.9 <= 0.999 <= rel.epsilon <= 1.0
    total = None
    rounded = False
    parts = (("rows", 2.0), ("centred:('steps', 0.0, 0.3):False", 0.3), ("units", 1.0))
    for name, sens in parts:
        g = rel.granularity[name]
        k = math.ceil(sens / g)
        rounded |= k != sens / g
        p = accounting.pld(dpjax.DiscreteLaplace(rel.scales[name] / g), sensitivity=float(k)).self_compose(3)
        total = p if total is None else total.compose(p)
    assert rounded
    eps = float(total.get_epsilon_for_delta(rel.delta - rel.selection_delta))
    assert eps <= rel.epsilon * (1 + 1e-9) and eps >= rel.epsilon * (1 - 1e-6)
    # the float Laplace at the same scales is (slightly) more private: the lattice's rounding was charged
    flt = None
    for name, sens in parts:
        p = accounting.pld(dpjax.Laplace(rel.scales[name]), sensitivity=sens).self_compose(3)
        flt = p if flt is None else flt.compose(p)
    assert float(flt.get_epsilon_for_delta(rel.delta - rel.selection_delta)) < eps


@pytest.mark.slow
def test_exact_selection_keeps_large_groups_and_drops_single_units():
    """Private selection on the exact tier: the noisy unit count is a lattice point, τ a lattice point; a group
    of one unit is dropped, a group of 300 units kept, across keys."""
    users = np.arange(301)
    d = {"user_id": users, "g": np.where(users < 300, 0, 1), "steps": np.zeros(301)}
    for seed in range(5):
        rel = table.release(
            jax.random.key(seed),
            d,
            by="g",
            statistics=[table.count()],
            privacy_unit="user_id",
            max_groups_per_unit=1,
            max_rows_per_group=1,
            epsilon=1.0,
            delta=1e-6,
            noise="laplace",
        )
        assert rel.numerics == "exact" and rel.table.column("g").to_pylist() == [0]
        g = rel.granularity["units"]
        assert rel.threshold / g == round(rel.threshold / g)
        assert 0 < rel.selection_delta <= 0.5e-6


def test_cli_default_table_release_runs_on_the_exact_tier(tmp_path, capsys):
    import csv

    from dpjax.cli import main

    out = tmp_path / "r.csv"
    assert main(["release", "--seed", "0", "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "dpjax release — " in text and "numerics: exact (integer-only noise on the lattice" in text
    g = float(text.split("sum of steps in [-20000, 20000] ")[-1].split("·Z")[0])
    released = np.array([float(r["sum_steps"]) for r in csv.DictReader(out.open())])
    np.testing.assert_array_equal(released / g, np.round(released / g))
    assert main(["release", "--seed", "0", "--numerics", "float"]) == 0
    text = capsys.readouterr().out
    assert "dpjax release — " in text and "numerics: float" in text


def test_api_defaults_name_the_command_lines():
    """The defaults of ``dpjax.table.release`` are those of ``dpjax release``: Laplace noise, on the exact tier where
    the kernel has one (the release itself: the slow test below)."""
    import inspect

    from dpjax.table.release import numerics_of

    params = inspect.signature(table.release).parameters
    assert params["noise"].default == "laplace" and params["numerics"].default is None
    assert numerics_of(dpjax.Laplace(1.0), None) == "exact"


@pytest.mark.slow
def test_api_defaults_are_the_command_lines():
    """``dpjax.table.release`` without ``noise`` or ``numerics`` runs what ``dpjax release`` runs: Laplace noise on
    the exact tier (the configuration of the tests above: its calibration is remembered)."""
    default = {k: v for k, v in EXACT_KW.items() if k != "noise"}
    rel = table.release(jax.random.key(4), _data(), by="g", **default)
    assert rel.noise == "laplace" and rel.numerics == "exact"
    assert rel.table.equals(table.release(jax.random.key(4), _data(), by="g", **EXACT_KW).table)


@pytest.mark.slow
def test_exact_gaussian_calibration_meets_the_budget_as_the_lattice_run():
    """noise='gaussian', numerics='exact': the discrete Gaussian lattices, composed at their lattice
    sensitivities, meet the budget (≤ the request, ≥ 0.999 of it); about a minute (its PLDs are atomic)."""
    stats = [table.count(), table.sum("steps", 0, 20000)]
    rel = table.release(
        jax.random.key(0),
        _data(),
        by="g",
        statistics=stats,
        privacy_unit="user_id",
        max_groups_per_unit=3,
        max_rows_per_group=2,
        epsilon=1.0,
        delta=1e-6,
        noise="gaussian",
        numerics="exact",
    )
    assert rel.numerics == "exact" and 0.999 <= rel.epsilon <= 1.0
    x = rel.table.column("count").to_numpy() / rel.granularity["rows"]
    np.testing.assert_array_equal(x, np.round(x))  # points of gZ
    # the sum is the centred sum (radius 10000, 2 rows) plus the centre times the noisy row count
    (centred,) = [name for name in rel.granularity if name.startswith("centred:")]
    for name, sens in (("rows", 2.0), (centred, 20000.0)):
        assert math.ceil(sens / rel.granularity[name]) <= 2**12  # the lattice sensitivity: σ/g ∈ (2^11, 2^12], σ > Δ


def test_cli_numerics_exact_is_refused_for_a_kernel_without_an_exact_sampler(capsys):
    from dpjax.cli import main

    assert main(["release", "--seed", "0", "--mechanism", "contract:Logistic", "--numerics", "exact"]) == 2
    err = capsys.readouterr().err
    assert "--numerics" in err and "exact sampler" in err and err.count("\n") == 1
