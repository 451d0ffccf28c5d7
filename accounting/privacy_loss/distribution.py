"""Privacy-loss distributions (PLDs) of dpjax mechanisms: the object, its composition and queries.

Names follow Google's dp_accounting. A :class:`PrivacyLossDistribution` keeps the
*remove* and *add* directions separately (they differ under Poisson subsampling) and
reports the max. It is a pytree: a mechanism with batched parameters gives a batch of
PLDs, and every query returns an array over that batch. :func:`pld` builds one
(:mod:`accounting.privacy_loss.construction`); a mechanism whose pair loss is exactly Gaussian
(``gaussian_pld_mu``, the plain Gaussian kernel) stays analytic — μ composes as √Σμ² —
until it meets a grid PLD.

All arithmetic is float64 inside ``jax.enable_x64(True)`` contexts; the user's global
configuration is never changed.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtri

from accounting.privacy_loss import grid as _grid
from accounting.privacy_loss.construction import (
    AUTO_WINDOW,
    DEFAULT_DISCRETIZATION,
    DEFAULT_OUTPUT_CELLS,
    DEFAULT_TAIL_MASS,
    LOSS_LIMIT,
    MAX_GRID,
    ROUNDOFF_FACTOR,
    Plan,
    build,
    concrete_mu,
    host_build,
    host_profile,
    plan_with,
    next_pow2,
    pairs,
    sampling_rate,
    validate,
)
from accounting.privacy_loss.profiles import envelope, expand, host_gaussian_profile
from accounting.privacy_loss.route import capped_by_pure, pure_cap, route
from accounting._numerics import as64, bucket_len, concrete, leaf64, pow2_floor, to64, x64, x64_vjp
from accounting._root import ROOT_TOL, TARGET_SLACK, epsilon_root
from dpjax.kernels import gaussian_privacy_profile
from dpjax.mechanism import Mechanism
from dpjax.pytree import pytree_dataclass, static_field
from dpjax.validation import check_int, check_positive, check_probability, is_traced

__all__ = ["PrivacyLossDistribution", "pld", "identity"]


# ----------------------------------------------------------------------------------
# the PLD object
# ----------------------------------------------------------------------------------
@pytree_dataclass(kw_only=True)
class PrivacyLossDistribution:
    """A (batch of) privacy-loss distribution(s), remove and add directions kept apart.

    Build with :func:`pld` (or :func:`identity`); the constructor is keyword-only. ``gaussian_mu``
    is set for the exact (analytic) Gaussian PLD of μ = Δ/σ; otherwise ``remove`` (and ``add``,
    ``None`` when both directions agree) are grid pmfs, composed with the analytic Gaussian PLD of
    μ = ``gaussian_part`` where that is set: analytic Gaussians composed with a grid PLD stay
    analytic (μ composes as √Σμ²) and are discretised once, when the PLD is read (:meth:`resolved`).
    Queries of a concrete grid PLD run on the host (numpy); traced ones (``jit``, ``grad``) run
    compiled and differentiable.

    Args:
      remove: grid pmf of the remove direction (``None`` for an analytic PLD).
      add: grid pmf of the add direction; ``None`` when it equals ``remove``.
      gaussian_mu: μ of an analytic Gaussian PLD (``None`` for a grid PLD).
      pure_eps: the mechanisms' own pure ε, composed (``None``: unknown).
      pessimistic: a dominating PLD (never below the true δ) or, ``False``, an optimistic one.
      step: the loss-grid step (a power of two).
      source: ``(mechanism, sensitivity, sampling_prob)`` of a single-step PLD with closed-form
        profiles: its ε(δ) is differentiated through the exact privacy profile.
      atomic: built from a discrete mechanism (composed, its grid figures refuse derivatives).
      composed: the result of a composition.
      adaptive: the step was chosen by the engine; compositions may coarsen it.
      bounds: Gaussian parts beyond the loss grid, ``(mu, sampling_prob, count)`` arrays, composed by
        basic composition.
      gaussian_part: μ of the analytic Gaussian PLD composed with this grid, not yet discretised.
      host_queries: answer concrete queries on the host (default); ``False``: by the compiled
        programs, faster for a PLD of one shape queried over and over.

    References:
      Koskela, Jälkö, Honkela, "Computing Tight Differential Privacy Guarantees Using FFT",
      AISTATS 2020; Doroshenko, Ghazi, Kamath, Kumar, Manurangsi, "Connect the Dots: Tighter
      Discrete Approximations of Privacy Loss Distributions", PETS 2022.
    """

    remove: _grid.GridPmf | None = None
    add: _grid.GridPmf | None = None
    gaussian_mu: jax.Array | None = None
    pure_eps: jax.Array | None = None  # the mechanisms' own pure-ε bound, composed (None: unknown)
    pessimistic: bool = static_field(default=True)
    step: float = static_field(default=DEFAULT_DISCRETIZATION)
    # (mechanism, sensitivity, sampling_prob) of a single-step PLD built from a mechanism with
    # closed-form pair profiles: ε(δ) is differentiated through its exact privacy profile
    source: tuple | None = None
    # built from a discrete (atomic) mechanism: composed, its grid ε(δ) / δ(ε) refuse derivatives
    atomic: bool = static_field(default=False)
    composed: bool = static_field(default=False)
    # the step was chosen by the engine (value_discretization_interval=None): compositions may
    # coarsen it (:func:`accounting.privacy_loss.grid.coarsen`) to bound their FFT length
    adaptive: bool = static_field(default=False)
    # Gaussian parts the loss grid cannot hold (μ above GRID_MU_LIMIT), composed with the grid by basic
    # composition (:func:`_bound_epsilon`): a tuple of ``(mu, sampling_prob, count)`` arrays over the batch
    bounds: tuple = ()
    # μ of the analytic Gaussian PLD this grid PLD is composed with, not yet discretised (None: none)
    gaussian_part: jax.Array | None = None
    # queries of a concrete grid PLD on the host (numpy); False: by the compiled programs (a PLD of one
    # shape queried over and over, the odometer's repeated spend)
    host_queries: bool = static_field(default=True)

    # -- structure ---------------------------------------------------------------------
    @property
    def is_analytic(self) -> bool:
        return self.gaussian_mu is not None

    @property
    def batch_shape(self):
        if self.is_analytic:
            return tuple(jnp.shape(self.gaussian_mu))
        return tuple(self.remove.batch_shape)

    def _directions(self):
        if self.gaussian_part is not None:
            raise ValueError("a PLD with an analytic Gaussian part has no grid directions until resolved()")
        return (self.remove,) if self.add is None else (self.remove, self.add)

    @x64
    def resolved(self) -> "PrivacyLossDistribution":
        """This PLD with its analytic Gaussian part discretised and composed onto its grid.

        The one composition that every read of a grid PLD goes through.

        Returns:
          A PLD without ``gaussian_part`` (``self`` if it has none).
        """
        if self.gaussian_part is None:
            return self
        gauss = PrivacyLossDistribution(
            gaussian_mu=self.gaussian_part, pessimistic=self.pessimistic, step=self.step, adaptive=self.adaptive
        )
        return dataclasses.replace(self, gaussian_part=None)._compose_grids(gauss, DEFAULT_TAIL_MASS)

    def _deferred(self, other, tail):
        """The composition of ``self`` and ``other`` with their analytic Gaussian parts kept analytic
        (μ as √Σμ², one grid composition at most), or None where the two grids could not share the step
        of the Gaussian's eventual grid (mixed adaptive and fixed steps, unequal fixed steps or batches)."""
        if (
            self.adaptive != other.adaptive
            or (not self.adaptive and self.step != other.step)
            or self.batch_shape != other.batch_shape
        ):
            return None
        parts = [
            (None, p.gaussian_mu) if p.is_analytic else (dataclasses.replace(p, gaussian_part=None), p.gaussian_part)
            for p in (self, other)
        ]
        grids = [g for g, _ in parts if g is not None]
        mus = [m for _, m in parts if m is not None]
        grid = grids[0] if len(grids) == 1 else grids[0]._compose_grids(grids[1], tail)
        # (concrete μ on the host: no program compiled for the scalar arithmetic)
        xp = jnp if any(is_traced(m) for m in mus) else np
        mu = None
        if mus:
            mu = functools.reduce(lambda x, y: xp.sqrt(x * x + y * y), [xp.asarray(m, np.float64) for m in mus])
            mu = leaf64(mu) if xp is np else mu
        return dataclasses.replace(grid, gaussian_part=mu)

    @x64
    def to_grid(self, value_discretization_interval=None) -> "PrivacyLossDistribution":
        """The grid (connect-the-dots) PLD of an analytic one.

        Args:
          value_discretization_interval: the loss-grid step (rounded down to a power of two); ``None``
            keeps this PLD's (adaptive: the engine's).

        Returns:
          The grid PLD (a grid PLD is returned resolved).

        Raises:
          ValueError: μ is traced (inside ``jit``).
        """
        if not self.is_analytic:
            return self.resolved()
        step = None if self.adaptive else self.step
        if value_discretization_interval is not None:
            step = pow2_floor(float(value_discretization_interval))
        mu = concrete(self.gaussian_mu)
        if mu is None:
            raise ValueError("to_grid: μ is traced; call outside jit or pass plan= to accounting.pld")
        if beyond_grid(mu):
            return _bound_pld(self.gaussian_mu, 1.0, self.pessimistic, step, self.adaptive)
        return pld(
            _GaussianPair(mu=as64(mu)),
            value_discretization_interval=step,
            pessimistic=self.pessimistic,
            use_analytic=False,
        )

    # -- composition -------------------------------------------------------------------
    @x64
    def compose(self, other: "PrivacyLossDistribution", *, tail_mass_truncation=DEFAULT_TAIL_MASS):
        """The PLD of running both mechanisms (heterogeneous composition, one FFT).

        Concrete grids are composed on the host (numpy FFT); analytic Gaussians stay analytic.

        Args:
          other: the other PLD (same ``pessimistic``; equal steps unless adaptive).
          tail_mass_truncation: mass cut from the composition's tails (to +∞ when pessimistic).

        Returns:
          The composed PLD.

        Raises:
          ValueError: ``other`` is not a PLD, differs in ``pessimistic``, or has another fixed step.
        """
        if not isinstance(other, PrivacyLossDistribution):
            raise ValueError(f"other must be a PrivacyLossDistribution, got {type(other).__name__}")
        if self.pessimistic != other.pessimistic:
            raise ValueError("other: cannot compose a pessimistic PLD with an optimistic one")
        check_positive("tail_mass_truncation", tail_mass_truncation)
        if self.is_analytic and other.is_analytic:
            if is_traced((self.gaussian_mu, other.gaussian_mu)):
                mu = jnp.sqrt(jnp.asarray(self.gaussian_mu) ** 2 + jnp.asarray(other.gaussian_mu) ** 2)
            else:  # (on the host: nothing compiled)
                a, b = (np.asarray(x, np.float64) for x in (self.gaussian_mu, other.gaussian_mu))
                mu = leaf64(np.sqrt(a**2 + b**2))
            return PrivacyLossDistribution(
                gaussian_mu=mu, pessimistic=self.pessimistic, step=self.step, adaptive=self.adaptive and other.adaptive
            )
        if self.is_analytic or other.is_analytic or self.gaussian_part is not None or other.gaussian_part is not None:
            deferred = self._deferred(other, float(tail_mass_truncation))
            if deferred is not None:
                return deferred
        return self.resolved()._compose_grids(other.resolved(), float(tail_mass_truncation))

    def _compose_grids(self, other, tail):
        """The composition on one grid: analytic Gaussians discretised first."""
        a = self.to_grid(None if self.adaptive or other.adaptive else other.step)
        b = other.to_grid(None if a.adaptive or other.adaptive else a.step)
        if a.step != b.step:
            if not (a.adaptive or b.adaptive):
                raise ValueError(
                    f"other: discretization intervals differ ({a.step} vs {b.step}); build both with the same "
                    "value_discretization_interval (or leave it None: adaptive PLDs meet on the coarser grid)"
                )
            a, b = a.coarsened(max(a.step, b.step)), b.coarsened(max(a.step, b.step))
        rem = _compose_trim(a.remove, b.remove, a.pessimistic, tail)
        if a.add is None and b.add is None:
            add = None
        else:
            add = _compose_trim(a.add or a.remove, b.add or b.remove, a.pessimistic, tail)
        if is_traced((a, b)):
            pure = a.pure_bound() + b.pure_bound()
        else:  # (on the host: nothing compiled)
            pure = leaf64(np.asarray(a.pure_bound()) + np.asarray(b.pure_bound()))
        return a.composed_as(rem, add, pure, b)

    def composed_as(self, remove, add, pure_eps, other=None, count=None):
        """The PLD of a composition of this one (and ``other``, or ``count`` runs of this one) with the
        given grid directions: the one route that carries the flags — ``atomic`` (a composed discrete
        mechanism refuses derivatives), ``adaptive``, the step — and the Gaussian parts beyond the grid
        (:attr:`bounds`) whoever composes (``compose``, ``self_compose``, the odometer's count-traced
        composition).

        Args:
          remove: the composed remove-direction grid pmf.
          add: the composed add-direction grid pmf, or None (symmetric).
          pure_eps: the composed pure ε.
          other: the other PLD composed with this one, or None.
          count: the number of runs of this one composed (with ``other`` None), or None.

        Returns:
          The composed :class:`PrivacyLossDistribution`.
        """
        others = () if other is None else (other,)
        bounds = self.bounds + sum((o.bounds for o in others), ())
        if count is not None:
            bounds = tuple((mu, q, c * jnp.asarray(count, jnp.float64)) for mu, q, c in bounds)
        return PrivacyLossDistribution(
            remove=remove,
            add=add,
            pure_eps=pure_eps,
            pessimistic=self.pessimistic,
            step=remove.step,
            atomic=self.atomic or any(o.atomic for o in others),
            composed=True,
            adaptive=self.adaptive and all(o.adaptive for o in others),
            bounds=bounds,
        )

    def pure_bound(self):
        """An upper bound on the pure ε of this (grid) PLD, the one a composition adds up: the mechanisms'
        own (composed) pure ε where known, else the largest loss of the single-step grid (its losses are
        rounded up, its mass beyond the grid sits at +∞). A composed grid's largest loss with mass is no
        bound: round-off clears its smallest masses (the top ones of a long composition)."""
        if self.gaussian_part is not None:
            return self.resolved().pure_bound()
        if self.pure_eps is not None:
            return jnp.asarray(self.pure_eps, jnp.float64) if is_traced(self.pure_eps) else leaf64(self.pure_eps)
        if self.composed:
            return leaf64(np.full(self.batch_shape, np.inf))
        if not is_traced(self):  # (on the host: nothing compiled)
            return leaf64(np.maximum.reduce([np.asarray(_grid.pure_epsilon(p)) for p in self._directions()]))
        return jax.lax.stop_gradient(functools.reduce(jnp.maximum, [_grid.pure_epsilon(p) for p in self._directions()]))

    def coarsened(self, step):
        """This grid PLD on the coarser power-of-two ``step`` (dominating:
        :func:`accounting.privacy_loss.grid.coarsen`).

        Args:
          step: the new step, a power-of-two multiple of the current one.

        Returns:
          The coarsened :class:`PrivacyLossDistribution` (this one when ``step`` is its step).
        """
        if self.gaussian_part is not None:
            return self.resolved().coarsened(step)
        if step == self.step:
            return self
        factor = int(round(step / self.step))
        dirs = [
            _grid.pad_to(
                x64_vjp(functools.partial(_coarsen_jit, factor=factor))(p)
                if is_traced(p)
                else _grid.on_host(_grid.coarsen, p, factor),
                next_pow2(-(-(p.size + factor - 1) // factor) + 1),
            )
            for p in self._directions()
        ]
        return dataclasses.replace(self, remove=dirs[0], add=dirs[1] if len(dirs) > 1 else None, step=step, source=None)

    def fitted_to_window(self, need: int) -> "PrivacyLossDistribution":
        """An adaptive grid PLD coarsened by the smallest power of two that brings a composition window of
        ``need`` points (at its own step) within AUTO_WINDOW; any other PLD as it is. The one rule of
        every composition by a count: :meth:`self_compose`, the odometer's and DP-SGD's
        (:func:`accounting.accountant.composition_grid`).

        Args:
          need: the composition window's length in points at this PLD's step.

        Returns:
          The (possibly coarsened) :class:`PrivacyLossDistribution`.
        """
        if self.gaussian_part is not None:
            return self.resolved().fitted_to_window(need)
        if not self.adaptive:
            return self
        factor = 1
        while need > AUTO_WINDOW * factor:
            factor *= 2
        return self.coarsened(self.step * factor)

    @x64
    def self_compose(self, count: int, *, tail_mass_truncation=DEFAULT_TAIL_MASS, size: int | None = None):
        """The PLD of ``count`` independent runs: one FFT power per direction.

        Mass outside the window is Chernoff-bounded and carried to the +∞ atom (pessimistic). A
        concrete PLD is composed on the host (numpy), a traced one by a compiled program.

        Args:
          count: the number of runs (a positive integer).
          tail_mass_truncation: mass cut from the tails (Chernoff-bounded).
          size: static FFT length / window, chosen from a Chernoff bound on concrete values when
            ``None``; inside ``jit`` pass it (e.g. ``pld.self_compose(T).remove.size`` of a concrete run).

        Returns:
          The composed PLD.

        Raises:
          ValueError: ``count`` not a positive integer, ``size`` too small, or the FFT would exceed
            the largest grid.
        """
        count = check_int("count", count, minimum=1)
        check_positive("tail_mass_truncation", tail_mass_truncation)
        if count == 1:
            return self
        if self.gaussian_part is not None:
            return self.resolved().self_compose(count, tail_mass_truncation=tail_mass_truncation, size=size)
        if self.is_analytic:
            mu = jnp.asarray(self.gaussian_mu) * math.sqrt(count)
            return PrivacyLossDistribution(
                gaussian_mu=mu, pessimistic=self.pessimistic, step=self.step, adaptive=self.adaptive
            )
        tail = float(tail_mass_truncation)
        src = self
        if self.adaptive and size is None:  # coarsen until the window fits AUTO_WINDOW
            src = self.fitted_to_window(max(_grid.required_window(_primal(p), count, tail) for p in self._directions()))
        outs = []
        for pmf in src._directions():
            s = size if size is not None else _window_size(pmf, count, tail)
            s = check_int("size", s, minimum=pmf.size)
            if not is_traced(pmf):  # concrete: one numpy FFT power on the host, nothing compiled
                outs.append(_grid.on_host(_grid.self_compose, pmf, count, s, tail, self.pessimistic))
                continue
            outs.append(
                x64_vjp(
                    functools.partial(_self_compose_jit, count=count, size=s, tail=tail, pessimistic=self.pessimistic)
                )(pmf)
            )
        add = outs[1] if len(outs) > 1 else None
        return src.composed_as(outs[0], add, src.pure_bound() * count, count=count)

    # -- queries -----------------------------------------------------------------------
    @x64
    def get_delta_for_epsilon(self, epsilon):
        """δ(ε), the max over directions.

        Args:
          epsilon: ε, a scalar or an array.

        Returns:
          float64 δ of shape ``batch_shape + epsilon.shape`` (never below the truth when pessimistic).

        Raises:
          ValueError: ``epsilon`` is NaN.
        """
        if self.gaussian_part is not None:
            return self.resolved().get_delta_for_epsilon(epsilon)
        if not is_traced(epsilon):
            e = np.asarray(epsilon, float)
            if np.isnan(e).any():
                raise ValueError(f"epsilon must not be NaN, got {epsilon!r}")
        concrete_query = not (is_traced(epsilon) or is_traced(self))
        xp = np if concrete_query else jnp  # (a concrete argument prepared on the host: nothing compiled)
        eps = xp.asarray(epsilon, np.float64)
        flat = _flat(eps, self.batch_shape, xp)
        if self._on_host(epsilon):
            return leaf64(self._delta_core(flat, np).reshape(self.batch_shape + eps.shape))
        out = x64_vjp(_delta_core)(self, flat)
        if concrete_query:
            return as64(np.asarray(out).reshape(self.batch_shape + eps.shape))
        return self._refuse_if_inexact(out).reshape(self.batch_shape + eps.shape)

    def _on_host(self, arg) -> bool:
        """Whether a query at ``arg`` is answered on the host (numpy, nothing compiled): a concrete grid
        PLD (no analytic Gaussian, no Gaussian parts beyond the grid) at a concrete argument. A traced
        one (``jit``, ``grad``) runs the compiled, differentiable query."""
        return self.host_queries and not (self.is_analytic or self.bounds or is_traced(arg) or is_traced(self))

    def _delta_core(self, flat, xp=jnp):
        if self.bounds:
            return _bound_delta(self._epsilon_core, flat)
        if self.is_analytic:
            mu = jnp.asarray(self.gaussian_mu, jnp.float64)[..., None]
            out = gaussian_privacy_profile(flat, mu)
            out = jnp.clip(out, 0.0, 1.0)
        else:
            outs = [_grid.delta_with_roundoff(pmf, flat, self.pessimistic, xp) for pmf in self._directions()]
            out = functools.reduce(xp.maximum, outs)
        return capped_by_pure("delta", out, flat, None if self.pure_eps is None else xp.asarray(self.pure_eps), xp)

    @x64
    def get_epsilon_for_delta(self, delta):
        """The smallest ε with δ(ε) ≤ ``delta``, the max over directions.

        Args:
          delta: δ in [0, 1), a scalar or an array.

        Returns:
          float64 ε of shape ``batch_shape + delta.shape``; inside ``jit``, NaN where ``delta`` is below
          the round-off floor.

        Raises:
          ValueError: ``delta`` outside [0, 1), or below the round-off floor of this PLD (the answer
            would be noise).
        """
        if self.gaussian_part is not None:
            return self.resolved().get_epsilon_for_delta(delta)
        if not is_traced(delta):
            check_probability("delta", delta, high_open=True)
        concrete_query = not (is_traced(delta) or is_traced(self))
        xp = np if concrete_query else jnp  # (a concrete argument prepared on the host: nothing compiled)
        dl = xp.asarray(delta, np.float64)
        flat = _flat(dl, self.batch_shape, xp)
        if not self.is_analytic:
            for pmf in self._directions():
                check_floor(flat, ROUNDOFF_FACTOR * xp.asarray(pmf.roundoff)[..., None])
        if self._on_host(delta):
            return leaf64(self._epsilon_core(flat, np).reshape(self.batch_shape + dl.shape))
        if concrete_query and self.is_analytic and self.host_queries:
            eps = _host_gaussian_epsilon(np.asarray(self.gaussian_mu)[..., None], flat)
            if eps is not None:  # (on the host: nothing compiled)
                return leaf64(eps.reshape(self.batch_shape + dl.shape))
        eps = x64_vjp(_epsilon_core)(self, flat)
        if concrete_query:
            return as64(np.asarray(eps).reshape(self.batch_shape + dl.shape))
        if self.source is not None and is_traced(self.source):
            # only a traced mechanism (under grad/jit) can carry a derivative: a concrete query
            # skips the exact profile's evaluation
            eps = _exact_derivative(self.source, eps, self.pure_eps)
        return self._refuse_if_inexact(eps).reshape(self.batch_shape + dl.shape)

    def _refuse_if_inexact(self, figure):
        """``figure``, refusing to be differentiated where its grid derivative is wrong: a composed
        PLD of an atomic (discrete) mechanism. Its atoms' losses are rounded to the grid, so the
        grid's ε(δ) moves with the parameters only in steps and its derivative misses the atoms'
        motion (DiscreteLaplace(2.4) × 10: −1.66 for −1.736)."""
        return _no_derivative(figure) if self.atomic and self.composed else figure

    def _epsilon_core(self, flat, xp=jnp):
        if self.is_analytic:
            return _gaussian_epsilon(jnp.asarray(self.gaussian_mu, jnp.float64)[..., None], flat)
        if self.bounds:
            plain = dataclasses.replace(self, bounds=())
            return _bound_epsilon(plain._epsilon_core, plain.pure_bound(), self.bounds, flat)
        outs = []
        for pmf in self._directions():
            r = xp.asarray(pmf.roundoff)[..., None]
            # pessimistic: answer for δ − round-off (sound); optimistic: for δ + round-off
            e = _grid.epsilon_for_delta(pmf, flat - r if self.pessimistic else flat + r, xp)
            outs.append(xp.where(flat < ROUNDOFF_FACTOR * r, np.nan, e))
        pure = None if self.pure_eps is None else xp.asarray(self.pure_eps)
        return capped_by_pure("epsilon", functools.reduce(xp.maximum, outs), flat, pure, xp)

    @x64
    def get_epsilon_bounds(self, delta):
        """:meth:`get_epsilon_for_delta` under prv_accountant's name.

        Args:
          delta: δ in [0, 1).

        Returns:
          The ε of :meth:`get_epsilon_for_delta`.
        """
        return self.get_epsilon_for_delta(delta)

    @x64
    def pure_epsilon(self):
        """The pure-DP ε: the largest loss with mass over both directions.

        Returns:
          float64 ε over the batch, ∞ where mass sits at +∞ (or for an analytic Gaussian).
        """
        if self.gaussian_part is not None:
            return self.resolved().pure_epsilon()
        if self.is_analytic or self.bounds:
            return jnp.full(self.batch_shape, jnp.inf)
        if self.composed:
            return self.pure_bound()
        grid = functools.reduce(jnp.maximum, [_grid.pure_epsilon(p) for p in self._directions()])
        return grid if self.pure_eps is None else jnp.minimum(grid, self.pure_eps)

    @property
    def roundoff(self):
        """Estimated absolute float64 round-off of δ (max over directions)."""
        if self.is_analytic:
            return jnp.zeros(self.batch_shape)
        if self.gaussian_part is not None:
            return self.resolved().roundoff
        return functools.reduce(jnp.maximum, [p.roundoff for p in self._directions()])


@jax.custom_jvp
def _no_derivative(x):
    return x


@_no_derivative.defjvp
def _no_derivative_jvp(primals, tangents):
    raise ValueError(
        "a composed PLD of a discrete (atomic) mechanism cannot be differentiated: the grid rounds its "
        "atoms' losses, so its derivative would be wrong. Differentiate a single-step PLD (exact, through "
        "the mechanism's privacy profile), use central finite differences on concrete parameters, or "
        "compose a continuous kernel (e.g. dpjax.Laplace) to tune by gradients"
    )


@jax.jit
def _delta_core(p, flat):
    return p._delta_core(flat)


@jax.jit
def _epsilon_core(p, flat):
    return p._epsilon_core(flat)


def _flat(arg, batch_shape, xp):
    """``arg`` flattened and broadcast over the batch: shape batch + (arg.size,)."""
    arg = xp.asarray(arg, np.float64)
    return xp.broadcast_to(arg.reshape(-1), tuple(batch_shape) + (max(arg.size, 1),))[..., : arg.size]


def check_floor(delta, floor):
    """Refuse (ValueError naming ``delta``) a concrete δ below the round-off floor of a grid PLD."""
    if is_traced(delta) or is_traced(floor):
        return
    d, f = np.asarray(delta), np.asarray(floor)
    bad = ~(d >= f)
    if bad.any() and not np.isfinite(f).all():
        raise ValueError(
            "delta: this PLD's masses overflowed float64 in the composition, so no δ can be read from it "
            "reliably; compose fewer runs per FFT or use a coarser value_discretization_interval."
        )
    if bad.any():
        raise ValueError(
            f"delta={float(d[bad].min()):.3g} is below the float64 round-off floor {float(f.max()):.3g} of this PLD: "
            "the answer would be dominated by numerical error. Ask for a larger delta, use fewer compositions "
            "per FFT, or a coarser value_discretization_interval (smaller grids carry less round-off)."
        )


def _primal(pmf):
    """``pmf`` on concrete values (eager ``jax.grad``: plan on the primal values)."""
    conc = concrete(pmf.probs)
    if conc is None:
        raise ValueError(
            "size: the PLD is traced (inside jit); pass self_compose(count, size=...) with a static FFT length "
            "(take it from a concrete run: pld.self_compose(count).remove.size)"
        )
    if is_traced(pmf.probs):
        pmf = _grid.GridPmf(
            jnp.asarray(conc),
            jnp.asarray(concrete(pmf.offset)),
            jnp.asarray(concrete(pmf.inf_mass)),
            jnp.asarray(concrete(pmf.roundoff)),
            pmf.step,
        )
    return pmf


def _window_size(pmf, count, tail):
    pmf = _primal(pmf)
    need = _grid.required_window(pmf, count, tail)
    size = bucket_len(max(need, pmf.size))
    if size > MAX_GRID:
        raise ValueError(
            f"count: the {count}-fold composition needs an FFT of length {size}; use a coarser "
            "value_discretization_interval"
        )
    return size


@functools.partial(jax.jit, static_argnames=("count", "size", "tail", "pessimistic"))
def _self_compose_jit(pmf, count, size, tail, pessimistic):
    return _grid.self_compose(pmf, count, size, tail, pessimistic)


@functools.partial(jax.jit, static_argnames=("factor",))
def _coarsen_jit(pmf, factor):
    return _grid.coarsen(pmf, factor)


@functools.partial(jax.jit, static_argnames=("pessimistic",))
def _compose_jit(a, b, support, pessimistic):
    return _grid.compose(a, b, pessimistic, support)


def _compose_trim(a, b, pessimistic, tail):
    """``a`` ⊗ ``b`` trimmed to all but ``tail`` mass, on a power-of-two length.

    Concrete pmfs are composed on the host (numpy FFT of their supports, without the zeros that pad
    them), trimmed there and returned as arrays: a chain of compositions compiles nothing, where a
    compiled composition and trim per length made a first call mostly XLA compilation. Traced ones
    (under ``jit`` or ``grad``) are padded to one power-of-two length and composed in one program per
    length, untrimmed."""
    if is_traced(a.probs) or is_traced(b.probs):
        size = next_pow2(max(a.size, b.size))
        return x64_vjp(
            functools.partial(
                _compose_jit, support=jnp.asarray(a.size + b.size - 1, jnp.int32), pessimistic=pessimistic
            )
        )(_grid.pad_to(a, size), _grid.pad_to(b, size))
    host = [jax.tree_util.tree_map(np.asarray, p) for p in (a, b)]
    host = [_grid.GridPmf(p.probs[..., : _grid.support_len(p)], p.offset, p.inf_mass, p.roundoff, p.step) for p in host]
    with np.errstate(all="ignore"):  # overflowed masses read as such (round-off ∞), as the compiled route
        out = _grid.compose(*host, pessimistic, xp=np)
        start, stop = _grid.trim_window(out, tail)
        out = _grid.trim(out, start, stop, next_pow2(stop - start), pessimistic)
    with jax.enable_x64(True):
        return jax.tree_util.tree_map(leaf64, out)


def _log_gaussian_delta(eps, mu):
    return jnp.log(gaussian_privacy_profile(eps, mu))


#: above this μ (σ below 1e-6 at sensitivity 1) the Gaussian ε(δ) is its closed-form upper bound
GAUSSIAN_CLOSED_MU = 1e6


def _gaussian_epsilon(mu, delta):
    """ε of the Gaussian PLD of μ at δ (:func:`accounting._root.epsilon_root`, implicit gradient),
    started from the right of the root (μ²/2 + μ|Φ⁻¹(δ)| bounds it), where Newton on the concave
    log δ converges monotonically."""
    mu, delta = jnp.broadcast_arrays(mu, delta)
    big = mu > GAUSSIAN_CLOSED_MU
    small_mu = jnp.where(big, 1.0, mu)
    x0 = small_mu * (small_mu / 2.0 + jnp.abs(ndtri(jnp.clip(delta, 1e-300, 0.5))))
    root = epsilon_root(_log_gaussian_delta, small_mu, delta, x0=jax.lax.stop_gradient(x0))
    # δ(ε) ≤ Φ(μ/2 − ε/μ), so ε ≤ μ(μ/2 − Φ⁻¹(δ)): above GAUSSIAN_CLOSED_MU this bound is within 1e-11
    # relative of the root, which the search can no longer resolve (μ/2 − ε/μ cancels: at μ = 1e100 it
    # stopped 2e-8 relative below the truth); rounded up by 1e-15 relative
    upper = jnp.maximum(mu * (mu / 2.0 - ndtri(delta)), 0.0) * (1.0 + 1e-15)
    return jnp.where(big, upper, root)


def _host_gaussian_epsilon(mu, delta):
    """:func:`_gaussian_epsilon` on the host (numpy, nothing compiled) for concrete μ in (0,
    GAUSSIAN_CLOSED_MU] and δ in (0, 1): bisection of the decreasing profile
    (:func:`accounting.privacy_loss.profiles.host_gaussian_profile`) from [0, μ(μ/2 + |Φ⁻¹(δ)|)] (an upper
    bound: δ(ε) ≤ Φ(μ/2 − ε/μ)) to ROOT_TOL, reporting the end where δ is at or below the target lowered by
    TARGET_SLACK, as :func:`accounting._root.epsilon_root` lowers it (the profile's round-off near δ = 1, where it
    is flat, would otherwise meet the target below the root; a profile the numerics cannot evaluate counts as
    above it); ``None`` for other arguments (the compiled route)."""
    mu, delta = np.broadcast_arrays(np.asarray(mu, np.float64), np.asarray(delta, np.float64))
    if not (np.all((mu > 0) & (mu <= GAUSSIAN_CLOSED_MU)) and np.all((delta > 0) & (delta < 1))):
        return None

    target = delta * (1.0 - TARGET_SLACK)

    def above(e):
        d = host_gaussian_profile(mu, e)
        return np.isnan(d) | (d > target)

    inv = np.vectorize(lambda d: abs(statistics.NormalDist().inv_cdf(min(d, 0.5))))(delta)
    lo, hi = np.zeros_like(mu), (mu * (mu / 2.0 + inv)) * (1.0 + 1e-9) + ROOT_TOL
    for _ in range(64):  # (the bound holds; a NaN profile may still read above it: widen)
        wide = above(hi)
        if not wide.any():
            break
        lo, hi = np.where(wide, hi, lo), np.where(wide, 2.0 * hi + 1.0, hi)
    else:
        return None
    hi = np.where(above(lo), hi, lo)  # δ(0) at or below the target: ε = 0
    for _ in range(200):
        if np.all(hi - lo <= np.maximum(ROOT_TOL, 4.0 * np.spacing(hi))):
            break
        mid = 0.5 * (lo + hi)
        up = above(mid)
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return hi


#: the largest Gaussian μ = Δ/σ a loss grid holds: its losses, N(μ²/2, μ²), stay 40 standard deviations
#: below LOSS_LIMIT (beyond it the grid would carry them to +∞, and every answer would be ∞)
GRID_MU_LIMIT = math.sqrt(1600.0 + 2.0 * LOSS_LIMIT) - 40.0
#: the grid's share of δ tried by :func:`_bound_epsilon` (the Gaussian parts share the rest equally)
_GRID_SHARES = np.concatenate([2.0 ** -np.arange(60, 0, -1.0), 1.0 - 2.0 ** -np.arange(2, 31, 2.0)])


def beyond_grid(mu) -> bool:
    """Whether a (concrete) Gaussian μ, any member of a batch, is too large for a loss grid."""
    return bool(np.any(np.asarray(mu, np.float64) > GRID_MU_LIMIT))


def _bound_pld(mu, sampling_prob, pessimistic, step, adaptive):
    """A PLD of a Gaussian (μ, Poisson rate ``sampling_prob``) whose losses a grid cannot hold: the
    identity grid (loss 0) and the Gaussian as a part composed by basic composition
    (:attr:`PrivacyLossDistribution.bounds`, :func:`_bound_epsilon`)."""
    mu = jnp.asarray(mu, jnp.float64)
    shape = mu.shape
    step = DEFAULT_DISCRETIZATION if step is None else step
    zeros = jnp.zeros(shape, jnp.float64)
    pmf = _grid.GridPmf(jnp.broadcast_to(jnp.asarray([1.0, 0.0, 0.0]), shape + (3,)), zeros, zeros, zeros, step)
    q = jnp.broadcast_to(jnp.asarray(sampling_prob, jnp.float64), shape)
    return PrivacyLossDistribution(
        remove=pmf,
        pure_eps=zeros,
        pessimistic=bool(pessimistic),
        step=step,
        adaptive=adaptive,
        bounds=((mu, q, jnp.ones(shape, jnp.float64)),),
    )


def _part_epsilon(mu, q, count, delta):
    """ε at total δ of ``count`` runs of a Gaussian (μ) Poisson-subsampled at rate ``q``, an upper bound:
    q = 1: the Gaussian of μ√count (its δ(ε) ≤ Φ(μ/2 − ε/μ), Balle & Wang, "Improving the Gaussian
    mechanism for differential privacy", ICML 2018, Thm. 8); q < 1: basic composition of the runs,
    each at δ/count by amplification (Balle, Barthe & Gaboardi, "Privacy amplification by subsampling:
    tight analyses via couplings and divergences", NeurIPS 2018, Thm. 8): a run at (ε, δ') is, subsampled,
    (log(1 + q(e^ε − 1)), qδ') — exact for removal, an upper bound for addition, whose profile is
    q δ'(ε) at the smaller −log(1 − q + q e^{−ε})."""
    whole = q >= 1.0
    per_run = delta / jnp.where(whole, 1.0, count * q)
    m = jnp.where(whole, mu * jnp.sqrt(count), mu)
    # the Gaussian's ε(δ) by the closed-form bound ε ≤ m(m/2 − Φ⁻¹(δ)) (δ(ε) ≤ Φ(m/2 − ε/m)): at the μ of
    # a part (above GRID_MU_LIMIT) within 1e-8 relative of the root, rounded up by 1e-15 relative
    e = jnp.maximum(m * (m / 2.0 - ndtri(jnp.minimum(per_run, 0.5))), 0.0) * (1.0 + 1e-15)  # (δ 0: ∞)
    e = jnp.where(per_run >= 1.0, 0.0, e)
    small = e < 1.0
    amp = jnp.where(
        small,
        jnp.log1p(q * jnp.expm1(jnp.where(small, e, 0.0))),
        e + jnp.log(q + (1.0 - q) * jnp.exp(-jnp.where(small, 1.0, e))),
    )
    return jnp.where(whole, e, count * amp)


def _bound_epsilon(grid_epsilon, grid_pure, bounds, delta):
    """ε(δ) of a grid PLD (``grid_epsilon``: δ → its ε, NaN where it refuses; ``grid_pure``: an upper
    bound of its pure ε, over the batch) composed with Gaussian parts beyond the grid (``bounds``):
    basic composition, ε = ε_grid(δ_0) + Σ ε_i(δ_i) with δ = δ_0 + Σ δ_i, the least over the grid's
    shares δ_0/δ in {0} ∪ :data:`_GRID_SHARES` (the parts share the rest equally; at share 0 the grid's
    ε is its pure ε); every share is an upper bound, so is their least. Rounded up by 8 ulp."""
    shares = jnp.asarray(np.concatenate([[0.0], _GRID_SHARES]))
    d = delta[..., None] * shares  # batch + (n, K)
    e_grid = grid_epsilon(d[..., 1:].reshape(d.shape[:-2] + (-1,))).reshape(d[..., 1:].shape)
    pure = jnp.broadcast_to(jnp.asarray(grid_pure, jnp.float64)[..., None, None], d[..., :1].shape)
    total = jnp.concatenate([pure, jnp.where(jnp.isnan(e_grid), jnp.inf, e_grid)], -1)
    rest = delta[..., None] * (1.0 - shares) / len(bounds)
    for mu, q, count in bounds:
        total = total + _part_epsilon(*(jnp.asarray(x, jnp.float64)[..., None, None] for x in (mu, q, count)), rest)
    return jnp.min(total, axis=-1) * (1.0 + 8.0 * np.finfo(np.float64).eps)


def _bound_delta(epsilon_of, eps):
    """δ(ε) from an upper bound ``epsilon_of`` (δ → ε, non-increasing): the least δ (to a bisection of
    log δ, 64 halvings) at which it is at most ``eps`` — an upper bound of the true δ(ε), which is at
    most δ wherever ε(δ) ≤ ε; 1 where none is."""
    lo = jnp.full(eps.shape, -745.0)
    hi = jnp.zeros(eps.shape)

    def body(_, state):
        lo, hi = state
        mid = 0.5 * (lo + hi)
        ok = epsilon_of(jnp.exp(mid)) <= eps
        return jnp.where(ok, lo, mid), jnp.where(ok, mid, hi)

    lo, hi = jax.lax.fori_loop(0, 64, body, (lo, hi))
    return jnp.where(epsilon_of(jnp.exp(lo)) <= eps, 0.0, jnp.exp(hi))


@pytree_dataclass
class _GaussianPair(Mechanism):
    """The pair N(0, 1), N(μ, 1): the source :meth:`PrivacyLossDistribution.to_grid` discretises."""

    mu: jax.Array
    symmetric_pairs = True

    def gaussian_pld_mu(self, sensitivity=1.0):
        # the pair's loss is exactly N(μ²/2, μ²) (its pairs, like this, ignore the sensitivity)
        return jnp.asarray(self.mu)

    def neighbour_pairs(self, sensitivity=1.0):
        return jnp.zeros((1,)), jnp.ones((1,))

    # the law of an answer v: N(μ·v, 1)
    def _sample(self, uniform, value):
        return self.mu * value + jax.scipy.special.ndtri(uniform(0))

    def log_prob(self, y, value):
        return jax.scipy.stats.norm.logpdf(y - self.mu * value)

    def cdf(self, y, value):
        return jax.scipy.special.ndtr(y - self.mu * value)

    def hockey_stick(self, epsilon, value, neighbour_value):
        return gaussian_privacy_profile(epsilon, self.mu * jnp.abs(jnp.asarray(neighbour_value) - value))


# ----------------------------------------------------------------------------------
# construction
# ----------------------------------------------------------------------------------
def _exact_profile(source, eps):
    """The exact privacy profile δ(ε) (max over directions) of a single step's closed forms at
    ``eps`` (batch + (k,)), one batch member at a time (vmapped over the flattened batch)."""

    def one(src, e):
        mech, sens, sampling_prob = src
        values, nvalues = pairs(mech, sens)
        rem, add = envelope(
            expand(mech),
            values,
            nvalues,
            sampling_prob,
            e,
            None if sampling_prob is None else e,
            pessimistic=True,
            plan={"cells": DEFAULT_OUTPUT_CELLS},
        )
        return (rem if add is None else jnp.maximum(rem, add)).reshape(e.shape)

    batch = eps.shape[:-1]
    if not batch:
        return one(source, eps)
    flat = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, batch).reshape(-1), source)
    return jax.vmap(one)(flat, eps.reshape(-1, eps.shape[-1])).reshape(eps.shape)


def _exact_tangent(source, eps):
    """``t(θ)`` with ``dt/dθ = dε/dθ`` of the exact profile's root at the answer ``eps`` (fixed):
    ``−δ(ε; θ) / ∂_ε δ(ε; θ)``, the implicit-function derivative, 0 where ε is not finite."""
    ok = jnp.isfinite(eps)
    at = jnp.where(ok, eps, 0.0)
    h, slope = jax.jvp(lambda e: _exact_profile(source, e), (at,), (jnp.ones_like(at),))
    slope = jax.lax.stop_gradient(slope)
    return jnp.where(ok & (slope < 0), -h / jnp.where(slope < 0, slope, -1.0), 0.0)


def _exact_derivative(source, eps, pure):
    """``eps`` with the derivative of the mechanism's exact ε(δ) (the grid's loss locations do not
    move with the parameters: a Laplace kernel's atom at Δ/b would give −0.07 for −Δ/b²). An
    answer at the pure-ε cap (``pure``, traced with the parameters) moves with the cap: the exact
    profile is 0 there and has no implicit derivative (it read 0 for −Δ/b²)."""
    fixed = jax.lax.stop_gradient(eps)
    t = x64_vjp(lambda src: _exact_tangent(src, fixed))(source)
    out = fixed + (t - jax.lax.stop_gradient(t))
    if pure is None:
        return out
    cap = jnp.broadcast_to(jnp.asarray(pure)[..., None], out.shape)
    return jnp.where(fixed >= jax.lax.stop_gradient(cap), cap, out)


@x64
def pld(
    mech,
    *,
    sensitivity=1.0,
    sampling_prob=1.0,
    value_discretization_interval=None,
    pessimistic=True,
    use_analytic=True,
    output_cells=DEFAULT_OUTPUT_CELLS,
    plan: Plan | None = None,
):
    """The privacy-loss distribution of one run of ``mech`` on a query of ``sensitivity``.

    A mechanism with batched parameters gives a batch of PLDs. A mechanism whose pair loss is exactly
    Gaussian stays analytic unless subsampled; with concrete parameters its grid is built on the host.

    Args:
      mech: a dpjax mechanism.
      sensitivity: the query's sensitivity (a scalar).
      sampling_prob: Poisson subsampling rate (add/remove neighbours; the directions kept apart).
      value_discretization_interval: loss-grid step, rounded down to a power of two; ``None``
        (default): adaptive — 2^-13 unless the losses are much smaller (the step follows their scale)
        or their range much wider (:func:`accounting.privacy_loss.construction.auto_step`);
        compositions of adaptive PLDs coarsen the step (by powers of two, dominating) when their FFT
        would exceed 2^23.
      pessimistic: a dominating PLD (never below the true δ); ``False`` an optimistic estimate (never
        above), so the pair brackets the truth.
      use_analytic: keep the plain Gaussian mechanism as the exact Gaussian PLD.
      output_cells: output-grid size for mechanisms without a closed-form profile.
      plan: static sizes (from :func:`make_plan`), required when the parameters are traced (``jit``).

    Returns:
      A :class:`PrivacyLossDistribution`.

    Raises:
      ValueError: ``mech`` not a mechanism, a parameter out of range, traced parameters without
        ``plan``, or a plan built for another step.

    References:
      Doroshenko, Ghazi, Kamath, Kumar, Manurangsi, "Connect the Dots: Tighter Discrete
      Approximations of Privacy Loss Distributions", PETS 2022.
    """
    validate(mech, sensitivity, sampling_prob, value_discretization_interval)
    adaptive = value_discretization_interval is None
    step = DEFAULT_DISCRETIZATION if adaptive else pow2_floor(float(value_discretization_interval))
    how = route(mech, sampling_rate(sampling_prob), use_analytic=use_analytic)
    if how.analytic:
        # concrete: no custom-VJP call (not under jax.grad either, whose tracers carry concrete values)
        mu = None if is_traced((mech, sensitivity)) else concrete_mu(mech, sensitivity)
        mu = (
            as64(mu)
            if mu is not None
            else x64_vjp(lambda m, s: to64(m).gaussian_pld_mu(to64(s)))(mech, as64(sensitivity))
        )
        return PrivacyLossDistribution(gaussian_mu=mu, pessimistic=pessimistic, step=step, adaptive=adaptive)
    host = host_profile(mech, sensitivity, sampling_prob, how)
    mu = host[1] if host is not None and host[0] is host_gaussian_profile else concrete_mu(mech, sensitivity)
    if mu is not None and concrete(sampling_prob) is not None and beyond_grid(mu):
        rate = sampling_rate(concrete(sampling_prob))
        return _bound_pld(mu, 1.0 if rate is None else rate, pessimistic, None if adaptive else step, adaptive)
    if plan is None:
        plan = plan_with(mech, sensitivity, sampling_prob, value_discretization_interval, output_cells, host)
    elif not adaptive and plan.step != step:
        raise ValueError(f"plan: built for step {plan.step}, but value_discretization_interval gives {step}")
    step = plan.step
    sampling_prob = sampling_rate(sampling_prob)  # None (not subsampled) or a float64 array
    pure = None
    if host is not None:  # concrete Gaussian or Laplace pair: its profile and grid built on the host (nothing compiled)
        profile, param, pure = host
        rem, add = host_build(profile, param, sampling_prob, plan, bool(pessimistic))
        if pure is not None:  # (pure_cap's arithmetic)
            pure = pure if sampling_prob is None else np.log1p(np.asarray(sampling_prob) * np.expm1(pure))
            pure = leaf64(np.broadcast_to(pure, tuple(mech.batch_shape)))
    else:
        rem, add = x64_vjp(lambda m, s, prob: build(to64(m), to64(s), prob, plan, bool(pessimistic)))(
            mech, as64(sensitivity), sampling_prob
        )
    if how.pure_cap and pure is None:  # (its gradient, like the grid's, in float64)
        pure = x64_vjp(lambda m, s, prob: pure_cap(to64(m), to64(s), prob))(mech, as64(sensitivity), sampling_prob)
    source = None
    if how.exact_derivative:
        source = (mech, leaf64(sensitivity), sampling_prob)
    return PrivacyLossDistribution(
        remove=rem,
        add=add,
        pure_eps=pure,
        pessimistic=bool(pessimistic),
        step=step,
        source=source,
        atomic=how.atomic,
        adaptive=adaptive,
    )


def identity(*, value_discretization_interval=DEFAULT_DISCRETIZATION, pessimistic=True):
    """The PLD of releasing nothing (loss 0 with probability 1).

    Args:
      value_discretization_interval: the loss-grid step (rounded down to a power of two).
      pessimistic: whether the PLD composes as a pessimistic one.

    Returns:
      A grid :class:`PrivacyLossDistribution`.
    """
    with jax.enable_x64(True):
        step = pow2_floor(float(value_discretization_interval))
        probs = jnp.asarray([1.0, 0.0, 0.0])
        pmf = _grid.GridPmf(probs, jnp.asarray(0.0), jnp.asarray(0.0), jnp.asarray(0.0), step)
        return PrivacyLossDistribution(remove=pmf, pure_eps=jnp.asarray(0.0), pessimistic=pessimistic, step=step)
