"""Source transcripts for the simulated producer: cycling, padding, renumbering.

- Cycling: source i reuses input transcript i mod n under a distinct id
  (`crd3:C1E001`, then `crd3:C1E001~r2`, `crd3:C1E001~r3`, ...).
- Padding: a transcript shorter than its target length repeats its own
  turns, in order, under fresh unit ids (above every existing id); its chunk
  plans are then rebuilt.
- Renumbering: a run of whole extraction chunks gets new ids that FALL as the
  document goes on (unique, positive, above every other id), as transcript
  edits and merges can leave them. Document order is unchanged.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

from sample.crd3 import (DEFAULT_EXTRACTION_CHUNK_UNITS, DEFAULT_SCENE_CHUNK_UNITS,
                         chunk_plans)


def seed_int(*parts: object) -> int:
    """A 64-bit seed from any parts; independent of processing order."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def cycled_source_id(base_id: str, cycle: int) -> str:
    return base_id if cycle == 1 else f"{base_id}~r{cycle}"


@dataclass(frozen=True, slots=True)
class SourceOptions:
    min_units: int = 0                 # pad shorter transcripts up to this many units
    max_units: int = 0                 # when larger than min_units: target drawn per source
    extraction_units: int = DEFAULT_EXTRACTION_CHUNK_UNITS
    scene_units: int = DEFAULT_SCENE_CHUNK_UNITS
    renumber_rate: float = 0.0         # fraction of sources with a renumbered region

    @property
    def changes_transcripts(self) -> bool:
        return self.min_units > 0 or self.renumber_rate > 0


@dataclass(frozen=True, slots=True)
class SourceSlot:
    """Which input transcript a source reuses, under which id."""
    input_index: int
    source_id: str


@dataclass(frozen=True, slots=True)
class PreparedSource:
    input_index: int
    record: dict  # the transcript record as the pipeline will read it


def source_slots(inputs: Sequence[dict], count: int) -> list[SourceSlot]:
    slots = []
    for index in range(count):
        input_index, cycle = index % len(inputs), index // len(inputs) + 1
        slots.append(SourceSlot(input_index, cycled_source_id(inputs[input_index]["source_id"],
                                                               cycle)))
    return slots


def target_units(seed: int, source_id: str, base_units: int, options: SourceOptions) -> int:
    """How many units the source will have (never fewer than its input)."""
    if options.max_units > options.min_units:
        wanted = random.Random(seed_int(seed, "units", source_id)).randint(
            options.min_units, options.max_units)
    else:
        wanted = options.min_units
    return max(base_units, wanted)


def planned_chunk_counts(seed: int, base: dict, source_id: str,
                         options: SourceOptions) -> tuple[int, int]:
    """(extraction chunks, scene chunks) the prepared source will have."""
    units = target_units(seed, source_id, len(base["units"]), options)
    if units == len(base["units"]):
        kinds = [chunk["kind"] for chunk in base["chunks"]]
        return kinds.count("extraction"), kinds.count("scene")
    return -(-units // options.extraction_units), -(-units // options.scene_units)


def prepare_source(seed: int, slot: SourceSlot, base: dict,
                   options: SourceOptions) -> PreparedSource:
    record = {"source_id": slot.source_id, "units": base["units"], "chunks": base["chunks"]}
    units = target_units(seed, slot.source_id, len(base["units"]), options)
    if units > len(base["units"]):
        padded = pad_units(base["units"], units)
        record["units"] = padded
        record["chunks"] = chunk_plans([u["unit_id"] for u in padded],
                                       options.extraction_units, options.scene_units)
    rng = random.Random(seed_int(seed, "renumber", slot.source_id))
    if rng.random() < options.renumber_rate:
        record = renumber_region(record, rng)
    return PreparedSource(slot.input_index, record)


def pad_units(units: Sequence[dict], target: int) -> list[dict]:
    """Repeat the transcript's own turns until it has `target` units, fresh ids."""
    padded = list(units)
    next_id = max(unit["unit_id"] for unit in units) + 1
    while len(padded) < target:
        source = units[(len(padded) - len(units)) % len(units)]
        padded.append({"unit_id": next_id, "speaker": source["speaker"], "text": source["text"]})
        next_id += 1
    return padded


def renumber_region(record: dict, rng: random.Random) -> dict:
    """Give a run of whole extraction chunks ids that fall with document position."""
    extraction = [chunk for chunk in record["chunks"] if chunk["kind"] == "extraction"]
    if not extraction:
        return record
    run = max(1, round(len(extraction) * rng.uniform(0.05, 0.15)))
    first = rng.randrange(1, len(extraction) - run + 1) if len(extraction) > run else 0
    chosen = extraction[first:first + run]
    position = {unit["unit_id"]: pos for pos, unit in enumerate(record["units"])}
    region = sorted({u for chunk in chosen for u in chunk["unit_ids"]}, key=position.__getitem__)
    top = max(position) + len(region)
    new_id = {old: top - offset for offset, old in enumerate(region)}  # falls as position rises
    units = [{**unit, "unit_id": new_id[unit["unit_id"]]} if unit["unit_id"] in new_id else unit
             for unit in record["units"]]
    chunks = [{**chunk, "unit_ids": [new_id.get(u, u) for u in chunk["unit_ids"]]}
              for chunk in record["chunks"]]
    return {**record, "units": units, "chunks": chunks}
