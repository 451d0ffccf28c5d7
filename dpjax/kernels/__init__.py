"""Additive noise kernels: Laplace, Gaussian, discrete Laplace, discrete Gaussian, and the protocol.

Each kernel is an :class:`~dpjax.kernels.base.AdditiveMechanism` (``value + N``, N
symmetric) whose scale is a pytree leaf: differentiable, and batchable (an array of
scales is a batch of mechanisms). Kernels are what privacy boosting
(:mod:`dpjax.boosting`) re-weights; a kernel written outside the package works
wherever these do (:mod:`dpjax.kernels.base` says which methods it needs). One file
per kernel; its closed forms live with it as overrides of the protocol's optional
methods.

Calibration constructors use the ecosystem's words: ``Laplace.from_epsilon(ε, Δ)``
(scale Δ/ε), ``Gaussian.from_epsilon_delta(ε, δ, Δ)`` (analytic, Balle & Wang 2018),
``DiscreteLaplace.from_epsilon(ε, Δ)``.
"""

from dpjax.kernels.base import AdditiveMechanism
from dpjax.kernels.discrete_gaussian import DiscreteGaussian
from dpjax.kernels.discrete_laplace import DiscreteLaplace
from dpjax.kernels.gaussian import Gaussian, analytic_gaussian_sigma, gaussian_privacy_profile
from dpjax.kernels.laplace import Laplace
from dpjax.kernels.mixture import GeometricMixture, LaplaceMixture

__all__ = [
    "AdditiveMechanism",
    "Laplace",
    "Gaussian",
    "DiscreteLaplace",
    "DiscreteGaussian",
    "LaplaceMixture",
    "GeometricMixture",
    "gaussian_privacy_profile",
    "analytic_gaussian_sigma",
    "BUILTIN",
    "by_name",
]

#: the built-in kernels by name: the string aliases of ``optimize.tune_boosted`` and the CLI.
BUILTIN = {
    "gaussian": Gaussian,
    "laplace": Laplace,
    "discrete_laplace": DiscreteLaplace,
    "discrete_gaussian": DiscreteGaussian,
    "laplace_mixture": LaplaceMixture,
    "geometric_mixture": GeometricMixture,
}


def by_name(name: str):
    """The built-in kernel class called ``name``.

    Args:
      name: ``"gaussian"``, ``"laplace"``, ``"discrete_laplace"``, ``"discrete_gaussian"``,
        ``"laplace_mixture"`` or ``"geometric_mixture"`` (dashes accepted).

    Returns:
      The kernel class.

    Raises:
      ValueError: an unknown name.
    """
    key = str(name).replace("-", "_")
    if key not in BUILTIN:
        raise ValueError(f"kernel must be one of {tuple(BUILTIN)} or a kernel instance, got {name!r}")
    return BUILTIN[key]
