"""A DP-SGD step's noise: how each kernel is accounted, the mechanism that dominates one step, and the
step's Rényi bound (the discrete Gaussian's accountant; a bracket for the calibrators)."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from accounting.rdp import sampled_gaussian_rdp, subsampled_rdp
from dpjax.kernels import AdditiveMechanism, by_name
from dpjax.randomized_response import RandomizedResponse

__all__ = ["noise_kind", "noise_mechanism", "step_mechanism"]

#: the default noise: the Gaussian kernel
_GAUSSIAN = by_name("gaussian")


def noise_kind(mechanism) -> str:
    """How a DP-SGD step with noise from the kernel class ``mechanism`` (default: the Gaussian) is
    accounted, from what the kernel declares (never its class). Only a kernel whose one parameter is its
    scale qualifies: DP-SGD adds the kernel at scale clip·noise_multiplier and accounts it at scale
    noise_multiplier for a unit shift, which describe the same noise only when every parameter scales
    with the clip norm (a kernel with another parameter, e.g. ``dpjax.LaplaceMixture``'s outer scale
    and breakpoint, is refused by name):

    * ``"gaussian"`` — a continuous kernel whose pair loss is exactly Gaussian (``gaussian_pld_mu``):
      rotation invariant, L2 clipping, the exact subsampled PLD;
    * ``"laplace"`` — a continuous pure-DP kernel (``pure_epsilon``, linear in the shift: the log
      density is (1/scale)-Lipschitz, so d coordinates are (‖v‖₁/scale)-DP): L1 clipping, the
      randomized-response dominating pair;
    * ``"discrete_gaussian"`` — a discrete kernel with a Rényi bound at integer shifts in any
      dimension (``renyi_divergence_bound``): L2 clipping on a grid, accounted by RDP.

    Args:
      mechanism: an additive kernel class, or None (the Gaussian).

    Returns:
      ``"gaussian"``, ``"laplace"`` or ``"discrete_gaussian"``.

    Raises:
      ValueError: the kernel has parameters besides its scale, or declares none of the accounting hooks above.
    """
    if mechanism is None:
        return "gaussian"
    if isinstance(mechanism, type) and issubclass(mechanism, AdditiveMechanism):
        others = [
            f.name
            for f in dataclasses.fields(mechanism)
            if not f.metadata.get("static", False) and f.name != mechanism.scale_name
        ]
        if others:
            raise ValueError(
                f"mechanism: {mechanism.__name__} has parameters besides its scale ({', '.join(others)}); DP-SGD "
                f"scales only {mechanism.scale_name} by clip·noise_multiplier, so the noise it adds would not be "
                "the noise accounted. Use a kernel whose one parameter is its scale (dpjax.Gaussian, dpjax.Laplace, "
                "dpjax.DiscreteGaussian)"
            )
        if mechanism.discrete and mechanism.renyi_divergence_bound is not None:
            return "discrete_gaussian"
        if not mechanism.discrete and mechanism.gaussian_pld_mu is not None:
            return "gaussian"
        if not mechanism.discrete and mechanism.pure_epsilon is not None:
            return "laplace"
    raise ValueError(
        "mechanism must be None or an additive kernel class whose DP-SGD accounting is known (the class: its scale "
        "is clip·noise_multiplier): a Gaussian-loss kernel (gaussian_pld_mu, e.g. dpjax.Gaussian), a pure-DP "
        "continuous kernel (pure_epsilon, e.g. dpjax.Laplace) or a discrete kernel with a Rényi bound "
        f"(renyi_divergence_bound, e.g. dpjax.DiscreteGaussian), got {mechanism!r}"
    )


@dataclasses.dataclass(frozen=True)
class _Noise:
    """A DP-SGD noise family: how it is accounted (:func:`noise_kind`) and its kernel class."""

    kind: str
    cls: type


def _noise(mechanism) -> _Noise:
    return _Noise(noise_kind(mechanism), _GAUSSIAN if mechanism is None else mechanism)


def noise_mechanism(mechanism, scale):
    """The kernel ``mechanism`` (a class; default the Gaussian) at ``scale``.

    Args:
      mechanism: an additive kernel class, or None (the Gaussian).
      scale: the kernel's scale.

    Returns:
      The kernel instance.
    """
    cls = _GAUSSIAN if mechanism is None else mechanism
    return cls(**{cls.scale_name: scale})


def step_mechanism(noise_multiplier, mechanism=None):
    """The mechanism whose PLD at sensitivity 1 dominates one (unsampled) DP-SGD step: the kernel
    itself at scale z for a Gaussian-loss kernel (exact), ``RandomizedResponse(ε₀, 2)`` with ε₀
    the kernel's pure ε at scale z for a pure-DP kernel (dominating pair). A discrete Gaussian has
    none (it is accounted by RDP) and raises.

    Args:
      noise_multiplier: the noise multiplier z.
      mechanism: an additive kernel class, or None (the Gaussian).

    Returns:
      The dpjax mechanism.

    Raises:
      ValueError: the kernel is a discrete Gaussian (accounted by Rényi DP).
    """
    kind = noise_kind(mechanism)
    if kind == "gaussian":
        return noise_mechanism(mechanism, noise_multiplier)
    if kind == "laplace":
        eps0 = noise_mechanism(mechanism, jnp.asarray(noise_multiplier)).pure_epsilon(1.0)
        return RandomizedResponse(epsilon=eps0, num_categories=2)
    raise ValueError("mechanism: the discrete Gaussian is accounted by Rényi DP, it has no PLD step mechanism")


def _renyi_bound(noise, z):
    """The kernel's own Rényi bound at scale z for a unit shift (the discrete Gaussian: α/(2z²))."""
    mech = noise_mechanism(noise.cls, jnp.asarray(z, jnp.float64)[..., None, None])
    return lambda a: mech.renyi_divergence_bound(a, 0.0, 1.0)


def _randomized_response_rdp(noise, z):
    """D_α of binary randomized response at ε₀ (the kernel's pure ε at scale z for a unit shift: 1/z
    for the Laplace kernel), the pair that accounts a pure-DP step:
    log(p^α (1−p)^{1−α} + (1−p)^α p^{1−α}) / (α − 1), p = e^{ε₀}/(1 + e^{ε₀})."""
    e0 = noise_mechanism(noise.cls, jnp.asarray(z, jnp.float64)[..., None, None]).pure_epsilon(1.0)
    lp, lq = jax.nn.log_sigmoid(e0), jax.nn.log_sigmoid(-e0)
    return lambda a: jnp.logaddexp(a * lp + (1 - a) * lq, a * lq + (1 - a) * lp) / (a - 1)


@functools.partial(jax.jit, static_argnums=0)
def _rdp_curve(noise, z, sampling_prob):
    """Per-step RDP bound at :data:`RDP_ORDERS` (the DG's accountant; a bracket for the others)."""
    if noise.kind == "gaussian":
        return sampled_gaussian_rdp(z, sampling_prob)
    base = _randomized_response_rdp(noise, z) if noise.kind == "laplace" else _renyi_bound(noise, z)
    return subsampled_rdp(base, sampling_prob)
