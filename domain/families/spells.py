"""spells: spells cast in an extraction chunk, checked against the SRD 5.1 catalog."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from domain.judges import JudgeSpec
from domain.assets import fingerprint, load_json_asset, read_asset
from domain.evidence import SourceRef
from domain.families.base import (Adapted, EvaluationContext, EvidenceList, FamilyDocs, FamilySpec, JsonInt,
                                  ROLE_EXTRACTION, StrictModel, fold_name)
from domain.families.common import EvidenceAdapter, RecordIssues, durable_text, raw_text, source_reference_issues
from domain.frozen import Value
from domain.issues import Issue, quote_name, render_number
from domain.source import Transcript

KEY = "spells"
MAX_LEVEL = 9
CATALOG_ASSET = "dnd/spells/catalog/srd-5.1-spells.json"


class Cast(StrictModel):
    level: JsonInt | None
    as_ritual: bool
    target_names: tuple[str, ...]


class SpellItem(StrictModel):
    spell_name: str
    caster_name: str
    cast: Cast
    evidence: EvidenceList


class SpellsResponse(StrictModel):
    spells: tuple[SpellItem, ...]


class SpellRecord(Value):  # built per record: a domain.frozen.Value, made in C
    spell_name: str
    caster_name: str
    level: JsonInt | None
    as_ritual: bool
    target_names: tuple[str, ...]
    evidence: tuple[SourceRef, ...]


@dataclass(frozen=True, slots=True)
class CatalogSpell:
    name: str
    level: int
    ritual: bool


@lru_cache(maxsize=1)
def spell_catalog() -> dict[str, CatalogSpell]:
    """SRD 5.1 spells by folded name."""
    rows = load_json_asset(CATALOG_ASSET)["spells"]
    return {fold_name(r["name"]): CatalogSpell(r["name"], r["level"], r["ritual"]) for r in rows}


def adapt(response: SpellsResponse, transcript: Transcript) -> Adapted:
    evidence = EvidenceAdapter(transcript)
    records = [
        SpellRecord(
            item.spell_name,
            item.caster_name,
            item.cast.level,
            item.cast.as_ritual,
            item.cast.target_names,
            evidence(item.evidence),
        )
        for item in response.spells
    ]
    return evidence.adapted(records)


def _subject(spell_name: str, caster_name: str) -> str:
    return f"The spell {quote_name(spell_name)} cast by {quote_name(caster_name)}"


def subject(record: SpellRecord) -> str:
    return _subject(record.spell_name, record.caster_name)


def record_subject(record: Mapping[str, Any]) -> str:
    return _subject(durable_text(record, "spell_name"), durable_text(record, "caster_name"))


def validate_shape(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    """Names non-blank, level null or 0-9, target names non-blank - every defect, one pass."""
    out = RecordIssues("spells.shape", "spells", subject, ctx.transcript.index)
    for n, rec in enumerate(adapted.records):
        if not rec.spell_name.strip():
            out.add_for(n, rec, "blank_spell_name", ".spell_name", "blank spell_name",
                        "`spell_name` is blank.", "Name the spell as the transcript does.")
        if not rec.caster_name.strip():
            out.add_for(n, rec, "blank_caster_name", ".caster_name", "blank caster_name",
                        "`caster_name` is blank.", "Name who casts the spell.")
        if rec.level is not None and not 0 <= rec.level <= MAX_LEVEL:
            out.add_for(n, rec, "level_out_of_range", ".cast.level", f"cast.level {rec.level} outside 0..9",
                        f"`cast.level` is {render_number(rec.level)}, outside 0 to 9.",
                        "Give a level from 0 to 9, or null when the excerpt does not say.")
        if any(not name.strip() for name in rec.target_names):
            out.add_for(n, rec, "blank_target_name", ".cast.target_names", "blank entry in cast.target_names",
                        "`cast.target_names` contains a blank name.",
                        "Name each target, or leave the list empty when nobody is named.")
    return out.issues()


def validate_catalog(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    """Known SRD spells: level never below the base level; ritual only for ritual spells."""
    out = RecordIssues("spells.catalog", "spells", subject, ctx.transcript.index)
    catalog = spell_catalog()
    for n, rec in enumerate(adapted.records):
        known = catalog.get(fold_name(rec.spell_name))
        if known is None:
            continue  # unknown (homebrew, misheard) spells are allowed
        level = rec.level
        level_known = level is not None and 0 <= level <= MAX_LEVEL
        # A cantrip is cast at level 0; any other spell at its base level or higher.
        if level_known and known.level == 0 and level != 0:
            out.add_for(n, rec, "cantrip_level", ".cast.level", f"{known.name} is a cantrip, level {level}",
                        f"{known.name} is a cantrip, but `cast.level` is {level}.", "Set `cast.level` to 0 or null.")
        elif level_known and level < known.level:
            out.add_for(n, rec, "below_base_level", ".cast.level", f"{known.name} base level {known.level}, cast.level {level}",
                        f"{known.name} is a level {known.level} spell, but `cast.level` is {level}.",
                        f"Set `cast.level` to {known.level} or higher, or null when the excerpt does not say.")
        if rec.as_ritual and not known.ritual:
            out.add_for(n, rec, "not_a_ritual", ".cast.as_ritual", f"{known.name} has no ritual tag",
                        f"{known.name} cannot be cast as a ritual, but `cast.as_ritual` is true.",
                        "Set `cast.as_ritual` to false.")
    return out.issues()


def validate_source_references(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    return source_reference_issues("spells.source_reference", ctx, adapted.records, subject, "spells")


def durable_record(rec: SpellRecord) -> dict:
    return {
        "spell_name": rec.spell_name,
        "caster_name": rec.caster_name,
        "cast": {"level": rec.level, "as_ritual": rec.as_ritual, "target_names": list(rec.target_names)},
        "evidence": [ref.as_record() for ref in rec.evidence],
    }


def describe_raw_record(raw: Any) -> str | None:
    name = raw_text(raw, "spell_name")
    if name is None:
        return None
    caster = raw_text(raw, "caster_name")
    return f"The spell {quote_name(name)}" + (f" cast by {quote_name(caster)}" if caster else "")


SPEC = FamilySpec(
    key=KEY,
    role=ROLE_EXTRACTION,
    chunk_kind="extraction",
    response_model=SpellsResponse,
    list_field="spells",
    policy_version="spells-policy-2",
    enums={},
    adapt=adapt,
    validators=(validate_shape, validate_catalog, validate_source_references),
    durable_record=durable_record,
    describe_raw_record=describe_raw_record,
    docs=FamilyDocs(
        intro="One record is one spell cast in the chunk.",
        fields={
            "records[].spell_name": "The spell as named in the transcript (SRD spells are checked against the "
                                    "catalog; unknown names are allowed).",
            "records[].caster_name": "Who casts it, as named in the transcript.",
            "records[].cast": "How it is cast.",
            "records[].cast.level": "Slot level 0-9 (0 for a cantrip); null when not stated. For a catalog spell, "
                                    "at least its base level.",
            "records[].cast.as_ritual": "Cast as a ritual; true only for a spell the catalog tags as ritual.",
            "records[].cast.target_names": "Who or what it targets, as named; empty when not stated.",
        },
        example={"spell_name": "Mass Heal", "caster_name": "ASHLEY",
                 "cast": {"level": 9, "as_ritual": False, "target_names": ["Pike"]},
                 "evidence": [{"source_id": "crd3:C1E035", "start_unit_id": 1807, "end_unit_id": 1808},
                              {"source_id": "crd3:C1E035", "start_unit_id": 1814, "end_unit_id": 1819}]},
    ),
    record_subject=record_subject,
    policy_extras={"max_level": MAX_LEVEL, "catalog": fingerprint(read_asset(CATALOG_ASSET))},
    judges=(JudgeSpec("spell-cast", KEY, "the named caster casts the named spell in the cited lines, not only "
                                         "mentions it"),),
)
