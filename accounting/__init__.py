"""accounting: exact, batched, differentiable privacy accounting for dpjax mechanisms.

* :func:`pld` → :class:`PrivacyLossDistribution` (``compose``, ``self_compose``,
  ``get_delta_for_epsilon``, ``get_epsilon_for_delta``, ``pure_epsilon``), names as in
  Google's dp_accounting; pessimistic (dominating) by default, optimistic on request.
* :func:`get_epsilon` / :func:`get_delta`: fused, memory-bounded batch queries.
* :func:`rdp`: exact Rényi divergences; :func:`rdp_to_epsilon` / :func:`rdp_to_delta`.
* :class:`Accountant`: a small odometer with a budget.
* DP-SGD (:mod:`accounting.dpsgd`): :func:`dpsgd_epsilon`, the calibrators, :class:`DpsgdAccountant`.

Float64 throughout, inside ``jax.enable_x64(True)`` contexts (the global flag is
never touched). See docs/accounting.md for the mechanism hook.
"""

from accounting.accountant import Accountant
from accounting._pld import (
    DEFAULT_DISCRETIZATION,
    DEFAULT_TAIL_MASS,
    Plan,
    PrivacyLossDistribution,
    get_delta,
    get_epsilon,
    identity,
    make_plan,
    pld,
)
from accounting.rdp import rdp, rdp_to_delta, rdp_to_epsilon
from accounting.dpsgd import (
    DpsgdAccountant,
    calibrate_batch_size,
    calibrate_noise_multiplier,
    calibrate_num_steps,
    dpsgd_delta,
    dpsgd_epsilon,
)

__all__ = [
    "pld",
    "make_plan",
    "Plan",
    "PrivacyLossDistribution",
    "identity",
    "get_epsilon",
    "get_delta",
    "rdp",
    "rdp_to_epsilon",
    "rdp_to_delta",
    "Accountant",
    "dpsgd_epsilon",
    "dpsgd_delta",
    "calibrate_noise_multiplier",
    "calibrate_batch_size",
    "calibrate_num_steps",
    "DpsgdAccountant",
    "DEFAULT_DISCRETIZATION",
    "DEFAULT_TAIL_MASS",
]
