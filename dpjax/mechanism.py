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
  ``gaussian_pld_mu(Δ)``, ``laplace_pld_ratio(Δ)``, ``renyi_divergence_bound(α, value, neighbour_value)``, and the class
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
    """The dtype of a release of ``value``.

    Args:
      value: the true answers (array).
      discrete: whether the mechanism's outputs are integers.

    Returns:
      The value's float dtype for continuous mechanisms (the default float dtype for integer input);
      for discrete mechanisms the value's integer dtype, or its float dtype if ``value`` is float.
    """
    dt = jnp.result_type(value)
    if jnp.issubdtype(dt, jnp.floating):
        return dt
    if discrete:
        return dt if jnp.issubdtype(dt, jnp.integer) else jax.dtypes.canonicalize_dtype(jnp.int64)
    return default_float()


def default_float():
    """The default float dtype.

    Returns:
      float32, or float64 when the user enabled x64.
    """
    return jax.dtypes.canonicalize_dtype(jnp.float64)


#: records are drawn in multiples of this many (padding records with indices past the real
#: ones): XLA's CPU loops compute the elements past the last full vector in a scalar tail whose
#: ``log``/``exp`` differ from the vector lanes' in the last bit, so without it a record's
#: output would depend on where its layout (whole, sliced, sharded) puts the tail.
LANE_BLOCK = 128


def flat_records(mech, value, shape, multiple: int = LANE_BLOCK):
    """The values and the mechanism's leaves laid out as rows of :data:`LANE_BLOCK` records.

    Broadcast to ``shape``, flattened (record ``i`` is row-major position ``i``), padded to a
    multiple of ``multiple`` (values with 0, parameters with their last record's). Rows keep every
    record in a full vector whatever way XLA splits the rows between threads or devices.

    Args:
      mech: the mechanism (batched or not).
      value: the true answers.
      shape: the records' shape.
      multiple: the padded record count's factor (a multiple of :data:`LANE_BLOCK`).

    Returns:
      ``(flat_mech, records, n)``: the mechanism with leaves of shape ``(rows, LANE_BLOCK)`` (scalars
      kept), the values as ``(rows, LANE_BLOCK)``, and ``n`` the number of real records.
    """
    n = math.prod(shape)
    pad = -n % multiple

    def rows(x, mode):
        return jnp.pad(jnp.broadcast_to(x, shape).reshape(-1), (0, pad), mode=mode).reshape(-1, LANE_BLOCK)

    def leaf(p):
        return rows(p, "edge") if jnp.ndim(p) else p

    flat = rows(value, "constant")

    return jax.tree_util.tree_map(leaf, mech), flat, n


def check_batch_shape(mech, shape) -> None:
    """Refuse a mechanism whose batch shape does not broadcast to the values' shape.

    Args:
      mech: the mechanism.
      shape: the values' shape.

    Raises:
      ValueError: ``mech.batch_shape`` does not broadcast to ``shape``.
    """
    try:
        batch = jnp.broadcast_shapes(mech.batch_shape, shape)
    except ValueError:
        batch = None
    if batch != tuple(shape):
        raise ValueError(f"mech has batch shape {mech.batch_shape}, which does not broadcast to values shape {shape}")


def as_records(values, mech):
    """The values as an array of records (a scalar as one record), checked against a mechanism.

    Args:
      values: the true answers.
      mech: the mechanism (its input domain and batch shape are checked).

    Returns:
      ``(values, squeeze)``: the array of records, and whether the input was a scalar.

    Raises:
      ValueError: a value outside the mechanism's domain, or a batch shape not broadcasting to the
        values.
    """
    values = jnp.asarray(values)
    squeeze = values.ndim == 0
    if squeeze:
        values = values.reshape(1)
    mech.validate_values(values)
    check_batch_shape(mech, values.shape)
    return values, squeeze


def _float_dtype(dt):
    return dt if jnp.issubdtype(dt, jnp.floating) else default_float()


#: the optional hooks that describe the parameters of a class's own :meth:`Mechanism.exact_lattice`
_EXACT_LATTICE_HOOKS = ("exact_lattice_scale", "exact_lattice_epsilon")
#: the optional hooks that name the pair law of a class's own :meth:`Mechanism.hockey_stick`
_PAIR_LAW_HOOKS = ("gaussian_pld_mu", "laplace_pld_ratio")


class Mechanism(abc.ABC):
    """Base class of all mechanisms (subclasses are ``@pytree_dataclass``).

    Subclasses define ``_sample``, ``log_prob``, ``cdf`` and ``neighbour_pairs`` (abstract: a class
    missing one cannot be instantiated) and may define the optional accounting hooks, which are
    ``None`` here (docs/accounting.md).

    Attributes:
      discrete: outputs are integers (pmf/cdf on the integers).
      lattice_step: the lattice ``g·ℤ`` the release adds to the unrounded answer, or ``None``.
      symmetric_pairs: δ(P_v‖P_v') = δ(P_v'‖P_v) for every declared pair.
      pair_path: the declared pairs sample a continuous path of neighbouring pairs.
      hockey_stick: optional closed-form δ(ε) of a pair.
      output_breakpoints: optional outputs where a pair's privacy loss jumps or turns.
      renyi_divergence: optional closed-form Rényi divergence of a pair.
      pure_epsilon: optional pure ε at a sensitivity.
      gaussian_pld_mu: optional μ of a pair loss that is exactly Gaussian.
      laplace_pld_ratio: optional r = Δ/b of a pair that is exactly the Laplace pair.
      renyi_divergence_bound: optional upper bound on a pair's Rényi divergence.
      exact_lattice_scale: optional per-record scales :meth:`exact_lattice` is built from.
      exact_lattice_epsilon: optional per-record ε :meth:`exact_lattice` is built from.
    """

    #: Outputs are integers (pmf/cdf on the integers).
    discrete: ClassVar[bool] = False
    #: The lattice ``g·ℤ`` the release adds to the *unrounded* answer (``value + g·N``), or ``None``
    #: (a continuous law, or one that rounds the answer first, as the exact tier does). Answers
    #: ``Δ`` apart with ``Δ`` off the lattice then have disjoint output supports: the accountant
    #: charges ∞ for them (:meth:`off_lattice`), never the privacy of a shift the release cannot have.
    lattice_step: ClassVar[float | None] = None

    def off_lattice(self, sensitivity) -> jax.Array:
        """Where a shift by ``sensitivity`` leaves :attr:`lattice_step`'s lattice.

        Neighbouring outputs there never coincide: δ = 1 at every ε. Traceable.

        Args:
          sensitivity: the shift Δ (scalar or array).

        Returns:
          A boolean array broadcast against the batch; always false for a mechanism without a lattice.
        """
        s = jnp.asarray(sensitivity)
        if self.lattice_step is None:
            return jnp.zeros(jnp.broadcast_shapes(jnp.shape(s), self.batch_shape), bool)
        k = s / self.lattice_step
        return jnp.broadcast_to(k != jnp.round(k), jnp.broadcast_shapes(jnp.shape(s), self.batch_shape))

    # -- shapes -------------------------------------------------------------------
    @property
    def batch_shape(self) -> tuple[int, ...]:
        """Broadcast shape of the numeric parameters.

        Returns:
          The shape, ``()`` for a single mechanism.
        """
        shapes = [jnp.shape(leaf) for leaf in jax.tree_util.tree_leaves(self)]
        return tuple(jnp.broadcast_shapes(*shapes)) if shapes else ()

    # -- output law -------------------------------------------------------------
    def sample(self, key, value, shape=()) -> jax.Array:
        """Draw outputs for true answer(s) ``value``, addressed by flat position.

        Args:
          key: a Threefry PRNG key, consumed once.
          value: the true answer(s) (real array).
          shape: a sample shape prepended to the output.

        Returns:
          Draws of shape ``shape + broadcast(batch_shape, value.shape)``.

        Raises:
          ValueError: ``key`` not a single Threefry key; ``value`` NaN or infinite; more than 2**32
            draws.
        """
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
        index; this is the primitive behind :func:`dpjax.release`. No validation.

        Args:
          key: a Threefry PRNG key, consumed once.
          value: the true answers, one per record (parameters broadcast to its shape).
          start: the record index of ``value``'s first entry (may be traced).

        Returns:
          Outputs of ``value``'s shape, in :func:`output_dtype`.
        """
        dt = output_dtype(value, self.discrete)
        stream = UniformStream(key, jnp.shape(value), _float_dtype(dt), start)
        return self._sample(stream, value).astype(dt)

    @abc.abstractmethod
    def _sample(self, uniform: UniformStream, value) -> jax.Array:
        """Outputs for ``value`` from the per-record uniforms of ``uniform``.

        Args:
          uniform: the records' :class:`dpjax.random.UniformStream`.
          value: the true answers.

        Returns:
          One output per record, of ``value``'s shape.
        """

    @abc.abstractmethod
    def log_prob(self, y, value) -> jax.Array:
        """Log density (continuous) or log pmf (discrete) of an output.

        Args:
          y: outputs (array).
          value: the true answer(s), broadcasting with ``y`` and the batch.

        Returns:
          ``log p(y | value)``, of the broadcast shape.
        """

    @abc.abstractmethod
    def cdf(self, y, value) -> jax.Array:
        """The output's cumulative distribution function.

        Args:
          y: outputs (array; on the integers for discrete mechanisms).
          value: the true answer(s), broadcasting with ``y`` and the batch.

        Returns:
          ``Pr[M(value) <= y]``, of the broadcast shape.
        """

    def sf(self, y, value) -> jax.Array:
        """The output's survival function.

        Default ``1 − cdf``; override where the upper tail must stay accurate below 1e-16 (the
        accountant carries it to the +∞ atom).

        Args:
          y: outputs (array).
          value: the true answer(s).

        Returns:
          ``Pr[M(value) > y]``, of the broadcast shape.
        """
        return 1.0 - self.cdf(y, value)

    # -- privacy ------------------------------------------------------------------
    def privacy_loss(self, y, value, neighbour_value) -> jax.Array:
        """The privacy loss of an output between two answers.

        Args:
          y: outputs (array).
          value: the true answer(s).
          neighbour_value: the neighbouring answer(s).

        Returns:
          ``log p(y | value) - log p(y | neighbour_value)``, of the broadcast shape.
        """
        return self.log_prob(y, value) - self.log_prob(y, neighbour_value)

    @abc.abstractmethod
    def neighbour_pairs(self, sensitivity=1.0):
        """Arrays ``(values, neighbour_values)`` the accountant must examine.

        Accounting hook (docs/accounting.md): 1-D arrays of equal length P (or with
        leading batch axes matching the parameters). Each pair is examined in both
        orders, so list each unordered pair once; the grid must contain the worst pair.

        Args:
          sensitivity: the largest distance Δ of two neighbouring answers.

        Returns:
          ``(values, neighbour_values)``, arrays of equal shape ``(..., P)``.
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
    #: Optional: ``laplace_pld_ratio(sensitivity)``, r of a pair that is exactly Lap(0, 1) vs Lap(r, 1) (losses in
    #: [−r, r], δ(ε) = 1 − e^{(ε−r)/2} for |ε| < r): the accountant builds its grid from that profile on the host.
    #: The pair-law hooks must run on numpy leaves and arguments as on JAX ones (the accountant evaluates them
    #: in numpy on concrete values: nothing compiled).
    laplace_pld_ratio: ClassVar[Callable | None] = None
    #: Optional: ``renyi_divergence_bound(order, value, neighbour_value)``, an upper bound on the Rényi
    #: divergence (DP-SGD's RDP accountant uses it for discrete noise).
    renyi_divergence_bound: ClassVar[Callable | None] = None

    # -- optional exact-tier hooks (declared beside ``exact_lattice``) ------------------
    #: Optional: ``exact_lattice_scale()``, the per-record scales :meth:`exact_lattice` builds its lattice from
    #: (a Laplace or discrete Laplace): an exact release with many distinct scales builds the same lattice
    #: parameters from them in its device program.
    exact_lattice_scale: ClassVar[Callable | None] = None
    #: Optional: ``exact_lattice_epsilon()``, the per-record ε :meth:`exact_lattice` builds its keep thresholds from
    #: (randomized response): an exact release with per-record ε looks the same thresholds up in its device program.
    exact_lattice_epsilon: ClassVar[Callable | None] = None

    def __init_subclass__(cls, **kwargs):
        """A class that defines its own :meth:`exact_lattice` offers only the exact-tier hooks it defines beside it,
        and one that defines its own ``hockey_stick`` only the pair-law hooks it defines beside it.

        The exact-tier hooks describe the parameters of one particular lattice: a subclass with another lattice must
        not inherit them (its release would build its parent's lattice on the device), and one that defines a hook
        without the lattice it describes is refused. The pair-law hooks (``gaussian_pld_mu``,
        ``laplace_pld_ratio``) name the law of the parent's pair: a subclass with its own profile must not be
        accounted as its parent.

        Raises:
          TypeError: the class defines an exact-tier hook but not ``exact_lattice``.
        """
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        for hook in _EXACT_LATTICE_HOOKS:
            if "exact_lattice" not in own and own.get(hook) is not None:
                raise TypeError(f"{cls.__name__} defines {hook} without the exact_lattice it describes")
            if "exact_lattice" in own and hook not in own:
                setattr(cls, hook, None)
        for hook in _PAIR_LAW_HOOKS:
            if "hockey_stick" in own and hook not in own:
                setattr(cls, hook, None)

    def traced_checks(self, values):
        """The checks of the constructor and :meth:`validate_values` as traced booleans.

        For :func:`dpjax.checked_release` under ``jit``, where nothing can be inspected: finite
        values, finite numeric parameters. Mechanisms add their own.

        Args:
          values: the true answers (possibly traced).

        Returns:
          A list of ``(ok, message)``: a traced boolean and the error message when it is false.
        """
        checks = [(jnp.all(jnp.isfinite(values)), "values contain NaN or infinite entries")]
        for leaf in jax.tree_util.tree_leaves(self):
            if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
                checks.append((jnp.all(jnp.isfinite(leaf)), f"{type(self).__name__} has a NaN or infinite parameter"))
        return checks

    # -- exact tier (dpjax.exact) ------------------------------------------------------
    def exact_lattice(self) -> "Mechanism":
        """The discrete mechanism that ``numerics="exact"`` runs for this one.

        Integer-only noise on a data-independent lattice (:mod:`dpjax.exact.lattice`); its
        accounting is the privacy of what ran.

        Returns:
          The exact tier's mechanism.

        Raises:
          ValueError: the mechanism has no exact sampler (the default here).
        """
        raise ValueError(
            f"numerics='exact': {type(self).__name__} has no exact (integer-only) sampler; "
            "use numerics='float' (idealized numerics) or a kernel with an exact lattice "
            "(Laplace, Gaussian, their discrete versions, randomized response)"
        )

    def validate_values(self, values) -> None:
        """Refuse values outside this mechanism's input domain.

        Args:
          values: the true answers (concrete; traced values pass).

        Raises:
          ValueError: a value outside the input domain.
        """
