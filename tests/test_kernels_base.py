"""The kernel protocol: a kernel written outside the package (logistic noise, examples/custom_kernel.py)
works everywhere a built-in does, the generic defaults agree with the built-ins' closed forms,
and no call site names a concrete kernel class."""

from __future__ import annotations

import ast
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, optimize as sopt

import accounting
import dpjax
import optimize
from contract import Logistic
from dpjax.kernels.base import AdditiveMechanism
from dpjax import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------------
# the generic defaults against the built-ins' closed forms
# ----------------------------------------------------------------------------------
KERNELS = [dpjax.Laplace(1.7), dpjax.Gaussian(2.3), dpjax.DiscreteLaplace(1.7), dpjax.DiscreteGaussian(2.3)]


@pytest.mark.parametrize(
    "kernel",
    [pytest.param(k, marks=pytest.mark.slow) if k.discrete else k for k in KERNELS],
    ids=lambda k: type(k).__name__,
)
def test_generic_loss_threshold_matches_closed_form(kernel):
    with jax.enable_x64(True):
        k = jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), kernel)
        t = jnp.linspace(-2.5, 2.5, 41)
        for v, nv in ((0.0, 2.0), (3.0, 1.0)):
            far = float(k.noise_far())
            lo, hi = min(v, nv) - far, max(v, nv) + far
            if k.discrete:
                lo, hi = lo - 0.5, hi + 0.5
            closed = np.clip(np.asarray(k.noise_loss_threshold(t, v, nv, lo, hi, v < nv)), lo, hi)
            generic = np.asarray(AdditiveMechanism.noise_loss_threshold(k, t, v, nv, lo, hi, v < nv))
            # the same split of the output line (continuous: to the bisection's resolution)
            np.testing.assert_allclose(generic, closed, atol=0.0 if k.discrete else 1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS[:2], ids=lambda k: type(k).__name__)
def test_generic_masses_quantiles_and_tilted_integrals_match_closed_forms(kernel):
    with jax.enable_x64(True):
        k = jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), kernel)
        x = jnp.asarray([0.3, 1.0, 4.0, 12.0])
        for a, b in zip(k.noise_side_masses(x), AdditiveMechanism.noise_side_masses(k, x)):
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-16)
        p = jnp.asarray([1e-4, 0.1, 0.4])  # (far tails and the median: where the closed forms earn their keep)
        for side in (-1.0, 1.0):
            np.testing.assert_allclose(
                AdditiveMechanism.noise_split_icdf(k, p, side * (0.5 - p), side),
                k.noise_split_icdf(p, side * (0.5 - p), side),
                rtol=1e-8,
            )
        lo, hi = jnp.asarray([-3.0, 1.5]), jnp.asarray([-0.5, 9.0])  # pieces without a kink (0, 1)
        for alpha in (2.0, 6.0):
            np.testing.assert_allclose(
                AdditiveMechanism.noise_tilted_log_integral(k, lo, hi, 0.0, 1.0, alpha),
                k.noise_tilted_log_integral(lo, hi, 0.0, 1.0, alpha),
                rtol=1e-9,
            )
        reach = float(AdditiveMechanism.noise_reach(k))
        assert float(k.noise_log_sf(reach)) <= np.log(0.5e-17)
        assert reach <= 2.0 * float(k.noise_reach()) + 1.0


# ----------------------------------------------------------------------------------
# a kernel defined outside the package
# ----------------------------------------------------------------------------------
def _quadrature_delta(mech, eps, v, nv):
    """∫ (p_v − e^ε p_nv)_+ of the boosted logistic laws, by adaptive quadrature between the
    region boundaries of both laws (float64)."""
    with jax.enable_x64(True):
        m = jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), mech)
        f = jax.jit(lambda y: jnp.maximum(jnp.exp(m.log_prob(y, v)) - jnp.exp(eps + m.log_prob(y, nv)), 0.0))
        cuts = sorted([-80.0, v, nv, *np.asarray(m.output_breakpoints(v, nv)).ravel(), 80.0])
        return sum(
            integrate.quad(lambda y: float(f(y)), a, b, epsabs=1e-14, epsrel=1e-12, limit=200)[0]
            for a, b in zip(cuts[:-1], cuts[1:])
        )


@pytest.mark.slow
def test_boosted_logistic_meets_its_coverage():
    mech = dpjax.PrivacyBoosted(Logistic(2.0), dpjax.AbsoluteError(3.0), 0.9)
    assert float(mech.coverage(0.0)) == pytest.approx(0.9, rel=1e-6)
    for sampler in ("mixture", "rejection"):
        m = dpjax.PrivacyBoosted(Logistic(2.0), dpjax.AbsoluteError(3.0), 0.9, sampler=sampler)
        x = np.asarray(dpjax.release(jax.random.key(3), jnp.zeros(200_000), m))
        inside = np.mean(np.abs(x) <= 3.0)
        assert abs(inside - 0.9) < 4.0 * np.sqrt(0.09 / x.size)


@pytest.mark.slow
def test_boosted_logistic_exact_epsilon_matches_quadrature():
    """ε of PB(Logistic) at δ = 1e-6 against an independent root of the quadrature of the hockey-stick
    divergence of the worst pair (0, Δ) (absolute error: translation invariant): within 1e-4, never below."""
    mech = dpjax.PrivacyBoosted(Logistic(2.0), dpjax.AbsoluteError(3.0), 0.9)
    got = float(accounting.exact.epsilon(mech, 1e-6))
    ref = sopt.brentq(lambda e: _quadrature_delta(mech, e, 0.0, 1.0) - 1e-6, 0.01, 5.0, xtol=1e-12)
    assert got >= ref * (1 - 1e-12)
    assert got == pytest.approx(ref, rel=1e-4)
    # and the discretised PLD of the same mechanism (generic output grid not needed: closed form) stays above
    assert float(accounting.pld(mech).get_epsilon_for_delta(1e-6)) >= ref


@pytest.mark.slow
def test_tune_boosted_logistic_reaches_the_exact_optimum():
    region, rho, sens, delta = dpjax.AbsoluteError(2.0), 0.8, 3.0, 1e-5
    best = optimize.tune_boosted(kernel=Logistic(1.0), region=region, rho=rho, sensitivity=sens, delta=delta)
    assert isinstance(best.mechanism.kernel, Logistic)
    base = float(best.sigma_base)
    scales = base * np.exp(np.linspace(0.0, np.log(50.0), 801))
    mech = dpjax.PrivacyBoosted(Logistic(jnp.asarray(scales)), region, rho)
    dense = np.asarray(accounting.exact.epsilon(mech, delta, sens))
    assert float(best.epsilon) <= dense.min() * (1 + 5e-3)
    assert float(best.epsilon) >= dense.min() * (1 - 1e-3)  # (the dense grid's minimum is not below the optimum)
    np.testing.assert_allclose(float(best.baseline_epsilon), dense[0], rtol=1e-6)


@pytest.mark.slow
def test_logistic_release_and_accounting():
    kernel = Logistic(2.0)
    x = np.asarray(dpjax.release(jax.random.key(0), jnp.zeros(50_000), kernel))
    assert x.std() == pytest.approx(2.0 * np.pi / np.sqrt(3.0), rel=0.02)
    eps = float(accounting.pld(kernel).get_epsilon_for_delta(1e-6))
    assert 0.49 < eps <= 0.5 + 1e-3  # pure ε = Δ/s = 0.5: the output-grid PLD stays at or above the truth


@pytest.mark.slow
def test_cli_takes_a_kernel_class(capsys):
    code = cli.main(
        [
            "release",
            "--mechanism",
            "boosted",
            "--kernel",
            "examples.custom_kernel:Logistic",
            "--region",
            "absolute",
            "--seed",
            "0",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "Logistic(" in out and "PB-DP" in out
    assert (
        cli.main(
            [
                "release",
                "--mechanism",
                "examples.custom_kernel:Logistic",
                "--epsilon",
                "1",
                "--delta",
                "1e-6",
                "--seed",
                "1",
            ]
        )
        == 0
    )
    # a kernel whose variance is not known reports no noise std (it printed "nan–nan")
    assert "nan" not in capsys.readouterr().out
    assert cli.main(["release", "--kernel", "examples.custom_kernel:Nothing", "--mechanism", "boosted"]) == 2


# ----------------------------------------------------------------------------------
# capabilities, not types
# ----------------------------------------------------------------------------------
CONCRETE = {"Laplace", "Gaussian", "DiscreteLaplace", "DiscreteGaussian"}


def test_no_call_site_names_a_concrete_kernel_class():
    """Outside a kernel's own module (dpjax/kernels/) and the package's export list, no code (the
    CLI included: it builds kernels through the registry) refers to Laplace, Gaussian, DiscreteLaplace or
    DiscreteGaussian."""
    allowed = {ROOT / "dpjax" / "__init__.py"}
    hits = []
    for package in ("dpjax", "accounting", "optimize"):
        for path in (ROOT / package).rglob("*.py"):
            if path in allowed or (ROOT / "dpjax" / "kernels") in path.parents:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                name = (
                    node.id
                    if isinstance(node, ast.Name)
                    else node.attr
                    if isinstance(node, ast.Attribute)
                    else (node.name if isinstance(node, ast.alias) else None)
                )
                if name in CONCRETE:
                    hits.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    assert not hits, hits


def test_a_kernel_missing_a_required_method_cannot_be_built():
    """Required methods are abstract: the class cannot be instantiated, and the error names the method."""

    @dpjax.pytree_dataclass
    class NoQuantile(AdditiveMechanism):
        scale: jax.Array

        def noise_log_prob(self, n):
            return -jnp.abs(n) / self.scale - jnp.log(2 * self.scale)

        def noise_log_cdf(self, n):
            return jnp.log(0.5) + jnp.minimum(n, 0.0) / self.scale

    with pytest.raises(TypeError, match="noise_icdf"):
        NoQuantile(1.0)


def test_optional_hooks_are_declared_by_defining_them():
    """One way to declare a capability: a hook is None unless the mechanism defines it."""
    assert dpjax.Laplace(1.0).hockey_stick is not None and dpjax.Laplace(1.0).pure_epsilon is not None
    assert dpjax.Gaussian(1.0).gaussian_pld_mu is not None and dpjax.Gaussian(1.0).pure_epsilon is None
    assert dpjax.DiscreteGaussian(2.0).hockey_stick is None
    lattice = dpjax.DiscreteLaplace(2.0).exact_lattice()
    assert lattice.hockey_stick is not None and lattice.renyi_divergence is None


def test_pair_law_hooks_belong_to_the_class_that_defines_the_profile():
    """A subclass with its own ``hockey_stick`` is not accounted as its parent's pair law: the accountant's host
    build reads ``laplace_pld_ratio`` / ``gaussian_pld_mu``, and a subclass would otherwise inherit them."""
    from dpjax.pytree import pytree_dataclass

    assert dpjax.Laplace.laplace_pld_ratio is not None and dpjax.Gaussian.laplace_pld_ratio is None
    assert float(dpjax.Laplace(4.0).laplace_pld_ratio(-2.0)) == 0.5

    @pytree_dataclass
    class Tighter(dpjax.Laplace):
        def hockey_stick(self, epsilon, value, neighbour_value):
            return 0.5 * dpjax.Laplace.hockey_stick(self, epsilon, value, neighbour_value)

    @pytree_dataclass
    class Plain(dpjax.Gaussian):
        pass

    assert Tighter.laplace_pld_ratio is None and Tighter.gaussian_pld_mu is None
    assert Plain.gaussian_pld_mu is not None
    # the host build follows the subclass's own profile (the compiled build), not the Laplace pair's
    eps = np.asarray([0.0, 0.25])
    got = np.asarray(accounting.pld(Tighter(2.0)).get_delta_for_epsilon(eps))
    assert (got < np.asarray(accounting.pld(dpjax.Laplace(2.0)).get_delta_for_epsilon(eps))).all()
