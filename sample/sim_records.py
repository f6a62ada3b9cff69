"""Response content of the simulated producer: clean records and injected defects.

Clean records are grounded in the chunk text (see `sample.text_cues`): SRD
spells and monsters that occur in the chunk, capitalised names, the speaker
of the cited unit as caster or actor, and evidence ranges inside the chunk.
Defects are then injected one by one; each injector works on a record no
other injector has touched (adding a fresh record when none is left), so
independent defects stay independent and every one stays detectable.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import orjson

from domain.families.base import ROLE_RECONCILIATION
from sample.sim_defects import (
    COMBAT_TURNS, DECLARED, ENEMY_EVENTS, ITEM_OCCURRENCES, ITEM_REGISTRY, LOCATION_OCCURRENCES,
    LOCATION_REGISTRY, NPC_OCCURRENCES, NPC_REGISTRY, SCENES, SPELLS, DefectKind, K,
)
from sample.srd import SrdSpell, load_spells
from sample.text_cues import ITEM, LOCATION, NPC, CueFinder, looks_like_name, \
    source_vocabulary, speaker_names, speaker_words

NPC_KINDS = ("present", "speaking", "mentioned", "acting")
ITEM_KINDS = ("acquired", "used", "transferred", "lost", "mentioned")
LOCATION_KINDS = ("visited", "mentioned", "departed")
TURN_KINDS = ("attack", "cast_spell", "move", "dash", "disengage", "dodge", "help", "hide",
              "ready", "use_object", "other")
TURN_KIND_WEIGHTS = (40, 20, 8, 3, 3, 4, 6, 4, 3, 4, 5)
ENEMY_KINDS = ("appeared", "engaged", "damaged", "defeated", "fled", "surrendered")
SCENE_KINDS = ("combat", "exploration", "social", "travel", "rest", "recap")

# Names for membership misses when the chunk offers no unregistered one.
INVENTED_NAMES = ("Vorugal", "Thessaly Marr", "Oskar Dunwell", "Ilyra", "Brannoc",
                  "the Hollow Crown", "Kethric Vane", "Saltmarsh Cove")
NON_BMP = ("\U0001F409", "\U0001F3B2", "\U0001F3F0", "\U0001F9D9", "\U0001F37A", "\U0001F5E1")
BLANKS = ("", " ", "   ", "\t")


def fold(name: str) -> str:
    """Case and whitespace folding, as registry identity and membership use it."""
    return " ".join(name.split()).casefold()


def catalog_spell(name: str) -> SrdSpell | None:
    return _spell_catalog().get(name)


@lru_cache(maxsize=1)
def _spell_catalog() -> dict[str, SrdSpell]:
    return {spell.name: spell for spell in load_spells()}


def snippet(text: str, around: str | None = None, width: int = 90) -> str:
    """Up to `width` characters of the text, starting a few words before `around`."""
    found = text.find(around) if around else -1
    start = text.rfind(" ", 0, max(0, found - 20)) + 1 if found > 20 else 0
    return text[start:start + width].strip()


# --------------------------------------------------------------------------- views

class SourceCues:
    """Per-transcript facts for name filtering: vocabulary, speakers, name kinds."""

    def __init__(self, finder: CueFinder, speakers: Sequence[str], texts: Sequence[str]) -> None:
        self.finder = finder
        self.vocabulary = source_vocabulary(texts)
        self.speakers = speaker_words(speakers)
        votes: Counter[tuple[str, str]] = Counter()
        for text in texts:
            votes.update(finder.unit_cues(text).names)
        # majority kind per name, so one name is one kind across the source; NPC names are listed ones
        self.kind_of: dict[str, str] = {}
        for (name, kind), _ in votes.most_common():
            if name not in self.kind_of and (
                    kind == NPC or looks_like_name(name, self.vocabulary, self.speakers)):
                self.kind_of[name] = kind


@dataclass(frozen=True, slots=True)
class SourceView:
    """Document order of one (possibly padded and renumbered) source."""
    source_id: str
    unit_ids: tuple[int, ...]
    speakers: tuple[str, ...]
    texts: tuple[str, ...]
    position: dict[int, int]
    max_unit_id: int
    cues: SourceCues

    @classmethod
    def of(cls, record: dict, cues: SourceCues) -> SourceView:
        units = record["units"]
        unit_ids = tuple(unit["unit_id"] for unit in units)
        return cls(record["source_id"], unit_ids, tuple(u["speaker"] for u in units),
                   tuple(u["text"] for u in units),
                   {unit_id: pos for pos, unit_id in enumerate(unit_ids)},
                   max(unit_ids), cues)


@dataclass(frozen=True, slots=True)
class ChunkCues:
    spells: tuple[tuple[SrdSpell, int], ...]          # (spell, local index of first mention)
    monsters: tuple[tuple[str, int], ...]
    names: dict[str, tuple[tuple[str, int], ...]]       # NPC/ITEM/LOCATION -> (name, index)


@dataclass(frozen=True, slots=True)
class ChunkView:
    source: SourceView
    chunk_id: str
    unit_ids: tuple[int, ...]
    positions: tuple[int, ...]   # document positions of the chunk's units
    members: frozenset[int]
    renumbered: bool             # some id is smaller than the one before it
    cues: ChunkCues

    @classmethod
    def of(cls, source: SourceView, chunk: dict) -> ChunkView:
        unit_ids = tuple(chunk["unit_ids"])
        positions = tuple(source.position[unit_id] for unit_id in unit_ids)
        falling = any(a > b for a, b in zip(unit_ids, unit_ids[1:]))
        return cls(source, chunk["chunk_id"], unit_ids, positions, frozenset(unit_ids),
                   falling, _chunk_cues(source, positions))

    @property
    def has_outside(self) -> bool:
        return len(self.members) < len(self.source.unit_ids)

    def speaker(self, index: int) -> str:
        return self.source.speakers[self.positions[index]]

    def chunk_speakers(self) -> tuple[str, ...]:
        """The chunk's speakers in order of first line (the people at the table)."""
        return tuple(dict.fromkeys(self.speaker(i) for i in range(len(self.positions))))

    def text(self, index: int) -> str:
        return self.source.texts[self.positions[index]]

    def outside_unit_near(self, rng: random.Random) -> tuple[int, bool]:
        """An id just past the chunk (or just before it); True when after.

        Needs `has_outside`. Chunks are contiguous today; for any other plan
        the nearest non-member after the chunk's first unit is used."""
        ids, first, last = self.source.unit_ids, min(self.positions), max(self.positions)
        after = [p for p in range(last + 1, min(len(ids), last + 6)) if ids[p] not in self.members]
        before = [p for p in range(max(0, first - 5), first) if ids[p] not in self.members]
        if after and (not before or rng.random() < 0.7):
            return ids[rng.choice(after)], True
        if before:
            return ids[rng.choice(before)], False
        gap = next(p for p in range(first, len(ids)) if ids[p] not in self.members)
        return ids[gap], True


def _chunk_cues(source: SourceView, positions: Sequence[int]) -> ChunkCues:
    finder, cues = source.cues.finder, source.cues
    spells: dict[str, int] = {}
    monsters: dict[str, int] = {}
    names: dict[str, dict[str, int]] = {NPC: {}, ITEM: {}, LOCATION: {}}
    for index, pos in enumerate(positions):
        unit = finder.unit_cues(source.texts[pos])
        for name in unit.spells:
            spells.setdefault(name, index)
        for name in unit.monsters:
            monsters.setdefault(name, index)
        for name, _ in unit.names:
            kind = cues.kind_of.get(name)
            if kind is not None:
                names[kind].setdefault(name, index)
    if not names[NPC]:  # no listed name is mentioned: the chunk's speakers are its NPCs
        for index, pos in enumerate(positions):
            for name in speaker_names(source.speakers[pos]):
                names[NPC].setdefault(name, index)
    return ChunkCues(tuple((finder.spells[n], i) for n, i in spells.items()),
                     tuple(monsters.items()),
                     {kind: tuple(found.items()) for kind, found in names.items()})


# ------------------------------------------------------------------ registry book

@dataclass
class RegistryBook:
    """Names of the registry records the pipeline will accept, per source and kind."""
    by_chunk: dict[str, dict[str, list[str]]] = field(
        default_factory=lambda: {NPC: {}, ITEM: {}, LOCATION: {}})
    folded: dict[str, set[str]] = field(
        default_factory=lambda: {NPC: set(), ITEM: set(), LOCATION: set()})
    names: dict[str, list[str]] = field(default_factory=lambda: {NPC: [], ITEM: [], LOCATION: []})
    spelled: dict[str, dict[str, str]] = field(  # folded -> first spelling
        default_factory=lambda: {NPC: {}, ITEM: {}, LOCATION: {}})

    def accept(self, kind: str, chunk_id: str, records: Sequence[dict]) -> None:
        chunk_names = self.by_chunk[kind].setdefault(chunk_id, [])
        for record in records:
            for name in (record["name"], *record["aliases"]):
                chunk_names.append(name)
                folded = fold(name)
                if folded not in self.folded[kind]:
                    self.folded[kind].add(folded)
                    self.names[kind].append(name)
                    self.spelled[kind][folded] = name

    def knows(self, kind: str, name: str) -> bool:
        return fold(name) in self.folded[kind]

    def is_empty(self, kind: str) -> bool:
        return not self.names[kind]


# ------------------------------------------------------------------ record helpers

def evidence(view: ChunkView, rng: random.Random, index: int) -> dict:
    """A forward range inside the chunk starting at local `index` (1-4 units)."""
    last = min(len(view.unit_ids) - 1, index + (rng.randint(1, 3) if rng.random() < 0.5 else 0))
    return {"start_unit_id": view.unit_ids[index], "end_unit_id": view.unit_ids[last]}


def evidence_list(view: ChunkView, rng: random.Random, index: int) -> list[dict]:
    items = [evidence(view, rng, index)]
    if rng.random() < 0.2:
        items.append(evidence(view, rng, rng.randrange(len(view.unit_ids))))
    return items


def random_index(view: ChunkView, rng: random.Random) -> int:
    return rng.randrange(len(view.unit_ids))


def spread(rng: random.Random, found: Sequence, limit: int) -> list:
    """Up to `limit` cues, in the order they occur."""
    if len(found) <= limit:
        return list(found)
    keep = sorted(rng.sample(range(len(found)), limit))
    return [found[i] for i in keep]


# ------------------------------------------------------------------ family builders

class Family:
    """Clean content and family-specific defects of one family: its simulator builder, registered under
    the family's key with ``@simulates``."""
    family = ""
    list_key = ""
    name_field = ""
    enum_field: str | None = None
    # Plausible values a model invents for the closed field (`enum_field`); none is allowed.
    unsupported_values: tuple[str, ...] = ()

    def clean(self, view: ChunkView, rng: random.Random, book: RegistryBook) -> list[dict]:
        raise NotImplementedError

    def fresh(self, view: ChunkView, rng: random.Random, book: RegistryBook,
              want: str | None = None, existing: Sequence[dict] = ()) -> dict:
        """One more clean record (made to suit `want`, a family-specific hint)
        that adds no defect to the `existing` records of the response."""
        raise NotImplementedError

    def record_name(self, record: dict) -> str | None:
        name = record.get(self.name_field)
        return name if isinstance(name, str) and name.strip() else None

    def blank(self, record: dict, rng: random.Random) -> None:
        record[self.name_field] = rng.choice(BLANKS)

    def suits(self, record: dict, want: str | None) -> bool:
        return True


def _enemies(view: ChunkView, rng: random.Random) -> list[tuple[str, int]]:
    """Monsters mentioned in the chunk, else (sometimes) one SRD monster."""
    found = list(view.cues.monsters)
    if found:
        return spread(rng, found, 3)
    if rng.random() < 0.5:
        return [(rng.choice(view.source.cues.finder.monsters), random_index(view, rng))]
    return []


def _fallback_monster(view: ChunkView, rng: random.Random) -> str:
    found = [name for name, _ in view.cues.monsters]
    return rng.choice(found or view.source.cues.finder.monsters)


FAMILY_BUILDERS: dict[str, Family] = {}


def simulates(builder: type[Family]) -> type[Family]:
    """Register a family's simulator builder under its key: the hook through which a family declared in
    domain/families/ gets its simulated content (``missing_builders`` names a declared family without one)."""
    FAMILY_BUILDERS[builder.family] = builder()
    return builder


@simulates
class Spells(Family):
    family, list_key, name_field = SPELLS, "spells", "spell_name"

    def clean(self, view, rng, book):
        return [self._record(view, rng, spell, index)
                for spell, index in spread(rng, view.cues.spells, 3)]

    def fresh(self, view, rng, book, want=None, existing=()):
        grounded = [(s, i) for s, i in view.cues.spells if self._fits(s, want)]
        if grounded:
            return self._record(view, rng, *rng.choice(grounded))
        catalog = [s for s in view.source.cues.finder.spells.values() if self._fits(s, want)]
        return self._record(view, rng, rng.choice(catalog), random_index(view, rng))

    def suits(self, record, want):
        spell = catalog_spell(record["spell_name"])
        return spell is not None and self._fits(spell, want)

    @staticmethod
    def _fits(spell: SrdSpell, want: str | None) -> bool:
        if want == "leveled":
            return spell.level >= 1
        if want == "non_ritual":
            return not spell.ritual
        return True

    def _record(self, view, rng, spell: SrdSpell, index: int) -> dict:
        if rng.random() < 0.3:
            level = None
        elif spell.level == 0 or rng.random() < 0.8:
            level = spell.level
        else:
            level = min(9, spell.level + rng.randint(1, 2))  # upcast
        targets = [name for name, _ in spread(rng, _target_pool(view), rng.randint(0, 2))]
        return {"spell_name": spell.name, "caster_name": view.speaker(index),
                "cast": {"level": level, "as_ritual": spell.ritual and rng.random() < 0.4,
                         "target_names": targets},
                "evidence": evidence_list(view, rng, index)}

    def blank(self, record, rng):
        record["caster_name" if rng.random() < 0.5 else "spell_name"] = rng.choice(BLANKS)


def _target_pool(view: ChunkView) -> list[tuple[str, int]]:
    return [*view.cues.monsters, *view.cues.names[NPC]]


class Registry(Family):
    name_field = "name"
    kind = ""

    def clean(self, view, rng, book):
        taken: set[str] = set()
        records = []
        for name, index in spread(rng, view.cues.names[self.kind], 4):
            record = self._record(view, rng, name, index, taken)
            if record is not None:
                records.append(record)
        return records

    def fresh(self, view, rng, book, want=None, existing=()):
        taken = {fold(n) for record in existing for n in (record["name"], *record["aliases"])}
        found = [*view.cues.names[self.kind], *view.cues.names[NPC], *view.cues.names[LOCATION]]
        free = [(name, index) for name, index in found if fold(name) not in taken]
        if free:
            name, index = rng.choice(free)
        else:
            name, index = _invented_name(taken.__contains__, rng), random_index(view, rng)
        record = self._record(view, rng, name, index, taken)
        assert record is not None
        return record

    def _record(self, view, rng, name: str, index: int, taken: set[str]) -> dict | None:
        if fold(name) in taken:
            return None  # already listed (as a name or alias)
        taken.add(fold(name))
        aliases = []
        words = name.split(" ")
        if len(words) > 1 and fold(words[-1]) not in taken:
            aliases.append(words[-1])  # "Lady Briarwood" -> "Briarwood"
            taken.add(fold(words[-1]))
        text = view.text(index)
        if name in text:
            description = f'Named by {view.speaker(index)}: "{snippet(text, name)}"'
        else:  # a speaker of the chunk
            description = f'Speaks as {view.speaker(index)}: "{snippet(text)}"'
        return {"name": name, "aliases": aliases, "description": description,
                "evidence": evidence_list(view, rng, index)}

    def blank(self, record, rng):
        if record["aliases"] and rng.random() < 0.5:
            record["aliases"][rng.randrange(len(record["aliases"]))] = rng.choice(BLANKS)
        else:
            record["name"] = rng.choice(BLANKS)


@simulates
class NpcRegistry(Registry):
    family, list_key, kind = NPC_REGISTRY, "npcs", NPC


@simulates
class ItemRegistry(Registry):
    family, list_key, kind = ITEM_REGISTRY, "items", ITEM


@simulates
class LocationRegistry(Registry):
    family, list_key, kind = LOCATION_REGISTRY, "locations", LOCATION


class Occurrences(Family):
    list_key, enum_field = "occurrences", "kind"
    kind = ""
    values: tuple[str, ...] = ()

    def clean(self, view, rng, book):
        picks = self._known_names(view, book)
        if not picks and not book.is_empty(self.kind) and rng.random() < 0.5:
            picks = [(rng.choice(book.names[self.kind]), random_index(view, rng))]
        return [self._record(view, rng, name, index) for name, index in spread(rng, picks, 3)]

    def fresh(self, view, rng, book, want=None, existing=()):
        picks = self._known_names(view, book)
        if picks:
            name, index = rng.choice(picks)
        elif not book.is_empty(self.kind):
            name, index = rng.choice(book.names[self.kind]), random_index(view, rng)
        else:  # only reached when the source has no accepted registry of this kind
            name, index = rng.choice(INVENTED_NAMES), random_index(view, rng)
        return self._record(view, rng, name, index)

    def _known_names(self, view: ChunkView, book: RegistryBook) -> list[tuple[str, int]]:
        """Registered names mentioned in this chunk, first mention first."""
        mentioned = {fold(name): index for kind in (NPC, ITEM, LOCATION)
                     for name, index in view.cues.names[kind]}
        picks = {}
        for name in book.by_chunk[self.kind].get(view.chunk_id, ()):
            picks.setdefault(fold(name), (name, mentioned.get(fold(name), 0)))
        for folded, index in mentioned.items():
            if folded not in picks and folded in book.folded[self.kind]:
                picks[folded] = (book.spelled[self.kind][folded], index)
        return sorted(picks.values(), key=lambda pick: pick[1])

    def _record(self, view, rng, name: str, index: int) -> dict:
        return {self.name_field: name, "kind": rng.choice(self.values),
                "evidence": evidence_list(view, rng, index)}


@simulates
class NpcOccurrences(Occurrences):
    family, name_field, kind, values = NPC_OCCURRENCES, "npc_name", NPC, NPC_KINDS
    unsupported_values = ("spoke", "seen", "referenced", "fighting")


@simulates
class LocationOccurrences(Occurrences):
    family, name_field, kind, values = (LOCATION_OCCURRENCES, "location_name", LOCATION,
                                        LOCATION_KINDS)
    unsupported_values = ("arrived", "entered", "left", "explored")


@simulates
class ItemOccurrences(Occurrences):
    family, name_field, kind, values = ITEM_OCCURRENCES, "item_name", ITEM, ITEM_KINDS
    unsupported_values = ("dropped", "stolen", "equipped", "found")

    def _record(self, view, rng, name, index):
        kind = rng.choice(self.values)
        needs_holder = kind in ("acquired", "transferred")
        holder = view.speaker(index) if needs_holder or rng.random() < 0.3 else None
        return {"item_name": name, "kind": kind, "holder_name": holder,
                "evidence": evidence_list(view, rng, index)}


@simulates
class CombatTurns(Family):
    family, list_key, name_field, enum_field = COMBAT_TURNS, "turns", "actor_name", "turn_kind"
    unsupported_values = ("attack_of_opportunity", "bonus_action", "reaction", "spell")

    def clean(self, view, rng, book):
        enemies = [name for name, _ in _enemies(view, rng)]
        if not enemies:
            return []
        count = min(len(view.unit_ids), rng.randint(1, 4))
        indexes = sorted(rng.sample(range(len(view.unit_ids)), count))
        round_number, turns = rng.randint(1, 3), []
        for index in indexes:
            turns.append(self._record(view, rng, index, round_number, enemies))
            round_number += rng.random() < 0.4
        return turns

    def fresh(self, view, rng, book, want=None, existing=()):
        index = random_index(view, rng)
        return self._record(view, rng, index, rng.randint(1, 3), [_fallback_monster(view, rng)],
                            kind="attack" if want == "attack" else None)

    def suits(self, record, want):
        return want != "attack" or record["turn_kind"] == "attack"

    @staticmethod
    def _record(view, rng, index, round_number, enemies, kind=None) -> dict:
        kind = kind or rng.choices(TURN_KINDS, weights=TURN_KIND_WEIGHTS)[0]
        if kind == "attack":
            targets = rng.sample(enemies, min(len(enemies), rng.randint(1, 2)))
        elif kind == "cast_spell" and rng.random() < 0.5:
            targets = [rng.choice(enemies)]
        else:
            targets = []
        return {"round": round_number, "actor_name": view.speaker(index), "turn_kind": kind,
                "target_names": targets, "evidence": evidence_list(view, rng, index)}


ENEMY_STORY = ("appeared", "engaged", "damaged")
ENEMY_ENDINGS = ("defeated", "defeated", "fled", "surrendered")


@simulates
class EnemyEvents(Family):
    family, list_key, name_field, enum_field = ENEMY_EVENTS, "events", "enemy_name", "kind"
    unsupported_values = ("killed", "attacked", "spotted", "retreated")

    def clean(self, view, rng, book):
        events = []
        for name, index in _enemies(view, rng):
            story = [*ENEMY_STORY, rng.choice(ENEMY_ENDINGS)][:rng.randint(1, 4)]
            for kind in story:  # at most one "engaged" per enemy
                events.append(self._record(view, rng, name, kind, index))
                index = min(len(view.unit_ids) - 1, index + rng.randint(0, 3))
        return events

    def fresh(self, view, rng, book, want=None, existing=()):
        kind = "engaged" if want == "engaged" else rng.choice(ENEMY_KINDS)
        name = _fallback_monster(view, rng)
        engaged = {fold(r["enemy_name"]) for r in existing if r["kind"] == "engaged"}
        while kind == "engaged" and fold(name) in engaged:  # never a second engagement
            name = rng.choice(view.source.cues.finder.monsters)
        return self._record(view, rng, name, kind, random_index(view, rng))

    def suits(self, record, want):
        return want != "engaged" or record["kind"] == "engaged"

    @staticmethod
    def _record(view, rng, name, kind, index) -> dict:
        return {"enemy_name": name, "kind": kind, "evidence": [evidence(view, rng, index)]}


@simulates
class Scenes(Family):
    family, list_key, name_field, enum_field = SCENES, "scenes", "title", "kind"
    unsupported_values = ("battle", "dialogue", "shopping", "downtime")

    def clean(self, view, rng, book):
        return [self.fresh(view, rng, book)]

    def fresh(self, view, rng, book, want=None, existing=()):
        kind = rng.choice(SCENE_KINDS)
        places = view.cues.names[LOCATION] or view.cues.names[NPC]
        title = f"{kind.capitalize()}: {places[0][0]}" if places else f"{kind.capitalize()} scene"
        last = len(view.unit_ids) - 1
        summary = (f'{view.speaker(0)} opens with "{snippet(view.text(0))}"; '
                   f'{view.speaker(last)} closes with "{snippet(view.text(last))}".')
        return {"kind": kind, "title": title, "summary": summary,
                "start_unit_id": view.unit_ids[0], "end_unit_id": view.unit_ids[last]}


def missing_builders() -> list[str]:
    """The declared families (domain/families/) the simulator cannot produce, each with why: a per-chunk
    family without a registered builder (or, when it declares closed values, without the values a model
    invents for them), a reconciliation whose registry kind no registered registry builder provides."""
    registry_kinds = {builder.kind for builder in FAMILY_BUILDERS.values() if isinstance(builder, Registry)}
    missing = []
    for key, spec in DECLARED.items():
        builder = FAMILY_BUILDERS.get(key)
        if spec.role == ROLE_RECONCILIATION:
            if spec.registry_kind not in registry_kinds:
                missing.append(f"{key} (no registry builder of kind {spec.registry_kind!r})")
        elif builder is None:
            missing.append(f"{key} (no builder: register one with @sample.sim_records.simulates)")
        elif spec.enums and not (builder.enum_field and builder.unsupported_values):
            missing.append(f"{key} (its builder sets no enum_field and unsupported_values)")
    return missing


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
    return _invented_name(lambda folded: folded in inj.book.folded[kind], inj.rng)


def _invented_name(is_taken: Callable[[str], bool], rng: random.Random) -> str:
    """An invented name whose folded form `is_taken` rejects."""
    for name in rng.sample(INVENTED_NAMES, len(INVENTED_NAMES)):
        if not is_taken(fold(name)):
            return name
    number = 2
    while is_taken(fold(f"{INVENTED_NAMES[0]} {number}")):
        number += 1
    return f"{INVENTED_NAMES[0]} {number}"


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


def clean_records(family: str, view: ChunkView, rng: random.Random,
                  book: RegistryBook) -> list[dict]:
    return FAMILY_BUILDERS[family].clean(view, rng, book)


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
