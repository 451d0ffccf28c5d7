r"""The kernel protocol: additive noise ``M(value) = value + N`` with N symmetric about 0.

A kernel is a ``@dpjax.pytree_dataclass`` subclass of :class:`AdditiveMechanism` whose
numeric parameter, its scale, is a leaf (named ``scale``, or as ``scale_name`` says).
It defines three methods of its noise law N:

* ``noise_log_prob(n)`` — log density, or log pmf on the integers (``discrete = True``,
  ``−inf`` off the integers);
* ``noise_log_cdf(n)`` — ``log Pr[N ≤ n]``, accurate in the lower tail;
* ``noise_icdf(u)`` — the quantile ``F⁻¹(u)``; on the integers the smallest ``k`` with
  ``F(k) ≥ u``.

From these three the engine builds everything else through the optional methods below.
Their defaults are generic (numerical: bisection, doubling, quadrature); a kernel with
closed forms or faster paths overrides them — the built-in kernels do — and the call
sites never ask which kernel they hold.

=================================  =========================================  ==============================
optional method                    generic default                            used by
=================================  =========================================  ==============================
``noise_cdf``, ``noise_log_sf``    from ``noise_log_cdf`` and symmetry        cdf, samplers, accounting
``noise_log_icdf(log_u)``          ``noise_icdf(exp(log_u))``                 log-space quantile targets
``sample_noise(uniform)``          ``noise_icdf(uniform(0))``                 releases
``noise_side_masses(x)``           ``(½ − P(N > x), P(N > x))``               PB-DP masses, continuous
``noise_split_icdf(p, w, side)``   ``−side·noise_icdf(p)``                    PB-DP mixture sampler
``noise_region_log_masses``        log-CDF differences, no ``1 − F``          PB-DP boosting rate
``log_interval_masses``            log-CDF differences, reflected             PB-DP closed forms
``noise_reach()``, ``noise_far()``  doubling of the scale on ``noise_log_cdf``  pair grids, far piece edges
``noise_kinks()``                  none                                       Rényi / loss pieces
``noise_loss_threshold``           bisection of the pair loss                 PB-DP hockey stick
``noise_tilted_log_integral``      sinh-mapped Gauss–Legendre quadrature      PB-DP Rényi divergence
accounting hooks (below)           none: output grid / quadrature             accounting
=================================  =========================================  ==============================

The accounting hooks are ``hockey_stick``, ``renyi_divergence``, ``pure_epsilon`` and ``gaussian_pld_mu``.

``log_concave`` (class flag, default ``True``) states that log f is concave: the pair loss
``y ↦ log f(y − v) − log f(y − v')`` is then monotone, the worst pair of shifts is ``(0, Δ)``
(``neighbour_pairs``), and one loss threshold splits the output line. A kernel that is not
log-concave sets it ``False`` and declares ``noise_kinks``: offsets between which its
pair losses are monotone (e.g. the breakpoints of a piecewise log-linear density); the
accountant then examines every shift up to Δ, and privacy boosting cuts the output line
at the kinks of both laws.
"""

from __future__ import annotations

import abc
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.mechanism import Mechanism
from dpjax.pytree import replace
from dpjax.validation import check_positive, check_scale, is_traced

__all__ = ["AdditiveMechanism", "safe_log", "round_up_to_default_float"]

#: two-tail mass beyond :meth:`AdditiveMechanism.noise_reach`.
REACH_TAIL = 1e-17
#: log of a tail mass that underflows float64 (beyond :meth:`AdditiveMechanism.noise_far`).
FAR_LOG_TAIL = -800.0
#: bisection steps of the generic loss threshold (the bracket shrinks by 2^-64).
_BISECT = 64
#: generic tilted integral: Gauss–Legendre cells × nodes in the sinh-mapped variable.
_GL_CELLS = 32
_GL_X, _GL_W = np.polynomial.legendre.leggauss(8)


def safe_log(x):
    """``log x`` for ``x >= 0`` with a finite gradient at 0 (double ``where``).

    Args:
      x: a non-negative array.

    Returns:
      ``log x``, ``−inf`` where ``x`` is 0.
    """
    pos = x > 0
    return jnp.where(pos, jnp.log(jnp.where(pos, x, 1.0)), -jnp.inf)


# A gather's (or a sort's) tangent is a gather, and its transpose builds its zeros with
# ``lax.full``, which truncates float64 to float32 when ``jax.grad`` runs the backward pass
# outside the accountant's x64 context: ``lax.scatter requires arguments to have the same
# dtypes``. A select and a sum transpose in the cotangent's own dtype, so the two helpers
# below keep their gather for the value and take the tangent as a one-hot sum: forward
# and reverse mode work in either precision. For short last axes only (the tangent costs
# one entry per index and element).
def _one_hot_take(t, idx):
    return jnp.sum(jnp.where(jnp.arange(t.shape[-1]) == idx[..., None], t[..., None, :], 0.0), -1)


@jax.custom_jvp
def take_small(arr, idx):
    """``arr[..., idx]`` along a short last axis, differentiable in either precision.

    Args:
      arr: an array with a short last axis.
      idx: batched integer indices of shape (..., m).

    Returns:
      The gathered entries, of shape ``broadcast(arr, idx)[:-1] + (m,)``.
    """
    shape = jnp.broadcast_shapes(arr.shape[:-1], idx.shape[:-1])
    return jnp.take_along_axis(
        jnp.broadcast_to(arr, shape + arr.shape[-1:]), jnp.broadcast_to(idx, shape + idx.shape[-1:]), axis=-1
    )


@take_small.defjvp
def _take_small_jvp(primals, tangents):
    arr, idx = primals
    return take_small(arr, idx), _one_hot_take(tangents[0], idx)


@jax.custom_jvp
def sort_small(x):
    """``jnp.sort(x, axis=-1)`` of a short last axis (breakpoints), differentiable in either precision.

    Args:
      x: an array with a short last axis.

    Returns:
      ``x`` sorted along its last axis.
    """
    return jnp.sort(x, axis=-1)


@sort_small.defjvp
def _sort_small_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    order = jnp.argsort(x, axis=-1)
    return take_small(x, order), _one_hot_take(t, order)


def round_up_to_default_float(x) -> jax.Array:
    """A value stored in the default float dtype, rounded towards +inf (more noise is the safe side).

    Args:
      x: a real scalar or array (converted through float64).

    Returns:
      A JAX array in the default float dtype, never below ``x``.
    """
    dt = jax.dtypes.canonicalize_dtype(jnp.float64)
    x64 = np.asarray(x, np.float64)
    y = x64.astype(dt)
    y = np.where(y.astype(np.float64) < x64, np.nextafter(y, np.asarray(np.inf, dt)), y)
    return jnp.asarray(y, dt)


def expand(tree, axes: int = 1):
    """Every leaf with trailing unit axes (parameters against a trailing grid axis).

    Args:
      tree: a pytree (e.g. a mechanism).
      axes: the number of unit axes appended.

    Returns:
      The pytree with every leaf reshaped to ``shape + (1,) * axes``.
    """
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x).reshape(jnp.shape(x) + (1,) * axes), tree)


def add_integer_noise(value, noise):
    """``value + noise`` for an integer ``value`` and integer-valued ``noise``, in ``value``'s integer dtype.

    Never through a float: a float32 sum rounds answers above 2^24 to a data-dependent lattice. A
    sum beyond the dtype's range saturates at its end, a post-processing of the exact integer output.

    Args:
      value: integer answers.
      noise: integer-valued noise (integer or float dtype).

    Returns:
      The saturated sum in ``value``'s dtype.
    """
    info = jnp.iinfo(value.dtype)
    top = np.asarray(info.max, noise.dtype)
    top = np.nextafter(top, np.asarray(0, noise.dtype)) if int(top) > info.max else top
    n = jnp.clip(noise, jnp.asarray(info.min, noise.dtype), top).astype(value.dtype)
    total = value + n
    over = (n > 0) & (total < value)
    under = (n < 0) & (total > value)
    return jnp.where(over, info.max, jnp.where(under, info.min, total)).astype(value.dtype)


class AdditiveMechanism(Mechanism):
    """``M(value) = value + N`` for a noise law N symmetric about 0: the kernel protocol.

    Per-record code multiplies by reciprocals of parameters instead of dividing by them: XLA
    rewrites ``x / broadcast(c)`` as ``x * (1/c)`` in some programs and not in others (single-
    or multi-device), and the last bit of every release must not depend on which.

    Required: ``noise_log_prob``, ``noise_log_cdf``, ``noise_icdf`` and a scale leaf (see the
    module docstring for the optional methods and what each unlocks).

    Attributes:
      scale_name: the name of the scale leaf (what ``with_scale`` replaces and tuners search over).
      log_concave: log f is concave (the pair loss is monotone in the output).
      num_shifts: the shifts a kernel that is not log-concave examines.

    Raises:
      ValueError: at construction, an empty or non-positive scale.
    """

    symmetric_pairs = True
    #: name of the scale leaf (what ``with_scale`` replaces and tuners search over).
    scale_name: ClassVar[str] = "scale"
    #: log f is concave (the pair loss is monotone in the output).
    log_concave: ClassVar[bool] = True
    #: shifts a kernel that is not log-concave examines (a grid up to Δ, or the integers 1..Δ).
    num_shifts: ClassVar[int] = 64

    @property
    def lattice_step(self):
        """The noise's lattice step.

        Returns:
          1 for integer noise (``value + N`` keeps the answer's offset from ℤ), else ``None``.
        """
        return 1.0 if self.discrete else None

    def __post_init__(self):
        scale = getattr(self, self.scale_name)
        if isinstance(scale, (list, tuple)):
            object.__setattr__(self, self.scale_name, scale := np.asarray(scale, float))
        if not is_traced(scale) and np.size(scale) == 0:
            raise ValueError(
                f"{self.scale_name} must not be empty (a batch of no mechanisms), got shape {np.shape(scale)}"
            )
        check_positive(self.scale_name, scale)

    def validate_values(self, values) -> None:
        """Refuse a scale the default float dtype cannot carry for a release.

        An accountant, in float64, takes any positive scale; a release also needs
        :func:`dpjax.validation.check_scale`.

        Args:
          values: the true answers (unused by the kernels' own check).

        Raises:
          ValueError: the scale is outside the default float dtype's bounds.
        """
        check_scale(self.scale_name, getattr(self, self.scale_name), discrete=self.discrete)

    def traced_checks(self, values):
        scale = jnp.asarray(getattr(self, self.scale_name))
        return super().traced_checks(values) + [(jnp.all(scale > 0), f"{self.scale_name} must be positive")]

    # -- required: the noise law ------------------------------------------------------
    @abc.abstractmethod
    def noise_log_prob(self, n) -> jax.Array:
        """The noise's log density (log pmf on the integers, ``−inf`` off them).

        Args:
          n: noise values (array).

        Returns:
          ``log f(n)``, broadcast with the batch.
        """

    @abc.abstractmethod
    def noise_log_cdf(self, n) -> jax.Array:
        """The noise's log CDF, accurate in the lower tail.

        Args:
          n: noise values (array).

        Returns:
          ``log Pr[N ≤ n]``, broadcast with the batch.
        """

    @abc.abstractmethod
    def noise_icdf(self, u) -> jax.Array:
        """The noise's quantile function.

        Args:
          u: probabilities in (0, 1) (array).

        Returns:
          ``F⁻¹(u)``, or the smallest integer ``k`` with ``F(k) ≥ u`` (discrete).
        """

    # -- the scale --------------------------------------------------------------------
    @property
    def noise_scale(self) -> jax.Array:
        """The scale leaf.

        Returns:
          ``getattr(self, scale_name)``.
        """
        return getattr(self, self.scale_name)

    def with_scale(self, scale, *, max_scale=None) -> "AdditiveMechanism":
        """This kernel with its scale leaf replaced by ``scale`` (which may be traced).

        ``max_scale`` (concrete): the largest scale the result will be given through
        further ``with_scale`` calls under tracing; kernels with static configuration that
        depends on the scale (a support table) size it for that. No validation (tuners call
        this inside ``jit``).

        Args:
          scale: the new scale (array, may be traced).
          max_scale: the largest scale later given under tracing (concrete), or ``None``.

        Returns:
          A kernel of the same class.
        """
        return replace(self, **{self.scale_name: scale})

    # -- derived law ------------------------------------------------------------------
    def noise_cdf(self, n) -> jax.Array:
        """The noise's CDF.

        Args:
          n: noise values (array).

        Returns:
          ``Pr[N ≤ n]``.
        """
        return jnp.exp(self.noise_log_cdf(n))

    def noise_log_sf(self, n) -> jax.Array:
        """The noise's log survival function.

        Args:
          n: noise values (array).

        Returns:
          ``log Pr[N > n]``; by symmetry ``log Pr[N < −n]``.
        """
        return self.noise_log_cdf(self.sf_argument(n))

    def sf_argument(self, n):
        """The argument ``m`` with ``Pr[N > n] = F(m)``.

        Args:
          n: noise values (array).

        Returns:
          ``−n``, or ``−⌊n⌋ − 1`` on the integers.
        """
        n = jnp.asarray(n)
        return -jnp.floor(n) - 1.0 if self.discrete else -n

    def noise_log_icdf(self, log_u) -> jax.Array:
        """The quantile at ``u = exp(log_u)`` (targets carried in log space: far lower tails).

        Args:
          log_u: log probabilities (array).

        Returns:
          ``F⁻¹(exp(log_u))``.
        """
        return self.noise_icdf(jnp.exp(log_u))

    def sample_noise(self, uniform) -> jax.Array:
        """One noise draw per record from the uniform stream: the inverse CDF of ``uniform(0)``.

        Args:
          uniform: the records' :class:`dpjax.random.UniformStream`.

        Returns:
          Noise of the stream's shape and dtype.
        """
        return jnp.asarray(self.noise_icdf(uniform(0))).astype(uniform.dtype)

    def _sample(self, uniform, value):
        noise = self.sample_noise(uniform)
        if self.discrete and jnp.issubdtype(value.dtype, jnp.integer):
            return add_integer_noise(value, noise)
        return value + noise.astype(jnp.result_type(value, noise) if self.discrete else noise.dtype)

    def log_prob(self, y, value):
        return self.noise_log_prob(jnp.asarray(y) - value)

    def cdf(self, y, value):
        return self.noise_cdf(jnp.asarray(y) - value)

    def sf(self, y, value):
        return jnp.exp(self.noise_log_sf(jnp.asarray(y) - value))

    # -- masses -----------------------------------------------------------------------
    def noise_side_masses(self, x):
        """``(P(0 < N < x), P(N > x))`` for ``x ≥ 0`` in linear space (continuous kernels).

        Default: the tail from ``noise_log_sf`` and the half-mass as ``½ − tail`` (absolute
        accuracy; a closed form keeps the half-mass relative-accurate for ``x`` ≪ scale).

        Args:
          x: non-negative offsets (array).

        Returns:
          ``(P(0 < N < x), P(N > x))``.
        """
        tail = jnp.exp(self.noise_log_sf(x))
        return jnp.maximum(0.5 - tail, 0.0), tail

    def noise_split_icdf(self, p, w, side):
        """The noise on one side of 0 whose smaller tail has mass ``p``.

        Default: ``−side·F⁻¹(p)``.

        Args:
          p: ``min(F(n), 1 − F(n))`` (array).
          w: ``F(n) − ½``, accurate where ``p`` is near ½.
          side: −1 below 0, +1 above.

        Returns:
          The noise ``n``.
        """
        return -side * self.noise_icdf(p)

    def noise_region_log_masses(self, e_lo, e_hi):
        """Log noise masses below, inside and above a region.

        ``(log P_lo, log P_in, log P_hi)``: noise mass below, inside and above the region
        ``[e_lo, e_hi]`` in noise coordinates (for integer noise, ``e_lo``/``e_hi`` are the last
        integers below / inside it).

        ``P_lo = F(e_lo)``, ``P_hi = Pr[N > e_hi]`` in log space; ``P_in`` as a difference of
        the smaller tails (no ``1 − F`` cancellation), and for a continuous kernel an
        interval around 0 as two half-masses (:meth:`noise_side_masses`: no cancellation at
        ½ even when the interval is tiny against the scale). One fused log-CDF call; finite
        gradients, also for an empty region.

        Args:
          e_lo: the region's lower end in noise coordinates (array).
          e_hi: its upper end.

        Returns:
          ``(log P_lo, log P_in, log P_hi)``.
        """
        log_lo, log_hi, log_f_hi, log_sf_lo = self._log_cdf_stack(
            e_lo, self.sf_argument(e_hi), e_hi, self.sf_argument(e_lo)
        )
        left = jnp.exp(log_f_hi) - jnp.exp(log_lo)  # accurate when the interval's centre is <= 0
        right = jnp.exp(log_sf_lo) - jnp.exp(log_hi)  # accurate when it is > 0
        p_in = jnp.where(e_lo + e_hi <= 0, left, right)
        if not self.discrete:
            shape = jnp.broadcast_shapes(jnp.shape(self.noise_scale), jnp.shape(e_lo), jnp.shape(e_hi))
            halves = self.noise_side_masses(
                jnp.stack(
                    [jnp.broadcast_to(jnp.maximum(e_hi, 0.0), shape), jnp.broadcast_to(jnp.maximum(-e_lo, 0.0), shape)]
                )
            )[0]
            p_in = jnp.where((e_lo < 0) & (e_hi > 0), halves[0] + halves[1], p_in)
        p_in = jnp.where(e_hi > e_lo, jnp.maximum(p_in, 0.0), 0.0)
        return log_lo, safe_log(p_in), log_hi

    def log_interval_masses(self, lo, hi, centres):
        """``log Pr[lo < c + N ≤ hi]`` for each centre ``c`` of ``centres``, from one fused log-CDF call.

        The interval is reflected (N is symmetric) so that its centre is ≤ 0, where
        ``F(b) − F(a)`` has no cancellation. Empty intervals give ``−inf`` with a zero
        (not NaN) gradient.

        Args:
          lo: the intervals' lower ends (array).
          hi: their upper ends.
          centres: a sequence of centres ``c``.

        Returns:
          A list with one array of log masses per centre.
        """
        ends, oks = [], []
        for centre in centres:
            a, b = lo - centre, hi - centre
            one = 0.0
            if self.discrete:
                a, b, one = jnp.floor(a), jnp.floor(b), 1.0
            b = jnp.maximum(a, b)
            flip = a + b > 0
            a, b = jnp.where(flip, -b - one, a), jnp.where(flip, -a - one, b)
            ok = b > a
            ends += [jnp.where(ok, a, b - 1.0), b]
            oks.append(ok)
        logs = self._log_cdf_stack(*ends)
        out = []
        for i, ok in enumerate(oks):
            la, lb = logs[2 * i], logs[2 * i + 1]
            good = ok & (lb > -jnp.inf) & (la < lb)
            la_s, lb_s = jnp.where(good, la, -1.0), jnp.where(good, lb, 0.0)
            out.append(jnp.where(good, lb_s + jnp.log1p(-jnp.exp(la_s - lb_s)), -jnp.inf))
        return out

    def _log_cdf_stack(self, *ns):
        """``noise_log_cdf`` at several arrays in one stacked call (compile time and cost grow with
        the number of special-function calls, not with their size)."""
        shape = jnp.broadcast_shapes(jnp.shape(self.noise_scale), *[jnp.shape(n) for n in ns])
        out = self.noise_log_cdf(jnp.stack([jnp.broadcast_to(n, shape) for n in ns]))
        return tuple(out[i] for i in range(len(ns)))

    # -- extent -----------------------------------------------------------------------
    def _doubled_scale(self, log_tail):
        """Smallest ``scale·2^k`` (k < 64) beyond which one tail holds ``exp(log_tail)`` or less."""
        me = expand(self)
        s = jnp.asarray(me.noise_scale)
        x = s * 2.0 ** jnp.arange(64, dtype=jnp.result_type(s, float))
        ok = me.noise_log_cdf(-x) <= log_tail
        k = jnp.argmax(ok, axis=-1)
        found = jnp.any(ok, axis=-1)
        return jnp.where(found, jnp.asarray(self.noise_scale) * 2.0 ** k.astype(x.dtype), jnp.inf)

    def noise_reach(self) -> jax.Array:
        """A distance beyond which the two tails hold < 1e-17 of mass (pair grids stop there).

        Returns:
          The reach, of the kernel's batch shape.
        """
        r = self._doubled_scale(math.log(REACH_TAIL / 2))
        return r + 1.0 if self.discrete else r

    def noise_far(self) -> jax.Array:
        """A distance beyond which the tail mass underflows float64.

        Finite edges there act as ±∞ edges with finite gradients (the outer pieces of the boosted
        closed forms).

        Returns:
          The distance, of the kernel's batch shape.
        """
        return self._doubled_scale(FAR_LOG_TAIL)

    def noise_kinks(self) -> jax.Array:
        """Noise offsets between which the pair losses are monotone and the log density has no kink.

        The Laplace kernels' 0, a mixture's breakpoints. Default: none.

        Returns:
          An array ``batch + (K,)``, static K.
        """
        return jnp.zeros(jnp.shape(self.noise_scale) + (0,))

    # -- pair loss and tilted integrals -------------------------------------------------
    def noise_pair_loss(self, y, v, nv):
        """The kernel's privacy loss of an output between two answers.

        Args:
          y: outputs (array).
          v: the answer(s).
          nv: the neighbouring answer(s).

        Returns:
          ``log f(y − v) − log f(y − nv)``.
        """
        y = jnp.asarray(y)
        return self.noise_log_prob(y - v) - self.noise_log_prob(y - nv)

    def noise_loss_threshold(self, t, v, nv, lo, hi, decreasing):
        """Where the pair loss crosses a threshold on a piece where it is monotone.

        ``y*`` in ``[lo, hi]`` where the pair loss ℓ (monotone on ``[lo, hi]``) crosses ``t``:
        ``{y ∈ [lo, hi] : ℓ(y) > t}`` is ``[lo, y*)`` where ℓ decreases (``decreasing``; for a
        log-concave kernel, ``v < nv``) and ``(y*, hi]`` where it increases.

        On the integers (discrete kernels) ``y*`` is the half-integer between the last integer
        inside the set and the first outside. Default: bisection (64 halvings, or over the
        integers); a closed form (Gaussian and Laplace kernels) replaces it. Arguments broadcast.

        Args:
          t: the loss threshold.
          v: the answer.
          nv: the neighbouring answer.
          lo: the piece's lower end.
          hi: its upper end.
          decreasing: whether the loss decreases on the piece.

        Returns:
          ``y*``, of the broadcast shape.
        """
        shape = jnp.broadcast_shapes(
            *[jnp.shape(x) for x in (t, v, nv, lo, hi, decreasing)], jnp.shape(self.noise_scale)
        )
        t, v, nv, lo, hi, dec = (jnp.broadcast_to(x, shape) for x in (t, v, nv, lo, hi, decreasing))
        me = jax.tree_util.tree_map(lambda p: jnp.broadcast_to(p, shape), self)
        if self.discrete:
            lo, hi = jnp.ceil(lo), jnp.floor(hi)

        def inside(y):  # y in the set {ℓ > t}: left of y* (decreasing) or right of it
            return me.noise_pair_loss(y, v, nv) > t

        # invariant: ``a`` on the set's side (or its end), ``b`` on the other side
        a = jnp.where(dec, lo, hi)
        b = jnp.where(dec, hi, lo)
        all_in, none_in = inside(b), ~inside(a)  # the far end in the set / the near end out of it

        def body(_, s):
            a, b = s
            mid = 0.5 * (a + b)
            if self.discrete:
                mid = jnp.where(dec, jnp.floor(mid), jnp.ceil(mid))
            ok = inside(mid)
            return jnp.where(ok, mid, a), jnp.where(ok, b, mid)

        a, b = jax.lax.fori_loop(0, _BISECT, body, (a, b))
        if self.discrete:
            half = jnp.where(dec, 0.5, -0.5)
            edge_in = jnp.where(dec, hi, lo) + half
            edge_out = jnp.where(dec, lo, hi) - half
            return jnp.where(all_in, edge_in, jnp.where(none_in, edge_out, a + half))
        return jnp.where(all_in, jnp.where(dec, hi, lo), jnp.where(none_in, jnp.where(dec, lo, hi), 0.5 * (a + b)))

    def noise_tilted_log_integral(self, lo, hi, v, nv, alpha):
        """The log of the Rényi divergence's tilted integral over one piece.

        ``log ∫_(lo, hi] f(y − v)^α f(y − nv)^{1−α} dy`` (α > 1), the Rényi divergence's
        integral over one piece on which the log density has no kink.

        Default (continuous kernels): Gauss–Legendre quadrature, 32 cells × 8 nodes, in the
        variable ``z`` of ``y = m + s·sinh(z)`` around the tilted centre ``m = αv + (1−α)nv``
        (``s`` the scale), which resolves the centre and compresses the tails. Numerical,
        not a bound; discrete kernels must define it (a sum over their support).

        Args:
          lo: the piece's lower end.
          hi: its upper end.
          v: the answer.
          nv: the neighbouring answer.
          alpha: the order α > 1.

        Returns:
          The log integral (``−inf`` for an empty piece).

        Raises:
          NotImplementedError: a discrete kernel that does not define it.
        """
        if self.discrete:
            raise NotImplementedError(f"{type(self).__name__} (discrete) must define noise_tilted_log_integral")
        v, nv, alpha = jnp.asarray(v), jnp.asarray(nv), jnp.asarray(alpha)
        m = alpha * v + (1.0 - alpha) * nv
        s = jnp.asarray(self.noise_scale)
        za, zb = jnp.arcsinh((lo - m) / s), jnp.arcsinh((hi - m) / s)
        cells = jnp.arange(_GL_CELLS, dtype=jnp.result_type(za, float))
        width = (zb - za)[..., None] / _GL_CELLS
        starts = za[..., None] + width * cells  # (..., C)
        x = jnp.asarray(_GL_X, width.dtype)
        z = (starts[..., None] + width[..., None] * (x + 1.0) / 2.0).reshape(starts.shape[:-1] + (-1,))
        wts = jnp.broadcast_to(
            width[..., None] / 2.0 * jnp.asarray(_GL_W, width.dtype), starts.shape + (_GL_X.size,)
        ).reshape(z.shape)
        y = m[..., None] + s[..., None] * jnp.sinh(z)
        me = expand(self)
        lv = me.noise_log_prob(y - v[..., None])
        lnv = me.noise_log_prob(y - nv[..., None])
        a = alpha[..., None]
        integrand = jnp.where(jnp.isneginf(lv), -jnp.inf, a * lv + (1.0 - a) * lnv)
        log_w = safe_log(wts * s[..., None] * jnp.cosh(z))
        out = jax.nn.logsumexp(integrand + log_w, axis=-1)
        return jnp.where(hi > lo, out, -jnp.inf)

    # -- accounting -------------------------------------------------------------------
    def neighbour_pairs(self, sensitivity=1.0):
        """The neighbouring pairs the accountant examines.

        ``(0, Δ)`` for a log-concave kernel (the worst shift); otherwise every shift up to Δ:
        ``num_shifts`` pairs ``(0, d)``, ``d = Δ·k/num_shifts`` (a path, ``pair_path``, when
        the kernel has a closed-form ``hockey_stick``), or on the integers ``d = 1 … Δ``.

        Args:
          sensitivity: Δ (positive).

        Returns:
          ``(values, neighbour_values)``.

        Raises:
          ValueError: ``sensitivity`` not positive; a discrete kernel's Δ above ``num_shifts``.
        """
        if not is_traced(sensitivity):
            check_positive("sensitivity", sensitivity)
        s = jnp.asarray(sensitivity)
        dt = s.dtype if jnp.issubdtype(s.dtype, jnp.floating) else jnp.result_type(float)
        s = s.astype(dt)
        if self.log_concave:
            return jnp.zeros((1,), dt), jnp.reshape(s, (1,))
        k = jnp.arange(1, self.num_shifts + 1, dtype=dt)
        if self.discrete:
            if not is_traced(sensitivity) and float(np.max(np.asarray(sensitivity))) > self.num_shifts:
                raise ValueError(
                    f"sensitivity: {type(self).__name__} examines the integer shifts 1..Δ, at most "
                    f"num_shifts={self.num_shifts}, got Δ={float(np.max(np.asarray(sensitivity))):g}"
                )
            shifts = jnp.minimum(k, jnp.ceil(s)[..., None])
        else:
            shifts = s[..., None] * k / self.num_shifts
        return jnp.zeros_like(shifts), shifts

    @property
    def pair_path(self) -> bool:
        """Whether the shifts sample the path (0, d), d ∈ (0, Δ].

        Returns:
          True for a continuous kernel that is not log-concave with a closed-form ``hockey_stick``
          (which lets the accountant bound the supremum between the shifts).
        """
        return (not self.log_concave) and (not self.discrete) and self.hockey_stick is not None
