"""The PLD engine decides a mechanism's route once (accounting.privacy_loss.route), and the PLD it
builds is the one that decision names; the batch queries build through the construction module's
public names, never another module's private ones."""

import ast
from pathlib import Path

import pytest

import accounting
import dpjax
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
