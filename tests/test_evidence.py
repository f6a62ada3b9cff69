"""Cited ranges: the case matrices of the shared rules, and property tests holding every
function of domain.evidence (and the validators built on it) to definitions written here
from scratch, unit by unit through DocumentIndex.position."""

import copy
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.evidence import (
    SourceRef,
    canonical_evidence,
    canonical_written,
    earliest_start,
    evidence_is_canonical,
    evidence_sort_key,
    resolve,
    resolve_range,
    span_within_chunk,
)
from domain.source import Chunk, DocumentIndex, chunk_contains_positions, contiguous_positions, transcript_from_record

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


# --- the definitions (contract §5, §5.3), written without domain.evidence --------------------------

def def_positions(index, ref):
    """Document positions of a ref's two endpoints as given; None unless it is of the index's source
    and both resolve."""
    ps, pe = index.position(ref.start_unit_id), index.position(ref.end_unit_id)
    return None if ref.source_id != index.source_id or ps is None or pe is None else (ps, pe)


def def_reversed(index, ref):
    p = def_positions(index, ref)
    return p is not None and p[0] > p[1]


def def_order(index, ref):
    """contract §5 step 3: swapped only when it resolves in the current source and runs backwards."""
    return SourceRef(ref.source_id, ref.end_unit_id, ref.start_unit_id) if def_reversed(index, ref) else ref


def def_key(index, ref):
    p = def_positions(index, ref)
    return (1, 0, 0, repr((ref.source_id, ref.start_unit_id, ref.end_unit_id))) if p is None else (0, *p, "")


def def_canonical(index, source_id, refs):
    """Order each pair (only refs of the current source), de-duplicate, sort by document position."""
    ordered = {def_order(index, ref) if source_id == index.source_id else ref for ref in refs}
    return tuple(sorted(ordered, key=lambda ref: def_key(index, ref)))


def def_earliest(index, refs):
    """The unit id of the earliest resolvable start (as given), or None."""
    starts = [p[0] for p in (def_positions(index, ref) for ref in refs) if p is not None]
    return index.unit_ids_in_order[min(starts)] if starts else None


def def_within(index, chunk, ref):
    """contract §5.3: every unit of the forward span is a member of the chunk."""
    p = def_positions(index, ref)
    if chunk is None or p is None or p[0] > p[1]:
        return False
    members = set(chunk.unit_ids)
    return all(index.unit_ids_in_order[q] in members for q in range(p[0], p[1] + 1))


def def_is_canonical(index, refs):
    keys = [def_key(index, ref) for ref in refs]
    return all(k[0] == 1 or k[1] <= k[2] for k in keys) and keys == sorted(keys) and len(set(refs)) == len(refs)


def ordered(index, ref):
    """The one endpoint ordering applied to any ref: through its resolved form (one that does not
    resolve stays as it is)."""
    resolved = resolve(index, ref)
    return ref if resolved is None else resolved.ordered()


# --- the case matrices -----------------------------------------------------------------------------

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
        (True, 3, (True, 3)),  # a bool is never a unit id
    ],
)
def test_endpoint_ordering_matrix(start, end, expected):
    ref = SourceRef("s", start, end)
    out = ordered(IX, ref)
    assert (out.start_unit_id, out.end_unit_id) == expected
    assert (ref.start_unit_id, ref.end_unit_id) == (start, end)  # never mutated
    (canonical,), backwards = canonical_written(IX, "s", [SimpleNamespace(start_unit_id=start, end_unit_id=end)])
    assert (canonical.start_unit_id, canonical.end_unit_id) == expected
    assert backwards == (expected != (start, end))


def test_other_sources_are_never_reordered():
    ref = SourceRef("other", 20, 3)
    assert resolve(IX, ref) is None and ordered(IX, ref) is ref
    assert canonical_evidence(IX, "s", [ref]) == (ref,)
    assert canonical_evidence(IX, "other", [SourceRef("s", 20, 3)]) == (SourceRef("s", 20, 3),)  # index is for "s"


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
    resolved = resolve_range(IX, "s", start, end)
    if resolved is not None:  # the resolved form answers the same
        assert span_within_chunk(IX, T.chunk(chunk), resolved) is inside


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
    assert earliest_start(IX, out).start_unit_id == 10
    assert not evidence_is_canonical(IX, (SourceRef("s", 1, 2), SourceRef("s", 10, 3)))
    written = [SimpleNamespace(start_unit_id=r.start_unit_id, end_unit_id=r.end_unit_id) for r in refs]
    assert canonical_written(IX, "s", written) == (out, 2)  # (2, 1) and (3, 10) were written backwards


def test_a_resolved_ref_equals_the_plain_one_and_shows_no_positions():
    resolved = resolve_range(IX, "s", 20, 3)
    assert (resolved.first, resolved.last, resolved.index) == (3, 1, IX)
    assert resolved == SourceRef("s", 20, 3) and hash(resolved) == hash(SourceRef("s", 20, 3))
    assert repr(resolved) == repr(SourceRef("s", 20, 3)) and resolved.as_record() == SourceRef("s", 20, 3).as_record()
    assert resolved.ordered() == SourceRef("s", 3, 20) and resolved.ordered().first == 1


# --- properties over random documents with shuffled ids and random chunks ---------------

@st.composite
def documents(draw):
    n = draw(st.integers(min_value=1, max_value=40))
    ids = draw(st.permutations(list(range(1, n + 1))).map(lambda p: [i * 3 + 1 for i in p]))  # shuffled, sparse
    if draw(st.booleans()):  # a chunk of consecutive units, as most are (their containment fast path)
        start = draw(st.integers(min_value=0, max_value=n - 1))
        members = draw(st.permutations(ids[start:draw(st.integers(min_value=start + 1, max_value=n))]))
    else:
        members = draw(st.lists(st.sampled_from(ids), unique=True, min_size=1, max_size=n))
    index = DocumentIndex.of("s", ids)
    chunk = Chunk("c", "extraction", tuple(members), tuple(sorted(index.position(u) for u in members)))
    return ids, index, chunk


unit_values = st.one_of(st.integers(min_value=-3, max_value=130), st.none())
# Values a model may write for a unit id: ints, null, and the look-alikes a dict lookup would
# take for an int (True hashes as 1, 4.0 as 4; documents() ids are 1, 4, 7, ...).
id_values = st.one_of(unit_values, st.booleans(), st.sampled_from([1.0, 4.0, 7.0]))
sources = st.sampled_from(["s", "s", "s", "other", None])


@st.composite
def refs_as_met(draw, index):
    """A ref as the functions meet it: plain, resolved through ``index`` (what adapters store), or
    resolved through another index of the same source whose document order differs (its
    positions must never be taken for ``index``'s)."""
    ids = st.one_of(st.sampled_from(index.unit_ids_in_order), id_values)  # mostly ids of the document
    ref = SourceRef(draw(sources), draw(ids), draw(ids))
    how = draw(st.sampled_from(["plain", "resolved", "foreign index"]))
    if how == "resolved":
        return resolve(index, ref) or ref
    if how == "foreign index":
        other = DocumentIndex.of(index.source_id, list(reversed(index.unit_ids_in_order)) + [999])
        return resolve(other, ref) or ref
    return ref


@settings(max_examples=400, deadline=None)
@given(documents(), id_values, id_values, sources)
def test_resolve_range_is_the_index_lookup(doc, start, end, source):
    """The one lookup agrees with DocumentIndex.position, endpoint by endpoint, and carries its index."""
    _, index, _ = doc
    plain = SourceRef(source, start, end)
    resolved = resolve_range(index, source, start, end)
    expected = def_positions(index, plain)
    if expected is None:
        assert resolved is None
    else:
        assert (resolved, resolved.first, resolved.last, resolved.index) == (plain, *expected, index)
        assert type(resolved.start_unit_id) is int and type(resolved.end_unit_id) is int
        assert resolve(index, resolved) is resolved  # resolved once: asking again costs nothing
        assert resolve(index, plain) == resolved and resolve(index, plain).first == resolved.first


@st.composite
def refs_near(draw, index, chunk):
    """A ref resolved through ``index`` whose endpoints lie at or around the chunk's edges (a span
    one unit past them is what a containment test can get wrong)."""
    positions = chunk.sorted_positions
    near = st.integers(min_value=max(0, positions[0] - 2),
                       max_value=min(len(index.unit_ids_in_order) - 1, positions[-1] + 2))
    ref = SourceRef("s", index.unit_ids_in_order[draw(near)], index.unit_ids_in_order[draw(near)])
    return resolve(index, ref)


@settings(max_examples=300, deadline=None)
@given(st.data(), documents())
def test_endpoint_ordering_properties(data, doc):
    _, index, _ = doc
    ref = data.draw(refs_as_met(index))
    before = copy.deepcopy(ref)
    out = ordered(index, ref)
    assert ref == before and (ref.first, ref.last) == (before.first, before.last)
    assert out == def_order(index, ref)
    assert ordered(index, out) == out  # idempotent
    if def_positions(index, ref) is None or not def_reversed(index, ref):
        assert out == ref  # forward and unresolvable references never change
    else:
        assert {out.start_unit_id, out.end_unit_id} == {ref.start_unit_id, ref.end_unit_id}
        assert (out.first, out.last, out.index) == (*def_positions(index, out), index)


@settings(max_examples=400, deadline=None)
@given(st.data(), documents())
def test_span_within_chunk_equals_its_definition(data, doc):
    _, index, chunk = doc
    ref = data.draw(refs_as_met(index))
    assert span_within_chunk(index, chunk, ref) is def_within(index, chunk, ref)


@settings(max_examples=400, deadline=None)
@given(documents(), st.integers(min_value=-2, max_value=45), st.integers(min_value=-2, max_value=45))
def test_contiguous_positions_are_chunk_containment(doc, a, b):
    """A chunk's consecutive extent, where it has one, answers containment as the chunk does."""
    _, _, chunk = doc
    positions = chunk.sorted_positions
    bounds = contiguous_positions(chunk)
    assert (bounds is not None) is (list(positions) == list(range(positions[0], positions[-1] + 1)))
    if bounds is not None and a <= b:
        assert (bounds[0] <= a <= b <= bounds[1]) is chunk_contains_positions(chunk, a, b)
    assert contiguous_positions(None) is None


@settings(max_examples=400, deadline=None)
@given(st.data(), documents(), st.sampled_from(["s", "other"]))
def test_canonical_evidence_and_the_earliest_start_equal_their_definitions(data, doc, source):
    _, index, _ = doc
    refs = data.draw(st.lists(refs_as_met(index), max_size=6))
    out = canonical_evidence(index, source, refs)
    assert out == def_canonical(index, source, refs)
    for ref in out:  # what is kept carries its resolution from this index, or none
        assert (ref.index is index and (ref.first, ref.last) == def_positions(index, ref)) or \
            (ref.first is None and def_positions(index, ref) is None) or source != "s"
    earliest = earliest_start(index, refs)
    assert (None if earliest is None else earliest.start_unit_id) == def_earliest(index, refs)
    assert earliest is None or (earliest.first, earliest.index) == (index.position(earliest.start_unit_id), index)
    if source == "s":
        assert evidence_is_canonical(index, out)
    assert evidence_is_canonical(index, tuple(refs)) is def_is_canonical(index, refs)
    assert [evidence_sort_key(index, ref) for ref in refs] == [def_key(index, ref) for ref in refs]


@settings(max_examples=400, deadline=None)
@given(st.data(), documents())
def test_canonical_written_equals_its_definition(data, doc):
    """What adapters store for the ranges a model wrote in the current source, and how many
    of them it wrote backwards (each one counts, a duplicate included)."""
    _, index, _ = doc
    ids = st.one_of(st.sampled_from(index.unit_ids_in_order), id_values)
    pairs = data.draw(st.lists(st.tuples(ids, ids), min_size=1, max_size=6))
    written = [SimpleNamespace(start_unit_id=a, end_unit_id=b) for a, b in pairs]
    refs = [SourceRef("s", a, b) for a, b in pairs]
    out, backwards = canonical_written(index, "s", written)
    assert out == def_canonical(index, "s", refs)
    assert backwards == sum(def_reversed(index, ref) for ref in refs)
    assert out == canonical_evidence(index, "s", refs)
    for ref in out:
        p = def_positions(index, ref)
        assert (ref.first, ref.last, ref.index) == ((*p, index) if p is not None else (None, None, None))


@settings(max_examples=300, deadline=None)
@given(st.data(), documents(), st.integers(min_value=0, max_value=5))
def test_order_records_equals_its_definition(data, doc, reordered):
    from domain.families.common import order_records

    _, index, _ = doc
    records = [SimpleNamespace(evidence=tuple(data.draw(st.lists(refs_as_met(index), max_size=5))))
               for _ in range(data.draw(st.integers(min_value=0, max_value=5)))]

    def key(indexed):
        uid = def_earliest(index, indexed[1].evidence)
        pos = None if uid is None else index.position(uid)
        return (pos is None, pos if pos is not None else 0, indexed[0])

    expected = tuple(record for _, record in sorted(enumerate(records), key=key))
    adapted = order_records(index, records, reordered)
    assert adapted.records == expected
    assert adapted.earliest_evidence_unit_id == def_earliest(index, [r for rec in expected for r in rec.evidence])
    assert adapted.endpoints_reordered == reordered


# --- the source-reference validator (contract §5.3) --------------------------------------------------------

def def_reference_codes(index, chunk, records):
    """(reason code, location) of every range that is not wholly inside the chunk, in order."""
    found = []
    for n, record in enumerate(records):
        for i, ref in enumerate(record.evidence):
            if def_within(index, chunk, ref):
                continue
            p = def_positions(index, ref)
            if ref.source_id != index.source_id:
                code = "foreign_source"
            elif p is None:
                code = "unresolved_unit"
            elif p[0] > p[1]:
                code = "reversed_range"
            else:
                code = "span_outside_chunk"
            found.append((code, f"items[{n}].evidence[{i}]"))
    return found


@settings(max_examples=300, deadline=None)
@given(st.data(), documents(), st.booleans())
def test_source_reference_issues_equal_their_definition(data, doc, has_chunk):
    """The shared validator of the extraction families: every range that fails, once, with the
    code its case calls for; a record is named only when one of its ranges fails, and once."""
    from domain.families.base import EvaluationContext
    from domain.families.common import source_reference_issues

    ids, index, chunk = doc
    transcript = SimpleNamespace(source_id="s", index=index)
    ctx = EvaluationContext(transcript, chunk if has_chunk else None)
    any_ref = st.one_of(refs_as_met(index), refs_near(index, chunk))
    records = [SimpleNamespace(name=f"r{n}", evidence=tuple(data.draw(st.lists(any_ref, max_size=4))))
               for n in range(data.draw(st.integers(min_value=0, max_value=5)))]
    asked = []

    def subject_of(record):
        asked.append(record.name)
        return f"The record {record.name}"

    issues = source_reference_issues("x.source_reference", ctx, records, subject_of, "items")
    assert [(i.reason_code, i.location) for i in issues] == def_reference_codes(index, ctx.chunk, records)
    assert all((i.correction is None) == (i.reason_code == "foreign_source") for i in issues)
    named = [r.name for r in records if any(not def_within(index, ctx.chunk, ref) and ref.source_id == "s"
                                            for ref in r.evidence)]
    assert asked == named


def test_a_range_of_another_source_is_an_operator_finding_not_a_crash():
    """Its unit ids may well exist in this transcript (before, the gap branch then failed on an
    empty gap); the producer never writes a source id, so no correction is addressed to it."""
    from domain.families.base import EvaluationContext
    from domain.families.common import source_reference_issues

    record = SimpleNamespace(evidence=(SourceRef("other", 3, 7),))
    (issue,) = source_reference_issues("x.source_reference", EvaluationContext(T, T.chunk("x-1")), [record],
                                       lambda r: "The record", "items")
    assert (issue.reason_code, issue.location, issue.correction) == ("foreign_source", "items[0].evidence[0]", None)


# --- naming a record lazily: the one gate of every record validator ----------------------------------

def test_a_record_is_named_once_on_its_first_issue_and_never_without_one():
    from domain.families.common import RecordIssues

    calls = []

    def subject_of(record):
        calls.append(("subject", record.name))
        return f"The record {record.name}"

    def ranges_of(record, known):
        calls.append(("ranges", record.name))
        return "units 1–2"

    out = RecordIssues("x.shape", "items", subject_of, IX, ranges_of)
    fine, broken = SimpleNamespace(name="a"), SimpleNamespace(name="b")
    out.add_for(1, broken, "one", ".name", "first", "Problem one.", "Fix one.")
    out.add_for(1, broken, "two", ".kind", "second", "Problem two.", "Fix two.")
    assert fine.name not in {name for _, name in calls}
    assert calls == [("subject", "b"), ("ranges", "b")]
    assert [(i.validator, i.reason_code, i.location, i.correction.subject, i.correction.cited)
            for i in out.issues()] == [("x.shape", "one", "items[1].name", "The record b", "units 1–2"),
                                      ("x.shape", "two", "items[1].kind", "The record b", "units 1–2")]
