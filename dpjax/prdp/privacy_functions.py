"""The paper's privacy budget functions E(v) (Chen, Sun, Xu, Dong, SIGMOD 2025, §8.1).

A record's budget is a public, data-independent function of its value ``v ∈ [0, U]``
(a balance, a salary), non-increasing (larger values get stronger protection) and capped
at ε̂:

* inverse ``E(v) = α/v``, α = 10⁴ (Eq. (1) with the typo of its second case fixed: its printed
  second case cannot hold);
* sqrt ``E(v) = α/√v``, α = 8;
* log ``E(v) = α/log⁴ v``, α = 500 (base unspecified by the paper; natural log by default,
  the paper's §8.1; ``E = ε̂`` for ``v ≤ 1``).

``ε̌ = E(U)`` (the least budget over the domain) and ``ε̂`` give the level grid. For the
extension's noise and the framework's domain tightening, :meth:`PrivacyFunction.level_upper`
gives the public bound of the values of each level, ``u_i = sup{v ≤ U : E(v) > lo_i}`` =
``min(U, E^{-1}(lo_i))`` (``u_1 = U``: level 1 is closed at ε̌).
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp

from dpjax._float64 import x64
from dpjax.prdp.domains import level_floors, num_levels
from dpjax.pytree import pytree_dataclass, static_field
from dpjax.validation import check_positive, is_traced

__all__ = ["PrivacyFunction", "KINDS"]

KINDS = ("inverse", "sqrt", "log")
_DEFAULT_ALPHA = {"inverse": 1e4, "sqrt": 8.0, "log": 500.0}


@pytree_dataclass
class PrivacyFunction:
    """A capped, non-increasing budget function ``E: [0, U] → [E(U), ε̂]``.

    A pytree: α, U and ε̂ are leaves, so a sweep over U or α is a ``vmap``.

    Build with :meth:`inverse`, :meth:`sqrt` or :meth:`log`. ``E(values)`` gives the budgets
    (float64); :attr:`eps_min` = E(U), :attr:`eps_max` = ε̂.

    Args:
      alpha: α > 0.
      upper: U > 0, the public bound of the values.
      cap: ε̂ > 0.
      kind: ``"inverse"``, ``"sqrt"`` or ``"log"`` (static).
      log_base: the log function's base, finite and > 1 (static).

    Raises:
      ValueError: an unknown ``kind``; ``alpha``, ``upper`` or ``cap`` not positive; ``log_base``
        not a finite number > 1; ``upper <= log_base`` for the log function.

    References:
      Chen, Sun, Xu, Dong, "A General Framework for Per-record Differential Privacy", SIGMOD 2025
      (PACMMOD 3(6), article 287), Eq. (1) and §8.1.
    """

    alpha: jax.Array
    upper: jax.Array
    cap: jax.Array
    kind: str = static_field(default="inverse")
    log_base: float = static_field(default=math.e)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        check_positive("alpha", self.alpha)
        check_positive("upper", self.upper)
        check_positive("eps_max", self.cap)
        if not (self.log_base > 1.0 and math.isfinite(self.log_base)):
            raise ValueError(f"log_base must be a finite number > 1, got {self.log_base!r}")
        if self.kind == "log" and not is_traced(self.upper) and float(self.upper) <= self.log_base:
            raise ValueError(
                f"upper must exceed log_base for the log function (E(U) = eps_max otherwise), got {self.upper}"
            )

    @classmethod
    def inverse(cls, upper, *, alpha=_DEFAULT_ALPHA["inverse"], eps_max=100.0):
        """``E(v) = min(ε̂, α/v)`` (``ε̂`` at v = 0); the paper's tables use α = 10⁴, U = 10¹², ε̂ = 100.

        Args:
          upper: U > 0, the public bound of the values.
          alpha: α > 0.
          eps_max: ε̂ > 0, the cap.

        Returns:
          The :class:`PrivacyFunction`.

        Raises:
          ValueError: ``upper``, ``alpha`` or ``eps_max`` not positive.
        """
        return cls(alpha=alpha, upper=upper, cap=eps_max, kind="inverse")

    @classmethod
    def sqrt(cls, upper, *, alpha=_DEFAULT_ALPHA["sqrt"], eps_max=100.0):
        """``E(v) = min(ε̂, α/√v)``; the paper's figures use α = 8.

        Args:
          upper: U > 0, the public bound of the values.
          alpha: α > 0.
          eps_max: ε̂ > 0, the cap.

        Returns:
          The :class:`PrivacyFunction`.

        Raises:
          ValueError: ``upper``, ``alpha`` or ``eps_max`` not positive.
        """
        return cls(alpha=alpha, upper=upper, cap=eps_max, kind="sqrt")

    @classmethod
    def log(cls, upper, *, alpha=_DEFAULT_ALPHA["log"], eps_max=100.0, base=math.e):
        """``E(v) = min(ε̂, α/log_base⁴ v)`` (``ε̂`` for v ≤ 1).

        α = 500, base e by default (the paper's §8.1).

        Args:
          upper: U > 0, the public bound of the values.
          alpha: α > 0.
          eps_max: ε̂ > 0, the cap.
          base: the log's base, finite and > 1.

        Returns:
          The :class:`PrivacyFunction`.

        Raises:
          ValueError: ``upper``, ``alpha`` or ``eps_max`` not positive; ``base`` not a finite number
            > 1; ``upper <= base``.
        """
        return cls(alpha=alpha, upper=upper, cap=eps_max, kind="log", log_base=float(base))

    @x64
    def __call__(self, values):
        """Budgets ``E(v)`` (float64), capped at ε̂.

        Args:
          values: the records' values (array).

        Returns:
          float64 budgets of ``values``' shape.
        """
        return _budgets(self, values)

    @property
    def eps_min(self):
        """ε̌ = E(U), the least budget of the domain (float64).

        Returns:
          ε̌, a float64 scalar (batched with the leaves).
        """
        return self(self.upper)

    @property
    @x64
    def eps_max(self):
        """ε̂, the cap (float64).

        Returns:
          ε̂, a float64 scalar (batched with the leaves).
        """
        return jnp.asarray(self.cap, jnp.float64)

    @x64
    def inverse_budget(self, epsilon):
        """``E^{-1}(ε) = sup{v ≤ U : E(v) > ε}`` for ``ε < ε̂`` (float64; U where every v qualifies).

        Args:
          epsilon: budgets ε < ε̂ (array).

        Returns:
          float64 values of ``epsilon``'s shape.
        """
        return _inverse_budget(self, epsilon)

    @x64
    def level_upper(self, max_levels=None):
        """Public bound ``u_i`` of the values of each level ``i = 1 … max_levels`` (float64).

        ``u_1 = U`` (level 1 holds ``E(v) = ε̌``, i.e. v = U); ``u_i = E^{-1}(lo_i)`` for i ≥ 2,
        since a record of level i has ``E(v) > lo_i``. Pass as ``upper=`` to
        :func:`dpjax.prdp.sum` / :func:`dpjax.prdp.max`. Padded levels (i > L) repeat ``u_L``.

        Args:
          max_levels: the static level count (default L, from concrete parameters).

        Returns:
          float64 array of shape ``(max_levels,)``.

        Raises:
          ValueError: ``max_levels`` missing with traced parameters.
        """
        if max_levels is None:
            if is_traced(self.upper) or is_traced(self.alpha) or is_traced(self.cap):
                raise ValueError("max_levels: the function's parameters are traced; pass a static max_levels")
            with jax.ensure_compile_time_eval():
                max_levels = int(num_levels(self.eps_min, self.eps_max))
        return _level_upper(self, max_levels=max_levels)


def _raw(fn: PrivacyFunction, v):
    """``α/f(v)`` without the cap (inf where f(v) ≤ 0)."""
    alpha = jnp.asarray(fn.alpha, jnp.float64)
    if fn.kind == "inverse":
        f = v
    elif fn.kind == "sqrt":
        f = jnp.sqrt(v)
    else:
        f = (jnp.log(jnp.maximum(v, 1.0)) / math.log(fn.log_base)) ** 4
    return jnp.where(f > 0, alpha / jnp.where(f > 0, f, 1.0), jnp.inf)


@jax.jit
def _budgets(fn: PrivacyFunction, values):
    v = jnp.asarray(values, jnp.float64)
    return jnp.minimum(jnp.asarray(fn.cap, jnp.float64), _raw(fn, v))


@jax.jit
def _inverse_budget(fn: PrivacyFunction, epsilon):
    e = jnp.asarray(epsilon, jnp.float64)
    alpha = jnp.asarray(fn.alpha, jnp.float64)
    if fn.kind == "inverse":
        v = alpha / e
    elif fn.kind == "sqrt":
        v = (alpha / e) ** 2
    else:
        v = jnp.exp(math.log(fn.log_base) * (alpha / e) ** 0.25)
    return jnp.minimum(jnp.asarray(fn.upper, jnp.float64), v)


@partial(jax.jit, static_argnames=("max_levels",))
def _level_upper(fn: PrivacyFunction, *, max_levels):
    eps_min = _budgets(fn, fn.upper)
    eps_max = jnp.asarray(fn.cap, jnp.float64)
    levels = num_levels(eps_min, eps_max)
    idx = jnp.arange(max_levels, dtype=jnp.int32)
    inverse = _inverse_budget(fn, level_floors(eps_min, max_levels))
    bounds = jnp.where(idx == 0, jnp.asarray(fn.upper, jnp.float64), inverse)
    return jnp.where(idx < levels, bounds, bounds[jnp.maximum(levels - 1, 0)])
