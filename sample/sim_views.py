"""What the simulated producer sees of a transcript: per-source cues (its vocabulary, speakers and the
kind of each name), one chunk's view (its units, positions and the names it mentions) and the book of
registry names a source's chunk registries have offered so far. Built once per source and chunk; the
family builders (``sample.sim_records``) and the injectors (``sample.sim_injection``) read them.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from sample.srd import SrdSpell
from sample.text_cues import ITEM, LOCATION, NPC, CueFinder, looks_like_name, \
    source_vocabulary, speaker_names, speaker_words


def fold(name: str) -> str:
    """Case and whitespace folding, as registry identity and membership use it."""
    return " ".join(name.split()).casefold()


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
