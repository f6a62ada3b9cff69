"""parse_candidate's typed path (msgspec) against the general path (orjson to plain values,
checked key by key): for every line, the same candidate or the same error.

Lines are written byte by byte, so they can hold what a JSON library would never write:
keys written twice, escaped keys, extra fields with values orjson rejects (1e999, invalid
UTF-8, lone surrogate escapes, ints beyond a double), ints as bools or floats, a BOM, cut-off
lines.
"""

from unittest import mock

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.intake import EnvelopeError, Producer, _parse_candidate_record, parse_candidate
from domain.revision import MAX_ATTEMPT_NUMBER
from test_source_fast_path import ORJSON_REJECTS  # raw values that make orjson reject a whole line

STRING_FIELDS = ("candidate_id", "family", "source_id", "chunk_id", "prompt_fingerprint", "schema_fingerprint",
                 "raw_response", "received_at")


def outcome(parse, line: bytes) -> str:
    """Everything a parse gives, as text: the candidate's values with their types, or the error."""
    try:
        c = parse(line)
    except EnvelopeError as exc:
        return repr(("error", str(exc)))
    return repr(("candidate", [(name, type(value), value) for name, value in vars_of(c)]))


def vars_of(candidate):
    return [(name, getattr(candidate, name)) for name in candidate.__struct_fields__]


def assert_same_outcome(line: bytes) -> None:
    assert outcome(parse_candidate, line) == outcome(_parse_candidate_record, line)


WRONG_TYPES = [b"null", b"1", b"-3", b"[]", b"{}", b"true", b"1.5", b'{"provider": "p"}']
ODD_STRINGS = [b'""', b'" "', b'"\\t"', b'"\\u0041\\/\\u00e9"', b'"\\ud83d\\ude00"', '"é 火"'.encode(), b'"a\tb"',
               b'"x\\"y"']
ODD_ATTEMPTS = [b"0", b"-1", b"-0", str(MAX_ATTEMPT_NUMBER).encode(), str(MAX_ATTEMPT_NUMBER + 1).encode(),
                str(2**64).encode(), b"true", b"false", b"1.0", b"1e0", b'"1"', b"null"]
ODD_PRODUCERS = [b'{"provider": "p", "model": "m", "temperature": 0}', b'{"model": "m"}', b'{"provider": 1, "model": "m"}',
                 b'{"provider": "p", "model": "m", "model": "n"}', b'{"provider": "p", "model": 5, "model": "n"}',
                 b'{"provider": "p", "model": "m", "x": 1e999}', b'[]', b'null', b'{"provider": "", "model": ""}']
# Billed usage (contract §3.2): well formed, out of range, mistyped, inconsistent, with keys twice or extra.
GOOD_USAGE = b'{"input_tokens": 12, "output_tokens": 3, "cached_input_tokens": 4, "batch": true}'
WITHOUT_CACHED = b'{"input_tokens": 12, "output_tokens": 3, "batch": false}'
CACHED_NULL = b'{"input_tokens": 12, "output_tokens": 3, "cached_input_tokens": null, "batch": true}'
ODD_USAGES = [GOOD_USAGE, WITHOUT_CACHED, CACHED_NULL, b"null", b"{}", b"[]", b"0",
              b'{"input_tokens": -1, "output_tokens": 3, "batch": true}',
              b'{"input_tokens": 12, "output_tokens": 3.0, "batch": true}',
              b'{"input_tokens": 12, "output_tokens": 3, "batch": 1}',
              b'{"input_tokens": 12, "output_tokens": 3, "cached_input_tokens": 13, "batch": true}',
              b'{"input_tokens": 9223372036854775807, "output_tokens": 0, "batch": true}',
              b'{"input_tokens": 9223372036854775808, "output_tokens": 0, "batch": true}',
              b'{"input_tokens": ' + b"9" * 400 + b', "input_tokens": 12, "output_tokens": 3, "batch": true}',
              b'{"input_tokens": 1e999, "input_tokens": 12, "output_tokens": 3, "batch": true}',
              b'{"input_tokens": 12, "output_tokens": 3, "batch": true, "total_tokens": 15}',
              b'{"input_tokens": 12, "output_tokens": 3, "batch": true, "x": 1e999}',
              b'{"input_tokens": 12, "output_tokens": 3, "batch": true, "batch": "no"}']

odd_values = st.sampled_from([*ORJSON_REJECTS, *WRONG_TYPES, *ODD_STRINGS, *ODD_ATTEMPTS, *ODD_PRODUCERS, *ODD_USAGES])
texts = st.one_of(st.text(max_size=6).map(orjson.dumps), st.sampled_from(ODD_STRINGS))


@st.composite
def envelope_fields(draw):
    """(key, raw value) pairs of a well-formed envelope, values drawn."""
    fields = [(name, draw(texts) if draw(st.booleans()) else orjson.dumps(f"{name}-1")) for name in STRING_FIELDS]
    fields.append(("attempt", str(draw(st.integers(1, 4))).encode()))
    producer = b'{"provider": ' + draw(texts) + b', "model": ' + draw(texts) + b"}"
    fields.append(("producer", producer))
    if draw(st.booleans()):  # optional: a billed usage (or null)
        fields.append(("usage", draw(st.sampled_from([GOOD_USAGE, WITHOUT_CACHED, CACHED_NULL, b"null"]))))
    return fields


@st.composite
def candidate_line(draw, most_defects=2):
    fields = draw(envelope_fields())
    for _ in range(draw(st.integers(0, most_defects))):
        n = draw(st.integers(0, len(fields) - 1))
        key, _ = fields[n]
        how = draw(st.sampled_from(["replace", "drop", "extra", "repeat-before", "repeat-after"]))
        if how == "replace":
            fields[n] = (key, draw(odd_values))
        elif how == "drop":
            fields.pop(n)
        elif how == "extra":
            fields.insert(n, (draw(st.sampled_from(["extra", "Attempt", "", "producer "])), draw(odd_values)))
        elif how == "repeat-before":
            fields.insert(n, (key, draw(odd_values)))
        else:
            fields.insert(n + 1, (key, draw(odd_values)))
        if not fields:
            break
    body = b", ".join(orjson.dumps(key) + b": " + value for key, value in draw(st.permutations(fields)))
    return b"{" + body + b"}"


@settings(max_examples=600, deadline=None)
@given(candidate_line())
def test_both_paths_give_the_same_outcome(line):
    assert_same_outcome(line)


@settings(max_examples=200, deadline=None)
@given(candidate_line(most_defects=0))
def test_well_formed_envelopes_take_the_typed_path(line):
    """(Else the comparison above would hold with the typed path switched off.)"""
    expected = outcome(_parse_candidate_record, line)
    if "error" in expected:  # a blank identifying field, which only the general path names
        return
    with mock.patch("domain.intake._parse_candidate_record", side_effect=AssertionError("the general path")):
        assert outcome(parse_candidate, line) == expected


GOOD = (b'{"candidate_id": "c-1", "family": "spells", "source_id": "s", "chunk_id": "x-1", "attempt": 1, '
        b'"producer": {"provider": "p", "model": "m"}, "prompt_fingerprint": "sha256:a", '
        b'"schema_fingerprint": "sha256:b", "raw_response": "{\\"spells\\": []}", "received_at": "2026-12-03T00:00:00Z"}')


def with_field(text: bytes) -> bytes:
    return GOOD[:-1] + b", " + text + b"}"


@pytest.mark.parametrize("line", [
    GOOD, GOOD + b"\n", b" " + GOOD, b"\xef\xbb\xbf" + GOOD, GOOD + b"x", GOOD[:-1], b"[]", b"", b"null",
    *(with_field(b'"extra": ' + value) for value in ORJSON_REJECTS),
    *(with_field(b'"attempt": ' + value) for value in ODD_ATTEMPTS),
    *(with_field(b'"producer": ' + value) for value in ODD_PRODUCERS),
    *(with_field(b'"usage": ' + value) for value in ODD_USAGES),
    # A repeated key whose first value orjson refuses and msgspec could read:
    *(GOOD.replace(b'"attempt": 1', b'"attempt": ' + value + b', "attempt": 1') for value in (b"9" * 400, b"1e999")),
    GOOD.replace(b'"family": "spells"', b'"family": "\\ud800", "family": "spells"'),
    GOOD.replace(b'"family": "spells"', b'"family": "  "'), GOOD.replace(b'"source_id": "s"', b'"source_id": ""'),
    GOOD.replace(b'"chunk_id": "x-1"', b'"\\u0063hunk_id": "x-1"'),
    GOOD.replace(b'"received_at": "2026-12-03T00:00:00Z"', b'"received_at": 5'),
])
def test_listed_lines_give_the_same_outcome_both_ways(line):
    assert_same_outcome(line)


def test_the_producer_keeps_only_provider_and_model_either_way():
    extended = GOOD.replace(b'"model": "m"}', b'"model": "m", "temperature": 0}')
    assert parse_candidate(extended).producer == parse_candidate(GOOD).producer == Producer("p", "m")
