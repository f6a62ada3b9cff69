"""A faster decoder for every family's response: msgspec structs derived from its pydantic model.

The pydantic response model stays the contract (the differential tests hold it
to the family's LLM schema). From it,
:func:`response_struct` derives a frozen msgspec struct of the same shape,
field names and constraints, and :func:`fast_response_decoder` decodes a raw
response into it: about a quarter of pydantic's time per response, and the
structs cost less to build, read and free (-7.7% instructions per candidate
in the loop; docs/benchmarks.md).

An accelerator only. The struct decoder is stricter than the model, never
looser: whatever it refuses (an integral float such as ``3.0``, which the
model turns into ``3``; a key written twice whose first value is invalid; any
malformed text) returns None, and the caller validates with the pydantic
model, which decides and explains. Where both accept, the values are the same
(tests/test_response_fast_path.py compares them on generated and hostile
responses). A model using anything this module does not know (a validator, an
alias, another constraint, a type outside the list below) raises
:class:`UnsupportedModel` instead of being approximated; its family is then
decoded by the model alone.
"""

from __future__ import annotations

import types
import typing
from functools import lru_cache
from typing import Any, Callable

import msgspec
from annotated_types import MinLen
from pydantic import BaseModel

from domain.errors import NotariusError
from domain.families.base import JsonInt, StrictModel

# JsonInt's own validator (integral floats count as integers): the one field validator the
# structs may leave to the fallback, since refusing a float is stricter than converting it.
_JSON_INT_VALIDATOR = typing.get_args(JsonInt)[1]
_SCALARS = (str, int, bool, type(None))


class UnsupportedModel(NotariusError, TypeError):
    """A response model using something the struct derivation does not translate."""


@lru_cache(maxsize=None)
def response_struct(model: type[StrictModel]) -> type[msgspec.Struct]:
    """The frozen msgspec struct with ``model``'s fields, types and constraints; nested models become
    structs too. Raises :class:`UnsupportedModel` for anything it cannot translate exactly."""
    config = model.model_config
    if config.get("strict") is not True or config.get("extra") != "forbid":
        raise UnsupportedModel(f"{model.__name__}: only strict models that forbid extra keys are translated")
    decorators = model.__pydantic_decorators__
    if (decorators.validators or decorators.field_validators or decorators.root_validators
            or decorators.model_validators):
        raise UnsupportedModel(f"{model.__name__}: validators are not translated")
    fields: list[tuple] = []
    for name, info in model.model_fields.items():
        if info.alias is not None or info.validation_alias is not None:
            raise UnsupportedModel(f"{model.__name__}.{name}: aliases are not translated")
        field_type = _with_metadata(_struct_type(info.annotation, model), info.metadata, model)
        fields.append((name, field_type) if info.is_required() else (name, field_type, info.default))
    # gc=False: a decoded response is a tree (JSON has no cycles), so the collector need not track it.
    return msgspec.defstruct(model.__name__, fields, frozen=True, forbid_unknown_fields=True, gc=False,
                             module=__name__)


def _struct_type(annotation: Any, model: type) -> Any:
    origin = typing.get_origin(annotation)
    if annotation in _SCALARS:
        return annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if not issubclass(annotation, StrictModel):
            raise UnsupportedModel(f"{model.__name__}: nested model {annotation.__name__} is not a StrictModel")
        return response_struct(annotation)
    if origin is typing.Literal and all(type(value) is str for value in typing.get_args(annotation)):
        return annotation
    if origin is typing.Annotated:
        base, *metadata = typing.get_args(annotation)
        return _with_metadata(_struct_type(base, model), metadata, model)
    if origin is tuple:
        args = typing.get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple[_struct_type(args[0], model), ...]  # type: ignore[misc]
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(_struct_type(arg, model) for arg in typing.get_args(annotation))]
    raise UnsupportedModel(f"{model.__name__}: the type {annotation!r} is not translated")


def _with_metadata(struct_type: Any, metadata: list, model: type) -> Any:
    constraints: dict[str, Any] = {}
    for item in metadata:
        if isinstance(item, MinLen):
            constraints["min_length"] = item.min_length
        elif not (item == _JSON_INT_VALIDATOR and struct_type is int):
            raise UnsupportedModel(f"{model.__name__}: the constraint {item!r} is not translated")
    return typing.Annotated[struct_type, msgspec.Meta(**constraints)] if constraints else struct_type


@lru_cache(maxsize=None)
def fast_response_decoder(model: type[StrictModel]) -> Callable[[str], Any]:
    """A function of a raw response's text: its struct, or None when the struct decoder refuses
    it (the caller then validates with ``model``, which decides). For a model the structs cannot
    translate, it refuses everything: slower, never wrong (a test holds every family to a struct)."""
    try:
        decode = msgspec.json.Decoder(response_struct(model)).decode
    except UnsupportedModel:
        return _refuse_all

    def decoded_or_none(text: str) -> Any:
        try:
            return decode(text)
        except Exception:  # any refusal at all (also a lone surrogate the UTF-8 encoding refuses)
            return None

    return decoded_or_none


def _refuse_all(text: str) -> None:
    return None


def with_items(response: Any, list_field: str, items: tuple) -> Any:
    """A copy of a decoded response (struct or model) whose list field holds ``items``."""
    if isinstance(response, msgspec.Struct):
        return msgspec.structs.replace(response, **{list_field: items})
    return response.model_copy(update={list_field: items})
