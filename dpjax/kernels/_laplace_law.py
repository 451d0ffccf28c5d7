"""The Laplace law's pieces that the continuous and the discrete Laplace kernels share: the
calibration (scale b, ε = Δ/b), the pair loss threshold and the tilted integrals of the Rényi
closed form. Both kernel modules import this one and not each other."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dpjax.kernels.base import round_up_to_default_float
from dpjax.validation import check_positive

__all__ = ["LaplaceScale", "laplace_loss_threshold", "laplace_tilted_log_integral"]


class LaplaceScale:
    """Calibration shared by the Laplace kernels (continuous and discrete): scale b, ε = Δ/b."""

    @classmethod
    def from_epsilon(cls, epsilon, sensitivity=1.0):
        """Pure ε-DP mechanism for a query of L1 sensitivity Δ: scale Δ/ε (rounded up).

        Args:
          epsilon: ε > 0 (scalar or array).
          sensitivity: the L1 sensitivity Δ > 0 (an integer for the discrete kernel to stay on the lattice).

        Returns:
          The kernel at scale b = Δ/ε, rounded up to the default float.

        Raises:
          ValueError: ``epsilon`` or ``sensitivity`` not positive.
        """
        check_positive("epsilon", epsilon)
        check_positive("sensitivity", sensitivity)
        return cls(scale=round_up_to_default_float(np.asarray(sensitivity, float) / np.asarray(epsilon, float)))

    def pure_epsilon(self, sensitivity=1.0):
        """The pure-DP ε = Δ/b of the pair (0, Δ); ∞ where a discrete kernel's shift Δ leaves the integers
        (the two output laws then have disjoint supports).

        Args:
          sensitivity: the shift Δ.

        Returns:
          The pure ε of a shift by Δ (``inf`` where the kernel is not pure-DP there).
        """
        return jnp.where(self.off_lattice(sensitivity), jnp.inf, jnp.asarray(sensitivity) / self.scale)

    def noise_reach(self):
        return 40.0 * jnp.asarray(self.scale) + 1.0

    def noise_far(self):
        # e^{−750}/2 underflows float64
        return 750.0 * jnp.asarray(self.scale)

    def noise_loss_threshold(self, t, v, nv, lo, hi, decreasing):
        return laplace_loss_threshold(self.scale, t, v, nv, self.discrete)


def laplace_loss_threshold(b, t, v, nv, discrete):
    """y* of the Laplace pair loss ``(|y − nv| − |y − v|)/b``: linear with slope ∓2/b between the
    two answers, ±r = ±|v − nv|/b outside. {loss > t} = {y < y*} (v < nv) or {y > y*} (v > nv);
    ±∞ when t is outside (−r, r). On the integers the caller rounds y* to the half-integers.

    Args:
      b: the scale.
      t: the loss threshold.
      v: the answer.
      nv: the neighbouring answer.
      discrete: whether the kernel is on the integers (the caller rounds y*).

    Returns:
      y*, of the broadcast shape (±∞ outside (−r, r)).
    """
    d = v - nv
    r = jnp.abs(d) / b
    y = 0.5 * (v + nv) + jnp.sign(d) * t * b / 2.0
    none = jnp.where(d < 0, -jnp.inf, jnp.inf)
    y = jnp.where(t >= r, none, jnp.where(t < -r, -none, y))
    if discrete:
        y = jnp.where(d < 0, jnp.ceil(y) - 0.5, jnp.floor(y) + 0.5)
    return y


def laplace_tilted_log_integral(kernel, lo, hi, v, nv, a):
    """log of ∫ (continuous) or Σ over the integers (discrete) of ``f(y−v)^α f(y−nv)^{1−α}`` on
    (lo, hi]: ``g(y) = α log f(y−v) + (1−α) log f(y−nv)`` is linear on a piece that does not
    contain a kink (v, nv; v + ½, nv + ½ on the integers), so the integral is geometric.

    Args:
      kernel: a Laplace-family kernel (its scale and ``discrete``).
      lo: the piece's lower end.
      hi: its upper end.
      v: the answer.
      nv: the neighbouring answer.
      a: the order α > 1.

    Returns:
      The log integral (or sum), ``−inf`` over an empty piece.
    """
    b = kernel.scale
    if kernel.discrete:
        k1, k2 = jnp.floor(lo) + 1.0, jnp.floor(hi)
        mid = 0.5 * (k1 + k2)
        sv, snv = jnp.sign(mid - v - 0.5), jnp.sign(mid - nv - 0.5)
    else:
        k1, k2 = lo, hi
        mid = 0.5 * (lo + hi)
        sv, snv = jnp.sign(mid - v), jnp.sign(mid - nv)
    slope = -(a * sv + (1.0 - a) * snv) / b
    end = jnp.where(slope > 0, k2, k1)
    g_end = a * kernel.noise_log_prob(end - v) + (1.0 - a) * kernel.noise_log_prob(end - nv)
    s = jnp.abs(slope)
    s_safe = jnp.where(s > 0, s, 1.0)
    empty = (k2 < k1) if kernel.discrete else (hi <= lo)
    if kernel.discrete:
        n = jnp.where(empty, 1.0, k2 - k1 + 1.0)
        geo = jnp.log(-jnp.expm1(-s_safe * n)) - jnp.log(-jnp.expm1(-s_safe))
        flat = jnp.log(n)
    else:
        length = jnp.where(empty, 1.0, hi - lo)
        geo = jnp.log(-jnp.expm1(-s_safe * length)) - jnp.log(s_safe)
        flat = jnp.log(length)
    out = g_end + jnp.where(s > 0, geo, flat)
    return jnp.where(empty, -jnp.inf, out)
