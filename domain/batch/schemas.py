"""Each provider's documented JSON Schema subset, checked before anything is written.

A family's LLM schema is sent as the provider's structured-output schema. The
providers accept different subsets of JSON Schema, and a schema outside the
subset is rejected by the provider at submission time or, worse, silently
loosened. So the export checks every schema against the target's subset first
and fails naming each offending place (a JSON pointer into the schema).

- OpenAI strict structured outputs: every object lists all its properties in
  ``required`` and sets ``additionalProperties: false``; no ``allOf``, ``not``,
  ``oneOf``, conditionals or dependent keywords; at most 10 levels of object
  nesting, 5000 properties and 1000 enum values.
- Anthropic structured outputs: no numeric constraints, no string length
  constraints, no array constraints beyond ``minItems`` 0 or 1, every object
  ``additionalProperties: false``, no external ``$ref``.
- Gemini / Vertex ``responseSchema`` is an OpenAPI 3.0 Schema subset, not JSON
  Schema: upper-case type names, ``nullable: true`` instead of a type array.
  :func:`to_gemini_schema` converts honestly and fails on anything it cannot
  express. ``additionalProperties: false`` is kept for Vertex AI, whose
  ``Schema`` has the field (aiplatform v1 ``Schema.additionalProperties``;
  google-genai 3.6.1 ``types.Schema.additional_properties``, refused only for
  the Gemini Developer API by ``_transformers._raise_for_unsupported_mldev_properties``),
  and dropped for the Gemini API, whose ``Schema`` has no such field; the job's
  validators reject extra keys either way.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from domain.errors import NotariusError

# Root annotations that describe the file, not the response (the provider's
# schema name carries the title). They are dropped from what is sent.
ROOT_ANNOTATIONS = ("$schema", "$id", "$comment", "title")

_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_ONE = ("items", "not", "if", "then", "else", "contains", "additionalProperties")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")

OPENAI_FORBIDDEN = ("allOf", "not", "oneOf", "if", "then", "else", "dependentRequired", "dependentSchemas",
                    "patternProperties", "unevaluatedProperties")
OPENAI_MAX_DEPTH = 10
OPENAI_MAX_PROPERTIES = 5000
OPENAI_MAX_ENUM_VALUES = 1000

ANTHROPIC_FORBIDDEN = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                       "minLength", "maxLength", "maxItems", "uniqueItems", "contains",
                       "minProperties", "maxProperties")

GEMINI_TYPES = {"string": "STRING", "number": "NUMBER", "integer": "INTEGER", "boolean": "BOOLEAN",
                "array": "ARRAY", "object": "OBJECT"}
_GEMINI_KEYWORDS = frozenset({"type", "properties", "required", "items", "enum", "description", "title", "format",
                              "minItems", "maxItems", "minimum", "maximum", "additionalProperties"})


class SchemaSubsetError(NotariusError, ValueError):
    """A schema outside a provider's subset; ``problems`` names every offending place."""

    def __init__(self, problems: tuple[str, ...]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def provider_schema(schema: Mapping[str, Any]) -> dict:
    """The LLM schema as sent to OpenAI and Anthropic: root annotations dropped."""
    return {key: value for key, value in schema.items() if key not in ROOT_ANNOTATIONS}


def iter_nodes(schema: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, dict, int]]:
    """(JSON pointer, schema node, object nesting depth) for every sub-schema."""
    if not isinstance(schema, dict):
        return
    depth += _is_object(schema)
    yield path or "/", schema, depth
    for key in _SUBSCHEMA_ONE:
        if isinstance(schema.get(key), dict):
            yield from iter_nodes(schema[key], f"{path}/{key}", depth)
    for key in _SUBSCHEMA_LISTS:
        for n, sub in enumerate(schema.get(key) or ()):
            yield from iter_nodes(sub, f"{path}/{key}/{n}", depth)
    for key in _SUBSCHEMA_MAPS:
        sub_map = schema.get(key)
        if isinstance(sub_map, dict):
            for name, sub in sub_map.items():
                yield from iter_nodes(sub, f"{path}/{key}/{_escape(name)}", depth)


def openai_strict_problems(schema: Mapping[str, Any]) -> tuple[str, ...]:
    problems: list[str] = []
    if schema.get("type") != "object":
        problems.append("/: the root must be an object (not a union or another type)")
    properties = enum_values = 0
    for path, node, depth in iter_nodes(dict(schema)):
        problems.extend(f"{path}: '{kw}' is not supported" for kw in OPENAI_FORBIDDEN if kw in node)
        if depth > OPENAI_MAX_DEPTH:
            problems.append(f"{path}: more than {OPENAI_MAX_DEPTH} levels of object nesting")
        enum_values += len(node.get("enum") or ())
        if _is_object(node):
            props = node.get("properties") or {}
            properties += len(props)
            problems.extend(_closed_object_problems(path, node))
            optional = [name for name in props if name not in (node.get("required") or ())]
            if optional:
                problems.append(f"{path}: every property must be required; optional: {', '.join(optional)}")
    if properties > OPENAI_MAX_PROPERTIES:
        problems.append(f"/: {properties} properties, more than {OPENAI_MAX_PROPERTIES}")
    if enum_values > OPENAI_MAX_ENUM_VALUES:
        problems.append(f"/: {enum_values} enum values, more than {OPENAI_MAX_ENUM_VALUES}")
    return tuple(problems)


def anthropic_problems(schema: Mapping[str, Any]) -> tuple[str, ...]:
    problems: list[str] = []
    for path, node, _ in iter_nodes(dict(schema)):
        problems.extend(f"{path}: '{kw}' is not supported" for kw in ANTHROPIC_FORBIDDEN if kw in node)
        if node.get("minItems", 0) not in (0, 1):
            problems.append(f"{path}: minItems {node['minItems']!r}; only 0 or 1 is supported")
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            problems.append(f"{path}: external $ref {ref!r} is not supported")
        if _is_object(node):
            problems.extend(_closed_object_problems(path, node))
    return tuple(problems)


def gemini_problems(schema: Mapping[str, Any], *, keep_closed: bool = False) -> tuple[str, ...]:
    problems: list[str] = []
    _to_gemini(provider_schema(schema), "", problems, keep_closed)
    return tuple(problems)


def to_gemini_schema(schema: Mapping[str, Any], *, keep_closed: bool = False) -> dict:
    """The LLM schema as a Gemini/Vertex ``responseSchema`` (OpenAPI subset).

    ``keep_closed`` keeps ``additionalProperties: false`` on the objects that set
    it (Vertex AI's ``Schema`` has the field; the Gemini API's has not, so it is
    dropped there). Raises :class:`SchemaSubsetError` when something cannot be
    expressed.
    """
    problems: list[str] = []
    converted = _to_gemini(provider_schema(schema), "", problems, keep_closed)
    if problems:
        raise SchemaSubsetError(tuple(problems))
    return converted


def _to_gemini(node: Any, path: str, problems: list[str], keep_closed: bool = False) -> dict:
    where = path or "/"
    if not isinstance(node, dict):
        problems.append(f"{where}: a schema must be an object")
        return {}
    problems.extend(f"{where}: '{key}' cannot be expressed in Gemini's responseSchema"
                    for key in node if key not in _GEMINI_KEYWORDS)
    out: dict = {}
    gemini_type, nullable = _gemini_type(node, where, problems)
    if gemini_type:
        out["type"] = gemini_type
    if nullable:
        out["nullable"] = True
    for key in ("title", "description", "format"):
        if isinstance(node.get(key), str):
            out[key] = node[key]
    if "enum" in node:
        values = node["enum"]
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            problems.append(f"{where}: Gemini enums must list strings")
        else:
            out.setdefault("format", "enum")
            out["enum"] = list(values)
    extra = node.get("additionalProperties", False)
    if extra is not False:
        kept = "which is kept" if keep_closed else "which is dropped"
        problems.append(f"{where}: additionalProperties {extra!r} cannot be expressed (only false, {kept})")
    if isinstance(node.get("properties"), dict):
        out["properties"] = {name: _to_gemini(sub, f"{path}/properties/{_escape(name)}", problems, keep_closed)
                             for name, sub in node["properties"].items()}
        out["propertyOrdering"] = list(node["properties"])  # keep the documented key order
    if "required" in node:
        out["required"] = list(node["required"])
    if keep_closed and node.get("additionalProperties") is False:
        out["additionalProperties"] = False
    if "items" in node:
        out["items"] = _to_gemini(node["items"], f"{path}/items", problems, keep_closed)
    for key in ("minItems", "maxItems", "minimum", "maximum"):
        if key in node:
            out[key] = node[key]
    return out


def _gemini_type(node: dict, where: str, problems: list[str]) -> tuple[str | None, bool]:
    declared = node.get("type")
    if declared is None:
        if "properties" in node:
            return "OBJECT", False
        problems.append(f"{where}: a schema without 'type' cannot be expressed")
        return None, False
    names = [declared] if isinstance(declared, str) else list(declared) if isinstance(declared, list) else []
    nullable = "null" in names
    concrete = [name for name in names if name != "null"]
    if len(concrete) != 1 or concrete[0] not in GEMINI_TYPES:
        problems.append(f"{where}: type {declared!r} cannot be expressed (one type, optionally with null)")
        return None, nullable
    return GEMINI_TYPES[concrete[0]], nullable


def _closed_object_problems(path: str, node: dict) -> list[str]:
    if node.get("additionalProperties") is not False:
        return [f"{path}: objects must set additionalProperties to false"]
    return []


def _is_object(node: dict) -> bool:
    declared = node.get("type")
    return declared == "object" or (isinstance(declared, list) and "object" in declared) or "properties" in node


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")
