r"""Privacy-boosted mechanisms (PB-DP; Jiang, Zhang et al., IEEE S&P 2025).

``PrivacyBoosted(kernel, region, rho)`` re-weights any additive kernel (the built-in
Laplace, Gaussian, DiscreteLaplace, DiscreteGaussian, or one written outside the package:
:mod:`dpjax.kernels.base`) so that its output lands in the preferred region ``S(Q)`` of
the true answer ``Q`` with probability at least ``rho`` (eq. 2 of the paper):

.. math::
   f_{pb}(y\mid Q) = \frac{f(y-Q)\,w(y)}{1-\bar p_S(Q)\,q},\qquad
   w(y) = 1 \text{ on } S(Q),\; 1-q \text{ outside},

where ``p_S(Q)`` is the kernel mass of ``S(Q)``, ``p̄_S = 1 − p_S`` and the
*boosting rate* ``q`` (eq. 3, clipped at 0) is

.. math:: q = \max\Big(0,\; \max_Q \frac{\rho - p_S(Q)}{\rho\,(1-p_S(Q))}\Big).

The max sits at the hardest answer (smallest ``p_S``; see
:meth:`dpjax.regions.Region.hardest_answers`), where the coverage
``Pr[M(Q) ∈ S(Q)] = p_S/(1 − p̄_S q)`` equals ``rho`` exactly; at every other
answer it is larger. ``rho = 1`` gives ``q = 1``: the kernel truncated to ``S``.

The package, one idea per module:

* :mod:`~dpjax.boosting.mechanism` — the mechanism: boosting rate, output law (``log_prob``,
  ``cdf``, ``coverage``), the accounting hooks (answer pairs, breakpoints, symmetry, path);
* :mod:`~dpjax.boosting.sampler` — the exact three-component mixture sampler (default) and
  the paper's rejection sampler (static field ``sampler``);
* :mod:`~dpjax.boosting.closed_forms` — the exact hockey-stick and Rényi divergences of a
  pair, piecewise between the region boundaries of both laws.

Everything goes through the kernel protocol (masses, quantiles, loss thresholds, tilted
integrals); the built-in kernels' closed forms make it exact and fast, a kernel without
them gets numerical defaults. Exact single-release accounting: :mod:`accounting.exact`;
the paper's (uncertified) formulas: :mod:`accounting.papers.pbdp`.
"""

from dpjax.boosting.mechanism import PrivacyBoosted
from dpjax.regions import AbsoluteError, FixedInterval, Region, RelativeError

__all__ = ["PrivacyBoosted", "AbsoluteError", "RelativeError", "FixedInterval", "Region"]
