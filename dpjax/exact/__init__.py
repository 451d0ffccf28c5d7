"""The integer-noise tier (``numerics="exact"``): integer-only samplers and releases on a data-independent lattice.

Not to be confused with :mod:`accounting.exact`, the closed-form single-release privacy.

* :mod:`dpjax.exact.cks` — Bernoulli(exp(−x)) for rational x, discrete Laplace, discrete
  Gaussian (Canonne, Kamath, Steinke 2020, Algorithms 1–3) and randomized response, as state
  machines on raw 64-bit words with integer comparisons only;
* :mod:`dpjax.exact.sampler` — the samplers as objects: an :class:`~dpjax.exact.sampler.IntegerSampler` (its
  per-record parameters, its device program words → (noise, flagged), its exact host completion) and the
  :class:`~dpjax.exact.sampler.LatticeSampler` an :class:`ExactLattice` holds (its law's sampler per layout);
* :mod:`dpjax.exact.laws` — one module per law: the fixed-trip discrete Laplace, discrete Gaussian and randomized
  response (exact integer threshold tables, one or two words per record, no rejection; ties completed exactly on
  the host), used by the one-scale releases, sharded over the local devices; per-record discrete Laplace scales
  (any number of distinct values) by an inverse CDF evaluated per record with a rigorous float64 error bound;
  PB-DP over the discrete kernels (absolute-error region) by one exact table;
* :mod:`dpjax.exact.table_samplers` — the table machinery the laws share (exact thresholds, guided searches,
  the host's exact uniform) and the platform check of the device's transcendental functions;
* :mod:`dpjax.exact.bits` — the words: record-addressed Threefry (:class:`ThreefryWords`) or
  ``os.urandom`` on the host (:class:`HostBits`);
* :mod:`dpjax.exact.lattice` — ``dpjax.release(key, values, mech, numerics="exact")`` and
  ``mech.exact_lattice()``, the discrete mechanism actually run (accounted honestly).
"""

from dpjax.exact import cks
from dpjax.exact.bits import HostBits, ThreefryWords
from dpjax.exact.lattice import ExactLattice, release_exact
from dpjax.exact.cks import bernoulli_exp, discrete_gaussian, discrete_laplace, randomized_response

#: another name of :mod:`dpjax.exact.cks` (``from dpjax.exact import samplers``)
samplers = cks

__all__ = [
    "HostBits",
    "ThreefryWords",
    "ExactLattice",
    "release_exact",
    "cks",
    "samplers",
    "bernoulli_exp",
    "discrete_laplace",
    "discrete_gaussian",
    "randomized_response",
]
