"""Intake: one rule for every reader of the archive (issue 30, item 1).

Transcript resolution, the arrival order of duplicate candidate ids and chunk
admission are decided once, in ``domain.intake``, and the job, export-batch and
the archive readers of ``pipelines.outputs`` all use it. The first tests here
are the regressions of the drifts that made the rule necessary: each failed
before the readers shared it.
"""

from __future__ import annotations

import json

import orjson

from domain.assets import current_fingerprints
from domain.batch.export import ExportConfig, export_source
from domain.batch.providers import RequestSettings
from domain.reprocess import RunConfig, process_source
from pipelines.outputs import read_candidates, read_transcripts

SOURCE = "crd3:T-INTAKE"
TRANSCRIPT_RECORD = {
    "source_id": SOURCE,
    "units": [{"unit_id": u, "speaker": "MATT", "text": f"line {u}: Grog casts Fireball."} for u in (7, 3, 9)],
    "chunks": [{"chunk_id": "x-1", "kind": "extraction", "unit_ids": [7, 3, 9]},
               {"chunk_id": "s-1", "kind": "scene", "unit_ids": [7, 3, 9]}],
}
COMPACT = orjson.dumps(TRANSCRIPT_RECORD)
PRETTY = json.dumps(TRANSCRIPT_RECORD, indent=2, sort_keys=True).replace("\n", " ").encode()  # one line, other bytes
PASSING = orjson.dumps({"spells": [{"spell_name": "Fireball", "caster_name": "Grog",
                                    "cast": {"level": 3, "as_ritual": False, "target_names": []},
                                    "evidence": [{"start_unit_id": 7, "end_unit_id": 9}]}]}).decode()
FP = "sha256:" + "a" * 64


def candidate(candidate_id: str, received_at: str, raw_response: str = PASSING, **changes) -> bytes:
    prompt, schema = current_fingerprints("spells")
    return orjson.dumps({
        "candidate_id": candidate_id, "family": "spells", "source_id": SOURCE, "chunk_id": "x-1", "attempt": 1,
        "producer": {"provider": "simulated", "model": "sim-1"}, "prompt_fingerprint": prompt,
        "schema_fingerprint": schema, "raw_response": raw_response, "received_at": received_at, **changes})


def retry_request(request_id: str = "r-1", chunk_id: str = "x-1", family: str = "spells") -> bytes:
    prompt, schema = current_fingerprints(family)
    return orjson.dumps({
        "request_id": request_id, "kind": "retry", "family": family, "source_id": SOURCE, "chunk_id": chunk_id,
        "candidate_id": "c-1", "attempt": 2, "correction_guidance": "Fix it.", "prompt_fingerprint": prompt,
        "schema_fingerprint": schema, "validator_policy_fingerprint": FP, "input_fingerprint": None})


def export_config() -> ExportConfig:
    return ExportConfig(provider_name="openai-chat", settings=RequestSettings("m", 100), max_bytes_per_file=10**8)


# --- the drifts (each failed before the intake module) ---------------------------------------

def test_export_batch_resolves_a_compact_and_a_pretty_copy_of_one_transcript_as_the_job_does():
    """Drift 1: the job kept one of two copies that say the same thing; export-batch compared bytes,
    called them a conflict and dead-lettered every request of the source."""
    assert COMPACT != PRETTY and orjson.loads(COMPACT) == orjson.loads(PRETTY)
    job = process_source(SOURCE, [COMPACT, PRETTY], [candidate("c-1", "2026-10-01T12:00:00Z")])
    assert job.counts["transcripts_ok"] == 1 and len(job.artifacts) == 1
    rows, dead, counts = export_source(SOURCE, [COMPACT, PRETTY], [retry_request()], export_config())
    assert [row["custom_id"] for row in rows] == ["r-1"], [d["reason"] for d in dead]
    assert dead == [] and counts["shaped"] == 1


def test_read_candidates_keeps_the_record_the_job_keeps(tmp_path):
    """Drift 2: read_candidates ordered ``received_at`` as text, where "12:00:00.5Z" sorts before
    "12:00:00Z"; the job compares instants and keeps the record received at 12:00:00."""
    first = candidate("c-1", "2026-10-01T12:00:00Z", PASSING)
    later = candidate("c-1", "2026-10-01T12:00:00.5Z", PASSING + " ")  # the same id, received half a second later
    (tmp_path / "candidates.jsonl").write_bytes(later + b"\n" + first + b"\n")
    job = process_source(SOURCE, [COMPACT], [later, first], RunConfig())
    assert [d["payload"].encode() for d in job.dead_letters] == [later]  # the job keeps ``first``
    kept = read_candidates(str(tmp_path / "candidates.jsonl"))["c-1"]
    assert kept.raw_response == PASSING


def test_read_transcripts_resolves_copies_as_the_job_does(tmp_path):
    """The third copy of transcript resolution (the archive reader of the report and the retry
    economy) kept no transcript for two copies that differ only in their bytes."""
    other = dict(TRANSCRIPT_RECORD, units=TRANSCRIPT_RECORD["units"][:2],
                 chunks=[{"chunk_id": "x-1", "kind": "extraction", "unit_ids": [7, 3]}])
    conflicting = {**TRANSCRIPT_RECORD, "source_id": "crd3:T-OTHER"}
    (tmp_path / "transcripts.jsonl").write_bytes(b"\n".join([
        COMPACT, PRETTY, orjson.dumps(conflicting), orjson.dumps(dict(other, source_id="crd3:T-OTHER"))]) + b"\n")
    found = read_transcripts(str(tmp_path / "transcripts.jsonl"))
    assert sorted(found) == [SOURCE]  # the copies are one transcript; the conflicting records are none
    assert [u.unit_id for u in found[SOURCE].units] == [7, 3, 9]
    job = process_source("crd3:T-OTHER", [orjson.dumps(conflicting), orjson.dumps(dict(other, source_id="crd3:T-OTHER"))],
                         [])
    assert "transcripts_ok" not in job.counts


# --- one rule, each reader -------------------------------------------------------------------

def test_export_batch_admits_chunks_by_the_job_s_rule_and_words():
    """A request naming a chunk of the wrong kind is refused with the words the job uses for a
    candidate naming it, and a reconciliation request must name the source-level chunk '*'."""
    scene = candidate("c-2", "2026-10-01T12:00:00Z", chunk_id="s-1")
    job = process_source(SOURCE, [COMPACT], [scene])
    _, dead, _ = export_source(SOURCE, [COMPACT], [retry_request(chunk_id="s-1")], export_config())
    assert [d["reason"] for d in dead] == [job.dead_letters[0]["reason"]]
    assert "reads extraction chunks" in dead[0]["reason"]
    _, dead, _ = export_source(SOURCE, [COMPACT], [retry_request(chunk_id="x-1", family="npc-reconciliation")],
                               export_config())
    assert [d["reason"] for d in dead] == ["family npc-reconciliation is source-level: chunk_id must be '*'"]
