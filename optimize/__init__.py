"""optimize: tuning mechanism parameters to minimise exact privacy loss.

* :func:`tune_boosted` — the kernel scale of a privacy-boosted (PB-DP) mechanism (Gaussian,
  Laplace, discrete Laplace or discrete Gaussian kernel) that minimises the exact ε at a δ
  (single release or T-fold composition) or the exact Rényi divergence at an order,
  subject to the utility constraint (the boosting rate follows from ``rho``). Methods
  ``"gradient"`` (optax through the differentiable exact accountant) and ``"ternary"``
  (the paper's Algorithm 2); batched with ``vmap``.
* :func:`exact_epsilon`, :func:`exact_delta`, :func:`exact_renyi` — the exact closed-form
  privacy of a ``PrivacyBoosted`` mechanism (any kernel), differentiable in every
  parameter (implicit derivative through the ε root).
* :func:`scale_by_bracket` — the optax transformation used by the gradient method.
* :func:`base_sigma` — the scale of the plain kernel that meets the utility constraint alone.

* :func:`private_aggregate`, :func:`dpsgd` — the DP-SGD noise plug-in for optax (:mod:`optimize.dpsgd`).

Imports dpjax and accounting; nothing imports optimize.
"""

from optimize._api import exact_delta, exact_epsilon, exact_renyi
from optimize._search import scale_by_bracket
from optimize.dpsgd import clip_per_example, clipped_sum, dpsgd, on_noisy_steps, private_aggregate
from optimize.tuning import TuningResult, base_sigma, tune_boosted

__all__ = [
    "tune_boosted",
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
]
