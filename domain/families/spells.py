"""spells: spells cast in an extraction chunk, checked against the SRD 5.1 catalog."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from domain.assets import fingerprint, load_json_asset, read_asset
from domain.evidence import SourceRef
from domain.families.base import ROLE_EXTRACTION, Adapted, EvaluationContext, EvidenceList, FamilySpec, JsonInt, StrictModel, fold_name
from domain.families.common import adapt_evidence, cited, order_records, raw_text, source_reference_issues
from domain.frozen import quick_init
from domain.issues import Correction, Issue, IssueCollector, quote_name, render_number
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


@quick_init
@dataclass(frozen=True, slots=True)
class SpellRecord:
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
    records = [
        SpellRecord(
            item.spell_name,
            item.caster_name,
            item.cast.level,
            item.cast.as_ritual,
            item.cast.target_names,
            adapt_evidence(transcript, item.evidence),
        )
        for item in response.spells
    ]
    return order_records(transcript.index, records)


def subject(record: SpellRecord) -> str:
    return f"The spell {quote_name(record.spell_name)} cast by {quote_name(record.caster_name)}"


def validate_shape(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    """Names non-blank, level null or 0-9, target names non-blank - every defect, one pass."""
    out = IssueCollector("spells.shape")
    for n, rec in enumerate(adapted.records):
        blank_spell_name = not rec.spell_name.strip()
        blank_caster_name = not rec.caster_name.strip()
        level_out_of_range = rec.level is not None and not 0 <= rec.level <= MAX_LEVEL
        blank_target_name = any(not name.strip() for name in rec.target_names)
        if not (blank_spell_name or blank_caster_name or level_out_of_range or blank_target_name):
            continue  # the usual case: no subject or ranges to render
        who, where, ranges = subject(rec), f"spells[{n}]", cited(rec.evidence, ctx.transcript.index)
        if blank_spell_name:
            out.add("blank_spell_name", f"{where}.spell_name", "blank spell_name",
                    Correction(who, ranges, "`spell_name` is blank.", "Name the spell as the transcript does."))
        if blank_caster_name:
            out.add("blank_caster_name", f"{where}.caster_name", "blank caster_name",
                    Correction(who, ranges, "`caster_name` is blank.", "Name who casts the spell."))
        if level_out_of_range:
            out.add("level_out_of_range", f"{where}.cast.level", f"cast.level {rec.level} outside 0..9",
                    Correction(who, ranges, f"`cast.level` is {render_number(rec.level)}, outside 0 to 9.",
                               "Give a level from 0 to 9, or null when the excerpt does not say."))
        if blank_target_name:
            out.add("blank_target_name", f"{where}.cast.target_names", "blank entry in cast.target_names",
                    Correction(who, ranges, "`cast.target_names` contains a blank name.",
                               "Name each target, or leave the list empty when nobody is named."))
    return out.issues()


def validate_catalog(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    """Known SRD spells: level never below the base level; ritual only for ritual spells."""
    out = IssueCollector("spells.catalog")
    catalog = spell_catalog()
    for n, rec in enumerate(adapted.records):
        known = catalog.get(fold_name(rec.spell_name))
        if known is None:
            continue  # unknown (homebrew, misheard) spells are allowed
        level = rec.level
        level_known = level is not None and 0 <= level <= MAX_LEVEL
        # A cantrip is cast at level 0; any other spell at its base level or higher.
        cantrip_level = level_known and known.level == 0 and level != 0
        below_base_level = level_known and level < known.level
        not_a_ritual = rec.as_ritual and not known.ritual
        if not (cantrip_level or below_base_level or not_a_ritual):
            continue  # consistent with the catalog: no subject or ranges to render
        who, where, ranges = subject(rec), f"spells[{n}]", cited(rec.evidence, ctx.transcript.index)
        if cantrip_level:
            out.add("cantrip_level", f"{where}.cast.level", f"{known.name} is a cantrip, level {level}",
                    Correction(who, ranges, f"{known.name} is a cantrip, but `cast.level` is {level}.",
                               "Set `cast.level` to 0 or null."))
        elif below_base_level:
            out.add("below_base_level", f"{where}.cast.level",
                    f"{known.name} base level {known.level}, cast.level {level}",
                    Correction(who, ranges,
                               f"{known.name} is a level {known.level} spell, but `cast.level` is {level}.",
                               f"Set `cast.level` to {known.level} or higher, or null when the excerpt does not say."))
        if not_a_ritual:
            out.add("not_a_ritual", f"{where}.cast.as_ritual", f"{known.name} has no ritual tag",
                    Correction(who, ranges, f"{known.name} cannot be cast as a ritual, but `cast.as_ritual` is true.",
                               "Set `cast.as_ritual` to false."))
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
    policy_extras={"max_level": MAX_LEVEL, "catalog": fingerprint(read_asset(CATALOG_ASSET))},
)
