"""enemy-events: what happens to the enemies the party faces in an extraction chunk."""

from __future__ import annotations

from typing import Any, Literal, Mapping, get_args

from domain.evidence import SourceRef
from domain.families.base import (Adapted, EvaluationContext, EvidenceList, FamilyDocs, FamilySpec, ROLE_EXTRACTION,
                                  StrictModel, fold_name)
from domain.families.common import EvidenceAdapter, RecordIssues, durable_text, raw_text, source_reference_issues
from domain.frozen import Value
from domain.issues import Correction, Issue, IssueCollector, quote_name, render_ranges
from domain.source import Transcript

KEY = "enemy-events"
LIST_FIELD = "events"

EventKind = Literal["appeared", "engaged", "damaged", "defeated", "fled", "surrendered"]
EVENT_KINDS: tuple[str, ...] = get_args(EventKind)
ENGAGED = "engaged"
# How many cited ranges of one enemy's engaged events the guidance lists before "and N more".
MAX_ENGAGED_RANGES_SHOWN = 8
MAX_SPELLINGS_SHOWN = 4


class EventItem(StrictModel):
    enemy_name: str
    kind: EventKind
    evidence: EvidenceList


class EnemyEventsResponse(StrictModel):
    events: tuple[EventItem, ...]


class EventRecord(Value):  # built per record: a domain.frozen.Value, made in C
    enemy_name: str
    kind: str
    evidence: tuple[SourceRef, ...]


def adapt(response: EnemyEventsResponse, transcript: Transcript) -> Adapted:
    evidence = EvidenceAdapter(transcript)
    records = [EventRecord(item.enemy_name, item.kind, evidence(item.evidence)) for item in response.events]
    return evidence.adapted(records)


def _subject(enemy_name: str | None, kind: str | None) -> str:
    what = f"The {kind} event" if kind in EVENT_KINDS else "The event"
    if enemy_name is not None and enemy_name.strip():
        return f"{what} of the enemy {quote_name(enemy_name)}"
    return f"{what} with a blank `enemy_name`"


def subject(record: EventRecord) -> str:
    return _subject(record.enemy_name, record.kind)


def record_subject(record: Mapping[str, Any]) -> str:
    return _subject(durable_text(record, "enemy_name"), durable_text(record, "kind"))


def validate_shape(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    out = RecordIssues("enemy_events.shape", LIST_FIELD, subject, ctx.transcript.index)
    for n, rec in enumerate(adapted.records):
        if not rec.enemy_name.strip():
            out.add_for(n, rec, "blank_enemy_name", ".enemy_name", "blank enemy_name", "`enemy_name` is blank.",
                        "Name the enemy as the transcript does.")
    return out.issues()


def validate_engagement(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    """At most one `engaged` event per enemy (case/space folded); every duplicated enemy, one issue each."""
    out = IssueCollector("enemy_events.engagement")
    engaged: dict[str, list[tuple[int, EventRecord]]] = {}
    for n, rec in enumerate(adapted.records):
        folded = fold_name(rec.enemy_name)
        if rec.kind == ENGAGED and folded:  # a blank name is the shape validator's finding
            engaged.setdefault(folded, []).append((n, rec))
    for folded, events in engaged.items():  # first-seen (earliest evidence) order
        if len(events) < 2:
            continue
        records = [rec for _, rec in events]
        spellings = list(dict.fromkeys(quote_name(rec.enemy_name) for rec in records))
        ranges = render_ranges(((ref.start_unit_id, ref.end_unit_id) for rec in records for ref in rec.evidence),
                               limit=MAX_ENGAGED_RANGES_SHOWN, known=ctx.transcript.index)
        also = ""
        if len(spellings) > 1:
            quoted = spellings[:MAX_SPELLINGS_SHOWN]
            if len(spellings) > MAX_SPELLINGS_SHOWN:
                quoted.append(f"{len(spellings) - MAX_SPELLINGS_SHOWN} other spellings")
            also = f" (written as {', '.join(quoted[:-1])} and {quoted[-1]}, which name the same enemy)"
        locations = ", ".join(f"{LIST_FIELD}[{n}]" for n, _ in events)
        out.add(
            "duplicate_engaged", locations,
            f"{len(events)} engaged events for enemy {folded!r} at {locations}",
            Correction(
                f"The enemy {quote_name(records[0].enemy_name)}", ranges,
                f"It has {len(events)} `engaged` events{also}, but an enemy is engaged at most once per response.",
                "Keep a single `engaged` event for this enemy, citing in its `evidence` every range where the "
                "fight with it starts, and give each other event the `kind` that fits (appeared, damaged, "
                "defeated, fled or surrendered) or drop it.",
            ),
        )
    return out.issues()


def validate_source_references(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    return source_reference_issues("enemy_events.source_reference", ctx, adapted.records, subject, LIST_FIELD)


def durable_record(rec: EventRecord) -> dict:
    return {
        "enemy_name": rec.enemy_name,
        "kind": rec.kind,
        "evidence": [ref.as_record() for ref in rec.evidence],
    }


def describe_raw_record(raw: Any) -> str | None:
    name = raw_text(raw, "enemy_name")
    if name is None:
        return None
    kind = raw.get("kind")
    return _subject(name, kind if isinstance(kind, str) else None)


SPEC = FamilySpec(
    key=KEY,
    role=ROLE_EXTRACTION,
    chunk_kind="extraction",
    response_model=EnemyEventsResponse,
    list_field=LIST_FIELD,
    policy_version="enemy-events-policy-1",
    enums={"kind": EVENT_KINDS},
    adapt=adapt,
    validators=(validate_shape, validate_engagement, validate_source_references),
    durable_record=durable_record,
    describe_raw_record=describe_raw_record,
    docs=FamilyDocs(
        intro="One record is one thing that happens to or with an enemy.",
        fields={
            "records[].enemy_name": "The enemy as named in the transcript.",
            "records[].kind": "What happens to or with the enemy; at most one `engaged` event per enemy "
                              "(case-folded) in an artifact.",
        },
        example={"enemy_name": "Noble", "kind": "engaged",
                 "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 7, "end_unit_id": 8}]},
    ),
    record_subject=record_subject,
    policy_extras={"single_engagement_kind": ENGAGED, "max_engaged_ranges_shown": MAX_ENGAGED_RANGES_SHOWN,
                   "max_spellings_shown": MAX_SPELLINGS_SHOWN},
)
