"""accounting: exact, batched, differentiable privacy accounting for dpjax mechanisms.

* :func:`pld` → :class:`PrivacyLossDistribution` (``compose``, ``self_compose``,
  ``get_delta_for_epsilon``, ``get_epsilon_for_delta``, ``pure_epsilon``), names as in
  Google's dp_accounting; pessimistic (dominating) by default, optimistic on request.
* :func:`get_epsilon` / :func:`get_delta`: fused, memory-bounded batch queries.
* :func:`rdp`: exact Rényi divergences; :func:`rdp_to_epsilon` / :func:`rdp_to_delta`.
* :mod:`accounting.exact`: closed-form single-release privacy (``privacy_profile``,
  ``epsilon``, ``renyi``, ``worst_pair``), the worst case over a mechanism's pairs.
* :mod:`accounting.composite`: the true ε* of a composite release (``dpjax.Composite``) next to its nominal ε.
* :class:`Accountant`: a small odometer with a budget.
* :class:`PrDPLedger`: the per-level pure-ε ledger of per-record DP releases (``dpjax.prdp``).
* DP-SGD (:mod:`accounting.dpsgd`): :func:`dpsgd_epsilon`, the calibrators, :class:`DpsgdAccountant`.

The papers' own accountants (privacy boosting's paper mode, the piecewise-mixture paper's ζ) are
reproductions, NOT CERTIFIED, kept apart in :mod:`accounting.papers` (import it explicitly).

Float64 throughout, inside ``jax.enable_x64(True)`` contexts (the global flag is
never touched). See docs/accounting.md for the mechanism hook.
"""

from accounting import composite, exact
from accounting.accountant import Accountant
from accounting.privacy_loss.batch import get_delta, get_epsilon
from accounting.privacy_loss.construction import DEFAULT_DISCRETIZATION, DEFAULT_TAIL_MASS, Plan, make_plan
from accounting.privacy_loss.distribution import PrivacyLossDistribution, identity, pld
from accounting.rdp import rdp, rdp_to_delta, rdp_to_epsilon
from accounting.prdp import PrDPLedger, PrDPShare
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
    "exact",
    "composite",
    "PrDPLedger",
    "PrDPShare",
    "dpsgd_epsilon",
    "dpsgd_delta",
    "calibrate_noise_multiplier",
    "calibrate_batch_size",
    "calibrate_num_steps",
    "DpsgdAccountant",
    "DEFAULT_DISCRETIZATION",
    "DEFAULT_TAIL_MASS",
]
