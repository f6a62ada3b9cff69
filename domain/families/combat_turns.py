"""combat-turns: the turns combatants take in an extraction chunk."""

from __future__ import annotations

from typing import Any, Literal, Mapping, get_args

from domain.evidence import SourceRef
from domain.families.base import (Adapted, EvaluationContext, EvidenceList, FamilyDocs, FamilySpec, JsonInt,
                                  ROLE_EXTRACTION, StrictModel)
from domain.families.common import (EvidenceAdapter, RecordIssues, durable_text, durable_value, raw_text,
                                    source_reference_issues)
from domain.frozen import Value
from domain.issues import Issue, quote_name, render_number
from domain.judges import JudgeSpec
from domain.source import Transcript

KEY = "combat-turns"
LIST_FIELD = "turns"
FIRST_ROUND = 1
# The durable contract stores `round` as an Avro long.
MAX_ROUND = 2**63 - 1

TurnKind = Literal[
    "attack", "cast_spell", "move", "dash", "disengage", "dodge", "help", "hide", "ready", "use_object", "other"
]
TURN_KINDS: tuple[str, ...] = get_args(TurnKind)
# Turn kinds that must name at least one target.
TARGETED_KINDS: tuple[str, ...] = ("attack",)


class TurnItem(StrictModel):
    round: JsonInt
    actor_name: str
    turn_kind: TurnKind
    target_names: tuple[str, ...]
    evidence: EvidenceList


class CombatTurnsResponse(StrictModel):
    turns: tuple[TurnItem, ...]


class TurnRecord(Value):  # built per record: a domain.frozen.Value, made in C
    round: int
    actor_name: str
    turn_kind: str
    target_names: tuple[str, ...]
    evidence: tuple[SourceRef, ...]


def adapt(response: CombatTurnsResponse, transcript: Transcript) -> Adapted:
    evidence = EvidenceAdapter(transcript)
    records = [
        TurnRecord(item.round, item.actor_name, item.turn_kind, item.target_names, evidence(item.evidence))
        for item in response.turns
    ]
    return evidence.adapted(records)


def _subject(actor_name: str | None, round_value: Any) -> str:
    when = f" in round {render_number(round_value)}" if type(round_value) is int else ""
    if actor_name is not None and actor_name.strip():
        return f"The turn of {quote_name(actor_name)}{when}"
    return f"A turn{when} with a blank `actor_name`"


def subject(record: TurnRecord) -> str:
    return _subject(record.actor_name, record.round)


def record_subject(record: Mapping[str, Any]) -> str:
    return _subject(durable_text(record, "actor_name"), durable_value(record, "round"))


_ROUND_FIX = "Give the combat round the turn belongs to: 1 for the first round, then 2, 3 and so on."


def validate_shape(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    """Actor named, target names non-blank, round >= 1, an attack names a target - every defect, one pass."""
    out = RecordIssues("combat_turns.shape", LIST_FIELD, subject, ctx.transcript.index)
    for n, rec in enumerate(adapted.records):
        if not rec.actor_name.strip():
            out.add_for(n, rec, "blank_actor_name", ".actor_name", "blank actor_name", "`actor_name` is blank.",
                        "Name who takes the turn, as the transcript names them.")
        if any(not name.strip() for name in rec.target_names):
            out.add_for(n, rec, "blank_target_name", ".target_names", "blank entry in target_names",
                        "`target_names` contains a blank name.",
                        "Name each target as the transcript does and remove blank entries.")
        if rec.round < FIRST_ROUND:
            out.add_for(n, rec, "round_below_one", ".round", f"round {render_number(rec.round)} < {FIRST_ROUND}",
                        f"`round` is {render_number(rec.round)}, but rounds are counted from 1.", _ROUND_FIX)
        elif rec.round > MAX_ROUND:
            out.add_for(n, rec, "round_out_of_range", ".round", "round exceeds the durable long range",
                        "`round` is far larger than any combat round.", _ROUND_FIX)
        if rec.turn_kind in TARGETED_KINDS and not any(name.strip() for name in rec.target_names):
            out.add_for(n, rec, "attack_without_target", ".target_names",
                        f"turn_kind {rec.turn_kind} with no non-blank target",
                        f"It is an `{rec.turn_kind}` turn but `target_names` names nobody.",
                        f"Name at least one target of the {rec.turn_kind} in `target_names`, or use the "
                        f"`turn_kind` that fits when nobody is attacked.")
    return out.issues()


def validate_source_references(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    return source_reference_issues("combat_turns.source_reference", ctx, adapted.records, subject, LIST_FIELD)


def durable_record(rec: TurnRecord) -> dict:
    return {
        "round": rec.round,
        "actor_name": rec.actor_name,
        "turn_kind": rec.turn_kind,
        "target_names": list(rec.target_names),
        "evidence": [ref.as_record() for ref in rec.evidence],
    }


def describe_raw_record(raw: Any) -> str | None:
    actor = raw_text(raw, "actor_name")
    if actor is None:
        return None
    return _subject(actor, raw.get("round"))


SPEC = FamilySpec(
    key=KEY,
    role=ROLE_EXTRACTION,
    chunk_kind="extraction",
    response_model=CombatTurnsResponse,
    list_field=LIST_FIELD,
    policy_version="combat-turns-policy-1",
    enums={"turn_kind": TURN_KINDS},
    adapt=adapt,
    validators=(validate_shape, validate_source_references),
    durable_record=durable_record,
    describe_raw_record=describe_raw_record,
    docs=FamilyDocs(
        intro="One record is one turn taken in combat.",
        fields={
            "records[].round": "The combat round of the turn, counted from 1.",
            "records[].actor_name": "Who takes the turn, as named in the transcript.",
            "records[].turn_kind": "The turn's main action.",
            "records[].target_names": "Who or what the turn targets, as named; at least one for an `attack`.",
        },
        example={"round": 3, "actor_name": "Troll", "turn_kind": "attack", "target_names": ["LAURA"],
                 "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 1153, "end_unit_id": 1154}]},
    ),
    record_subject=record_subject,
    policy_extras={"first_round": FIRST_ROUND, "max_round": MAX_ROUND, "targeted_kinds": list(TARGETED_KINDS)},
    judges=(JudgeSpec("combat-semantics", KEY, "the actor acts, the targets are targeted, the turn kind matches the "
                                               "cited lines"),),
)
