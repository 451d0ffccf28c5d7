"""The exact tier's noise does not depend on the layout of a release nor on the data's values.

* one word-to-noise map per law: a record's noise is a function of (key, its index, its own parameters), whether
  it is released alone, in a batch of one scale, among a few or many distinct scales, whole or in slices;
* no branch on the data's values in any release program (the same program, the same work, whatever the values).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax.exact import lattice


def _primitives(jaxpr):
    """The names of every primitive of a (closed) jaxpr, sub-jaxprs included."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    names = set()
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        for p in eqn.params.values():
            for sub in (p if isinstance(p, (tuple, list)) else (p,)):
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
            kind, t, g = lat.sampler, int(lat.param), float(lat.granularity)
            prog = jax.make_jaxpr(lambda s, v, kind=kind, t=t, g=g: lattice._fast_lattice(
                s, jnp.uint32(0), v, kind=kind, t=t, shift=0, g=g, unit=False, out_dtype=jnp.dtype(jnp.float32)))
            assert not {"cond", "while"} & _primitives(prog(pair, values)), mech
        b = jnp.linspace(0.5, 4.0, 4096)
        prog = jax.make_jaxpr(lambda s, v, b: lattice._per_record_lattice(
            s, jnp.uint32(0), v, b, None, None, kind="lap", k1=0, small=True, unit=False,
            out_dtype=jnp.dtype(jnp.float32)))
        assert not {"cond", "while"} & _primitives(prog(pair, values, b))

