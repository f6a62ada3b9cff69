"""parse_transcript's typed fast path (msgspec) against the general path (orjson to plain
values, then transcript_from_record): for every line, the same transcript or the same error.

The lines are written byte by byte, so they can hold what a JSON library would never write:
duplicate and escaped keys, extra fields with values orjson rejects (1e999, invalid UTF-8,
lone surrogate escapes), ints as bools, floats or beyond 64 bits, a BOM, cut-off lines.
"""

import orjson
import pytest
from hypothesis import example, given, settings
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
    return repr(("transcript", t.source_id, t.unit_columns, t.units, chunks, index))


def assert_same_outcome(raw: bytes) -> None:
    assert outcome(parse_transcript, raw) == outcome(_parse_via_record, raw)


# Raw JSON values. Each of these makes orjson reject the whole line, wherever it is.
ORJSON_REJECTS = [b"1e999", b"-1e999", b'"\xff"', b'"a\xed\xa0\x80"', b'"\xc0\x80"', b'"\\ud800"', b'"\\udc00x"',
                  b'[1, 1e999]', b'{"k": "\\ud800"}', b'{"\xfe": 1}', b"NaN", b"01"]
WRONG_TYPES = [b"null", b"1", b"-3", b'"x"', b'""', b"[]", b"{}", b"true", b"false", b"1.5", b"[1, 2]",
               b'{"unit_id": 1}', b'[{"unit_id": 1, "speaker": "A", "text": "x"}]']
# Ints the way a record should not hold them: bools, floats, out of range, beyond 64 bits.
ODD_INTS = [b"true", b"false", b"1.0", b"2e0", b"1E1", b"-0", b"0", b"-1", b"0.5",
            *(str(n).encode() for n in (MAX_UNIT_ID, MAX_UNIT_ID + 1, 2**64 - 1, 2**64, 2**70, -(2**63) - 1, -(2**64)))]
# Strings JSON allows, written as no library writes them; strings it does not allow.
ODD_STRINGS = [b'" "', b'""', b'"*"', b'"\\u0041\\/\\u00e9"', b'"\\ud83d\\ude00"', b'"tab\\there"', b'"a\x7fb"',
               '"é😀"'.encode()]
BAD_STRINGS = [b'"a\tb"', b'"a\x01b"', *ORJSON_REJECTS[2:7]]
EXTRA_KEYS = ["extra", "Unit_id", "unit_ids ", "", "\x00", "chunks"]

odd_values = st.one_of(st.sampled_from(WRONG_TYPES), st.sampled_from(ODD_INTS), st.sampled_from(ORJSON_REJECTS))
texts = st.one_of(st.text(max_size=4).map(orjson.dumps), st.sampled_from(ODD_STRINGS))
bad_texts = st.one_of(texts, st.sampled_from(BAD_STRINGS))
small_ids = st.integers(1, 30)
unit_ids = st.lists(st.one_of(small_ids, small_ids, st.integers(1, MAX_UNIT_ID)), min_size=1, max_size=8, unique=True)


def defect(draw, odds: int) -> bool:
    """True once in ``odds`` draws; never when ``odds`` is 0 (a well-formed line)."""
    return odds > 0 and draw(st.integers(0, odds - 1)) == 0


def json_string(text: str, escape_first: bool = False) -> bytes:
    if escape_first and text:  # "\u0075nit_id": the same key, written differently
        return b'"\\u%04x' % ord(text[0]) + orjson.dumps(text[1:])[1:]
    return orjson.dumps(text)


def json_array(items: list[bytes]) -> bytes:
    return b"[" + b",".join(items) + b"]"


@st.composite
def json_object(draw, fields: list[tuple[str, bytes]], odds: int) -> bytes:
    """The object of ``fields`` (name, raw value) with, once in ``odds``, each of: a value of the
    wrong type, a missing field, an extra field, a key given twice (the last one counts), an
    escaped key."""
    fields = list(fields)
    for i, (name, _) in enumerate(fields):
        if defect(draw, odds):
            fields[i] = (name, draw(odd_values))
    if fields and defect(draw, odds):
        del fields[draw(st.integers(0, len(fields) - 1))]
    if defect(draw, odds):
        extra = (draw(st.sampled_from(EXTRA_KEYS)), draw(st.one_of(odd_values, texts)))
        fields.insert(draw(st.integers(0, len(fields))), extra)
    if fields and defect(draw, odds):  # an earlier value of a key, overridden or not
        name, value = fields[draw(st.integers(0, len(fields) - 1))]
        fields.insert(draw(st.integers(0, len(fields))), (name, draw(st.one_of(st.just(value), odd_values))))
    escaped = [defect(draw, odds) for _ in fields]
    separator = draw(st.sampled_from([b",", b", ", b" ,\n\t"]))
    return b"{" + separator.join(json_string(name, esc) + b":" + value
                                 for (name, value), esc in zip(fields, escaped)) + b"}"


@st.composite
def member_list(draw, ids: list[int], odds: int) -> bytes:
    """A chunk's unit list: mostly a run of units in document order, else a set of them in any
    order; once in ``odds``, an unknown or odd id, a unit twice, or no units."""
    if draw(st.booleans()):
        start = draw(st.integers(0, len(ids) - 1))
        members = ids[start:draw(st.integers(start + 1, len(ids)))]
    else:
        members = draw(st.lists(st.sampled_from(ids), min_size=1, max_size=len(ids), unique=True))
    raw = [str(uid).encode() for uid in members]
    if defect(draw, odds):
        raw.insert(draw(st.integers(0, len(raw))), draw(st.sampled_from([*ODD_INTS, b"999", b'"3"', b"null"])))
    if defect(draw, odds):
        raw.insert(draw(st.integers(0, len(raw))), draw(st.sampled_from(raw)))
    if defect(draw, odds):
        raw = []
    return json_array(raw)


@st.composite
def transcript_object(draw, odds: int = 0) -> bytes:
    """A transcript record; well formed when ``odds`` is 0, else with defects once in ``odds``
    at each place one can be."""
    ids = draw(unit_ids)
    id_values = [str(uid).encode() for uid in ids]
    if defect(draw, odds):  # an odd id or a duplicate one
        id_values[draw(st.integers(0, len(ids) - 1))] = draw(st.sampled_from([*ODD_INTS, *id_values]))
    text = bad_texts if defect(draw, odds) else texts
    units = [draw(json_object([("unit_id", uid), ("speaker", draw(text)), ("text", draw(text))], odds))
             for uid in id_values]
    if defect(draw, odds):
        units = draw(st.sampled_from([[], [b"1"], [b"null"], [*units, b'"u"']]))
    chunks = []
    for n in range(draw(st.integers(0, 4))):
        chunk_id = orjson.dumps(f"c-{n}")
        if defect(draw, odds):  # reserved, blank, repeated
            chunk_id = draw(st.sampled_from([b'"*"', b'""', b'" \\t"', b'"c-0"', b'"c-1"']))
        kind = draw(st.sampled_from([b'"extraction"', b'"scene"']))
        if defect(draw, odds):
            kind = draw(st.sampled_from([b'"other"', b'"Scene"', b'"scene "']))
        members = draw(member_list(ids, odds))
        chunks.append(draw(json_object([("chunk_id", chunk_id), ("kind", kind), ("unit_ids", members)], odds)))
    source_id = draw(bad_texts) if defect(draw, odds) else b'"crd3:C1E001"'
    return draw(json_object(
        [("source_id", source_id), ("units", json_array(units)), ("chunks", json_array(chunks))], odds))


@st.composite
def transcript_line(draw) -> bytes:
    """A transcript line: a record well formed or with defects, once in a while with defects
    around it (BOM, whitespace JSON allows or not, trailing content) or cut short; or no object."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.sampled_from([b"[]", b"null", b'"x"', b"1", b'[{"source_id": "s"}]', b"", b" "]))
    odds = draw(st.sampled_from([0, 8, 20, 40, 80, 200, 400]))
    line = draw(transcript_object(odds))
    if defect(draw, odds // 4):
        line = b"\xef\xbb\xbf" + line
    if defect(draw, odds // 4):
        line = draw(st.sampled_from([b" ", b"\t\r\n", b"\x0c", b"\xc2\xa0"])) + line
    if defect(draw, odds // 4):
        line += draw(st.sampled_from([b" \n", b"\r\n\t", b"x", b"\x00", b"{}", b",", b"\x0b"]))
    if defect(draw, odds // 4):
        line = line[:draw(st.integers(0, len(line) - 1))]
    return line


@settings(max_examples=1500, deadline=None)
@given(transcript_line())
def test_the_fast_path_gives_what_the_general_path_gives(line):
    assert_same_outcome(line)


@settings(max_examples=200, deadline=None)
@given(transcript_object())
def test_well_formed_records_take_the_fast_path(line):
    """(Else the comparison above would hold with the fast path switched off.)"""
    assert _well_formed_transcript(line) is not None
    assert_same_outcome(line)


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
    *(line_with(unit_id=value) for value in ODD_INTS),
    *(line_with(members=b"[3, " + value + b"]") for value in ODD_INTS),
    line_with(unit_id=b"3"),  # a duplicate unit id
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
