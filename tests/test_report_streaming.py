"""The report's open-request estimate reads the run's transcripts source by source (issue 43): each source
it needs is handed on once, with all its lines in file order, as soon as its last line is read; it never
holds the archive's transcripts."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines import run_cost

SOURCES = ("crd3:A", "crd3:B", "crd3:C", "crd3:D")


def line(source: str, n: int) -> bytes:
    return orjson.dumps({"source_id": source, "units": [], "n": n})


@settings(max_examples=200, deadline=None)
@given(order=st.lists(st.sampled_from(SOURCES), max_size=20), wanted=st.sets(st.sampled_from(SOURCES + ("crd3:Z",))))
def test_each_wanted_source_comes_once_with_its_lines_in_order(order, wanted):
    lines = [line(source, n) for n, source in enumerate(order)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run_cost, "input_records", lambda pattern: iter(lines))
        found = list(run_cost.transcripts_by_source("T", set(wanted)))
    assert sorted(source for source, _ in found) == sorted(wanted)
    for source, got in found:
        assert got == [raw for raw in lines if orjson.loads(raw)["source_id"] == source]


def test_a_source_is_handed_on_when_its_last_line_is_read(monkeypatch):
    lines = [line("crd3:A", 0), line("crd3:A", 1), line("crd3:B", 2), line("crd3:C", 3), line("crd3:B", 4)]
    read = []

    def records(pattern):
        for raw in lines:
            read.append(raw)
            yield raw

    monkeypatch.setattr(run_cost, "input_records", records)
    handed = []
    for source, got in run_cost.transcripts_by_source("T", {"crd3:A", "crd3:B", "crd3:C"}):
        handed.append((source, len(read) - len(lines)))  # lines of the second pass read so far
    assert handed == [("crd3:A", 2), ("crd3:C", 4), ("crd3:B", 5)]


def test_a_reconciliation_request_is_estimated_with_its_sources_registries(tmp_path):
    """The estimate reads registry artifacts only for sources with a reconciliation request (the only prompts
    that list them): that request is still estimated, with the same figures as export-batch's code gives it."""
    from domain.batch.estimate import estimate_counts
    from domain.batch.export import ExportConfig, export_source
    from domain.batch.providers import PROVIDERS, RequestSettings
    from pipelines import reprocess
    from pipelines.outputs import iter_rows, read_manifest
    from test_batch_backfill import ARCHIVE, SOURCE, TRANSCRIPT

    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / "transcripts.jsonl").write_bytes(TRANSCRIPT + b"\n")
    (archive / "candidates.jsonl").write_bytes(b"".join(line + b"\n" for line in ARCHIVE))
    out = tmp_path / "run"
    assert reprocess.main(["--transcripts", str(archive / "transcripts.jsonl"), "--candidates",
                           str(archive / "candidates.jsonl"), "--output", str(out), "--output-format", "jsonl",
                           "--refresh-stale"]) == 0
    block, note = run_cost.open_requests_estimate(str(out), read_manifest(out), run_cost.Target("openai-chat", "m"),
                                                  None, None)
    assert note == "" and block["not_estimated"]["requests"] == 0
    requests = [orjson.dumps(r) for r in iter_rows(out / "retry_requests")]
    registries = [orjson.dumps(r) for r in iter_rows(out / "artifacts" / "npc-registry")]
    config = ExportConfig("openai-chat", RequestSettings("m", run_cost.Target().max_output_tokens),
                          PROVIDERS["openai-chat"].max_bytes)
    rows, dead, _ = export_source(SOURCE, [TRANSCRIPT], requests, config, registry_lines=registries)
    assert dead == [] and {r["index"]["family"] for r in rows} == {"npc-reconciliation", "spells"}
    expected = sum(estimate_counts(r["index"])[k] for r in rows for k in estimate_counts(r["index"])
                   if k.endswith("input_tokens"))
    assert block["total"]["input_tokens"] == expected and block["total"]["requests"] == 2
    assert block["by_kind"]["retry"]["npc-reconciliation"]["requests"] == 1
