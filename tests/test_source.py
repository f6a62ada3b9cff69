import dataclasses
import pickle

import orjson
import pytest

from domain.frozen import quick_init
from domain.source import TranscriptError, parse_transcript, transcript_from_record


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


def test_units_are_built_on_first_use_in_document_order():
    t = transcript_from_record(record())
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
    from domain.source import _checked_unit_columns, _well_formed_unit_columns

    assert _well_formed_unit_columns(units) is None
    with pytest.raises(TranscriptError):
        _checked_unit_columns(units, "transcript 's1'")


@pytest.mark.parametrize("members", [[10, True], [10, 3.0], [10, 10], [10, 99], [10, "3"]])
def test_a_chunk_the_fast_path_declines_is_rejected_by_the_checks(members):
    with pytest.raises(TranscriptError):
        transcript_from_record(record(chunks=[{"chunk_id": "x-1", "kind": "extraction", "unit_ids": members}]))


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
