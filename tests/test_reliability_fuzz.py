"""Nothing lost, nothing crashes: hostile archives, for the pure per-source step and the whole job.

Two levels, both with hypothesis:

* ``process_source`` directly (cheap, hundreds of examples): any bytes in,
  never an exception; every record accounted for; every dead letter keeps the
  original bytes; every row fits the Avro schema it is written with (a row
  that does not would crash the writer, after all the work is done).
* the whole job (a pipeline run per example, a handful of examples): good
  records mixed with bad ones of every kind, spread over JSON Lines, gzip and
  Avro files with blank lines, CRLF endings and an empty and a corrupt file.
  The job finishes, conservation is counted (and not claimed for the corrupt file), every bad record is a dead letter with
  its bytes, and the good records come out exactly as the per-source step
  decides them alone.

Limits (``--max-record-bytes``, deep nesting) are checked at the end.
"""

from __future__ import annotations

import base64
import contextlib
import decimal
import gzip
import io
import json
import random
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import fastavro
import orjson
import pytest
from fastavro.validation import validate as avro_validate
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from domain.assets import durable_avro_schema_path, load_json_asset
from domain.families import FAMILIES
from domain.reprocess import RunConfig, process_source
from fixture_archive import S1_CHUNKS, S1_IDS, candidate, good_records, transcript
from output_reader import canonical, read_outputs
from pipelines import reprocess
from transforms.raw_records import OVERSIZE_PAYLOAD_HEAD, avro_record_to_json, iter_lines

S1 = "crd3:S1"
S2 = "crd3:S2"
TRANSCRIPTS = {
    S1: transcript(S1, S1_IDS, S1_CHUNKS),
    S2: transcript(S2, [1, 2, 3], [{"chunk_id": "x-1", "kind": "extraction", "unit_ids": [1, 2, 3]}]),
}
TRANSCRIPT_LINES = {key: orjson.dumps(value) for key, value in TRANSCRIPTS.items()}
GOOD = tuple(good_records())
GOOD_LINES = tuple(orjson.dumps(r) for r in GOOD)
FIREBALL = GOOD[0]["raw_response"]
BOM = b"\xef\xbb\xbf"
ENVELOPE_STRINGS = ("candidate_id", "family", "chunk_id", "prompt_fingerprint", "schema_fingerprint",
                    "raw_response", "received_at")
# Literals the JSON parsers refuse or read in surprising ways, and sizes that test the limits.
FRAGMENTS = (b"NaN", b"Infinity", b"-Infinity", b"1e400", b"9" * 30, b"9" * 5000, b"-0", b"1.0",
             b"[" * 3000 + b"]" * 3000, b"[" * 900 + b"]" * 900, b'{"a":' * 600 + b"1" + b"}" * 600,
             b'"' + b"a" * 100_000 + b'"', b'"\xff\xfe"', b'"\\ud800"', b"18446744073709551616")
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example, HealthCheck.filter_too_much]
PLACEHOLDER = "\u0000@value@"
# A list nested just inside orjson's depth limit (1024) when it sits one level down in a record.
DEEP_LIST = b"[" * 1020 + b"]" * 1020


@contextlib.contextmanager
def production_recursion_limit():
    """Python's default recursion limit, which a worker runs with.

    Hypothesis raises the limit while a test runs (to make its own stack use
    reliable), which would hide every RecursionError the job can hit on deep input.
    """
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


# --- building records -----------------------------------------------------------------------

def envelope(cid: str, *, family="spells", source=S1, chunk="x-1", attempt=1, raw=FIREBALL, **changes) -> dict:
    record = candidate(cid, family, source, chunk, attempt, None, raw=raw)
    record.update(changes)
    return record


def with_fragment(record: dict, field: str, fragment: bytes) -> bytes:
    """The record as JSON with ``field``'s value replaced by raw JSON text."""
    return orjson.dumps({**record, field: PLACEHOLDER}).replace(orjson.dumps(PLACEHOLDER), fragment)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
LONG_STRING = b'"' + b"a" * 100_000 + b'"'
# Every fragment except the long string is refused as a JSON string value.
non_strings = (json_values.filter(lambda v: not isinstance(v, str)).map(orjson.dumps)
               | st.sampled_from([f for f in FRAGMENTS if f != LONG_STRING]))
bad_attempts = [b'"1"', b"0", b"-1", b"2147483648", b"true", b"null", b"[1]", b"1.0", b"1.5", b"18446744073709551615",
                b"NaN", b"9" * 40]
bad_producers = st.sampled_from([b'"openai"', b"[]", b"{}", b'{"provider": 1, "model": "m"}', b'{"provider": "p"}',
                                 b"[" * 900 + b"]" * 900, b"[" * 5000 + b"]" * 5000, b"null"])


# Bad records that are judged per slot only after the --families filter (a filtered one is not a dead letter).
CHUNK_LEVEL = frozenset({"unknown_chunk", "wrong_chunk_kind", "source_chunk", "unknown_source"})


@st.composite
def bad_candidate_lines(draw, n: int, deep: bool = True) -> tuple[str, bytes]:
    """(kind, a candidate record that can only be a dead letter). ``n`` keeps its candidate_id fresh.

    ``deep=False`` leaves out values nested to the parser's limit (for tests about something else).
    """
    cid = f"bad-{n}"
    good = envelope(cid)
    kind = draw(st.sampled_from([
        "bytes", "truncated", "string_field", "source_id", "attempt", "producer", "missing", "bom", "dup_key",
        "non_utf8", "unknown_chunk", "unknown_family", "unknown_source", "blank_id", "wrong_chunk_kind",
        "source_chunk", "lone_bom", "not_object",
    ]))
    if kind == "bytes":
        line = draw(st.binary(min_size=1, max_size=300))
        if b"{" in line:  # stay clearly unparseable as an object
            line = line.replace(b"{", b"(")
    elif kind == "truncated":
        full = orjson.dumps(good)
        line = full[: draw(st.integers(1, len(full) - 1))]
    elif kind == "string_field":
        line = with_fragment(good, draw(st.sampled_from(ENVELOPE_STRINGS)), draw(non_strings))
    elif kind == "source_id":
        line = with_fragment(good, "source_id", draw(non_strings | st.sampled_from([b'""', b'"  "'])))
    elif kind == "attempt":
        line = with_fragment(good, "attempt", draw(st.sampled_from(bad_attempts + [DEEP_LIST] * deep)))
    elif kind == "producer":
        line = with_fragment(good, "producer", draw(bad_producers))
    elif kind == "missing":
        field = draw(st.sampled_from(ENVELOPE_STRINGS + ("attempt", "producer", "source_id")))
        line = orjson.dumps({k: v for k, v in good.items() if k != field})
    elif kind == "bom":
        line = BOM + orjson.dumps(good)
    elif kind == "dup_key":  # the last value wins, and it is wrong
        line = orjson.dumps(good)[:-1] + b', "attempt": "1"}'
    elif kind == "non_utf8":
        line = with_fragment(good, draw(st.sampled_from(ENVELOPE_STRINGS)), b'"spel\xff\xfels"')
    elif kind == "unknown_chunk":
        line = orjson.dumps({**good, "chunk_id": draw(st.sampled_from(["x-9", "X-1", "x-1 ", "9" * 100_000]))})
    elif kind == "unknown_family":
        line = orjson.dumps({**good, "family": "potion-" + draw(st.text(max_size=10))})
    elif kind == "unknown_source":
        line = orjson.dumps({**good, "source_id": f"crd3:NOPE-{n}"})
    elif kind == "blank_id":
        field = draw(st.sampled_from(["candidate_id", "family", "chunk_id"]))
        line = orjson.dumps({**good, field: draw(st.sampled_from(["", " ", "\t\n"]))})
    elif kind == "wrong_chunk_kind":
        line = orjson.dumps({**good, "chunk_id": "s-1"})  # spells read extraction chunks
    elif kind == "source_chunk":
        line = orjson.dumps({**good, "chunk_id": "*"})  # '*' is for source-level families only
    elif kind == "lone_bom":
        line = BOM
    else:
        line = orjson.dumps(draw(st.lists(json_values, max_size=3)))
    # As a line of a file: no line break inside, nothing the reader strips, not blank.
    line = line.replace(b"\n", b" ").rstrip(b"\r")
    return kind, line if line.strip() else b"#"


def hostile_raw_responses() -> st.SearchStrategy[str]:
    """Responses a producer might send: random text, broken JSON, absurd values, odd framing."""
    fireball = FIREBALL.encode()
    return st.one_of(
        st.text(max_size=200),
        st.integers(1, len(FIREBALL) - 1).map(lambda k: FIREBALL[:k]),
        st.sampled_from(FRAGMENTS).map(lambda f: f.decode("utf-8", "replace")),
        st.tuples(st.sampled_from([b"level", b"start_unit_id", b"spell_name", b"as_ritual", b"evidence"]),
                  st.sampled_from(FRAGMENTS)).map(lambda kf: _replace_value(fireball, *kf)),
        st.sampled_from(["\ufeff" + FIREBALL, FIREBALL.replace(",", ",\r\n"), FIREBALL + "\n\n", " " + FIREBALL,
                         '{"spells": []}', '{"spells": [], "spells": null}', "[]", "null", "", "\u2028"]),
        json_values.map(lambda v: orjson.dumps(v).decode()),
    )


def _replace_value(raw: bytes, key: bytes, fragment: bytes) -> str:
    start = raw.index(b'"' + key + b'":') + len(key) + 3
    end = start
    depth = 0
    while end < len(raw) and not (depth == 0 and raw[end:end + 1] in b",}]"):
        depth += raw[end:end + 1] in b"[{"
        depth -= raw[end:end + 1] in b"]}"
        end += 1
    return (raw[:start] + fragment + raw[end:]).decode("utf-8", "replace")


@st.composite
def evaluable_candidate_lines(draw, n: int) -> bytes:
    """A candidate whose envelope is fine: it is evaluated, whatever its response holds."""
    family = draw(st.sampled_from(sorted(FAMILIES)))
    kind = FAMILIES[family].chunk_kind
    chunk = {"extraction": draw(st.sampled_from(["x-1", "x-2", "x-3", "x-4"])), "scene": "s-1", "source": "*"}[kind]
    record = envelope(f"ok-{n}", family=family, chunk=chunk, attempt=draw(st.integers(1, 4)),
                      raw=draw(hostile_raw_responses()),
                      received_at=draw(st.sampled_from(["2026-10-01T12:00:00Z", "", "later", "2026-10-01T12:00:00.5Z"])))
    extra = draw(st.sampled_from([None, b"[" * 900 + b"]" * 900, b'"' + b"z" * 50_000 + b'"', b"NaN"]))
    if extra is None:
        return orjson.dumps(record)
    if extra == b"NaN":  # NaN makes the whole record invalid JSON: not evaluable; use a harmless extra instead
        extra = b"null"
    return with_fragment(record, "x_extra", extra)  # unknown envelope keys are ignored


# --- rows must fit their writers ---------------------------------------------------------------

OUTPUT_AVSC = {"retry_requests": "outputs/retry_request.v1.avsc", "evaluations": "outputs/evaluation.v1.avsc",
               "dead_letters": "outputs/dead_letter.v1.avsc"}


@lru_cache(maxsize=None)
def parsed_schema(path: str):
    return fastavro.parse_schema(load_json_asset(path))


def assert_rows_writable(result) -> None:
    """Every row serialises as JSON Lines and validates against the Avro schema it is written with."""
    for tag, path in OUTPUT_AVSC.items():
        for row in getattr(result, tag):
            orjson.dumps(row)
            avro_validate(row, parsed_schema(path), raise_errors=True)
    for row in result.artifacts:
        orjson.dumps(row)
        avro_validate(row, parsed_schema(durable_avro_schema_path(row["family"])), raise_errors=True)


def payload_bytes(row: dict) -> bytes:
    if row["payload_encoding"] == "base64":
        return base64.b64decode(row["payload"])
    assert row["payload_encoding"] == "utf-8"
    return row["payload"].encode("utf-8")


# --- the pure per-source step --------------------------------------------------------------

def deep_unit_transcript(source: str) -> bytes:
    """A transcript whose chunk names a unit id nested ~1020 lists deep (the deepest orjson reads)."""
    record = {**TRANSCRIPTS[S2], "source_id": source,
              "chunks": [{"chunk_id": "x-1", "kind": "extraction", "unit_ids": [1, PLACEHOLDER]}]}
    return orjson.dumps(record).replace(orjson.dumps(PLACEHOLDER), b"[" * 1018 + b"]" * 1018)


@st.composite
def source_inputs(draw, deep: bool = True):
    """(transcript lines, candidate lines, the lines that must be dead letters, config) of one source."""
    transcripts = draw(st.sampled_from([
        [TRANSCRIPT_LINES[S1]],
        [TRANSCRIPT_LINES[S1], TRANSCRIPT_LINES[S1]],  # identical copies
        [TRANSCRIPT_LINES[S1], TRANSCRIPT_LINES[S1].replace(b'"x-4"', b'"x-5"')],  # conflicting
        [],  # unknown source
        [TRANSCRIPT_LINES[S1].replace(b'"unit_id":7,', b'"unit_id":3,')],  # duplicate unit ids
        [b"[" * 3000], [b'{"source_id":"crd3:S1","units":' + b"[" * 1000 + b"]" * 1000 + b',"chunks":[]}'],
    ] + [[deep_unit_transcript(S1)]] * deep))
    families = draw(st.none() | st.sets(st.sampled_from(sorted(FAMILIES)), min_size=1).map(frozenset))
    lines = list(draw(st.lists(st.sampled_from(GOOD_LINES), max_size=8)))  # exact duplicates included
    must_die = []
    for n in range(draw(st.integers(0, 12))):
        kind, line = draw(bad_candidate_lines(n, deep))
        lines.append(line)
        if kind not in CHUNK_LEVEL or families is None or "spells" in families:
            must_die.append(line)
    for n in range(draw(st.integers(0, 6))):
        lines.append(draw(evaluable_candidate_lines(n)))
    lines = draw(st.permutations(lines))
    return transcripts, lines, must_die, RunConfig(max_attempts=draw(st.integers(1, 4)), families=families)


@settings(max_examples=250, deadline=None, suppress_health_check=HEALTH)
@given(source_inputs())
def test_process_source_accounts_for_every_record_and_never_raises(inputs):
    transcripts, lines, must_die, config = inputs
    with production_recursion_limit():
        result = process_source(S1, transcripts, lines, config)
    counts = Counter(result.counts)

    candidate_dead = [d for d in result.dead_letters if d["input"] == "candidates"]
    transcript_dead = [d for d in result.dead_letters if d["input"] == "transcripts"]
    assert len(lines) == len(result.evaluations) + len(candidate_dead) + counts["filtered"]
    assert counts["evaluations"] == len(result.evaluations)
    assert len(transcripts) == counts["transcripts_ok"] + len(transcript_dead)
    assert counts["dead_letters/candidates"] == len(candidate_dead)
    assert counts["dead_letters/transcripts"] == len(transcript_dead)

    # Dead letters carry the original bytes (each input line at most once) and say why;
    # every bad record is one of them.
    dead_payloads = Counter(payload_bytes(d) for d in candidate_dead)
    assert not dead_payloads - Counter(lines)
    assert not Counter(payload_bytes(d) for d in transcript_dead) - Counter(transcripts)
    assert not Counter(must_die) - dead_payloads
    assert all(d["reason"].strip() for d in result.dead_letters)

    # One evaluation per admitted candidate id, one artifact per accepted slot, one request per retry.
    ids = [e["candidate_id"] for e in result.evaluations]
    assert len(ids) == len(set(ids))
    outcome = Counter()
    for key, value in counts.items():
        if key.startswith("outcome/"):
            outcome[key.rsplit("/", 1)[1]] += value
    assert len(result.artifacts) == outcome["accepted"]
    assert len(result.retry_requests) == outcome["retry"]
    assert_rows_writable(result)


# --- the whole job -------------------------------------------------------------------------

CANDIDATE_AVSC = "inputs/model_candidate.v1.avsc"
# A gzip header followed by a deflate block of the reserved type 3: unreadable from its first byte.
CORRUPT_GZ = bytes.fromhex("1f8b0800000000000003") + b"\xff" * 40


@st.composite
def bad_transcript_lines(draw, n: int) -> bytes:
    """A transcript record that can only be a dead letter (its key never clashes with a good source)."""
    source = f"crd3:BAD-{n}"
    good = {**TRANSCRIPTS[S2], "source_id": source}
    kind = draw(st.sampled_from(["bytes", "truncated", "dup_unit", "unknown_unit", "id_type", "id_range",
                                 "units_type", "missing_chunks", "chunk_kind", "text_type", "blank_key", "key_type",
                                 "deep_unit_id"]))
    units = good["units"]
    if kind == "bytes":
        line = draw(st.binary(min_size=1, max_size=200)).replace(b"{", b"(")
    elif kind == "truncated":
        full = orjson.dumps(good)
        line = full[: draw(st.integers(1, len(full) - 1))]
    elif kind == "dup_unit":
        line = orjson.dumps({**good, "units": units + units[:1]})
    elif kind == "unknown_unit":
        line = orjson.dumps({**good, "chunks": [{"chunk_id": "x-1", "kind": "extraction", "unit_ids": [1, 99]}]})
    elif kind == "id_type":
        value = draw(st.sampled_from([b'"1"', b"1.0", b"true", b"null", b"[1]"]))
        line = with_fragment(good, "units", b"[" + orjson.dumps({**units[0], "unit_id": PLACEHOLDER}).replace(
            orjson.dumps(PLACEHOLDER), value) + b"]")
    elif kind == "id_range":
        value = draw(st.sampled_from([0, -5, 2**63, 2**64 - 1]))
        line = orjson.dumps({**good, "units": [{**units[0], "unit_id": value}]})
    elif kind == "units_type":
        line = with_fragment(good, "units", draw(non_strings.filter(lambda f: not f.startswith(b"[["))))
    elif kind == "missing_chunks":
        line = orjson.dumps({k: v for k, v in good.items() if k != "chunks"})
    elif kind == "chunk_kind":
        line = orjson.dumps({**good, "chunks": [{"chunk_id": "x-1", "kind": "boss", "unit_ids": [1]}]})
    elif kind == "text_type":
        line = orjson.dumps({**good, "units": [{**units[0], "text": None}]})
    elif kind == "blank_key":
        line = orjson.dumps({**good, "source_id": " "})
    elif kind == "deep_unit_id":
        line = deep_unit_transcript(source)
    else:
        line = with_fragment(good, "source_id", draw(non_strings))
    line = line.replace(b"\n", b" ").rstrip(b"\r")
    return line if line.strip() else b"#"


def write_lines(path: Path, lines: list[bytes], rnd: random.Random) -> int:
    """Write ``lines`` with random line endings and blank lines; returns how many blank lines it added."""
    ending = rnd.choice([b"\n", b"\r\n"])
    out, blanks = [], 0
    if lines and lines[0].startswith(BOM):  # a BOM on a file's first byte is the file's (skipped), not the line's
        out.append(b"")
        blanks += 1
    for line in lines:
        while rnd.random() < 0.15:
            out.append(rnd.choice([b"", b"   ", b"\t", b"\r"]))
            blanks += 1
        out.append(line)
    data = ending.join(out) + (ending if rnd.random() < 0.8 else b"")
    if not out and data:
        blanks += 1  # a file of lines[] is just the line break: one blank line
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
    return blanks


def spread(directory: Path, prefix: str, lines: list[bytes], rnd: random.Random) -> int:
    """Shuffle ``lines`` over 1-4 JSON Lines files (some gzip) plus an empty file; returns blank lines added."""
    lines = list(lines)
    rnd.shuffle(lines)
    files = rnd.randint(1, 4)
    blanks = 0
    for n in range(files):
        suffix = rnd.choice([".jsonl", ".jsonl.gz"])
        blanks += write_lines(directory / f"{prefix}-{n}{suffix}", lines[n::files], rnd)
    (directory / f"{prefix}-empty.jsonl").write_bytes(b"")
    return blanks


def pure_outputs(transcript_lines, candidate_lines) -> dict[str, list]:
    """What the per-source step decides for these records alone, keyed as the reading step keys them."""
    grouped: dict[str, tuple[list, list]] = {}
    for index, lines in ((0, transcript_lines), (1, candidate_lines)):
        for line in lines:
            grouped.setdefault(orjson.loads(line)["source_id"], ([], []))[index].append(line)
    out: dict[str, list] = {"artifacts": [], "retry_requests": [], "evaluations": [], "dead_letters": [], "counts": []}
    for key in sorted(grouped):
        result = process_source(key, *grouped[key])
        for tag in ("artifacts", "retry_requests", "evaluations", "dead_letters"):
            out[tag].extend(getattr(result, tag))
        out["counts"].append(result.counts)
    return out


def dead_keys(rows) -> Counter:
    return Counter((row["input"], row["payload"], row["payload_encoding"]) for row in rows)


def as_dead(input_name: str, line: bytes) -> tuple[str, str, str]:
    try:
        return input_name, line.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return input_name, base64.b64encode(line).decode("ascii"), "base64"


@st.composite
def hostile_archives(draw):
    good_candidates = list(GOOD_LINES) + [draw(evaluable_candidate_lines(n)) for n in range(draw(st.integers(0, 6)))]
    bad_candidates = [draw(bad_candidate_lines(n))[1] for n in range(draw(st.integers(10, 30)))]
    bad_transcripts = [draw(bad_transcript_lines(n)) for n in range(draw(st.integers(1, 8)))]
    # Candidates of rejected transcripts die as "unknown source".
    bad_candidates += [orjson.dumps(envelope(f"orphan-{n}", source=f"crd3:BAD-{n}")) for n in range(len(bad_transcripts))]
    avro_count = draw(st.integers(0, 3))
    return good_candidates, bad_candidates, bad_transcripts, avro_count, draw(st.integers(0, 2**32)), \
        draw(st.sampled_from(["avro", "jsonl"]))


@settings(max_examples=4, deadline=None, suppress_health_check=HEALTH + [HealthCheck.function_scoped_fixture],
          phases=[Phase.explicit, Phase.generate])  # each example is a pipeline run: no shrinking
@given(hostile_archives())
def test_whole_job_on_hostile_archives(tmp_path_factory, archive):
    good_candidates, bad_candidates, bad_transcripts, avro_count, seed, fmt = archive
    rnd = random.Random(seed)
    directory = tmp_path_factory.mktemp("hostile")
    good_transcripts = [TRANSCRIPT_LINES[S1], TRANSCRIPT_LINES[S2]]

    # Some good candidates travel as Avro: the job sees them as their JSON form.
    rnd.shuffle(good_candidates)
    avro_records = [orjson.loads(line) for line in good_candidates[:avro_count]]
    avro_records = [r for r in avro_records if isinstance(r.get("attempt"), int)]
    jsonl_good = [line for line in good_candidates if orjson.loads(line) not in avro_records]
    broken_avro = {**envelope("bad-avro"), "raw_response": b"\xff\xfe not text"}
    with open(directory / "candidates-a.avro", "wb") as handle:
        fastavro.writer(handle, parsed_schema(CANDIDATE_AVSC),
                        [{**r, "raw_response": r["raw_response"].encode()} for r in avro_records] + [broken_avro])
    with open(directory / "candidates-a.avro", "rb") as handle:
        avro_lines = [avro_record_to_json(r) for r in list(fastavro.reader(handle))[:-1]]
    (directory / "candidates-corrupt.jsonl.gz").write_bytes(CORRUPT_GZ)

    blanks_c = spread(directory, "candidates", jsonl_good + bad_candidates, rnd)
    blanks_t = spread(directory, "transcripts", good_transcripts + bad_transcripts, rnd)
    out = directory / "out"
    argv = ["--transcripts", str(directory / "transcripts-*"), "--candidates", str(directory / "candidates-*"),
            "--output", str(out), "--output-format", fmt]
    with production_recursion_limit():
        # The corrupt file may have held any number of records: conservation cannot be proved (exit 2).
        assert reprocess.main(argv) == 2
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    outputs = read_outputs(out)

    # Conservation, with every record counted; not claimed for the candidates because of the corrupt file.
    c = manifest["conservation"]
    assert not c["holds"] and c["candidates_in"] == c["evaluations"] + c["dead_letters"] + c["filtered"]
    assert manifest["unreadable_files"]["by_input"] == {"candidates": 1}
    assert manifest["transcript_conservation"]["holds"]
    candidates_in = len(jsonl_good) + len(avro_lines) + len(bad_candidates) + 2  # + broken Avro record, corrupt file
    assert manifest["inputs"]["candidates"] == candidates_in
    assert manifest["inputs"]["transcripts"] == len(good_transcripts) + len(bad_transcripts)
    assert manifest["inputs"]["blank_lines_skipped"] == {"candidates": blanks_c, "transcripts": blanks_t}

    # The good records come out exactly as the per-source step decides them without bad neighbours.
    expected = pure_outputs(good_transcripts, jsonl_good + avro_lines)
    for tag in ("evaluations", "retry_requests"):
        assert canonical(outputs[tag]) == canonical(expected[tag]), tag
    artifacts = [row for name, rows in outputs.items() if name.startswith("artifacts/") for row in rows]
    assert canonical(artifacts) == canonical(expected["artifacts"])
    expected_outcomes = Counter()
    for counts in expected["counts"]:
        expected_outcomes.update({k: v for k, v in counts.items() if k.startswith("outcome/")})
    for family, row in manifest["outcomes"].items():
        for outcome, value in row.items():
            assert value == expected_outcomes[f"outcome/{family}/{outcome}"], (family, outcome)

    # Every bad record is a dead letter with its original bytes and a reason.
    dead = outputs["dead_letters"]
    assert all(row["reason"].strip() for row in dead)
    corrupt = [row for row in dead if "could not be read" in row["reason"]]
    broken = [row for row in dead if "non-UTF-8" in row["reason"]]
    assert len(corrupt) == 1 and corrupt[0]["payload"] == "" and "candidates-corrupt" in corrupt[0]["reason"]
    assert len(broken) == 1 and "bad-avro" in broken[0]["payload"]
    expected_dead = dead_keys(expected["dead_letters"])
    expected_dead.update(as_dead("candidates", line) for line in bad_candidates)
    expected_dead.update(as_dead("transcripts", line) for line in bad_transcripts)
    assert dead_keys(row for row in dead if row not in corrupt and row not in broken) == expected_dead


# --- limits: deep nesting -----------------------------------------------------------------

DEEP_CANDIDATES = {  # where -> (record, what becomes of it)
    # BUG (reliability report, "deep repr"): parse_candidate writes repr(attempt) into its
    # message; a list nested ~1000 deep raises RecursionError and the job fails. Fails until fixed.
    "attempt": (with_fragment(envelope("deep-attempt"), "attempt", DEEP_LIST), "dead"),
    "producer": (with_fragment(envelope("deep-producer"), "producer", DEEP_LIST), "dead"),
    "candidate_id": (with_fragment(envelope("deep-id"), "candidate_id", DEEP_LIST), "dead"),
    "unknown key": (with_fragment(envelope("deep-extra"), "x_extra", DEEP_LIST), "accepted"),  # ignored
    "beyond the parser": (with_fragment(envelope("deep-limit"), "producer", b"[" * 100_000 + b"]" * 100_000), "dead"),
    "raw_response nested": (orjson.dumps(envelope("deep-raw", raw="[" * 1022 + "]" * 1022)), "rejected"),
    "raw_response field": (orjson.dumps(envelope("deep-raw-field", raw=_replace_value(
        FIREBALL.encode(), b"spell_name", b"[" * 1015 + b"]" * 1015))), "rejected"),
    "raw_response enum": (orjson.dumps(envelope("deep-raw-enum", family="enemy-events", raw=json.dumps(
        {"events": [{"enemy_name": "Goblin", "kind": "@", "evidence": [{"start_unit_id": 10, "end_unit_id": 3}]}]}
    ).replace('"@"', "[" * 1010 + "]" * 1010))), "rejected"),
    "raw_response beyond the parser": (orjson.dumps(envelope("deep-raw-limit", raw="[" * 200_000)), "rejected"),
}
DEEP_TRANSCRIPTS = {
    # BUG (reliability report, "deep repr"): transcript_from_record writes repr(unit id) into the
    # message for a chunk naming an unknown unit; a deeply nested "id" raises RecursionError.
    "chunk unit id": deep_unit_transcript(S1),
    "units": with_fragment(TRANSCRIPTS[S1], "units", DEEP_LIST),
    "chunks": with_fragment(TRANSCRIPTS[S1], "chunks", DEEP_LIST),
    "beyond the parser": with_fragment(TRANSCRIPTS[S1], "units", b"[" * 50_000 + b"]" * 50_000),
}


@pytest.mark.parametrize("where", sorted(DEEP_CANDIDATES))
def test_deep_nesting_in_a_candidate_is_a_dead_letter_or_an_evaluation(where):
    line, fate = DEEP_CANDIDATES[where]
    with production_recursion_limit():
        result = process_source(S1, [TRANSCRIPT_LINES[S1]], [line])
    if fate == "dead":
        (row,) = result.dead_letters
        assert payload_bytes(row) == line and 0 < len(row["reason"]) < 1000
        assert not result.evaluations
    else:
        assert [row["verdict"] for row in result.evaluations] == [fate] and not result.dead_letters
    for request in result.retry_requests:  # the structural guidance still speaks to the model
        assert "could not be accepted" in request["correction_guidance"]
    assert_rows_writable(result)


@pytest.mark.parametrize("where", sorted(DEEP_TRANSCRIPTS))
def test_deep_nesting_in_a_transcript_is_a_dead_letter(where):
    line = DEEP_TRANSCRIPTS[where]
    with production_recursion_limit():
        result = process_source(S1, [line], [GOOD_LINES[0]])
    assert [payload_bytes(d) for d in result.dead_letters if d["input"] == "transcripts"] == [line]
    assert [d["reason"] for d in result.dead_letters if d["input"] == "candidates"][0].startswith("unknown source")
    assert all(len(d["reason"]) < 1000 for d in result.dead_letters)


def test_the_job_survives_deep_nesting_everywhere(tmp_path):
    """The same records through the whole job, on worker threads (fails with the two bugs above)."""
    (tmp_path / "transcripts.jsonl").write_bytes(b"\n".join(
        [TRANSCRIPT_LINES[S1]] + [line.replace(b'"crd3:S1"', f'"crd3:DEEP-{n}"'.encode())
                                  for n, line in enumerate(DEEP_TRANSCRIPTS.values())]))
    (tmp_path / "candidates.jsonl").write_bytes(b"\n".join(line for line, _ in DEEP_CANDIDATES.values()))
    out = tmp_path / "out"
    argv = ["--transcripts", str(tmp_path / "transcripts.jsonl"), "--candidates", str(tmp_path / "candidates.jsonl"),
            "--output", str(out), "--output-format", "jsonl"]
    assert reprocess.main(argv) == 0
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["conservation"]["holds"] and manifest["transcript_conservation"]["holds"]
    assert manifest["inputs"]["candidates"] == len(DEEP_CANDIDATES)
    assert manifest["transcript_conservation"]["dead_letters"] == len(DEEP_TRANSCRIPTS)


# --- limits: --max-record-bytes -------------------------------------------------------------

def test_an_absurd_record_is_a_dead_letter_and_its_neighbours_are_processed(tmp_path):
    limit = 4096
    absurd = orjson.dumps(envelope("huge", raw="x" * 3_000_000))  # 3 MB, far over the limit
    at_limit = orjson.dumps(envelope("fits", raw=FIREBALL + " " * 10))
    at_limit = at_limit.replace(b'"fits"', b'"fits' + b"f" * (limit - len(at_limit)) + b'"')
    assert len(at_limit) == limit
    after = GOOD_LINES[0]
    (tmp_path / "t.jsonl").write_bytes(TRANSCRIPT_LINES[S1] + b"\n")
    (tmp_path / "c-1.jsonl").write_bytes(absurd + b"\n" + at_limit + b"\n" + after + b"\n")
    (tmp_path / "c-2.jsonl.gz").write_bytes(gzip.compress(absurd + b"\r\n" + absurd))  # and at the very end
    with open(tmp_path / "c-3.avro", "wb") as handle:  # Avro: the limit applies to the record's JSON form
        fastavro.writer(handle, parsed_schema(CANDIDATE_AVSC), [{**orjson.loads(absurd), "raw_response": b"x" * 3_000_000}])
    out = tmp_path / "out"
    argv = ["--transcripts", str(tmp_path / "t.jsonl"), "--candidates", str(tmp_path / "c-*"), "--output", str(out),
            "--output-format", "jsonl", "--max-record-bytes", str(limit)]
    assert reprocess.main(argv) == 0
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    outputs = read_outputs(out)
    assert manifest["conservation"] == {"candidates_in": 6, "evaluations": 2, "dead_letters": 4, "filtered": 0,
                                        "holds": True}
    oversize = [d for d in outputs["dead_letters"] if "--max-record-bytes" in d["reason"]]
    assert len(oversize) == 4
    for row in oversize:
        head = payload_bytes(row)
        assert 0 < len(head) <= OVERSIZE_PAYLOAD_HEAD and head.startswith(b'{"candidate_id":"huge"')
    assert {e["candidate_id"] for e in outputs["evaluations"]} == {orjson.loads(at_limit)["candidate_id"], "c-01"}


def test_a_number_beyond_double_range_is_a_dead_letter_of_the_per_source_step(tmp_path):
    """The read step's fast key skips such a number (transforms.json_keys); the full parse refuses it."""
    overflow_candidate = with_fragment(envelope("overflow"), "x_extra", b"1e999")
    overflow_transcript = with_fragment(TRANSCRIPTS[S2], "x_extra", b"-1e999")
    (tmp_path / "t.jsonl").write_bytes(TRANSCRIPT_LINES[S1] + b"\n" + overflow_transcript + b"\n")
    (tmp_path / "c.jsonl").write_bytes(overflow_candidate + b"\n" + GOOD_LINES[0] + b"\n")
    out = tmp_path / "out"
    argv = ["--transcripts", str(tmp_path / "t.jsonl"), "--candidates", str(tmp_path / "c.jsonl"), "--output", str(out),
            "--output-format", "jsonl"]
    assert reprocess.main(argv) == 0
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    dead = {payload_bytes(d): d for d in read_outputs(out)["dead_letters"]}
    assert manifest["conservation"]["holds"] and manifest["conservation"]["dead_letters"] == 1
    assert manifest["transcript_conservation"]["dead_letters"] == 1
    assert set(dead) == {overflow_candidate, overflow_transcript}
    assert dead[overflow_candidate]["reason"].startswith("candidate record is not valid JSON (number is infinity")
    assert dead[overflow_transcript]["reason"].startswith("transcript is not valid JSON (number is infinity")


@st.composite
def framed_records(draw):
    records = draw(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"").rstrip(b"\r")), max_size=8))
    endings = [draw(st.sampled_from([b"\n", b"\r\n"])) for _ in records]
    data = b"".join(r + e for r, e in zip(records, endings))
    if records and draw(st.booleans()):  # the last line has no line break
        data = data[: -len(endings[-1])]
        if records[-1] == b"":
            records = records[:-1]  # ...and, empty, is no line at all
    return records, data, draw(st.integers(0, 45))


# BUG (reliability report, "CRLF limit"): iter_lines reads limit + 1 bytes, so a record of exactly
# --max-record-bytes followed by "\r\n" is called oversize (its "\r" counted as content), while the
# same record with "\n" is kept. Fails until the fix in the report is applied.
@settings(max_examples=400, deadline=None)
@given(framed_records())
def test_iter_lines_returns_each_record_and_flags_exactly_the_oversize_ones(framed):
    records, data, limit = framed
    got = list(iter_lines(io.BytesIO(data), limit))
    assert [oversize for _, oversize in got] == [len(r) > limit for r in records]
    for (line, oversize), record in zip(got, records):
        if not oversize:
            assert line == record
        else:  # the payload keeps a head: at least what the limit allows, at most 64 KiB
            assert record.startswith(line) and min(len(record), limit + 1) <= len(line) <= OVERSIZE_PAYLOAD_HEAD


# --- soft spots --------------------------------------------------------------------------------

# BUG (reliability report, "received_at"): duplicate candidate_ids keep "the record received
# first", but received_at is compared as text: "12:00:00.500Z" sorts before "12:00:00Z" ('.' < 'Z')
# and offsets are ignored. Fails until received_at is compared as a point in time.
@pytest.mark.parametrize("first, later", [
    ("2026-10-01T12:00:00Z", "2026-10-01T12:00:00.500Z"),
    ("2026-10-01T13:00:00+02:00", "2026-10-01T12:00:00Z"),
    ("2026-10-01T12:00:00Z", "not a time"),
])
def test_duplicate_candidate_ids_keep_the_record_received_first(first, later):
    kept = orjson.dumps(envelope("c-same", received_at=first, attempt=1))
    dropped = orjson.dumps(envelope("c-same", received_at=later, attempt=2))
    for lines in ([kept, dropped], [dropped, kept]):
        result = process_source(S1, [TRANSCRIPT_LINES[S1]], lines)
        assert [e["attempt"] for e in result.evaluations] == [1]
        assert [payload_bytes(d) for d in result.dead_letters] == [dropped]


def test_the_same_candidate_id_in_two_sources_is_evaluated_in_each(tmp_path):
    """Known limit (docs/reliability.md): candidate ids are de-duplicated within a source only.

    Both records are accounted for and the outputs stay unique by content: the
    artifact ids differ because they include the source.
    """
    s2_fireball = orjson.dumps({"spells": [{"spell_name": "Fireball", "caster_name": "SAM", "cast": {
        "level": 3, "as_ritual": False, "target_names": []}, "evidence": [{"start_unit_id": 3, "end_unit_id": 1}]}]})
    lines = [GOOD_LINES[0], orjson.dumps(envelope("c-01", source=S2, raw=s2_fireball.decode()))]
    s1 = process_source(S1, [TRANSCRIPT_LINES[S1]], lines[:1])
    s2 = process_source(S2, [TRANSCRIPT_LINES[S2]], lines[1:])
    assert [e["candidate_id"] for e in s1.evaluations + s2.evaluations] == ["c-01", "c-01"]
    ids = [a["artifact_id"] for a in s1.artifacts + s2.artifacts]
    assert len(ids) == 2 and len(set(ids)) == 2


def test_a_truncated_gzip_keeps_the_records_before_the_damage(tmp_path):
    """Known limit: what follows the damage in a compressed file cannot be split into records.

    The records read before it are processed; the rest of the file is ONE dead
    letter (empty payload, reason names the file and the record count) counted as
    one record; the manifest names the file and does not claim conservation, since
    the real number is unknown.
    """
    (tmp_path / "t.jsonl").write_bytes(TRANSCRIPT_LINES[S1])
    lost = orjson.dumps({"source_id": S1, "pad": random.Random(0).randbytes(20_000).hex()})  # compresses badly
    whole = gzip.compress(b"\n".join(GOOD_LINES[:3] + (lost,)), mtime=0)
    (tmp_path / "c.jsonl.gz").write_bytes(whole[: len(whole) - 40])  # the trailer and the end of record 4
    out = tmp_path / "out"
    assert reprocess.main(["--transcripts", str(tmp_path / "t.jsonl"), "--candidates", str(tmp_path / "c.jsonl.gz"),
                           "--output", str(out), "--output-format", "jsonl"]) == 2
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    outputs = read_outputs(out)
    assert {e["candidate_id"] for e in outputs["evaluations"]} == {r["candidate_id"] for r in GOOD[:3]}
    (rest,) = outputs["dead_letters"]
    assert rest["payload"] == "" and "c.jsonl.gz could not be read past record 3" in rest["reason"]
    assert manifest["conservation"] == {"candidates_in": 4, "evaluations": 3, "dead_letters": 1, "filtered": 0,
                                        "holds": False}
    assert manifest["unreadable_files"]["paths"] == [str(tmp_path / "c.jsonl.gz")]


# BUG (reliability report, "foreign Avro"): an Avro record holding a value JSON has no form for
# (a decimal, from a schema wider than ours) failed avro_record_to_json - and then the dead-letter
# payload encoder failed the same way, so the REST OF THE FILE became one "could not be read" row.
# Issue #18: a field the contract does not name is ignored, whatever its type: both are evaluated.
def test_an_avro_field_the_contract_does_not_name_is_ignored_and_every_record_is_read(tmp_path):
    schema = load_json_asset(CANDIDATE_AVSC)
    wider = {**schema, "fields": schema["fields"] + [{"name": "cost", "type": [
        "null", {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}], "default": None}]}
    odd = {**envelope("c-odd"), "raw_response": FIREBALL.encode(), "cost": decimal.Decimal("1.50")}
    plain = {**envelope("c-plain", chunk="x-2"), "raw_response": FIREBALL.encode(), "cost": None}
    with open(tmp_path / "c.avro", "wb") as handle:
        fastavro.writer(handle, fastavro.parse_schema(wider), [odd, plain])
    (tmp_path / "t.jsonl").write_bytes(TRANSCRIPT_LINES[S1])
    out = tmp_path / "out"
    assert reprocess.main(["--transcripts", str(tmp_path / "t.jsonl"), "--candidates", str(tmp_path / "c.avro"),
                           "--output", str(out), "--output-format", "jsonl"]) == 0
    outputs = read_outputs(out)
    assert sorted(e["candidate_id"] for e in outputs["evaluations"]) == ["c-odd", "c-plain"]
    assert outputs["dead_letters"] == []
