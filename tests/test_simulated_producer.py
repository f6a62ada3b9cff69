"""The SIMULATED producer (a test double): candidate format, content and ground truth.

The checks here re-derive what the producer claims from its outputs alone:
an independent, deliberately plain reading of contract §4 (`spec_failures`)
must agree with the ground truth's `expected_pass` for every candidate, and
every injected defect must really be present where the truth says it is.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sample import simulated_producer as sim
from sample.jsonl import iter_lines, read_bytes, read_jsonl, write_jsonl
from sample.sim_defects import (
    BENIGN_KINDS, BLOCKING_KINDS, FAMILIES, AttemptModel, ChunkShape, DefectKind, DefectRates,
    applicable_kinds, with_overrides,
)
from sample.srd import load_spells

try:  # tests/ on sys.path, or tests/ as a package
    from flink_support import shared_path
except ImportError:
    from tests.flink_support import shared_path

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE = REPO_ROOT / "sample" / "data" / "crd3-sample.transcripts.jsonl.gz"
SHARED_SRD = shared_path("reference", "srd")
K = DefectKind

CANDIDATE_KEYS = ["candidate_id", "family", "source_id", "chunk_id", "attempt", "producer",
                  "prompt_fingerprint", "schema_fingerprint", "raw_response", "received_at"]
TRUTH_KEYS = ["candidate_id", "family", "source_id", "chunk_id", "attempt", "defects",
              "expected_pass"]
REGISTRY_OF = {"npc-occurrences": "npc-registry", "item-occurrences": "item-registry",
               "location-occurrences": "location-registry"}


def fake_fingerprints(family: str) -> tuple[str, str]:
    return ("sha256:" + hashlib.sha256(f"prompt/{family}".encode()).hexdigest(),
            "sha256:" + hashlib.sha256(f"schema/{family}".encode()).hexdigest())


# ------------------------------------------------------------------ running the producer

@dataclass
class Run:
    candidates_path: Path
    truth_path: Path
    transcripts_path: Path
    candidates: list[dict] = field(default_factory=list)
    truth: list[dict] = field(default_factory=list)
    transcripts: dict[str, dict] = field(default_factory=dict)

    def load(self) -> Run:
        self.candidates = list(read_jsonl(self.candidates_path))
        vocabulary, *self.truth = read_jsonl(self.truth_path)  # the words first, then one row per candidate
        assert set(vocabulary) == {"defect_vocabulary"}
        self.transcripts = {r["source_id"]: r for r in read_jsonl(self.transcripts_path)}
        return self


def produce(out_dir: Path, *args: str, transcripts: Path = SAMPLE) -> Run:
    out_dir.mkdir(parents=True, exist_ok=True)
    run = Run(out_dir / "candidates.jsonl.gz", out_dir / "truth.jsonl",
              out_dir / "transcripts.jsonl.gz")
    code = sim.main(["--transcripts", str(transcripts),
                     "--candidates-out", str(run.candidates_path),
                     "--truth-out", str(run.truth_path),
                     "--transcripts-out", str(run.transcripts_path), *args],
                    fingerprints=fake_fingerprints)
    assert code == 0
    return run.load()


@pytest.fixture(scope="module")
def big_run(tmp_path_factory) -> Run:
    """A few thousand candidates: both sample episodes, cycled into 6 sources."""
    return produce(tmp_path_factory.mktemp("big"), "--seed", "11", "--sources", "6")


@pytest.fixture(scope="module")
def compound_run(tmp_path_factory) -> Run:
    """Higher rates, so rarer combinations (and renumbering) certainly occur."""
    rates = ["multiple_defects=0.3", "renumbered_source=1", "reversed_endpoints_renumbered=0.6",
             "scene_reversed_range=0.2", "extra_scene=0.2", "scene_range_mismatch=0.2",
             "fix_on_retry=0.5"]
    return produce(tmp_path_factory.mktemp("compound"), "--seed", "3", "--sources", "3",
                   "--min-units", "2400", *[a for r in rates for a in ("--defect-rate", r)])


# ------------------------------------------------------------------ source index

@dataclass(frozen=True)
class Source:
    position: dict[int, int]
    ids: list[int]
    chunks: dict[str, dict]

    @classmethod
    def of(cls, record: dict) -> Source:
        ids = [u["unit_id"] for u in record["units"]]
        return cls({u: p for p, u in enumerate(ids)}, ids,
                   {c["chunk_id"]: c for c in record["chunks"]})

    def canonical(self, start: int, end: int) -> tuple[int, int]:
        """contract §5 step 3: swap only resolvable endpoints whose start sits later."""
        if start in self.position and end in self.position \
                and self.position[start] > self.position[end]:
            return end, start
        return start, end

    def within(self, chunk_id: str, start: int, end: int) -> bool:
        """contract §5.3: every unit of the document-ordered span belongs to the chunk."""
        if start not in self.position or end not in self.position:
            return False
        first, last = self.position[start], self.position[end]
        if first > last:
            return False
        members = set(self.chunks[chunk_id]["unit_ids"])
        return all(self.ids[p] in members for p in range(first, last + 1))


def sources_of(run: Run) -> dict[str, Source]:
    return {source_id: Source.of(record) for source_id, record in run.transcripts.items()}


# ------------------------------------------------------------------ an independent contract §4 reading

E = {"start_unit_id": int, "end_unit_id": int}
ENUMS = {
    "npc-occurrences": {"present", "speaking", "mentioned", "acting"},
    "item-occurrences": {"acquired", "used", "transferred", "lost", "mentioned"},
    "location-occurrences": {"visited", "mentioned", "departed"},
    "combat-turns": {"attack", "cast_spell", "move", "dash", "disengage", "dodge", "help",
                     "hide", "ready", "use_object", "other"},
    "enemy-events": {"appeared", "engaged", "damaged", "defeated", "fled", "surrendered"},
    "scene-descriptions": {"combat", "exploration", "social", "travel", "rest", "recap"},
}
SHAPES = {  # family -> (list key, record shape); a str value names an enum family
    "spells": ("spells", {"spell_name": str, "caster_name": str,
                          "cast": {"level": (int, None), "as_ritual": bool,
                                   "target_names": [str]}, "evidence": [E]}),
    "npc-registry": ("npcs", {"name": str, "aliases": [str], "description": str,
                              "evidence": [E]}),
    "item-registry": ("items", {"name": str, "aliases": [str], "description": str,
                                "evidence": [E]}),
    "location-registry": ("locations", {"name": str, "aliases": [str], "description": str,
                                        "evidence": [E]}),
    "npc-occurrences": ("occurrences", {"npc_name": str, "kind": "enum", "evidence": [E]}),
    "item-occurrences": ("occurrences", {"item_name": str, "kind": "enum",
                                         "holder_name": (str, None), "evidence": [E]}),
    "location-occurrences": ("occurrences", {"location_name": str, "kind": "enum",
                                             "evidence": [E]}),
    "combat-turns": ("turns", {"round": int, "actor_name": str, "turn_kind": "enum",
                               "target_names": [str], "evidence": [E]}),
    "enemy-events": ("events", {"enemy_name": str, "kind": "enum", "evidence": [E]}),
    "scene-descriptions": ("scenes", {"kind": "enum", "title": str, "summary": str,
                                      "start_unit_id": int, "end_unit_id": int}),
}
NAME_FIELD = {"npc-occurrences": "npc_name", "item-occurrences": "item_name",
              "location-occurrences": "location_name"}
SPELLS = {spell.name: spell for spell in load_spells()}


def fold(name: str) -> str:
    return " ".join(name.split()).casefold()


def blank(value: str) -> bool:
    return not value.strip()


def parse_response(raw: str):
    text = raw[1:] if raw.startswith("\ufeff") else raw
    return json.loads(text)


def matches(value, shape, family: str) -> bool:
    if shape == "enum":
        return isinstance(value, str) and value in ENUMS[family]
    if isinstance(shape, tuple):
        return any(value is None if s is None else matches(value, s, family) for s in shape)
    if isinstance(shape, list):
        return isinstance(value, list) and all(matches(v, shape[0], family) for v in value)
    if isinstance(shape, dict):
        return isinstance(value, dict) and list(value) == list(shape) and all(
            matches(value[k], s, family) for k, s in shape.items())
    if shape is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, shape)


def structurally_valid(family: str, response) -> bool:
    key, record_shape = SHAPES[family]
    if not (isinstance(response, dict) and list(response) == [key]):
        return False
    records = response[key]
    return isinstance(records, list) and all(matches(r, record_shape, family) for r in records) \
        and all(r["evidence"] for r in records if "evidence" in r)


def spec_failures(candidate: dict, source: Source, registries: dict[str, set[str]]) -> list[str]:
    """Every rule of contract §4 a candidate breaks, after endpoint canonicalization."""
    family, chunk_id = candidate["family"], candidate["chunk_id"]
    try:
        response = parse_response(candidate["raw_response"])
    except json.JSONDecodeError:
        return ["unparsable"]
    if not structurally_valid(family, response):
        return ["shape"]
    records = next(iter(response.values()))
    failures = []
    if family == "scene-descriptions":
        chunk_ids = source.chunks[chunk_id]["unit_ids"]
        if len(records) != 1:
            failures.append("scene count")
        if any((r["start_unit_id"], r["end_unit_id"]) != (chunk_ids[0], chunk_ids[-1])
               for r in records):
            failures.append("scene range")
        return failures
    for record in records:
        for item in record["evidence"]:
            if not source.within(chunk_id, *source.canonical(item["start_unit_id"],
                                                             item["end_unit_id"])):
                failures.append("evidence outside chunk or unresolved")
    failures += FAMILY_RULES[family](records, registries)
    return failures


def spell_rules(records, _registries):
    failures = []
    for r in records:
        cast = r["cast"]
        if blank(r["spell_name"]) or blank(r["caster_name"]) or any(map(blank,
                                                                         cast["target_names"])):
            failures.append("blank")
        if cast["level"] is not None and not 0 <= cast["level"] <= 9:
            failures.append("level range")
        spell = SPELLS.get(r["spell_name"])
        if spell is not None:
            if cast["level"] is not None and (cast["level"] < spell.level
                                              or (spell.level == 0 and cast["level"] != 0)):
                failures.append("level below base")
            if cast["as_ritual"] and not spell.ritual:
                failures.append("ritual")
    return failures


def registry_rules(records, _registries):
    names = [n for r in records for n in (r["name"], *r["aliases"])]
    failures = ["blank"] if any(map(blank, names)) else []
    folded = [fold(n) for n in names if not blank(n)]
    if len(folded) != len(set(folded)):
        failures.append("identity")
    return failures


def occurrence_rules(field_name):
    def rules(records, registries):
        failures = []
        for r in records:
            if fold(r[field_name]) not in registries:
                failures.append("membership")
            if r["kind"] in ("acquired", "transferred") and r.get("holder_name") is None:
                failures.append("holder")
        return failures
    return rules


def combat_rules(records, _registries):
    failures = []
    for r in records:
        if r["round"] < 1:
            failures.append("round")
        if blank(r["actor_name"]) or any(map(blank, r["target_names"])):
            failures.append("blank")
        if r["turn_kind"] == "attack" and not r["target_names"]:
            failures.append("attack target")
    return failures


def enemy_rules(records, _registries):
    engaged = Counter(fold(r["enemy_name"]) for r in records if r["kind"] == "engaged")
    failures = ["blank"] * sum(blank(r["enemy_name"]) for r in records)
    return failures + ["engaged twice"] * sum(1 for n in engaged.values() if n > 1)


FAMILY_RULES = {"spells": spell_rules, "npc-registry": registry_rules,
                "item-registry": registry_rules, "location-registry": registry_rules,
                "npc-occurrences": occurrence_rules("npc_name"),
                "item-occurrences": occurrence_rules("item_name"),
                "location-occurrences": occurrence_rules("location_name"),
                "combat-turns": combat_rules, "enemy-events": enemy_rules}


def accepted_registry_names(run: Run, sources: dict[str, Source]) -> dict[tuple[str, str], set]:
    """(source, registry family) -> folded names and aliases of accepted registries,
    where accepted = the earliest attempt of a slot that passes `spec_failures`."""
    names: dict[tuple[str, str], set[str]] = defaultdict(set)
    slots = defaultdict(list)
    for c in run.candidates:
        if c["family"].endswith("-registry"):
            slots[c["source_id"], c["chunk_id"], c["family"]].append(c)
    for (source_id, _, family), attempts in slots.items():
        for c in sorted(attempts, key=lambda c: c["attempt"]):
            if not spec_failures(c, sources[source_id], set()):
                records = next(iter(parse_response(c["raw_response"]).values()))
                names[source_id, family] |= {fold(n) for r in records
                                             for n in (r["name"], *r["aliases"])}
                break
    return names


def independent_verdicts(run: Run) -> dict[str, list[str]]:
    sources = sources_of(run)
    registries = accepted_registry_names(run, sources)
    return {c["candidate_id"]: spec_failures(
        c, sources[c["source_id"]],
        registries.get((c["source_id"], REGISTRY_OF.get(c["family"], "")), set()))
        for c in run.candidates}


# ------------------------------------------------------------------ format

def test_every_candidate_is_a_spec_candidate_record(big_run):
    sources = sources_of(big_run)
    for c in big_run.candidates:
        assert list(c) == CANDIDATE_KEYS
        assert re.fullmatch(r"c-[0-9a-f]{16}", c["candidate_id"])
        assert c["family"] in FAMILIES
        assert isinstance(c["attempt"], int) and 1 <= c["attempt"] <= 3
        assert c["producer"] == {"provider": "simulated", "model": "sim-1"}
        assert isinstance(c["raw_response"], str)
        assert datetime.strptime(c["received_at"], "%Y-%m-%dT%H:%M:%SZ")
        prompt, schema = fake_fingerprints(c["family"])
        assert c["schema_fingerprint"] == schema
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", c["prompt_fingerprint"])
        chunk = sources[c["source_id"]].chunks[c["chunk_id"]]
        assert chunk["kind"] == ("scene" if c["family"] == "scene-descriptions" else "extraction")


def test_candidate_ids_are_unique_and_derived_from_the_slot_and_attempt(big_run):
    ids = [c["candidate_id"] for c in big_run.candidates]
    assert len(ids) == len(set(ids))
    for c in big_run.candidates[:200]:
        assert c["candidate_id"] == sim.candidate_id(c["source_id"], c["chunk_id"], c["family"],
                                                     c["attempt"])


def test_truth_has_one_line_per_candidate_in_the_same_order(big_run):
    assert [t["candidate_id"] for t in big_run.truth] == \
        [c["candidate_id"] for c in big_run.candidates]
    for t, c in zip(big_run.truth, big_run.candidates):
        assert list(t) == TRUTH_KEYS
        assert [t[k] for k in TRUTH_KEYS[1:5]] == [c[k] for k in TRUTH_KEYS[1:5]]
        assert t["expected_pass"] == (not any(d["kind"] in BLOCKING_KINDS for d in t["defects"]))
        for d in t["defects"]:
            assert list(d) == ["kind", "record_name", "range"]
            assert d["kind"] in {k.value for k in DefectKind}
            assert d["record_name"] is None or d["record_name"].strip()
            assert d["range"] is None or (len(d["range"]) == 2
                                          and all(isinstance(x, int) for x in d["range"]))


def test_every_family_appears_with_several_attempts(big_run):
    families = Counter(c["family"] for c in big_run.candidates)
    assert set(families) == set(FAMILIES)
    attempts = Counter(c["attempt"] for c in big_run.candidates)
    assert attempts[1] > attempts[2] > attempts[3] > 0
    assert 3000 < len(big_run.candidates) < 8000


def test_lines_split_on_lf_only(big_run):
    data = read_bytes(big_run.candidates_path)
    assert data.count(b"\n") == len(big_run.candidates)


# ------------------------------------------------------------------ content

def test_response_shapes_follow_spec_unless_a_structural_defect_was_injected(big_run):
    structural = {K.TRUNCATED_JSON.value, K.UNSUPPORTED_ENUM.value}
    for c, t in zip(big_run.candidates, big_run.truth):
        kinds = {d["kind"] for d in t["defects"]}
        if kinds & structural:
            continue
        assert structurally_valid(c["family"], parse_response(c["raw_response"])), c


def test_independent_spec_reading_agrees_with_expected_pass(big_run, compound_run):
    for run in (big_run, compound_run):
        verdicts = independent_verdicts(run)
        for t in run.truth:
            assert (not verdicts[t["candidate_id"]]) == t["expected_pass"], (t, verdicts[
                t["candidate_id"]])


def test_clean_content_is_grounded_in_the_chunk_text(big_run):
    sources = {r["source_id"]: r for r in big_run.transcripts.values()}
    spells_seen = 0
    for c, t in zip(big_run.candidates, big_run.truth):
        if c["family"] != "spells" or t["defects"]:
            continue
        record = sources[c["source_id"]]
        position = {u["unit_id"]: u for u in record["units"]}
        chunk = next(ch for ch in record["chunks"] if ch["chunk_id"] == c["chunk_id"])
        text = " ".join(position[u]["text"] for u in chunk["unit_ids"]).lower()
        speakers = {position[u]["speaker"] for u in chunk["unit_ids"]}
        for spell in parse_response(c["raw_response"])["spells"]:
            assert spell["spell_name"] in SPELLS
            assert spell["spell_name"].lower() in text
            assert spell["caster_name"] in speakers
            spells_seen += 1
    assert spells_seen > 20


def test_scenes_cover_their_chunk(big_run):
    sources = sources_of(big_run)
    scene_chunks = {(s, cid) for s, src in sources.items()
                    for cid, ch in src.chunks.items() if ch["kind"] == "scene"}
    produced = set()
    for c, t in zip(big_run.candidates, big_run.truth):
        if c["family"] == "scene-descriptions":
            produced.add((c["source_id"], c["chunk_id"]))
            if not t["defects"]:
                ids = sources[c["source_id"]].chunks[c["chunk_id"]]["unit_ids"]
                (scene,) = parse_response(c["raw_response"])["scenes"]
                assert (scene["start_unit_id"], scene["end_unit_id"]) == (ids[0], ids[-1])
    assert produced == scene_chunks


# ------------------------------------------------------------------ ground truth per defect

def record_with(records: list[dict], name: str | None) -> list[dict]:
    keys = ("spell_name", "caster_name", "name", "npc_name", "item_name", "location_name",
            "actor_name", "enemy_name", "title")
    return [r for r in records if name is None or any(r.get(k) == name for k in keys)]


def cited(records: list[dict], span) -> bool:
    items = [(e["start_unit_id"], e["end_unit_id"]) for r in records for e in r.get("evidence", [])]
    items += [(r["start_unit_id"], r["end_unit_id"]) for r in records if "start_unit_id" in r]
    return tuple(span) in items


def test_each_injected_defect_is_really_there(big_run, compound_run):
    seen = Counter()
    for run in (big_run, compound_run):
        sources = sources_of(run)
        for c, t in zip(run.candidates, run.truth):
            for defect in t["defects"]:
                check_defect(c, defect, sources[c["source_id"]])
                seen[defect["kind"]] += 1
    assert set(seen) == {k.value for k in DefectKind}, set(DefectKind) - set(seen)


def check_defect(c: dict, defect: dict, source: Source) -> None:  # noqa: C901 - one case per kind
    kind, name, span = K(defect["kind"]), defect["record_name"], defect["range"]
    raw, chunk = c["raw_response"], source.chunks[c["chunk_id"]]
    if kind is K.TRUNCATED_JSON:
        with pytest.raises(json.JSONDecodeError):
            parse_response(raw)
        return
    if kind is K.UTF8_BOM:
        assert raw.startswith("\ufeff")
        return
    if kind is K.CRLF_WHITESPACE:
        assert "\r\n" in raw
        return
    if kind is K.STALE_PROMPT_FINGERPRINT:
        assert c["prompt_fingerprint"] != fake_fingerprints(c["family"])[0]
        return
    try:
        response = parse_response(raw)
    except json.JSONDecodeError:
        return  # also truncated: nothing more to look at
    records = next(iter(response.values()))
    named = record_with(records, name)
    assert named, (kind, name)
    position = source.position
    if span is not None:
        assert cited(named, span), (kind, span)
    if kind in (K.REVERSED_ENDPOINTS, K.REVERSED_ENDPOINTS_RENUMBERED):
        start, end = span
        assert position[start] > position[end]  # reversed by DOCUMENT position
        assert start in chunk["unit_ids"] and end in chunk["unit_ids"]
        if kind is K.REVERSED_ENDPOINTS_RENUMBERED:
            assert start < end  # ... while the ids look forward
            ids = chunk["unit_ids"]
            assert any(a > b for a, b in zip(ids, ids[1:]))  # a chunk whose ids fall
    elif kind is K.SPAN_OUTSIDE_CHUNK:
        start, end = span
        assert position[start] <= position[end]
        assert not source.within(c["chunk_id"], start, end)
    elif kind is K.UNRESOLVED_UNIT_ID:
        assert span[0] not in position or span[1] not in position
    elif kind is K.BLANK_NAME:
        assert any(isinstance(v, str) and blank(v) for r in records
                   for v in (*r.values(), *r.get("aliases", [])))
    elif kind is K.MEMBERSHIP_MISS:
        assert name and name in [r[NAME_FIELD[c["family"]]] for r in records]
    elif kind is K.DUPLICATE_ENGAGED:
        assert sum(fold(r["enemy_name"]) == fold(name) and r["kind"] == "engaged"
                   for r in records) >= 2
    elif kind is K.SPELL_LEVEL_BELOW_BASE:
        assert any(r["cast"]["level"] is not None
                   and r["cast"]["level"] < SPELLS[r["spell_name"]].level for r in named)
    elif kind is K.RITUAL_ON_NON_RITUAL:
        assert any(r["cast"]["as_ritual"] and not SPELLS[r["spell_name"]].ritual for r in named)
    elif kind is K.DUPLICATE_REGISTRY_NAME:
        folded = [fold(n) for r in records for n in (r["name"], *r["aliases"])]
        assert folded.count(fold(name)) >= 2
    elif kind is K.ATTACK_WITHOUT_TARGET:
        assert any(r["turn_kind"] == "attack" and not r["target_names"] for r in named)
    elif kind is K.MISSING_HOLDER:
        assert any(r["kind"] in ("acquired", "transferred") and r["holder_name"] is None
                   for r in named)
    elif kind is K.UNSUPPORTED_ENUM:
        assert not structurally_valid(c["family"], response)
    elif kind is K.NON_BMP_TEXT:
        assert any(ord(ch) > 0xFFFF for r in named for v in r.values() if isinstance(v, str)
                   for ch in v)
    elif kind is K.SCENE_REVERSED_RANGE:
        assert position[span[0]] > position[span[1]]
    elif kind is K.SCENE_RANGE_MISMATCH:
        assert tuple(span) != (chunk["unit_ids"][0], chunk["unit_ids"][-1])
    elif kind is K.EXTRA_SCENE:
        assert len(records) >= 2


def test_benign_defects_alone_keep_a_candidate_passing(big_run):
    benign_only = [t for t in big_run.truth
                   if t["defects"] and all(d["kind"] in BENIGN_KINDS for d in t["defects"])]
    assert benign_only and all(t["expected_pass"] for t in benign_only)
    reversed_only = [t for t in benign_only
                     if {d["kind"] for d in t["defects"]} == {K.REVERSED_ENDPOINTS.value}]
    assert reversed_only


def test_several_independent_defects_in_one_candidate(compound_run):
    verdicts = independent_verdicts(compound_run)
    several = [t for t in compound_run.truth
               if len({d["kind"] for d in t["defects"]} & (BLOCKING_KINDS - {
                   K.TRUNCATED_JSON, K.UNSUPPORTED_ENUM})) >= 2
               and not {d["kind"] for d in t["defects"]} & {"truncated_json", "unsupported_enum"}]
    assert len(several) > 20
    # each of them is detectable in one pass: the independent reading finds >= 2 failures
    assert all(len(verdicts[t["candidate_id"]]) >= 2 for t in several)


def test_renumbered_regions_have_falling_ids_and_unchanged_text(compound_run):
    inputs = {r["source_id"]: r for r in read_jsonl(SAMPLE)}
    falling_chunks = 0
    for source_id, record in compound_run.transcripts.items():
        ids = [u["unit_id"] for u in record["units"]]
        assert len(ids) == len(set(ids)) and min(ids) >= 1
        base = inputs[source_id.split("~")[0]]
        n = len(base["units"])
        assert [(u["speaker"], u["text"]) for u in record["units"][:n]] == \
            [(u["speaker"], u["text"]) for u in base["units"]]
        for chunk in record["chunks"]:
            if chunk["kind"] == "extraction" and chunk["unit_ids"] == sorted(
                    chunk["unit_ids"], reverse=True) and len(chunk["unit_ids"]) > 1:
                falling_chunks += 1
    assert falling_chunks > 0


def test_occurrences_refer_to_accepted_registry_names(big_run):
    sources = sources_of(big_run)
    registries = accepted_registry_names(big_run, sources)
    checked = 0
    for c, t in zip(big_run.candidates, big_run.truth):
        if c["family"] in NAME_FIELD and t["expected_pass"]:
            known = registries[c["source_id"], REGISTRY_OF[c["family"]]]
            for r in parse_response(c["raw_response"])["occurrences"]:
                assert fold(r[NAME_FIELD[c["family"]]]) in known
                checked += 1
    assert checked > 100


def test_slot_attempts_follow_the_attempt_model(big_run):
    slots = defaultdict(list)
    for t in big_run.truth:
        slots[t["source_id"], t["chunk_id"], t["family"]].append(t)
    shapes = Counter()
    for attempts in slots.values():
        assert [t["attempt"] for t in attempts] == list(range(1, len(attempts) + 1))
        passes = [t["expected_pass"] for t in attempts]
        for earlier, later in zip(passes, passes[1:]):
            assert not earlier or later  # after a pass, only a superseding pass follows
        shapes[tuple(passes)] += 1
    assert shapes[(False, True)] > 0            # fixed on attempt 2
    assert shapes[(False, False, True)] > 0     # fixed on attempt 3
    assert shapes[(False, False, False)] > 0    # out of attempts
    assert shapes[(False,)] > 0                 # left for a retry request


def test_stale_fingerprints_do_not_fail_a_candidate(big_run):
    stale = [t for t in big_run.truth if {d["kind"] for d in t["defects"]} == {
        K.STALE_PROMPT_FINGERPRINT.value}]
    assert stale and all(t["expected_pass"] for t in stale)


# ------------------------------------------------------------------ rates

def chunk_shape(source: Source, chunk_id: str) -> ChunkShape:
    ids = source.chunks[chunk_id]["unit_ids"]
    renumbered = any(a > b for a, b in zip(ids, ids[1:]))
    return ChunkShape(len(ids), renumbered, len(ids) < len(source.ids))


def test_default_rates_are_roughly_honoured_on_first_attempts(big_run):
    rates, sources = DefectRates(), sources_of(big_run)
    exposed, hits = Counter(), Counter()
    for t in big_run.truth:
        if t["attempt"] != 1:
            continue
        kinds = {d["kind"] for d in t["defects"]}
        for kind in applicable_kinds(t["family"], chunk_shape(sources[t["source_id"]],
                                                              t["chunk_id"])):
            exposed[kind] += 1
            hits[kind] += kind.value in kinds
    for kind, n in exposed.items():
        p = rates.rate(kind)
        observed = hits[kind] / n
        slack = 4 * math.sqrt(p * (1 - p) / n) + rates.multiple_defects + 0.01
        assert abs(observed - p) <= slack, (kind, observed, p, n)
    assert exposed[K.REVERSED_ENDPOINTS] > 3000


def test_a_rate_of_zero_or_one_is_exact(tmp_path):
    run = produce(tmp_path, "--defect-rate", "utf8_bom=1", "--defect-rate", "truncated_json=0",
                  "--defect-rate", "multiple_defects=0", "--defect-rate", "crlf_whitespace=0",
                  "--candidates", "400")
    firsts = [t for t in run.truth if t["attempt"] == 1]
    assert all(any(d["kind"] == "utf8_bom" for d in t["defects"]) for t in firsts)
    assert not any(d["kind"] == "truncated_json" for t in firsts for d in t["defects"])
    assert all(c["raw_response"].startswith("\ufeff")
               for c, t in zip(run.candidates, run.truth) if t["attempt"] == 1)


def test_overrides_reject_unknown_names_and_bad_probabilities():
    with pytest.raises(ValueError, match="unknown"):
        with_overrides(DefectRates(), AttemptModel(), ["no_such_defect=0.1"])
    with pytest.raises(ValueError, match="probability"):
        with_overrides(DefectRates(), AttemptModel(), ["blank_name=1.5"])
    rates, model = with_overrides(DefectRates(), AttemptModel(),
                                  ["blank-name=0.5", "max_attempts=5"])
    assert rates.blank_name == 0.5 and model.max_attempts == 5


# ------------------------------------------------------------------ determinism and scale

def test_same_seed_gives_identical_bytes_and_another_seed_differs(tmp_path):
    args = ("--seed", "5", "--sources", "3", "--candidates", "600")
    first, second = produce(tmp_path / "a", *args), produce(tmp_path / "b", *args)
    for name in ("candidates_path", "truth_path", "transcripts_path"):
        assert getattr(first, name).read_bytes() == getattr(second, name).read_bytes()
    other = produce(tmp_path / "c", "--seed", "6", "--sources", "3", "--candidates", "600")
    assert other.candidates_path.read_bytes() != first.candidates_path.read_bytes()


def test_usage_is_derived_from_the_text_deterministic_and_changes_nothing_else(tmp_path):
    """--usage (issue 41 item 5): each attempt bills input from the bytes of the prompt it answered and output
    from its response's (sample.sim_usage), one in ten without; the same seed gives the same bytes, and apart
    from usage the archive and its truth are what they are without it."""
    from sample import sim_usage

    args = ("--seed", "5", "--sources", "2", "--candidates", "300", "--reconciliations")
    billed, again, plain = (produce(tmp_path / name, *args, *extra)
                            for name, extra in (("a", ("--usage",)), ("b", ("--usage",)), ("c", ())))
    assert billed.candidates_path.read_bytes() == again.candidates_path.read_bytes()
    assert billed.truth_path.read_bytes() == plain.truth_path.read_bytes()
    assert [{k: v for k, v in c.items() if k != "usage"} for c in billed.candidates] == plain.candidates
    assert not any("usage" in c for c in plain.candidates)
    recorded = [c for c in billed.candidates if "usage" in c]
    assert 0.8 * len(billed.candidates) < len(recorded) < len(billed.candidates)
    assert [c["candidate_id"] for c in recorded] == [c["candidate_id"] for c in billed.candidates
                                                     if sim_usage.recorded(c["candidate_id"])]
    for c in recorded:
        usage = c["usage"]
        assert usage["output_tokens"] == sim_usage.tokens_of(len(c["raw_response"].encode("utf-8")))
        assert 0 <= usage["cached_input_tokens"] < usage["input_tokens"] and usage["batch"] is False
    # A retry's prompt carries its feedback: of one slot, a later attempt is billed more input than the first.
    firsts = {(c["source_id"], c["chunk_id"], c["family"]): c["usage"]["input_tokens"] for c in recorded
              if c["attempt"] == 1}
    later = [(c, firsts[(c["source_id"], c["chunk_id"], c["family"])]) for c in recorded
             if c["attempt"] > 1 and (c["source_id"], c["chunk_id"], c["family"]) in firsts]
    assert later and all(c["usage"]["input_tokens"] > first for c, first in later)


def test_output_per_source_does_not_depend_on_input_order(tmp_path):
    records = list(read_jsonl(SAMPLE))
    reversed_input = tmp_path / "reversed.jsonl"
    write_jsonl(reversed_input, records[::-1])
    forward = produce(tmp_path / "f", "--seed", "9")
    backward = produce(tmp_path / "b", "--seed", "9", transcripts=reversed_input)

    def by_source(run):
        return {s: [c for c in run.candidates if c["source_id"] == s] for s in run.transcripts}

    assert by_source(forward) == by_source(backward)


def test_sources_are_cycled_and_padded_with_fresh_ids(tmp_path):
    run = produce(tmp_path, "--sources", "5", "--min-units", "2500", "--max-units", "2600",
                  "--candidates", "300")
    assert list(run.transcripts) == ["crd3:C1E001", "crd3:C1E035", "crd3:C1E001~r2",
                                     "crd3:C1E035~r2", "crd3:C1E001~r3"]
    for record in run.transcripts.values():
        ids = [u["unit_id"] for u in record["units"]]
        assert 2500 <= len(ids) <= 2600 and len(set(ids)) == len(ids)
        texts = [u["text"] for u in record["units"]]
        assert texts[-1] in texts[:-1]  # padding repeats the transcript's own turns
        for kind in ("extraction", "scene"):
            plan = [u for c in record["chunks"] if c["kind"] == kind for u in c["unit_ids"]]
            assert plan == ids
    assert {c["source_id"] for c in run.candidates} <= set(run.transcripts)


def test_candidates_target_is_approximate(tmp_path):
    run = produce(tmp_path, "--candidates", "500")
    assert 400 <= len(run.candidates) <= 600


def test_more_sources_than_inputs_need_transcripts_out(tmp_path):
    with pytest.raises(SystemExit, match="transcripts-out"):
        sim.main(["--transcripts", str(SAMPLE), "--candidates-out", str(tmp_path / "c.jsonl"),
                  "--truth-out", str(tmp_path / "t.jsonl"), "--sources", "3"],
                 fingerprints=fake_fingerprints)



# ------------------------------------------------------------------ defect kinds against the job's reason codes

def test_each_injected_kind_is_reported_under_the_reason_codes_it_maps_to(tmp_path):
    """`sample.sim_defects.REASON_CODES` (and the reconciliation ones), which the report shows under its two
    defect charts, against the job itself: an evaluation reports only codes its attempt's injected kinds map
    to, and every injected kind that is not hidden is reported under one of its codes."""
    from domain.reprocess import RunConfig, process_source
    from sample.sim_vocabulary import SIMULATED_REASON_CODES, SIMULATED_VOCABULARY
    from analysis.retry_economy import TruthDefect

    rates = ["multiple_defects=0.3", "unknown_label=0.3", "unassigned_entry=0.3",
             "entry_in_several_entities=0.3", "name_conflict=0.3", "extra_scene=0.2",
             "scene_range_mismatch=0.2", "scene_reversed_range=0.2"]
    out = tmp_path / "run"
    out.mkdir()
    assert sim.main(["--transcripts", str(SAMPLE), "--seed", "5", "--reconciliations",
                     "--candidates-out", str(out / "c.jsonl"), "--truth-out", str(out / "t.jsonl"),
                     *[a for r in rates for a in ("--defect-rate", r)]]) == 0
    truth = {t["candidate_id"]: t for t in read_jsonl(out / "t.jsonl") if "candidate_id" in t}
    lines = defaultdict(list)
    for line in iter_lines(read_bytes(out / "c.jsonl")):
        lines[orjson.loads(line)["source_id"]].append(line)
    transcripts = {r["source_id"]: orjson.dumps(r) for r in read_jsonl(SAMPLE)}
    reported, unexplained = Counter(), []
    for source_id, candidate_lines in lines.items():
        result = process_source(source_id, [transcripts[source_id]], candidate_lines, RunConfig())
        for row in result.evaluations:
            codes = {issue["reason_code"] for issue in row["issues"]}
            defects = truth[row["candidate_id"]]["defects"]
            allowed = {c for d in defects for c in SIMULATED_REASON_CODES.get(d["kind"], ())}
            unexplained += [(code, [d["kind"] for d in defects]) for code in codes - allowed]
            seen = SIMULATED_VOCABULARY.detectable([TruthDefect(d["kind"], None, None) for d in defects])
            reported.update(d.kind for d in seen if codes & set(SIMULATED_REASON_CODES[d.kind]))
    assert unexplained == []
    assert set(reported) == set(SIMULATED_REASON_CODES), set(SIMULATED_REASON_CODES) - set(reported)



# ------------------------------------------------------------------ NPC names

NAME_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")
# Common English words that start a sentence, whatever the sample says (the test's own list).
COMMON_SENTENCE_STARTS = frozenset("""
although anyways anyway actually also alright basically besides exactly excellent except finally
however honestly hopefully just like maybe meanwhile nevertheless now obviously okay oh perhaps
really seriously so still strangely suddenly thankfully then therefore though well whatever whoa
wow yeah yes yep yup goodbye hello hey thanks
""".split())
# The test's own profanity: stems no name holds, and words no name is.
PROFANE_STEMS = ("fuck", "shit", "cunt", "bitch", "twat", "wank")
PROFANE_WORDS = frozenset("ass asshole badass damn goddamn dick cock piss balls ballsack crap hell".split())


def sentence_initial_words(texts) -> frozenset[str]:
    """Words capitalised only where a sentence starts, never mid-sentence: ordinary words ("Although",
    "Anyways") that a capitalisation heuristic takes for names."""
    initial, mid = set(), set()
    for text in texts:
        for match in NAME_WORD.finditer(text):
            word = match.group(0)
            if word[0].isupper() and word[1:].islower():
                before = text[:match.start()].rstrip(" \"'“”‘’(-—–")
                (initial if not before or before[-1] in ".!?…:" else mid).add(word.casefold())
    return frozenset(initial - mid)


@pytest.fixture(scope="module")
def not_names() -> frozenset[str]:
    """What no NPC name may be: the bundled sample's sentence-initial-only words, the common ones, and the
    producer's own guard lists."""
    from sample.text_cues import PROFANITY, SENTENCE_INITIAL

    texts = [u["text"] for r in read_jsonl(SAMPLE) for u in r["units"]]
    return sentence_initial_words(texts) | COMMON_SENTENCE_STARTS | SENTENCE_INITIAL | PROFANITY


def npc_names_in(run: Run):
    """(source, name, injected as a membership miss) of every NPC name the producer wrote: registry names
    and aliases, occurrences."""
    for c, t in zip(run.candidates, run.truth):
        try:
            response = parse_response(c["raw_response"])
        except json.JSONDecodeError:
            continue
        missed = {d["record_name"] for d in t["defects"] if d["kind"] == K.MEMBERSHIP_MISS}
        if c["family"] == "npc-registry" and isinstance(response.get("npcs"), list):
            for record in response["npcs"]:
                for name in (record["name"], *record["aliases"]):
                    yield c["source_id"], name, False
        elif c["family"] == "npc-occurrences" and isinstance(response.get("occurrences"), list):
            for record in response["occurrences"]:
                yield c["source_id"], record["npc_name"], record["npc_name"] in missed


def test_npc_names_are_listed_names_or_speakers_never_sentence_starts_or_profanity(big_run, not_names):
    """Exhaustive over the bundled sample (big_run: every chunk of both episodes, three times over)."""
    from sample.text_cues import NAME_TITLES, npc_names

    listed = {name.casefold() for name in npc_names()}  # a duplicate registry name may change the case
    speakers = {source_id: {w.casefold() for u in record["units"] for w in re.findall(r"[A-Za-z]+", u["speaker"])}
                for source_id, record in big_run.transcripts.items()}
    seen = Counter()
    for source_id, name, missed in npc_names_in(big_run):
        if not name.strip():
            continue  # an injected blank name
        words = name.split()
        assert fold(name) not in not_names, name
        assert not any(stem in word.casefold() for word in words for stem in PROFANE_STEMS), name
        assert not any(word.casefold() in PROFANE_WORDS for word in words), name
        assert not any(word.casefold() in not_names for word in words if word.casefold() not in NAME_TITLES), name
        if missed:
            seen["missed"] += 1  # a membership miss: a name the registry does not have (any cue, or invented)
        elif fold(name) in speakers[source_id]:
            seen["speaker"] += 1
        else:
            assert any(word.casefold() in listed for word in words), name
            seen["listed"] += 1
    assert seen["listed"] > 200 and seen["speaker"] > 20, seen


def test_the_guard_lists_hold_what_they_must():
    from sample.text_cues import PROFANITY, SENTENCE_INITIAL, is_guarded, npc_names

    assert {"although", "anyways", "exactly", "seriously", "thankfully"} <= SENTENCE_INITIAL
    assert {"shit", "fuck", "goddamn", "ballsack", "shitballs"} <= PROFANITY
    assert is_guarded("Shitballs") and is_guarded("Fucking") and is_guarded("Although") and is_guarded("The")
    assert not any(is_guarded(name) for name in npc_names())
    assert {"Keyleth", "Pike", "Scanlan", "Grog", "Vex", "Vax", "Percival"} <= npc_names()


LISTED = ["Keyleth", "Pike", "Scanlan", "Lady Briarwood", "Keeper Yennen", "Grog Strongjaw", "Tiberius"]
NOISE = sorted({w.capitalize() for w in ("although", "anyways", "exactly", "seriously", "thankfully", "whoa",
                                         "shitballs", "goddamn", "fuck", "ballsack", "bartender", "against",
                                         "healing", "lady", "the", "okay", "badass", "house")})


@settings(max_examples=200, deadline=None)
@given(sentences=st.lists(st.tuples(st.sampled_from(NOISE), st.sampled_from(NOISE + LISTED),
                                    st.sampled_from(["said", "and", "with", "to", ","])), min_size=1, max_size=6))
def test_name_cues_keep_listed_names_and_drop_the_guarded_words(sentences):
    """Sentences that start with (and hold) guarded words: an NPC cue is a listed name (after a title at
    most), and no cue of any kind holds profanity or starts with a guarded word."""
    from sample.text_cues import NAME_TITLES, NPC, CueFinder, is_guarded, is_profane, npc_names

    text = " ".join(f"{first} {second} {joint} {LISTED[n % len(LISTED)]} went on." for n, (first, second, joint)
                    in enumerate(sentences))
    names = CueFinder(spells=(), monsters=("Goblin",)).unit_cues(text).names
    npcs = [name for name, kind in names if kind == NPC]
    assert npcs, text
    for name, kind in names:
        words = name.split()
        assert not is_guarded(words[0]) or words[0].lower() in NAME_TITLES, (name, text)
        assert not any(is_profane(word) for word in words), (name, text)
        if kind == NPC:
            assert words[-1] in npc_names(), (name, text)
            assert all(word in npc_names() or word.lower() in NAME_TITLES for word in words), (name, text)


# ------------------------------------------------------------------ odd text in a tiny transcript

def tiny_transcript(path: Path, seed_text: str) -> Path:
    units = [{"unit_id": 100 - i, "speaker": ["MATT", "LAURA", "ALL - SAM - MATT"][i % 3],
              "text": f"{seed_text} Lady Kima casts Fireball at the Goblin near Kraghammer "
                      f"with her sword {i}."} for i in range(40)]
    from sample.crd3 import chunk_plans
    record = {"source_id": "tiny:1", "units": units,
              "chunks": chunk_plans([u["unit_id"] for u in units], 7, 20)}
    write_jsonl(path, [record])
    return path


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=10**6),
       oddity=st.sampled_from(["pay for\x85 lady", "line\u2028sep", "♪ la ♪", "it’s", "  "]))
def test_truth_agrees_with_the_spec_for_any_seed(tmp_path, seed, oddity):
    """Ids here fall as the document goes on, in every chunk."""
    out = tmp_path / str(seed)
    transcripts = tiny_transcript(out / "in.jsonl", oddity)
    run = produce(out, "--seed", str(seed), "--defect-rate", "multiple_defects=0.3",
                  transcripts=transcripts)
    data = read_bytes(run.candidates_path)
    assert len(list(iter_lines(data))) == len(run.candidates) == data.count(b"\n")
    verdicts = independent_verdicts(run)
    sources = sources_of(run)
    for c, t in zip(run.candidates, run.truth):
        assert (not verdicts[c["candidate_id"]]) == t["expected_pass"], (t, verdicts)
        for defect in t["defects"]:
            check_defect(c, defect, sources[c["source_id"]])


def test_bundled_srd_names_match_the_reference_when_available():
    if not (SHARED_SRD / "5e-SRD-Spells.json").exists():
        pytest.skip("shared SRD reference not available")
    from sample.srd import extract_monsters, extract_spells, load_monsters
    spells = extract_spells(orjson.loads((SHARED_SRD / "5e-SRD-Spells.json").read_bytes()))
    assert [(s.name, s.level, s.ritual) for s in load_spells()] == \
        [(s["name"], s["level"], s["ritual"]) for s in spells]
    monsters = extract_monsters(orjson.loads((SHARED_SRD / "5e-SRD-Monsters.json").read_bytes()))
    assert list(load_monsters()) == monsters
