"""The violations jsonschema's ``Draft202012Validator.iter_errors`` reports, found without jsonschema, for the
keywords the families' LLM schemas use.

jsonschema builds a validator per sub-schema it descends into (``evolve``, a referencing resource, an
error object per finding): about 0.7 M instructions to explain one rejected response, paid on every
failure. The LLM schemas use a handful of keywords (``type``, ``enum``, ``required``, ``properties``,
``items``, ``additionalProperties: false``, ``minItems``), so a schema is compiled here once into
plain checks that report what jsonschema reports, in its order: for each keyword in the schema's own
order, each finding with the same path, keyword, keyword value, instance, sub-schema and message.

jsonschema stays the definition: :func:`compiled_walk` returns None for a schema with any other
keyword or form, and :func:`violations` None for a document nested absurdly deep (the caller then asks
jsonschema); tests/test_schema_walk.py compares the two on generated malformed responses.
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, NamedTuple

# Keywords that only annotate: jsonschema's draft 2020-12 validator has no check for them.
_ANNOTATIONS = frozenset({"$schema", "$id", "title", "description"})


class Violation(NamedTuple):
    """One finding, with the fields of jsonschema's ValidationError that guidance reads."""

    path: tuple  # from the document's root: property names and item positions
    validator: str  # the keyword
    validator_value: Any
    instance: Any
    schema: dict  # the (sub-)schema holding the keyword
    message: str


# A compiled (sub-)schema: appends the violations of ``instance`` (at ``path``) to ``found``.
Walk = Callable[[Any, tuple, list], None]


def _is_integer(instance: Any) -> bool:
    # Draft 6 and later: a float with no fractional part is an integer.
    if isinstance(instance, bool):
        return False
    return isinstance(instance, int) or (isinstance(instance, float) and instance.is_integer())


def _is_number(instance: Any) -> bool:
    return not isinstance(instance, bool) and isinstance(instance, numbers.Number)


# jsonschema's draft 2020-12 type checker, type by type.
_TYPES: dict[str, Callable[[Any], bool]] = {
    "array": lambda instance: isinstance(instance, list),
    "boolean": lambda instance: isinstance(instance, bool),
    "integer": _is_integer,
    "null": lambda instance: instance is None,
    "number": _is_number,
    "object": lambda instance: isinstance(instance, dict),
    "string": lambda instance: isinstance(instance, str),
}


class _Unsupported(Exception):
    """A keyword or form this module does not reproduce: jsonschema explains such a schema."""


def compiled_walk(schema: Any) -> Walk | None:
    """The checks of ``schema``, or None when it uses anything beyond the keywords above."""
    try:
        return _compile(schema)
    except _Unsupported:
        return None


class _TooDeep(Exception):
    """An instance whose repr a message holds nests deeper than ``REPR_DEPTH``."""


# A message holds the repr of its instance; past some depth that raises RecursionError, and where it does
# depends on how deep the stack already is, which differs between these checks and jsonschema's. A message
# about an instance nested deeper than this is left to jsonschema.
REPR_DEPTH = 100


def violations(walk: Walk, document: Any) -> list[Violation] | None:
    """Every violation of ``document``, in the order jsonschema's ``iter_errors`` yields them; None when one
    of them is about an instance nested deeper than ``REPR_DEPTH`` (jsonschema is the one to ask)."""
    found: list[Violation] = []
    try:
        walk(document, (), found)
    except _TooDeep:
        return None
    return found


def _shown(instance: Any) -> str:
    """``repr(instance)`` for a message, refused past ``REPR_DEPTH``."""
    if isinstance(instance, (list, dict)) and nested_deeper_than(instance, REPR_DEPTH):
        raise _TooDeep
    return repr(instance)


def _compile(schema: Any) -> Walk:
    if not isinstance(schema, dict):
        raise _Unsupported(schema)  # boolean schemas: jsonschema's
    checks = [_keyword(schema, key, value) for key, value in schema.items() if key not in _ANNOTATIONS]
    if len(checks) == 1:  # most leaves: {"type": ...}
        return checks[0]

    def walk(instance: Any, path: tuple, found: list) -> None:
        for check in checks:
            check(instance, path, found)

    return walk


def _keyword(schema: dict, key: str, value: Any) -> Walk:
    """One keyword's check; the messages are jsonschema 4's (jsonschema/_keywords.py)."""
    if key == "type":
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not names or any(name not in _TYPES for name in names):
            raise _Unsupported(key)
        tests = tuple(_TYPES[name] for name in names)
        expected = ", ".join(repr(name) for name in names)
        if len(tests) == 1:
            test = tests[0]

            def check(instance, path, found):
                if not test(instance):
                    found.append(Violation(path, key, value, instance, schema,
                                           f"{_shown(instance)} is not of type {expected}"))
        else:
            def check(instance, path, found):
                for test in tests:
                    if test(instance):
                        return
                found.append(Violation(path, key, value, instance, schema,
                                       f"{_shown(instance)} is not of type {expected}"))
    elif key == "enum":
        # Only text values: jsonschema's equality of a text value with anything is plain ``==``.
        if not isinstance(value, list) or not all(isinstance(each, str) for each in value):
            raise _Unsupported(key)

        def check(instance, path, found):
            for each in value:
                if each == instance:
                    return
            found.append(Violation(path, key, value, instance, schema, f"{_shown(instance)} is not one of {value!r}"))
    elif key == "required":
        if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
            raise _Unsupported(key)

        def check(instance, path, found):
            if isinstance(instance, dict):
                for name in value:
                    if name not in instance:
                        found.append(Violation(path, key, value, instance, schema, f"{name!r} is a required property"))
    elif key == "properties":
        if not isinstance(value, dict):
            raise _Unsupported(key)
        children = tuple((name, _compile(sub)) for name, sub in value.items())

        def check(instance, path, found):
            if isinstance(instance, dict):
                for name, walk in children:
                    if name in instance:
                        walk(instance[name], (*path, name), found)
    elif key == "items":
        if "prefixItems" in schema:
            raise _Unsupported(key)
        walk_item = _compile(value)

        def check(instance, path, found):
            if isinstance(instance, list):
                for n, item in enumerate(instance):
                    walk_item(item, (*path, n), found)
    elif key == "additionalProperties":
        if value is not False or "patternProperties" in schema:
            raise _Unsupported(key)  # true (checks nothing) is left to jsonschema too: no schema uses it
        allowed = schema.get("properties", {})

        def check(instance, path, found):
            if isinstance(instance, dict):
                extras = {name for name in instance if name not in allowed}
                if extras:
                    names = sorted(extras, key=str)
                    found.append(Violation(path, key, value, instance, schema,
                                           f"Additional properties are not allowed ({', '.join(repr(n) for n in names)} "
                                           f"{'was' if len(names) == 1 else 'were'} unexpected)"))
    elif key == "minItems":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Unsupported(key)
        said = "should be non-empty" if value == 1 else "is too short"

        def check(instance, path, found):
            if isinstance(instance, list) and len(instance) < value:
                found.append(Violation(path, key, value, instance, schema, f"{_shown(instance)} {said}"))
    else:
        raise _Unsupported(key)
    return check


def nested_deeper_than(document: Any, limit: int) -> bool:
    """Whether lists and objects in ``document`` nest more than ``limit`` deep."""
    stack = [(document, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = value.values()
        elif not isinstance(value, list):
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in value)
    return False
