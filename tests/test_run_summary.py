"""The report's streaming aggregates equal the whole-table computations on the same rows."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.retry_economy import internal_tokens, leaks_in
from analysis.run_summary import summarize_run
from test_retry_economy import hand_run

# Small alphabets, so ids, codes and guidance words collide often.
IDS = st.sampled_from(["c-1", "c-2", "s:1", "x-1", "*", "odd id/7", "r-9", "npc_name", "Grog", "12"])
CODES = st.sampled_from(["span_outside_chunk", "unknown", "bound", "schema.enum", "x-1", "truncated"])
WORDS = st.sampled_from(["Grog", "c-1", "s:1.", "units 4–7", "odd id/7", "r-9", "span_outside_chunk", "sha256",
                         "spells[3]", "the", "ValueError", "*", "12", "(x-1)", "\n- "])

issues = st.lists(st.fixed_dictionaries({"validator": CODES, "reason_code": CODES, "location": st.just(""),
                                         "message": st.just("")}), max_size=3)
evaluations = st.lists(st.fixed_dictionaries({
    "candidate_id": IDS, "source_id": IDS, "chunk_id": IDS, "family": st.sampled_from(["a", "b"]),
    "attempt": st.integers(1, 3), "verdict": st.sampled_from(["accepted", "rejected"]), "issues": issues,
}), max_size=12)
requests = st.lists(st.fixed_dictionaries({
    "request_id": IDS, "candidate_id": IDS, "source_id": IDS, "chunk_id": IDS,
    "family": st.sampled_from(["a", "b", "c", "d"]),
    "correction_guidance": st.lists(WORDS, max_size=8).map(" ".join),
}), max_size=8)


def whole_table_examples(rows, count=3):
    """The report's earlier selection: rank every request, take the first of each family."""
    ranked = sorted(rows, key=lambda r: (-r["correction_guidance"].count("\n- "), r["family"], r["request_id"]))
    chosen = []
    for request in ranked:
        if all(request["family"] != c["family"] for c in chosen):
            chosen.append(request)
        if len(chosen) == count:
            break
    return tuple(chosen)


def assert_equal_to_whole_table(evals, reqs):
    summary = summarize_run(lambda: iter(evals), lambda: iter(reqs))
    codes = Counter(i["reason_code"] for row in evals for i in row["issues"] if i["validator"] != "bound")
    assert dict(summary.reason_codes) == dict(codes)
    assert list(summary.reason_codes.values()) == sorted(codes.values(), reverse=True)
    assert summary.requests == len(reqs)
    assert summary.leaks == leaks_in(reqs, internal_tokens(evals, reqs))
    assert summary.examples == whole_table_examples(reqs)


@settings(max_examples=300, deadline=None)
@given(evals=evaluations, reqs=requests)
def test_streaming_summary_equals_whole_table(evals, reqs):
    assert_equal_to_whole_table(evals, reqs)


def test_hand_run_summary_equals_whole_table():
    run = hand_run()
    assert_equal_to_whole_table(list(run.evaluations), list(run.requests))


def test_rows_are_read_as_streams_not_held():
    reads = Counter()

    def rows(name, items):
        def again():
            reads[name] += 1
            yield from items
        return again

    run = hand_run()
    summarize_run(rows("evaluations", run.evaluations), rows("requests", run.requests))
    assert reads == {"evaluations": 1, "requests": 3}  # requests are few; evaluations are one per candidate


def test_refresh_requests_are_neither_counted_nor_shown():
    run = hand_run()
    retry = dict(run.requests[0], kind="retry")
    refresh = dict(run.requests[0], request_id="r-refresh", kind="refresh", family="zzz", correction_guidance="")
    summary = summarize_run(lambda: (), lambda: [retry, refresh])
    assert summary.requests == 1 and [r["request_id"] for r in summary.examples] == [retry["request_id"]]
