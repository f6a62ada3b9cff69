"""The job records what endpoint ordering saved; the old re-evaluation is the reference.

``analysis.savings.canonicalization_savings`` re-evaluates every passing
candidate with endpoint ordering disabled (slow: it needs the archive). The
job now records the same figure as it goes: ``endpoints_reordered`` on each
evaluation row and per-family counts in the manifest. These tests hold the
two to each other on the hand-made archive and on simulated archives.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.savings import canonicalization_savings, recorded_savings
from domain.evaluate import evaluate_response
from domain.families import FAMILIES
from domain.families.base import EvaluationContext
from domain.manifest import build_manifest
from domain.reprocess import RunConfig, process_source
from domain.source import parse_transcript
from pipelines.demo import bundled_transcripts
from pipelines.outputs import input_records, read_candidates, read_transcripts
from sample import simulated_producer
from test_retry_economy import IDS, MAX_ATTEMPTS, hand_run, transcript_record



def decide_archive(transcripts: str, candidates: str) -> tuple[list[dict], dict]:
    """The job's per-source entry point over an archive in a plain loop (no Beam)."""
    lines: dict[str, dict[str, list[bytes]]] = defaultdict(lambda: {"t": [], "c": []})
    for kind, pattern in (("t", transcripts), ("c", candidates)):
        for line in input_records(pattern):
            lines[orjson.loads(line)["source_id"]][kind].append(line)
    evaluations: list[dict] = []
    counts: Counter[str] = Counter()
    for source_id, grouped in sorted(lines.items()):
        result = process_source(source_id, grouped["t"], grouped["c"], RunConfig(max_attempts=MAX_ATTEMPTS))
        evaluations += result.evaluations
        counts.update(result.counts)
    return evaluations, dict(counts)


def assert_recorded_equals_reference(evaluations, counts, transcripts, candidates) -> None:
    reference = canonicalization_savings(evaluations, transcripts, candidates)
    assert reference.unavailable == 0
    recorded = recorded_savings(build_manifest(counts, options={}, runner="test"))
    assert recorded.would_retry == reference.would_retry
    assert recorded.would_defer == reference.would_defer
    assert recorded.retries_saved == reference.retries_saved


def test_hand_archive_recorded_equals_re_evaluation():
    run = hand_run()
    assert_recorded_equals_reference(run.evaluations, run.counts, run.transcripts, run.candidates)
    recorded = recorded_savings(build_manifest(run.counts, options={}, runner="test"))
    assert (recorded.retries_saved, recorded.deferrals_saved) == (3, 1)  # the hand archive's known answer


def test_every_evaluation_row_says_how_many_ranges_were_reordered():
    run = hand_run()
    reordered = {row["candidate_id"]: row["endpoints_reordered"] for row in run.evaluations}
    assert all(isinstance(n, int) and n >= 0 for n in reordered.values())
    assert any(n > 0 for n in reordered.values())
    # Deferred and structurally broken candidates never reach ordering.
    for row in run.evaluations:
        if row["verdict"] == "deferred":
            assert row["endpoints_reordered"] == 0


EXTRACTION_FAMILIES = sorted(key for key, spec in FAMILIES.items() if spec.chunk_kind == "extraction")


def minimal_record(schema: dict) -> object:
    """A valid value for an LLM schema node: the first enum value, null where allowed, a blank-free
    text, 1, false, an empty list (evidence is replaced by the caller)."""
    if "enum" in schema:
        return schema["enum"][0]
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if "null" in kinds:
        return None
    kind = kinds[0]
    if kind == "object":
        return {name: minimal_record(sub) for name, sub in schema["properties"].items()}
    return {"string": "Grog", "integer": 1, "boolean": False, "array": []}[kind]


@settings(max_examples=150, deadline=None)
@given(family=st.sampled_from(EXTRACTION_FAMILIES),
       records=st.lists(st.lists(st.tuples(st.sampled_from([*IDS, 99, 0, -1]), st.sampled_from([*IDS, 99, 0, -1])),
                                 min_size=1, max_size=4), min_size=1, max_size=3))
def test_endpoints_reordered_counts_exactly_the_ranges_written_backwards(family, records):
    """Every extraction family, every record: each written range whose endpoints both resolve and
    run backwards in document order counts once (a duplicate too); nothing else counts."""
    from domain.assets import llm_schema_path, load_json_asset

    transcript = parse_transcript(orjson.dumps(transcript_record("S1")))
    spec = FAMILIES[family]
    item_schema = load_json_asset(llm_schema_path(family))["properties"][spec.list_field]["items"]
    items = []
    for ranges in records:
        item = minimal_record(item_schema)
        item["evidence"] = [{"start_unit_id": a, "end_unit_id": b} for a, b in ranges]
        items.append(item)
    ctx = EvaluationContext(transcript, transcript.chunk("x-1"))
    result = evaluate_response(spec, orjson.dumps({spec.list_field: items}).decode(), ctx)
    position = transcript.index.position
    expected = sum(position(a) is not None and position(b) is not None and position(a) > position(b)
                   for ranges in records for a, b in ranges)
    assert result.adapted is not None and result.endpoints_reordered == expected


def simulated_archive(root: Path, seed: int, candidates: int) -> tuple[str, str]:
    simulated_producer.main([
        "--transcripts", str(bundled_transcripts()),
        "--transcripts-out", str(root / "transcripts.jsonl"), "--candidates-out", str(root / "candidates.jsonl"),
        "--truth-out", str(root / "truth.jsonl"), "--seed", str(seed), "--candidates", str(candidates),
        "--reconciliations",
        # Reversed ranges and compound defects made common, so savings and knock-ons occur.
        "--defect-rate", "reversed_endpoints=0.3", "--defect-rate", "multiple_defects=0.3",
    ])
    return str(root / "transcripts.jsonl"), str(root / "candidates.jsonl")


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=2**16))
def test_simulated_archives_recorded_equals_re_evaluation(tmp_path_factory, seed):
    root = tmp_path_factory.mktemp("sim")
    transcripts, candidates = simulated_archive(root, seed, 400)
    evaluations, counts = decide_archive(transcripts, candidates)
    assert_recorded_equals_reference(evaluations, counts, read_transcripts(transcripts), read_candidates(candidates))


@pytest.fixture(scope="module")
def demo_archive(tmp_path_factory):
    return simulated_archive(tmp_path_factory.mktemp("demo"), 7, 3000)


def test_demo_sized_archive_recorded_equals_re_evaluation(demo_archive):
    transcripts, candidates = demo_archive
    evaluations, counts = decide_archive(transcripts, candidates)
    reference = canonicalization_savings(evaluations, read_transcripts(transcripts), read_candidates(candidates))
    assert reference.retries_saved > 0  # the archive exercises the figure
    assert_recorded_equals_reference(evaluations, counts, read_transcripts(transcripts), read_candidates(candidates))
