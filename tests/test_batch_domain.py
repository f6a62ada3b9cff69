"""The batch domain on its own: schema subsets, the file plan, the export's
per-source step, the import ledger, and the command-line dispatch."""

from __future__ import annotations

import google.genai.types as genai_types
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.assets import current_fingerprints
from domain.batch import ledger as ledger_mod
from domain.batch.export import ExportConfig, export_source, plan_files
from domain.batch.ledger import ExportedRequest, ExportIndexError, ImportLedger
from domain.batch.prompts import RetryRequestError, parse_retry_request
from domain.batch.providers import PROVIDERS, RequestSettings
from domain.batch.schemas import (
    SchemaSubsetError, anthropic_problems, gemini_problems, openai_strict_problems, to_gemini_schema)

FP = "sha256:" + "a" * 64


# --- schema subsets ---------------------------------------------------------------------

def closed(properties: dict, required=None) -> dict:
    return {"type": "object", "additionalProperties": False, "properties": properties,
            "required": list(properties) if required is None else required}


def test_openai_strict_names_every_misfit_by_pointer():
    schema = closed({"a": {"type": "string"}, "b": {"type": "object", "properties": {"c": {"type": "integer"}}},
                     "d": {"allOf": [{"type": "string"}]}}, required=["a", "b", "d"])
    problems = openai_strict_problems(schema)
    assert "/properties/b: objects must set additionalProperties to false" in problems
    assert "/properties/b: every property must be required; optional: c" in problems
    assert "/properties/d: 'allOf' is not supported" in problems
    assert openai_strict_problems({"anyOf": []})[0].startswith("/: the root must be an object")


def test_anthropic_refuses_numeric_length_and_array_constraints():
    schema = closed({"n": {"type": "integer", "minimum": 0}, "s": {"type": "string", "maxLength": 9},
                     "l": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                     "ok": {"type": "array", "items": {"type": "string"}, "minItems": 1}})
    assert anthropic_problems(schema) == (
        "/properties/n: 'minimum' is not supported", "/properties/s: 'maxLength' is not supported",
        "/properties/l: minItems 2; only 0 or 1 is supported")


def test_gemini_conversion_fails_on_what_it_cannot_say():
    schema = closed({"u": {"type": ["string", "integer"]}, "e": {"enum": [1, 2], "type": "integer"},
                     "x": {"anyOf": [{"type": "string"}]}, "o": {"type": "object", "additionalProperties": True}})
    problems = gemini_problems(schema)
    assert any(p.startswith("/properties/u: type") for p in problems)
    assert "/properties/e: Gemini enums must list strings" in problems
    assert "/properties/x: 'anyOf' cannot be expressed in Gemini's responseSchema" in problems
    assert any(p.startswith("/properties/o: additionalProperties True") for p in problems)
    with pytest.raises(SchemaSubsetError) as raised:
        to_gemini_schema(schema)
    assert raised.value.problems == problems


NAMES = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
LEAVES = st.one_of(
    st.sampled_from(["string", "integer", "number", "boolean"]).map(lambda t: {"type": t}),
    st.sampled_from(["string", "integer", "boolean"]).map(lambda t: {"type": [t, "null"]}),
    st.lists(st.text(max_size=4), min_size=1, max_size=4, unique=True).map(lambda v: {"type": "string", "enum": v}),
)


def _object(children):
    return st.dictionaries(NAMES, children, min_size=1, max_size=4).map(closed)


SUBSET_SCHEMAS = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        _object(children),
        st.tuples(children, st.sampled_from([0, 1])).map(lambda t: {"type": "array", "items": t[0], "minItems": t[1]}),
    ),
    max_leaves=12,
).map(lambda s: s if s.get("type") == "object" else closed({"root": s}))


def _same_shape(json_schema: dict, gemini: dict) -> None:
    declared = json_schema.get("type")
    names = declared if isinstance(declared, list) else [declared]
    assert gemini["type"] == next(n for n in names if n != "null").upper()
    assert gemini.get("nullable", False) == ("null" in names)
    assert gemini.get("enum") == json_schema.get("enum")
    if "properties" in json_schema:
        assert list(gemini["properties"]) == gemini["propertyOrdering"] == list(json_schema["properties"])
        assert gemini["required"] == json_schema["required"]
        for name, sub in json_schema["properties"].items():
            _same_shape(sub, gemini["properties"][name])
    if "items" in json_schema:
        assert gemini["minItems"] == json_schema["minItems"]
        _same_shape(json_schema["items"], gemini["items"])


@settings(max_examples=60, deadline=None)
@given(SUBSET_SCHEMAS)
def test_every_schema_of_the_spec_subset_fits_every_provider(schema):
    """contract §4's provider subset is accepted by all three checks, and Gemini's
    conversion keeps every property, its order, requiredness, nullability and enum."""
    assert openai_strict_problems(schema) == ()
    assert anthropic_problems(schema) == ()
    converted = to_gemini_schema(schema)
    _same_shape(schema, converted)
    genai_types.Schema.model_validate(converted)  # the SDK's own model of responseSchema accepts it


# --- the file plan ----------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(alphabet="0123456789abcdef", min_size=1, max_size=8), st.integers(1, 50), max_size=40),
       st.one_of(st.none(), st.integers(1, 7)), st.integers(50, 200))
def test_the_plan_respects_the_limits_and_places_every_id_once(sizes, max_lines, max_bytes):
    plan = plan_files(sizes.items(), max_lines, max_bytes)
    assert set(plan.file_of) == set(sizes)
    assert plan.files == (max(plan.file_of.values()) + 1 if sizes else 0)
    files: dict[int, list[str]] = {}
    for custom_id in sorted(sizes):
        files.setdefault(plan.file_of[custom_id], []).append(custom_id)
    assert sorted(files) == list(range(plan.files))  # no empty file
    order = [plan.file_of[i] for i in sorted(sizes)]
    assert order == sorted(order)  # files fill in id order
    for number, ids in files.items():
        assert max_lines is None or len(ids) <= max_lines
        assert sum(sizes[i] for i in ids) <= max_bytes
        if number + 1 in files:  # greedy: the next id did not fit here
            nxt = files[number + 1][0]
            assert (max_lines is not None and len(ids) + 1 > max_lines) or sum(sizes[i] for i in ids) + sizes[nxt] > max_bytes


# --- the export's per-source step -------------------------------------------------------

TRANSCRIPT = orjson.dumps({"source_id": "s", "units": [{"unit_id": u, "speaker": "A", "text": "t"} for u in (5, 2, 9)],
                           "chunks": [{"chunk_id": "x-1", "kind": "extraction", "unit_ids": [5, 2, 9]}]})


def retry(request_id="r-1", family="spells", chunk="x-1", **changes) -> bytes:
    prompt, schema = current_fingerprints(family)
    record = {"request_id": request_id, "family": family, "source_id": "s", "chunk_id": chunk, "candidate_id": "c-1",
              "attempt": 2, "correction_guidance": "Fix it.", "prompt_fingerprint": prompt, "schema_fingerprint": schema,
              "validator_policy_fingerprint": FP, **changes}
    return orjson.dumps(record)


def config(**changes) -> ExportConfig:
    return ExportConfig(**{"provider_name": "openai-chat", "settings": RequestSettings("m", 100),
                           "max_bytes_per_file": 10**8, **changes})


def test_every_retry_request_is_exported_dead_lettered_or_filtered():
    lines = [retry("r-1"), retry("r-1", correction_guidance="Other."), retry("r-2", chunk="x-9"), b"{not json",
             retry("r-3", attempt=1), retry("r-4", family="combat-turns"), retry("r-5", prompt_fingerprint=FP)]
    rows, dead, counts = export_source("s", [TRANSCRIPT], lines, config(families=frozenset({"spells"})))
    assert [r["custom_id"] for r in rows] == ["r-1", "r-5"]
    reasons = sorted(d["reason"] for d in dead)
    assert len(reasons) == 4 and any("duplicate request_id 'r-1'" in r for r in reasons)
    assert any("unknown chunk 'x-9'" in r for r in reasons) and any("not valid JSON" in r for r in reasons)
    assert any("attempt" in r for r in reasons)  # attempt 1 cannot be a retry
    assert counts == {"dead_letters/retry_requests": 4, "filtered": 1, "stale": 1, "shaped": 2, "shaped/retry": 2}
    assert len(rows) + len(dead) + counts["filtered"] == len(lines)


def test_requests_without_a_usable_transcript_are_dead_letters():
    other = TRANSCRIPT.replace(b'"text":"t"', b'"text":"u"', 1)  # another record with the same source_id
    for transcripts, why in (([], "no transcript"), ([TRANSCRIPT, other], "conflict"), ([b"{}"], "rejected")):
        rows, dead, _ = export_source("s", transcripts, [retry()], config())
        assert rows == [] and why in dead[0]["reason"]


def test_a_line_too_large_for_any_file_is_a_dead_letter():
    rows, dead, _ = export_source("s", [TRANSCRIPT], [retry()], config(max_bytes_per_file=500))
    assert rows == [] and "more than one file may hold" in dead[0]["reason"]


def test_only_listed_request_ids_are_exported():
    rows, _, counts = export_source("s", [TRANSCRIPT], [retry("r-1"), retry("r-2")], config(only_request_ids=frozenset({"r-2"})))
    assert [r["custom_id"] for r in rows] == ["r-2"] and counts["filtered"] == 1


def test_retry_requests_are_checked_against_their_schema():
    with pytest.raises(RetryRequestError, match="request_id"):
        parse_retry_request(retry("has space"))
    with pytest.raises(RetryRequestError, match="correction_guidance"):
        parse_retry_request(retry(correction_guidance=""))


# --- the import ledger ------------------------------------------------------------------

def exported(n: int, provider="anthropic") -> list[ExportedRequest]:
    return [ExportedRequest(f"r-{i}", f"r-{i}", "spells", "s", "x-1", 2, provider, "m", FP, FP, "0" * 64, i + 1)
            for i in range(n)]


def anthropic_line(rid: str, kind: str) -> bytes:
    if kind == "garbage":
        return b"\xff not json"
    if kind in ("expired", "canceled"):
        return orjson.dumps({"custom_id": rid, "result": {"type": kind}})
    if kind == "errored":
        return orjson.dumps({"custom_id": rid, "result": {"type": "errored", "error": {
            "type": "error", "error": {"type": "api_error", "message": "x"}}}})
    stop = {"answered": "end_turn", "refused": "refusal", "truncated": "max_tokens"}[kind]
    return orjson.dumps({"custom_id": rid, "result": {"type": "succeeded", "message": {
        "id": "m", "type": "message", "role": "assistant", "model": "m", "content": [{"type": "text", "text": f"{rid}:{kind}"}],
        "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}})


LINE = st.tuples(st.integers(0, 7), st.sampled_from(["answered", "refused", "truncated", "errored", "expired", "canceled",
                                                    "garbage"]))


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 6), st.lists(LINE, max_size=25), st.sampled_from(["missing", "expired", "canceled"]))
def test_every_exported_request_is_classified_exactly_once(n, lines, unanswered):
    """Any mix of answers, failures, repeats, strangers (ids beyond the export) and
    garbage: conservation holds, imported means answered, the first failure names
    the rest, and one candidate per imported request."""
    book = ImportLedger(PROVIDERS["anthropic"], exported(n), unanswered=unanswered)
    candidates = []
    for number, (i, kind) in enumerate(lines, start=1):
        row, cand = book.add("f", number, anthropic_line(f"r-{i}", kind))
        assert row["line"] or row["line_encoding"] == "base64"
        if cand:
            candidates.append(cand)
    summary = book.summary()
    classes = book.classes()
    assert summary["conservation"]["holds"] and summary["exported"] == n
    assert sum(summary["requests"].values()) == n == len(classes)
    for k in range(n):
        rid = f"r-{k}"
        kinds = [kind for i, kind in lines if i == k and kind != "garbage"]
        answered = [kind for kind in kinds if kind in ("answered", "refused", "truncated")]
        if answered:
            assert classes[rid] == "imported"
        elif kinds:
            assert classes[rid] == kinds[0]
        else:
            assert classes[rid] == unanswered
    assert len(candidates) == summary["requests"]["imported"] == len({c["candidate_id"] for c in candidates})
    assert sorted(ledger_mod.not_imported_ids(summary)) == sorted(r for r, c in classes.items() if c != "imported")


def test_a_batch_where_nothing_succeeded_still_accounts_for_every_request():
    """OpenAI writes failures to their own file; given only that file, nothing is imported and nothing is lost."""
    from pathlib import Path

    ids = ["r-answer", "r-refuse", "r-truncate", "r-fail", "r-expire", "r-cancel", "r-server"]
    requests = [ExportedRequest(rid, rid, "spells", "s", "x-1", 2, "openai-chat", "m", FP, FP, "0" * 64, n)
                for n, rid in enumerate(ids, start=1)]
    book = ImportLedger(PROVIDERS["openai-chat"], requests)
    error_file = Path(__file__).parent / "fixtures" / "provider_results" / "openai-chat" / "batch_test_error.jsonl"
    for number, raw in enumerate(error_file.read_bytes().splitlines(), start=1):
        assert book.add(str(error_file), number, raw)[1] is None
    summary = book.summary()
    assert summary["requests"] == {"imported": 0, "errored": 2, "expired": 1, "canceled": 1, "missing": 3}
    assert summary["not_imported"]["missing"] == ["r-answer", "r-refuse", "r-truncate"]
    assert summary["conservation"]["holds"]


def test_a_ledger_refuses_requests_exported_for_another_provider():
    with pytest.raises(ExportIndexError, match="openai-chat"):
        ImportLedger(PROVIDERS["anthropic"], exported(1, provider="openai-chat"))


def test_garbage_lines_are_kept_as_base64():
    book = ImportLedger(PROVIDERS["anthropic"], exported(1))
    row, cand = book.add("f", 3, b"\xff\xfe")
    assert cand is None and row["outcome"] == "unreadable" and row["line_encoding"] == "base64"


# --- the command line -------------------------------------------------------------------

def test_the_console_script_dispatches_subcommands(monkeypatch, capsys):
    from pipelines import batch_export, batch_import, cli, reprocess

    calls = []
    monkeypatch.setattr(reprocess, "main", lambda argv: calls.append(("job", argv)) or 0)
    monkeypatch.setattr(batch_export, "main", lambda argv: calls.append(("export", argv)) or 0)
    monkeypatch.setattr(batch_import, "main", lambda argv: calls.append(("import", argv)) or 0)
    assert cli.main(["--transcripts", "t"]) == 0
    assert cli.main(["export-batch", "--provider", "gemini"]) == 0
    assert cli.main(["import-batch", "--output", "o"]) == 0
    assert calls == [("job", ["--transcripts", "t"]), ("export", ["--provider", "gemini"]), ("import", ["--output", "o"])]


def test_subcommand_help_names_the_providers(capsys):
    from pipelines import batch_export, batch_import

    for module in (batch_export, batch_import):
        with pytest.raises(SystemExit) as done:
            module.parser().parse_args(["--help"])
        assert done.value.code == 0
        assert "openai-responses" in capsys.readouterr().out
