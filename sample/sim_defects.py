"""Defect kinds, rates and the attempt model of the simulated producer.

Rates are probabilities per candidate. Each kind is drawn independently for
every *first* attempt of a slot whose family (and chunk) the kind applies
to; later attempts follow `AttemptModel` (a retry either fixes every
blocking defect or fails again). `renumbered_source` is per source.

Benign kinds keep a candidate passing: reversed evidence endpoints are
repaired by endpoint canonicalization, odd bytes (BOM, CRLF whitespace,
non-BMP text) are not defects of the JSON, and a stale prompt fingerprint
only counts the candidate as stale. Every other kind makes it fail.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from domain.families import FAMILIES as DECLARED
from domain.families.base import ROLE_OCCURRENCE, ROLE_REGISTRY

# The keys of the families whose builders (sample.sim_records) are written here, and of those some defect
# kinds are particular to.
SPELLS = "spells"
NPC_REGISTRY, NPC_OCCURRENCES = "npc-registry", "npc-occurrences"
ITEM_REGISTRY, ITEM_OCCURRENCES = "item-registry", "item-occurrences"
LOCATION_REGISTRY, LOCATION_OCCURRENCES = "location-registry", "location-occurrences"
COMBAT_TURNS, ENEMY_EVENTS, SCENES = "combat-turns", "enemy-events", "scene-descriptions"

# The per-chunk families, as declared (domain/families/, in the registry's order); the source-level
# reconciliations are made from accepted registries (sample.sim_reconciliation).
FAMILIES = tuple(key for key, spec in DECLARED.items() if spec.chunk_kind != "source")
EXTRACTION_FAMILIES = tuple(key for key in FAMILIES if DECLARED[key].chunk_kind == "extraction")
SCENE_FAMILIES = tuple(key for key in FAMILIES if DECLARED[key].chunk_kind == "scene")
REGISTRY_FAMILIES = tuple(key for key in FAMILIES if DECLARED[key].role == ROLE_REGISTRY)
OCCURRENCE_FAMILIES = tuple(key for key in FAMILIES if DECLARED[key].role == ROLE_OCCURRENCE)
ENUM_FAMILIES = tuple(key for key in FAMILIES if DECLARED[key].enums)
# Records with prose of their own (a registry entry's description, a scene's title and summary).
FREE_TEXT_FAMILIES = (*REGISTRY_FAMILIES, *SCENE_FAMILIES)
# The registry kind a registry provides, or an occurrence family needs.
REGISTRY_KIND = {key: DECLARED[key].registry_kind for key in (*REGISTRY_FAMILIES, *OCCURRENCE_FAMILIES)}


class DefectKind(StrEnum):
    # benign: the candidate still passes
    REVERSED_ENDPOINTS = "reversed_endpoints"
    REVERSED_ENDPOINTS_RENUMBERED = "reversed_endpoints_renumbered"
    UTF8_BOM = "utf8_bom"
    CRLF_WHITESPACE = "crlf_whitespace"
    NON_BMP_TEXT = "non_bmp_text"
    STALE_PROMPT_FINGERPRINT = "stale_prompt_fingerprint"
    # blocking, detected after parsing (several can be reported in one pass)
    SPAN_OUTSIDE_CHUNK = "span_outside_chunk"
    UNRESOLVED_UNIT_ID = "unresolved_unit_id"
    BLANK_NAME = "blank_name"
    MEMBERSHIP_MISS = "membership_miss"
    DUPLICATE_ENGAGED = "duplicate_engaged"
    SPELL_LEVEL_BELOW_BASE = "spell_level_below_base"
    RITUAL_ON_NON_RITUAL = "ritual_on_non_ritual"
    DUPLICATE_REGISTRY_NAME = "duplicate_registry_name"
    ATTACK_WITHOUT_TARGET = "attack_without_target"
    MISSING_HOLDER = "missing_holder"
    SCENE_RANGE_MISMATCH = "scene_range_mismatch"
    SCENE_REVERSED_RANGE = "scene_reversed_range"
    EXTRA_SCENE = "extra_scene"
    # blocking, structural (the response does not parse or fails its schema)
    UNSUPPORTED_ENUM = "unsupported_enum"
    TRUNCATED_JSON = "truncated_json"


K = DefectKind
BENIGN_KINDS = frozenset({K.REVERSED_ENDPOINTS, K.REVERSED_ENDPOINTS_RENUMBERED, K.UTF8_BOM,
                          K.CRLF_WHITESPACE, K.NON_BMP_TEXT, K.STALE_PROMPT_FINGERPRINT})
STRUCTURAL_KINDS = frozenset({K.UNSUPPORTED_ENUM, K.TRUNCATED_JSON})
SEMANTIC_KINDS = frozenset(K) - BENIGN_KINDS - STRUCTURAL_KINDS
BLOCKING_KINDS = SEMANTIC_KINDS | STRUCTURAL_KINDS

# Which families each kind can be injected into (chunk conditions come later).
KIND_FAMILIES: dict[DefectKind, tuple[str, ...]] = {
    K.REVERSED_ENDPOINTS: EXTRACTION_FAMILIES,
    K.REVERSED_ENDPOINTS_RENUMBERED: EXTRACTION_FAMILIES,
    K.UTF8_BOM: FAMILIES,
    K.CRLF_WHITESPACE: FAMILIES,
    K.NON_BMP_TEXT: FREE_TEXT_FAMILIES,
    K.STALE_PROMPT_FINGERPRINT: FAMILIES,
    K.SPAN_OUTSIDE_CHUNK: EXTRACTION_FAMILIES,
    K.UNRESOLVED_UNIT_ID: EXTRACTION_FAMILIES,
    K.BLANK_NAME: EXTRACTION_FAMILIES,
    K.MEMBERSHIP_MISS: OCCURRENCE_FAMILIES,
    K.DUPLICATE_ENGAGED: (ENEMY_EVENTS,),
    K.SPELL_LEVEL_BELOW_BASE: (SPELLS,),
    K.RITUAL_ON_NON_RITUAL: (SPELLS,),
    K.DUPLICATE_REGISTRY_NAME: REGISTRY_FAMILIES,
    K.ATTACK_WITHOUT_TARGET: (COMBAT_TURNS,),
    K.MISSING_HOLDER: (ITEM_OCCURRENCES,),
    K.SCENE_RANGE_MISMATCH: (SCENES,),
    K.SCENE_REVERSED_RANGE: (SCENES,),
    K.EXTRA_SCENE: (SCENES,),
    K.UNSUPPORTED_ENUM: ENUM_FAMILIES,
    K.TRUNCATED_JSON: FAMILIES,
}


# The reason codes the job's validators report for each blocking kind (benign kinds are reported by none):
# the truth names an injected defect by kind, the evaluations an issue by code. One kind can be reported
# under several codes: a blank name is reported per field (`blank_name` for registry names and aliases,
# `blank_spell_name`, `blank_npc_name`, ...). tests/test_simulated_producer.py checks this against the job.
REASON_CODES: dict[DefectKind, tuple[str, ...]] = {
    K.SPAN_OUTSIDE_CHUNK: ("span_outside_chunk",),
    K.UNRESOLVED_UNIT_ID: ("unresolved_unit",),
    K.BLANK_NAME: ("blank_name", "blank_spell_name", "blank_caster_name", "blank_npc_name", "blank_item_name",
                   "blank_location_name", "blank_actor_name", "blank_enemy_name"),
    K.MEMBERSHIP_MISS: ("not_in_registry",),
    K.DUPLICATE_ENGAGED: ("duplicate_engaged",),
    K.SPELL_LEVEL_BELOW_BASE: ("below_base_level",),
    K.RITUAL_ON_NON_RITUAL: ("not_a_ritual",),
    K.DUPLICATE_REGISTRY_NAME: ("duplicate_name",),
    K.ATTACK_WITHOUT_TARGET: ("attack_without_target",),
    K.MISSING_HOLDER: ("holder_required",),
    K.SCENE_RANGE_MISMATCH: ("range_mismatch", "unit_outside_scene"),
    K.SCENE_REVERSED_RANGE: ("reversed_range",),
    K.EXTRA_SCENE: ("several_scenes",),
    K.UNSUPPORTED_ENUM: ("schema_enum",),
    K.TRUNCATED_JSON: ("invalid_json",),
}

class KindRates:
    """Injection probabilities with one field per defect kind, named by the kind's value."""

    __slots__ = ()

    def rate(self, kind: StrEnum) -> float:
        return getattr(self, kind.value)


@dataclass(frozen=True, slots=True)
class DefectRates(KindRates):
    """Per-candidate injection probabilities (first attempts; see module doc)."""
    reversed_endpoints: float = 0.08
    reversed_endpoints_renumbered: float = 0.30
    utf8_bom: float = 0.02
    crlf_whitespace: float = 0.03
    non_bmp_text: float = 0.05
    stale_prompt_fingerprint: float = 0.05
    span_outside_chunk: float = 0.03
    unresolved_unit_id: float = 0.02
    blank_name: float = 0.02
    membership_miss: float = 0.05
    duplicate_engaged: float = 0.08
    spell_level_below_base: float = 0.05
    ritual_on_non_ritual: float = 0.03
    duplicate_registry_name: float = 0.02
    attack_without_target: float = 0.03
    missing_holder: float = 0.03
    scene_range_mismatch: float = 0.04
    scene_reversed_range: float = 0.03
    extra_scene: float = 0.02
    unsupported_enum: float = 0.03
    truncated_json: float = 0.02
    # several independent semantic defects (2-3) in one candidate
    multiple_defects: float = 0.03
    # per source: a run of extraction chunks renumbered so ids fall with position
    renumbered_source: float = 0.25


@dataclass(frozen=True, slots=True)
class AttemptModel:
    """How a slot's attempts follow each other."""
    max_attempts: int = 3
    retry_after_failure: float = 0.85  # else the slot is left for a retry request
    fix_on_retry: float = 0.70         # a retry fixes every blocking defect
    superseded_attempt: float = 0.01   # a passing attempt followed by another passing one


def with_overrides(rates: DefectRates, model: AttemptModel,
                   overrides: Iterable[str]) -> tuple[DefectRates, AttemptModel]:
    """Apply `NAME=VALUE` strings to whichever dataclass has that field."""
    rate_fields = {f.name for f in dataclasses.fields(DefectRates)}
    model_fields = {f.name for f in dataclasses.fields(AttemptModel)}
    for override in overrides:
        name, sep, raw = override.partition("=")
        name = name.strip().replace("-", "_")
        if not sep:
            raise ValueError(f"expected NAME=VALUE, got {override!r}")
        if name in rate_fields:
            rates = dataclasses.replace(rates, **{name: _probability(name, raw)})
        elif name == "max_attempts":
            model = dataclasses.replace(model, max_attempts=int(raw))
        elif name in model_fields:
            model = dataclasses.replace(model, **{name: _probability(name, raw)})
        else:
            known = ", ".join(sorted(rate_fields | model_fields))
            raise ValueError(f"unknown defect rate {name!r}; known: {known}")
    return rates, model


def _probability(name: str, raw: str) -> float:
    value = float(raw)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {raw}")
    return value


@dataclass(frozen=True, slots=True)
class ChunkShape:
    """The chunk facts that decide which defects can be injected."""
    unit_count: int
    renumbered: bool      # some id is smaller than the one before it (renumbered region)
    has_outside: bool     # the source has units outside this chunk


def applicable_kinds(family: str, shape: ChunkShape) -> tuple[DefectKind, ...]:
    return tuple(kind for kind in DefectKind
                 if family in KIND_FAMILIES[kind] and _fits_chunk(kind, shape))


def _fits_chunk(kind: DefectKind, shape: ChunkShape) -> bool:
    if kind is K.REVERSED_ENDPOINTS:
        return shape.unit_count >= 2 and not shape.renumbered
    if kind is K.REVERSED_ENDPOINTS_RENUMBERED:
        return shape.unit_count >= 2 and shape.renumbered
    if kind is K.SCENE_REVERSED_RANGE:
        return shape.unit_count >= 2
    if kind in (K.SPAN_OUTSIDE_CHUNK,):
        return shape.has_outside
    if kind is K.SCENE_RANGE_MISMATCH:
        return shape.unit_count >= 2 or shape.has_outside
    return True


def is_failing(kinds: Iterable[DefectKind]) -> bool:
    return any(kind in BLOCKING_KINDS for kind in kinds)


# Pairs that cannot both be shown on one record: a reversed scene range
# already fails to equal the chunk, so the mismatch is dropped.
CONFLICTS = {K.SCENE_RANGE_MISMATCH: K.SCENE_REVERSED_RANGE}


# The kinds applicable to a slot, each with its rate (computed once per shape).
RatedKinds = tuple[tuple[DefectKind, float], ...]


def rated(applicable: Sequence[DefectKind], rates: DefectRates) -> RatedKinds:
    return tuple((kind, rates.rate(kind)) for kind in applicable)


def draw_defects(rng: random.Random, kinds: RatedKinds,
                 rates: DefectRates) -> tuple[DefectKind, ...]:
    """Independent draws per kind, plus a compound draw of 2-3 semantic kinds."""
    drawn = [kind for kind, rate in kinds if rng.random() < rate]
    if rng.random() < rates.multiple_defects:
        drawn += _several_semantic(rng, [kind for kind, _ in kinds], drawn)
    if not drawn:
        return ()
    return _in_kind_order(_without_conflicts(drawn))


def _several_semantic(rng: random.Random, applicable: Sequence[DefectKind],
                      drawn: Sequence[DefectKind]) -> list[DefectKind]:
    wanted = rng.choice((2, 2, 3))
    pool = [kind for kind in applicable if kind in SEMANTIC_KINDS and kind not in drawn]
    rng.shuffle(pool)
    chosen: list[DefectKind] = []
    for kind in pool:
        if len(chosen) == wanted:
            break
        if not _conflicts(kind, [*drawn, *chosen]):
            chosen.append(kind)
    return chosen


def _conflicts(kind: DefectKind, others: Sequence[DefectKind]) -> bool:
    return any(CONFLICTS.get(kind) == other or CONFLICTS.get(other) == kind for other in others)


def _without_conflicts(kinds: Sequence[DefectKind]) -> list[DefectKind]:
    return [kind for kind in kinds if CONFLICTS.get(kind) not in kinds]


def draw_benign(rng: random.Random, kinds: RatedKinds) -> tuple[DefectKind, ...]:
    return tuple(kind for kind, rate in kinds if kind in BENIGN_KINDS and rng.random() < rate)


def draw_failing(rng: random.Random, kinds: RatedKinds,
                 rates: DefectRates) -> tuple[DefectKind, ...]:
    """A retry that fails again: fresh draws, forced to hold a blocking kind."""
    drawn = draw_defects(rng, kinds, rates)
    if is_failing(drawn):
        return drawn
    blocking = [(kind, rate) for kind, rate in kinds if kind in BLOCKING_KINDS]
    forced = rng.choices([k for k, _ in blocking], weights=[r or 1e-9 for _, r in blocking])[0]
    return _in_kind_order(_without_conflicts([*drawn, forced]))


def plan_attempts(rng: random.Random, kinds: RatedKinds, rates: DefectRates,
                  model: AttemptModel) -> list[tuple[DefectKind, ...]]:
    """Defect kinds of each attempt of one slot, attempt 1 first."""
    attempts = [draw_defects(rng, kinds, rates)]
    while len(attempts) < model.max_attempts:
        if not is_failing(attempts[-1]):
            if rng.random() < model.superseded_attempt:
                attempts.append(draw_benign(rng, kinds))
            break
        if rng.random() >= model.retry_after_failure:
            break
        fixed = rng.random() < model.fix_on_retry
        attempts.append(draw_benign(rng, kinds) if fixed else draw_failing(rng, kinds, rates))
    return attempts


_ORDER = {kind: index for index, kind in enumerate(DefectKind)}


def _in_kind_order(kinds: Iterable[DefectKind]) -> tuple[DefectKind, ...]:
    return tuple(sorted(set(kinds), key=_ORDER.__getitem__))
