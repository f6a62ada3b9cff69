"""Same bytes every time: reruns, runner modes, input order and sharding (docs/reliability.md).

What "the same" means: every output row is byte-identical once the rows of a
folder are sorted (shards and row order are the runner's business). For JSON
Lines outputs that is literally the sorted lines of the part files; Avro
container files carry a random sync marker, so for Avro the decoded rows are
compared. The manifest is byte-identical apart from the paths in ``options``.
"""

from __future__ import annotations

import gzip
import random
from collections import Counter
from pathlib import Path

import fastavro
import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from domain.assets import load_json_asset
from domain.reprocess import RunConfig, process_source
from fixture_archive import bad_candidate_lines as fixture_bad_lines
from fixture_archive import write_archive
from output_reader import canonical, read_outputs
from pipelines import reprocess
from test_reliability_fuzz import (
    GOOD_LINES,
    S1,
    S2,
    TRANSCRIPT_LINES,
    envelope,
    production_recursion_limit,
    source_inputs,
)

TAGS = ("artifacts", "retry_requests", "evaluations", "dead_letters")


# --- the per-source step: arrival order never matters --------------------------------------

def result_bytes(result) -> dict:
    rows = {tag: canonical(list(getattr(result, tag))) for tag in TAGS}
    rows["counts"] = sorted(result.counts.items())
    return rows


@st.composite
def conflicting_duplicates(draw):
    """Records sharing a candidate_id, with equal or different received_at: only a tiebreak decides."""
    times = st.sampled_from(["2026-10-01T12:00:00Z", "2026-10-01T12:00:01Z", "", "x"])
    return [orjson.dumps(envelope("c-twin", attempt=draw(st.integers(1, 3)), received_at=draw(times),
                                  producer={"provider": "p", "model": draw(st.sampled_from("abc"))}))
            for _ in range(draw(st.integers(2, 4)))]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                 HealthCheck.large_base_example])
@given(source_inputs(deep=False), conflicting_duplicates(), st.randoms(use_true_random=False))
def test_process_source_gives_the_same_bytes_whatever_the_arrival_order(inputs, twins, rnd):
    transcripts, lines, _, config = inputs
    lines = list(lines) + twins
    shuffled_lines, shuffled_transcripts = list(lines), list(transcripts)
    rnd.shuffle(shuffled_lines)
    rnd.shuffle(shuffled_transcripts)
    with production_recursion_limit():
        first = process_source(S1, transcripts, lines, config)
        second = process_source(S1, shuffled_transcripts, shuffled_lines, config)
    assert result_bytes(first) == result_bytes(second)


def test_ids_are_unique_and_move_with_the_content_they_name():
    base = process_source(S1, [TRANSCRIPT_LINES[S1]], GOOD_LINES)
    artifact_ids = [a["artifact_id"] for a in base.artifacts]
    request_ids = [r["request_id"] for r in base.retry_requests]
    assert len(set(artifact_ids)) == len(artifact_ids) and len(set(request_ids)) == len(request_ids)

    # Same accepted candidate with another (still passing) raw response: another artifact id.
    first = orjson.loads(GOOD_LINES[0])
    respaced = orjson.dumps({**first, "raw_response": first["raw_response"] + " "})
    changed = process_source(S1, [TRANSCRIPT_LINES[S1]], (respaced,) + GOOD_LINES[1:])
    moved = {a["chunk_id"] for a in changed.artifacts} - {a["chunk_id"] for a in base.artifacts}
    assert not moved
    before = {a["chunk_id"]: a["artifact_id"] for a in base.artifacts}
    after = {a["chunk_id"]: a["artifact_id"] for a in changed.artifacts}
    assert after[first["chunk_id"]] != before[first["chunk_id"]]
    assert {k: v for k, v in after.items() if k != first["chunk_id"]} == \
        {k: v for k, v in before.items() if k != first["chunk_id"]}

    # The retry request of a slot names the attempt it asks for: another budget, another id.
    more_budget = process_source(S1, [TRANSCRIPT_LINES[S1]], GOOD_LINES, RunConfig(max_attempts=10))
    assert {r["request_id"] for r in more_budget.retry_requests} >= set(request_ids)
    assert len(more_budget.retry_requests) > len(request_ids)


# --- the whole job ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    directory = tmp_path_factory.mktemp("determinism-archive")
    written = write_archive(directory)
    # Hostile neighbours, so the dead-letter and duplicate paths are part of what must not move.
    extra = [b"\xef\xbb\xbf" + GOOD_LINES[0], b"[" * 5000, b'{"source_id": 7}', b"\xff" * 9,
             orjson.dumps(envelope("c-twin", received_at="2026-10-01T12:00:00Z")),
             orjson.dumps(envelope("c-twin", received_at="2026-10-01T12:00:00Z", attempt=2))]
    (directory / "candidates-9.jsonl").write_bytes(b"\r\n".join(extra) + b"\r\n")
    return written


def run_job(archive_globs: dict, out: Path, *extra) -> Path:
    argv = ["--transcripts", archive_globs["transcripts"], "--candidates", archive_globs["candidates"],
            "--output", str(out), "--output-format", "jsonl", *extra]
    assert reprocess.main(argv) == 0
    return out


def sorted_lines(out: Path) -> dict[str, list[bytes]]:
    """Every JSON Lines output folder as its sorted raw lines (the bytes the job wrote)."""
    folders = {}
    for folder in sorted({p.parent for p in out.rglob("part-*")}):
        lines = [line for part in sorted(folder.glob("part-*")) for line in part.read_bytes().splitlines()]
        folders[str(folder.relative_to(out))] = sorted(lines)
    return folders


def manifest_without_paths(out: Path) -> bytes:
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    for key in ("transcripts", "candidates", "output"):
        manifest["options"].pop(key)
    # The file listing names bytes, which follow sharding and row order (the runner's business);
    # the rows each output holds do not.
    manifest["files"] = {output: sum(f["rows"] for f in files) for output, files in manifest["files"].items()}
    return orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS)


@pytest.fixture(scope="module")
def reference(archive, tmp_path_factory):
    return run_job(archive, tmp_path_factory.mktemp("reference"))


def test_a_rerun_writes_the_same_bytes(archive, reference, tmp_path):
    again = run_job(archive, tmp_path / "again")
    assert sorted_lines(again) == sorted_lines(reference)
    assert manifest_without_paths(again) == manifest_without_paths(reference)
    assert sum(len(lines) for lines in sorted_lines(reference).values()) > 30  # the comparison is not vacuous


def test_two_worker_processes_write_the_same_bytes(archive, reference, tmp_path):
    out = run_job(archive, tmp_path / "mp", "--direct_num_workers=2", "--direct_running_mode=multi_processing")
    assert sorted_lines(out) == sorted_lines(reference)
    assert manifest_without_paths(out) == manifest_without_paths(reference)


@pytest.mark.parametrize("fmt", ["avro", "parquet"])
def test_avro_and_parquet_outputs_hold_the_same_rows(archive, reference, tmp_path, fmt):
    out = tmp_path / fmt
    argv = ["--transcripts", archive["transcripts"], "--candidates", archive["candidates"], "--output", str(out),
            "--output-format", fmt]
    assert reprocess.main(argv) == 0
    typed, jsonl = read_outputs(out), read_outputs(reference)
    assert typed.keys() == jsonl.keys()
    for name in typed:
        assert canonical(typed[name]) == canonical(jsonl[name]), name
    typed_manifest, jsonl_manifest = (orjson.loads(manifest_without_paths(o)) for o in (out, reference))
    assert typed_manifest["options"].pop("output_format") == fmt
    assert jsonl_manifest["options"].pop("output_format") == "jsonl"
    assert typed_manifest == jsonl_manifest  # counts and conservation do not depend on the format


# --- input order and sharding ---------------------------------------------------------------

def the_records():
    """One archive's records: transcripts and candidates, good and bad (no unreadable file: its
    dead letter names the file's path, which a different sharding changes by design)."""
    transcripts = [TRANSCRIPT_LINES[S1], TRANSCRIPT_LINES[S2], TRANSCRIPT_LINES[S2],
                   b'{"source_id": "crd3:BAD", "units": [], "chunks": []}']
    candidates = list(GOOD_LINES) + [line for line in fixture_bad_lines() if line.strip()] + [
        orjson.dumps(envelope("c-twin", received_at="2026-10-01T12:00:00Z", attempt=n)) for n in (1, 2, 3)]
    return transcripts, candidates


def write_layout(directory: Path, transcripts, candidates, rnd: random.Random, avro_share: int) -> dict:
    """The same records in another order, split into other files and formats."""
    directory.mkdir(parents=True)
    for name, lines in (("transcripts", transcripts), ("candidates", candidates)):
        lines = list(lines)
        rnd.shuffle(lines)
        if name == "candidates" and avro_share:
            movable = [line for line in lines if line in GOOD_LINES][:avro_share]
            lines = [line for line in lines if line not in movable]
            schema = fastavro.parse_schema(load_json_asset("inputs/model_candidate.v1.avsc"))
            with open(directory / "candidates-x.avro", "wb") as handle:
                records = [orjson.loads(line) for line in movable]
                fastavro.writer(handle, schema, [{**r, "raw_response": r["raw_response"].encode()} for r in records])
        files = rnd.randint(1, 3)
        for n in range(files):
            ending = rnd.choice([b"\n", b"\r\n"])
            data = b"".join(line + ending for line in lines[n::files])
            path = directory / f"{name}-{n}.jsonl"
            if rnd.random() < 0.5:
                path = path.with_suffix(".jsonl.gz")
                data = gzip.compress(data, mtime=0)
            path.write_bytes(data)
    return {"transcripts": str(directory / "transcripts-*"), "candidates": str(directory / "candidates-*")}


@pytest.fixture(scope="module")
def layout_reference(tmp_path_factory):
    transcripts, candidates = the_records()
    base = tmp_path_factory.mktemp("layout")
    globs = write_layout(base / "in", transcripts, candidates, random.Random(0), avro_share=0)
    return read_outputs(run_job(globs, base / "out"))


@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32), st.sampled_from([0, 3]))
def test_outputs_do_not_depend_on_input_order_or_sharding(layout_reference, tmp_path_factory, seed, avro_share):
    transcripts, candidates = the_records()
    base = tmp_path_factory.mktemp("layout")
    globs = write_layout(base / "in", transcripts, candidates, random.Random(seed), avro_share)
    outputs = read_outputs(run_job(globs, base / "out"))
    assert outputs.keys() == layout_reference.keys()
    for name in outputs:
        assert canonical(outputs[name]) == canonical(layout_reference[name]), name
    counts = Counter(row["input"] for row in outputs["dead_letters"])
    assert counts["candidates"] > 0 and counts["transcripts"] > 0
