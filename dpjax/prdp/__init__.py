"""Per-record differential privacy (PrDP): Chen, Sun, Xu, Dong, "A General Framework for Per-record
Differential Privacy", SIGMOD 2025 (PACMMOD 3(6), article 287; docs/prdp.md).

Each record r has its own budget E(r), a public, data-independent function of the record
(:class:`PrivacyFunction`), and a release may spend at most E(r) on r. The mechanisms cut
the budget range ``[ε̌, ε̂]`` into doubling levels (:mod:`dpjax.prdp.domains`), find the first
level holding enough records with noisy counts, and release from the levels at or above it:

* central: :func:`count` (Algorithm 1), :func:`sum` (Algorithm 2 with the universal sum, or
  the Section 5.2 extension), :func:`max` (Algorithm 2 with the exponential-mechanism max),
  :func:`framework` (Algorithm 2 around any ε-DP mechanism);
* local: :func:`local_count` (Algorithms 3–4; :func:`local_randomizer`,
  :func:`local_analyzer`), :func:`local_sum` (Algorithm 5);
* baselines: :func:`naive_count`, :func:`naive_sum` (the global minimum ε̌), :func:`pdp_count`,
  :func:`pdp_sum` (Sun et al.'s personalized DP with public budgets; NOT E-PrDP).

Every mechanism is a pure function of an explicit key, ``jit``- and ``vmap``-able over keys
(and over datasets padded with ``mask``), computing in float64 without touching the global
x64 flag; it returns a :class:`PrDPResult` pytree with the pure ε spent on each level.
``accounting.PrDPLedger`` composes several releases on the same records.
"""

from dpjax.prdp import domains
from dpjax.prdp.baselines import naive_count, naive_sum, pdp_count, pdp_sum
from dpjax.prdp.count import count
from dpjax.prdp.framework import framework
from dpjax.prdp.local_count import local_analyzer, local_count, local_randomizer
from dpjax.prdp.local_sum import local_sum
from dpjax.prdp.maximum import max
from dpjax.prdp.privacy_functions import PrivacyFunction
from dpjax.prdp.result import PrDPResult
from dpjax.prdp.summation import sum

__all__ = [
    "count",
    "sum",
    "max",
    "framework",
    "local_count",
    "local_randomizer",
    "local_analyzer",
    "local_sum",
    "naive_count",
    "naive_sum",
    "pdp_count",
    "pdp_sum",
    "PrivacyFunction",
    "PrDPResult",
    "domains",
]
