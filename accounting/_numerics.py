"""Small numerical helpers shared by the accounting modules (float64, concrete values, roots)."""

from __future__ import annotations

import contextlib
import math
import threading

import jax
import jax.numpy as jnp
import numpy as np

from dpjax._float64 import x64  # noqa: F401 (the accounting modules import it from here)
from dpjax.validation import concrete  # noqa: F401 (the accounting modules import it from here)

EPS64 = 2.0**-52


def as64(x):
    """``x`` as a float64 JAX array; a concrete value converted on the host (``jnp.asarray`` of a Python or
    numpy scalar compiles a conversion program), a traced one as it is (its dtype kept for its gradient)."""
    if isinstance(x, jax.core.Tracer):
        return jnp.asarray(x)
    return jnp.asarray(np.asarray(x, np.float64), jnp.float64)


_HOST_LEAVES = threading.local()


@contextlib.contextmanager
def host_leaves():
    """Inside the block, concrete PLDs built, composed and read on the host keep float64 numpy leaves
    (:func:`leaf64`): no transfer per leaf, which every host operation reads back. Only for PLDs that stay
    with the caller and are read under float64 (every accounting entry point is): ``jit`` outside
    ``jax.enable_x64`` would read numpy float64 leaves as float32 (:func:`jax_leaves` converts them back)."""
    prev = getattr(_HOST_LEAVES, "on", False)
    _HOST_LEAVES.on = True
    try:
        yield
    finally:
        _HOST_LEAVES.on = prev


def leaf64(x):
    """A concrete float64 leaf of a PLD built on the host: :func:`as64`, or a numpy array inside
    :func:`host_leaves`."""
    if getattr(_HOST_LEAVES, "on", False) and not isinstance(x, jax.core.Tracer):
        return np.asarray(x, np.float64)
    return as64(x)


def jax_leaves(tree):
    """``tree`` with its float64 numpy leaves (:func:`host_leaves`) as float64 JAX arrays."""
    with jax.enable_x64(True):
        return jax.tree_util.tree_map(
            lambda x: as64(x) if isinstance(x, np.ndarray) and x.dtype == np.float64 else x, tree
        )


def to64(tree):
    """Cast every numeric leaf of a pytree (a mechanism, an array) to float64."""

    def cast(x):
        if not isinstance(x, jax.core.Tracer):  # a concrete leaf converted on the host (nothing compiled)
            a = np.asarray(x)
            if np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer):
                return jnp.asarray(a.astype(np.float64), jnp.float64)
            return jnp.asarray(a, a.dtype)
        x = jnp.asarray(x)
        if jnp.issubdtype(x.dtype, jnp.floating) or jnp.issubdtype(x.dtype, jnp.integer):
            return x.astype(jnp.float64)
        return x

    return jax.tree_util.tree_map(cast, tree)


def next_fast_len(n: int) -> int:
    """Smallest 5-smooth integer >= n (a fast FFT length)."""
    n = max(int(n), 1)
    best = 1 << (n - 1).bit_length()
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            m = p35
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return best


def bucket_len(n: int) -> int:
    """Smallest length >= n of the form {8, 10, 12, 15}·2^j (5-smooth: a fast FFT length).

    Static grid and FFT lengths are rounded up to this ladder (at most 25 % larger) so
    that different parameters share compiled programs instead of recompiling per size.
    """
    n = max(int(n), 1)
    if n <= 8:
        return 8
    j = max(0, (n - 1).bit_length() - 4)
    while True:
        for m in (8, 10, 12, 15):
            if m << j >= n:
                return m << j
        j += 1


def pow2_floor(x: float) -> float:
    """Largest power of two <= x (grid steps are powers of two: exact loss/step ratios)."""
    return 2.0 ** math.floor(math.log2(x) + 1e-12)


def safe_log(x, xp=jnp):
    """log(x) with a zero gradient (instead of NaN) where x <= 0 (−∞ there); ``xp=numpy`` on the host."""
    pos = x > 0
    return xp.where(pos, xp.log(xp.where(pos, x, 1.0)), -np.inf)


def searchsorted_right(sorted_arr, x):
    """``searchsorted(sorted_arr, x, side='right')`` over matching leading (batch) axes."""
    return jnp.vectorize(lambda a, v: jnp.searchsorted(a, v, side="right"), signature="(n),(m)->(m)")(sorted_arr, x)


def take_last(arr, idx):
    """``arr[..., idx]`` with batched ``idx`` of shape (..., m)."""
    shape = jnp.broadcast_shapes(arr.shape[:-1], idx.shape[:-1])
    arr = jnp.broadcast_to(arr, shape + arr.shape[-1:])
    idx = jnp.broadcast_to(idx, shape + idx.shape[-1:])
    return jnp.take_along_axis(arr, idx, axis=-1)


def x64_vjp(fn):
    """Make ``fn`` (a pure function of pytrees of arrays) reverse-differentiable in float64
    even when the caller's ``jax.grad`` runs its backward pass outside our x64 context.

    A ``custom_vjp`` whose forward and backward both run inside ``jax.enable_x64(True)``:
    the backward recomputes the VJP there, and cotangents are cast back to the dtypes of
    the (possibly float32) inputs. Forward-mode (``jax.jvp``) is not supported.
    """

    def run(*args):
        with jax.enable_x64(True):
            return fn(*args)

    @jax.custom_vjp
    def f(*args):
        return run(*args)

    def fwd(*args):
        return run(*args), args

    def bwd(args, ct):
        with jax.enable_x64(True):
            ct = jax.tree_util.tree_map(lambda c: jnp.asarray(c, jnp.float64), ct)
            _, vjp = jax.vjp(fn, *args)
            grads = vjp(ct)
            return jax.tree_util.tree_map(lambda g, a: jnp.asarray(g).astype(jnp.result_type(a)), grads, args)

    f.defvjp(fwd, bwd)
    return f
