"""The mechanism abstraction shared by every part of dpjax.

A mechanism is an immutable pytree (see :mod:`dpjax.pytree`): numeric
parameters are leaves, so ``jax.grad`` differentiates through them and
parameters with leading batch dimensions describe a *batch* of mechanisms (like
a distribution's batch shape). For a true answer ``value`` it defines the output
law

* ``sample(key, value, shape=())`` — draws of shape ``shape + broadcast(batch_shape, value.shape)``;
* ``log_prob(y, value)`` — log density (continuous) or log pmf (discrete);
* ``cdf(y, value)`` — ``Pr[M(value) <= y]`` (on the integers for discrete mechanisms);
* ``privacy_loss(y, value, neighbour_value)`` — ``log p(y|value) - log p(y|neighbour_value)``;
* ``neighbour_pairs(sensitivity)`` — the (value, neighbour_value) pairs whose
  output laws the accountant must compare; for shift-invariant (additive)
  mechanisms this is the single pair ``(0, Δ)``, for mechanisms whose law changes
  with the answer a grid wide enough to contain the worst pair. The accountant
  examines every pair in both directions and takes the pessimistic envelope.
* optional accounting hooks — ``hockey_stick(ε, value, neighbour_value)`` (closed-form
  privacy profile of a pair), ``output_breakpoints(value, neighbour_value)`` (where the
  loss jumps or turns), ``renyi_divergence(α, value, neighbour_value)``, ``pure_epsilon(Δ)``,
  ``gaussian_pld_mu(Δ)``, ``renyi_divergence_bound(α, value, neighbour_value)``, and the class
  flags ``symmetric_pairs`` and ``pair_path``; see docs/accounting.md for the contract.

A capability is declared one way: an optional hook is ``None`` on :class:`Mechanism` and a
mechanism that has it defines the method; the engine asks ``mech.hook is not None``. The
required methods (``_sample``, ``log_prob``, ``cdf``, ``neighbour_pairs``) are abstract: a class
missing one cannot be instantiated (``TypeError`` naming the method).

Sampling goes through :class:`dpjax.random.UniformStream`: a mechanism only maps
per-record uniforms to outputs (``_sample``), which is what makes releases
reproducible under slicing and sharding.
"""

from __future__ import annotations

import abc
import math
from typing import Callable, ClassVar

import jax
import jax.numpy as jnp

from dpjax.validation import check_real
from dpjax.random import MAX_RECORDS, UniformStream, check_key

__all__ = ["Mechanism", "output_dtype", "default_float", "flat_records", "LANE_BLOCK"]


def output_dtype(value, discrete: bool):
    """dtype of a release of ``value``: the value's float dtype for continuous
    mechanisms (default float dtype for integer input); for discrete mechanisms
    the value's integer dtype, or its float dtype if ``value`` is float."""
    dt = jnp.result_type(value)
    if jnp.issubdtype(dt, jnp.floating):
        return dt
    if discrete:
        return dt if jnp.issubdtype(dt, jnp.integer) else jax.dtypes.canonicalize_dtype(jnp.int64)
    return default_float()


def default_float():
    """The default float dtype: float32, or float64 when the user enabled x64."""
    return jax.dtypes.canonicalize_dtype(jnp.float64)


#: records are drawn in multiples of this many (padding records with indices past the real
#: ones): XLA's CPU loops compute the elements past the last full vector in a scalar tail whose
#: ``log``/``exp`` differ from the vector lanes' in the last bit, so without it a record's
#: output would depend on where its layout (whole, sliced, sharded) puts the tail.
LANE_BLOCK = 128


def flat_records(mech, value, shape, multiple: int = LANE_BLOCK):
    """``(flat_mech, records, n)``: ``value`` and the mechanism's leaves broadcast to ``shape``,
    flattened (record ``i`` is row-major position ``i``), padded to a multiple of ``multiple``
    (values with 0, parameters with their last record's) and laid out as rows of
    :data:`LANE_BLOCK` records; ``n`` real records. Rows keep every record in a full vector
    whatever way XLA splits the rows between threads or devices."""
    n = math.prod(shape)
    pad = -n % multiple

    def rows(x, mode):
        return jnp.pad(jnp.broadcast_to(x, shape).reshape(-1), (0, pad), mode=mode).reshape(-1, LANE_BLOCK)

    def leaf(p):
        return rows(p, "edge") if jnp.ndim(p) else p

    flat = rows(value, "constant")

    return jax.tree_util.tree_map(leaf, mech), flat, n


def check_batch_shape(mech, shape) -> None:
    """Refuse a mechanism whose batch shape does not broadcast to the values' ``shape``."""
    try:
        batch = jnp.broadcast_shapes(mech.batch_shape, shape)
    except ValueError:
        batch = None
    if batch != tuple(shape):
        raise ValueError(f"mech has batch shape {mech.batch_shape}, which does not broadcast to values shape {shape}")


def as_records(values, mech):
    """``(values, squeeze)``: ``values`` as an array of records (a scalar as one record) checked
    against ``mech`` (its input domain and batch shape)."""
    values = jnp.asarray(values)
    squeeze = values.ndim == 0
    if squeeze:
        values = values.reshape(1)
    mech.validate_values(values)
    check_batch_shape(mech, values.shape)
    return values, squeeze


def _float_dtype(dt):
    return dt if jnp.issubdtype(dt, jnp.floating) else default_float()


class Mechanism(abc.ABC):
    """Base class of all mechanisms (subclasses are ``@pytree_dataclass``)."""

    #: Outputs are integers (pmf/cdf on the integers).
    discrete: ClassVar[bool] = False
    #: The lattice ``g·ℤ`` the release adds to the *unrounded* answer (``value + g·N``), or ``None``
    #: (a continuous law, or one that rounds the answer first, as the exact tier does). Answers
    #: ``Δ`` apart with ``Δ`` off the lattice then have disjoint output supports: the accountant
    #: charges ∞ for them (:meth:`off_lattice`), never the privacy of a shift the release cannot have.
    lattice_step: ClassVar[float | None] = None

    def off_lattice(self, sensitivity) -> jax.Array:
        """Where a shift by ``sensitivity`` leaves :attr:`lattice_step`'s lattice (boolean, broadcast
        against the batch; traceable): neighbouring outputs there never coincide, δ = 1 at every ε.
        Always false for a mechanism without a lattice."""
        s = jnp.asarray(sensitivity)
        if self.lattice_step is None:
            return jnp.zeros(jnp.broadcast_shapes(jnp.shape(s), self.batch_shape), bool)
        k = s / self.lattice_step
        return jnp.broadcast_to(k != jnp.round(k), jnp.broadcast_shapes(jnp.shape(s), self.batch_shape))

    # -- shapes -------------------------------------------------------------------
    @property
    def batch_shape(self) -> tuple[int, ...]:
        """Broadcast shape of the numeric parameters (``()`` for a single mechanism)."""
        shapes = [jnp.shape(leaf) for leaf in jax.tree_util.tree_leaves(self)]
        return tuple(jnp.broadcast_shapes(*shapes)) if shapes else ()

    # -- output law -------------------------------------------------------------
    def sample(self, key, value, shape=()) -> jax.Array:
        """Draw outputs for true answer(s) ``value`` (addressed by flat position)."""
        key = check_key(key)
        value = jnp.asarray(check_real("value", value))
        out_shape = tuple(shape) + tuple(jnp.broadcast_shapes(self.batch_shape, value.shape))
        size = math.prod(out_shape)
        if size + LANE_BLOCK > MAX_RECORDS:
            raise ValueError(f"shape: at most 2**32 draws per key, asked for {size}; split the key")
        flat_mech, flat, n = flat_records(self, value, out_shape)
        return flat_mech.sample_records(key, flat).reshape(-1)[:n].reshape(out_shape)

    def sample_records(self, key, value, start=0) -> jax.Array:
        """Outputs for ``value``, whose entries are records ``start, start+1, …`` (row-major).

        The randomness of each output depends only on ``key`` and its record
        index; this is the primitive behind :func:`dpjax.release` (``start`` may be traced).
        """
        dt = output_dtype(value, self.discrete)
        stream = UniformStream(key, jnp.shape(value), _float_dtype(dt), start)
        return self._sample(stream, value).astype(dt)

    @abc.abstractmethod
    def _sample(self, uniform: UniformStream, value) -> jax.Array:
        """Outputs for ``value`` from the per-record uniforms of ``uniform``."""

    @abc.abstractmethod
    def log_prob(self, y, value) -> jax.Array:
        """Log density (continuous) or log pmf (discrete) of output ``y`` for the answer ``value``."""

    @abc.abstractmethod
    def cdf(self, y, value) -> jax.Array:
        """``Pr[M(value) <= y]``."""

    def sf(self, y, value) -> jax.Array:
        """``Pr[M(value) > y]``; default ``1 − cdf`` (override where the upper tail must stay
        accurate below 1e-16: the accountant carries it to the +∞ atom)."""
        return 1.0 - self.cdf(y, value)

    # -- privacy ------------------------------------------------------------------
    def privacy_loss(self, y, value, neighbour_value) -> jax.Array:
        """``log p(y | value) - log p(y | neighbour_value)``."""
        return self.log_prob(y, value) - self.log_prob(y, neighbour_value)

    @abc.abstractmethod
    def neighbour_pairs(self, sensitivity=1.0):
        """Arrays ``(values, neighbour_values)`` the accountant must examine.

        Accounting hook (docs/accounting.md): 1-D arrays of equal length P (or with
        leading batch axes matching the parameters). Each pair is examined in both
        orders, so list each unordered pair once; the grid must contain the worst pair.
        """

    # -- optional accounting hooks (override where a closed form exists) ----------------
    #: δ(P_v‖P_v') = δ(P_v'‖P_v) for every declared pair (lets the accountant skip the mirror).
    symmetric_pairs: ClassVar[bool | None] = None
    #: the declared pairs sample a continuous path of pairs (consecutive pairs joined by straight
    #: segments; integer answers for discrete mechanisms), and every pair on it is a neighbouring
    #: pair: the accountant then bounds the supremum along the path, not just the samples'
    #: maximum (needs the closed forms ``hockey_stick`` / ``renyi_divergence``).
    pair_path: ClassVar[bool] = False

    #: Optional: ``hockey_stick(epsilon, value, neighbour_value)``, δ(ε) = ∫ (p(y|value) −
    #: e^ε p(y|neighbour_value))_+ dy in closed form. Must broadcast ``epsilon`` (e.g. shape (..., n))
    #: against ``value``, ``neighbour_value`` and the parameters (the accountant passes parameters
    #: shaped (..., 1)), accept every real ε, and be exact or an upper bound. Without it the
    #: accountant discretises the output space (``cdf``, ``privacy_loss``, ``output_breakpoints``).
    hockey_stick: ClassVar[Callable | None] = None
    #: Optional: ``output_breakpoints(value, neighbour_value)``, outputs y (array (..., B), static B)
    #: where y ↦ privacy_loss(y, value, neighbour_value) jumps or changes monotonicity; the
    #: output-grid accountant inserts them so the loss is monotone inside every cell.
    output_breakpoints: ClassVar[Callable | None] = None
    #: Optional: ``renyi_divergence(order, value, neighbour_value)``, D_α(P_value‖P_neighbour_value) in
    #: closed form (α > 1), broadcasting like ``hockey_stick``; otherwise ``accounting.rdp``
    #: integrates numerically.
    renyi_divergence: ClassVar[Callable | None] = None
    #: Optional: ``pure_epsilon(sensitivity)``, the mechanism's own pure ε at that sensitivity (∞ where
    #: the mechanism is not pure-DP there); every accountant answer is capped by it.
    pure_epsilon: ClassVar[Callable | None] = None
    #: Optional: ``gaussian_pld_mu(sensitivity)``, μ of a pair loss that is exactly Gaussian
    #: (N(μ²/2, μ²)): the accountant keeps the analytic Gaussian PLD.
    gaussian_pld_mu: ClassVar[Callable | None] = None
    #: Optional: ``renyi_divergence_bound(order, value, neighbour_value)``, an upper bound on the Rényi
    #: divergence (DP-SGD's RDP accountant uses it for discrete noise).
    renyi_divergence_bound: ClassVar[Callable | None] = None

    def traced_checks(self, values):
        """``[(ok, message), …]``: the checks of the constructor and :meth:`validate_values` as
        traced booleans, for :func:`dpjax.checked_release` under ``jit`` (where nothing can be
        inspected): finite values, finite numeric parameters. Mechanisms add their own."""
        checks = [(jnp.all(jnp.isfinite(values)), "values contain NaN or infinite entries")]
        for leaf in jax.tree_util.tree_leaves(self):
            if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
                checks.append((jnp.all(jnp.isfinite(leaf)), f"{type(self).__name__} has a NaN or infinite parameter"))
        return checks

    # -- exact tier (dpjax.exact) ------------------------------------------------------
    def exact_lattice(self) -> "Mechanism":
        """The discrete mechanism that ``numerics="exact"`` runs for this one (integer-only noise on a
        data-independent lattice, :mod:`dpjax.exact.lattice`); its accounting is the privacy of what
        ran. Mechanisms without an exact sampler refuse."""
        raise ValueError(f"numerics='exact': {type(self).__name__} has no exact (integer-only) sampler; "
                         "use numerics='float' (idealized numerics) or a kernel with an exact lattice "
                         "(Laplace, Gaussian, their discrete versions, randomized response)")

    def validate_values(self, values) -> None:
        """Raise ``ValueError`` if ``values`` are outside this mechanism's input domain."""
