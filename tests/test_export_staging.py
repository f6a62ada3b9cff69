"""export-batch's staging: the request lines go to files under --output between the per-source step
and the file writers, so the rows the runner groups (by id, then by file) stay small whatever the
archive's size; the files written are the bytes the rows in memory gave."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.batch.export import INPUT_RETRY_REQUESTS, export_source_groups, file_contents
from domain.intake import INPUT_TRANSCRIPTS
from pipelines.batch_export import (STAGING, StagedReader, _OnePerId, _WriteFile, remove_staging, staged_export,
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


@settings(max_examples=20, deadline=None)
@given(order=st.permutations(range(2)))
def test_a_file_written_from_the_staging_is_the_bytes_of_the_rows_in_memory(run1, tmp_path_factory, order):
    out = tmp_path_factory.mktemp("export")
    rows, _ = export_source_groups(config(), SOURCE, grouped(run1))
    staged, _ = staged_export(config(), str(out / STAGING), SOURCE, grouped(run1))
    arriving = [staged["requests"][i] for i in order]  # the grouping gives them in any order
    [written] = list(_WriteFile(str(out)).process((0, arriving), Plan(1)))
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
    out = list(_OnePerId(str(staging)).process(("r-1", list(reversed(rows)))))
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
