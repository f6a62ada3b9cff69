"""The full case matrix of the two shared helpers, plus property tests."""

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.evidence import (
    SourceRef,
    canonical_evidence,
    canonical_span,
    canonical_spans,
    earliest_evidence_unit_id,
    earliest_of_sort_keys,
    earliest_position,
    evidence_is_canonical,
    evidence_sort_key,
    evidence_sort_keys,
    order_endpoints,
    range_positions,
    span_within_chunk,
)
from domain.source import Chunk, DocumentIndex, transcript_from_record

# Document order: ids fall and rise: 10, 3, 7, 20, 1, 2, 50
IDS = [10, 3, 7, 20, 1, 2, 50]


def make(ids=IDS, chunks=(("x-1", [10, 3, 7, 20]), ("x-2", [1, 2, 50]), ("gap", [10, 7, 20]))):
    return transcript_from_record({
        "source_id": "s",
        "units": [{"unit_id": u, "speaker": "A", "text": ""} for u in ids],
        "chunks": [{"chunk_id": c, "kind": "extraction", "unit_ids": list(m)} for c, m in chunks],
    })


T = make()
IX = T.index


@pytest.mark.parametrize(
    "start, end, expected",
    [
        (3, 20, (3, 20)),  # forward, ids rising
        (20, 3, (3, 20)),  # reversed
        (7, 7, (7, 7)),  # single unit
        (10, 3, (10, 3)),  # forward although 10 > 3 numerically
        (3, 10, (10, 3)),  # reversed although 3 < 10 numerically
        (20, 1, (20, 1)),  # forward, id falls
        (1, 20, (20, 1)),  # reversed, id rises
        (3, 999, (3, 999)),  # unresolved end
        (999, 3, (999, 3)),  # unresolved start
        (0, 3, (0, 3)),  # non-positive
        (-2, -1, (-2, -1)),
        (None, 3, (None, 3)),  # missing
    ],
)
def test_order_endpoints_matrix(start, end, expected):
    ref = SourceRef("s", start, end)
    out = order_endpoints(IX, "s", ref)
    assert (out.start_unit_id, out.end_unit_id) == expected
    assert (ref.start_unit_id, ref.end_unit_id) == (start, end)  # never mutated


def test_order_endpoints_leaves_other_sources_and_none_alone():
    ref = SourceRef("other", 20, 3)
    assert order_endpoints(IX, "s", ref) is ref
    assert order_endpoints(IX, "other", SourceRef("other", 20, 3)) == SourceRef("other", 20, 3)  # index is for "s"
    assert order_endpoints(IX, "s", None) is None
    assert order_endpoints(None, "s", SourceRef("s", 20, 3)) == SourceRef("s", 20, 3)


@pytest.mark.parametrize(
    "chunk, start, end, inside",
    [
        ("x-1", 10, 20, True),  # the whole chunk, edge to edge
        ("x-1", 10, 10, True),  # first edge, single unit
        ("x-1", 20, 20, True),  # last edge
        ("x-1", 3, 7, True),
        ("x-1", 7, 1, False),  # partial: leaves the chunk at the end
        ("x-2", 20, 1, False),  # partial: starts before the chunk
        ("x-2", 1, 50, True),
        ("x-1", 20, 10, False),  # reversed ranges are not spans (strict)
        ("x-1", 10, 999, False),  # unresolved
        ("x-1", 0, 3, False),
        ("gap", 10, 7, False),  # non-contiguous chunk: unit 3 in between is missing
        ("gap", 7, 20, True),
        ("gap", 10, 10, True),
    ],
)
def test_span_within_chunk_matrix(chunk, start, end, inside):
    assert span_within_chunk(IX, T.chunk(chunk), SourceRef("s", start, end)) is inside


def test_span_within_chunk_none_and_wrong_source():
    chunk = T.chunk("x-1")
    assert span_within_chunk(IX, chunk, SourceRef("other", 10, 20)) is False
    assert span_within_chunk(IX, None, SourceRef("s", 10, 20)) is False
    assert span_within_chunk(IX, chunk, None) is False
    assert span_within_chunk(None, chunk, SourceRef("s", 10, 20)) is False
    assert span_within_chunk(IX, chunk, SourceRef("s", None, 20)) is False


def test_canonical_evidence_sorts_by_position_and_dedupes():
    refs = [SourceRef("s", 2, 1), SourceRef("s", 10, 3), SourceRef("s", 1, 2), SourceRef("s", 3, 10), SourceRef("s", 999, 3)]
    out = canonical_evidence(IX, "s", refs)
    assert out == (SourceRef("s", 10, 3), SourceRef("s", 1, 2), SourceRef("s", 999, 3))
    assert evidence_is_canonical(IX, out)
    assert earliest_evidence_unit_id(IX, out) == 10
    assert not evidence_is_canonical(IX, (SourceRef("s", 1, 2), SourceRef("s", 10, 3)))


# --- properties over random documents with shuffled ids and random chunks ---------------

@st.composite
def documents(draw):
    n = draw(st.integers(min_value=1, max_value=40))
    ids = draw(st.permutations(list(range(1, n + 1))).map(lambda p: [i * 3 + 1 for i in p]))  # shuffled, sparse
    members = draw(st.lists(st.sampled_from(ids), unique=True, min_size=1, max_size=n))
    index = DocumentIndex.of("s", ids)
    chunk = Chunk("c", "extraction", tuple(members), tuple(sorted(index.position(u) for u in members)))
    return ids, index, chunk


unit_values = st.one_of(st.integers(min_value=-3, max_value=130), st.none())


@settings(max_examples=300, deadline=None)
@given(documents(), unit_values, unit_values, st.sampled_from(["s", "other"]))
def test_order_endpoints_properties(doc, start, end, source):
    ids, index, _ = doc
    ref = SourceRef(source, start, end)
    before = copy.deepcopy(ref)
    out = order_endpoints(index, "s", ref)
    assert ref == before
    assert order_endpoints(index, "s", out) == out  # idempotent
    ps, pe = index.position(start), index.position(end)
    resolvable = source == "s" and ps is not None and pe is not None
    if not resolvable or ps <= pe:
        assert out == ref  # forward and unresolvable references never change
    if resolvable:
        assert index.position(out.start_unit_id) <= index.position(out.end_unit_id)
        assert {out.start_unit_id, out.end_unit_id} == {start, end}


@settings(max_examples=300, deadline=None)
@given(documents(), unit_values, unit_values, st.sampled_from(["s", "other"]))
def test_span_within_chunk_equals_brute_force(doc, start, end, source):
    ids, index, chunk = doc
    ref = SourceRef(source, start, end)
    ps, pe = index.position(start), index.position(end)
    if source != "s" or ps is None or pe is None or ps > pe:
        expected = False
    else:
        members = set(chunk.unit_ids)
        expected = all(ids[p] in members for p in range(ps, pe + 1))
    assert span_within_chunk(index, chunk, ref) is expected


# Values a model may write for a unit id: ints, null, and the look-alikes a dict lookup would
# take for an int (True hashes as 1, 4.0 as 4; documents() ids are 1, 4, 7, ...).
id_values = st.one_of(unit_values, st.booleans(), st.sampled_from([1.0, 4.0, 7.0]))


@settings(max_examples=400, deadline=None)
@given(documents(), id_values, id_values, st.sampled_from(["s", "other", None]))
def test_range_positions_resolves_exactly_through_the_index(doc, start, end, source):
    """The one range lookup the hot paths share agrees with DocumentIndex.position, unit by unit."""
    _, index, _ = doc
    ps, pe = index.position(start), index.position(end)
    expected = (ps, pe) if source == index.source_id and ps is not None and pe is not None else None
    assert range_positions(index.source_id, index.positions, source, start, end) == expected


# --- the inlined helpers equal their definitions ---------------------------------------------

def reference_canonical(index, source_id, refs):
    """canonical_evidence as SPEC §5 defines it: order each pair, de-duplicate, sort by position."""
    ordered = {order_endpoints(index, source_id, ref) for ref in refs}
    return tuple(sorted(ordered, key=lambda ref: evidence_sort_key(index, ref)))


def reference_earliest(index, refs):
    best = None
    for ref in refs:
        start, end = index.position(ref.start_unit_id), index.position(ref.end_unit_id)
        if ref.source_id == index.source_id and start is not None and end is not None and (best is None or start < best[0]):
            best = (start, ref.start_unit_id)
    return None if best is None else best[1]


ref_lists = st.lists(st.builds(SourceRef, st.sampled_from(["s", "s", "s", "other", None]), unit_values, unit_values),
                     max_size=6)


@settings(max_examples=400, deadline=None)
@given(documents(), ref_lists, st.sampled_from(["s", "other"]))
def test_canonical_evidence_equals_its_definition(doc, refs, source):
    _, index, _ = doc
    out = canonical_evidence(index, source, refs)
    assert out == reference_canonical(index, source, refs)
    assert all(type(ref) is SourceRef for ref in out)
    expected_earliest = reference_earliest(index, refs)
    assert earliest_evidence_unit_id(index, refs) == expected_earliest
    # The invariants read the earliest start from the sort keys they build: the same answer.
    from_keys = earliest_of_sort_keys(index, evidence_sort_keys(index, refs))
    assert from_keys == earliest_position(index, refs)
    assert from_keys is None or from_keys == (index.position(expected_earliest), expected_earliest)
    if len(refs) == 1:  # the one-range shortcut adapters take
        (ref,) = refs
        one = canonical_span(index, ref.source_id, ref.start_unit_id, ref.end_unit_id)
        assert one == canonical_spans(index, [(ref.source_id, ref.start_unit_id, ref.end_unit_id)])
        if source == "s":
            assert one == out
    if source == "s":
        assert evidence_is_canonical(index, out)
    keys = [evidence_sort_key(index, ref) for ref in refs]
    expected = (all(k[0] == 1 or k[1] <= k[2] for k in keys) and keys == sorted(keys) and len(set(refs)) == len(refs))
    assert evidence_is_canonical(index, tuple(refs)) is expected


@settings(max_examples=300, deadline=None)
@given(documents(), st.lists(ref_lists, max_size=5))
def test_order_records_equals_its_definition(doc, evidence_lists):
    from types import SimpleNamespace

    from domain.families.common import order_records

    _, index, _ = doc
    records = [SimpleNamespace(evidence=tuple(refs)) for refs in evidence_lists]

    def key(indexed):
        uid = reference_earliest(index, indexed[1].evidence)
        pos = None if uid is None else index.position(uid)
        return (pos is None, pos if pos is not None else 0, indexed[0])

    expected = tuple(record for _, record in sorted(enumerate(records), key=key))
    adapted = order_records(index, records)
    assert adapted.records == expected
    assert adapted.earliest_evidence_unit_id == reference_earliest(index, [r for rec in expected for r in rec.evidence])


@settings(max_examples=300, deadline=None)
@given(documents(), st.lists(ref_lists, max_size=5), st.booleans())
def test_source_reference_issues_equals_its_definition(doc, evidence_lists, has_chunk):
    """The shared validator of the extraction families reports, per record and range, exactly
    what check_source_references reports called on every record (it only skips records whose
    ranges all pass); subjects are built only for records that fail."""
    from types import SimpleNamespace

    from domain.families.base import EvaluationContext
    from domain.families.common import check_source_references, source_reference_issues
    from domain.issues import IssueCollector

    ids, index, chunk = doc
    transcript = SimpleNamespace(source_id="s", index=index)
    ctx = EvaluationContext(transcript, chunk if has_chunk else None)
    records = [SimpleNamespace(name=f"r{n}", evidence=tuple(refs)) for n, refs in enumerate(evidence_lists)]
    asked = []

    def subject_of(record):
        asked.append(record.name)
        return f"The record {record.name}"

    expected = IssueCollector("x.source_reference")
    for n, record in enumerate(records):
        check_source_references(expected, ctx, f"The record {record.name}", record.evidence, f"items[{n}]")
    assert source_reference_issues("x.source_reference", ctx, records, subject_of, "items") == expected.issues()
    failing = {record.name for record in records
               if not all(span_within_chunk(index, ctx.chunk, ref) for ref in record.evidence)}
    assert set(asked) <= failing


def test_a_range_of_another_source_is_an_operator_finding_not_a_crash():
    """Its unit ids may well exist in this transcript (before, the gap branch then failed on an
    empty gap); the producer never writes a source id, so no correction is addressed to it."""
    from domain.families.base import EvaluationContext
    from domain.families.common import check_source_references
    from domain.issues import IssueCollector

    out = IssueCollector("x.source_reference")
    check_source_references(out, EvaluationContext(T, T.chunk("x-1")), "The record", (SourceRef("other", 3, 7),),
                            "items[0]")
    (issue,) = out.issues()
    assert (issue.reason_code, issue.location, issue.correction) == ("foreign_source", "items[0].evidence[0]", None)
