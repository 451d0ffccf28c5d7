"""The mechanism contract: the cases every mechanism of the engine is checked against.

A new mechanism costs one :class:`Case` line in :data:`CASES`; ``tests/test_contract.py``
runs every check on every case:

* pytree / ``jit`` / ``vmap`` / ``grad`` round trip of ``log_prob``;
* samples against ``cdf`` (KS for continuous laws, χ² for discrete ones; 10⁶ draws in the
  slow suite);
* ``log_prob`` against ``cdf`` differences (density = derivative, pmf = jump);
* closed-form hooks (``hockey_stick``) inside the generic output-grid / exact-atom
  accountant's optimistic and pessimistic profiles of the same pair;
* closed-form Rényi divergence against quadrature (or the exact sum);
* the declared worst neighbouring pair is the worst of a scan of pairs;
* validation errors name the parameter;
* releases bitwise identical on 1 and 4 (slow: also 2) devices.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import pathlib
from typing import Callable

import jax
import jax.numpy as jnp

import dpjax

_EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "custom_kernel.py"
_spec = importlib.util.spec_from_file_location("custom_kernel", _EXAMPLE)
custom_kernel = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(custom_kernel)
Logistic = custom_kernel.Logistic  # a kernel defined outside the package


@dataclasses.dataclass(frozen=True)
class Case:
    """One mechanism under the contract.

    ``build`` gives the mechanism (float32 defaults); ``values`` are true answers to sample
    at; ``sensitivity`` is Δ of the worst-pair checks; ``invalid`` pairs a failing
    constructor with the parameter name its error must carry; ``scan`` gives the answers
    ``Q`` of the pair scan (pairs ``(Q, Q + d)``, ``0 < d ≤ Δ``); ``points``, the outputs where
    the law of ``values[1]`` is evaluated, for a law on a bounded output range (default
    ``values[1] ± 6``). Which cases of a check run in the slow suite only is said at the check
    (``tests/test_contract.py``)."""

    id: str
    build: Callable
    values: tuple = (0.0, 3.0)
    sensitivity: float = 1.0
    invalid: tuple = ()
    scan: tuple = (0.0,)
    categorical: bool = False  # values are category indices (randomized response)
    points: tuple | None = None  # outputs where the law of values[1] is compared (default: values[1] ± 6)


def _pb(kernel, region, rho=0.9, **kw):
    return lambda: dpjax.PrivacyBoosted(kernel(), region(), rho, **kw)


CASES = [
    Case("Laplace", lambda: dpjax.Laplace(1.5), invalid=((lambda: dpjax.Laplace(-1.0), "scale"),)),
    Case("Gaussian", lambda: dpjax.Gaussian(2.0), invalid=((lambda: dpjax.Gaussian(0.0), "sigma"),)),
    Case(
        "DiscreteLaplace",
        lambda: dpjax.DiscreteLaplace(2.0),
        values=(0, 3),
        sensitivity=2.0,
        invalid=((lambda: dpjax.DiscreteLaplace(float("nan")), "scale"),),
    ),
    Case(
        "DiscreteGaussian",
        lambda: dpjax.DiscreteGaussian(1.5),
        values=(0, 3),
        invalid=((lambda: dpjax.DiscreteGaussian(-2.0), "sigma"),),
    ),
    # r < 1, c < Δ: not log-concave, the worst shift is below Δ (tests/test_kernels_mixture.py covers r ≥ 1)
    Case(
        "LaplaceMixture",
        lambda: dpjax.LaplaceMixture(0.5, 2.0, 0.4),
        scan=(-0.6, 0.0, 0.3),
        invalid=(
            (lambda: dpjax.LaplaceMixture(2.0, -1.0, 1.0), "outer_scale"),
            (lambda: dpjax.LaplaceMixture(1.0, 1.0, -0.5), "breakpoint"),
        ),
    ),
    Case(
        "GeometricMixture",
        lambda: dpjax.GeometricMixture(2.0, 0.8, 2),
        values=(0, 3),
        sensitivity=2.0,
        invalid=((lambda: dpjax.GeometricMixture(2.0, 0.8, 1.5), "breakpoint"),),
    ),
    Case("Logistic", lambda: Logistic(1.2), invalid=((lambda: Logistic(0.0), "scale"),)),
    Case(
        "RandomizedResponse",
        lambda: dpjax.RandomizedResponse(1.0, 4),
        values=(0, 2),
        categorical=True,
        invalid=((lambda: dpjax.RandomizedResponse(1.0, 1), "num_categories"),),
    ),
    Case(
        "BoostedRandomizedResponse",
        lambda: dpjax.BoostedRandomizedResponse(2.0, 1.0, 6, 2),
        values=(0, 3),
        categorical=True,
        invalid=((lambda: dpjax.BoostedRandomizedResponse(1.0, 2.0, 6, 2), "epsilon0"),),
    ),
    # the pair dominating every ε-bounded-range mechanism (the table quantile's exponential mechanism)
    Case(
        "BoundedRange",
        lambda: dpjax.BoundedRange(1.5),
        values=(0.0, 1.0),
        points=tuple(float(y) for y in jnp.linspace(-1.45, 1.45, 25)),
        invalid=((lambda: dpjax.BoundedRange(-1.0), "epsilon"),),
    ),
    # its accountant-level checks (~50 s) run in the slow suite: the absolute region's exact accountant stays in the
    # default suite through tests/test_accounting_privacy_loss.py (ε = 430.42 and its gradient)
    Case(
        "PB-Gaussian-Absolute",
        _pb(lambda: dpjax.Gaussian(3.0), lambda: dpjax.AbsoluteError(2.0)),
        sensitivity=2.0,
        invalid=((_pb(lambda: dpjax.Gaussian(3.0), lambda: dpjax.AbsoluteError(2.0), 1.5), "rho"),),
    ),
    Case(
        "PB-Laplace-Relative",
        _pb(lambda: dpjax.Laplace(2.0), lambda: dpjax.RelativeError(0.2, 2.0)),
        values=(0.0, 6.0),
        scan=(-0.5, 0.0, 2.0, 5.0, 10.0, 20.0),
        invalid=((lambda: dpjax.RelativeError(-0.1, 1.0), "theta"),),
    ),
    Case(
        "PB-Gaussian-Fixed",
        _pb(lambda: dpjax.Gaussian(4.0), lambda: dpjax.FixedInterval(-2.0, 10.0)),
        values=(-2.0, 4.0),
        scan=(-2.0, 0.0, 4.0, 9.0),
        invalid=((lambda: dpjax.FixedInterval(1.0, 0.0), "high"),),
    ),
    # its accountant-level checks (~35 s) run in the slow suite; PB-DP's closed forms stay in the default suite
    # against quadrature (tests/test_boosting_closed_forms.py) and inside the PLD (test_accounting_privacy_loss.py,
    # test_accounting_privacy_loss_construction.py)
    Case(
        "PB-DiscreteLaplace-Relative",
        _pb(lambda: dpjax.DiscreteLaplace(1.5), lambda: dpjax.RelativeError(0.25, 1.5)),
        values=(0, 5),
        scan=(-2.0, 0.0, 1.0, 3.0, 7.0),
        invalid=((lambda: dpjax.AbsoluteError(0.0), "tau"),),
    ),
    Case(
        "PB-DiscreteGaussian-Absolute",
        _pb(lambda: dpjax.DiscreteGaussian(2.0), lambda: dpjax.AbsoluteError(1.5)),
        values=(0, 4),
        sensitivity=2.0,
        invalid=((_pb(lambda: dpjax.DiscreteGaussian(2.0), lambda: dpjax.AbsoluteError(1.5), 0.0), "rho"),),
    ),
    Case(
        "PB-Logistic-Absolute",
        _pb(lambda: Logistic(1.5), lambda: dpjax.AbsoluteError(2.0)),
        invalid=((_pb(lambda: Logistic(1.5), lambda: dpjax.AbsoluteError(2.0), float("nan")), "rho"),),
    ),
    Case(
        "PB-Logistic-Relative-rejection",
        _pb(lambda: Logistic(1.5), lambda: dpjax.RelativeError(0.1, 2.0), sampler="rejection"),
        values=(0.0, 8.0),
        scan=(-0.5, 0.0, 5.0, 15.0, 40.0),
        invalid=((_pb(lambda: Logistic(1.5), lambda: dpjax.AbsoluteError(2.0), sampler="gibbs"), "sampler"),),
    ),
    # bounded output range [−4.64, 7.64]: the law is compared at points inside it
    Case(
        "Composite-A1B1",
        lambda: dpjax.Composite("A1", "B1", 1.0, 0.481, 0.843, 0.280, window=(0.0, 3.0)),
        sensitivity=3.0,
        points=tuple(-3.3 + 0.37 * i for i in range(25)),
        invalid=((lambda: dpjax.Composite("A1", "B1", 1.0, 0.9, 0.843, 0.280, window=(0.0, 3.0)), "k"),),
    ),
]

CASE_IDS = [c.id for c in CASES]


def float64(mech):
    """The mechanism with float64 leaves (inside ``jax.enable_x64``)."""
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), mech)
