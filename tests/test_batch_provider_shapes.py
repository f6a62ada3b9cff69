"""Request and result lines against the providers' own published types.

The official SDKs ship typed request parameters (TypedDicts: openai, anthropic;
pydantic models that forbid unknown fields: google-genai) and response models.
Request lines are checked key by key against them (no unknown key, every
required key, every literal and union); result fixtures are validated by the
response models and then read by the provider classes.
"""

from __future__ import annotations

import collections.abc
import json
import re
import typing
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest
import typing_extensions

from domain.batch.prompts import RetryRequest, RetryRequestError, build_prompt
from domain.batch.providers import PROVIDERS, VERTEX_LABEL, WIRE_ID, RequestSettings, schema_name
from domain.assets import llm_schema_path, load_json_asset
from domain.families import FAMILIES
from domain.evidence import SourceRef
from domain.families.reconciliation import listed_entries
from domain.source import transcript_from_record

# Test dependencies (the `test` extra): a missing SDK fails here, it is never skipped.
import anthropic.types.messages as anthropic_batches
import google.genai._transformers as genai_transformers
import google.genai.types as genai_types
import openai.types.chat.completion_create_params as openai_chat
import openai.types.responses.response_create_params as openai_responses

FIXTURES = Path(__file__).parent / "fixtures" / "provider_results"
_ITERABLES = (list, tuple, collections.abc.Iterable, collections.abc.Sequence, collections.abc.Collection)


# --- a structural checker for TypedDict request types -----------------------------------

def typed_problems(value, tp, path="$") -> list[str]:
    """Why ``value`` is not an instance of the typing expression ``tp`` (empty when it is)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp in (typing.Any, object):
        return []
    if origin in (typing.Required, typing.NotRequired, typing_extensions.Required, typing_extensions.NotRequired):
        return typed_problems(value, args[0], path)
    if origin is typing.Annotated:
        return typed_problems(value, args[0], path)
    if typing_extensions.is_typeddict(tp):
        return _typeddict_problems(value, tp, path)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", typing.Union)):
        branches = [typed_problems(value, arg, path) for arg in args]
        if any(not b for b in branches):
            return []
        return min(branches, key=len)
    if origin is typing.Literal:
        return [] if value in args else [f"{path}: {value!r} is not one of {args}"]
    if origin in _ITERABLES or getattr(origin, "__name__", "") == "SequenceNotStr":
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        return [p for n, item in enumerate(value) for p in typed_problems(item, args[0] if args else typing.Any, f"{path}[{n}]")]
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, dict):
            return [f"{path}: expected an object"]
        return [p for k, v in value.items() for p in typed_problems(v, args[1] if args else typing.Any, f"{path}.{k}")]
    if tp is type(None):
        return [] if value is None else [f"{path}: expected null"]
    if tp is bool:
        return [] if isinstance(value, bool) else [f"{path}: expected a boolean"]
    if tp is int:
        return [] if type(value) is int else [f"{path}: expected an integer"]
    if tp is float:
        return [] if type(value) in (int, float) else [f"{path}: expected a number"]
    if tp is str:
        return [] if isinstance(value, str) else [f"{path}: expected a string"]
    return [f"{path}: the checker does not know {tp!r}"]


def _typeddict_problems(value, tp, path) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected an object for {tp.__name__}"]
    hints = typing.get_type_hints(tp, include_extras=True)
    problems = [f"{path}.{key}: not a field of {tp.__name__}" for key in value if key not in hints]
    for key, hint in hints.items():
        wrapper = typing.get_origin(hint)
        required = wrapper in (typing.Required, typing_extensions.Required) or (
            tp.__total__ and wrapper not in (typing.NotRequired, typing_extensions.NotRequired))
        if key not in value:
            if required:
                problems.append(f"{path}.{key}: required by {tp.__name__}")
            continue
        problems.extend(typed_problems(value[key], hint, f"{path}.{key}"))
    return problems


def test_the_checker_rejects_what_the_types_reject():
    good = {"custom_id": "r-1", "params": {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}}
    assert typed_problems(good, anthropic_batches.batch_create_params.Request) == []
    bad = {**good, "params": {**good["params"], "output_format": {}}}  # the retired beta spelling
    assert any("output_format" in p for p in typed_problems(bad, anthropic_batches.batch_create_params.Request))
    wrong_role = {**good, "params": {**good["params"], "messages": [{"role": "robot", "content": "hi"}]}}
    assert typed_problems(wrong_role, anthropic_batches.batch_create_params.Request)
    missing = {"custom_id": "r-1", "params": {"model": "m", "messages": []}}
    assert any("max_tokens" in p for p in typed_problems(missing, anthropic_batches.batch_create_params.Request))


# --- request lines ----------------------------------------------------------------------

def check_request_line(provider: str, line: dict) -> list[str]:
    """Every problem of one exported line, by the provider's own request types."""
    if provider in ("openai-chat", "openai-responses"):
        problems = [f"$.{k}: unexpected" for k in line if k not in ("custom_id", "method", "url", "body")]
        url = "/v1/chat/completions" if provider == "openai-chat" else "/v1/responses"
        if line.get("method") != "POST" or line.get("url") != url:
            problems.append(f"method/url {line.get('method')} {line.get('url')}")
        params = (openai_chat.CompletionCreateParamsNonStreaming if provider == "openai-chat"
                  else openai_responses.ResponseCreateParamsNonStreaming)
        return problems + typed_problems(line.get("body"), params, "$.body")
    if provider == "anthropic":
        return typed_problems(line, anthropic_batches.batch_create_params.Request)
    request = line.get("request")
    allowed = {"key", "request"} if provider == "gemini" else {"request"}
    problems = [f"$.{k}: unexpected" for k in line if k not in allowed]
    fields = {"contents", "systemInstruction", "generationConfig"} | ({"labels"} if provider == "vertex" else set())
    problems += [f"$.request.{k}: not sent" for k in request if k not in fields]
    try:  # pydantic models with camelCase aliases that forbid unknown fields
        genai_types.Content.model_validate(request["systemInstruction"])
        for content in request["contents"]:
            genai_types.Content.model_validate(content)
        config = genai_types.GenerationConfig.model_validate(request["generationConfig"])
    except Exception as exc:  # noqa: BLE001 - the message is the finding
        problems.append(f"$.request: {exc}")
    else:
        problems += closed_object_problems(provider, config.response_schema)
    if provider == "vertex":
        labels = request.get("labels", {})
        label_rule = re.compile(r"^[a-z0-9_-]{0,63}$")
        if not all(re.match(r"^[a-z][a-z0-9_-]{0,62}$", k) and label_rule.match(v) for k, v in labels.items()):
            problems.append(f"labels break Vertex's label rules: {labels}")
    return problems


def closed_object_problems(provider: str, schema: "genai_types.Schema | None", path: str = "$.responseSchema") -> list[str]:
    """Vertex's Schema says additionalProperties: false on every object (it has the field);
    the Gemini API's Schema has no such field, so its objects say nothing about it."""
    if schema is None:
        return [f"{path}: missing"]
    problems = []
    if schema.type == genai_types.Type.OBJECT:
        wanted = False if provider == "vertex" else None
        if schema.additional_properties is not wanted:
            problems.append(f"{path}: additionalProperties {schema.additional_properties!r}, expected {wanted!r}")
    elif schema.additional_properties is not None:
        problems.append(f"{path}: additionalProperties on a {schema.type}")
    for name, sub in (schema.properties or {}).items():
        problems += closed_object_problems(provider, sub, f"{path}.properties.{name}")
    if schema.items is not None:
        problems += closed_object_problems(provider, schema.items, f"{path}.items")
    return problems


def _transcript():
    ids = [9, 4, 12, 1, 30, 2]  # document order is not id order
    return transcript_from_record({
        "source_id": "crd3:T",
        "units": [{"unit_id": u, "speaker": "MATT", "text": f"unit {u} \u2014 \"quoted\"\nnext"} for u in ids],
        "chunks": [{"chunk_id": "x-1", "kind": "extraction", "unit_ids": [4, 9, 12]},  # listed out of order on purpose
                   {"chunk_id": "s-1", "kind": "scene", "unit_ids": ids}]})


def _request(family: str, chunk_id: str, kind: str = "retry") -> RetryRequest:
    fp = "sha256:" + "0" * 64
    guidance = "" if kind == "refresh" else "Your previous response could not be accepted."
    return RetryRequest(request_id="r-" + family, kind=kind, family=family, source_id="crd3:T", chunk_id=chunk_id,
                        candidate_id="c-1", attempt=2, correction_guidance=guidance, prompt_fingerprint=fp,
                        schema_fingerprint=fp, validator_policy_fingerprint=fp, input_fingerprint=None,
                        candidate_sha256=None, judge=None, judge_fingerprint=None)


def _entries():
    """The labelled entry list a reconciliation prompt shows (two chunk registry entries)."""
    transcript = _transcript()
    records = [SimpleNamespace(name="Scanlan's \"cousin\"", aliases=("Kaylie",), description="A bard.",
                               evidence=(SourceRef("crd3:T", 12, 12),)),
               SimpleNamespace(name="Pike", aliases=(), description="A cleric.", evidence=(SourceRef("crd3:T", 9, 4),))]
    return listed_entries(transcript, [("x-1", records)])


def _chunk_of(family: str) -> str:
    return {"scene": "s-1", "extraction": "x-1", "source": "*"}[FAMILIES[family].chunk_kind]


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
@pytest.mark.parametrize("kind", ["retry", "refresh"])
def test_request_lines_of_every_family_and_kind_match_the_provider_types(provider, kind):
    transcript, p = _transcript(), PROVIDERS[provider]
    settings = RequestSettings("some-model", 4096, temperature=0.2 if p.takes_temperature else None)
    for family in sorted(FAMILIES):
        prompt = build_prompt(_request(family, _chunk_of(family), kind), transcript, _entries())
        line = p.request_line(p.wire_id("r-" + family), prompt, family, p.schema(load_json_asset(llm_schema_path(family))),
                              settings)
        checked = orjson.loads(orjson.dumps(line))
        assert check_request_line(provider, checked) == [], (provider, family, kind)
        # Feedback only in a retry; a refresh is the plain prompt over the chunk (or the entry list).
        assert ("<validator_feedback>" in orjson.dumps(checked).decode()) == (kind == "retry"), (provider, family, kind)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_vertex_keeps_closed_objects_as_the_sdk_sends_them_and_gemini_drops_them(family):
    """Vertex's responseSchema carries additionalProperties: false and the SDK's own schema
    processing, in Vertex mode, passes it through unchanged; the Gemini API's carries none.

    google-genai (3.6.1: types.Schema.additional_properties; _transformers.t_schema ->
    process_schema -> _raise_for_unsupported_mldev_properties) refuses the field only when
    the client is not a Vertex one."""
    llm_schema = load_json_asset(llm_schema_path(family))
    vertex, gemini = PROVIDERS["vertex"].schema(llm_schema), PROVIDERS["gemini"].schema(llm_schema)
    assert PROVIDERS["vertex"].schema_problems(llm_schema) == PROVIDERS["gemini"].schema_problems(llm_schema) == ()
    assert "additionalProperties" in orjson.dumps(vertex).decode()
    assert "additionalProperties" not in orjson.dumps(gemini).decode()
    assert closed_object_problems("vertex", genai_types.Schema.model_validate(vertex)) == []
    assert closed_object_problems("gemini", genai_types.Schema.model_validate(gemini)) == []
    # Apart from the closed objects, the two are the same schema.
    assert _without_additional_properties(vertex) == gemini
    # The SDK's own request path, as a Vertex client and as a Gemini Developer API client.
    as_vertex = genai_transformers.t_schema(SimpleNamespace(vertexai=True), json.loads(json.dumps(vertex)))
    assert as_vertex == genai_types.Schema.model_validate(vertex)
    assert closed_object_problems("vertex", as_vertex) == []
    open_object = {"type": "OBJECT", "properties": {"a": {"type": "STRING"}}, "additionalProperties": {"type": "STRING"}}
    genai_transformers.t_schema(SimpleNamespace(vertexai=True), json.loads(json.dumps(open_object)))
    with pytest.raises(ValueError, match="additionalProperties.*Gemini Developer API"):
        genai_transformers.t_schema(SimpleNamespace(vertexai=False), open_object)


def _without_additional_properties(node):
    if isinstance(node, dict):
        return {k: _without_additional_properties(v) for k, v in node.items() if k != "additionalProperties"}
    if isinstance(node, list):
        return [_without_additional_properties(v) for v in node]
    return node


def test_a_refresh_is_the_plain_current_prompt_over_the_chunk():
    refresh = build_prompt(_request("spells", "x-1", "refresh"), _transcript())
    retry = build_prompt(_request("spells", "x-1"), _transcript())
    assert refresh.feedback == "" and refresh.user_parts == (refresh.excerpt,)
    assert (refresh.system, refresh.excerpt) == (retry.system, retry.excerpt)
    assert retry.user_parts == (retry.excerpt, retry.feedback)


def test_a_reconciliation_prompt_lists_the_labelled_entries_and_nothing_internal():
    prompt = build_prompt(_request("npc-reconciliation", "*"), _transcript(), _entries())
    listed = [json.loads(line) for line in prompt.excerpt.splitlines()[2:]]
    assert [(e["label"], e["name"]) for e in listed] == [("E1", "Pike"), ("E2", "Scanlan's \"cousin\"")]  # document order
    assert listed[0]["evidence"] == [{"start_unit_id": 9, "end_unit_id": 4}]
    assert "x-1" not in prompt.excerpt and "crd3:T" not in prompt.excerpt
    assert prompt.system.startswith("# Reconciling the NPC lists")


def test_source_level_families_without_registry_entries_are_refused_with_a_reason():
    source_level = [key for key, spec in FAMILIES.items() if spec.chunk_kind == "source"]
    for family in source_level:
        for entries in (None, ()):
            with pytest.raises(RetryRequestError, match="source-level.*none were found"):
                build_prompt(_request(family, "*"), _transcript(), entries)


def test_the_excerpt_is_in_document_order_and_the_feedback_is_labelled():
    prompt = build_prompt(_request("spells", "x-1"), _transcript())
    shown = [json.loads(line)["unit_id"] for line in prompt.excerpt.splitlines()[2:]]
    assert shown == [9, 4, 12]  # document order, although the chunk lists 4, 9, 12 and 4 < 9
    assert "not by the user" in prompt.feedback and "<validator_feedback>" in prompt.feedback
    assert prompt.feedback.endswith("Your previous response could not be accepted.\n</validator_feedback>")
    assert prompt.system.startswith("# Spells")


def test_a_temperature_is_refused_where_the_request_type_has_none():
    prompt = build_prompt(_request("spells", "x-1"), _transcript())
    anthropic = PROVIDERS["anthropic"]
    with pytest.raises(ValueError, match="temperature"):
        anthropic.request_line("r-1", prompt, "spells", {}, RequestSettings("m", 10, temperature=0.5))
    hints = typing.get_type_hints(anthropic_batches.batch_create_params.Request)
    assert not anthropic.takes_temperature
    assert "temperature" not in typing.get_type_hints(hints["params"])


def test_ids_and_schema_names_fit_every_provider():
    for family in FAMILIES:
        assert WIRE_ID.match(schema_name(family))
    vertex = PROVIDERS["vertex"]
    assert vertex.wire_id("r-0123abc") == "r-0123abc"
    hashed = vertex.wire_id("R-Upper_Case")
    assert hashed != "R-Upper_Case" and re.match(r"^[a-z0-9_-]{1,63}$", hashed)
    with pytest.raises(ValueError):
        PROVIDERS["openai-chat"].wire_id("has space")


# --- result fixtures --------------------------------------------------------------------

def _fixture_lines(provider: str):
    expected = json.loads((FIXTURES / provider / "expected.json").read_text(encoding="utf-8"))
    for row in expected:
        raw = (FIXTURES / provider / row["file"]).read_bytes().splitlines()[row["line"] - 1]
        yield row, orjson.loads(raw)


def validate_result_line(provider: str, line: dict) -> None:
    """Raises when a result line is not what the provider's own models describe."""
    if provider.startswith("openai"):
        assert set(line) == {"id", "custom_id", "response", "error"}, line.keys()
        response = line["response"]
        if response is None:
            assert set(line["error"]) == {"code", "message"}
            return
        assert set(response) == {"status_code", "request_id", "body"}
        if response["status_code"] >= 400:
            assert {"message", "type", "param", "code"} <= set(response["body"]["error"])
            return
        model = openai_chat_models().ChatCompletion if provider == "openai-chat" else openai_responses_models().Response
        model.model_validate(response["body"])
    elif provider == "anthropic":
        anthropic_batches.MessageBatchIndividualResponse.model_validate(line)
    elif provider == "gemini":
        assert set(line) <= {"key", "response", "error"}
        if "error" in line:
            genai_types.GoogleRpcStatus.model_validate(line["error"])
        else:
            genai_types.GenerateContentResponse.model_validate(line["response"])
    else:
        assert set(line) <= {"status", "processed_time", "request", "response"}
        if line.get("response") is not None:
            genai_types.GenerateContentResponse.model_validate(line["response"])


def openai_chat_models():
    import openai.types.chat as models

    return models


def openai_responses_models():
    import openai.types.responses as models

    return models


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_result_fixtures_are_the_providers_real_shapes(provider):
    for _, line in _fixture_lines(provider):
        validate_result_line(provider, line)


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_result_fixtures_read_as_expected(provider):
    seen = 0
    for row, line in _fixture_lines(provider):
        outcome = PROVIDERS[provider].parse_result(line)
        got = {"wire_id": outcome.wire_id, "status": outcome.status, "ending": outcome.ending,
               "stop_reason": outcome.stop_reason, "text": outcome.text}
        assert got == {k: row[k] for k in got}, (provider, row["file"], row["line"])
        seen += 1
    assert seen >= 4


def test_vertex_results_carry_a_content_key_that_survives_the_echo():
    for row, line in _fixture_lines("vertex"):
        outcome = PROVIDERS["vertex"].parse_result(line)
        assert outcome.content_key and outcome.content_key.startswith("sha256:")
        stripped = {**line, "request": {k: v for k, v in line["request"].items() if k != "labels"}}
        again = PROVIDERS["vertex"].parse_result(stripped)
        assert again.wire_id is None and again.content_key == outcome.content_key
        assert line["request"]["labels"][VERTEX_LABEL] == row["wire_id"]
