"""Fused, memory-bounded batch queries: ``get_epsilon`` / ``get_delta`` over a batch of mechanisms.

Concrete parameters: up to four mechanisms run as three compiled calls (plan; build +
Chernoff windows; compose + query), the same numbers as ``pld(...).self_compose(T).get_*``
without its autodiff wrappers. Larger batches are bucketed by (power-of-two) grid length,
each bucket built once per member and mapped in chunks (``lax.map``), so memory stays
bounded whatever the batch size. Traced parameters fall back to :func:`accounting.pld`.
"""

from __future__ import annotations

import functools
import math
import sys

import jax
import jax.numpy as jnp
import numpy as np

from accounting.privacy_loss import grid as _grid
from accounting.privacy_loss.construction import (
    AUTO_WINDOW,
    COARSE_BATCH,
    DEFAULT_OUTPUT_CELLS,
    DEFAULT_TAIL_MASS,
    MAX_GRID,
    ROUNDOFF_FACTOR,
    auto_step,
    build_core,
    loss_scale,
    make_plan,
    mirror_extension,
    next_pow2,
    pairs,
    row_bounds,
    sampling_rate,
    validate,
)
from accounting._numerics import bucket_len, concrete, pow2_floor, to64, x64
from accounting.privacy_loss.construction import concrete_mu
from accounting.privacy_loss.distribution import beyond_grid, check_floor, pld
from accounting.privacy_loss.profiles import discrete_plan, envelope, expand
from accounting.privacy_loss.route import capped_by_pure, pure_cap, route
from dpjax import multihost
from dpjax.mechanism import Mechanism
from dpjax.validation import check_int, check_positive, check_probability, check_real, is_traced

__all__ = ["get_epsilon", "get_delta"]

#: batches up to this size are built whole (vectorised); larger ones are mapped in chunks.
_SMALL_BATCH = 4


def _element_plans(flat, sens, sampling_prob, step, cells, extra):
    """Per-mechanism grid steps and (k0, n, ng) arrays of each direction, from a coarse envelope mapped
    in chunks. ``step`` None: each member's own adaptive step, by the rule of ``make_plan``
    (:func:`auto_step` of its loss range and scale)."""
    count = int(extra.get("count", 0))
    klo = extra.get("klo")
    rem, add = _coarse_map_jit(flat, sens, sampling_prob, klo, jnp.asarray(COARSE_BATCH), cells, count)
    rem = np.asarray(rem)
    add = None if add is None else np.asarray(add)
    other = {0: rem if add is None else add, 1: rem}
    live = [(i, d) for i, d in enumerate((rem, add)) if d is not None]
    bounds = {i: row_bounds(d, other[i][..., ::-1], COARSE_BATCH) for i, d in live}
    if step is None:
        width = np.max([hi - lo for lo, hi in bounds.values()], axis=0)
        scale = np.min([loss_scale(d, COARSE_BATCH) for _, d in live], axis=0)
        steps = np.asarray([auto_step(float(w), float(x)) for w, x in zip(width, scale)])
    else:
        steps = np.full(rem.shape[0], pow2_floor(float(step)))
    out = [None, None]
    for i, d in live:
        lo, hi = bounds[i]
        k0 = np.floor(lo / steps)
        n = np.maximum(np.ceil(hi / steps) - k0 + 1, 3)
        small = d < 0.25
        big = np.where(small.any(axis=1), COARSE_BATCH[np.argmax(small, axis=1)], hi)
        ng = np.minimum(n, np.maximum(3, np.ceil(big / steps) - k0 + 2))
        if np.max(n) > MAX_GRID:
            raise ValueError(
                f"value_discretization_interval: a loss range needs {int(np.max(n))} grid points at step "
                f"{steps[np.argmax(n)]:.3g}; use a coarser value_discretization_interval (or a less extreme mechanism)"
            )
        out[i] = (k0, n.astype(np.int64), ng.astype(np.int64))
    return out, steps


@functools.partial(jax.jit, static_argnums=(5, 6))
def _coarse_map_jit(flat, sens, sampling_prob, klo, coarse, cells, count):
    def one(m):
        values, nvalues = pairs(m, sens)
        extra = {"cells": cells}
        if count:
            extra.update(count=count, klo=klo)
        return envelope(
            expand(m),
            values,
            nvalues,
            sampling_prob,
            coarse,
            None if sampling_prob is None else coarse,
            pessimistic=True,
            plan=extra,
        )

    return jax.lax.map(one, flat, batch_size=32)


def _groups(dirs, steps, cells, count, nklo):
    """Bucket the batch by grid step and (power-of-two) remove-grid length: {shape: indices}. One
    compile per bucket, no mechanism's remove grid padded beyond twice its own length."""
    rem, add = dirs
    keys = [(float(steps[i]), next_pow2(rem[1][i])) for i in range(rem[1].size)]  # the add grid follows
    out = {}
    for step, nr in sorted(set(keys)):
        idx = np.asarray([i for i, k in enumerate(keys) if k == (step, nr)])
        shp_r = (nr, int(min(nr, bucket_len(np.max(rem[2][idx])))))
        shp_a = None
        if add is not None:
            na = next_pow2(np.max(add[1][idx]))
            shp_a = (na, int(min(na, bucket_len(np.max(add[2][idx])))))
        k0r = rem[0][idx]
        mir = (
            (mirror_extension(k0r, shp_r[0], k0r, shp_r[1]), None)
            if add is None
            else (
                mirror_extension(k0r, shp_r[0], add[0][idx], shp_a[1]),
                mirror_extension(add[0][idx], shp_a[0], k0r, shp_r[1]),
            )
        )
        out[(step, shp_r, shp_a, cells, count, nklo, mir)] = idx
    return out


def _chunk_for(n):
    return max(1, min(16, (1 << 20) // max(int(n), 1)))


@functools.partial(jax.jit, static_argnums=(6, 7, 8, 9))
def _window_map_jit(flat, sens, sampling_prob, k0r, k0a, klo, shape, pessimistic, count, tail):
    def one(x):
        m, a, b = x
        rem, add = build_core(m, sens, sampling_prob, (a, b, klo), shape, pessimistic)
        return tuple(
            hi - lo + 1.0 for lo, hi, _ in (_grid.chernoff_window(p, count, tail) for p in (rem, add) if p is not None)
        )

    return jax.lax.map(one, (flat, k0r, k0a), batch_size=_chunk_for(max(shape[1][0], (shape[2] or (0,))[0])))


@functools.partial(jax.jit, static_argnums=(6, 7, 8, 9, 10, 11))
def _query_map_jit(flat, sens, sampling_prob, k0r, k0a, klo, shape, pessimistic, count, sizes, tail, kind, arg):
    def one(x):
        m, a, b = x
        rem, add = build_core(m, sens, sampling_prob, (a, b, klo), shape, pessimistic)
        outs, ok = [], jnp.asarray(True)
        for i, pmf in enumerate(p for p in (rem, add) if p is not None):
            if count > 1:
                pmf, width = _grid.self_compose(pmf, count, sizes[i], tail, pessimistic, with_width=True)
                ok = ok & (width <= sizes[i])
            outs.append(_answer(pmf, kind, arg, pessimistic))
        return functools.reduce(jnp.maximum, outs), ok

    n = max(sizes) if count > 1 else max(shape[1][0], (shape[2] or (0,))[0])
    return jax.lax.map(one, (flat, k0r, k0a), batch_size=_chunk_for(2 * n))


def _sizes(widths, shape, adaptive):
    """FFT lengths holding the composition windows ``widths`` (per direction) on the grids of ``shape``.
    An adaptive batch stops at AUTO_WINDOW: a member whose window is wider does not fit and is
    composed by the ``pld`` route, which coarsens its grid (the rule of ``self_compose``)."""
    out = []
    for w, s in zip(widths, [shape[1], shape[2]]):
        size = bucket_len(max(int(np.max(np.asarray(w))), s[0]))
        if adaptive:
            size = min(size, AUTO_WINDOW)
        elif size > MAX_GRID:
            raise ValueError(
                f"count: the composition needs an FFT of length {size}; use a coarser value_discretization_interval"
            )
        out.append(size)
    return tuple(out)


def _fused_batch(
    kind,
    how,
    mech,
    arg,
    count,
    sensitivity,
    sampling_prob,
    value_discretization_interval,
    pessimistic,
    tail_mass_truncation,
    output_cells,
    progress=None,
):
    """Batch query: mechanisms bucketed by their own grid length, each built once, mapped in chunks.

    FFT lengths per bucket come from the Chernoff windows of a few sampled members (grown by
    5 %); a member whose own window does not fit (checked inside the same pass) is recomputed
    with its exact length, so the sample only affects speed, never the answer.
    """
    validate(mech, sensitivity, sampling_prob, value_discretization_interval)
    count = check_int("count", count, minimum=1)
    output_cells = check_int("output_cells", output_cells, minimum=16)
    adaptive = value_discretization_interval is None
    m64 = jax.tree_util.tree_map(jnp.asarray, concrete(to64(mech)))
    shape_b = tuple(m64.batch_shape)
    flat = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, shape_b).reshape(-1), m64)
    sens = jnp.asarray(concrete(sensitivity), jnp.float64)
    sampling_prob = sampling_rate(concrete(sampling_prob))  # None (not subsampled) or a float64 array
    extra = {"cells": output_cells}
    if how.profile == "discrete":
        values, nvalues = pairs(m64, sens)
        extra.update(discrete_plan(expand(m64), values, nvalues))
    dirs, steps = _element_plans(flat, sens, sampling_prob, value_discretization_interval, output_cells, extra)
    klo = jnp.asarray(np.atleast_1d(np.asarray(extra.get("klo", ()))), jnp.float64)
    nklo = int(klo.size)
    count_d = int(extra.get("count", 0))
    k0r = jnp.asarray(dirs[0][0])
    k0a = jnp.asarray(dirs[1][0] if dirs[1] is not None else np.zeros_like(dirs[0][0]))
    a = jnp.asarray(arg, jnp.float64).reshape(-1)
    tail = float(tail_mass_truncation)
    pess = bool(pessimistic)
    result = np.empty((k0r.shape[0], a.shape[0]))

    def take(idx):
        ix = jnp.asarray(idx)
        return jax.tree_util.tree_map(lambda x: x[ix], flat), k0r[ix], k0a[ix]

    report = _reporter(progress, k0r.shape[0])
    done = 0
    for shape, idx in _groups(dirs, steps, output_cells, count_d, nklo).items():
        fl, r0, a0 = take(idx)
        sizes = None
        if count > 1:
            pick = np.unique(np.linspace(0, idx.size - 1, min(idx.size, 5)).round().astype(int))
            sub = jax.tree_util.tree_map(lambda x: x[pick], fl)
            w = _window_map_jit(sub, sens, sampling_prob, r0[pick], a0[pick], klo, shape, pess, count, tail)
            sizes = _sizes([np.ceil(np.max(np.asarray(x)) * 1.05) + 16 for x in w], shape, adaptive)
        # members in chunks of one size (the last padded by repeats: one program per bucket), so a
        # long batch reports its progress and holds one chunk's arrays at a time
        chunks = -(-idx.size // CHUNK_MEMBERS)
        width = -(-idx.size // chunks)  # equal chunks, at most CHUNK_MEMBERS: little padding
        for start in range(0, idx.size, width):
            part = np.arange(start, min(start + width, idx.size))
            padded = np.concatenate([part, np.full(width - part.size, part[-1])])
            sel = jnp.asarray(padded)
            pf, pr, pa = jax.tree_util.tree_map(lambda x: x[sel], fl), r0[sel], a0[sel]
            out, ok = _query_map_jit(pf, sens, sampling_prob, pr, pa, klo, shape, pess, count, sizes, tail, kind, a)
            out, ok = np.array(out)[: part.size], np.asarray(ok)[: part.size]  # (writable: refits go in)
            if not ok.all():  # exact windows for the members that did not fit
                bad = np.nonzero(~ok)[0]
                sub = jax.tree_util.tree_map(lambda x: x[jnp.asarray(bad)], pf)
                w = [
                    np.asarray(x)
                    for x in _window_map_jit(sub, sens, sampling_prob, pr[bad], pa[bad], klo, shape, pess, count, tail)
                ]
                wide = (np.max(w, axis=0) > AUTO_WINDOW) if adaptive else np.zeros(bad.size, bool)
                for j in np.nonzero(wide)[0]:  # adaptive, wider than AUTO_WINDOW: the pld route coarsens it
                    member = jax.tree_util.tree_map(lambda x: x[bad[j]], pf)
                    out[bad[j]] = np.asarray(
                        _by_pld(
                            kind,
                            member,
                            a,
                            count,
                            sens,
                            1.0 if sampling_prob is None else sampling_prob,
                            None,
                            pess,
                            tail,
                            output_cells,
                            False,
                        )
                    )
                fit = np.nonzero(~wide)[0]
                if fit.size:
                    sub = jax.tree_util.tree_map(lambda x: x[jnp.asarray(fit)], sub)
                    big = _sizes([x[fit] for x in w], shape, adaptive)
                    out[bad[fit]] = np.asarray(
                        _query_map_jit(
                            sub,
                            sens,
                            sampling_prob,
                            pr[bad[fit]],
                            pa[bad[fit]],
                            klo,
                            shape,
                            pess,
                            count,
                            big,
                            tail,
                            kind,
                            a,
                        )[0]
                    )
            result[idx[part]] = out
            done += part.size
            report(done)
        _trim_heap()
    pure = pure_cap(m64, sens, sampling_prob) if how.pure_cap else None
    if pure is not None:
        result = np.asarray(capped_by_pure(kind, jnp.asarray(result), a, pure.reshape(-1) * count))
    return jnp.asarray(result).reshape(shape_b + jnp.shape(arg))


#: a batch query runs its members in chunks of at most this many (progress, bounded memory)
CHUNK_MEMBERS = 512
#: batches of at least this many members report their progress on stderr by default
PROGRESS_MEMBERS = 2048


def _reporter(progress, total):
    """``report(done)``: ``progress(done, total)`` if a callable, a progress line on stderr if
    ``True`` (or by default for batches of ``PROGRESS_MEMBERS`` or more), else nothing."""
    if progress is None:
        progress = total >= PROGRESS_MEMBERS
    if callable(progress):
        return lambda done: progress(done, total)
    if not progress:
        return lambda done: None

    def bar(done):
        sys.stderr.write(f"\raccounting: {done}/{total} mechanisms ({done / total:6.1%})")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return bar


def _trim_heap():
    """Hand freed heap pages back to the OS between groups (glibc only; a no-op elsewhere).

    Each group compiles its own programs; XLA's compile-time scratch would otherwise stay
    in the allocator's free lists and add up across groups in the peak RSS."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except Exception:  # pragma: no cover - not glibc
        pass


@functools.partial(jax.jit, static_argnums=(4, 5, 6, 7))
def _build_windows_jit(mech, sensitivity, sampling_prob, offsets, shape, pessimistic, count, tail):
    """Single-step pmfs and (count > 1) the Chernoff window width of their composition, one call."""
    rem, add = build_core(mech, sensitivity, sampling_prob, offsets, shape, pessimistic)
    widths = ()
    if count > 1:
        widths = tuple(
            jnp.max(hi - lo) + 1.0
            for lo, hi, _ in (_grid.chernoff_window(p, count, tail) for p in (rem, add) if p is not None)
        )
    return rem, add, widths


def _answer(pmf, kind, arg, pessimistic):
    """ε at δ = ``arg`` (NaN below the round-off floor) or δ at ε = ``arg`` of one direction's
    grid PLD, with its accumulated round-off added on the pessimistic side."""
    r = pmf.roundoff[..., None]
    if kind == "epsilon":
        e = _grid.epsilon_for_delta(pmf, arg - r if pessimistic else arg + r)
        return jnp.where(arg < ROUNDOFF_FACTOR * r, jnp.nan, e)
    return _grid.delta_with_roundoff(pmf, arg, pessimistic)


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5, 6))
def _compose_query_jit(rem, add, count, sizes, tail, pessimistic, kind, arg):
    """Self-compose both directions (FFT lengths ``sizes``) and answer the query, one call.
    Also returns the round-off floor (max over directions) for the host-side check."""
    outs, floors = [], []
    for i, pmf in enumerate(p for p in (rem, add) if p is not None):
        if count > 1:
            pmf = _grid.self_compose(pmf, count, sizes[i], tail, pessimistic)
        outs.append(_answer(pmf, kind, arg, pessimistic))
        floors.append(ROUNDOFF_FACTOR * pmf.roundoff[..., None])
    return functools.reduce(jnp.maximum, outs), functools.reduce(jnp.maximum, floors)


def _fused_small(
    kind,
    how,
    mech,
    arg,
    count,
    sensitivity,
    sampling_prob,
    value_discretization_interval,
    pessimistic,
    tail_mass_truncation,
    output_cells,
):
    """Concrete, small batch: ``pld(...).self_compose(count).get_*`` in three compiled calls
    (plan; build + windows; compose + query) with the same answer, no autodiff wrappers."""
    count = check_int("count", count, minimum=1)
    check_positive("tail_mass_truncation", tail_mass_truncation)
    plan = make_plan(
        mech,
        sensitivity=sensitivity,
        sampling_prob=sampling_prob,
        value_discretization_interval=value_discretization_interval,
        pessimistic=pessimistic,
        output_cells=output_cells,
    )
    tail = float(tail_mass_truncation)
    pess = bool(pessimistic)
    m64 = to64(mech)
    rem, add, widths = _build_windows_jit(
        m64,
        jnp.asarray(sensitivity, jnp.float64),
        sampling_rate(sampling_prob),
        plan.offsets,
        plan.shape,
        pess,
        count,
        tail,
    )
    sizes = ()
    if count > 1:
        if value_discretization_interval is None and max(int(w) for w in widths) > AUTO_WINDOW:
            # the pld route coarsens an adaptive grid until the window fits AUTO_WINDOW
            return _by_pld(
                kind,
                mech,
                arg,
                count,
                sensitivity,
                sampling_prob,
                None,
                pessimistic,
                tail_mass_truncation,
                output_cells,
                True,
            )
        sizes = tuple(
            bucket_len(max(int(w), p.size)) for w, p in zip(widths, (rem, add) if add is not None else (rem,))
        )
        if max(sizes) > MAX_GRID:
            raise ValueError(
                f"count: the {count}-fold composition needs an FFT of length {max(sizes)}; use a coarser "
                "value_discretization_interval"
            )
    a = jnp.asarray(arg, jnp.float64)
    if kind == "delta" and np.isnan(np.asarray(a)).any():
        raise ValueError(f"epsilon must not be NaN, got {arg!r}")
    batch = tuple(rem.batch_shape)
    flat = jnp.broadcast_to(a.reshape(-1), batch + (max(a.size, 1),))[..., : a.size]
    out, floor = _compose_query_jit(rem, add, count, sizes, tail, pess, kind, flat)
    if kind == "epsilon":
        check_floor(flat, floor)
    pure = pure_cap(m64, jnp.asarray(sensitivity, jnp.float64), sampling_rate(sampling_prob)) if how.pure_cap else None
    out = capped_by_pure(kind, out, flat, None if pure is None else pure * count)
    return out.reshape(batch + a.shape)


def _by_pld(
    kind,
    mech,
    arg,
    count,
    sensitivity,
    sampling_prob,
    value_discretization_interval,
    pessimistic,
    tail_mass_truncation,
    output_cells,
    use_analytic,
):
    """The query on ``pld(...).self_compose(count)``: traced parameters, analytic Gaussians, and the
    batch members whose adaptive composition window exceeds AUTO_WINDOW (``self_compose`` coarsens)."""
    p = pld(
        mech,
        sensitivity=sensitivity,
        sampling_prob=sampling_prob,
        value_discretization_interval=value_discretization_interval,
        pessimistic=pessimistic,
        output_cells=output_cells,
        use_analytic=use_analytic,
    ).self_compose(count, tail_mass_truncation=tail_mass_truncation)
    return p.get_epsilon_for_delta(arg) if kind == "epsilon" else p.get_delta_for_epsilon(arg)


def _fused_query(
    kind,
    mech,
    arg,
    count,
    sensitivity,
    sampling_prob,
    value_discretization_interval,
    pessimistic,
    tail_mass_truncation,
    output_cells,
    use_analytic,
    progress=None,
):
    """Shared body of :func:`get_epsilon` / :func:`get_delta`."""
    if not isinstance(mech, Mechanism):
        raise ValueError(f"mech must be a dpjax Mechanism, got {type(mech).__name__}")
    how = route(mech, sampling_rate(sampling_prob), use_analytic=use_analytic)
    batched = (
        concrete(mech) is not None
        and concrete(sensitivity) is not None
        and concrete(sampling_prob) is not None
        and not is_traced(sampling_prob)
        and not any(is_traced(x) for x in jax.tree_util.tree_leaves(mech))
        and not is_traced(sensitivity)
    )
    small = math.prod(mech.batch_shape) <= _SMALL_BATCH
    mu = concrete_mu(mech, sensitivity) if batched else None
    # a Gaussian no grid holds goes through pld's basic composition
    too_sharp = mu is not None and not how.analytic and beyond_grid(mu)
    if batched and small and not how.analytic and not too_sharp:
        return _fused_small(
            kind,
            how,
            mech,
            arg,
            count,
            sensitivity,
            sampling_prob,
            value_discretization_interval,
            pessimistic,
            tail_mass_truncation,
            output_cells,
        )
    if too_sharp or how.analytic or small or not batched:
        return _by_pld(
            kind,
            mech,
            arg,
            count,
            sensitivity,
            sampling_prob,
            value_discretization_interval,
            pessimistic,
            tail_mass_truncation,
            output_cells,
            use_analytic,
        )
    if jnp.ndim(sampling_prob) > 0:
        raise ValueError(
            "sampling_prob: the batch query takes one sampling_prob for the whole batch "
            "(use accounting.pld for per-mechanism rates)"
        )
    return _fused_batch(
        kind,
        how,
        mech,
        arg,
        count,
        sensitivity,
        sampling_prob,
        value_discretization_interval,
        pessimistic,
        tail_mass_truncation,
        output_cells,
        progress,
    )


def _across_processes(query, mech, arg, **options):
    """A batch of mechanisms whose parameters are global arrays spread over JAX processes: each process
    answers the batch of its own shards (the same numbers as one process answering every member), the
    processes agree on errors and arguments, and the answers come back as a global float64 array with
    the parameters' sharding."""
    if np.ndim(arg) != 0:
        raise ValueError(
            f"{query.__name__}: a batch of mechanisms across processes takes a single "
            f"{'delta' if query is get_epsilon else 'epsilon'}, got shape {np.shape(arg)}"
        )
    if is_traced(mech):
        raise ValueError("mech: a batch across processes needs concrete parameters (call it outside jit)")
    first = next(leaf for leaf in jax.tree_util.tree_leaves(mech) if multihost.is_global(leaf))
    extra = {"arg": float(arg), **{k: repr(v) for k, v in options.items() if k != "progress"}}
    return multihost.map_shards(
        f"accounting.{query.__name__}",
        lambda local, _: np.asarray(query(local, arg, **options)),
        mech,
        first.shape,
        first.sharding,
        extra=extra,
    )


@x64
def get_epsilon(
    mech,
    delta,
    *,
    count=1,
    sensitivity=1.0,
    sampling_prob=1.0,
    value_discretization_interval=None,
    pessimistic=True,
    tail_mass_truncation=DEFAULT_TAIL_MASS,
    output_cells=DEFAULT_OUTPUT_CELLS,
    use_analytic=True,
    progress=None,
):
    """ε at ``delta`` after ``count`` runs of ``mech``, for every mechanism of a batch.

    Large batches are bucketed by grid length and processed in chunks of ``CHUNK_MEMBERS``
    (``lax.map`` inside), so memory stays bounded whatever the batch size; ``progress``:
    ``progress(done, total)`` after each chunk, ``True`` for a progress line on stderr
    (the default from ``PROGRESS_MEMBERS`` mechanisms on), ``False`` for none. Returns shape
    batch + δ.shape. NaN marks a ``delta`` below the round-off floor.

    ``value_discretization_interval``: ``None`` (default) gives every member the adaptive step of
    :func:`accounting.pld` (its loss range and scale decide it; a composition window above 2^23
    coarsens it); a number is the step of the whole batch, as ``pld`` takes it.

    Args:
      mech: the dpjax mechanism, possibly batched.
      delta: δ, in [0, 1).
      count: the number of runs composed (an int, or an integer array broadcasting with the batch).
      sensitivity: the query's sensitivity (one scalar for the whole batch).
      sampling_prob: the Poisson sampling probability (one for the whole batch).
      value_discretization_interval: the loss-grid step of the whole batch, or None (adaptive per member).
      pessimistic: bound the privacy loss from above (else from below).
      tail_mass_truncation: the mass left outside the composition window.
      output_cells: output-grid cells per pair for mechanisms without a closed-form profile.
      use_analytic: use the analytic Gaussian PLD where it applies.
      progress: ``progress(done, total)`` after each chunk, True for a line on stderr, False for none, or None
        (the default rule).

    Returns:
      ε of shape batch + δ.shape (float64).

    Raises:
      ValueError: ``mech`` is not a dpjax Mechanism, ``sampling_prob`` is not a scalar, an argument is out of
        range, or a loss range or composition needs more than MAX_GRID grid points at the given step.
    """
    check_probability("delta", delta, high_open=True)
    return _query(
        "epsilon",
        get_epsilon,
        mech,
        delta,
        count=count,
        sensitivity=sensitivity,
        sampling_prob=sampling_prob,
        value_discretization_interval=value_discretization_interval,
        pessimistic=pessimistic,
        tail_mass_truncation=tail_mass_truncation,
        output_cells=output_cells,
        use_analytic=use_analytic,
        progress=progress,
    )


@x64
def get_delta(
    mech,
    epsilon,
    *,
    count=1,
    sensitivity=1.0,
    sampling_prob=1.0,
    value_discretization_interval=None,
    pessimistic=True,
    tail_mass_truncation=DEFAULT_TAIL_MASS,
    output_cells=DEFAULT_OUTPUT_CELLS,
    use_analytic=True,
    progress=None,
):
    """δ at ``epsilon`` after ``count`` runs of ``mech``, for every mechanism of a batch (see :func:`get_epsilon`).

    Args:
      mech: the dpjax mechanism, possibly batched.
      epsilon: ε (real, not NaN).
      count: the number of runs composed (an int, or an integer array broadcasting with the batch).
      sensitivity: the query's sensitivity (one scalar for the whole batch).
      sampling_prob: the Poisson sampling probability (one for the whole batch).
      value_discretization_interval: the loss-grid step of the whole batch, or None (adaptive per member).
      pessimistic: bound the privacy loss from above (else from below).
      tail_mass_truncation: the mass left outside the composition window.
      output_cells: output-grid cells per pair for mechanisms without a closed-form profile.
      use_analytic: use the analytic Gaussian PLD where it applies.
      progress: ``progress(done, total)`` after each chunk, True for a line on stderr, False for none, or None
        (the default rule).

    Returns:
      δ of shape batch + ε.shape (float64).

    Raises:
      ValueError: ``mech`` is not a dpjax Mechanism, ``sampling_prob`` is not a scalar, an argument is out of
        range, or a loss range or composition needs more than MAX_GRID grid points at the given step.
    """
    check_real("epsilon", epsilon)
    return _query(
        "delta",
        get_delta,
        mech,
        epsilon,
        count=count,
        sensitivity=sensitivity,
        sampling_prob=sampling_prob,
        value_discretization_interval=value_discretization_interval,
        pessimistic=pessimistic,
        tail_mass_truncation=tail_mass_truncation,
        output_cells=output_cells,
        use_analytic=use_analytic,
        progress=progress,
    )


def _query(kind, public, mech, target, **options):
    """A batch query on this process, or on each process's members of a global batch (``public``
    is the query itself, called again on the local members)."""
    if multihost.is_global(mech):
        return _across_processes(public, mech, target, **options)
    return _fused_query(kind, mech, target, **options)
