"""Input validation, run on concrete values outside ``jit``.

Public: the validators of every mechanism.

Every public constructor and entry point calls these helpers before any traced
computation starts, so that invalid input raises a ``ValueError`` that names the
parameter and its allowed range instead of producing a silent, wrong release.
Traced values (inside ``jit``/``grad``/``vmap``) cannot be inspected and are let
through: they were validated where they were created. So are global arrays with shards on
other processes: :mod:`dpjax.multihost` validates each process's shards where they are used.
"""

from __future__ import annotations

import numbers

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "is_traced",
    "is_global",
    "check_real",
    "check_positive",
    "check_probability",
    "check_int",
    "check_finite_values",
    "check_index_values",
    "check_scale",
    "check_categories",
    "release_dtype",
]


def is_traced(x) -> bool:
    """Whether a value is (or contains) a JAX tracer whose value is unknown.

    Args:
      x: any value or pytree.

    Returns:
      True when a leaf of ``x`` is a tracer.
    """
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(x))


def is_global(x) -> bool:
    """Whether a value holds a global array with shards on other processes.

    Args:
      x: any value or pytree.

    Returns:
      True when ``x`` (or a leaf of the pytree ``x``) is a concrete ``jax.Array`` not fully addressable here.
    """
    return any(
        isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer) and not leaf.is_fully_addressable
        for leaf in jax.tree_util.tree_leaves(x)
    )


def _deferred(x) -> bool:
    """``x`` cannot be inspected here: traced, or a global array with shards on other processes (then
    :mod:`dpjax.multihost` validates every process's shards where the array is used, and the processes
    agree on the verdict)."""
    return is_traced(x) or is_global(x)


def concrete(x):
    """The concrete numpy value of ``x`` (also of a tracer under plain ``jax.grad``), or ``None``.

    Static grid sizes are derived from concrete parameter values; under ``jit`` they
    are unknown and the caller must pass them explicitly.

    Args:
      x: a value or pytree.

    Returns:
      A numpy array (or the pytree of them), or ``None`` where a leaf's value is unknown.
    """
    leaves = jax.tree_util.tree_leaves(x)
    out = []
    for leaf in leaves:
        if not is_traced(leaf):
            out.append(np.asarray(leaf))
            continue
        try:  # LinearizeTracer / JVPTracer carry a concrete primal under eager grad
            from jax._src import core as _core

            val = _core.to_concrete_value(leaf)
        except Exception:  # pragma: no cover - private API moved
            val = None
        if val is None:
            return None
        out.append(np.asarray(val))
    if (
        not isinstance(x, (list, tuple))
        and len(out) == 1
        and len(leaves) == 1
        and not hasattr(x, "__dataclass_fields__")
    ):
        return out[0]
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(x), out)


def _as_array(name: str, x) -> np.ndarray:
    if isinstance(x, (str, bytes)) or x is None:
        raise ValueError(f"{name} must be a real number or array of real numbers, got {x!r}")
    try:
        arr = np.asarray(x)
    except Exception as exc:  # pragma: no cover - numpy raises many types
        raise ValueError(f"{name} must be a real number or array, got {type(x).__name__}") from exc
    if arr.dtype == bool or not (jnp.issubdtype(arr.dtype, jnp.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"{name} must have a real numeric dtype, got dtype {arr.dtype}")
    return arr


def check_real(name: str, x, *, finite: bool = True):
    """Validate a real scalar or array. Traced and global values pass unchecked.

    Args:
      name: the parameter's name, for the error message.
      x: the value.
      finite: also refuse ±inf.

    Returns:
      ``x`` unchanged.

    Raises:
      ValueError: ``x`` is a string, bytes, ``None``, not numeric, boolean, NaN, or (``finite``)
        infinite.
    """
    if _deferred(x):
        return x
    arr = _as_array(name, x)
    if np.isnan(arr).any():
        raise ValueError(f"{name} must not be NaN, got {x!r}")
    if finite and not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite, got {x!r}")
    return x


def check_positive(name: str, x, *, allow_inf: bool = False, allow_zero: bool = False):
    """Validate ``x > 0`` (or ``>= 0``) elementwise. Traced and global values pass unchecked.

    Args:
      name: the parameter's name, for the error message.
      x: the value (scalar or array).
      allow_inf: accept +inf.
      allow_zero: accept 0.

    Returns:
      ``x`` unchanged.

    Raises:
      ValueError: as :func:`check_real`, or an entry out of range.
    """
    if _deferred(x):
        return x
    check_real(name, x, finite=not allow_inf)
    arr = np.asarray(x)
    bad = arr < 0 if allow_zero else arr <= 0
    if bad.any():
        rng = "[0, inf)" if allow_zero else "(0, inf)"
        raise ValueError(f"{name} must lie in {rng}, got {x!r}")
    return x


def check_probability(name: str, x, *, low_open: bool = True, high_open: bool = False):
    """Validate that ``x`` lies in the unit interval, ends open or closed as asked.

    Traced and global values pass unchecked.

    Args:
      name: the parameter's name, for the error message.
      x: the value (scalar or array).
      low_open: refuse 0.
      high_open: refuse 1.

    Returns:
      ``x`` unchanged.

    Raises:
      ValueError: as :func:`check_real`, or an entry out of the interval.
    """
    if _deferred(x):
        return x
    check_real(name, x)
    arr = np.asarray(x)
    lo_bad = arr <= 0 if low_open else arr < 0
    hi_bad = arr >= 1 if high_open else arr > 1
    if lo_bad.any() or hi_bad.any():
        rng = ("(" if low_open else "[") + "0, 1" + (")" if high_open else "]")
        raise ValueError(f"{name} must lie in {rng}, got {x!r}")
    return x


def check_int(name: str, x, *, minimum: int | None = None) -> int:
    """Validate a Python integer (static configuration) with an optional lower bound.

    Args:
      name: the parameter's name, for the error message.
      x: the value (an int or numpy integer; not a bool).
      minimum: the least value allowed, or ``None``.

    Returns:
      ``x`` as a Python int.

    Raises:
      ValueError: ``x`` not an integer, or below ``minimum``.
    """
    if isinstance(x, bool) or not isinstance(x, (numbers.Integral, np.integer)):
        raise ValueError(f"{name} must be an integer, got {x!r}")
    x = int(x)
    if minimum is not None and x < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {x}")
    return x


def check_finite_values(name: str, values) -> None:
    """Refuse empty, NaN or infinite data before it is released.

    Traced and global values pass unchecked.

    Args:
      name: the parameter's name, for the error message.
      values: the data.

    Raises:
      ValueError: ``values`` not real numbers, empty, or with a NaN or infinite entry.
    """
    if _deferred(values):
        return
    arr = _as_array(name, values)
    if arr.size == 0:
        raise ValueError(f"{name} is empty: there is nothing to release")
    if not np.isfinite(arr).all():
        n_bad = int((~np.isfinite(arr)).sum())
        raise ValueError(
            f"{name} contains {n_bad} NaN or infinite entries; a release of non-finite values is refused "
            "(clean or clip the data first)"
        )


def check_index_values(name: str, values, size: int, size_name: str) -> None:
    """Refuse values that are not integer indices in ``[0, size)``. Skipped under tracing.

    Args:
      name: the parameter's name, for the error message.
      values: the data.
      size: the number of indices.
      size_name: the mechanism's parameter that ``size`` is, for the error message.

    Raises:
      ValueError: a non-integer value, or one outside ``[0, size)``.
    """
    if _deferred(values):
        return
    arr = np.asarray(values)
    if not (np.issubdtype(arr.dtype, np.integer) or np.all(np.round(arr) == arr)):
        raise ValueError(f"{name} must be integer indices in [0, {size_name}) = [0, {size})")
    if arr.size and (arr.min() < 0 or arr.max() >= size):
        raise ValueError(f"{name} must lie in [0, {size - 1}] ({size_name}={size})")


def _default_float():
    return np.dtype(jax.dtypes.canonicalize_dtype(np.float64))


def check_scale(name: str, x, *, discrete: bool = False):
    """Validate a noise scale the default float dtype can carry.

    Positive, finite, above 2^-20 (discrete) or the dtype's smallest normal × 2^24 (continuous: a
    scale that small stores as zero or releases the raw value), and below 2^(mantissa − 1)
    (discrete: integer noise must stay exact in the float the sampler draws it in) or the dtype's
    largest value / 2^16 (continuous: the noise would overflow to ±inf).

    Args:
      name: the parameter's name, for the error message.
      x: the scale (scalar or array).
      discrete: the bounds of an integer kernel.

    Returns:
      ``x`` unchanged.

    Raises:
      ValueError: ``x`` not positive and finite, or outside the dtype's bounds.
    """
    check_positive(name, x)
    if _deferred(x):
        return x
    fi = np.finfo(_default_float())
    lo, hi = (2.0**-20, 2.0 ** (fi.nmant - 1)) if discrete else (float(fi.tiny) * 2.0**24, float(fi.max) * 2.0**-16)
    arr = np.asarray(x, np.float64)
    if (arr < lo).any() or (arr > hi).any():
        mode = "" if fi.bits == 64 else " (JAX runs in 32-bit mode; jax.enable_x64 widens it)"
        raise ValueError(
            f"{name} must lie in [{lo:.3g}, {hi:.3g}] for a {'discrete' if discrete else 'continuous'} "
            f"kernel in {fi.dtype}{mode}, got {x!r}"
        )
    return x


def _half(dtype) -> bool:
    """float16 or bfloat16: released as float32."""
    return jnp.issubdtype(dtype, jnp.floating) and jnp.dtype(dtype).itemsize < 4


def release_dtype(name: str, values):
    """The data as an array JAX can release exactly.

    float16/bfloat16 are widened to float32 (exact); 64-bit integers in 32-bit mode are narrowed
    to int32 only where every value fits; float64 data in 32-bit mode is rounded to float32 with a
    warning naming the largest change.

    Args:
      name: the parameter's name, for the error message.
      values: the data.

    Returns:
      The data as a numpy or JAX array of a dtype JAX releases.

    Raises:
      ValueError: 64-bit integers that do not fit int32 in 32-bit mode.
    """
    if is_traced(values) or isinstance(values, jax.Array):
        # widened here too (a JAX float16 array, traced or not, would otherwise come back float16)
        return values.astype(jnp.float32) if _half(values.dtype) else values
    arr = np.asarray(values)
    if _half(arr.dtype):
        return arr.astype(np.float32)
    x64 = _default_float().itemsize == 8
    if not x64 and arr.dtype.kind in "iu" and (arr.dtype.itemsize == 8 or arr.dtype == np.uint32):
        info = np.iinfo(np.int32)
        if arr.size and (arr.min() < info.min or arr.max() > info.max):
            raise ValueError(
                f"{name}: {arr.dtype} values up to {np.abs(arr).max()} do not fit int32, JAX's integer "
                "in 32-bit mode; release them inside jax.enable_x64(True)"
            )
        return arr.astype(np.int32)
    if arr.dtype == np.float64 and not x64:
        import warnings

        narrowed = arr.astype(np.float32)
        err = float(np.max(np.abs(narrowed.astype(np.float64) - arr))) if arr.size else 0.0
        if err > 0.0:
            warnings.warn(
                f"{name}: float64 values rounded to float32 (JAX runs in 32-bit mode; largest change "
                f"{err:.3g}); release inside jax.enable_x64(True) to keep them",
                stacklevel=3,
            )
        return narrowed
    return arr


def check_categories(num_categories: int, name: str = "num_categories") -> int:
    """Validate a category count the uniform stream can address.

    At most 2^23 + 1 in 32-bit mode (a float32 uniform carries 23 random bits; beyond, half the
    categories could never be reported), 2^52 + 1 under x64.

    Args:
      num_categories: the count.
      name: the parameter's name, for the error message.

    Returns:
      ``num_categories`` unchanged.

    Raises:
      ValueError: more categories than the stream's resolution.
    """
    limit = 2 ** np.finfo(_default_float()).nmant + 1
    if num_categories > limit:
        raise ValueError(
            f"{name} must be at most {limit} in {_default_float()} (the uniform stream's "
            f"resolution; jax.enable_x64 raises it to 2**52 + 1), got {num_categories}"
        )
    return num_categories
