"""The report's open-request estimate reads the run's transcripts source by source (issue 43): each source
it needs is handed on once, with all its lines in file order, as soon as its last line is read; it never
holds the archive's transcripts; nor a line per request, nor a row per saved slot (what it holds grows with
the run's sources, not its rows)."""

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


# --- what the report holds grows with the run's sources, never with its rows ---------------------------

GUIDANCE = "g" * 2000  # a request line of ~2 KB: held per request, it would show in the traced peak


def traced_peak(call) -> int:
    """Bytes Python allocated at the peak of ``call()`` over what was allocated before it."""
    import tracemalloc

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        call()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def estimate_peak(monkeypatch, requests: int) -> int:
    """The traced peak of the estimate over ``requests`` synthetic requests, ten per source, every one handed
    to export-batch's code (a stand-in that counts them) with its source."""
    sources = [f"crd3:S{n:06d}" for n in range(requests // 10)]
    handed: list[int] = []

    def rows(folder):
        for n in range(requests):
            yield {"source_id": sources[n % len(sources)], "family": "spells", "kind": "retry",
                   "candidate_id": f"c{n}", "correction_guidance": GUIDANCE + str(n)}

    def export(source_id, transcript_lines, request_lines, config, registry_lines=(), candidate_lines=()):
        handed.append(len(request_lines))
        return [], [], {}

    monkeypatch.setattr(run_cost, "iter_rows", rows)
    monkeypatch.setattr(run_cost, "input_paths", lambda pattern: ["T"])
    monkeypatch.setattr(run_cost, "listed_files", lambda manifest: {})
    monkeypatch.setattr(run_cost, "transcripts_by_source", lambda pattern, wanted: ((s, []) for s in sorted(wanted)))
    monkeypatch.setattr(run_cost, "export_source", export)
    peak = traced_peak(lambda: run_cost.open_requests_estimate("RUN", {"options": {"transcripts": "T"}},
                                                               run_cost.Target(), None, None))
    assert handed == [10] * len(sources)  # every request reached its source's rendering, once
    return peak


def test_the_estimate_holds_no_line_per_request(monkeypatch):
    """The requests wait on disk for their source's transcript: 6,000 more requests of ~2 KB (12 MB) add
    what their 600 more sources' names take, not their lines (the report held every one: ~800 MB at 1M
    candidates while each kept orjson's buffer, ~70 MB of lines after)."""
    small, large = estimate_peak(monkeypatch, 2000), estimate_peak(monkeypatch, 8000)
    assert large - small < 200 * 6000, (small, large)  # ~4 B a request; a line held was ~2 KB


def test_the_saved_retries_hold_no_row_per_slot():
    """Every slot reordered and saved, each row ~2 KB: what the three passes hold per slot is its key (the
    second pass kept each accepted row before)."""
    from analysis.cost import SAVED, saved_retry_cells

    def rows(slots: int):
        def read():
            for n in range(slots):
                yield {"source_id": f"crd3:S{n // 50:06d}", "chunk_id": f"c{n % 50:04d}", "family": "spells",
                       "verdict": "accepted", "endpoints_reordered": 1, "issues": GUIDANCE + str(n),
                       "producer": {"provider": "p", "model": "m"},
                       "usage": {"batch": False, "input_tokens": 10, "cached_input_tokens": None, "output_tokens": 2}}
        return read

    peaks = {}
    for slots in (2000, 8000):
        found: dict = {}
        peaks[slots] = traced_peak(lambda: found.update(saved_retry_cells(rows(slots))))
        cell = found["spells"][SAVED]
        assert cell.count == slots and cell.tokens.input_tokens == 10 * slots
    assert peaks[8000] - peaks[2000] < 500 * 6000, peaks  # ~140 B a key; a row held was ~3 KB
