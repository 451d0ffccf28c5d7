"""Goodness-of-fit helpers shared by the test files (imported as ``from goodness_of_fit import ...``: pytest puts
``tests/`` on ``sys.path``, as for ``contract``)."""

import numpy as np
from scipy import stats


def chi2_pvalue(samples, support, pmf):
    """χ² p-value of integer ``samples`` against ``pmf`` (unnormalised) on ``support``, the rest pooled in one bin.

    Args:
      samples: integer draws.
      support: the integers whose counts are compared one by one.
      pmf: the (unnormalised) probabilities of ``support``.

    Returns:
      The p-value of the χ² test over the bins of expected count ≥ 10 (below, the Poisson skew makes χ²
      anti-conservative) and one bin for everything else.
    """
    p = pmf / pmf.sum()
    n = samples.size
    counts = np.array([(samples == z).sum() for z in support])
    keep = n * p >= 10
    obs = np.append(counts[keep], n - counts[keep].sum())
    exp = np.append(n * p[keep], n - n * p[keep].sum())
    ok = exp > 0
    return stats.chisquare(obs[ok], exp[ok]).pvalue
