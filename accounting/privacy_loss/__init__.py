"""The privacy-loss distribution (PLD) of a dpjax mechanism, module by module.

The public names are re-exported by :mod:`accounting` (``pld``, ``make_plan``, ``Plan``,
``PrivacyLossDistribution``, ``identity``, ``get_epsilon``, ``get_delta``); the modules here
are the engine behind them, in the order a PLD is made:

* :mod:`~accounting.privacy_loss.route` — the one decision of how a mechanism's PLD is
  obtained: analytic Gaussian, closed-form profile, exact atoms (discrete) or output grid;
  a pair path; the pure-ε cap.
* :mod:`~accounting.privacy_loss.pair_path` — the supremum of a profile along a mechanism's
  path of neighbouring pairs.
* :mod:`~accounting.privacy_loss.profiles` — privacy profiles δ(ε) of the neighbouring pairs
  and their pessimistic envelope (Poisson subsampling per pair).
* :mod:`~accounting.privacy_loss.grid` — the power-of-two loss grid: connect-the-dots pmfs,
  FFT composition, ε(δ) / δ(ε) on the grid.
* :mod:`~accounting.privacy_loss.construction` — the static :class:`Plan` (grid offsets and
  lengths) and the single-step build.
* :mod:`~accounting.privacy_loss.distribution` — :class:`PrivacyLossDistribution` and
  :func:`pld`: composition and queries.
* :mod:`~accounting.privacy_loss.batch` — fused, memory-bounded batch queries
  ``get_epsilon`` / ``get_delta``.
"""
