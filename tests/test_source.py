import dataclasses
import pickle

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from domain.frozen import quick_init
from domain.source import MAX_UNIT_ID, TranscriptError, parse_transcript, transcript_from_record


def record(**overrides):
    base = {
        "source_id": "s1",
        "units": [{"unit_id": u, "speaker": "MATT", "text": f"t{u}"} for u in (10, 3, 7)],
        "chunks": [{"chunk_id": "x-1", "kind": "extraction", "unit_ids": [10, 3, 7]}],
    }
    base.update(overrides)
    return base


def test_document_index_follows_unit_order_not_ids():
    t = transcript_from_record(record())
    assert [t.index.position(u) for u in (10, 3, 7)] == [0, 1, 2]
    assert t.index.position(99) is None
    assert t.index.position(True) is None  # a bool is never a unit id
    assert t.chunk("x-1").sorted_positions == (0, 1, 2)


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        ({"units": [{"unit_id": 1, "speaker": "A", "text": ""}, {"unit_id": 1, "speaker": "B", "text": ""}]}, "duplicate unit_id 1"),
        ({"units": [{"unit_id": 0, "speaker": "A", "text": ""}]}, "non-positive unit_id 0"),
        ({"units": [{"unit_id": -4, "speaker": "A", "text": ""}]}, "non-positive unit_id -4"),
        ({"units": [{"unit_id": 2**63, "speaker": "A", "text": ""}]}, "above the 64-bit limit"),
        ({"units": [{"unit_id": "1", "speaker": "A", "text": ""}]}, "'unit_id' of type str"),
        ({"units": [{"unit_id": True, "speaker": "A", "text": ""}]}, "'unit_id' of type bool"),
        ({"units": [{"unit_id": 1, "text": ""}]}, "missing the field 'speaker'"),
        ({"chunks": [{"chunk_id": "x-1", "kind": "extraction", "unit_ids": [10, 99]}]}, "unknown unit 99"),
        ({"chunks": [{"chunk_id": "x-1", "kind": "weird", "unit_ids": [10]}]}, "kind 'weird'"),
        ({"chunks": [{"chunk_id": "*", "kind": "extraction", "unit_ids": [10]}]}, "reserved or blank chunk_id"),
        ({"units": []}, "has no units"),
        ({"source_id": 5}, "'source_id' of type int"),
    ],
)
def test_malformed_transcripts_raise_one_clear_error(overrides, fragment):
    with pytest.raises(TranscriptError) as info:
        transcript_from_record(record(**overrides))
    assert fragment in str(info.value)


def test_missing_top_level_field_and_invalid_json():
    rec = record()
    del rec["chunks"]
    with pytest.raises(TranscriptError, match="missing the field 'chunks'"):
        transcript_from_record(rec)
    with pytest.raises(TranscriptError, match="not valid JSON"):
        parse_transcript(b'{"source_id": "s1", "units": [')
    with pytest.raises(TranscriptError, match="expected an object"):
        parse_transcript(b"[1, 2]")


def test_values_are_frozen():
    t = parse_transcript(orjson.dumps(record()))
    with pytest.raises(AttributeError):
        t.units[0].unit_id = 5


@pytest.mark.parametrize("parse", [transcript_from_record, lambda r: parse_transcript(orjson.dumps(r))],
                         ids=["record path", "typed path"])
def test_units_are_built_on_first_use_in_document_order(parse):
    t = parse(record())
    assert t._units is None  # neither path builds them for the per-source step, which never reads them
    assert [(u.unit_id, u.speaker, u.text) for u in t.units] == [(10, "MATT", "t10"), (3, "MATT", "t3"), (7, "MATT", "t7")]
    assert t.units is t.units  # built once
    assert t.unit(3).text == "t3" and t.unit(99) is None
    assert t == transcript_from_record(record())
    assert t != transcript_from_record(record(units=[{"unit_id": u, "speaker": "SAM", "text": f"t{u}"} for u in (10, 3, 7)]))


@pytest.mark.parametrize("units", [
    [{"unit_id": 1, "speaker": "A", "text": "x"}, {"unit_id": True, "speaker": "A", "text": "x"}],
    [{"unit_id": 1, "speaker": "A", "text": "x"}, {"unit_id": 2.0, "speaker": "A", "text": "x"}],
    [{"unit_id": 1, "speaker": "A", "text": "x"}, ["unit_id", 2]],
    [{"unit_id": 1, "speaker": "A", "text": "x"}, {"unit_id": 2, "speaker": None, "text": "x"}],
    [{"unit_id": 1, "speaker": "A", "text": "x"}, {"unit_id": 1, "speaker": "A", "text": "x"}],
])
def test_the_column_fast_path_declines_what_the_unit_checks_reject(units):
    from domain.source import _checked_units, _well_formed_units

    assert _well_formed_units(units) is None
    with pytest.raises(TranscriptError):
        _checked_units(units, "transcript 's1'")


# Units: well-formed ones, with now and then a defect the checks reject (or an extra key they allow).
_unit_ids = st.integers(1, 12)
_bad_unit_ids = st.sampled_from([0, -1, MAX_UNIT_ID + 1, True, 2.0, "2", None])
_bad_texts = st.one_of(st.integers(0, 2), st.booleans(), st.none(), st.lists(st.text(max_size=1), max_size=1))
_good_unit = st.fixed_dictionaries({"unit_id": _unit_ids, "speaker": st.text(max_size=3), "text": st.text(max_size=3)},
                                   optional={"extra": st.integers()})
_bad_id_unit = st.fixed_dictionaries({"unit_id": _bad_unit_ids, "speaker": st.just("A"), "text": st.just("x")})
_bad_unit = st.one_of(
    _bad_id_unit, _bad_id_unit, _bad_id_unit,
    st.fixed_dictionaries({"unit_id": _unit_ids, "speaker": _bad_texts, "text": st.just("x")}),
    st.fixed_dictionaries({"unit_id": _unit_ids, "speaker": st.just("A"), "text": _bad_texts}),
    st.fixed_dictionaries({}, optional={"unit_id": _unit_ids, "speaker": st.just("A"), "text": st.just("x")}),
    st.just({"unit_id": MAX_UNIT_ID, "speaker": "A", "text": "x"}),
    st.integers(), st.text(max_size=2), st.none(), st.lists(st.integers(), max_size=2),
)


@st.composite
def _units(draw):
    """A list of well-formed units (ids drawn from a small range, so duplicates are common)
    with, in most lists, one defective unit at a drawn place."""
    units = draw(st.lists(_good_unit, max_size=6))
    if draw(st.integers(0, 3)):
        units.insert(draw(st.integers(0, len(units))), draw(_bad_unit))
    return units


@settings(max_examples=600, deadline=None)
@given(_units())
@example([{"unit_id": 2, "speaker": "A", "text": "x"}, {"unit_id": True, "speaker": "A", "text": "x"}])
@example([{"unit_id": 2.0, "speaker": "A", "text": "x"}])
@example([{"unit_id": MAX_UNIT_ID + 1, "speaker": "A", "text": "x"}])
@example([{"unit_id": 3, "speaker": "A", "text": "x"}, {"unit_id": 3, "speaker": "B", "text": "y"}])
@example([{"unit_id": 3, "speaker": "A", "text": "x", "extra": 1}, {"unit_id": 4, "speaker": "A", "text": 5}])
@example([{"unit_id": 3, "speaker": "A", "text": "x"}, ["unit_id", "speaker"]])
def test_the_column_fast_path_agrees_with_the_unit_checks(units):
    """What the fast path accepts, the checks accept with the same columns; every list the
    checks accept but the fast path declines is empty (all else goes through it)."""
    from domain.source import _checked_units, _well_formed_units

    fast = _well_formed_units(units)
    try:
        checked = _checked_units(units, "transcript 's1'")
    except TranscriptError:
        assert fast is None
        return
    assert fast == checked or (fast is None and not units)
    if fast is not None:
        types = [[type(value) for column in columns[:3] for value in column] for columns in (fast, checked)]
        assert types[0] == types[1]


@pytest.mark.parametrize("members", [[10, True], [10, 3.0], [10, 10], [10, 99], [10, "3"]])
def test_a_chunk_the_fast_path_declines_is_rejected_by_the_checks(members):
    with pytest.raises(TranscriptError):
        transcript_from_record(record(chunks=[{"chunk_id": "x-1", "kind": "extraction", "unit_ids": members}]))


_member_ids = st.one_of(st.sampled_from([10, 3, 7, 5, 8]), st.sampled_from([10, 3, 7, 5, 8]), st.integers(-1, 12),
                        st.sampled_from([True, 3.0, 7.0, "3", None]))


@settings(max_examples=600, deadline=None)
@given(st.lists(_member_ids, max_size=6), st.permutations([10, 3, 7, 5, 8, 1]))
@example([3.0, 7], [3, 7, 5, 8, 10, 1])
@example([1, True], [1, 3, 7, 5, 8, 10])
@example([7, 3], [3, 7, 5, 8, 10, 1])
@example([3, 7, 7], [3, 7, 5, 8, 10, 1])
def test_the_chunk_fast_path_agrees_with_the_chunk_checks(members, order):
    """What the chunk fast path accepts (a run in document order or any other member set),
    the checks accept as the same chunk, sorted positions included; what it declines, they reject."""
    from domain.source import DocumentIndex, _checked_chunk, _well_formed_chunk_record

    index = DocumentIndex.of("s1", order)
    raw = {"chunk_id": "x-1", "kind": "extraction", "unit_ids": members}
    fast = _well_formed_chunk_record(raw, index, tuple(range(len(order))), {})
    try:
        checked = _checked_chunk(raw, 1, index, {}, "transcript 's1'")
    except TranscriptError:
        assert fast is None
        return
    assert fast is not None
    assert (fast, fast.sorted_positions) == (checked, checked.sorted_positions)
    assert fast.sorted_positions == tuple(sorted(index.position(u) for u in fast.unit_ids))


@quick_init
@dataclasses.dataclass(frozen=True, slots=True)
class Point:
    x: int
    y: int = 2
    tags: tuple = dataclasses.field(default_factory=tuple)


def test_quick_init_keeps_every_dataclass_behaviour():
    p = Point(1)
    assert (p.x, p.y, p.tags) == (1, 2, ()) and p == Point(1, 2, ()) and hash(p) == hash(Point(1))
    assert Point(1, tags=(3,)).tags == (3,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 5
    assert pickle.loads(pickle.dumps(p)) == p and dataclasses.replace(p, y=7) == Point(1, 7)
    with pytest.raises(TypeError):
        Point()
