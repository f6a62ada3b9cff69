"""Billed usage through the loop (contract §3.2 and §3.3 ``usage``, §6.4; issue 41 item 1).

Result lines are built with the official SDKs' own types (openai ``ChatCompletion`` and
``Response``, anthropic ``MessageBatchIndividualResponse``, google-genai
``GenerateContentResponse``), each line with usage numbers of its own, and validated by the
models of tests/test_batch_provider_shapes.py. The import must write exactly what each provider
billed into the candidate's (and the verdict's) ``usage``, in the one shape of ``domain.usage``,
and null where the line says nothing; the job must take candidates carrying it, from JSON Lines
and Avro, to the same outcomes as without.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import anthropic.types as anthropic_types
import anthropic.types.messages as anthropic_batches
import fastavro
import google.genai.types as genai_types
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from openai.types.chat.chat_completion import Choice
from openai.types.completion_usage import CompletionUsage, PromptTokensDetails
from openai.types.responses import Response, ResponseOutputMessage, ResponseOutputText, ResponseUsage
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from domain.assets import CANDIDATE_INPUT_SCHEMA, input_field_shape, load_json_asset
from domain.batch.ledger import ExportedRequest, ImportLedger
from domain.batch.providers import PROVIDERS, VERTEX_LABEL
from domain.intake import EnvelopeError, _parse_candidate_record, parse_candidate
from domain.judges import VerdictEnvelopeError, parse_verdict
from domain.reprocess import RunConfig, process_source
from domain.usage import Usage
from fixture_archive import good_records, transcript, S1_CHUNKS, S1_IDS
from pipelines import batch_import
from test_batch_provider_shapes import validate_result_line
from transforms.raw_records import avro_record_to_json, project

PROVIDER_NAMES = sorted(PROVIDERS)
CREATED = 1767225600
FP = "sha256:" + "a" * 64
ANSWER = '{"spells": []}'

# (request id, kind, family, the export's estimate of its input tokens)
REQUESTS = [("r-retry-a", "retry", "spells", 1100), ("r-retry-b", "retry", "combat-turns", 2500),
            ("r-retry-c", "retry", "spells", 700), ("r-refresh", "refresh", "spells", 3000),
            ("r-judge", "judge", "combat-turns", 800)]
# What each provider's line reports, in its own terms: every number distinct, per line and per field.
NATIVE = {
    "r-retry-a": {"prompt": 1201, "cached": 17, "output": 301, "cache_creation": 5, "thoughts": 11},
    "r-retry-b": {"prompt": 2403, "cached": 0, "output": 402, "cache_creation": 0, "thoughts": 0},
    "r-refresh": {"prompt": 3605, "cached": 1024, "output": 503, "cache_creation": 7, "thoughts": 29},
    "r-judge": {"prompt": 907, "cached": 128, "output": 97, "cache_creation": 3, "thoughts": 13},
}
WITHOUT_USAGE = "r-retry-c"  # answered, but its line says nothing about usage


def expected_usage(provider: str, n: dict) -> dict:
    """The documented mapping (docs/batch.md, "Billed usage"), written out per provider."""
    if provider.startswith("openai"):  # prompt tokens include the cached ones; output includes reasoning
        return {"input_tokens": n["prompt"], "output_tokens": n["output"], "cached_input_tokens": n["cached"], "batch": True}
    if provider == "anthropic":  # input_tokens is only what follows the cache: the three parts add up to the prompt
        return {"input_tokens": n["prompt"] + n["cache_creation"] + n["cached"], "output_tokens": n["output"],
                "cached_input_tokens": n["cached"], "batch": True}
    # Gemini, Vertex: thinking is billed as output; a zero count is omitted from the JSON
    return {"input_tokens": n["prompt"], "output_tokens": n["output"] + n["thoughts"],
            "cached_input_tokens": n["cached"], "batch": True}


# --- result lines built with the SDKs' types ---------------------------------------------------

def openai_chat_line(rid: str, n: dict | None) -> dict:
    usage = None if n is None else CompletionUsage(
        prompt_tokens=n["prompt"], completion_tokens=n["output"], total_tokens=n["prompt"] + n["output"],
        prompt_tokens_details=PromptTokensDetails(cached_tokens=n["cached"]))
    body = ChatCompletion(id=f"chatcmpl-{rid}", object="chat.completion", created=CREATED, model="gpt-test",
                          choices=[Choice(index=0, finish_reason="stop",
                                          message=ChatCompletionMessage(role="assistant", content=ANSWER))],
                          usage=usage)
    return {"id": f"batch_req_{rid}", "custom_id": rid,
            "response": {"status_code": 200, "request_id": f"req_{rid}", "body": body.model_dump(mode="json")},
            "error": None}


def openai_responses_line(rid: str, n: dict | None) -> dict:
    usage = None if n is None else ResponseUsage(
        input_tokens=n["prompt"], input_tokens_details=InputTokensDetails(cached_tokens=n["cached"], cache_write_tokens=0),
        output_tokens=n["output"], output_tokens_details=OutputTokensDetails(reasoning_tokens=n["thoughts"]),
        total_tokens=n["prompt"] + n["output"])
    body = Response(id=f"resp_{rid}", created_at=CREATED, model="gpt-test", object="response", status="completed",
                    output=[ResponseOutputMessage(id=f"msg_{rid}", role="assistant", status="completed", type="message",
                                                  content=[ResponseOutputText(type="output_text", text=ANSWER,
                                                                              annotations=[])])],
                    parallel_tool_calls=True, tool_choice="auto", tools=[], usage=usage)
    return {"id": f"batch_req_{rid}", "custom_id": rid,
            "response": {"status_code": 200, "request_id": f"req_{rid}", "body": body.model_dump(mode="json")},
            "error": None}


def anthropic_line(rid: str, n: dict | None) -> dict:
    usage = anthropic_types.Usage(input_tokens=(n or {}).get("prompt", 0), output_tokens=(n or {}).get("output", 0),
                                  cache_creation_input_tokens=(n or {}).get("cache_creation"),
                                  cache_read_input_tokens=(n or {}).get("cached"))
    message = anthropic_types.Message(id=f"msg_{rid}", type="message", role="assistant", model="claude-test",
                                      content=[anthropic_types.TextBlock(type="text", text=ANSWER)],
                                      stop_reason="end_turn", stop_sequence=None, usage=usage)
    line = anthropic_batches.MessageBatchIndividualResponse(
        custom_id=rid, result=anthropic_batches.MessageBatchSucceededResult(type="succeeded", message=message))
    dumped = line.model_dump(mode="json")
    if n is None:  # the type requires usage; a line without it is the same line with the key gone
        del dumped["result"]["message"]["usage"]
    return dumped


def gemini_response(n: dict | None) -> dict:
    metadata = None if n is None else genai_types.GenerateContentResponseUsageMetadata(
        prompt_token_count=n["prompt"], candidates_token_count=n["output"],
        # proto3 JSON omits a zero count: the service writes no key, and neither does this line
        cached_content_token_count=n["cached"] or None, thoughts_token_count=n["thoughts"] or None,
        total_token_count=n["prompt"] + n["output"] + n["thoughts"])
    response = genai_types.GenerateContentResponse(
        candidates=[genai_types.Candidate(content=genai_types.Content(role="model", parts=[genai_types.Part(text=ANSWER)]),
                                          finish_reason=genai_types.FinishReason.STOP, index=0)],
        usage_metadata=metadata, model_version="gemini-test")
    return response.model_dump(mode="json", by_alias=True, exclude_none=True)


def gemini_line(rid: str, n: dict | None) -> dict:
    return {"key": rid, "response": gemini_response(n)}


def vertex_line(rid: str, n: dict | None) -> dict:
    request = {"contents": [{"role": "user", "parts": [{"text": f"the excerpt of {rid}"}]}],
               "labels": {VERTEX_LABEL: rid}}
    return {"status": "", "processed_time": "2026-01-01T00:00:01.000+00:00", "request": request,
            "response": gemini_response(n)}


LINES = {"openai-chat": openai_chat_line, "openai-responses": openai_responses_line, "anthropic": anthropic_line,
         "gemini": gemini_line, "vertex": vertex_line}


def result_lines(provider: str) -> list[bytes]:
    lines = []
    for rid, *_ in REQUESTS:
        line = LINES[provider](rid, NATIVE.get(rid))
        if rid in NATIVE or provider != "anthropic":  # (anthropic's Message requires usage: built, then removed)
            validate_result_line(provider, line)  # what the SDK's response models describe
        lines.append(orjson.dumps(line))
    return lines


def requests_of(provider: str) -> list[ExportedRequest]:
    made = []
    for n, (rid, kind, family, estimate) in enumerate(REQUESTS, start=1):
        judging = {"judged_candidate_id": "c-judged", "candidate_sha256": "b" * 64, "judge": "combat-semantics",
                   "judge_fingerprint": FP} if kind == "judge" else {}
        made.append(ExportedRequest(rid, PROVIDERS[provider].wire_id(rid), family, "crd3:S1", "x-1", 2, provider, "m",
                                    FP, FP, "0" * 64, n, kind=kind, estimated_input_tokens=estimate, **judging))
    return made


def imported(provider: str) -> tuple[dict[str, dict], dict]:
    """(request id -> imported record, ledger summary) for the SDK-built lines."""
    ledger = ImportLedger(PROVIDERS[provider], requests_of(provider))
    records = {}
    for number, raw in enumerate(result_lines(provider), start=1):
        row, record = ledger.add("results.jsonl", number, raw)
        assert row["outcome"] == "imported" and row["usage_problem"] is None, row
        records[row["request_id"]] = record
    return records, ledger.summary()


# --- the five targets ----------------------------------------------------------------------------

@pytest.mark.parametrize("provider", PROVIDER_NAMES)
def test_each_answer_carries_exactly_what_its_provider_billed(provider):
    records, _ = imported(provider)
    for rid, native in NATIVE.items():
        assert records[rid]["usage"] == expected_usage(provider, native), (provider, rid)
    assert "verdict_id" in records["r-judge"]  # a judge's answer is a verdict record, with its usage too
    assert records[WITHOUT_USAGE]["usage"] is None  # unknown, never zeros


@pytest.mark.parametrize("provider", PROVIDER_NAMES)
def test_the_summary_totals_billed_tokens_per_kind_and_family_beside_the_estimate(provider):
    _, summary = imported(provider)
    usage = summary["usage"]
    billed = {rid: expected_usage(provider, n) for rid, n in NATIVE.items()}
    retry_spells = usage["by_kind"]["retry"]["spells"]  # r-retry-a billed, r-retry-c said nothing
    assert (retry_spells["answers"], retry_spells["with_usage"], retry_spells["without_usage"]) == (2, 1, 1)
    assert retry_spells["input_tokens"] == billed["r-retry-a"]["input_tokens"]
    assert retry_spells["cached_input_tokens"] == billed["r-retry-a"]["cached_input_tokens"]
    assert retry_spells["output_tokens"] == billed["r-retry-a"]["output_tokens"]
    assert retry_spells["estimate"] == {"answers": 1, "billed_input_tokens": billed["r-retry-a"]["input_tokens"],
                                        "estimated_input_tokens": 1100,
                                        "billed_per_estimated": round(billed["r-retry-a"]["input_tokens"] / 1100, 4)}
    assert usage["by_kind"]["refresh"]["spells"]["output_tokens"] == billed["r-refresh"]["output_tokens"]
    assert usage["by_kind"]["judge"]["combat-turns"]["input_tokens"] == billed["r-judge"]["input_tokens"]
    assert set(usage["by_kind"]["judge"]) == {"combat-turns"} and usage["by_kind"]["retry"].keys() == {"spells",
                                                                                                      "combat-turns"}
    total = usage["total"]
    for name in ("input_tokens", "cached_input_tokens", "output_tokens"):
        assert total[name] == sum(u[name] for u in billed.values()), name
        per_cell = sum(cell[name] for families in usage["by_kind"].values() for cell in families.values())
        assert per_cell == total[name], name  # the cells add up to the total
    estimated = sum(est for rid, _, _, est in REQUESTS if rid != WITHOUT_USAGE)
    assert usage["calibration"] == {"provider": provider, "answers": 4,
                                    "billed_input_tokens": total["input_tokens"], "estimated_input_tokens": estimated,
                                    "billed_per_estimated": round(total["input_tokens"] / estimated, 4)}


def test_the_mapping_reads_the_sdk_field_names():
    """The names read are the SDKs' own (a renamed field would make every usage null)."""
    assert {"prompt_tokens", "completion_tokens", "prompt_tokens_details"} <= set(CompletionUsage.model_fields)
    assert "cached_tokens" in PromptTokensDetails.model_fields
    assert {"input_tokens", "output_tokens", "input_tokens_details"} <= set(ResponseUsage.model_fields)
    assert "cached_tokens" in InputTokensDetails.model_fields
    assert {"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"} <= set(
        anthropic_types.Usage.model_fields)
    aliases = {field.alias for field in genai_types.GenerateContentResponseUsageMetadata.model_fields.values()}
    assert {"promptTokenCount", "candidatesTokenCount", "cachedContentTokenCount", "thoughtsTokenCount",
            "toolUsePromptTokenCount"} <= aliases


@pytest.mark.parametrize("provider", PROVIDER_NAMES)
def test_a_usage_that_cannot_be_read_leaves_the_answer_imported_with_usage_null(provider):
    """A wrong type or an impossible count in the usage never costs the answer, and is never half read."""
    line = orjson.loads(result_lines(provider)[0])  # r-retry-a
    if provider.startswith("openai"):
        field = "prompt_tokens" if provider == "openai-chat" else "input_tokens"
        line["response"]["body"]["usage"][field] = "1201"
    elif provider == "anthropic":
        line["result"]["message"]["usage"]["cache_read_input_tokens"] = -17
    else:
        line["response"]["usageMetadata"]["cachedContentTokenCount"] = 10**6  # more cached than the whole prompt
    ledger = ImportLedger(PROVIDERS[provider], requests_of(provider))
    row, record = ledger.add("results.jsonl", 1, orjson.dumps(line))
    assert row["outcome"] == "imported" and record["raw_response"] == ANSWER
    assert record["usage"] is None and row["usage_problem"]
    assert ledger.summary()["usage"]["usage_unreadable"] == 1


def test_import_batch_writes_the_usage_into_candidates_and_verdicts(tmp_path):
    """Through the command: the files the next run reads, and the manifest's totals."""
    provider = "anthropic"
    export = tmp_path / "export"
    export.mkdir()
    request_lines = [orjson.dumps({"custom_id": rid, "params": {"model": "m"}}) for rid, *_ in REQUESTS]
    (export / "requests-00000-of-00001.jsonl").write_bytes(b"".join(line + b"\n" for line in request_lines))
    index = []
    for n, ((rid, kind, family, estimate), line) in enumerate(zip(REQUESTS, request_lines), start=1):
        row = {"line": n, "request_id": rid, "kind": kind, "wire_id": rid, "family": family, "source_id": "crd3:S1",
               "chunk_id": "x-1", "attempt": 2, "provider": provider, "model": "m", "prompt_fingerprint": FP,
               "schema_fingerprint": FP, "line_sha256": hashlib.sha256(line).hexdigest(),
               "estimated_input_tokens": estimate}
        if kind == "judge":
            row.update({"replaces_candidate_id": "c-judged", "candidate_sha256": "b" * 64,
                        "judge": "combat-semantics", "judge_fingerprint": FP})
        index.append(orjson.dumps(row))
    (export / "requests-00000-of-00001.index.jsonl").write_bytes(b"".join(line + b"\n" for line in index))
    results = tmp_path / "results.jsonl"
    results.write_bytes(b"".join(line + b"\n" for line in result_lines(provider)))
    out = tmp_path / "import"
    assert batch_import.main(["--provider", provider, "--results", str(results), "--requests",
                              str(export / "requests-*"), "--output", str(out)]) == 0
    candidates = [orjson.loads(line) for line in (out / batch_import.CANDIDATES).read_bytes().splitlines()]
    verdicts = [orjson.loads(line) for line in (out / batch_import.VERDICTS).read_bytes().splitlines()]
    ledger = {row["candidate_id"]: row["request_id"] for row in
              map(orjson.loads, (out / batch_import.LEDGER).read_bytes().splitlines())}
    for record in candidates + verdicts:
        rid = ledger[record.get("verdict_id") or record["candidate_id"]]
        wanted = expected_usage(provider, NATIVE[rid]) if rid in NATIVE else None
        assert record["usage"] == wanted, rid
        parse_candidate(orjson.dumps(record)) if "candidate_id" in record and "verdict_id" not in record else (
            parse_verdict(orjson.dumps(record)))  # the job reads each back
    assert len(verdicts) == 1 and len(candidates) == 4
    manifest = orjson.loads((out / batch_import.MANIFEST).read_bytes())
    assert manifest["usage"]["total"]["input_tokens"] == sum(
        expected_usage(provider, n)["input_tokens"] for n in NATIVE.values())


# --- the job reads usage ---------------------------------------------------------------------------

USAGE = {"input_tokens": 1201, "output_tokens": 301, "cached_input_tokens": 17, "batch": True}


def test_the_candidate_envelope_keeps_a_usage_both_ways():
    record = {**good_records()[0], "usage": USAGE}
    line = orjson.dumps(record)
    assert parse_candidate(line) == _parse_candidate_record(line)
    assert parse_candidate(line).usage == Usage(input_tokens=1201, output_tokens=301, cached_input_tokens=17, batch=True)
    for absent in ({k: v for k, v in record.items() if k != "usage"}, {**record, "usage": None}):
        assert parse_candidate(orjson.dumps(absent)).usage is None
    without_cached = {**record, "usage": {k: v for k, v in USAGE.items() if k != "cached_input_tokens"}}
    assert parse_candidate(orjson.dumps(without_cached)).usage.cached_input_tokens is None


MALFORMED_USAGE = [
    ("[]", "candidate usage (a JSON array) must be an object or null"),
    ("5", "candidate usage 5 must be an object or null"),
    ({**USAGE, "input_tokens": -1}, "candidate usage input_tokens -1 is not a token count (an integer from 0 to 2^63-1)"),
    ({**USAGE, "output_tokens": 2**63}, "candidate usage output_tokens 9223372036854775808 is not a token count"),
    ({**USAGE, "output_tokens": 3.0}, "candidate usage output_tokens 3.0 is not a token count"),
    ({**USAGE, "input_tokens": "1201"}, "candidate usage input_tokens '1201' is not a token count"),
    ({**USAGE, "input_tokens": True}, "candidate usage input_tokens True is not a token count"),
    ({k: v for k, v in USAGE.items() if k != "output_tokens"}, "candidate usage output_tokens None is not a token count"),
    ({**USAGE, "cached_input_tokens": -3}, "candidate usage cached_input_tokens -3 is not a token count"),
    ({**USAGE, "batch": "yes"}, "candidate usage batch 'yes' is not true or false"),
    ({k: v for k, v in USAGE.items() if k != "batch"}, "candidate usage batch None is not true or false"),
    ({**USAGE, "cached_input_tokens": 1202}, "candidate usage cached_input_tokens 1202 is more than input_tokens 1201"),
]


@pytest.mark.parametrize("usage, reason", MALFORMED_USAGE)
def test_a_malformed_usage_is_a_dead_letter_with_its_reason(usage, reason):
    record = good_records()[0]
    line = orjson.dumps({**record, "usage": orjson.loads(usage) if isinstance(usage, str) else usage})
    for parse in (parse_candidate, _parse_candidate_record):
        with pytest.raises(EnvelopeError) as refused:
            parse(line)
        assert str(refused.value).startswith(reason)
    source = record["source_id"]
    result = process_source(source, [orjson.dumps(transcript(source, S1_IDS, S1_CHUNKS))], [line], RunConfig())
    (letter,) = result.dead_letters
    assert letter["reason"].startswith(reason) and letter["payload"] == line.decode()


def test_a_verdict_with_a_malformed_usage_is_a_dead_letter():
    verdict = {"verdict_id": "v-1", "request_id": "j-1", "judge": "combat-semantics", "judge_fingerprint": FP,
               "candidate_id": "c-1", "candidate_sha256": "b" * 64, "producer": {"provider": "p", "model": "m"},
               "raw_response": "{}", "received_at": "2026-10-02T09:00:00Z"}
    assert parse_verdict(orjson.dumps({**verdict, "usage": USAGE})).verdict_id == "v-1"
    with pytest.raises(VerdictEnvelopeError, match="verdict usage input_tokens -1 is not a token count"):
        parse_verdict(orjson.dumps({**verdict, "usage": {**USAGE, "input_tokens": -1}}))


def test_the_input_avro_schema_names_usage_as_the_verdicts_does():
    candidate_schema, verdict_schema = load_json_asset(CANDIDATE_INPUT_SCHEMA), load_json_asset("inputs/verdict.v1.avsc")
    (in_candidate,) = [f for f in candidate_schema["fields"] if f["name"] == "usage"]
    (in_verdict,) = [f for f in verdict_schema["fields"] if f["name"] == "usage"]
    assert in_candidate["type"] == in_verdict["type"] and in_candidate["default"] is None


def with_usage(records: list[dict]) -> list[dict]:
    """Each record with a usage of its own (one with none said: null; one without cached tokens)."""
    out = []
    for n, record in enumerate(records):
        usage = {"input_tokens": 1000 + n, "output_tokens": 100 + n, "cached_input_tokens": n, "batch": n % 2 == 0}
        if n == 1:
            usage = None
        elif n == 2:
            usage["cached_input_tokens"] = None
        out.append({**record, "usage": usage})
    return out


def test_the_job_reads_candidates_with_usage_from_json_lines_avro_and_parquet_to_the_same_outcomes(tmp_path):
    from output_reader import read_outputs
    from pipelines import reprocess

    good = good_records()
    transcripts = tmp_path / "transcripts.jsonl"
    transcripts.write_bytes(orjson.dumps(transcript("crd3:S1", S1_IDS, S1_CHUNKS)) + b"\n"
                            + orjson.dumps(transcript("crd3:S2", [1, 2, 3], [{"chunk_id": "x-1", "kind": "extraction",
                                                                              "unit_ids": [1, 2, 3]}])) + b"\n")
    plain, billed = tmp_path / "plain", tmp_path / "billed"
    plain.mkdir()
    billed.mkdir()
    (plain / "candidates.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in good))
    usage_records = with_usage(good)
    third = len(usage_records) // 3
    (billed / "candidates-1.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in usage_records[:third]))
    schema = fastavro.parse_schema(load_json_asset(CANDIDATE_INPUT_SCHEMA))
    with open(billed / "candidates-2.avro", "wb") as handle:
        fastavro.writer(handle, schema, [{**r, "raw_response": r["raw_response"].encode("utf-8")}
                                         for r in usage_records[third:2 * third]])
    pq.write_table(pa.Table.from_pylist(usage_records[2 * third:]), billed / "candidates-3.parquet")
    # What the job's readers hand on (transforms.read: the contract's fields, projected): the usage as written.
    shape = input_field_shape(CANDIDATE_INPUT_SCHEMA)
    with open(billed / "candidates-2.avro", "rb") as handle:
        from_avro = [avro_record_to_json(project(record, shape)) for record in fastavro.reader(handle)]
    from_parquet = [orjson.dumps(project(row, shape)) for row in pq.read_table(billed / "candidates-3.parquet").to_pylist()]
    for line, record in zip(from_avro + from_parquet, usage_records[third:]):
        assert parse_candidate(line).usage == (None if record["usage"] is None else Usage(**record["usage"]))
    runs = {}
    for name, folder in (("plain", plain), ("billed", billed)):
        out = tmp_path / f"run-{name}"
        assert reprocess.main(["--transcripts", str(transcripts), "--candidates", str(folder / "candidates*"),
                               "--output", str(out), "--output-format", "jsonl", "--progress-seconds", "0"]) == 0
        runs[name] = (orjson.loads((out / "manifest.json").read_bytes()), read_outputs(out))
    (plain_manifest, plain_rows), (billed_manifest, billed_rows) = runs["plain"], runs["billed"]
    assert billed_manifest["conservation"]["dead_letters"] == plain_manifest["conservation"]["dead_letters"] == 0
    assert billed_manifest["outcomes"] == plain_manifest["outcomes"]
    assert billed_rows.keys() == plain_rows.keys()
    for output in plain_rows:
        if output == "evaluations":  # each attempt's row carries its billed usage (the report prices it)
            assert [{**row, "usage": None} for row in billed_rows[output]] == plain_rows[output]
            billed_usage = {r["candidate_id"]: r["usage"] for r in usage_records}
            assert {row["candidate_id"]: row["usage"] for row in billed_rows[output]} == billed_usage
            continue
        assert billed_rows[output] == plain_rows[output], output
