"""A run's accepted registry artifacts, read back as another step's input.

The next run reads them as prior registries (``--prior-registries``: the names
each kind already holds); export-batch reads the chunk registries among them
(``--registries``: the entries a reconciliation prompt lists). Both check a
line the same way, here; each keeps the dead-letter reasons it has always
given, and the families it takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import orjson

from domain.errors import NotariusError
from domain.evidence import SourceRef
from domain.families import FAMILIES
from domain.families.base import ROLE_REGISTRY, FamilySpec, fold_name
from domain.families.registry_family import RegistryRecord


class RegistryArtifactError(NotariusError, ValueError):
    """A line that is not a usable registry artifact; its text is the dead letter's reason."""


@dataclass(frozen=True)
class RegistryArtifactReader:
    """What one reader takes (``accepts``) and how its dead letters word each refusal."""

    accepts: Callable[[FamilySpec], bool]
    not_json: str
    not_object: str
    not_registry: str  # "{family}": the artifact's family, shown
    wrong_source: str

    def read(self, source_id: str, line: bytes) -> tuple[FamilySpec, dict[str, Any]]:
        """The artifact's family and the artifact: a JSON object of an accepted family, of this source."""
        try:
            artifact = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise RegistryArtifactError(self.not_json) from None
        if not isinstance(artifact, dict):
            raise RegistryArtifactError(self.not_object)
        family = artifact.get("family")
        spec = FAMILIES.get(family) if isinstance(family, str) else None  # a list or object would not hash
        if spec is None or not self.accepts(spec):
            raise RegistryArtifactError(self.not_registry.format(family=repr(artifact.get("family"))))
        if artifact.get("source_id") != source_id:
            raise RegistryArtifactError(self.wrong_source)
        return spec, artifact


PRIOR_REGISTRIES = RegistryArtifactReader(
    accepts=lambda spec: spec.provides_registry,  # chunk registries and reconciliations
    not_json="prior registry artifact is not valid JSON",
    not_object="prior registry artifact is not a JSON object",
    not_registry="prior artifact of family {family} is not a registry",
    wrong_source="prior registry artifact source_id does not match its key",
)

CHUNK_REGISTRIES = RegistryArtifactReader(
    accepts=lambda spec: spec.role == ROLE_REGISTRY,
    not_json="registry artifact is not valid JSON",
    not_object="registry artifact is not a JSON object",
    not_registry="artifact of family {family} is not a chunk registry",
    wrong_source="registry artifact source_id or chunk_id is wrong",
)


def prior_registry_names(source_id: str, line: bytes) -> tuple[str, frozenset[str]]:
    """Registry kind and folded names (names and aliases) of one prior registry artifact."""
    spec, artifact = PRIOR_REGISTRIES.read(source_id, line)
    records = artifact.get("records")
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise RegistryArtifactError("prior registry artifact has no list of records")
    found: set[str] = set()
    for record in records:
        aliases = record.get("aliases") or []
        if not isinstance(aliases, list):
            raise RegistryArtifactError("prior registry record aliases must be a list of strings")
        values = [record.get("name"), *aliases]
        if not all(isinstance(v, str) for v in values):
            raise RegistryArtifactError("prior registry record names must be strings")
        found.update(fold_name(v) for v in values if v.strip())
    return spec.registry_kind, frozenset(found)  # type: ignore[return-value]


def chunk_registry_records(source_id: str, line: bytes) -> tuple[str, str, tuple[RegistryRecord, ...]]:
    """Registry kind, chunk id and records of one accepted chunk registry artifact."""
    spec, artifact = CHUNK_REGISTRIES.read(source_id, line)
    if not isinstance(artifact.get("chunk_id"), str):
        raise RegistryArtifactError(CHUNK_REGISTRIES.wrong_source)
    try:
        records = tuple(
            RegistryRecord(r["name"], tuple(r["aliases"]), r["description"],
                           tuple(SourceRef(e["source_id"], e["start_unit_id"], e["end_unit_id"]) for e in r["evidence"]))
            for r in artifact["records"])
    except (KeyError, TypeError) as exc:
        raise RegistryArtifactError(f"registry artifact records are not durable registry records "
                                    f"({type(exc).__name__}: {exc})") from None
    return spec.registry_kind, artifact["chunk_id"], records  # type: ignore[return-value]
