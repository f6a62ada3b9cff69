"""Hostile input that is legal (issue #18): each class here once broke a promise;
docs/reliability.md §7 lists them. Every test failed before its fix."""

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


def test_a_chunk_naming_a_unit_twice_is_a_malformed_transcript():
    line = source_line(DOC_ORDER, [{"chunk_id": "x", "kind": "extraction", "unit_ids": [5, 3, 5]}])
    result = process_source(SOURCE, [line], [candidate("c-1", "spells", "x", spell_at(5, 3))])
    reasons = [row["reason"] for row in result.dead_letters]
    assert any("names a unit twice" in r for r in reasons) and any(r.startswith("unknown source") for r in reasons)


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


# --- 2. every Avro codec; a file that cannot be read is named, and conservation not claimed ---

import fastavro  # noqa: E402
import pytest  # noqa: E402

from domain.assets import load_json_asset  # noqa: E402
from domain.manifest import build_manifest  # noqa: E402
from output_reader import read_outputs  # noqa: E402
from pipelines import reprocess  # noqa: E402
from test_reliability_fuzz import FIREBALL, S1, TRANSCRIPT_LINES, envelope  # noqa: E402

AVRO_CODECS = ("null", "deflate", "snappy", "zstandard", "bzip2", "xz", "lz4")


def avro_candidates(prefix: str, n: int) -> list[dict]:
    return [{**envelope(f"{prefix}-{k:02d}", attempt=1 + k % 3), "raw_response": FIREBALL.encode()}
            for k in range(n)]


def run_avro_job(tmp_path, files: dict[str, bytes]) -> tuple[int, dict, dict]:
    (tmp_path / "t.jsonl").write_bytes(TRANSCRIPT_LINES[S1])
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    out = tmp_path / "out"
    code = reprocess.main(["--transcripts", str(tmp_path / "t.jsonl"), "--candidates", str(tmp_path / "c-*"),
                           "--output", str(out), "--output-format", "jsonl"])
    return code, orjson.loads((out / "manifest.json").read_bytes()), read_outputs(out)


def avro_bytes(records: list[dict], codec: str = "null", sync_interval: int = 16000, schema=None) -> bytes:
    import io
    handle = io.BytesIO()
    schema = schema or fastavro.parse_schema(load_json_asset("inputs/model_candidate.v1.avsc"))
    fastavro.writer(handle, schema, records, codec=codec, sync_interval=sync_interval)
    return handle.getvalue()


def test_every_avro_codec_is_read_and_a_damaged_file_is_named(tmp_path, capsys):
    files = {f"c-{codec}.avro": avro_bytes(avro_candidates(codec, 20), codec) for codec in AVRO_CODECS}
    damaged = avro_bytes(avro_candidates("cut", 20), sync_interval=1)  # one block per record
    files["c-cut.avro"] = damaged[: len(damaged) * 3 // 4]
    code, manifest, outputs = run_avro_job(tmp_path, files)
    evaluated = {row["candidate_id"] for row in outputs["evaluations"]}
    for codec in AVRO_CODECS:
        assert {f"{codec}-{k:02d}" for k in range(20)} <= evaluated, codec
    assert not [row for row in outputs["dead_letters"] if row["reason"] and "cramjam" in row["reason"]]
    # The damaged file: the records before the damage are read; the rest is unknown, and said so.
    cut = {cid for cid in evaluated if cid.startswith("cut-")}
    assert 0 < len(cut) < 20
    block = manifest["unreadable_files"]
    assert block["count"] == 1 and block["by_input"] == {"candidates": 1}
    assert [p.rsplit("/", 1)[-1] for p in block["paths"]] == ["c-cut.avro"]
    assert block["records_may_be_missing"] and block["conservation_not_provable_for"] == ["candidates"]
    assert manifest["conservation"]["holds"] is False
    assert manifest["transcript_conservation"]["holds"] is True
    assert code == 2  # the job cannot prove it lost nothing
    assert "unreadable files: 1 (records may be missing" in capsys.readouterr().out


def test_the_manifest_names_unreadable_files_per_input():
    counts = {"candidates_in": 2, "evaluations": 1, "dead_letters/candidates": 1,
              "transcripts_in": 1, "transcripts_ok": 1,
              "unreadable_file/candidates/gs://b/c-2.avro": 1, "unreadable_file/candidates/gs://b/c-1.jsonl.gz": 1}
    manifest = build_manifest(counts, options={}, runner="DirectRunner")
    assert manifest["unreadable_files"]["paths"] == ["gs://b/c-1.jsonl.gz", "gs://b/c-2.avro"]
    assert manifest["conservation"]["holds"] is False and manifest["transcript_conservation"]["holds"] is True
    clean = build_manifest({k: v for k, v in counts.items() if not k.startswith("unreadable")} |
                           {"dead_letters/candidates": 1}, options={}, runner="DirectRunner")
    assert clean["unreadable_files"] == {"count": 0, "by_input": {}, "paths": [], "records_may_be_missing": False,
                                         "conservation_not_provable_for": []}
    assert clean["conservation"]["holds"] is True


# --- 4. duplicate transcripts are compared by content, not bytes ------------------------------

import json  # noqa: E402

from transforms.raw_records import avro_record_to_json  # noqa: E402


def test_the_same_transcript_in_two_spellings_is_one_transcript():
    record = orjson.loads(TRANSCRIPT_LINES[S1])
    compact = TRANSCRIPT_LINES[S1]
    pretty = json.dumps(record, indent=2).replace("\n", " ").encode()  # one line, other spacing
    reordered = avro_record_to_json({"chunks": record["chunks"], "units": record["units"], "source_id": S1})
    copies = [pretty, compact, reordered]
    for arrival in (copies, copies[::-1]):
        result = process_source(S1, arrival, [orjson.dumps(envelope("c-1"))])
        assert result.counts["transcripts_ok"] == 1
        assert [row["candidate_id"] for row in result.evaluations] == ["c-1"]
        dead = [row for row in result.dead_letters]
        assert len(dead) == 2 and all("same content" in row["reason"] for row in dead)
        assert sorted(row["payload"].encode() for row in dead) == sorted(set(copies) - {min(copies)})


def respelled(value, rnd):
    """The same JSON value with its object keys in another order."""
    if isinstance(value, dict):
        keys = list(value)
        rnd.shuffle(keys)
        return {key: respelled(value[key], rnd) for key in keys}
    if isinstance(value, list):
        return [respelled(item, rnd) for item in value]
    return value


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.sampled_from([None, 1, 2, 4]), st.booleans())
def test_a_respelled_copy_of_a_transcript_changes_nothing_but_one_dead_letter(rnd, indent, ascii_only):
    original = orjson.dumps(transcript("crd3:S1", S1_IDS, S1_CHUNKS))
    copy = json.dumps(respelled(orjson.loads(original), rnd), indent=indent, ensure_ascii=ascii_only)
    copy = copy.replace("\n", " ").encode()  # one line, whatever the indent
    lines = [orjson.dumps(r) for r in good_records()]
    alone = process_source("crd3:S1", [original], lines)
    twice = process_source("crd3:S1", [copy, original], lines)
    for tag in ("artifacts", "retry_requests", "evaluations"):
        assert canonical(list(getattr(twice, tag))) == canonical(list(getattr(alone, tag)))
    extra = [row for row in twice.dead_letters if row not in alone.dead_letters]
    assert len(extra) == 1 and "same content" in extra[0]["reason"]


def test_transcripts_with_different_content_still_conflict():
    record = orjson.loads(TRANSCRIPT_LINES[S1])
    other = orjson.dumps({**record, "units": record["units"][:-1] + [{**record["units"][-1], "text": "edited"}]})
    result = process_source(S1, [TRANSCRIPT_LINES[S1], other], [orjson.dumps(envelope("c-1"))])
    assert not result.evaluations
    assert sum("conflicting" in row["reason"] for row in result.dead_letters) == 2


# --- 3. Avro fields the contract does not name are ignored, whatever their type -------------

import decimal  # noqa: E402

from domain.assets import CANDIDATE_INPUT_SCHEMA, TRANSCRIPT_INPUT_SCHEMA, input_field_shape  # noqa: E402
from transforms.raw_records import project  # noqa: E402


def wider(schema: dict, extra_fields: list[dict]) -> dict:
    return {**schema, "fields": schema["fields"] + extra_fields}


def test_avro_candidates_with_extra_decimal_and_bytes_columns_are_read(tmp_path):
    base = load_json_asset(CANDIDATE_INPUT_SCHEMA)
    schema = fastavro.parse_schema(wider(base, [
        {"name": "cost", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
        {"name": "blob", "type": "bytes"},
    ]))
    records = [{**r, "cost": decimal.Decimal("1.50"), "blob": b"\xff\xfe\x00 not text"}
               for r in avro_candidates("wide", 5)]
    bad = {**records[0], "candidate_id": "wide-bad", "raw_response": b"\xff\xfe"}  # a NAMED field still checked
    code, manifest, outputs = run_avro_job(tmp_path, {"c-wide.avro": avro_bytes(records + [bad], schema=schema)})
    assert code == 0 and manifest["conservation"]["holds"]
    assert sorted(row["candidate_id"] for row in outputs["evaluations"]) == [f"wide-{k:02d}" for k in range(5)]
    (dead,) = outputs["dead_letters"]
    assert "wide-bad" in dead["payload"] and "non-UTF-8" in dead["reason"]


def test_projection_keeps_exactly_the_named_fields_at_every_depth():
    shape = input_field_shape(TRANSCRIPT_INPUT_SCHEMA)
    record = {"source_id": "s", "extra": decimal.Decimal(1),
              "units": [{"unit_id": 1, "speaker": "A", "text": "t", "mood": b"\xff"}],
              "chunks": [{"chunk_id": "x", "kind": "extraction", "unit_ids": [1], "note": None}]}
    assert project(record, shape) == {"source_id": "s", "units": [{"unit_id": 1, "speaker": "A", "text": "t"}],
                                      "chunks": [{"chunk_id": "x", "kind": "extraction", "unit_ids": [1]}]}
    assert set(input_field_shape(CANDIDATE_INPUT_SCHEMA)["producer"]) == {"provider", "model"}


# --- 5. cost on hostile input: linear in the response and chunk sizes ------------------------
# A ratio of operation counts, not of times (speed targets live in bench/): the same work at
# four times the size must cost about four times as much (a quadratic path costs sixteen).
# The count (tests/op_count.py) is Python line events plus the length of every list, tuple or
# string an `in` scans (a scan in C is one line event: line counting alone misses the old scene
# and guidance scans). It is exact and the same on every run, so the bounds need no slack for a
# busy machine, and the sizes are small enough to trace.

import gc  # noqa: E402

from op_count import operations  # noqa: E402


def hostile_transcript(units: int) -> bytes:
    ids = list(range(units, 0, -1))  # ids fall: numeric order is never document order
    return orjson.dumps({"source_id": SOURCE, "units": [{"unit_id": u, "speaker": "A", "text": ""} for u in ids],
                         "chunks": [{"chunk_id": "x", "kind": "extraction", "unit_ids": ids[: units // 2]},
                                    {"chunk_id": "s", "kind": "scene", "unit_ids": ids[::-1]}]})


def hostile_response(family: str, n: int, units: int) -> dict:
    """n records that all share one problem (so guidance groups them all in one line)."""
    if family == "spells":  # cites a unit outside the chunk, and a ritual that is not one
        return {"spells": [{"spell_name": "Fireball", "caster_name": f"C{k}",
                            "cast": {"level": 3, "as_ritual": True, "target_names": []},
                            "evidence": [{"start_unit_id": 1, "end_unit_id": units - k % (units // 2)}]}
                           for k in range(n)]}
    if family == "scene-descriptions":  # many scenes, none with the chunk's exact range
        return {"scenes": [{"kind": "combat", "title": f"T{k}", "summary": "s", "start_unit_id": 2 + k % (units - 2),
                            "end_unit_id": units} for k in range(n)]}
    if family == "combat-turns":  # attacks without a target
        return {"turns": [{"round": 1, "actor_name": f"A{k}", "turn_kind": "attack", "target_names": [],
                           "evidence": [{"start_unit_id": units, "end_unit_id": units}]} for k in range(n)]}
    if family == "npc-registry":  # every entry repeats one name
        return {"npcs": [{"name": "Grog", "aliases": [f"G{k}"], "description": "",
                          "evidence": [{"start_unit_id": units, "end_unit_id": units}]} for k in range(n)]}
    raise ValueError(family)


def source_cost(transcript_line: bytes, *lines: bytes):
    """The operations ``process_source`` costs on one transcript and its candidates, and its result.
    One untraced run first, so that one-time work (caches, compiled validators) is not counted;
    the cyclic GC paused, as the job runs a source (transforms/process.py), so that no finalizer
    of what the test session holds runs inside the count."""
    process_source(SOURCE, [transcript_line], list(lines))
    gc.collect()
    gc.disable()
    try:
        result, ops = operations(process_source, SOURCE, [transcript_line], list(lines))
    finally:
        gc.enable()
    return ops.total, result


def cost(family: str, n: int) -> int:
    units = 4 * n
    chunk = "s" if family == "scene-descriptions" else "x"
    line = candidate("c-big", family, chunk, hostile_response(family, n, units))
    total, result = source_cost(hostile_transcript(units), line)
    assert verdicts(result) == {"c-big": "rejected"} and len(result.retry_requests) == 1
    return total


@pytest.mark.parametrize("family", ["spells", "scene-descriptions", "combat-turns", "npc-registry"])
def test_a_hostile_candidate_costs_linear_in_its_size(family):
    small, large = cost(family, 150), cost(family, 600)
    # Linear: just under 4 (the per-source work does not grow). At these sizes the per-record
    # Python work still outweighs a quadratic scan (ratio 6 to 7 with the old guidance grouping),
    # so the bound is tight: an exact count needs no slack.
    assert large / small < 5, (family, small, large)


def test_a_hostile_reconciliation_proposal_costs_linear_in_its_size():
    """One entity holds every listed entry and as many labels that are not listed: each unknown
    label is reported with the entity, whose labels are gathered once, not once per issue."""
    def proposal_cost(n: int) -> int:
        units = 4 * n
        registry = candidate("c-reg", "npc-registry", "x", {"npcs": [
            {"name": f"N{k}", "aliases": [], "description": "",
             "evidence": [{"start_unit_id": units - k, "end_unit_id": units - k}]} for k in range(n)]})
        proposal = candidate("c-big", "npc-reconciliation", "*", {"entities": [
            {"name": "Grog", "aliases": [], "description": "",
             "member_labels": [f"E{k}" for k in range(1, n + 1)] + [f"Z{k}" for k in range(n)]}]})
        total, result = source_cost(hostile_transcript(units), registry, proposal)
        assert verdicts(result) == {"c-reg": "accepted", "c-big": "rejected"}, verdicts(result)
        return total

    small, large = proposal_cost(150), proposal_cost(600)
    assert large / small < 5, (small, large)


# --- 8. a chunk with a gap: name the missing units; number agreement ---------------------------

from domain.source import Chunk, chunk_missing_positions  # noqa: E402


def test_a_range_across_a_gap_in_the_chunk_names_the_missing_unit():
    line = source_line([5, 3, 9, 1, 7], [{"chunk_id": "x", "kind": "extraction", "unit_ids": [5, 9, 1, 7]}])
    text = guidance(process_source(SOURCE, [line], [candidate("c-1", "spells", "x", spell_at(5, 7))]))
    assert "includes unit 3, which is not in the transcript excerpt" in text
    assert "reaches beyond" not in text
    two = source_line([5, 3, 9, 1, 7], [{"chunk_id": "x", "kind": "extraction", "unit_ids": [5, 1, 7]}])
    text = guidance(process_source(SOURCE, [two], [candidate("c-1", "spells", "x", spell_at(5, 7))]))
    assert "includes units 3 and 9, which are not in the transcript excerpt" in text


def test_two_unknown_endpoints_agree_in_number():
    line = source_line(DOC_ORDER, [{"chunk_id": "x", "kind": "extraction", "unit_ids": [5, 3, 9]}])
    text = guidance(process_source(SOURCE, [line], [candidate("c-1", "spells", "x", spell_at(100, 101))]))
    assert "It cites units 100 and 101, which are not in the transcript excerpt." in text
    text = guidance(process_source(SOURCE, [line], [candidate("c-1", "spells", "x", spell_at(100, 5))]))
    assert "It cites unit 100, which is not in the transcript excerpt." in text


@settings(max_examples=300, deadline=None)
@given(st.sets(st.integers(0, 40), min_size=1), st.integers(0, 45), st.integers(0, 45), st.integers(0, 6))
def test_chunk_missing_positions_finds_exactly_the_gaps(members, a, b, limit):
    first, last = min(a, b), max(a, b)
    positions = tuple(sorted(members))
    chunk = Chunk("x", "extraction", positions, positions)
    expected = [p for p in range(first, last + 1) if p not in members]
    assert chunk_missing_positions(chunk, first, last, limit) == (tuple(expected[:limit]), len(expected))


# --- 6. ids that exist in the transcript are always written exactly ------------------------------

BIG = [10**12, 10**15 + 7, 2**63 - 1]


def test_long_transcript_ids_are_written_exactly_and_invented_ones_elided():
    line = source_line(BIG + [4], [{"chunk_id": "x", "kind": "extraction", "unit_ids": BIG[:2]},
                                   {"chunk_id": "s", "kind": "scene", "unit_ids": BIG}])
    text = guidance(process_source(SOURCE, [line], [candidate("c-1", "spells", "x", spell_at(BIG[0], 4))]))
    assert f"units {BIG[0]}–4" in text and f"excerpt (units {BIG[0]}–{BIG[1]})" in text
    assert "out-of-range" not in text
    invented = 10**14 + 3
    text = guidance(process_source(SOURCE, [line], [candidate("c-1", "spells", "x", spell_at(BIG[0], invented))]))
    assert f"units {BIG[0]}–(an out-of-range id)" in text and str(invented) not in text
    text = guidance(process_source(SOURCE, [line], [candidate("c-1", "scene-descriptions", "s", scene(BIG[1], BIG[2]))]))
    assert f"units {BIG[1]}–{BIG[2]}" in text and "out-of-range" not in text


# --- 9. a number out of range is valid JSON: say so ------------------------------------------

def test_a_number_beyond_double_range_is_not_called_invalid_json():
    line = source_line(DOC_ORDER, [{"chunk_id": "x", "kind": "extraction", "unit_ids": [5, 3, 9]}])
    raw = orjson.dumps(spell_at(5, 9)).decode().replace('"level":1', '"level":1e400')
    text = guidance(process_source(SOURCE, [line], [candidate("c-1", "spells", "x", raw)]))
    assert "not valid JSON" not in text
    assert 'valid JSON, but the number "1e400" is far too large' in text


# --- 7. a listed label with spaces around it: say what is wrong with it ------------------------

from domain.issues import render_guidance  # noqa: E402
from test_reconciliation import entity, evaluate_npc_proposal  # noqa: E402


@pytest.mark.parametrize("label, side", [(" E2", "before it"), ("E2 ", "after it"), ("\tE2 ", "around it")])
def test_a_listed_label_with_surrounding_spaces_is_named_as_such(label, side):
    result = evaluate_npc_proposal([entity("Grog", "E1", label, aliases=["Grog Strongjaw"]), entity("Pike", "E3")])
    assert not result.passed  # labels match exactly: the proposal is still rejected
    text = render_guidance(result.issues)
    assert f'include the label "E2" with extra spaces {side}' in text
    assert 'exactly as the list writes it, with no spaces: "E2"' in text
    assert "not a label in the list" not in text and "E1 to E3" not in text


def test_an_unlisted_label_still_gets_the_list_of_labels():
    result = evaluate_npc_proposal([entity("Grog", "E1", "E2", " E7", aliases=["Grog Strongjaw"]),
                                    entity("Pike", "E3")])
    text = render_guidance(result.issues)
    assert "not a label in the list" in text and "E1 to E3" in text and "extra spaces" not in text


def test_a_maximal_hostile_scene_candidate_costs_the_same_whatever_the_size_of_its_chunk():
    """The issue's case, scaled down twentyfold with its proportions kept: 600 scenes (a 100 kB
    response) against a 3,000-unit scene chunk, then the same response against a chunk ten times
    longer. At 12k scenes and 60k units it took seconds when the range check scanned the chunk
    once per scene: the cost grew with the chunk, about tenfold here."""

    def hostile_source_cost(units: int) -> int:
        ids = list(range(units, 0, -1))
        transcript_line = orjson.dumps({"source_id": SOURCE, "chunks": [{"chunk_id": "s", "kind": "scene", "unit_ids": ids}],
                                        "units": [{"unit_id": u, "speaker": "A", "text": ""} for u in ids]})
        hostile = candidate("c-h", "scene-descriptions", "s", {"scenes": [
            {"kind": "combat", "title": f"Scene {k}", "summary": "s" * 100, "start_unit_id": 7 + k, "end_unit_id": 3}
            for k in range(600)]})
        return source_cost(transcript_line, hostile)[0]

    # Each scene's range is two binary searches in the chunk's positions, whatever its length.
    ratio = hostile_source_cost(30_000) / hostile_source_cost(3_000)
    assert ratio < 1.5, ratio


def test_registry_clashes_with_one_richly_cited_entry_cost_linear():
    """Every entry repeats the name of the first, which cites a range per unit: its ranges are
    rendered once, not once per clash."""
    def registry_cost(n: int) -> int:
        units = 2 * n
        ids = list(range(units, 0, -1))
        transcript_line = orjson.dumps({"source_id": SOURCE, "units": [{"unit_id": u, "speaker": "A", "text": ""}
                                                                       for u in ids],
                                        "chunks": [{"chunk_id": "x", "kind": "extraction", "unit_ids": ids}]})
        first = {"name": "Grog", "aliases": [], "description": "",
                 "evidence": [{"start_unit_id": u, "end_unit_id": u} for u in ids[:n]]}
        others = [{"name": "Grog", "aliases": [], "description": "",
                   "evidence": [{"start_unit_id": ids[-1], "end_unit_id": ids[-1]}]} for _ in range(n)]
        return source_cost(transcript_line, candidate("c-r", "npc-registry", "x", {"npcs": [first] + others}))[0]

    ratio = registry_cost(600) / registry_cost(150)
    assert ratio < 5, ratio
