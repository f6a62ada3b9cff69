"""parse_transcript's typed fast path (msgspec) against the general path (orjson to plain
values, then transcript_from_record): for every line, the same transcript or the same error.

The lines are written byte by byte, so they can hold what a JSON library would never write:
duplicate and escaped keys, extra fields with values orjson rejects (1e999, invalid UTF-8,
lone surrogate escapes), ints as bools, floats or beyond 64 bits, a BOM, cut-off lines.
"""

from unittest import mock

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.source import MAX_UNIT_ID, TranscriptError, _parse_via_record, _well_formed_transcript, parse_transcript


def outcome(parse, raw: bytes) -> str:
    """Everything a parse gives, as text: the transcript's values with their types (1 and 1.0
    differ), chunk order and sorted positions included; or the error's type and message."""
    try:
        t = parse(raw)
    except TranscriptError as exc:
        return repr(("error", type(exc), str(exc)))
    chunks = [(key, c.chunk_id, c.kind, c.unit_ids, c.sorted_positions) for key, c in t.chunks.items()]
    index = (t.index.source_id, sorted(t.index.positions.items()), t.index.unit_ids_in_order)
    return repr(("transcript", t.source_id, t.units, chunks, index))


def assert_same_outcome(raw: bytes) -> None:
    assert outcome(parse_transcript, raw) == outcome(_parse_via_record, raw)


# Raw JSON values. Each of these makes orjson reject the whole line, wherever it is; msgspec
# skips most of them without a word when they are the value of a field it does not know.
ORJSON_REJECTS = [b"1e999", b"-1e999", b'"\xff"', b'"a\xed\xa0\x80"', b'"\xc0\x80"', b'"\\ud800"', b'"\\udc00x"',
                  b'[1, 1e999]', b'{"k": "\\ud800"}', b'{"\xfe": 1}', b"NaN", b"01", b"9" * 400]
WRONG_TYPES = [b"null", b"1", b"-3", b'"x"', b'""', b"[]", b"{}", b"true", b"false", b"1.5", b"[1, 2]",
               b'{"unit_id": 1}', b'[{"unit_id": 1, "speaker": "A", "text": "x"}]']
# Ints the way a record should not hold them: out of range (beyond 64 bits, orjson gives a float), bools, floats.
OUT_OF_RANGE_IDS = [*(str(n).encode() for n in (MAX_UNIT_ID + 1, 2**64 - 1, 2**64, 2**70, -(2**63) - 1, -(2**64))),
                    b"0", b"-0", b"-1"]
ODD_INTS = [*OUT_OF_RANGE_IDS, str(MAX_UNIT_ID).encode(), b"true", b"false", b"1.0", b"2e0", b"1E1", b"0.5"]
# Strings JSON allows, written as no library writes them; strings it does not allow.
ODD_STRINGS = [b'" "', b'""', b'"*"', b'"\\u0041\\/\\u00e9"', b'"\\ud83d\\ude00"', b'"tab\\there"', b'"a\x7fb"',
               '"é😀"'.encode()]
BAD_STRINGS = [b'"a\tb"', b'"a\x01b"', *ORJSON_REJECTS[2:7]]
EXTRA_KEYS = ["extra", "Unit_id", "unit_ids ", "", "\x00", "chunks"]

odd_values = st.one_of(st.sampled_from(WRONG_TYPES), st.sampled_from(ODD_INTS), st.sampled_from(ORJSON_REJECTS))
texts = st.one_of(st.text(max_size=4).map(orjson.dumps), st.sampled_from(ODD_STRINGS))
small_ids = st.integers(1, 30)
unit_ids = st.lists(st.one_of(small_ids, small_ids, st.integers(1, MAX_UNIT_ID)), min_size=1, max_size=6, unique=True)


class Defects:
    """Where a line's defects go: the places (numbered in the order the line is written) whose
    numbers were drawn. One or two defects in an otherwise well-formed line are what tell the
    two paths apart; no numbers drawn, a well-formed line. With ``only``, only the places of
    that kind are counted and can get one."""

    def __init__(self, places: set[int], only: str | None = None):
        self.places, self.only, self.seen = places, only, -1

    def here(self, kind: str | None = None) -> bool:
        if self.only is not None and kind != self.only:
            return False
        self.seen += 1
        return self.seen in self.places


def json_string(text: str, escape_first: bool = False) -> bytes:
    if escape_first and text:  # "\u0075nit_id": the same key, written differently
        return b'"\\u%04x' % ord(text[0]) + orjson.dumps(text[1:])[1:]
    return orjson.dumps(text)


def json_array(items: list[bytes]) -> bytes:
    return b"[" + b",".join(items) + b"]"


@st.composite
def json_object(draw, fields: list[tuple[str, bytes]], defects: Defects) -> bytes:
    """The object of ``fields`` (name, raw value); the defects that can go here: a value of the
    wrong type, a missing field, an extra field, a key given twice (the last one counts), an
    escaped key."""
    fields = list(fields)
    for i, (name, _) in enumerate(fields):
        if defects.here():
            fields[i] = (name, draw(odd_values))
    if defects.here():
        del fields[draw(st.integers(0, len(fields) - 1))]
    if defects.here("extra field"):
        value = draw(st.one_of(st.sampled_from(ORJSON_REJECTS), st.sampled_from(ORJSON_REJECTS), odd_values, texts))
        extra = (draw(st.sampled_from(EXTRA_KEYS)), value)
        fields.insert(draw(st.integers(0, len(fields))), extra)
    if defects.here():  # an earlier value of a key, overridden
        at = draw(st.integers(0, len(fields) - 1))
        fields.insert(draw(st.integers(0, at)), (fields[at][0], draw(st.one_of(st.just(fields[at][1]), odd_values))))
    if defects.here():  # a later value of a key, overriding
        at = draw(st.integers(0, len(fields) - 1))
        fields.insert(draw(st.integers(at + 1, len(fields))), (fields[at][0], draw(odd_values)))
    escaped = [defects.here() for _ in fields]
    separator = draw(st.sampled_from([b",", b", ", b" ,\n\t"]))
    return b"{" + separator.join(json_string(name, esc) + b":" + value
                                 for (name, value), esc in zip(fields, escaped)) + b"}"


@st.composite
def member_list(draw, id_values: list[bytes], defects: Defects) -> bytes:
    """A chunk's unit list: a run of units in document order, or a set of them in any order;
    the defects that can go here: an unknown or odd id, a unit twice, no units."""
    if draw(st.booleans()):
        start = draw(st.integers(0, len(id_values) - 1))
        members = id_values[start:draw(st.integers(start + 1, len(id_values)))]
    else:
        members = draw(st.lists(st.sampled_from(id_values), min_size=1, max_size=len(id_values), unique=True))
    if defects.here():
        members.insert(draw(st.integers(0, len(members))), draw(st.sampled_from([*ODD_INTS, b"999", b'"3"', b"null"])))
    if defects.here():
        members.insert(draw(st.integers(0, len(members))), draw(st.sampled_from(members)))
    if defects.here():
        members = []
    return json_array(members)


@st.composite
def transcript_object(draw, ids: list[int], chunk_count: int, defects: Defects) -> bytes:
    """A transcript record of units ``ids`` and ``chunk_count`` chunks, with ``defects``."""
    id_values = [str(uid).encode() for uid in ids]
    if defects.here():  # an odd id (chunks may name it)
        id_values[draw(st.integers(0, len(ids) - 1))] = draw(st.sampled_from(ODD_INTS))
    if defects.here():  # an id out of range, as an int (chunks may name it)
        id_values[draw(st.integers(0, len(ids) - 1))] = draw(st.sampled_from(OUT_OF_RANGE_IDS))
    if defects.here():  # a duplicate id
        id_values[draw(st.integers(0, len(ids) - 1))] = draw(st.sampled_from(id_values))
    units = []
    for uid in id_values:
        speaker, text = draw(texts), draw(texts)
        if defects.here():
            speaker = draw(st.sampled_from(BAD_STRINGS))
        if defects.here():
            text = draw(st.sampled_from(BAD_STRINGS))
        units.append(draw(json_object([("unit_id", uid), ("speaker", speaker), ("text", text)], defects)))
    if defects.here():
        units = draw(st.sampled_from([[], [b"1"], [b"null"], [*units, b'"u"'], [b'"u"', *units]]))
    chunks = []
    for n in range(chunk_count):
        chunk_id = orjson.dumps(f"c-{n}")
        if defects.here():
            chunk_id = draw(st.sampled_from([b'"*"', b'""', b'" \\t"']))  # reserved, blank
        if n and defects.here():
            chunk_id = orjson.dumps(f"c-{draw(st.integers(0, n - 1))}")  # an earlier chunk's
        kind = draw(st.sampled_from([b'"extraction"', b'"scene"']))
        if defects.here():
            kind = draw(st.sampled_from([b'"other"', b'"Scene"', b'"scene "']))
        members = draw(member_list(list(dict.fromkeys(id_values)), defects))
        chunks.append(draw(json_object([("chunk_id", chunk_id), ("kind", kind), ("unit_ids", members)], defects)))
    if defects.here():
        chunks.insert(draw(st.integers(0, len(chunks))), draw(st.sampled_from([b"1", b"null", b'"c"', b"[]"])))
    source_id = b'"crd3:C1E001"'
    if defects.here():
        source_id = draw(st.sampled_from([b'""', b'" "', b'"\\t\\n"', b'"\\u3000"']))  # blank
    if defects.here():
        source_id = draw(st.one_of(texts, st.sampled_from(BAD_STRINGS), odd_values))
    return draw(json_object(
        [("source_id", source_id), ("units", json_array(units)), ("chunks", json_array(chunks))], defects))


@st.composite
def transcript_line(draw, most_defects: int = 3) -> bytes:
    """A transcript line: a record with one to ``most_defects`` defects inside it, or around it
    (BOM, whitespace JSON allows or not, trailing content), or cut short; or no object at all.
    With ``most_defects`` 0, a well-formed line."""
    if most_defects and draw(st.integers(0, 19)) == 0:
        return draw(st.sampled_from([b"[]", b"null", b'"x"', b"1", b'[{"source_id": "s"}]', b"", b" "]))
    ids, chunk_count = draw(unit_ids), draw(st.integers(0, 3))
    places = 20 + 13 * len(ids) + 16 * chunk_count  # about as many as such a line has
    defects = Defects(draw(st.sets(st.integers(0, places), min_size=min(1, most_defects), max_size=most_defects)))
    line = draw(transcript_object(ids, chunk_count, defects))
    if defects.here():
        line = b"\xef\xbb\xbf" + line
    if defects.here():
        line = draw(st.sampled_from([b" ", b"\t\r\n", b"\x0c", b"\xc2\xa0"])) + line
    if defects.here():
        line += draw(st.sampled_from([b" \n", b"\r\n\t", b"x", b"\x00", b"{}", b",", b"\x0b"]))
    if defects.here():
        line = line[:draw(st.integers(0, len(line) - 1))]
    return line


@settings(max_examples=1500, deadline=None)
@given(transcript_line())
def test_the_fast_path_gives_what_the_general_path_gives(line):
    assert_same_outcome(line)


@settings(max_examples=200, deadline=None)
@given(transcript_line(most_defects=0))
def test_well_formed_records_take_the_fast_path(line):
    """(Else the comparison above would hold with the fast path switched off.)"""
    expected = outcome(_parse_via_record, line)
    with mock.patch("domain.source._parse_via_record", side_effect=AssertionError("the general path was taken")):
        assert outcome(parse_transcript, line) == expected


@settings(max_examples=300, deadline=None)
@given(unit_ids, st.integers(0, 3), st.data())
def test_an_extra_field_in_any_one_object_gives_the_same_outcome(ids, chunk_count, data):
    """msgspec would skip an unknown field's value unchecked, where orjson may reject the line."""
    one_object = Defects({data.draw(st.integers(0, len(ids) + chunk_count))}, only="extra field")
    assert_same_outcome(data.draw(transcript_object(ids, chunk_count, one_object)))


def line_with(unit_id=b"7", members=b"[3, 7]", unit_extra=b"", chunk_extra=b"", top_extra=b"", source_id=b'"s"'):
    return (b'{"source_id": ' + source_id + top_extra + b', "units": [{"unit_id": 3, "speaker": "A", "text": "x"}, '
            b'{"unit_id": ' + unit_id + b', "speaker": "B", "text": "y"' + unit_extra + b'}], '
            b'"chunks": [{"chunk_id": "x-1", "kind": "scene", "unit_ids": ' + members + chunk_extra + b'}, '
            b'{"chunk_id": "x-2", "kind": "extraction", "unit_ids": [3]}]}')


@pytest.mark.parametrize("line", [
    line_with(), line_with(members=b"[7, 3]"), line_with(members=b"[7]"),
    line_with(members=b"[3, 3]"), line_with(members=b"[3, 7, 3]"), line_with(members=b"[]"), line_with(members=b"[9]"),
    *(line_with(unit_extra=b', "extra": ' + value) for value in ORJSON_REJECTS),
    *(line_with(chunk_extra=b', "extra": ' + value) for value in ORJSON_REJECTS),
    *(line_with(top_extra=b', "extra": ' + value) for value in ORJSON_REJECTS),
    *(line_with(unit_id=value, members=b"[3]") for value in ODD_INTS),
    *(line_with(unit_id=value, members=b"[3, " + value + b"]") for value in ODD_INTS),
    *(line_with(members=b"[3, " + value + b"]") for value in ODD_INTS),
    line_with(unit_id=b"3"),  # a duplicate unit id
    # A repeated key whose first value orjson refuses (a number beyond a double) and msgspec reads as an int:
    *(line_with(unit_id=value + b', "unit_id": 7') for value in (b"9" * 400, b"-" + b"9" * 400)),
    line_with(members=b"[" + b"9" * 400 + b'], "unit_ids": [3, 7]'),
    line_with(members=b"[3, 7]", chunk_extra=b', "unit_ids": [3, 7, ' + b"9" * 400 + b'], "unit_ids": [3, 7]'),
    line_with(unit_extra=b', "unit_id": 8'), line_with(unit_extra=b', "\\u0075nit_id": 3'),
    line_with(unit_extra=b', "text": 5'), line_with(unit_extra=b', "t\\u0065xt": "\\ud800"'),
    line_with(chunk_extra=b', "chunk_id": "x-2"'), line_with(chunk_extra=b', "kind": "other"'),
    line_with(top_extra=b', "source_id": " "'), line_with(source_id=b'"s", "source_id": "t"'),
    line_with(source_id=b'"\\t"'), line_with(source_id=b"7"),
    b"\xef\xbb\xbf" + line_with(), line_with() + b"\n", line_with() + b"x", b"\x0c" + line_with(),
    line_with()[:-1], b"[]", b"", b"null",
])
def test_listed_lines_give_the_same_outcome_both_ways(line):
    assert_same_outcome(line)


def test_the_fast_path_keeps_a_chunk_listed_out_of_order_in_document_order():
    transcript = _well_formed_transcript(line_with(members=b"[7, 3]"))
    assert transcript is not None
    assert (transcript.chunk("x-1").unit_ids, transcript.chunk("x-1").sorted_positions) == ((3, 7), (0, 1))
