"""The papers' own accountants, reproduced as published: NOT CERTIFIED.

* :mod:`accounting.papers.pbdp`: privacy boosting's paper mode (Jiang et al.'s Algorithm 1,
  Propositions and Remarks as written).
* :mod:`accounting.papers.mixture`: the piecewise-mixture paper's ζ, Proposition 1 and usefulness bounds.

These reproduce the papers' tables and figures; their figures are not privacy guarantees (some are
below the truth). The certified accountant is :mod:`accounting` itself (``pld``, ``exact``, ...).
"""

from accounting.papers import mixture, pbdp

__all__ = ["pbdp", "mixture"]
