"""Hostile input that is legal (issue #18): each class here once broke a promise of
docs/reliability.md §9. Every test failed before its fix."""

from __future__ import annotations

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.assets import current_fingerprints
from domain.reprocess import process_source
from fixture_archive import S1_CHUNKS, S1_IDS, good_records, transcript
from output_reader import canonical

TAGS = ("artifacts", "retry_requests", "evaluations", "dead_letters")
SOURCE = "crd3:H1"


def candidate(cid: str, family: str, chunk: str, response, attempt: int = 1, source: str = SOURCE) -> bytes:
    prompt_fp, schema_fp = current_fingerprints(family)
    raw = response if isinstance(response, str) else orjson.dumps(response).decode()
    return orjson.dumps({
        "candidate_id": cid, "family": family, "source_id": source, "chunk_id": chunk, "attempt": attempt,
        "producer": {"provider": "p", "model": "m"}, "prompt_fingerprint": prompt_fp,
        "schema_fingerprint": schema_fp, "raw_response": raw, "received_at": "2026-10-01T12:00:00Z",
    })


def source_line(ids, chunks, source: str = SOURCE) -> bytes:
    return orjson.dumps(transcript(source, ids, chunks))


def scene(start, end, title="Ambush"):
    return {"scenes": [{"kind": "combat", "title": title, "summary": "Goblins attack.",
                        "start_unit_id": start, "end_unit_id": end}]}


def spell_at(start, end, name="Shield"):
    return {"spells": [{"spell_name": name, "caster_name": "SAM",
                        "cast": {"level": 1, "as_ritual": False, "target_names": []},
                        "evidence": [{"start_unit_id": start, "end_unit_id": end}]}]}


def verdicts(result) -> dict[str, str]:
    return {row["candidate_id"]: row["verdict"] for row in result.evaluations}


def guidance(result) -> str:
    assert len(result.retry_requests) == 1, result.retry_requests
    return result.retry_requests[0]["correction_guidance"]


# --- 1. a chunk's list names a set: document order, whatever the list's order ----------------

DOC_ORDER = [5, 3, 9]


def test_scene_range_follows_document_order_not_the_chunk_list():
    line = source_line(DOC_ORDER, [{"chunk_id": "s", "kind": "scene", "unit_ids": [9, 3, 5]}])
    forward = process_source(SOURCE, [line], [candidate("c-fwd", "scene-descriptions", "s", scene(5, 9))])
    assert verdicts(forward) == {"c-fwd": "accepted"}
    backward = process_source(SOURCE, [line], [candidate("c-back", "scene-descriptions", "s", scene(9, 5))])
    assert verdicts(backward) == {"c-back": "rejected"}
    text = guidance(backward)
    assert "runs backwards" in text
    assert "Set `start_unit_id` to 5 and `end_unit_id` to 9" in text


def test_excerpt_extent_in_guidance_is_in_document_order():
    line = source_line(DOC_ORDER + [7], [{"chunk_id": "x", "kind": "extraction", "unit_ids": [9, 3, 5]}])
    result = process_source(SOURCE, [line], [candidate("c-1", "spells", "x", spell_at(9, 7))])
    text = guidance(result)
    assert "excerpt (units 5–9)" in text
    assert "9–5" not in text


def shuffled_chunks(chunks, rnd) -> list[dict]:
    out = []
    for chunk in chunks:
        ids = list(chunk["unit_ids"])
        rnd.shuffle(ids)
        out.append({**chunk, "unit_ids": ids})
    return out


def result_bytes(result) -> dict:
    return {tag: canonical(list(getattr(result, tag))) for tag in TAGS} | {"counts": sorted(result.counts.items())}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_shuffling_every_chunk_list_changes_no_output_byte(rnd):
    lines = [orjson.dumps(r) for r in good_records()]
    reference = process_source("crd3:S1", [orjson.dumps(transcript("crd3:S1", S1_IDS, S1_CHUNKS))], lines)
    shuffled = orjson.dumps(transcript("crd3:S1", S1_IDS, shuffled_chunks(S1_CHUNKS, rnd)))
    result = process_source("crd3:S1", [shuffled], lines)
    # The transcript's own bytes differ, but nothing derived from it does.
    assert result_bytes(result) == result_bytes(reference)
