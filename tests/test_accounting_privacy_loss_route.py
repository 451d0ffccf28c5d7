"""The PLD engine decides a mechanism's route once (accounting.privacy_loss.route), and the PLD it
builds is the one that decision names; the batch queries build through the construction module's
public names, never another module's private ones. One route decides a composed PLD's flags (the odometer's
count-traced composition included), the mixture declares log-concavity where it holds, finer grids converge."""

import ast
from pathlib import Path

import jax
import numpy as np
import pytest

import accounting
import dpjax
from accounting.accountant import self_compose_by_count
from accounting.privacy_loss.route import route
from dpjax.kernels import Laplace
from dpjax.mechanism import Mechanism
from dpjax.pytree import pytree_dataclass

ROOT = Path(__file__).resolve().parents[1]


@pytree_dataclass
class GridLaplace(Laplace):
    """Laplace without its closed form: the output-grid source."""

    hockey_stick = Mechanism.hockey_stick


CASES = {
    "Gaussian": (
        dpjax.Gaussian(sigma=1.0),
        1.0,
        dict(analytic=True, profile="closed_form", pure_cap=False, atomic=False, pair_path=False),
    ),
    "Gaussian-subsampled": (
        dpjax.Gaussian(sigma=1.0),
        0.1,
        dict(analytic=False, profile="closed_form", pure_cap=False, atomic=False, pair_path=False),
    ),
    "DiscreteLaplace": (
        dpjax.DiscreteLaplace(scale=1.0),
        1.0,
        dict(analytic=False, profile="closed_form", pure_cap=True, atomic=True, pair_path=False),
    ),
    "DiscreteGaussian": (
        dpjax.DiscreteGaussian(sigma=2.0),
        1.0,
        dict(analytic=False, profile="discrete", pure_cap=False, atomic=True, pair_path=False),
    ),
    "GridLaplace": (
        GridLaplace(scale=1.0),
        1.0,
        dict(analytic=False, profile="output_grid", pure_cap=True, atomic=False, pair_path=False),
    ),
    "PB-Laplace-Relative": (
        dpjax.PrivacyBoosted(dpjax.Laplace(4.785), dpjax.RelativeError(0.155, 4.506), 0.794),
        1.0,
        dict(analytic=False, profile="closed_form", pure_cap=False, atomic=False, pair_path=True),
    ),
}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in ("DiscreteGaussian", "GridLaplace") else n for n in CASES]
)
def test_pld_is_built_as_its_route_says(name):
    mech, q, expected = CASES[name]
    how = route(mech, None if q == 1.0 else q)
    assert {k: getattr(how, k) for k in expected} == expected
    if name == "PB-Laplace-Relative":
        return  # its grid build takes long; the decision above is what this test is about
    p = accounting.pld(mech, sampling_prob=q, value_discretization_interval=2.0**-8, output_cells=2**10)
    assert p.is_analytic == how.analytic
    if not how.analytic:
        assert p.atomic == how.atomic
        assert (p.pure_eps is not None) == how.pure_cap
        assert (p.source is not None) == how.exact_derivative


def test_use_analytic_false_takes_the_grid():
    how = route(dpjax.Gaussian(sigma=1.0), None, use_analytic=False)
    assert not how.analytic and how.profile == "closed_form"


def test_batch_route_imports_no_private_name_of_another_module():
    tree = ast.parse((ROOT / "accounting/privacy_loss/batch.py").read_text())
    private = [
        f"{node.module}.{a.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("accounting")
        for a in node.names
        if a.name.startswith("_")
    ]
    assert private == []


@pytest.mark.slow
def test_odometer_composition_of_a_discrete_mechanism_refuses_to_be_differentiated():
    """The Accountant composes by a traced count (``self_compose_by_count``); its PLD lost the
    ``atomic`` flag, so a gradient through it was the grid's (wrong) one instead of a refusal."""

    def fn(b):
        return self_compose_by_count(accounting.pld(dpjax.DiscreteLaplace(b)), 10).get_epsilon_for_delta(1e-6)

    with jax.enable_x64(True):
        with pytest.raises(ValueError, match="composed PLD of a discrete .* cannot be differentiated"):
            jax.grad(fn)(2.4)
        single = accounting.pld(dpjax.DiscreteLaplace(2.4))
        assert float(fn(2.4)) == pytest.approx(float(single.self_compose(10).get_epsilon_for_delta(1e-6)), rel=1e-9)

    # a continuous kernel still differentiates through the same route
    def cont(b):
        return self_compose_by_count(accounting.pld(dpjax.Laplace(b)), 10).get_epsilon_for_delta(1e-6)

    with jax.enable_x64(True):
        g = float(jax.grad(cont)(2.0))
    assert np.isfinite(g) and g < 0


@pytest.mark.parametrize("cls", ["LaplaceMixture", "GeometricMixture"])
def test_mixture_declares_log_concavity_exactly_where_it_holds(cls):
    """log f = −φ(|n|): concave iff the outer slope λ1 ≥ the inner λ2 (r ≥ 1) or c = 0. The flag (it
    was False for every r) must agree with second differences of the log density, and a traced
    construction (inside jit) falls back on False (every shift examined)."""
    kind = getattr(dpjax, cls)
    for r in (0.25, 0.9, 1.0, 1.5, 5.0):
        for c in (0.0, 1.0, 3.0):
            m = kind.from_epsilon(0.4, r, c)
            with jax.enable_x64(True):
                reach = 40.0
                n = np.arange(-reach, reach + 1.0) if m.discrete else np.linspace(-reach, reach, 8001)
                lp = np.asarray(m.noise_log_prob(jax.numpy.asarray(n)))
            concave = bool(np.all(np.diff(lp, 2) <= 1e-9))
            assert m.log_concave == concave == (r >= 1.0 or c == 0.0), (r, c)
            if m.log_concave:  # the worst pair is the full shift: one pair instead of a path
                assert np.shape(m.neighbour_pairs(2.0)[1])[-1] == 1
    assert float(jax.jit(lambda b: kind(b, 0.5 * b).log_concave * 1.0)(1.0)) == 0.0


@pytest.mark.slow
def test_log_concave_mixture_pld_matches_the_truth():
    """Lap_m(0.3, r=4, c=3), k = 10 / 30: 8.7349 / 16.960 (issue 20), now from the full shift alone."""
    m = dpjax.LaplaceMixture.from_epsilon(0.3, 4, 3)
    assert m.log_concave
    for k, truth in ((10, 8.7349), (30, 16.960)):
        got = float(accounting.pld(m).self_compose(k).get_epsilon_for_delta(1e-6))
        assert truth - 1e-3 <= got <= truth * 1.002


@pytest.mark.slow
def test_no_mass_is_dropped_below_the_grid():
    """The first grid mass is at least what the others leave of 1 (all mass below the grid lifted to
    it): from the other side's normalisation alone an envelope of pair profiles left 0.99996 (PB-DP,
    Laplace kernel, relative region, 2^-11), and mass dropped at the bottom lowers composed δ."""
    m = dpjax.PrivacyBoosted(dpjax.Laplace(4.785), dpjax.RelativeError(0.155, 4.506), 0.794)
    p = accounting.pld(m, sensitivity=0.721, value_discretization_interval=2.0**-11)
    for d in p._directions():
        mass = float(np.sum(np.asarray(d.probs))) + float(d.inf_mass)
        assert abs(mass - 1.0) <= 1e-9
