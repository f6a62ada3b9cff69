"""What the three per-chunk registries (NPCs, items, locations) share.

Each registry response is ``{"<list_field>": [{"name", "aliases", "description",
"evidence"}]}``; the rules are the same for all three (contract §4): names and
aliases non-blank and unique across entries after case and whitespace
folding, and every cited range inside the chunk. A family module declares its
response model (the top-level field differs) and its nouns, and gets its
:class:`FamilySpec` from :meth:`RegistryFamily.spec`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from domain.judges import JudgeSpec
from domain.evidence import SourceRef
from domain.families.base import (
    ROLE_REGISTRY,
    Adapted,
    EvaluationContext,
    EvidenceList,
    FamilyDocs,
    FamilySpec,
    StrictModel,
)
from domain.families.common import (
    EvidenceAdapter,
    RecordIssues,
    check_registry_identity,
    durable_text,
    raw_text,
    source_reference_issues,
)
from domain.frozen import Value
from domain.issues import Issue, quote_name
from domain.source import Transcript


class RegistryEntry(StrictModel):
    """One entry of a per-chunk registry response (all three kinds)."""

    name: str
    aliases: tuple[str, ...]
    description: str
    evidence: EvidenceList


class RegistryRecord(Value):  # built per record: a domain.frozen.Value, made in C
    name: str
    aliases: tuple[str, ...]
    description: str
    evidence: tuple[SourceRef, ...]


@dataclass(frozen=True)
class RegistryFamily:
    """One registry family: its key, the kind of registry it provides and its words."""

    key: str  # "npc-registry"
    kind: str  # registry kind: "npc"
    noun: str  # how guidance names one entry: "NPC"
    list_field: str  # "npcs"
    response_model: type[StrictModel]

    # --- naming -------------------------------------------------------------------

    def subject(self, rec: RegistryRecord) -> str:
        """The record as the model knows it: 'The NPC "Grog"'."""
        return self._subject(rec.name)

    def record_subject(self, record: Mapping[str, Any]) -> str:
        return self._subject(durable_text(record, "name"))

    def _subject(self, name: str) -> str:
        if name.strip():
            return f"The {self.noun} {quote_name(name)}"
        return f"The {self.noun} with a blank `name`"

    def describe_raw_record(self, raw: Any) -> str | None:
        name = raw_text(raw, "name")
        return None if name is None else f"The {self.noun} {quote_name(name)}"

    # --- adaptation -------------------------------------------------------------------

    def adapt(self, response: StrictModel, transcript: Transcript) -> Adapted:
        entries: tuple[RegistryEntry, ...] = getattr(response, self.list_field)
        evidence = EvidenceAdapter(transcript)
        records = [RegistryRecord(e.name, e.aliases, e.description, evidence(e.evidence)) for e in entries]
        return evidence.adapted(records)

    # --- validators ---------------------------------------------------------------------

    def validate_identity(self, adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
        """Names and aliases non-blank and unique across entries (folded) - every clash, one pass."""
        out = RecordIssues(f"{self.key}.identity", self.list_field, self.subject, ctx.transcript.index)
        check_registry_identity(out, self.noun, adapted.records)
        return out.issues()

    def validate_source_references(self, adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
        return source_reference_issues(f"{self.key}.source_reference", ctx, adapted.records, self.subject,
                                       self.list_field)

    # --- outputs ----------------------------------------------------------------------------

    @staticmethod
    def durable_record(rec: RegistryRecord) -> dict:
        return {
            "name": rec.name,
            "aliases": list(rec.aliases),
            "description": rec.description,
            "evidence": [ref.as_record() for ref in rec.evidence],
        }

    @staticmethod
    def registry_names(rec: RegistryRecord) -> tuple[str, ...]:
        return (rec.name, *rec.aliases)

    # --- the data dictionary ------------------------------------------------------------------

    def docs(self, intro: str, example: dict) -> FamilyDocs:
        """The family's data-dictionary entry: its own intro and example, the fields' meanings shared."""
        noun = self.noun
        return FamilyDocs(intro, {
            "records[].name": f"The {noun}'s name as the transcript most often gives it; unique within the artifact "
                              "after case and whitespace folding.",
            "records[].aliases": f"Other names, titles or spellings of the same {noun} in the chunk; empty when "
                                 "none. Never blank, never another entry's name.",
            "records[].description": f"A short description of the {noun}, from the chunk.",
        }, example)

    def spec(self, policy_version: str, docs: FamilyDocs, judges: tuple[JudgeSpec, ...] = ()) -> FamilySpec:
        return FamilySpec(
            key=self.key,
            role=ROLE_REGISTRY,
            chunk_kind="extraction",
            response_model=self.response_model,
            list_field=self.list_field,
            policy_version=policy_version,
            enums={},
            adapt=self.adapt,
            validators=(self.validate_identity, self.validate_source_references),
            durable_record=self.durable_record,
            describe_raw_record=self.describe_raw_record,
            docs=docs,
            registry_kind=self.kind,
            registry_names=self.registry_names,
            judges=judges,
            record_subject=self.record_subject,
        )

