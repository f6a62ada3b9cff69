"""export-batch's staging: the request lines go to files under --output between the per-source step
and the file writers, so the rows the runner groups (by id, then by file) stay small whatever the
archive's size; the files written are the bytes the rows in memory gave."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.batch.export import INPUT_RETRY_REQUESTS, export_source_groups, index_line
from domain.intake import INPUT_TRANSCRIPTS
from transforms.export import (STAGING, OnePerId, StagedReader, WriteRequestFiles, remove_staging, staged_export,
                               staged_name)
from test_batch_backfill import SOURCE, TRANSCRIPT, config, registry_lines, run1  # noqa: F401 (fixture)


def grouped(result) -> dict:
    return {INPUT_TRANSCRIPTS: [TRANSCRIPT], INPUT_RETRY_REQUESTS: [orjson.dumps(r) for r in result.retry_requests],
            "registries": registry_lines(result)}


class Plan:
    def __init__(self, files: int) -> None:
        self.files = files


def test_staged_rows_carry_no_request_bytes_and_read_back_as_the_domain_wrote_them(run1, tmp_path):
    staging = str(tmp_path / STAGING)
    rows, _ = export_source_groups(config(), SOURCE, grouped(run1))
    staged, counts = staged_export(config(), staging, SOURCE, grouped(run1))
    assert counts == _ and staged["dead_letters"] == rows["dead_letters"]
    small = staged["requests"]
    assert [r["custom_id"] for r in small] == [r["custom_id"] for r in rows["requests"]]
    for row in small:  # what crosses the groupings: no line, no request record
        assert set(row) == {"custom_id", "source_id", "size", "estimate", "at"}
        assert len(orjson.dumps(row)) < 400
    reader = StagedReader(staging)
    try:
        for row, full in zip(small, rows["requests"]):
            line, index, raw = reader.read(row)
            assert (line, orjson.loads(index), raw) == (full["line"], full["index"], full["raw"])
            assert row["size"] == len(full["line"]) + 1
    finally:
        reader.close()
    assert sorted(p.name for p in (tmp_path / STAGING).iterdir()) == [staged_name(SOURCE)]


def file_contents(rows):
    """(request file bytes, index file bytes) of one file's rows held in memory, in id order: what the file
    written from the staging must be."""
    ordered = sorted(rows, key=lambda r: r["custom_id"])
    body = b"".join(r["line"] + b"\n" for r in ordered)
    index = b"".join(index_line(n, orjson.dumps(r["index"])) for n, r in enumerate(ordered, start=1))
    return body, index


@settings(max_examples=20, deadline=None)
@given(order=st.permutations(range(2)))
def test_a_file_written_from_the_staging_is_the_bytes_of_the_rows_in_memory(run1, tmp_path_factory, order):
    out = tmp_path_factory.mktemp("export")
    rows, _ = export_source_groups(config(), SOURCE, grouped(run1))
    staged, _ = staged_export(config(), str(out / STAGING), SOURCE, grouped(run1))
    arriving = [staged["requests"][i] for i in order]  # the grouping gives them in any order
    [written] = list(WriteRequestFiles(str(out)).process((0, arriving), Plan(1)))
    body, index = file_contents(rows["requests"])
    assert (out / written["requests_file"]).read_bytes() == body
    assert (out / written["index_file"]).read_bytes() == index
    assert (written["lines"], written["bytes"]) == (2, len(body))


def test_a_request_id_of_two_sources_keeps_the_first_source_and_dead_letters_the_other_byte_for_byte(tmp_path):
    staging = tmp_path / STAGING
    staging.mkdir()
    records = {"crd3:A": b'{"request_id": "r-1", "source_id": "crd3:A"}', "crd3:B": b'{"request_id": "r-1", "x": 1}'}
    rows = []
    for source, raw in records.items():
        line, index = b'{"custom_id":"r-1"}', orjson.dumps({"source_id": source})
        (staging / staged_name(source)).write_bytes(b"padding" + line + index + raw)
        rows.append({"custom_id": "r-1", "source_id": source, "size": len(line) + 1, "estimate": {},
                     "at": (staged_name(source), len(b"padding"), len(line), len(index), len(raw))})
    out = list(OnePerId(str(staging)).process(("r-1", list(reversed(rows)))))
    assert out[0] is rows[0]
    dead = out[1].value
    assert len(dead) == 1 and out[1].tag == "dead" and out[2].value == {"dead_letters/retry_requests": 1}
    assert dead[0] == {"input": "retry_requests", "reason": "duplicate request_id 'r-1': kept another record",
                       "payload": records["crd3:B"].decode(), "payload_encoding": "utf-8"}


def test_the_staging_goes_whole_and_a_missing_one_is_nothing_to_remove(tmp_path):
    staging = tmp_path / STAGING
    staging.mkdir()
    for n in range(3):
        (staging / f"{n}.bin").write_bytes(b"x")
    remove_staging(str(staging))
    assert not staging.exists()
    remove_staging(str(staging))  # again: nothing there, no error


@pytest.mark.parametrize("files", [3])
def test_the_reader_keeps_a_bounded_number_of_files_open(tmp_path, files, monkeypatch):
    monkeypatch.setattr(StagedReader, "OPEN_FILES", 2)
    rows = []
    for n in range(files):
        (tmp_path / f"{n}.bin").write_bytes(b"L%dIR" % n)
        rows.append({"at": (f"{n}.bin", 0, 2, 1, 1)})
    reader = StagedReader(str(tmp_path))
    try:
        assert [reader.read(r)[0] for r in rows + rows[:1]] == [b"L0", b"L1", b"L2", b"L0"]
        assert len(reader.handles) == 2
    finally:
        reader.close()


# --- the retry request's fast check --------------------------------------------------------------------------

SHA = "sha256:" + "ab" * 32
VALID = {
    "retry": {"request_id": "r-1", "kind": "retry", "family": "spells", "source_id": "crd3:S1", "chunk_id": "x-1",
              "candidate_id": "c1", "attempt": 2, "correction_guidance": "fix it", "prompt_fingerprint": SHA,
              "schema_fingerprint": SHA, "validator_policy_fingerprint": SHA, "input_fingerprint": None,
              "candidate_sha256": None, "judge": None, "judge_fingerprint": None},
}
VALID["refresh"] = {**VALID["retry"], "kind": "refresh", "correction_guidance": "", "input_fingerprint": SHA}
VALID["judge"] = {**VALID["retry"], "kind": "judge", "attempt": 1, "correction_guidance": "", "judge": "actor",
                  "candidate_sha256": "cd" * 32, "judge_fingerprint": SHA}
ODD_VALUES = (None, "", "x", "fix", SHA, SHA + "\n", SHA.upper(), "cd" * 32, "r" * 65, "a b", 0, 1, 2, -1, True, False,
              2.0, 1.5, [], {}, "retry", "refresh", "judge", "spells")


@settings(max_examples=400, deadline=None)
@given(kind=st.sampled_from(sorted(VALID)), changes=st.lists(st.tuples(
    st.sampled_from(sorted(VALID["retry"]) + ["extra"]), st.one_of(st.sampled_from(ODD_VALUES), st.just("DELETE"))),
    max_size=3))
def test_a_request_the_fast_check_passes_the_schema_passes(kind, changes):
    """The fast check of parse_retry_request never lets through a record retry_request.v1 refuses."""
    from domain.batch.prompts import _plain_request_check, _retry_request_validator

    record = dict(VALID[kind])
    for key, value in changes:
        if value == "DELETE":
            record.pop(key, None)
        else:
            record[key] = value
    if _plain_request_check()(record):
        assert _retry_request_validator().is_valid(record), record


def test_no_single_change_gets_a_refused_request_past_the_fast_check():
    """Every key of every kind set to every odd value (or removed), one at a time: the fast check passes
    exactly what the schema passes, or less."""
    from domain.batch.prompts import _plain_request_check, _retry_request_validator

    plain, validator = _plain_request_check(), _retry_request_validator()
    for kind, valid in VALID.items():
        for key in [*valid, "extra"]:
            for value in (*ODD_VALUES, "DELETE"):
                record = {k: v for k, v in valid.items() if not (k == key and value == "DELETE")}
                if value != "DELETE":
                    record[key] = value
                assert not plain(record) or validator.is_valid(record), record


def test_the_requests_the_job_writes_take_the_fast_check(run1):  # noqa: F811
    from domain.batch.prompts import _plain_request_check, _retry_request_validator

    for record in [*VALID.values(), *(orjson.loads(orjson.dumps(r)) for r in run1.retry_requests)]:
        assert _retry_request_validator().is_valid(record) and _plain_request_check()(record)
