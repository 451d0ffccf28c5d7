"""The Gaussian law's pieces that the continuous and the discrete Gaussian kernels share: the
linear pair loss threshold and the tilted law of the Rényi closed form. Both kernel modules
import this one and not each other."""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["gaussian_loss_threshold", "gaussian_tilted_exponent"]


def gaussian_loss_threshold(sigma, t, v, nv):
    """y* of the Gaussian pair loss ``((y − nv)² − (y − v)²)/(2σ²)``, linear in y:
    ``(v + nv)/2 + σ² t/(v − nv)``; {loss > t} = {y < y*} (v < nv) or {y > y*} (v > nv).

    Args:
      sigma: σ.
      t: the loss threshold.
      v: the answer.
      nv: the neighbouring answer.

    Returns:
      y*, of the broadcast shape.
    """
    d = v - nv
    safe = jnp.where(d == 0, 1.0, d)
    return 0.5 * (v + nv) + sigma**2 * t / safe


def gaussian_tilted_exponent(sigma, v, nv, alpha):
    """``(m, K)``: f(y−v)^α f(y−nv)^{1−α} = e^K φ_σ(y − m) with m = αv + (1−α)nv and
    K = α(α−1)(v − nv)²/(2σ²) (the Rényi divergence's tilted law).

    Args:
      sigma: σ.
      v: the answer.
      nv: the neighbouring answer.
      alpha: the order α > 1.

    Returns:
      ``(m, K)``.
    """
    return alpha * v + (1.0 - alpha) * nv, alpha * (alpha - 1.0) * (v - nv) ** 2 / (2.0 * sigma**2)
