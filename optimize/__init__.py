"""optimize: tuning mechanism parameters to minimise exact privacy loss.

* :func:`tune_boosted` (:mod:`optimize.boosted`) — the kernel scale of a privacy-boosted (PB-DP) mechanism, any kernel
  (an :class:`dpjax.AdditiveMechanism` instance, or a built-in's name), that minimises the
  exact ε at a δ (single release or T-fold composition) or the exact Rényi divergence at an
  order, subject to the utility constraint (the boosting rate follows from ``rho``). Methods
  ``"gradient"`` (optax through the differentiable exact accountant) and ``"ternary"``
  (the paper's Algorithm 2); batched with ``vmap``.
* :func:`tune_mixture` — a piecewise mixture (Lap_m / Geom_m) minimising E|X| or E X² at an exact
  pure-ε target, against the plain kernel at the same ε (:mod:`optimize.mixture`).
* :func:`scale_by_bracket` — the optax transformation used by the gradient method.
* :func:`base_sigma` — the scale of the plain kernel that meets the utility constraint alone.
* :func:`exact_epsilon`, :func:`exact_delta`, :func:`exact_renyi` — the exact single-release
  privacy the tuner minimises: :func:`accounting.exact.epsilon`,
  :func:`accounting.exact.privacy_profile` and :func:`accounting.exact.renyi` themselves
  (one implementation, in accounting), differentiable in every parameter.

* :func:`tune_composite` — least-variance ``dpjax.Composite`` parameters by gradient (or the paper's grid).
* :func:`private_aggregate`, :func:`dpsgd` — the DP-SGD noise plug-in for optax (:mod:`optimize.dpsgd`).

Imports dpjax and accounting; nothing imports optimize.
"""

from accounting.exact import epsilon as exact_epsilon
from accounting.exact import privacy_profile as exact_delta
from accounting.exact import renyi as exact_renyi
from optimize._search import scale_by_bracket
from optimize.dpsgd import ClippedSum, clip_per_example, clipped_sum, dpsgd, on_noisy_steps, private_aggregate
from optimize.clipping import clipped_grad
from optimize.boosted import TuningResult, base_sigma, tune_boosted
from optimize.mixture import MixtureTuning, tune_mixture
from optimize.composite import CompositeTuning, tune_composite

__all__ = [
    "tune_boosted",
    "tune_mixture",
    "MixtureTuning",
    "TuningResult",
    "base_sigma",
    "exact_epsilon",
    "exact_delta",
    "exact_renyi",
    "scale_by_bracket",
    "private_aggregate",
    "dpsgd",
    "on_noisy_steps",
    "clip_per_example",
    "clipped_sum",
    "clipped_grad",
    "ClippedSum",
    "tune_composite",
    "CompositeTuning",
]
