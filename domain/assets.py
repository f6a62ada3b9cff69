"""Packaged assets (prompts, schemas, catalogs) and their fingerprints.

Assets are read through importlib.resources from the ``assets`` package, so a
checkout, an installed wheel and a Dataflow worker all load the same bytes.
An asset fingerprint is the sha256 of the exact bytes; a composed prompt is
hashed as the model would see it, includes expanded.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from importlib import resources

import orjson

from domain.errors import NotariusError

SHARED_EVIDENCE_PROMPT = "dnd/shared/prompts/common-dnd-extraction-evidence.md"

# An include is a line of its own: {{include dnd/shared/prompts/x.md}}
_INCLUDE_LINE = re.compile(rb"^\{\{include ([A-Za-z0-9_./-]+)\}\}[ \t]*\r?\n?", re.MULTILINE)


class AssetError(NotariusError, LookupError):
    """A packaged asset is missing or unusable: a packaging bug, not bad input."""


@lru_cache(maxsize=None)
def read_asset(path: str) -> bytes:
    """The exact bytes of ``assets/<path>``."""
    try:
        return resources.files("assets").joinpath(path).read_bytes()
    except (FileNotFoundError, IsADirectoryError) as exc:
        raise AssetError(f"packaged asset {path!r} not found") from exc


@lru_cache(maxsize=None)
def load_json_asset(path: str):
    return orjson.loads(read_asset(path))


def fingerprint(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def compose_prompt(path: str, _depth: int = 0) -> bytes:
    """The prompt at ``path`` with every include line replaced, byte for byte,
    by the included asset (which may include others, up to a small depth)."""
    if _depth > 4:
        raise AssetError(f"prompt includes nest too deeply at {path!r}")
    return compose_text(read_asset(path), _depth)


def compose_text(text: bytes, _depth: int = 0) -> bytes:
    """Prompt text (packaged or not, e.g. an earlier revision kept elsewhere) with its
    include lines replaced by the packaged assets they name."""
    return _INCLUDE_LINE.sub(lambda m: compose_prompt(m.group(1).decode(), _depth + 1), text)


def llm_schema_path(family: str) -> str:
    return f"dnd/{family}/schemas/dnd_{family.replace('-', '_')}_llm.v1.json"


def durable_schema_path(family: str) -> str:
    return f"dnd/{family}/schemas/dnd_{family.replace('-', '_')}.v1.json"


def durable_avro_schema_path(family: str) -> str:
    return f"dnd/{family}/schemas/dnd_{family.replace('-', '_')}.v1.avsc"


def arrow_schema_path(avro_path: str) -> str:
    """The Arrow schema derived from an Avro one (``domain.schemas.arrow_schema``): ``x.v1.avsc`` -> ``x.v1.arrow.json``."""
    if not avro_path.endswith(".avsc"):
        raise ValueError(f"not an Avro schema path: {avro_path}")
    return avro_path[: -len(".avsc")] + ".arrow.json"


def prompt_path(family: str) -> str:
    return f"dnd/{family}/prompts/{family}.md"


@lru_cache(maxsize=None)
def composed_prompt(family: str) -> bytes:
    return compose_prompt(prompt_path(family))


@lru_cache(maxsize=None)
def current_fingerprints(family: str) -> tuple[str, str]:
    """(prompt fingerprint, LLM schema fingerprint) of ``family`` as shipped now."""
    return fingerprint(composed_prompt(family)), fingerprint(read_asset(llm_schema_path(family)))


# The contract's input records (contract §3.1, §3.2) as Avro schemas.
TRANSCRIPT_INPUT_SCHEMA = "inputs/transcript.v1.avsc"
CANDIDATE_INPUT_SCHEMA = "inputs/model_candidate.v1.avsc"
VERDICT_INPUT_SCHEMA = "inputs/verdict.v1.avsc"  # contract §3.3


def input_field_shape(path: str) -> dict:
    """The field names a contract input schema names, nested: {name: sub-shape or None}.

    Reading keeps only these fields of an Avro record (a wider schema's other
    fields are ignored, whatever their type); None keeps a value as it is.
    """
    return _record_shape(load_json_asset(path))


def _record_shape(avro_type):
    if isinstance(avro_type, list):  # a union: the first branch with fields of its own
        shapes = [shape for shape in map(_record_shape, avro_type) if shape is not None]
        return shapes[0] if shapes else None
    if isinstance(avro_type, dict):
        if avro_type.get("type") == "record":
            return {f["name"]: _record_shape(f["type"]) for f in avro_type["fields"]}
        if avro_type.get("type") == "array":
            return _record_shape(avro_type["items"])
    return None
