"""A small archive that exercises every outcome and every dead-letter reason.

Built in code (not checked-in blobs) so each record says why it is there. The
expected outcome per family is written next to the data it follows from.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import fastavro
import orjson

from domain.assets import current_fingerprints, load_json_asset

# Document order of source s1: ids fall and rise.
S1_IDS = [10, 3, 7, 20, 1, 2, 50, 40, 30, 60, 61, 62]
S1_CHUNKS = [
    {"chunk_id": "x-1", "kind": "extraction", "unit_ids": [10, 3, 7]},
    {"chunk_id": "x-2", "kind": "extraction", "unit_ids": [20, 1, 2]},
    {"chunk_id": "x-3", "kind": "extraction", "unit_ids": [50, 40, 30]},
    {"chunk_id": "x-4", "kind": "extraction", "unit_ids": [60, 61, 62]},
    {"chunk_id": "s-1", "kind": "scene", "unit_ids": [10, 3, 7, 20, 1, 2]},
]


def transcript(source_id, ids, chunks):
    return {
        "source_id": source_id,
        "units": [{"unit_id": u, "speaker": "SAM" if u % 2 else "MATT", "text": f"line {u} — Grog casts."} for u in ids],
        "chunks": chunks,
    }


def ev(start, end):
    return {"start_unit_id": start, "end_unit_id": end}


def spell(name, caster, level, start, end, ritual=False):
    return {"spell_name": name, "caster_name": caster,
            "cast": {"level": level, "as_ritual": ritual, "target_names": ["goblin"]}, "evidence": [ev(start, end)]}


def candidate(cid, family, source, chunk, attempt, response, *, stale=False, raw=None):
    prompt_fp, schema_fp = current_fingerprints(family) if family in _known() else ("sha256:x", "sha256:y")
    if stale:
        prompt_fp = "sha256:" + "0" * 64
    return {
        "candidate_id": cid, "family": family, "source_id": source, "chunk_id": chunk, "attempt": attempt,
        "producer": {"provider": "simulated", "model": "fixture-1"},
        "prompt_fingerprint": prompt_fp, "schema_fingerprint": schema_fp,
        "raw_response": raw if raw is not None else orjson.dumps(response).decode(),
        "received_at": f"2026-10-01T12:00:{attempt:02d}Z",
    }


def _known():
    from domain.families import FAMILIES

    return FAMILIES


GOOD_FIREBALL = {"spells": [spell("Fireball", "SAM", 3, 7, 10)]}  # reversed by document position: 10 comes first
BAD_CANTRIP = {"spells": [spell("Fire Bolt", "SAM", 2, 20, 20, ritual=True)]}  # two independent catalog defects
OUT_OF_CHUNK = {"spells": [spell("Shield", "LIAM", 1, 50, 60)]}  # leaves x-3

# Expected slot outcomes, per family, from the records below.
EXPECTED_OUTCOMES = {
    "spells": {"accepted": 2, "superseded": 1, "retry": 1, "exhausted": 1, "deferred": 0, "stale": 1},
    "npc-registry": {"accepted": 1, "superseded": 0, "retry": 0, "exhausted": 0, "deferred": 0, "stale": 0},
    # c-16 is accepted only because membership switched to the reconciled registry (c-15)
    "npc-occurrences": {"accepted": 2, "superseded": 0, "retry": 1, "exhausted": 0, "deferred": 0, "stale": 0},
    "item-occurrences": {"accepted": 0, "superseded": 0, "retry": 0, "exhausted": 0, "deferred": 1, "stale": 0},
    "location-registry": {"accepted": 1, "superseded": 0, "retry": 0, "exhausted": 0, "deferred": 0, "stale": 0},
    "npc-reconciliation": {"accepted": 1, "superseded": 0, "retry": 0, "exhausted": 0, "deferred": 0, "stale": 0},
    "item-reconciliation": {"accepted": 0, "superseded": 0, "retry": 0, "exhausted": 0, "deferred": 1, "stale": 0},
    "location-reconciliation": {"accepted": 0, "superseded": 0, "retry": 1, "exhausted": 0, "deferred": 0, "stale": 0},
    "scene-descriptions": {"accepted": 1, "superseded": 0, "retry": 0, "exhausted": 0, "deferred": 0, "stale": 0},
}

EXPECTED_DEAD_LETTER_REASONS = [
    "not valid JSON",  # garbage line
    "not valid UTF-8",  # odd bytes
    "attempt '1' is not an integer from 1",  # wrong type
    "unknown source",  # no transcript
    "unknown chunk 'x-9'",
    "unknown family 'potions'",
    "duplicate candidate_id 'c-dup'",
    "duplicate unit_id 5",  # malformed transcript of s-bad
    "missing a string 'source_id'",
    "source-level: chunk_id must be '*'",  # a reconciliation naming a chunk
    "unknown chunk '*'",  # '*' is only for reconciliations
]


def good_records():
    s1 = "crd3:S1"
    return [
        # spells: accepted on attempt 1 although its endpoints are reversed (no retry spent)
        candidate("c-01", "spells", s1, "x-1", 1, GOOD_FIREBALL, stale=True),
        # spells x-2: fails, then passes (accepted), then passes again (superseded)
        candidate("c-02", "spells", s1, "x-2", 1, BAD_CANTRIP),
        candidate("c-03", "spells", s1, "x-2", 2, {"spells": [spell("Fire Bolt", "SAM", 0, 1, 20)]}),
        candidate("c-04", "spells", s1, "x-2", 3, {"spells": [spell("Fire Bolt", "SAM", None, 20, 2)]}),
        # spells x-3: one failing attempt -> retry
        candidate("c-05", "spells", s1, "x-3", 1, OUT_OF_CHUNK),
        # spells x-4: three failing attempts -> exhausted (one truncated JSON, one with a BOM and CRLF that still fails)
        candidate("c-06", "spells", s1, "x-4", 1, None, raw='{"spells": [{"spell_name": "Sleep"'),
        candidate("c-07", "spells", s1, "x-4", 2, {"spells": [spell("Sleep", "", 0, 60, 62)]}),
        candidate("c-08", "spells", s1, "x-4", 3, None,
                  raw="\ufeff{\r\n\"spells\": [{\"spell_name\": \"Sleep \U0001F634\", \"caster_name\": \"SAM\", \"cast\": "
                      "{\"level\": 0, \"as_ritual\": false, \"target_names\": []}, \"evidence\": [{\"start_unit_id\": 61, "
                      "\"end_unit_id\": 99}]}]}\r\n"),
        # registry then occurrences: membership sees the registry accepted in this run
        candidate("c-10", "npc-registry", s1, "x-1", 1,
                  {"npcs": [{"name": "Grog", "aliases": ["Grog Strongjaw"], "description": "a goliath", "evidence": [ev(3, 10)]}]}),
        candidate("c-11", "npc-occurrences", s1, "x-1", 1,
                  {"occurrences": [{"npc_name": "grog  strongjaw", "kind": "speaking", "evidence": [ev(7, 3)]}]}),
        candidate("c-12", "npc-occurrences", s1, "x-2", 1,
                  {"occurrences": [{"npc_name": "Scanlan", "kind": "present", "evidence": [ev(20, 1)]}]}),
        # no item registry in this source -> deferred
        candidate("c-13", "item-occurrences", s1, "x-1", 1,
                  {"occurrences": [{"item_name": "Bag of Holding", "kind": "used", "holder_name": None, "evidence": [ev(10, 10)]}]}),
        candidate("c-14", "scene-descriptions", s1, "s-1", 1,
                  {"scenes": [{"kind": "combat", "title": "Ambush", "summary": "Goblins attack.", "start_unit_id": 10, "end_unit_id": 2}]}),
        # the one listed NPC entry (E1 = c-10's Grog) merged; the reconciled registry adds the alias "Big G"
        candidate("c-15", "npc-reconciliation", s1, "*", 1,
                  {"entities": [{"name": "Grog", "aliases": ["Grog Strongjaw", "Big G"], "description": "a goliath",
                                 "member_labels": ["E1"]}]}),
        candidate("c-16", "npc-occurrences", s1, "x-3", 1,
                  {"occurrences": [{"npc_name": "Big G", "kind": "acting", "evidence": [ev(40, 50)]}]}),
        # no item registry accepted in this source -> deferred
        candidate("c-17", "item-reconciliation", s1, "*", 1,
                  {"entities": [{"name": "Bag of Holding", "aliases": [], "description": "a bag", "member_labels": ["E1"]}]}),
        candidate("c-18", "location-registry", s1, "x-2", 1,
                  {"locations": [{"name": "Whitestone", "aliases": [], "description": "a town", "evidence": [ev(20, 1)]}]}),
        # only E1 was listed: E2 is unknown and E1 is left out -> one retry naming both
        candidate("c-19", "location-reconciliation", s1, "*", 1,
                  {"entities": [{"name": "Whitestone", "aliases": [], "description": "a town", "member_labels": ["E2"]}]}),
    ]


def bad_candidate_lines():
    s1 = "crd3:S1"
    # Stale like c-01, so the earliest attempt still wins (a current one would win over c-01, contract §6.1).
    dup = candidate("c-dup", "spells", s1, "x-1", 1, GOOD_FIREBALL, stale=True)
    dup_later = {**dup, "received_at": "2026-10-02T00:00:00Z"}
    wrong_type = {**candidate("c-20", "spells", s1, "x-1", 1, GOOD_FIREBALL), "attempt": "1"}
    return [
        b"this is not json",
        b'{"candidate_id": "c-21", "source_id": "crd3:S1", "family": "spel\xff\xfe"}',
        orjson.dumps(wrong_type),
        orjson.dumps(candidate("c-22", "spells", "crd3:NOPE", "x-1", 1, GOOD_FIREBALL)),
        orjson.dumps(candidate("c-23", "spells", s1, "x-9", 1, GOOD_FIREBALL)),
        orjson.dumps(candidate("c-24", "potions", s1, "x-1", 1, {"potions": []})),
        orjson.dumps(dup),
        orjson.dumps(dup_later),
        orjson.dumps(candidate("c-25", "spells", "crd3:BAD", "x-1", 1, GOOD_FIREBALL)),
        orjson.dumps(candidate("c-27", "npc-reconciliation", s1, "x-1", 1, {"entities": []})),
        orjson.dumps(candidate("c-28", "spells", s1, "*", 1, GOOD_FIREBALL)),
        b'{"candidate_id": "c-26"}',
        b"   ",  # blank: skipped and counted, not a record
    ]


# c-dup (kept) is accepted?  No: c-01 already owns slot x-1... they share the slot, so c-dup is an
# extra attempt 1 of spells/x-1 that passes later in candidate_id order -> superseded.
EXPECTED_OUTCOMES["spells"]["superseded"] += 1
EXPECTED_OUTCOMES["spells"]["stale"] += 1


def write_archive(directory: Path) -> dict:
    """Write the archive under ``directory``; returns the globs and expected numbers."""
    directory.mkdir(parents=True, exist_ok=True)
    transcripts = [
        transcript("crd3:S1", S1_IDS, S1_CHUNKS),
        transcript("crd3:S2", [1, 2, 3], [{"chunk_id": "x-1", "kind": "extraction", "unit_ids": [1, 2, 3]}]),
    ]
    bad_transcript = transcript("crd3:BAD", [5, 5], [])
    (directory / "transcripts-1.jsonl").write_bytes(orjson.dumps(transcripts[0]) + b"\n")
    with gzip.open(directory / "transcripts-2.jsonl.gz", "wb") as handle:
        handle.write(orjson.dumps(transcripts[1]) + b"\r\n" + orjson.dumps(bad_transcript) + b"\n")

    good = good_records()
    (directory / "candidates-1.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in good[:6]))
    with gzip.open(directory / "candidates-2.jsonl.gz", "wb") as handle:
        handle.write(b"".join(orjson.dumps(r) + b"\n" for r in good[6:10]))
    schema = fastavro.parse_schema(load_json_asset("inputs/model_candidate.v1.avsc"))
    with open(directory / "candidates-3.avro", "wb") as handle:
        fastavro.writer(handle, schema, [{**r, "raw_response": r["raw_response"].encode("utf-8")} for r in good[10:]])
    (directory / "candidates-4.jsonl").write_bytes(b"\n".join(bad_candidate_lines()) + b"\n")
    (directory / "candidates-5.jsonl").write_bytes(b"")  # an empty file
    bad_lines = [line for line in bad_candidate_lines() if line.strip()]
    return {
        "transcripts": str(directory / "transcripts-*"),
        "candidates": str(directory / "candidates-*"),
        "good": good,
        "candidates_in": len(good) + len(bad_lines),
        "transcripts_in": 3,
    }


def run_job(archive: dict, out: Path, *extra: str) -> tuple[dict, dict]:
    """Run the job on ``archive`` in-process; returns (manifest, outputs). Fails the test unless it exits 0."""
    from output_reader import read_outputs
    from pipelines import reprocess

    argv = ["--transcripts", archive["transcripts"], "--candidates", archive["candidates"], "--output", str(out), *extra]
    assert reprocess.main(argv) == 0
    return orjson.loads((out / "manifest.json").read_bytes()), read_outputs(out)
