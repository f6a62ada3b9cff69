"""transforms.json_keys.key_of, the read step's fast key, against a full orjson parse.

The promise: where key_of gives a key, orjson gives the same one, except for a line
holding a number beyond a double's range (which orjson refuses and the per-key step
dead-letters); where key_of gives None, the read step parses in full, so nothing is lost.
"""

import json

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transforms.json_keys import key_of, trusted_key

FIELD = "source_id"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)
# Raw JSON text and bytes a parser refuses or reads in surprising ways.
FRAGMENTS = [b"1e999", b"-1e999", b"9" * 400, b"1.8e308", b"NaN", b"Infinity", b"01", b"1.", b".5", b"-", b"tru",
             b'"\xff"', b'"\xed\xa0\x80"', b'"\xc0\x80"', b'"\\ud800"', b'"\\udc00"', b'"\\ud800\\u0041"', b'"\\x"',
             b'"\t"', b'"\x00"', b"[1,]", b"{,}", b'{"k"}', b"{1:2}", b"[" * 1030 + b"]" * 1030, b"[" * 900 + b"]" * 900,
             b'"\\u00e9\\ud83d\\ude00"', b'"\xc3\xa9"', b"\xef\xbb\xbf", b" ", b",", b"}", b'"', b"\\", b'"source_id"',
             b'"source\\u005fid"', b"null", b'""', b'"a"']


def orjson_key(line: bytes) -> tuple[str, object]:
    """What the full parse makes of a line: ("key", k) or ("no key", reason) or ("refused", message)."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return "refused", str(exc)
    if not isinstance(record, dict):
        return "no key", "not an object"
    value = record.get(FIELD)
    return ("key", value) if isinstance(value, str) else ("no key", repr(value))


def assert_agrees(line: bytes) -> None:
    key = key_of(line, FIELD)
    if key is None:
        return  # the caller parses in full: whatever orjson says is what happens
    verdict, detail = orjson_key(line)
    if verdict == "refused":  # the one documented difference: a number orjson reads as infinity
        assert detail.startswith("number is infinity when parsed as double"), (line[:200], detail)
    else:
        assert (verdict, detail) == ("key", key), line[:200]


def spellings(record: dict) -> st.SearchStrategy[bytes]:
    """The same record as different writers would write it."""
    return st.sampled_from([
        orjson.dumps(record),
        json.dumps(record).encode(),
        json.dumps(record, ensure_ascii=False).encode(),
        json.dumps(record, indent=1).replace("\n", " ").encode(),
        json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode(),
    ])


records = st.dictionaries(st.text(max_size=8) | st.just(FIELD), json_values, max_size=5)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_a_well_formed_record_gets_the_key_a_full_parse_gives(data):
    record = data.draw(records)
    if data.draw(st.booleans()):
        record[FIELD] = data.draw(st.text(max_size=20) | json_values)
    line = data.draw(spellings(record))
    assert_agrees(line)
    verdict, detail = orjson_key(line)
    if verdict == "key":  # and it is not left to the slow path: the fast path is the path
        assert key_of(line, FIELD) == detail


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_a_damaged_record_never_gets_a_key_the_full_parse_would_not_give(data):
    record = data.draw(records)
    record[FIELD] = data.draw(st.text(max_size=10))
    line = orjson.dumps(record)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(line)))
        cut = data.draw(st.integers(0, 3))
        fragment = data.draw(st.sampled_from(FRAGMENTS) | st.binary(max_size=4))
        line = line[:at] + fragment + line[at + cut:]
    assert_agrees(line)


@pytest.mark.parametrize("extra", [b'"\xff"', b'"\xed\xa0\x80"', b'"\xc0\x80"', b'"\xf4\x90\x80\x80"'])
def test_a_skipped_value_that_is_not_utf8_sends_the_line_to_the_full_parse(extra):
    line = b'{"source_id": "s1", "x": ' + extra + b"}"
    assert key_of(line, FIELD) is None
    assert orjson_key(line)[0] == "refused"


def test_the_last_of_a_repeated_key_wins_as_in_a_full_parse():
    for line in (b'{"source_id": "a", "source_id": "b"}', b'{"source_id": "a", "source\\u005fid": "b"}',
                 b'{"source\\u005fid": "a", "source_id": "b"}'):
        assert key_of(line, FIELD) == orjson_key(line)[1] == "b"
    assert key_of(b'{"source_id": "a", "source_id": 1}', FIELD) is None


def test_a_number_beyond_double_range_is_keyed_and_left_to_the_per_key_step():
    line = b'{"source_id": "s1", "x": 1e999}'
    assert key_of(line, FIELD) == "s1"
    assert orjson_key(line)[0] == "refused"


def test_nesting_past_the_limit_is_not_an_error_here():
    line = b'{"source_id": "s1", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert key_of(line, FIELD) is None


def test_any_field_name_works():
    assert key_of(b'{"key with spaces": "k", "class": 1}', "key with spaces") == "k"
    assert key_of(b'{"class": "k"}', "class") == "k"


def test_a_trusted_key_falls_back_to_the_full_parse():
    line = b'{"source_id": "a", "source_id": 1, "source_id": "b"}'  # msgspec stops at the int; orjson keeps the last
    assert key_of(line, FIELD) is None
    assert trusted_key(line, FIELD) == "b"
    assert trusted_key(b'{"source_id": "s", "x": [1]}', FIELD) == "s"
