"""dpjax: a JAX batch engine for differential-privacy mechanisms.

Mechanisms are immutable pytrees with an output law (``sample``, ``log_prob``,
``cdf``) and a privacy-loss function; :func:`release` applies one to a batch of
true answers with record-addressed, reproducible randomness. Exact privacy
accounting lives in the sibling package :mod:`accounting`, parameter tuning in
:mod:`optimize`.
"""

from dpjax import random, subsampling, validation
from dpjax.boosted_rr import BoostedRandomizedResponse
from dpjax.bounded_range import BoundedRange
from dpjax.boosting import PrivacyBoosted
from dpjax.composite import Composite
from dpjax.regions import AbsoluteError, FixedInterval, RelativeError
from dpjax.kernels import DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace
from dpjax.kernels import GeometricMixture, LaplaceMixture
from dpjax.mechanism import Mechanism
from dpjax.kernels import AdditiveMechanism
from dpjax.pytree import pytree_dataclass, static_field
from dpjax.randomized_response import RandomizedResponse
from dpjax.release import checked_release, release
from dpjax import prdp  # per-record DP (Chen et al., SIGMOD 2025): dpjax.prdp.count / sum / max / local_*
from dpjax.subsampling import PoissonSampler, poisson_mask
from dpjax.compilation_cache import enable_compilation_cache
from dpjax import exact  # the exact (integer-only, lattice) sampling tier: release(..., numerics="exact")

__version__ = "0.1.0"

__all__ = [
    "enable_compilation_cache",
    "Mechanism",
    "AdditiveMechanism",
    "Laplace",
    "Gaussian",
    "DiscreteLaplace",
    "DiscreteGaussian",
    "LaplaceMixture",
    "GeometricMixture",
    "RandomizedResponse",
    "PrivacyBoosted",
    "AbsoluteError",
    "RelativeError",
    "FixedInterval",
    "BoostedRandomizedResponse",
    "BoundedRange",
    "release",
    "checked_release",
    "PoissonSampler",
    "poisson_mask",
    "random",
    "subsampling",
    "validation",
    "pytree_dataclass",
    "static_field",
    "prdp",
    "Composite",
    "exact",
]
