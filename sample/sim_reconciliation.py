"""Registry reconciliations in the SIMULATED producer (contract §4.1): entries, proposals, defects.

A reconciliation slot is `(source, "*", <kind>-reconciliation)`. Its prompt
lists every entry of the source's accepted chunk registries of that kind,
earliest evidence first, labelled E1, E2, ... The ordering is re-derived here
from the accepted responses, independently of `domain/` (a test checks that
both agree): an entry's earliest evidence is the smallest document position
either endpoint of any of its ranges reaches (reversed endpoints are ordered
by the job before it sorts); ties go by chunk id, then by the entry's place in
its response. Every attempt records the fingerprint of the list it was made
from (`entry_list_fingerprint`, rendered as the prompt shows the list), as a
careful producer does, so the job never reads its labels against another list.

The clean proposal merges entries whose folded names or aliases overlap (one
entity per connected group), so it never repeats a name across entities.
Each attempt carries at most one semantic defect (the proposal categories,
plus a blank name), so every injected defect stays the only one of its kind
and is reported exactly once; benign byte-level kinds and truncation are
shared with the per-chunk families.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import orjson

from domain.families.base import ROLE_RECONCILIATION
from sample.sim_defects import DECLARED, AttemptModel, DefectKind, KindRates
from sample.sim_injection import Defect
from sample.sim_records import BLANKS, INVENTED_NAMES, NON_BMP
from sample.sim_views import fold

SOURCE_CHUNK = "*"
# The declared reconciliation family of each registry kind (domain/families/, in the registry's order).
RECONCILIATION_FAMILY = {spec.registry_kind: key for key, spec in DECLARED.items() if spec.role == ROLE_RECONCILIATION}
LABEL_PREFIX = "E"


class ReconciliationDefect(StrEnum):
    """Proposal defects only a reconciliation can have (blank names are `DefectKind.BLANK_NAME`)."""
    UNKNOWN_LABEL = "unknown_label"
    UNASSIGNED_ENTRY = "unassigned_entry"
    ENTRY_IN_SEVERAL_ENTITIES = "entry_in_several_entities"
    NAME_CONFLICT = "name_conflict"


R = ReconciliationDefect
SEMANTIC = (R.UNKNOWN_LABEL, R.UNASSIGNED_ENTRY, R.ENTRY_IN_SEVERAL_ENTITIES, R.NAME_CONFLICT,
            DefectKind.BLANK_NAME)
BYTE_LEVEL = (DefectKind.UTF8_BOM, DefectKind.CRLF_WHITESPACE, DefectKind.NON_BMP_TEXT,
              DefectKind.STALE_PROMPT_FINGERPRINT, DefectKind.TRUNCATED_JSON)
BLOCKING = frozenset({*SEMANTIC, DefectKind.TRUNCATED_JSON})

# The reason code the job reports for each proposal defect (as `sample.sim_defects.REASON_CODES`).
RECONCILIATION_REASON_CODES: dict[ReconciliationDefect, tuple[str, ...]] = {kind: (kind.value,) for kind in R}

@dataclass(frozen=True, slots=True)
class ReconciliationRates(KindRates):
    """First-attempt probabilities of the proposal defects (byte-level kinds use `DefectRates`)."""
    unknown_label: float = 0.04
    unassigned_entry: float = 0.04
    entry_in_several_entities: float = 0.04
    name_conflict: float = 0.03


# ------------------------------------------------------------------ the listed entries

@dataclass(frozen=True, slots=True)
class Entry:
    label: str
    chunk_id: str
    record: dict  # the accepted chunk-registry record, as the response gave it


def listed_entries(position: dict[int, int],
                   registries: Sequence[tuple[str, Sequence[dict]]]) -> list[Entry]:
    """Entries of the accepted chunk registries in the order the prompt lists them."""
    keyed = []
    for chunk_id, records in registries:
        for n, record in enumerate(records):
            earliest = min(min(position[e["start_unit_id"]], position[e["end_unit_id"]])
                           for e in record["evidence"])
            keyed.append(((earliest, chunk_id, n), chunk_id, record))
    keyed.sort(key=lambda item: item[0])
    return [Entry(f"{LABEL_PREFIX}{number}", chunk_id, record)
            for number, (_, chunk_id, record) in enumerate(keyed, start=1)]


def _shown_evidence(position: dict[int, int], evidence: Sequence[dict]) -> list[dict]:
    """A record's ranges as the prompt shows them: endpoints in document order, each range
    once, sorted by document position."""
    spans: dict[tuple[int, int], tuple[int, int]] = {}
    for e in evidence:
        start, end = e["start_unit_id"], e["end_unit_id"]
        if position[start] > position[end]:
            start, end = end, start
        spans[start, end] = (position[start], position[end])
    return [{"start_unit_id": start, "end_unit_id": end}
            for (start, end), _ in sorted(spans.items(), key=lambda item: item[1])]


def entry_list_fingerprint(position: dict[int, int], entries: Sequence[Entry]) -> str:
    """What a careful producer records as its attempt's `input_fingerprint` (contract §3.2, §4.1):
    `sha256:` over the entry list exactly as its prompt shows it - one JSON object per line with
    label, name, aliases, description and cited ranges, in label order."""
    text = "".join(orjson.dumps({
        "label": entry.label, "name": entry.record["name"], "aliases": list(entry.record["aliases"]),
        "description": entry.record["description"],
        "evidence": _shown_evidence(position, entry.record["evidence"]),
    }).decode() + "\n" for entry in entries)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def names_of(record: dict) -> list[str]:
    return [record["name"], *record["aliases"]]


def clean_proposal(entries: Sequence[Entry]) -> list[dict]:
    """One entity per group of entries that share a folded name or alias."""
    parent = list(range(len(entries)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, entry in enumerate(entries):
        for name in names_of(entry.record):
            j = owner.setdefault(fold(name), i)
            parent[root(i)] = root(j)
    groups: dict[int, list[Entry]] = {}
    for i, entry in enumerate(entries):
        groups.setdefault(root(i), []).append(entry)
    entities = []
    for members in groups.values():  # in order of each group's first entry
        first = members[0].record
        seen = {fold(first["name"])}
        aliases = []
        for member in members:
            for name in names_of(member.record):
                if fold(name) not in seen:
                    seen.add(fold(name))
                    aliases.append(name)
        entities.append({"name": first["name"], "aliases": aliases,
                         "description": first["description"],
                         "member_labels": [member.label for member in members]})
    return entities


# ------------------------------------------------------------------ attempts and defects

def applicable(clean: Sequence[dict]) -> tuple:
    """Semantic kinds the clean proposal can carry: none without entries; a name
    conflict needs two entities, or one with two members to split."""
    if not clean:
        return ()
    splittable = len(clean) >= 2 or any(len(e["member_labels"]) >= 2 for e in clean)
    return tuple(kind for kind in SEMANTIC if splittable or kind is not R.NAME_CONFLICT)


def plan_attempts(rng: random.Random, rates: ReconciliationRates, byte_rates: dict,
                  model: AttemptModel, kinds: Sequence) -> list[tuple]:
    """Defect kinds of each attempt of one reconciliation slot, attempt 1 first.

    ``kinds``: the applicable semantic kinds (`applicable`); ``byte_rates``: the
    per-chunk families' rates of the byte-level kinds (and of blank names)."""
    semantic = [(kind, rates.rate(kind) if isinstance(kind, ReconciliationDefect) else byte_rates[kind])
                for kind in kinds]

    def benign() -> tuple:
        return tuple(k for k in BYTE_LEVEL
                     if k is not DefectKind.TRUNCATED_JSON and rng.random() < byte_rates[k])

    def draw() -> tuple:
        kinds = [k for k in BYTE_LEVEL if rng.random() < byte_rates[k]]
        roll, total = rng.random(), 0.0
        for kind, rate in semantic:  # at most one semantic defect per attempt
            total += rate
            if roll < total:
                kinds.append(kind)
                break
        return tuple(kinds)

    def failing() -> tuple:
        kinds = draw()
        if any(k in BLOCKING for k in kinds):
            return kinds
        return (*kinds, rng.choice([k for k, _ in semantic] or [DefectKind.TRUNCATED_JSON]))

    attempts = [draw()]
    while len(attempts) < model.max_attempts:
        if not any(k in BLOCKING for k in attempts[-1]):
            if rng.random() < model.superseded_attempt:
                attempts.append(benign())
            break
        if rng.random() >= model.retry_after_failure:
            break
        attempts.append(benign() if rng.random() < model.fix_on_retry else failing())
    return attempts


def _fresh_name(entities: Sequence[dict], entries: Sequence[Entry], rng: random.Random) -> str:
    taken = {fold(n) for e in entities for n in names_of(e)}
    taken |= {fold(n) for entry in entries for n in names_of(entry.record)}
    for name in rng.sample(INVENTED_NAMES, len(INVENTED_NAMES)):
        if fold(name) not in taken:
            return name
    number = 2
    while fold(f"{INVENTED_NAMES[0]} {number}") in taken:
        number += 1
    return f"{INVENTED_NAMES[0]} {number}"


def _entry_named(entries: Sequence[Entry], label: str) -> str:
    return next(entry.record["name"] for entry in entries if entry.label == label)


def inject(clean: Sequence[dict], entries: Sequence[Entry], kinds: Sequence,
           rng: random.Random) -> tuple[dict, list[Defect]]:
    """The response of one attempt (a fresh copy of `clean`) and the defects it carries."""
    entities = [{**e, "aliases": list(e["aliases"]), "member_labels": list(e["member_labels"])}
                for e in clean]
    defects: list[Defect] = []
    wanted = set(kinds)
    if R.UNASSIGNED_ENTRY in wanted:
        holder = rng.choice(entities)
        label = rng.choice(holder["member_labels"])
        holder["member_labels"].remove(label)
        if not holder["member_labels"]:
            entities.remove(holder)
        defects.append(Defect(R.UNASSIGNED_ENTRY, _entry_named(entries, label), None))
    if R.ENTRY_IN_SEVERAL_ENTITIES in wanted:
        holder = rng.choice(entities)
        label = rng.choice(holder["member_labels"])
        others = [e for e in entities if e is not holder]
        if others:
            rng.choice(others)["member_labels"].append(label)
        else:
            entities.append({"name": _fresh_name(entities, entries, rng), "aliases": [],
                             "description": "Listed again to be safe.", "member_labels": [label]})
        defects.append(Defect(R.ENTRY_IN_SEVERAL_ENTITIES, _entry_named(entries, label), None))
    if R.UNKNOWN_LABEL in wanted:
        entity = rng.choice(entities)
        entity["member_labels"].insert(rng.randint(0, len(entity["member_labels"])),
                                       f"{LABEL_PREFIX}{len(entries) + rng.randint(1, 5)}")
        defects.append(Defect(R.UNKNOWN_LABEL, entity["name"], None))
    if R.NAME_CONFLICT in wanted:
        entity = _split_or_pick_other(entities, entries, rng)
        first = entities[0]
        variant = first["name"].upper() if rng.random() < 0.5 else first["name"]
        entity["aliases"].append(variant)
        defects.append(Defect(R.NAME_CONFLICT, entity["name"], None))
    if DefectKind.BLANK_NAME in wanted:
        entity = rng.choice(entities)
        if entity["aliases"] and rng.random() < 0.5:
            entity["aliases"][rng.randrange(len(entity["aliases"]))] = rng.choice(BLANKS)
            defects.append(Defect(DefectKind.BLANK_NAME, entity["name"], None))
        else:
            entity["name"] = rng.choice(BLANKS)
            defects.append(Defect(DefectKind.BLANK_NAME, None, None))
    if DefectKind.NON_BMP_TEXT in wanted and entities:
        entity = rng.choice(entities)
        entity["description"] = f"{entity['description']} {rng.choice(NON_BMP)}"
        defects.append(Defect(DefectKind.NON_BMP_TEXT, entity["name"] if entity["name"].strip() else None, None))
    for kind in (DefectKind.UTF8_BOM, DefectKind.CRLF_WHITESPACE, DefectKind.STALE_PROMPT_FINGERPRINT,
                 DefectKind.TRUNCATED_JSON):
        if kind in wanted:
            defects.append(Defect(kind, None, None))
    return {"entities": entities}, defects


def _split_or_pick_other(entities: list[dict], entries: Sequence[Entry], rng: random.Random) -> dict:
    """An entity other than the first; split one off the only entity when there is just one."""
    if len(entities) >= 2:
        return rng.choice(entities[1:])
    (only,) = entities
    split = {"name": _fresh_name(entities, entries, rng), "aliases": [], "description": only["description"],
             "member_labels": [only["member_labels"].pop()]}
    entities.append(split)
    return split


def split_overrides(rates: ReconciliationRates,
                    overrides: Sequence[str]) -> tuple[ReconciliationRates, list[str]]:
    """Apply the `NAME=P` overrides that name a `ReconciliationRates` field; return the rest."""
    fields = {f.name for f in dataclasses.fields(ReconciliationRates)}
    rest = []
    for override in overrides:
        name, sep, raw = override.partition("=")
        name = name.strip().replace("-", "_")
        if sep and name in fields:
            value = float(raw)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {raw}")
            rates = dataclasses.replace(rates, **{name: value})
        else:
            rest.append(override)
    return rates, rest
