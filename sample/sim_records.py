"""Response content of the simulated producer: each family's builder of clean records.

Clean records are grounded in the chunk text (see `sample.text_cues`, seen through
`sample.sim_views`): SRD spells and monsters that occur in the chunk, capitalised names, the
speaker of the cited unit as caster or actor, and evidence ranges inside the chunk. A family's
builder registers itself with ``@simulates``. Defects are then injected by `sample.sim_injection`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from functools import lru_cache

from domain.families.base import ROLE_RECONCILIATION
from sample.sim_defects import (
    COMBAT_TURNS, DECLARED, ENEMY_EVENTS, ITEM_OCCURRENCES, ITEM_REGISTRY, LOCATION_OCCURRENCES,
    LOCATION_REGISTRY, NPC_OCCURRENCES, NPC_REGISTRY, SCENES, SPELLS,
)
from sample.sim_views import ChunkView, RegistryBook, fold
from sample.srd import SrdSpell, load_spells
from sample.text_cues import ITEM, LOCATION, NPC

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


def invented_name(is_taken: Callable[[str], bool], rng: random.Random) -> str:
    """An invented name whose folded form `is_taken` rejects."""
    for name in rng.sample(INVENTED_NAMES, len(INVENTED_NAMES)):
        if not is_taken(fold(name)):
            return name
    number = 2
    while is_taken(fold(f"{INVENTED_NAMES[0]} {number}")):
        number += 1
    return f"{INVENTED_NAMES[0]} {number}"


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
            name, index = invented_name(taken.__contains__, rng), random_index(view, rng)
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


def clean_records(family: str, view: ChunkView, rng: random.Random,
                  book: RegistryBook) -> list[dict]:
    return FAMILY_BUILDERS[family].clean(view, rng, book)
