"""The exact tier's noise does not depend on the layout of a release nor on the data's values.

* one word-to-noise map per law: a record's noise is a function of (key, its index, its own parameters), whether
  it is released alone, in a batch of one scale, among a few or many distinct scales, whole or in slices;
* no branch on the data's values in any release program (the same program, the same work, whatever the values).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax.exact import lattice
from dpjax.exact.laws import discrete_gaussian
from dpjax.exact.laws.discrete_laplace import LaplaceScales


def _primitives(jaxpr):
    """The names of every primitive of a (closed) jaxpr, sub-jaxprs included."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    names = set()
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        for p in eqn.params.values():
            for sub in p if isinstance(p, (tuple, list)) else (p,):
                if hasattr(sub, "eqns") or hasattr(getattr(sub, "jaxpr", None), "eqns"):
                    names |= _primitives(sub)
    return names


def test_release_programs_do_not_branch_on_the_values():
    """The one-scale program of float32 answers (Laplace, Gaussian lattice, discrete Gaussian) and the per-record
    program hold no ``cond``: no switch of program on max|values| (a data-dependent release time)."""
    values = jnp.zeros(4096, jnp.float32)
    pair = jnp.zeros(2, jnp.uint32)
    with jax.enable_x64(True):
        for mech in (__import__("dpjax").Laplace(1.0), __import__("dpjax").Gaussian(3.0)):
            lat = mech.exact_lattice()
            sampler, g = lat.sampler.one_scale(lat, int(lat.param), 0), float(lat.granularity)
            prog = jax.make_jaxpr(
                lambda s, v, sampler=sampler, g=g: lattice._fast_lattice(
                    s, jnp.uint32(0), v, sampler=sampler, g=g, unit=False, out_dtype=jnp.dtype(jnp.float32)
                )
            )
            assert not {"cond", "while"} & _primitives(prog(pair, values)), mech
        b = jnp.linspace(0.5, 4.0, 4096)
        prog = jax.make_jaxpr(
            lambda s, v, b: lattice._per_record_lattice(
                s,
                jnp.uint32(0),
                v,
                (b,),
                None,
                sampler=LaplaceScales(small=True),
                unit=False,
                out_dtype=jnp.dtype(jnp.float32),
            )
        )
        assert not {"cond", "while"} & _primitives(prog(pair, values, b))


KERNELS = {  # name → (mechanism class name, base scale, integer answers)
    "laplace": ("Laplace", 3000.0, False),
    "discrete_laplace_small": ("DiscreteLaplace", 3.0, True),
    "discrete_laplace_above_2^10": ("DiscreteLaplace", 3000.0, True),
    "discrete_gaussian": ("DiscreteGaussian", 30.0, True),
    "gaussian": ("Gaussian", 30.0, False),  # (30 exact tables of the lattice variance, 7.4σ = 28 000 words each)
}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(k, marks=pytest.mark.slow)
        if k in ("gaussian", "discrete_gaussian", "discrete_laplace_small", "discrete_laplace_above_2^10")
        else k
        for k in KERNELS
    ],
)
def test_a_records_noise_depends_on_its_own_scale_only_whatever_the_layout(name):
    """Per-record scales on every kernel, 34 records with 30 distinct scales (above the 16 that once switched
    route): the records of one scale get the same noise as in a one-scale batch, and a release in two slices
    (``start=16``) is bitwise the whole release (the issue's reproduction)."""
    import dpjax

    cls_name, base, integer = KERNELS[name]
    cls = getattr(dpjax, cls_name)
    key = jax.random.key(0)
    same = jnp.full(34, base)
    mixed = same.at[5:].set(base + jnp.arange(5, 34) * (base / 3000.0))
    x = jnp.zeros(34, jnp.int32 if integer else jnp.float32)
    one = np.asarray(dpjax.release(key, x, cls(same), numerics="exact"))
    whole = np.asarray(dpjax.release(key, x, cls(mixed), numerics="exact"))
    np.testing.assert_array_equal(one[:5], whole[:5], err_msg=name)
    sliced = np.concatenate(
        [
            np.asarray(dpjax.release(key, x[:16], cls(mixed[:16]), numerics="exact")),
            np.asarray(dpjax.release(key, x[16:], cls(mixed[16:]), numerics="exact", start=16)),
        ]
    )
    np.testing.assert_array_equal(sliced, whole, err_msg=name)
    scalar = np.asarray(dpjax.release(key, x, cls(base), numerics="exact"))
    np.testing.assert_array_equal(scalar, one, err_msg=name)


@pytest.mark.slow
def test_per_record_discrete_gaussian_is_the_one_scale_release_record_by_record():
    """Many distinct σ (one exact table each, searched per record) against the one-scale release of each σ: every
    record's noise is that of its σ's release at its index; the flagged records (ties, past the table) are completed
    by the host's exact function, forced here by shortening the tables (``dg_icdf``)."""
    import dpjax

    sig = 2.0 + 0.37 * np.arange(40)
    key = jax.random.key(4)
    x = jnp.zeros(40, jnp.int32)
    got = np.asarray(dpjax.release(key, x, dpjax.DiscreteGaussian(sig), numerics="exact"))
    for i in (7, 39):
        want = np.asarray(dpjax.release(key, x, dpjax.DiscreteGaussian(sig[i]), numerics="exact"))
        assert got[i] == want[i], i
    full = discrete_gaussian.dg_icdf
    short = {}

    def shortened(nvar):
        return short.setdefault(nvar, full(nvar)[:2])

    try:
        discrete_gaussian.dg_icdf = shortened  # (the host completion keeps the whole tables: its bounds decide)
        cut = np.asarray(dpjax.release(key, x, dpjax.DiscreteGaussian(sig), numerics="exact"))
    finally:
        discrete_gaussian.dg_icdf = full
    np.testing.assert_array_equal(cut, got)


def test_per_record_discrete_gaussian_refuses_more_distinct_scales_than_tables(monkeypatch):
    import dpjax

    monkeypatch.setattr(discrete_gaussian, "DG_TABLES_MAX", 20)
    with pytest.raises(ValueError, match="at most 20 distinct per-record sigma"):
        dpjax.release(
            jax.random.key(0),
            jnp.zeros(30, jnp.int32),
            dpjax.DiscreteGaussian(2.0 + 0.1 * np.arange(30)),
            numerics="exact",
        )


@pytest.mark.slow
def test_per_record_discrete_gaussian_from_host_bits():
    """The per-record tables fed by ``HostBits`` words (os.urandom): each record's noise has its own σ's spread
    (z/σ over 20 000 records, 20 distinct σ: variance 1 within 5 %)."""
    import dpjax
    from dpjax.exact import HostBits

    sig = np.resize(5.0 + np.arange(20), 20_000)
    z = np.asarray(
        dpjax.release(HostBits(), jnp.zeros(sig.size, jnp.int32), dpjax.DiscreteGaussian(sig), numerics="exact")
    )
    assert abs(np.var(z / sig) - 1.0) < 0.05


@pytest.mark.parametrize(
    "mech, dtype, want",
    [
        ("DiscreteGaussian(3)", np.int32, np.int32),
        ("Gaussian(2.5)", np.int32, np.float32),
        ("Laplace(per record)", np.int32, np.float32),
        ("DiscreteGaussian(per record)", np.float32, np.float32),
    ],
)
def test_an_empty_batch_is_the_empty_release_of_the_dtype_of_any_other(mech, dtype, want):
    """A lattice's ``sample`` of no records (shape ``(0,)``) gives the empty array of the dtype a non-empty batch
    gets (``want``: that of ``release_exact`` on three records), from a Threefry key or ``HostBits``."""
    import dpjax
    from dpjax.exact import HostBits

    m = {
        "DiscreteGaussian(3)": dpjax.DiscreteGaussian(3.0),
        "Gaussian(2.5)": dpjax.Gaussian(2.5),
        "Laplace(per record)": dpjax.Laplace(np.linspace(1.0, 2.0, 40)),
        "DiscreteGaussian(per record)": dpjax.DiscreteGaussian(np.linspace(1.0, 2.0, 40)),
    }[mech].exact_lattice()
    for key in (jax.random.key(0), HostBits()):
        out = lattice.release_exact(key, np.zeros((0,) + m.batch_shape, dtype), m, flat=True)
        assert out.shape == (0,) + m.batch_shape and out.dtype == want
    out = m.sample(jax.random.key(1), jnp.zeros((), dtype), (0,))
    assert out.shape == (0,) + m.batch_shape
