"""The grouping key of a JSON record, read without building the record.

Generic and free of Beam (the bench's plain loop reads its archive with it):
a record's key is the string value of one top-level field.

A full parse builds the whole record only for that one value: on the bench's
transcripts (about 580 KB a line) orjson takes about 4 ms a line. msgspec
decoding a struct of the one field skips everything else in about 0.4 ms, and
still checks the line's JSON syntax, string escapes and nesting depth.

An accelerator only: where it returns None the caller parses the line in full
and names what is wrong. Where it returns a key, orjson returns the same one
(``tests/test_json_keys.py`` checks this on generated records), with one
exception. msgspec does not look at skipped numbers, so a line holding a
number beyond a double's range (``1e999``), which orjson refuses, is keyed
anyway. The per-key step parses every record in full and makes such a line
a dead letter there. Skipped strings are not checked for UTF-8 either; that
is checked here, because a non-UTF-8 line is a common kind of damage and the
read step names it.
"""

from __future__ import annotations

from functools import cache
from typing import Callable

import msgspec
import orjson


@cache
def _decoder(field: str) -> Callable[[bytes], object]:
    # The struct's attribute is "key" whatever the field is called, so any JSON name works.
    keyed = msgspec.defstruct("Keyed", [("key", str)], rename={"key": field})
    return msgspec.json.Decoder(keyed).decode


def key_of(line: bytes, field: str) -> str | None:
    """The string value of top-level ``field`` in a JSON object ``line``, or None when the
    fast path cannot vouch for it (not an object, no such string field, malformed JSON,
    not UTF-8): the caller then parses the line in full."""
    try:
        key = _decoder(field)(line).key
    except (msgspec.DecodeError, RecursionError):
        return None
    if not line.isascii():
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return key


def trusted_key(line: bytes, field: str) -> str:
    """``key_of``, else the full parse's value: for archives known to be well formed (the
    bench's), where a line without the key may raise. The job's read step names the problem
    instead (``transforms.read``)."""
    key = key_of(line, field)
    return orjson.loads(line)[field] if key is None else key
