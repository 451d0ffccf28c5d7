"""Bounded, unbiased composite DP (Zhang et al., IEEE S&P 2024): :class:`Composite`.

See docs/composite.md; the exact privacy is in
:mod:`dpjax.composite.privacy` (public wrappers in :mod:`accounting.composite`) and the
parameter search in :mod:`optimize.composite`.
"""

from dpjax.composite import privacy
from dpjax.composite.mechanism import Composite

__all__ = ["Composite", "privacy"]
