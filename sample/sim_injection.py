"""Defects injected into a simulated response, one by one: each injector works on a record no other
injector has touched (adding a fresh record when none is left), so independent defects stay independent
and every one stays detectable. The clean records come from the family builders (``sample.sim_records``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson

from sample.sim_defects import DefectKind, K
from sample.sim_records import (FAMILY_BUILDERS, NON_BMP, Family, Occurrences, catalog_spell, evidence, invented_name,
                                random_index)
from sample.sim_views import ChunkView, RegistryBook, fold
from sample.text_cues import ITEM, LOCATION, NPC

# ------------------------------------------------------------------ injection

@dataclass(frozen=True, slots=True)
class Defect:
    """One injected defect, as the ground truth reports it."""
    kind: DefectKind
    record_name: str | None
    range: tuple[int, int] | None

    def to_json(self) -> dict:
        return {"kind": self.kind.value, "record_name": self.record_name,
                "range": list(self.range) if self.range is not None else None}


# The defect's range is the affected record's first cited range.
RECORD_SPAN = object()


class Injection:
    """Applies defect kinds to a response's records, tracking what each touched."""

    def __init__(self, builder: Family, view: ChunkView, rng: random.Random,
                 book: RegistryBook, records: list[dict]) -> None:
        self.builder, self.view, self.rng, self.book = builder, view, rng, book
        self.records = records
        self.touched: set[int] = set()
        self.marks: list[tuple[DefectKind, int | None, object]] = []

    # -- choosing records
    def pick(self, want: str | None = None) -> int:
        """An untouched record (suiting `want`), adding a fresh one when none is left."""
        free = [i for i, r in enumerate(self.records)
                if i not in self.touched and self.builder.suits(r, want)]
        if free:
            index = self.rng.choice(free)
        else:
            self.records.append(self.builder.fresh(self.view, self.rng, self.book, want,
                                                   self.records))
            index = len(self.records) - 1
        self.touched.add(index)
        return index

    def any_record(self) -> int:
        if not self.records:
            self.records.append(self.builder.fresh(self.view, self.rng, self.book,
                                                   existing=self.records))
        return self.rng.randrange(len(self.records))

    def mark(self, kind: DefectKind, index: int | None,
             span: tuple[int, int] | None | object = RECORD_SPAN) -> None:
        self.marks.append((kind, index, span))

    def add_evidence(self, kind: DefectKind, start: int, end: int) -> None:
        index = self.any_record()
        items = self.records[index]["evidence"]
        items.insert(self.rng.randint(0, len(items)), {"start_unit_id": start, "end_unit_id": end})
        self.mark(kind, index, (start, end))

    # -- results
    def defects(self) -> list[Defect]:
        return [Defect(kind, self._name(index), self._span(index) if span is RECORD_SPAN else span)
                for kind, index, span in self.marks]

    def _name(self, index: int | None) -> str | None:
        return None if index is None else self.builder.record_name(self.records[index])

    def _span(self, index: int | None) -> tuple[int, int] | None:
        if index is None:
            return None
        record = self.records[index]
        if "evidence" in record:
            first = record["evidence"][0]
            return first["start_unit_id"], first["end_unit_id"]
        return record["start_unit_id"], record["end_unit_id"]


Injector = Callable[[Injection], None]


def _reversed(inj: Injection) -> None:
    """Start sits later in the DOCUMENT than end (whatever the ids look like)."""
    ids, rng = inj.view.unit_ids, inj.rng
    if inj.view.renumbered:
        earlier, later = _falling_pair(ids, rng)  # ids look forward: start < end
        inj.add_evidence(K.REVERSED_ENDPOINTS_RENUMBERED, ids[later], ids[earlier])
    else:
        earlier, later = sorted(rng.sample(range(len(ids)), 2))
        inj.add_evidence(K.REVERSED_ENDPOINTS, ids[later], ids[earlier])


def _falling_pair(ids: Sequence[int], rng: random.Random) -> tuple[int, int]:
    """Positions i < j whose ids fall (ids[i] > ids[j])."""
    for _ in range(20):
        i, j = sorted(rng.sample(range(len(ids)), 2))
        if ids[i] > ids[j]:
            return i, j
    i = next(i for i in range(len(ids) - 1) if ids[i] > ids[i + 1])
    return i, i + 1


def _span_outside(inj: Injection) -> None:
    inside = inj.view.unit_ids[inj.rng.randrange(len(inj.view.unit_ids))]
    outside, after = inj.view.outside_unit_near(inj.rng)
    start, end = (inside, outside) if after else (outside, inside)  # forward, but leaves the chunk
    inj.add_evidence(K.SPAN_OUTSIDE_CHUNK, start, end)


def _unresolved(inj: Injection) -> None:
    missing = inj.view.source.max_unit_id + inj.rng.randint(1, 5000)
    known = inj.view.unit_ids[inj.rng.randrange(len(inj.view.unit_ids))]
    start, end = (known, missing) if inj.rng.random() < 0.5 else (missing, known)
    inj.add_evidence(K.UNRESOLVED_UNIT_ID, start, end)


def _blank_name(inj: Injection) -> None:
    index = inj.pick()
    inj.builder.blank(inj.records[index], inj.rng)
    inj.mark(K.BLANK_NAME, index)


def _unsupported_enum(inj: Injection) -> None:
    index = inj.pick()
    field_name = inj.builder.enum_field
    inj.records[index][field_name] = inj.rng.choice(inj.builder.unsupported_values)
    inj.mark(K.UNSUPPORTED_ENUM, index)


def _membership_miss(inj: Injection) -> None:
    index = inj.pick()
    builder = inj.builder
    assert isinstance(builder, Occurrences)
    inj.records[index][builder.name_field] = _unregistered_name(inj, builder.kind)
    inj.mark(K.MEMBERSHIP_MISS, index)


def _unregistered_name(inj: Injection, kind: str) -> str:
    cues = inj.view.cues.names
    # An NPC is only ever given an NPC name (a listed name or a speaker), never an item or place noun.
    mentioned = [name for k in ((NPC,) if kind == NPC else (kind, NPC, ITEM, LOCATION)) for name, _ in cues[k]]
    for name in mentioned:
        if not inj.book.knows(kind, name):
            return name
    return invented_name(lambda folded: folded in inj.book.folded[kind], inj.rng)


def _duplicate_engaged(inj: Injection) -> None:
    index = inj.pick("engaged")
    enemy = inj.records[index]["enemy_name"]
    for i, record in enumerate(inj.records):  # keep the pair intact under other defects
        if fold(record["enemy_name"]) == fold(enemy):
            inj.touched.add(i)
    variant = enemy.lower() if inj.rng.random() < 0.3 else enemy  # same subject after folding
    inj.records.append({"enemy_name": variant, "kind": "engaged",
                        "evidence": [evidence(inj.view, inj.rng, random_index(inj.view, inj.rng))]})
    inj.touched.add(len(inj.records) - 1)
    inj.mark(K.DUPLICATE_ENGAGED, len(inj.records) - 1)


def _spell_level_below_base(inj: Injection) -> None:
    index = inj.pick("leveled")
    record = inj.records[index]
    spell = catalog_spell(record["spell_name"])
    record["cast"]["level"] = inj.rng.randint(0, spell.level - 1)
    inj.mark(K.SPELL_LEVEL_BELOW_BASE, index)


def _ritual_on_non_ritual(inj: Injection) -> None:
    index = inj.pick("non_ritual")
    inj.records[index]["cast"]["as_ritual"] = True
    inj.mark(K.RITUAL_ON_NON_RITUAL, index)


def _duplicate_registry_name(inj: Injection) -> None:
    index = inj.pick()
    original = inj.records[index]["name"]
    words = original.split(" ")
    if len(words) > 1 and inj.rng.random() < 0.5:
        variant = "  ".join(words)  # differs only in whitespace
    else:
        variant = original.upper() if original != original.upper() else original.lower()
    view, rng = inj.view, inj.rng
    inj.records.append({"name": variant, "aliases": [],
                        "description": f"Also called {variant} in this part of the session.",
                        "evidence": [evidence(view, rng, random_index(view, rng))]})
    inj.touched.add(len(inj.records) - 1)
    inj.mark(K.DUPLICATE_REGISTRY_NAME, len(inj.records) - 1)


def _attack_without_target(inj: Injection) -> None:
    index = inj.pick()
    inj.records[index]["turn_kind"] = "attack"
    inj.records[index]["target_names"] = []
    inj.mark(K.ATTACK_WITHOUT_TARGET, index)


def _missing_holder(inj: Injection) -> None:
    index = inj.pick()
    inj.records[index]["kind"] = inj.rng.choice(("acquired", "transferred"))
    inj.records[index]["holder_name"] = None
    inj.mark(K.MISSING_HOLDER, index)


def _non_bmp_text(inj: Injection) -> None:
    index = inj.any_record()
    record = inj.records[index]
    key = "description" if "description" in record else inj.rng.choice(("title", "summary"))
    record[key] = f"{record[key]} {inj.rng.choice(NON_BMP)}"
    inj.mark(K.NON_BMP_TEXT, index, None)


def _scene_range_mismatch(inj: Injection) -> None:
    scene, ids, rng = inj.records[0], inj.view.unit_ids, inj.rng
    if len(ids) >= 2 and (not inj.view.has_outside or rng.random() < 0.6):
        if rng.random() < 0.5:
            scene["end_unit_id"] = ids[rng.randrange(0, len(ids) - 1)]   # stops early
        else:
            scene["start_unit_id"] = ids[rng.randrange(1, len(ids))]     # starts late
    else:
        outside, after = inj.view.outside_unit_near(rng)
        scene["end_unit_id" if after else "start_unit_id"] = outside
    inj.touched.add(0)
    inj.mark(K.SCENE_RANGE_MISMATCH, 0)


def _scene_reversed_range(inj: Injection) -> None:
    scene = inj.records[0]
    scene["start_unit_id"], scene["end_unit_id"] = scene["end_unit_id"], scene["start_unit_id"]
    inj.touched.add(0)
    inj.mark(K.SCENE_REVERSED_RANGE, 0)


def _extra_scene(inj: Injection) -> None:
    extra = inj.builder.fresh(inj.view, inj.rng, inj.book, existing=inj.records)
    inj.records.append(extra)
    inj.mark(K.EXTRA_SCENE, len(inj.records) - 1)


def _whole_response(kind: DefectKind) -> Injector:
    """Defects of the bytes or the envelope (applied when rendering)."""
    return lambda inj: inj.mark(kind, None, None)


INJECTORS: dict[DefectKind, Injector] = {
    K.REVERSED_ENDPOINTS: _reversed,
    K.REVERSED_ENDPOINTS_RENUMBERED: _reversed,
    K.UTF8_BOM: _whole_response(K.UTF8_BOM),
    K.CRLF_WHITESPACE: _whole_response(K.CRLF_WHITESPACE),
    K.NON_BMP_TEXT: _non_bmp_text,
    K.STALE_PROMPT_FINGERPRINT: _whole_response(K.STALE_PROMPT_FINGERPRINT),
    K.SPAN_OUTSIDE_CHUNK: _span_outside,
    K.UNRESOLVED_UNIT_ID: _unresolved,
    K.BLANK_NAME: _blank_name,
    K.MEMBERSHIP_MISS: _membership_miss,
    K.DUPLICATE_ENGAGED: _duplicate_engaged,
    K.SPELL_LEVEL_BELOW_BASE: _spell_level_below_base,
    K.RITUAL_ON_NON_RITUAL: _ritual_on_non_ritual,
    K.DUPLICATE_REGISTRY_NAME: _duplicate_registry_name,
    K.ATTACK_WITHOUT_TARGET: _attack_without_target,
    K.MISSING_HOLDER: _missing_holder,
    K.SCENE_RANGE_MISMATCH: _scene_range_mismatch,
    K.SCENE_REVERSED_RANGE: _scene_reversed_range,
    K.EXTRA_SCENE: _extra_scene,
    K.UNSUPPORTED_ENUM: _unsupported_enum,
    K.TRUNCATED_JSON: _whole_response(K.TRUNCATED_JSON),
}

# Record-shaping defects first, evidence appends and text last, so that an
# injected range or emoji lands on the final set of records.
INJECTION_ORDER = (
    K.DUPLICATE_ENGAGED, K.DUPLICATE_REGISTRY_NAME, K.SPELL_LEVEL_BELOW_BASE,
    K.RITUAL_ON_NON_RITUAL, K.ATTACK_WITHOUT_TARGET, K.MISSING_HOLDER, K.MEMBERSHIP_MISS,
    K.BLANK_NAME, K.UNSUPPORTED_ENUM, K.SCENE_RANGE_MISMATCH, K.SCENE_REVERSED_RANGE,
    K.EXTRA_SCENE, K.REVERSED_ENDPOINTS, K.REVERSED_ENDPOINTS_RENUMBERED, K.SPAN_OUTSIDE_CHUNK,
    K.UNRESOLVED_UNIT_ID, K.NON_BMP_TEXT, K.UTF8_BOM, K.CRLF_WHITESPACE,
    K.STALE_PROMPT_FINGERPRINT, K.TRUNCATED_JSON,
)
assert set(INJECTION_ORDER) == set(DefectKind)


def inject(family: str, view: ChunkView, rng: random.Random, book: RegistryBook,
           clean: list[dict], kinds: Sequence[DefectKind]) -> tuple[dict, list[Defect]]:
    """The response object for one attempt and the defects it carries."""
    builder = FAMILY_BUILDERS[family]
    records = orjson.loads(orjson.dumps(clean))  # each attempt edits its own copy
    injection = Injection(builder, view, rng, book, records)
    wanted = set(kinds)
    for kind in INJECTION_ORDER:
        if kind in wanted:
            INJECTORS[kind](injection)
    return {builder.list_key: injection.records}, injection.defects()
