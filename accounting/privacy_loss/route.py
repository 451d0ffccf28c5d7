"""How a mechanism's single-step PLD is obtained, decided in one place.

A mechanism's class says everything the PLD engine must choose before it computes:

* **analytic** — its pair loss is exactly Gaussian (it declares ``gaussian_pld_mu``), it is not
  subsampled and the caller allows it: the PLD stays the analytic Gaussian PLD of μ (no grid);
* otherwise the grid build, whose privacy profiles come from one **profile source**:
  ``"closed_form"`` (the mechanism overrides ``hockey_stick``), ``"discrete"`` (exact atoms on
  the integers, ``mech.discrete``) or ``"output_grid"`` (cells of the output space, from ``cdf``
  and ``privacy_loss``);
* **pair path** — the envelope is raised to the supremum along the mechanism's path of
  neighbouring pairs (``pair_path``);
* **pure-ε cap** — the mechanism declares its own pure ε (``pure_epsilon``): every answer is
  capped by it (amplified by subsampling, composed);
* **atomic** — a discrete mechanism: a composed grid figure of it refuses derivatives.

:func:`route` answers these once; :func:`accounting.pld`, :func:`accounting.make_plan`, the
envelope of the profiles and the batch queries read its :class:`Route` instead of asking the
mechanism again. The decision depends only on the mechanism's class (and on whether it is
subsampled), never on traced values, so it is static under ``jit``.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np


__all__ = ["Route", "route", "pure_cap", "capped_by_pure"]


@dataclasses.dataclass(frozen=True)
class Route:
    """The static decision of :func:`route` (hashable).

    Args:
      analytic: the analytic Gaussian PLD (no grid).
      profile: the grid build's profile source: ``"closed_form"``, ``"discrete"`` or ``"output_grid"``.
      pair_path: the envelope takes the supremum along the mechanism's pair path.
      pure_cap: answers are capped by the mechanism's own pure ε.
      atomic: a discrete (atomic) mechanism.
    """

    analytic: bool  # the analytic Gaussian PLD (no grid)
    profile: str  # the grid build's profile source: "closed_form" | "discrete" | "output_grid"
    pair_path: bool  # the envelope takes the supremum along the mechanism's pair path
    pure_cap: bool  # answers are capped by the mechanism's own pure ε
    atomic: bool  # a discrete (atomic) mechanism

    @property
    def exact_derivative(self) -> bool:
        """ε(δ) of a single-step grid PLD is differentiated through the exact closed-form profile."""
        return self.profile == "closed_form"


def route(mech, sampling_prob=None, *, use_analytic=True) -> Route:
    """The :class:`Route` of ``mech``'s PLD; ``sampling_prob`` the Poisson sampling rate as
    :func:`construction.sampling_rate` gives it (``None``: not subsampled), ``use_analytic=False``
    forces the grid for a Gaussian loss.

    Args:
      mech: the dpjax mechanism.
      sampling_prob: the Poisson sampling rate, or None (not subsampled).
      use_analytic: allow the analytic Gaussian PLD.

    Returns:
      The :class:`Route`.
    """
    if mech.hockey_stick is not None:
        profile = "closed_form"
    elif mech.discrete:
        profile = "discrete"
    else:
        profile = "output_grid"
    return Route(
        analytic=bool(use_analytic) and sampling_prob is None and mech.gaussian_pld_mu is not None,
        profile=profile,
        pair_path=bool(getattr(mech, "pair_path", False)),
        pure_cap=mech.pure_epsilon is not None,
        atomic=bool(mech.discrete),
    )


def pure_cap(mech, sensitivity, sampling_prob):
    """The mechanism's own pure ε (``mech.pure_epsilon``, ∞ off its lattice), amplified by Poisson
    subsampling at rate ``sampling_prob`` (``None``: none), over the mechanism's batch; only for a
    route with ``pure_cap``.

    Args:
      mech: the dpjax mechanism.
      sensitivity: the query's sensitivity.
      sampling_prob: the Poisson rate, or None.

    Returns:
      The pure ε over the mechanism's batch shape (float64).
    """
    eps = jnp.where(mech.off_lattice(sensitivity), jnp.inf, jnp.asarray(mech.pure_epsilon(sensitivity), jnp.float64))
    if sampling_prob is not None:
        eps = jnp.log1p(sampling_prob * jnp.expm1(eps))
    return jnp.broadcast_to(eps, tuple(mech.batch_shape))


def capped_by_pure(kind, out, arg, pure, xp=jnp):
    """A query's answer capped by the mechanisms' own pure ε (composed): ε ≤ pure ε, and δ(ε) = 0 at
    ε ≥ pure ε. Where the loss grid cannot hold the losses (beyond ``LOSS_LIMIT``, carried to +∞)
    this is what keeps a pure-DP mechanism's ε finite and exact; elsewhere it changes nothing
    but the grid's rounding. (A NaN answer, below the round-off floor, stays NaN.) ``xp=numpy``:
    concrete values on the host.

    Args:
      kind: ``"epsilon"`` (answers are ε) or ``"delta"`` (answers are δ at ``arg``).
      out: the answers, shape (..., m).
      arg: the queried δ or ε, broadcasting with ``out``.
      pure: the composed pure ε over the batch, or None (no cap).
      xp: ``jax.numpy``, or ``numpy`` for concrete values on the host.

    Returns:
      The capped answers, of ``out``'s shape.
    """
    if pure is None:
        return out
    p = xp.asarray(pure, np.float64)[..., None]
    if kind == "epsilon":
        return xp.where(xp.isnan(out), out, xp.minimum(out, p))
    return xp.where(arg >= p, 0.0, out)
