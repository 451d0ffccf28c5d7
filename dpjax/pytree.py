"""Immutable dataclasses registered as JAX pytrees.

Numeric parameters are pytree *leaves* (differentiable, batchable); fields marked
``static_field()`` are auxiliary data that change shapes or code paths.
Unflattening bypasses ``__init__``/``__post_init__`` so that validation runs only
when a user builds an object from concrete values, never on tracers.
"""

from __future__ import annotations

import dataclasses

import jax

__all__ = ["pytree_dataclass", "static_field", "replace"]


def static_field(**kwargs):
    """A dataclass field that is static configuration (not a pytree leaf).

    Args:
      **kwargs: as ``dataclasses.field`` (``metadata`` is kept, with ``static`` added).

    Returns:
      The field.
    """
    metadata = dict(kwargs.pop("metadata", {}) or {})
    metadata["static"] = True
    return dataclasses.field(metadata=metadata, **kwargs)


def pytree_dataclass(cls=None, *, kw_only: bool = False):
    """Turn ``cls`` into a frozen dataclass registered as a pytree node.

    Args:
      cls: the class to decorate (``@pytree_dataclass`` or ``@pytree_dataclass(kw_only=True)``).
      kw_only: its fields are keyword-only in the constructor (for result types with many fields).

    Returns:
      The frozen dataclass, registered with :func:`jax.tree_util.register_pytree_with_keys`.
    """
    if cls is None:
        return lambda c: pytree_dataclass(c, kw_only=kw_only)
    cls = dataclasses.dataclass(frozen=True, eq=False, repr=True, kw_only=kw_only)(cls)
    fields = dataclasses.fields(cls)
    data_names = tuple(f.name for f in fields if not f.metadata.get("static", False))
    meta_names = tuple(f.name for f in fields if f.metadata.get("static", False))

    def flatten_with_keys(obj):
        children = tuple((jax.tree_util.GetAttrKey(n), getattr(obj, n)) for n in data_names)
        return children, tuple(getattr(obj, n) for n in meta_names)

    def flatten(obj):
        return tuple(getattr(obj, n) for n in data_names), tuple(getattr(obj, n) for n in meta_names)

    def unflatten(meta, children):
        obj = object.__new__(cls)
        for n, v in zip(data_names, children):
            object.__setattr__(obj, n, v)
        for n, v in zip(meta_names, meta):
            object.__setattr__(obj, n, v)
        return obj

    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)
    return cls


def replace(obj, **changes):
    """A copy of the pytree dataclass ``obj`` with fields replaced, without validation.

    Through unflattening, like ``jit``: for values that may be traced.

    Args:
      obj: a pytree dataclass.
      **changes: the new field values.

    Returns:
      The copy.

    Raises:
      TypeError: a name in ``changes`` that is not a field.
    """
    new = object.__new__(type(obj))
    for field in dataclasses.fields(obj):
        object.__setattr__(new, field.name, changes.pop(field.name, getattr(obj, field.name)))
    if changes:
        raise TypeError(f"replace: {type(obj).__name__} has no fields {sorted(changes)}")
    return new
