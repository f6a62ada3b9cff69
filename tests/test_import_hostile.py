"""import-batch reads hostile result files as the job reads hostile inputs (issue 29,
finding 8): a bad line is a ledger row with a reason, never a crash; a file that
cannot be read to its end is named in the manifest and the import exits 2; a
leading byte-order mark is the file's, not its first answer's; a provider time
that is not one leaves received_at to the fallback, and the ledger says why.

The exports here are written by hand (a requests file and its index), so no job
or export run is needed; the result lines come from tests/fake_provider.py, in
the providers' real shapes, then are cut, mutated and garbled.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import tempfile
from datetime import datetime
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fake_provider as fake
from domain.batch.ledger import (LINE_OUTCOMES, UNKNOWN_TIME, ExportedRequest, ExportIndexError, ImportLedger,
                                  parse_index_row)
from domain.batch.providers import PROVIDERS, VERTEX_LABEL
from domain.intake import parse_candidate
from domain.revision import MAX_ATTEMPT_NUMBER
from pipelines import batch_import

FP = "sha256:" + "a" * 64
PROVIDER_NAMES = sorted(PROVIDERS)
RIDS = [f"r-{i}" for i in range(4)]
FATES = (fake.ANSWER, fake.REFUSE, fake.TRUNCATE, fake.FAIL, fake.EXPIRE, fake.CANCEL)
ANSWER_TEXT = '{"spells": []}'
RECEIVED_AT = "2026-02-03T04:05:06Z"
UTF8_BOM = b"\xef\xbb\xbf"
ROW_KEYS = {"file", "line_number", "outcome", "request_id", "stop_reason", "http_status", "error", "candidate_id",
            "response_model", "received_at_problem", "usage_problem", "line", "line_encoding"}


# --- a hand-written export and the provider's answers -------------------------------------

def request_of(provider_name: str, rid: str) -> dict:
    """A request line as the export writes it, reduced to what the fake provider and the
    Vertex content key read."""
    provider = PROVIDERS[provider_name]
    wire = provider.wire_id(rid)
    google = {"systemInstruction": {"parts": [{"text": "system"}]},
              "contents": [{"role": "user", "parts": [{"text": f"the excerpt of {rid}"}]}]}
    if provider_name.startswith("openai"):
        body = {"model": "m", "instructions": "system", "max_output_tokens": 10, "text": {"format": {"type": "text"}}}
        return {"custom_id": wire, "method": "POST", "url": provider.url, "body": body}
    if provider_name == "anthropic":
        return {"custom_id": wire, "params": {"model": "m"}}
    if provider_name == "gemini":
        return {"key": wire, "request": google}
    return {"request": {**google, "labels": {VERTEX_LABEL: wire}}}


def result_line(provider_name: str, rid: str, fate: str, n: int = 1, text: str = ANSWER_TEXT) -> dict | None:
    """The provider's result line for ``rid`` (None where the provider writes none for that fate)."""
    request = request_of(provider_name, rid)
    if provider_name == "openai-chat":
        made = fake.openai_chat(n, rid, request["body"], fate, text)
    elif provider_name == "openai-responses":
        made = fake.openai_responses(n, rid, request["body"], fate, text)
    elif provider_name == "anthropic":
        made = fake.anthropic(n, rid, request["params"], fate, text)
    elif provider_name == "gemini":
        made = fake.gemini(n, rid, request["request"], fate, text, "gemini-test")
    else:
        made = fake.vertex(n, request["request"], fate, text, "gemini-test", False)
    return made[1] if made else None


def index_row(provider_name: str, rid: str, number: int, request_line: bytes, **changes) -> dict:
    provider = PROVIDERS[provider_name]
    row = {"request_id": rid, "kind": "retry", "wire_id": provider.wire_id(rid), "family": "spells", "source_id": "s",
           "chunk_id": "x-1", "attempt": 2, "provider": provider_name, "model": "m", "prompt_fingerprint": FP,
           "schema_fingerprint": FP, "line_sha256": hashlib.sha256(request_line).hexdigest(),
           "content_key": provider.content_key(orjson.loads(request_line)), "line": number}
    return {**row, **changes}


def write_export(folder: Path, provider_name: str, rids=RIDS, **changes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [orjson.dumps(request_of(provider_name, rid)) for rid in rids]
    index = [index_row(provider_name, rid, n, line, **changes) for n, (rid, line) in enumerate(zip(rids, lines), start=1)]
    (folder / "requests-00000-of-00001.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    (folder / "requests-00000-of-00001.index.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in index))
    return folder


def exported(provider_name: str) -> list[ExportedRequest]:
    return [parse_index_row(orjson.dumps(index_row(provider_name, rid, n, orjson.dumps(request_of(provider_name, rid)))),
                            f"index:{n}") for n, rid in enumerate(RIDS, start=1)]


def import_batch(provider_name: str, results: list[Path], export: Path, out: Path, *extra: str) -> tuple[int, dict]:
    code = batch_import.main(["--provider", provider_name, "--results", *map(str, results),
                              "--requests", str(export / "requests-*"), "--output", str(out), *extra])
    return code, orjson.loads((out / batch_import.MANIFEST).read_bytes())


def rows_of(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def jsonl(lines) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


# --- provider times -------------------------------------------------------------------------

def openai_chat_answer(rid: str, **body_changes) -> dict:
    line = result_line("openai-chat", rid, fake.ANSWER)
    line["response"]["body"].update(body_changes)
    return line


@pytest.mark.parametrize("created, why", [
    (1794052800000, "(milliseconds?)"),           # a time in milliseconds: once "year 58822 is out of range"
    (10**15, "is not a Unix time in seconds"),      # past year 9999
    (1e20, "is not a Unix time in seconds"),
    (253402300800, "is not a Unix time in seconds"),  # one second past 9999-12-31T23:59:59Z
    (-5, "is not a Unix time in seconds"),
    ("1794060000", "is not a Unix time in seconds"),  # once 1970 without a word
    (True, "is not a Unix time in seconds"),
])
def test_a_created_time_that_is_not_one_falls_back_and_the_ledger_says_why(tmp_path, created, why):
    export = write_export(tmp_path / "export", "openai-chat", ["r-0", "r-1"])
    results = tmp_path / "output.jsonl"
    results.write_bytes(jsonl([openai_chat_answer("r-0", created=created), openai_chat_answer("r-1")]))
    code, manifest = import_batch("openai-chat", [results], export, tmp_path / "import", "--received-at", RECEIVED_AT)
    assert code == 0 and manifest["conservation"]["holds"] and manifest["requests"]["imported"] == 2
    bad, good = rows_of(tmp_path / "import" / batch_import.LEDGER)
    assert bad["outcome"] == "imported" and why in bad["received_at_problem"] and bad["received_at_problem"].startswith("created ")
    assert good["received_at_problem"] is None
    received = {c["candidate_id"]: c["received_at"] for c in rows_of(tmp_path / "import" / batch_import.CANDIDATES)}
    assert received == {bad["candidate_id"]: RECEIVED_AT, good["candidate_id"]: fake.CREATED_ISO}
    assert manifest["received_at_unreadable"] == 1


def test_without_received_at_an_unreadable_time_is_the_unknown_time():
    book = ImportLedger(PROVIDERS["openai-chat"], exported("openai-chat"))
    row, candidate = book.add("f", 1, orjson.dumps(openai_chat_answer("r-0", created=1794052800000)))
    assert candidate["received_at"] == UNKNOWN_TIME and "milliseconds" in row["received_at_problem"]


def test_a_responses_created_at_as_the_openai_sdk_writes_it_is_read():
    """``openai.types.responses.Response`` types created_at as a float: its JSON says 1794060000.0."""
    from openai.types.responses import Response

    line = result_line("openai-responses", "r-0", fake.ANSWER)
    body = {**line["response"]["body"], "created_at": 1794060000}
    line["response"]["body"] = orjson.loads(Response.model_validate(body).model_dump_json())
    assert line["response"]["body"]["created_at"] == 1794060000.0
    assert type(line["response"]["body"]["created_at"]) is float
    book = ImportLedger(PROVIDERS["openai-responses"], exported("openai-responses"))
    row, candidate = book.add("f", 1, orjson.dumps(line))
    assert row["outcome"] == "imported" and row["received_at_problem"] is None
    assert candidate["received_at"] == "2026-11-07T14:00:00Z"  # not 1970
    assert candidate["raw_response"] == ANSWER_TEXT


def test_a_fraction_of_a_second_is_dropped():
    line = result_line("openai-responses", "r-0", fake.ANSWER)
    line["response"]["body"]["created_at"] = 1794060000.75
    _, candidate = ImportLedger(PROVIDERS["openai-responses"], exported("openai-responses")).add("f", 1, orjson.dumps(line))
    assert candidate["received_at"] == "2026-11-07T14:00:00Z"


@pytest.mark.parametrize("processed_time", [12345, "last tuesday", ["2026-01-01T00:00:00Z"]])
def test_a_vertex_time_the_job_cannot_read_is_not_a_received_at(processed_time):
    line = result_line("vertex", "r-0", fake.ANSWER)
    line["processed_time"] = processed_time
    # The response's own createTime is the next best time: no problem to report.
    row, candidate = ImportLedger(PROVIDERS["vertex"], exported("vertex"), received_at=RECEIVED_AT).add(
        "f", 1, orjson.dumps(line))
    assert candidate["received_at"] == line["response"]["createTime"] and row["received_at_problem"] is None
    # Without one: the fallback, and why.
    del line["response"]["createTime"]
    row, candidate = ImportLedger(PROVIDERS["vertex"], exported("vertex"), received_at=RECEIVED_AT).add(
        "f", 1, orjson.dumps(line))
    assert candidate["received_at"] == RECEIVED_AT and row["received_at_problem"].startswith("processed_time ")
    assert row["received_at_problem"].endswith("is not an RFC 3339 time")


def test_a_vertex_label_that_is_not_a_string_is_no_id():
    """Once an unhashable label crashed the import; now the line is matched by its request's texts."""
    line = result_line("vertex", "r-1", fake.ANSWER)
    line["request"]["labels"][VERTEX_LABEL] = ["r-1"]
    row, candidate = ImportLedger(PROVIDERS["vertex"], exported("vertex")).add("f", 1, orjson.dumps(line))
    assert row["outcome"] == "imported" and row["request_id"] == "r-1" and candidate is not None


def test_wrong_types_become_a_reason_and_typed_columns():
    """Lines the fuzz test below found or stands for: a reason each, and columns of one type."""
    book = ImportLedger(PROVIDERS["openai-chat"], exported("openai-chat"))
    row, _ = book.add("f", 1, orjson.dumps({"custom_id": "r-0", "response": None, "error": {"code": [], "message": "x"}}))
    assert row["outcome"] == "errored" and row["error"]  # once: TypeError, unhashable type: 'list'
    errored = result_line("openai-chat", "r-1", fake.FAIL)
    errored["response"]["status_code"] = "400"
    row, _ = book.add("f", 2, orjson.dumps(errored))
    assert row["outcome"] == "errored" and row["http_status"] is None
    answered = result_line("openai-chat", "r-2", fake.ANSWER)
    answered["response"]["body"]["choices"][0]["finish_reason"] = {"why": "stop"}
    answered["response"]["body"]["model"] = 4
    row, candidate = book.add("f", 3, orjson.dumps(answered))
    assert row["outcome"] == "imported" and (row["stop_reason"], row["response_model"]) == ('{"why":"stop"}', "4")
    row, _ = book.add("f", 4, orjson.dumps({"custom_id": "r-3", "response": {"status_code": 200, "body": {"choices": []}}}))
    assert row["outcome"] == "errored" and row["error"].startswith("unrecognised result shape (IndexError")


# --- damaged files ----------------------------------------------------------------------------

def answers(provider_name: str, rids=RIDS) -> list[dict]:
    return [result_line(provider_name, rid, fake.ANSWER, n=n, text=f'{{"spells": [], "n": "{rid}-{n}"}}')
            for n, rid in enumerate(rids, start=1)]


def incompressible_answers(provider_name: str, rids) -> list[dict]:
    """Answers of 1 KiB of digest text each, so a compressed file of them is large."""
    texts = ["".join(hashlib.sha256(f"{rid}/{j}".encode()).hexdigest() for j in range(16)) for rid in rids]
    return [result_line(provider_name, rid, fake.ANSWER, n=n, text=text) for n, (rid, text) in enumerate(zip(rids, texts))]


@pytest.mark.parametrize("suffix, compress", [(".gz", gzip.compress), (".bz2", bz2.compress)])
def test_a_cut_compressed_results_file_is_an_unreadable_file(tmp_path, capsys, suffix, compress):
    rids = [f"r-{i}" for i in range(400)]
    export = write_export(tmp_path / "export", "anthropic", rids)
    whole = compress(jsonl(incompressible_answers("anthropic", rids[:300])))
    cut = tmp_path / f"results{suffix}"
    cut.write_bytes(whole[: len(whole) * 3 // 4])
    intact = tmp_path / "more.jsonl"  # another file of the batch: read in full all the same
    intact.write_bytes(jsonl(answers("anthropic", rids[300:305])))
    code, manifest = import_batch("anthropic", [cut, intact], export, tmp_path / "import")
    assert code == 2
    assert manifest["unreadable_files"] == {"count": 1, "paths": [str(cut)], "records_may_be_missing": True}
    assert not manifest["conservation"]["holds"]
    assert sum(manifest["requests"].values()) == manifest["exported"] == 400  # every request is still classified
    [cut_file] = [f for f in manifest["results_files"] if f["path"] == str(cut)]
    assert cut_file["unreadable"] and "could not be read past line" in cut_file["unreadable"]
    assert [f["unreadable"] for f in manifest["results_files"] if f["path"] == str(intact)] == [None]
    ledger = rows_of(tmp_path / "import" / batch_import.LEDGER)
    from_cut = [row for row in ledger if row["file"] == str(cut)]
    read = from_cut[:-1]
    # What could be decompressed before the damage is imported: for gzip, most of the file; a
    # bz2 block (up to 900 kB of text) is all or nothing, and this file is one block.
    assert all(row["outcome"] == "imported" for row in read) and (len(read) > 100 if suffix == ".gz" else not read)
    assert from_cut[-1] == {**from_cut[-1], "outcome": "unreadable", "line": "", "line_number": len(read) + 1,
                            "error": cut_file["unreadable"]}
    assert len(ledger) == manifest["ledger_rows"] == sum(f["lines"] for f in manifest["results_files"])
    assert manifest["requests"]["imported"] == len(read) + 5 == manifest["candidates_written"]
    assert manifest["result_lines"]["unreadable"] == 1
    assert manifest["not_imported"]["missing"] == sorted(set(rids) - {row["request_id"] for row in ledger})
    assert f"{cut} could not be read past line {len(read)}: EOFError" in capsys.readouterr().err


def test_a_results_file_that_is_not_what_its_name_says_is_unreadable(tmp_path):
    export = write_export(tmp_path / "export", "gemini")
    bogus = tmp_path / "results.jsonl.gz"
    bogus.write_bytes(jsonl(answers("gemini")))  # not compressed at all
    code, manifest = import_batch("gemini", [bogus], export, tmp_path / "import")
    assert code == 2 and manifest["unreadable_files"]["paths"] == [str(bogus)]
    [row] = rows_of(tmp_path / "import" / batch_import.LEDGER)
    assert row["outcome"] == "unreadable" and row["line_number"] == 1 and "past line 0" in row["error"]
    assert manifest["requests"]["missing"] == len(RIDS)


@pytest.mark.parametrize("compress", [None, gzip.compress])
def test_a_byte_order_mark_at_the_start_of_a_results_file_is_skipped(tmp_path, compress):
    export = write_export(tmp_path / "export", "openai-chat")
    lines = [orjson.dumps(line) for line in answers("openai-chat")]
    data = UTF8_BOM + b"\n".join(lines) + b"\n"
    results = tmp_path / ("output.jsonl.gz" if compress else "output.jsonl")
    results.write_bytes(compress(data) if compress else data)
    code, manifest = import_batch("openai-chat", [results], export, tmp_path / "import")
    assert code == 0 and manifest["requests"]["imported"] == len(RIDS)  # the first answer too: not paid for twice
    first = rows_of(tmp_path / "import" / batch_import.LEDGER)[0]
    assert first["outcome"] == "imported" and first["line"].encode() == lines[0]  # the line, without the file's mark
    assert manifest["results_files"][0]["sha256"] == hashlib.sha256(data).hexdigest()  # the file as read, mark included


def test_a_byte_order_mark_elsewhere_is_part_of_its_line(tmp_path):
    """As the job reads JSON Lines: only the file's first bytes can be its mark."""
    export = write_export(tmp_path / "export", "openai-chat")
    lines = [orjson.dumps(line) for line in answers("openai-chat")]
    lines[1] = UTF8_BOM + lines[1]
    results = tmp_path / "output.jsonl"
    results.write_bytes(b"\n".join(lines) + b"\n")
    code, manifest = import_batch("openai-chat", [results], export, tmp_path / "import")
    assert code == 0 and manifest["requests"]["missing"] == 1
    assert rows_of(tmp_path / "import" / batch_import.LEDGER)[1]["outcome"] == "unreadable"


# --- the export index -----------------------------------------------------------------------

@pytest.mark.parametrize("attempt", [0, -1, MAX_ATTEMPT_NUMBER + 1, 2**63 - 1, "2", 2.0, True, None, [2]])
def test_an_index_attempt_outside_the_jobs_range_is_an_index_error(tmp_path, attempt):
    export = write_export(tmp_path / "export", "anthropic", attempt=attempt)
    results = tmp_path / "results.jsonl"
    results.write_bytes(jsonl(answers("anthropic")))
    with pytest.raises(ExportIndexError) as stopped:
        import_batch("anthropic", [results], export, tmp_path / "import")
    message = str(stopped.value)
    assert "\n" not in message and "requests-00000-of-00001.index.jsonl:1" in message
    assert f"attempt {'(a JSON array)' if attempt == [2] else repr(attempt)} is not an integer from 1 to 2147483647" in message


def test_the_highest_attempt_number_is_imported(tmp_path):
    export = write_export(tmp_path / "export", "anthropic", attempt=MAX_ATTEMPT_NUMBER)
    results = tmp_path / "results.jsonl"
    results.write_bytes(jsonl(answers("anthropic")))
    code, _ = import_batch("anthropic", [results], export, tmp_path / "import")
    candidates = rows_of(tmp_path / "import" / batch_import.CANDIDATES)
    assert code == 0 and [c["attempt"] for c in candidates] == [MAX_ATTEMPT_NUMBER] * len(RIDS)
    assert all(parse_candidate(orjson.dumps(c)).attempt == MAX_ATTEMPT_NUMBER for c in candidates)


@pytest.mark.parametrize("field, value", [("request_id", ["r-0"]), ("wire_id", 7), ("line", "1"), ("kind", "later"),
                                          ("content_key", {"a": 1})])
def test_an_index_row_of_the_wrong_types_is_an_index_error(tmp_path, field, value):
    export = write_export(tmp_path / "export", "anthropic", **{field: value})
    results = tmp_path / "results.jsonl"
    results.write_bytes(jsonl(answers("anthropic")))
    with pytest.raises(ExportIndexError) as stopped:
        import_batch("anthropic", [results], export, tmp_path / "import")
    assert f"index {field} " in str(stopped.value) and "\n" not in str(stopped.value)


# --- fuzz: the ledger --------------------------------------------------------------------------

# Wrong types at every place a parser reads, and the times that once crashed the import.
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from([1794052800000, 1794060000.0, 1794060000.5, 253402300800, 10**19, 1e300, -1, 0, "", "r-0",
                     "2026-01-01T00:00:00Z", "not a time", "batch_expired", "batch_cancelled", "succeeded", "errored",
                     "expired", "canceled", "message", "output_text", "refusal", "text", "SAFETY", "MAX_TOKENS",
                     "incomplete", "failed", 200, 400, 500]),
)
JSON_VALUES = st.recursive(
    SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)
DELETE = object()


def json_paths(value, prefix=()):
    """Every place in a JSON value, the root included."""
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        yield from json_paths(inner, prefix + (key,))


def replaced(value, path, new):
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy = dict(value) if isinstance(value, dict) else list(value)
    if not rest and new is DELETE:
        del copy[head]
    else:
        copy[head] = replaced(value[head], rest, new)
    return copy


@st.composite
def hostile_lines(draw, provider_name: str) -> bytes:
    """A provider line with wrong values (or keys removed) anywhere, bare JSON values, or any bytes."""
    shape = draw(st.sampled_from(["mutated", "mutated", "mutated", "json", "bytes"]))
    if shape == "bytes":
        return draw(st.binary(min_size=1, max_size=80))
    if shape == "json":
        return orjson.dumps(draw(JSON_VALUES))
    rid = draw(st.sampled_from(RIDS + ["r-stranger"]))
    line = None
    while line is None:
        line = result_line(provider_name, rid, draw(st.sampled_from(FATES)), n=draw(st.integers(1, 99)))
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(list(json_paths(line))))
        line = replaced(line, path, draw(st.one_of(JSON_VALUES, st.just(DELETE)) if path else JSON_VALUES))
    return orjson.dumps(line)


def check_row(row: dict, file: str, number: int) -> None:
    assert set(row) == ROW_KEYS and row["outcome"] in LINE_OUTCOMES
    assert (row["file"], row["line_number"]) == (file, number)
    for name in ("request_id", "stop_reason", "error", "candidate_id", "response_model", "received_at_problem",
                 "usage_problem"):
        assert row[name] is None or isinstance(row[name], str), name
    assert row["http_status"] is None or type(row["http_status"]) is int
    assert isinstance(row["line"], str) and row["line_encoding"] in ("utf-8", "base64")
    assert row["outcome"] not in ("unreadable", "unmatched") or row["error"]  # a reason, always
    orjson.dumps(row)


@pytest.mark.parametrize("provider_name", PROVIDER_NAMES)
def test_fuzz_no_result_line_crashes_the_ledger(provider_name):
    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(hostile_lines(provider_name), max_size=12))
    def run(lines):
        book = ImportLedger(PROVIDERS[provider_name], exported(provider_name), received_at=RECEIVED_AT)
        candidates = []
        fed = [raw for raw in lines if raw.strip()]  # the reader skips blank lines
        for number, raw in enumerate(fed, start=1):
            row, candidate = book.add("results.jsonl", number, raw)
            check_row(row, "results.jsonl", number)
            assert (candidate is not None) == (row["candidate_id"] is not None)
            if candidate is not None:
                candidates.append(candidate)
                parsed = parse_candidate(orjson.dumps(candidate))  # the job takes every candidate as an envelope
                assert parsed.attempt == 2 and isinstance(parsed.received_at, str)
                # A usage that could not be read is null (and says why), never zeros or half a usage.
                assert parsed.usage is None or parsed.usage.batch
                assert not row["usage_problem"] or candidate["usage"] is None
                if row["received_at_problem"]:
                    assert candidate["received_at"] == RECEIVED_AT
                else:
                    datetime.fromisoformat(candidate["received_at"])  # a time the job reads
        summary = book.summary()
        conservation = summary["conservation"]
        assert conservation["holds"]
        assert conservation["exported"] == len(RIDS) == sum(summary["requests"].values())
        assert sum(summary["result_lines"].values()) == len(fed)  # every non-blank line, exactly one row
        assert len(candidates) == summary["requests"]["imported"]
        billed = [c["usage"] for c in candidates if c["usage"] is not None]
        total = summary["usage"]["total"]
        assert (total["answers"], total["with_usage"]) == (len(candidates), len(billed))
        assert total["input_tokens"] == sum(u["input_tokens"] for u in billed)
        assert total["output_tokens"] == sum(u["output_tokens"] for u in billed)

    run()


# --- fuzz: whole files through import-batch --------------------------------------------------

@st.composite
def hostile_files(draw) -> tuple[bytes, str]:
    """(file bytes, file name): lines of any kind, a byte-order mark or not, compressed or not, cut or not."""
    lines = draw(st.lists(st.one_of(hostile_lines("openai-chat"), st.sampled_from([b"", b"  ", b"\r"])), max_size=10))
    data = (UTF8_BOM if draw(st.booleans()) else b"") + b"\n".join(lines) + (b"\n" if draw(st.booleans()) else b"")
    compression = draw(st.sampled_from(["", ".gz", ".bz2"]))
    if compression:
        data = (gzip.compress if compression == ".gz" else bz2.compress)(data)
        if draw(st.booleans()):
            data = data[: draw(st.integers(0, max(0, len(data) - 1)))]
    return data, "results.jsonl" + compression


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_files())
def test_fuzz_no_results_file_crashes_the_import(case):
    data, name = case
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        export = write_export(root / "export", "openai-chat")
        results = root / name
        results.write_bytes(data)
        code, manifest = import_batch("openai-chat", [results], export, root / "import")
        ledger = rows_of(root / "import" / batch_import.LEDGER)
        [read] = manifest["results_files"]
        unreadable = manifest["unreadable_files"]["count"] == 1
        assert unreadable == (read["unreadable"] is not None)
        assert code == (2 if unreadable else 0) and manifest["conservation"]["holds"] == (not unreadable)
        assert len(ledger) == manifest["ledger_rows"] == read["lines"] == sum(manifest["result_lines"].values())
        assert sum(manifest["requests"].values()) == manifest["exported"] == len(RIDS)
        if not unreadable:
            text = gzip.decompress(data) if name.endswith(".gz") else bz2.decompress(data) if name.endswith(".bz2") else data
            segments = text.split(b"\n")[:-1] if text.endswith(b"\n") or not text else text.split(b"\n")
            if segments and segments[0].startswith(UTF8_BOM):
                segments[0] = segments[0][len(UTF8_BOM):]
            assert read["lines"] == sum(1 for line in segments if line.strip())
            assert read["blank_lines"] == sum(1 for line in segments if not line.strip())
            assert read["sha256"] == hashlib.sha256(text + (b"" if text.endswith(b"\n") or not text else b"\n")).hexdigest()
