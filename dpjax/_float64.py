"""Float64 without touching the user's configuration: the one ``x64`` helper of the project.

JAX computes in float32 unless its global ``jax_enable_x64`` flag is set; a library must not flip
that flag for its user. Everything that needs float64 (the accountant, the PrDP mechanisms'
budgets and thresholds, the tuners) runs inside the ``jax.enable_x64(True)`` context instead,
through :func:`x64`.
"""

from __future__ import annotations

import functools

import jax

__all__ = ["x64"]


def x64(fn):
    """``fn`` run (and whatever it traces, built) inside ``jax.enable_x64(True)``; the global flag
    is left as the user set it."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with jax.enable_x64(True):
            return fn(*args, **kwargs)

    return wrapper
