"""What the three occurrence families (NPCs, items, locations) share.

An occurrence response is ``{"occurrences": [{"<name_field>", "kind", ...,
"evidence"}]}``: one record per appearance of a registry member in the chunk.
Common rules (contract §4): the name is non-blank, it names a member of the
source's accepted registry of the same kind (``ctx.registry``, set by the
engine; without one the candidate is deferred before validation), and every
cited range lies inside the chunk. ``kind`` is a closed set, enforced by the
LLM schema and the ``Literal`` of the response model alike.

Item occurrences also carry ``holder_name``; the family module passes its own
extra validators for what only it knows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from domain.evidence import SourceRef
from domain.families.base import (
    ROLE_OCCURRENCE,
    Adapted,
    EvaluationContext,
    FamilyDocs,
    FamilySpec,
    StrictModel,
    Validator,
)
from domain.families.common import (EvidenceAdapter, RecordIssues, check_membership, durable_text, raw_text,
                                    source_reference_issues)
from domain.frozen import Value
from domain.issues import Issue, quote_name
from domain.source import Transcript

LIST_FIELD = "occurrences"


class OccurrenceRecord(Value):  # built per record: a domain.frozen.Value, made in C
    name: str
    kind: str
    # Only families whose response has ``holder_name`` (items) set it; None otherwise.
    holder_name: str | None
    evidence: tuple[SourceRef, ...]


@dataclass(frozen=True)
class OccurrenceFamily:
    key: str  # "npc-occurrences"
    registry_kind: str  # "npc"
    noun: str  # "NPC"
    name_field: str  # "npc_name"
    kinds: tuple[str, ...]
    response_model: type[StrictModel]
    has_holder: bool = False

    # --- naming -------------------------------------------------------------------

    def subject(self, rec: OccurrenceRecord) -> str:
        """'The "speaking" occurrence of the NPC "Grog"' (plus the holder for items)."""
        return self._subject(rec.name, rec.kind, rec.holder_name)

    def record_subject(self, record: Mapping[str, Any]) -> str:
        return self._subject(durable_text(record, self.name_field), durable_text(record, "kind"),
                             durable_text(record, "holder_name"))

    def _subject(self, name: str, kind: str, holder_name: str | None) -> str:
        head = f"The {quote_name(kind)} occurrence"
        if name.strip():
            text = f"{head} of the {self.noun} {quote_name(name)}"
        else:
            text = f"{head} with a blank `{self.name_field}`"
        if self.has_holder and holder_name is not None and holder_name.strip():
            text += f" held by {quote_name(holder_name)}"
        return text

    def describe_raw_record(self, raw: Any) -> str | None:
        name = raw_text(raw, self.name_field)
        if name is None:
            return None
        kind = raw_text(raw, "kind")
        head = f"The {quote_name(kind)} occurrence" if kind in self.kinds else "An occurrence"
        return f"{head} of the {self.noun} {quote_name(name)}"

    # --- adaptation ----------------------------------------------------------------------

    def adapt(self, response: StrictModel, transcript: Transcript) -> Adapted:
        evidence = EvidenceAdapter(transcript)
        records = [
            OccurrenceRecord(
                getattr(item, self.name_field),
                item.kind,
                getattr(item, "holder_name", None) if self.has_holder else None,
                evidence(item.evidence),
            )
            for item in getattr(response, LIST_FIELD)
        ]
        return evidence.adapted(records)

    # --- validators ------------------------------------------------------------------------

    def validate_shape(self, adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
        """The name is non-blank - every record, one pass (holder rules belong to the item family)."""
        out = RecordIssues(f"{self.key}.shape", LIST_FIELD, self.subject, ctx.transcript.index)
        for n, rec in enumerate(adapted.records):
            if not rec.name.strip():
                out.add_for(n, rec, f"blank_{self.name_field}", f".{self.name_field}", f"blank {self.name_field}",
                            f"`{self.name_field}` is blank.",
                            f"Give the name of the {self.noun} exactly as the list of known "
                            f"{self.noun}s spells it, or one of its aliases.")
        return out.issues()

    def validate_membership(self, adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
        """Every occurrence names a known member of the accepted registry (folded, aliases count)."""
        out = RecordIssues(f"{self.key}.membership", LIST_FIELD, self.subject, ctx.transcript.index)
        for n, rec in enumerate(adapted.records):
            if not rec.name.strip():
                continue  # a blank name is reported once, by the shape validator
            check_membership(out, ctx, self.noun, n, rec, rec.name, f".{self.name_field}")
        return out.issues()

    def validate_source_references(self, adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
        return source_reference_issues(f"{self.key}.source_reference", ctx, adapted.records, self.subject, LIST_FIELD)

    # --- outputs ---------------------------------------------------------------------------

    def durable_record(self, rec: OccurrenceRecord) -> dict:
        record: dict[str, Any] = {self.name_field: rec.name, "kind": rec.kind}
        if self.has_holder:
            record["holder_name"] = rec.holder_name
        record["evidence"] = [ref.as_record() for ref in rec.evidence]
        return record

    # --- the data dictionary ------------------------------------------------------------------

    def docs(self, intro: str, kinds: str, example: dict, more_fields: dict[str, str] | None = None) -> FamilyDocs:
        """The family's data-dictionary entry: its intro, what its kinds mean, its own fields and example; the
        name's meaning shared."""
        registry = f"{self.registry_kind}-registry"
        reconciliation = f"{self.registry_kind}-reconciliation"
        return FamilyDocs(intro, {
            f"records[].{self.name_field}": f"The {self.noun} as named in the chunk: a name or alias of the source's "
                                            f"accepted {self.noun} registry (its `{reconciliation}` artifact when one "
                                            f"is accepted, else the union of its `{registry}` artifacts).",
            "records[].kind": kinds,
            **(more_fields or {}),
        }, example)

    def spec(self, policy_version: str, docs: FamilyDocs, extra_validators: tuple[Validator, ...] = ()) -> FamilySpec:
        return FamilySpec(
            key=self.key,
            role=ROLE_OCCURRENCE,
            chunk_kind="extraction",
            response_model=self.response_model,
            list_field=LIST_FIELD,
            policy_version=policy_version,
            enums={"kind": self.kinds},
            adapt=self.adapt,
            validators=(self.validate_shape, self.validate_membership, *extra_validators,
                        self.validate_source_references),
            durable_record=self.durable_record,
            describe_raw_record=self.describe_raw_record,
            docs=docs,
            record_subject=self.record_subject,
            registry_kind=self.registry_kind,
        )

