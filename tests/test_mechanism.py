"""The lattice-sensitivity rule: a kernel that adds noise on a lattice to the unrounded answer
(``lattice_step``) separates neighbours whose shift leaves the lattice (x + ℤ and x + ½ + ℤ are
disjoint): every accounting route charges ∞ there, and the multiples of the step keep their
exact figures. The CLI, which rounds the answers of a discrete release, accounts ⌈Δ⌉."""

import math

import numpy as np
import pytest

import accounting
import dpjax
from dpjax.cli import release_public as cli_release

_KERNEL = {
    "discrete_laplace": lambda: dpjax.DiscreteLaplace(2.0),
    "discrete_gaussian": lambda: dpjax.DiscreteGaussian(2.0),
    "geometric_mixture": lambda: dpjax.GeometricMixture.from_epsilon(1.0, 2.0, 1.0),
    "pb_discrete_laplace_absolute": lambda: dpjax.PrivacyBoosted(
        dpjax.DiscreteLaplace(2.0), dpjax.AbsoluteError(3.0), 0.5
    ),
    "pb_discrete_laplace_relative": lambda: dpjax.PrivacyBoosted(
        dpjax.DiscreteLaplace(2.0), dpjax.RelativeError(0.2, 3.0), 0.5
    ),
    "pb_discrete_gaussian_absolute": lambda: dpjax.PrivacyBoosted(
        dpjax.DiscreteGaussian(2.0), dpjax.AbsoluteError(3.0), 0.5
    ),
}


@pytest.mark.slow
def test_off_lattice_discrete_laplace_every_route():
    _every_route(_KERNEL["discrete_laplace"]())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(_KERNEL) - {"discrete_laplace"}))
def test_off_lattice_shift_is_infinite_in_every_route(name):
    _every_route(_KERNEL[name]())


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["geometric_mixture", pytest.param("pb_discrete_laplace_absolute", marks=pytest.mark.slow)]
)
def test_off_lattice_single_release(name):
    m = _KERNEL[name]()
    # main: 1.0 for the mixture (it examined the shift ⌈0.5⌉ = 1), 0.0 for PB-DP over integer noise
    assert np.isinf(float(accounting.pld(m, sensitivity=0.5).get_epsilon_for_delta(1e-6)))
    if m.hockey_stick is not None:
        assert np.isinf(float(accounting.exact.epsilon(m, 1e-6, 0.5)))


def _every_route(m):
    assert m.lattice_step == 1.0
    # (main: 0.25 for DiscreteLaplace, 1.0 for the mixture, 0.0 for PB-DP over integer noise)
    assert np.isinf(float(accounting.pld(m, sensitivity=0.5).get_epsilon_for_delta(1e-6)))
    assert float(accounting.pld(m, sensitivity=1.5).get_delta_for_epsilon(5.0)) == 1.0
    assert np.isinf(float(accounting.pld(m, sensitivity=0.5).pure_epsilon()))
    assert np.isinf(float(accounting.get_epsilon(m, 1e-6, sensitivity=0.5, count=3)))
    assert np.isinf(np.asarray(accounting.rdp(m, [2.0, 8.0], sensitivity=0.5))).all()
    if m.hockey_stick is not None:
        assert np.isinf(float(accounting.exact.epsilon(m, 1e-6, 0.5)))
        assert float(accounting.exact.privacy_profile(m, 3.0, 0.5)) == 1.0


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["discrete_laplace", pytest.param("pb_discrete_laplace_absolute", marks=pytest.mark.slow)]
)
def test_multiple_of_the_step_keeps_its_figure(name):
    m = _KERNEL[name]()
    e = float(accounting.pld(m, sensitivity=2.0).get_epsilon_for_delta(1e-6))
    assert np.isfinite(e)
    if m.hockey_stick is not None:
        ex = float(accounting.exact.epsilon(m, 1e-6, 2.0))
        assert ex - 1e-9 <= e <= ex + 1e-3


@pytest.mark.slow
def test_batch_of_kernels_and_accountant():
    m = dpjax.DiscreteLaplace(np.asarray([1.0, 2.0, 4.0]))
    assert np.isinf(np.asarray(accounting.pld(m, sensitivity=0.5).get_epsilon_for_delta(1e-6))).all()
    np.testing.assert_allclose(accounting.pld(m, sensitivity=1.0).pure_epsilon(), [1.0, 0.5, 0.25], rtol=1e-12)
    acc = accounting.Accountant(delta=1e-6)
    assert math.isinf(acc.record(dpjax.DiscreteLaplace(2.0), sensitivity=0.5))  # main: booked 0.25


def test_continuous_and_rounding_mechanisms_have_no_lattice():
    for m in (
        dpjax.Laplace(2.0),
        dpjax.Gaussian(2.0),
        dpjax.Laplace(2.0).exact_lattice(),
        dpjax.DiscreteLaplace(2.0).exact_lattice(),
    ):
        assert m.lattice_step is None
        assert not bool(m.off_lattice(0.5))
    # the exact tier rounds the answers to its lattice first: Δ = 0.5 costs the lattice shift ⌈Δ/g⌉ = 1
    lat = dpjax.DiscreteLaplace(2.0).exact_lattice()
    assert float(accounting.pld(lat, sensitivity=0.5).get_epsilon_for_delta(1e-6)) == pytest.approx(0.5, abs=1e-3)


def test_cli_rounds_half_up():
    """Half-to-even rounding sends 0.5 → 0 and 1.5 → 2: answers 1 apart 2 apart after rounding."""
    key = __import__("jax").random.PRNGKey(0)
    out = cli_release._release_values(key, np.asarray([0.5, 1.5, 2.5]), dpjax.DiscreteLaplace(1e-6))
    np.testing.assert_array_equal(out, [1, 2, 3])
