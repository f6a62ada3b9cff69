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
