"""Faster construction for the frozen, slotted dataclasses built per candidate.

A frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__``, the generic path around its own ``__setattr__`` guard;
about 0.75 µs for three fields. :func:`quick_init` replaces it with one that
sets each slot through the slot's own descriptor: the same values in the same
slots, about twice as fast. Everything else stays the dataclass's (the frozen
guard on assignment, equality, hashing, repr, pickling).
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

import msgspec
import msgspec.structs

T = TypeVar("T")


def quick_init(cls: type[T]) -> type[T]:
    """Class decorator, applied on top of ``@dataclass(frozen=True, slots=True)``."""
    params = dataclasses.fields(cls)  # type: ignore[arg-type]
    if not getattr(cls, "__slots__", None) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: quick_init needs a slotted dataclass without __post_init__")
    namespace: dict = {"__new": object.__new__}
    args, body = [], []
    for f in params:
        if not f.init:
            raise TypeError(f"{cls.__name__}.{f.name}: quick_init needs every field in __init__")
        namespace[f"__set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is not dataclasses.MISSING:
            namespace[f"__default_{f.name}"] = f.default
            args.append(f"{f.name}=__default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"__factory_{f.name}"] = f.default_factory
            namespace["__missing"] = _MISSING
            args.append(f"{f.name}=__missing")
            body.append(f"    if {f.name} is __missing: {f.name} = __factory_{f.name}()")
        else:
            args.append(f.name)
        body.append(f"    __set_{f.name}(self, {f.name})")
    source = f"def __init__(self, {', '.join(args)}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(source, namespace)  # the same technique dataclasses itself uses
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[misc]
    return cls


class _Missing:
    __slots__ = ()


_MISSING = _Missing()


class Value(msgspec.Struct, frozen=True, gc=False):
    """Base of the frozen values built once or more per candidate that nothing reads as a dataclass
    (no ``dataclasses.replace``, ``fields`` or ``asdict``): msgspec builds them in C, about a fifth
    of a :func:`quick_init` dataclass's instructions (which sets each slot through a Python-level
    descriptor call). Equality, hashing and the repr are over every field, as a frozen dataclass's;
    assignment raises. ``gc=False``: a value holds no cycle (its fields are values, tuples, rows).
    """


def replaced(value: T, **changes) -> T:
    """A copy of a frozen value with ``changes``: a :class:`Value` (the families' records) or a dataclass
    (a family declared elsewhere may keep dataclass records)."""
    if isinstance(value, msgspec.Struct):
        return msgspec.structs.replace(value, **changes)
    return dataclasses.replace(value, **changes)  # type: ignore[type-var]
