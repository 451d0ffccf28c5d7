"""Privacy of DP-SGD: ε of Poisson-subsampled noisy-gradient training, calibration, a per-step odometer.

One DP-SGD step clips every example's gradient to norm C, sums the examples of a
Poisson batch (each example in with probability q, independently) and adds noise of
scale C·z (z = ``noise_multiplier``). Adding or removing one example moves the clipped
sum by at most C, so the step is the mechanism ``step_mechanism(z)`` run on a query of
sensitivity 1 with Poisson rate q (the scale cancels), and T steps are its T-fold
composition (add/remove neighbours; both directions kept, the max reported).

* **Gaussian** noise (default): the Gaussian mechanism in any dimension has the privacy
  of the one-dimensional pair N(0, z²) vs N(1, z²) (rotation invariance), so
  ``accounting.pld(dpjax.Gaussian(z), sampling_prob=q)`` composed T times is the exact,
  pessimistic PLD of DP-SGD.
* **Laplace** noise with L1 clipping: each step is pure (1/z)-DP in any dimension, and every
  pure ε₀-DP pair is dominated by binary randomized response at ε₀ (Kairouz, Oh, Viswanath
  2015, Thm. 2.1 / the optimal composition theorem), so the PLD of
  ``dpjax.RandomizedResponse(1/z, 2)`` subsampled and composed is a sound bound. It is not
  tight: the one-dimensional Laplace pair, a lower bound on the truth, is 8-20 % below it
  at q = 0.01, T = 1000 (docs/dpsgd.md).
* **Discrete Gaussian** on a grid: the exact worst case of a d-dimensional discrete
  Gaussian over an L2 ball has no known closed form, so this is a Rényi-DP bound:
  D_α ≤ α‖v‖²/(2σ²) for integer shifts v (Canonne, Kamath, Steinke 2020: the theta-function
  sum Σ_y e^{−(y−(1−α)v)²/2σ²} is largest at an integer centre, coordinate by coordinate),
  Poisson subsampling by the general bound of Zhu & Wang (ICML 2019, Thm. 5) at integer
  orders, then Proposition 12 of Canonne et al. (:func:`accounting.rdp_to_epsilon`).

:func:`dpsgd_epsilon` / :func:`dpsgd_delta` are batched over settings (arrays of z, q, T
broadcast together) and differentiable in z and q (``jax.grad``, outside ``jit``). The
calibrators solve for one parameter with a handful of PLD evaluations on one compiled
program (a plan built once for the bracket). :class:`DpsgdAccountant` is the odometer a
training loop updates per step (an :class:`accounting.Accountant` underneath).

Where each part lives: :mod:`accounting.dpsgd.noise` (how each kernel is accounted, the step mechanism, the
step's Rényi bound), :mod:`accounting.dpsgd.epsilon` (the PLD queries),
:mod:`accounting.dpsgd.calibration` (the calibrators), :mod:`accounting.dpsgd.odometer`
(:class:`DpsgdAccountant`); the Poisson-subsampled Rényi bounds are :mod:`accounting.rdp`'s.
"""

from accounting.dpsgd.calibration import calibrate_batch_size, calibrate_noise_multiplier, calibrate_num_steps
from accounting.dpsgd.epsilon import dpsgd_delta, dpsgd_epsilon
from accounting.dpsgd.noise import noise_kind, noise_mechanism, step_mechanism
from accounting.dpsgd.odometer import DpsgdAccountant
from accounting.rdp import RDP_ORDERS, subsampled_rdp

__all__ = [
    "noise_kind",
    "noise_mechanism",
    "step_mechanism",
    "dpsgd_epsilon",
    "dpsgd_delta",
    "calibrate_noise_multiplier",
    "calibrate_batch_size",
    "calibrate_num_steps",
    "DpsgdAccountant",
    "subsampled_rdp",
    "RDP_ORDERS",
]
