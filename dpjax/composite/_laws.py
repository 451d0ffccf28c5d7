"""The six perturbation functions of the composite mechanism (Zhang et al., S&P 2024, Table 1/4).

Pure, traceable functions of the parameters in the working domain 𝓛 = [−L, L]
(Zhang et al., "Bounded and Unbiased Composite Differential Privacy", IEEE S&P 2024, Table 1,
eqs. 16–25): activation ``H`` (A1 rectangle eq. 16, A2 half-sine eq. 17–18, A3 triangle
eq. 19–21) of height ``k`` and width ``m`` on ``[a, a + m]``; base ``G`` (B1 flat eq. 22, B2
quartic cap eq. 23–25) of height ``y`` (``t`` at ``±L``).
Every function broadcasts its arguments.
"""

from __future__ import annotations

import math

import jax.numpy as jnp

__all__ = ["ACTIVATIONS", "BASES", "canonical_activation", "canonical_base", "area_factor", "shape_variance"]

#: canonical names and the paper's labels
ACTIVATIONS = {
    "rectangle": "rectangle",
    "a1": "rectangle",
    "half_sine": "half_sine",
    "a2": "half_sine",
    "triangle": "triangle",
    "a3": "triangle",
}
BASES = {"uniform": "uniform", "b1": "uniform", "quartic": "quartic", "b2": "quartic"}
LABELS = {"rectangle": "A1", "half_sine": "A2", "triangle": "A3", "uniform": "B1", "quartic": "B2"}


def canonical_activation(name) -> str:
    key = str(name).lower() if isinstance(name, str) else None
    if key not in ACTIVATIONS:
        raise ValueError(f"activation must be one of 'rectangle' (A1), 'half_sine' (A2), 'triangle' (A3), got {name!r}")
    return ACTIVATIONS[key]


def canonical_base(name) -> str:
    key = str(name).lower() if isinstance(name, str) else None
    if key not in BASES:
        raise ValueError(f"base must be one of 'uniform' (B1), 'quartic' (B2), got {name!r}")
    return BASES[key]


def area_factor(activation: str) -> float:
    """``s`` with ``S1 = ∫H = s·k·m`` (from eqs. 16–18): 1 (A1), 2/π (A2), 1/2 (A3)."""
    return {"rectangle": 1.0, "half_sine": 2.0 / math.pi, "triangle": 0.5}[activation]


def shape_variance(activation: str) -> float:
    """``c_σ``: variance of the normalised bump shape over m² (eqs. 16–18): 1/12, (π²−8)/(4π²), 1/24."""
    return {"rectangle": 1.0 / 12.0, "half_sine": (math.pi**2 - 8.0) / (4.0 * math.pi**2), "triangle": 1.0 / 24.0}[
        activation
    ]


def peak_slope(activation: str, k, m):
    """sup |H'| on the bump (∞ for the rectangle's jumps): kπ/m (A2), 2k/m (A3)."""
    if activation == "half_sine":
        return k * math.pi / m
    if activation == "triangle":
        return 2.0 * k / m
    return jnp.inf


def bump(activation: str, u, k, m):
    """``H`` at offset ``u = x − a`` from the bump's left end (0 outside ``[0, m]``)."""
    inside = (u >= 0) & (u <= m)
    if activation == "rectangle":
        inside = (u >= 0) & (u < m)  # [a, a + m) as in the paper (measure zero)
        h = k * jnp.ones_like(u)
    elif activation == "half_sine":
        h = k * jnp.sin(math.pi * jnp.clip(u / m, 0.0, 1.0))
    else:
        h = k * (1.0 - jnp.abs(2.0 * jnp.clip(u / m, 0.0, 1.0) - 1.0))
    return jnp.where(inside, h, 0.0)


def bump_cdf(activation: str, u, k, m):
    """``∫_a^{a+u} H`` with ``u`` clipped to ``[0, m]`` (closed form)."""
    u = jnp.clip(u, 0.0, m)
    if activation == "rectangle":
        return k * u
    if activation == "half_sine":
        # (km/π)(1 − cos(πu/m)) = (2km/π) sin²(πu/(2m)) (no cancellation near u = 0)
        return (2.0 * k * m / math.pi) * jnp.sin(0.5 * math.pi * u / m) ** 2
    w = m - u
    return jnp.where(u <= 0.5 * m, k * u * u / m, 0.5 * k * m - k * w * w / m)


def base(base_name: str, x, y, t, L):
    """``G(x)`` on [−L, L]: ``y`` (B1) or ``y − (y − t)x⁴/L⁴`` (B2)."""
    if base_name == "uniform":
        return y * jnp.ones_like(x)
    r = x / L
    return y - (y - t) * (r * r) * (r * r)


def base_cdf(base_name: str, x, y, t, L):
    """``∫_{−L}^{x} G`` for ``x`` in [−L, L] (closed form)."""
    if base_name == "uniform":
        return y * (x + L)
    r = x / L
    return y * (x + L) - (y - t) * L * (r**5 + 1.0) / 5.0


def base_second_moment(base_name: str, y, t, L):
    """``M2_G = ∫x²G``: 2yL³/3 (B1), 2L³(4y + 3t)/21 (B2) (eqs. 22–23)."""
    if base_name == "uniform":
        return 2.0 * y * L**3 / 3.0
    return 2.0 * L**3 * (4.0 * y + 3.0 * t) / 21.0
