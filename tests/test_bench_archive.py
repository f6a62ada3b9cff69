"""bench.archive's replicated archives: N copies of an archive are a valid archive of N times the sources.

The ten-million-candidate bench runs on copies of the 1M archive
(``replicated_archive``); the job must see every copy's sources as new
sources, so every count of its manifest is N times the base's and no record
(source, candidate, request) collides with another.
"""

from __future__ import annotations

import gzip

import orjson
import pytest

from bench.archive import ArchiveSpec, ensure_archive, replicated_archive, rewrite_line
from fixture_archive import run_job

COPIES = 3
# The manifest's blocks of counts: each must be COPIES times the base's.
COUNTED_BLOCKS = ("conservation", "transcript_conservation", "prior_registry_conservation", "outcomes",
                  "endpoint_ordering", "refresh", "totals", "invariant_failures", "inputs", "outputs")


def scaled(value, k: int):
    """Every count in ``value`` times k (flags and text as they are)."""
    if isinstance(value, bool) or not isinstance(value, (int, dict, list)):
        return value
    if isinstance(value, int):
        return value * k
    if isinstance(value, dict):
        return {key: scaled(item, k) for key, item in value.items()}
    return [scaled(item, k) for item in value]


def test_a_copy_rewrites_the_source_and_candidate_ids_and_nothing_else():
    line = (b'{"candidate_id":"c-1","family":"spells","source_id":"crd3:C1E001",'
            b'"raw_response":"{\\"source_id\\":\\"x\\"}"}\n')
    new, source = rewrite_line(line, b".r2")
    record, original = orjson.loads(new), orjson.loads(line)
    assert (record["candidate_id"], record["source_id"], source) == ("c-1.r2", "crd3:C1E001.r2", b"crd3:C1E001.r2")
    assert record["raw_response"] == original["raw_response"]  # the provider's text untouched
    assert rewrite_line(line, b"") == (line, b"crd3:C1E001")  # copy 0 is the base, byte for byte


def test_a_line_that_is_not_json_keeps_its_bytes_but_its_ids():
    cut = b'{"candidate_id":"c-9","source_id":"s:1","raw_response":"{\\"sp'
    expected = b'{"candidate_id":"c-9.r1","source_id":"s:1.r1","raw_response":"{\\"sp\n'
    assert rewrite_line(cut + b"\n", b".r1") == (expected, b"s:1.r1")
    assert rewrite_line(b"[1, 2]\n", b".r1") == (b"[1, 2]\n", None)


def test_a_file_bom_stays_in_front_of_the_copied_record():
    new, source = rewrite_line(b'\xef\xbb\xbf{"source_id": "s:1", "units": []}\r\n', b".r4")
    assert new == b'\xef\xbb\xbf{"source_id":"s:1.r4","units":[]}\n' and source == b"s:1.r4"


def test_an_id_that_already_looks_like_a_copy_is_refused():
    with pytest.raises(ValueError, match="already ends like a copy"):
        rewrite_line(b'{"source_id":"s:1","candidate_id":"c-1.r12"}\n', b".r1")


def test_three_copies_are_three_times_the_counts_with_no_collision(tmp_path):
    cache = tmp_path / "cache"
    base = ensure_archive(ArchiveSpec(candidates=1500, sources=3, min_units=300, max_units=600, shards=2), cache,
                          log=lambda message: None)
    copy = replicated_archive(base, COPIES, cache, log=lambda message: None, processes=2)
    assert (copy.candidates_in, copy.transcripts_in, copy.sources) == (
        COPIES * base.candidates_in, COPIES * base.transcripts_in, COPIES * base.sources)
    assert len(list(copy.folder.glob("candidates-*.jsonl.gz"))) == COPIES * 2

    base_ids = {orjson.loads(line)["source_id"] for path in base.folder.glob("transcripts-*")
                for line in gzip.open(path)}
    copy_ids = [orjson.loads(line)["source_id"] for path in copy.folder.glob("transcripts-*")
                for line in gzip.open(path)]
    assert sorted(copy_ids) == sorted(base_ids | {f"{sid}.r{k}" for sid in base_ids for k in range(1, COPIES)})

    base_manifest, base_outputs = run_job({"transcripts": base.transcripts_glob, "candidates": base.candidates_glob},
                                          tmp_path / "base", "--output-format", "jsonl")
    manifest, outputs = run_job({"transcripts": copy.transcripts_glob, "candidates": copy.candidates_glob},
                                tmp_path / "copies", "--output-format", "jsonl")
    assert manifest["conservation"]["holds"] and manifest["conservation"]["candidates_in"] == copy.candidates_in
    for block in COUNTED_BLOCKS:
        assert manifest[block] == scaled(base_manifest[block], COPIES), block
    assert base_manifest["conservation"]["evaluations"] > 0
    # No record collides: every candidate evaluated once under its own id, every request id unique.
    evaluations = [row["candidate_id"] for row in outputs["evaluations"]]
    assert len(evaluations) == len(set(evaluations)) == COPIES * len(base_outputs["evaluations"])
    requests = [row["request_id"] for row in outputs["retry_requests"]]
    assert len(requests) == len(set(requests)) == COPIES * len(base_outputs["retry_requests"]) > 0

    again = replicated_archive(base, COPIES, cache, log=lambda message: pytest.fail(f"built again: {message}"))
    assert again == copy  # cached: its own key, found complete


def test_the_revision_archive_has_its_own_key_and_leaves_the_others_as_they_were():
    """ArchiveSpec.revised_family (bench.backfill's archive) and judge_defects (bench.judges') are in the key only
    when set: every earlier archive's cache key is unchanged."""
    import hashlib
    import json
    from dataclasses import asdict

    from bench.archive import producer_digest

    plain = ArchiveSpec.at_density(100_000)
    fields = {k: v for k, v in asdict(plain).items() if k not in ("revised_family", "judge_defects")}
    before = f"c{plain.candidates}-s{plain.sources}-" + hashlib.sha256(
        json.dumps(fields, sort_keys=True).encode() + producer_digest()).hexdigest()[:12]
    assert plain.key() == before
    assert ArchiveSpec.at_density(100_000, revised_family="spells").key() != before
    assert ArchiveSpec.at_density(100_000, judge_defects=True).key() not in (
        before, ArchiveSpec.at_density(100_000, revised_family="spells").key())
