"""The prose of the outputs no family owns, for the data dictionary (``docgen.data_dictionary``).

What each field of the artifact envelope, the retry requests, the evaluations, the dead letters and a
comparison's slots means, and a real example row of each (what each key of the manifest holds is
``docgen.manifest_prose``). What a
family's own records mean is in its declaration (``FamilySpec.docs``, domain/families/). Types and rules
are not repeated here: they come from the schemas.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from domain.families import FAMILIES

# Paths: "a.b" a field of a nested record, "a[]" an element of a list (so "records[].evidence[].start_unit_id").

# --- artifacts/<family>/: the envelope every family shares -----------------------------------------

ARTIFACT_FIELDS: dict[str, str] = {
    "artifact_id": "The artifact's id: `a-` and 32 hex digits of a sha256 over family, source, chunk, candidate id, "
                   "raw response hash and validator policy, so the same accepted attempt under the same policy has "
                   "the same id in every run.",
    "family": "The extraction family; the same as the folder's name.",
    "schema_version": "Version of this durable contract.",
    "source_id": "The transcript (one episode) the artifact was extracted from, e.g. `crd3:C1E001`.",
    "chunk_id": "The chunk of that transcript the model saw, as the transcript's `chunks` name it; `*` for the "
                "source-level reconciliation families (the whole source).",
    "records": "The family's records (below), as the accepted response gave them, made canonical: each cited range "
               "in document order, ranges sorted by document position and de-duplicated, records ordered by their "
               "earliest evidence. Empty when the response had no records.",
    "earliest_evidence_unit_id": "The unit id where the earliest cited range of any record starts (document "
                                 "order, not numeric order); null when the artifact has no records.",
    "provenance": "The attempt the artifact comes from.",
    "provenance.candidate_id": "The accepted candidate's `candidate_id` (a row of `evaluations/` with verdict "
                               "`accepted`).",
    "provenance.attempt": "Its attempt number: 1 for a first extraction, higher for a retry or refresh answer.",
    "provenance.producer": "The producer of the attempt, as the candidate record gave it.",
    "provenance.producer.provider": "e.g. `openai`, `anthropic`; `simulated` in the demo.",
    "provenance.producer.model": "The model, as the candidate record named it.",
    "provenance.prompt_fingerprint": "`sha256:` of the prompt the attempt was made with, as the candidate record "
                                     "gave it. Equal to the manifest's `fingerprints.<family>.prompt` unless the "
                                     "attempt is stale (made under an earlier prompt).",
    "provenance.schema_fingerprint": "`sha256:` of the LLM schema the attempt was made with, as the candidate record "
                                     "gave it (the manifest's `fingerprints.<family>.llm_schema` when current).",
    "provenance.raw_response": "The provider's response text exactly as archived: never re-serialized, the same "
                               "characters in every output format.",
    "provenance.raw_response_sha256": "Hex sha256 of `raw_response`'s UTF-8 bytes.",
    "provenance.judged_by": "The semantic judges' verdicts the accepted attempt passed (`--judges`, "
                            "`docs/judges.md`); empty when no judge of the run judges the family, or when the "
                            "attempt was decided by the rules alone (its evaluation says `unjudged`).",
    "provenance.judged_by[].judge": "The judge's name, e.g. `combat-semantics`.",
    "provenance.judged_by[].judge_fingerprint": "`sha256:` of the judge's prompt and response schema the verdict "
                                                "was given under.",
    "provenance.judged_by[].verdict_id": "The applied verdict record's `verdict_id`.",
    "provenance.judged_by[].verdict": "`pass`, or `unsure` (an unsure verdict passes; the evaluation flags it "
                                      "`judge_unsure`).",
    "validator_policy_fingerprint": "`sha256:` of the family's validator policy (validators, allowed values, "
                                    "limits, guidance version) that accepted the attempt: the manifest's "
                                    "`fingerprints.<family>.validator_policy`.",
}

# Evidence, the same in every family whose records cite ranges.
EVIDENCE_FIELDS: dict[str, str] = {
    "records[].evidence": "The transcript ranges the record is based on, sorted by document position, "
                          "without duplicates.",
    "records[].evidence[].source_id": "The transcript the range is in (the artifact's `source_id`).",
    "records[].evidence[].start_unit_id": "The range's first unit (a transcript `unit_id`); never after "
                                          "`end_unit_id` in document order (reversed ranges are put in order).",
    "records[].evidence[].end_unit_id": "The range's last unit, inclusive; the same as `start_unit_id` for one unit.",
}


# --- where the examples come from ------------------------------------------------------------------------
# Every example is a real row (a family's example: a record of a row) of the folder the page names beside it:
# out/demo/ as `make demo` writes it, out/query/ as docs/querying.md's run writes it from the demo's archive.
# tests/test_demo.py finds each one of out/demo/ in the demo it runs (a smaller archive: only rows it writes too
# are chosen, so slots that rest on the first archive's attempts, not on the backfill's answers, whose ids
# differ), tests/test_querying.py each one of out/query/ (the whole sample: the reconciled registries, and the
# occurrences checked against them, need all of a source's chunk registries), tests/test_pipeline_e2e.py the dead
# letters (the demo writes none). ``tests/doc_examples.py`` says, for one that is not found, what is there now.
EXAMPLES_FROM = {"out/demo/": "`make demo`", "out/query/": "the run of [docs/querying.md](querying.md)"}
ARTIFACT_EXAMPLE_FROM = "out/demo/run1/artifacts/spells/"
# The run whose artifacts/<family>/ holds each family's example record.
FAMILY_EXAMPLE_RUNS: dict[str, str] = {
    **{family: "out/demo/run2/" for family in FAMILIES},
    "spells": "out/demo/run1/",  # the record of ARTIFACT_EXAMPLE
    **{family: "out/query/" for family in ("item-occurrences", "item-reconciliation", "location-reconciliation",
                                           "npc-reconciliation")},
}


def family_example_from(family: str) -> str:
    return f"{FAMILY_EXAMPLE_RUNS[family]}artifacts/{family}/"


# --- the other outputs: one section per output schema (assets/<schema>.{avsc,json,arrow.json}) ------


@dataclass(frozen=True)
class OutputDoc:
    schema: str  # asset path without extension: "outputs/retry_request.v1"
    folder: str  # the folder under the command's --output
    command: str  # the command that writes it
    audience: str
    row: str  # "one row is ..."
    intro: str
    fields: Mapping[str, str]
    example: Mapping[str, Any]  # a real row (long strings shortened when rendered) of the folder ``origin`` names
    origin: str  # where the examples are rows: a folder under out/demo/ or out/query/ (see EXAMPLES_FROM), or prose
    more_examples: tuple[Mapping[str, Any], ...] = ()


REQUESTS = OutputDoc(
    schema="outputs/retry_request.v1", folder="retry_requests/", command="reprocess", audience="the producer",
    row="one request per slot that needs a new attempt: a *retry* (no attempt passes, budget left) or a *refresh* "
        "(with `--refresh-stale`: the slot rests only on attempts under an earlier prompt)",
    intro="Model-facing: nothing operator-only is in a request. A slot never gets two requests in one run. "
          "`export-batch` turns these rows into provider batch files (`docs/batch.md`).",
    fields={
        "request_id": "The request's id, stable across runs: `r-` and 32 hex digits of a sha256 over the slot and "
                      "the attempt it asks for (a refresh: also the prompt and schema fingerprints, so a later "
                      "revision's refresh is another request; a reconciliation: also its entry list's fingerprint). Short and plain enough for a provider's custom id.",
        "kind": "`retry`: correct the failing attempt; `refresh`: extract again under the current prompt; `judge`: "
                "a semantic judge's verdict on the attempt `candidate_id` (`--judges`, `docs/judges.md`).",
        "family": "The family of the slot.",
        "source_id": "The transcript of the slot.",
        "chunk_id": "The chunk of the slot (`*` for a reconciliation).",
        "candidate_id": "The attempt being replaced: a retry corrects it (the slot's latest attempt); a refresh "
                        "replaces it.",
        "attempt": "A retry or refresh: the attempt number the answer must carry, one more than the highest attempt "
                   "seen for the slot. A judge request: the judged attempt's own number.",
        "correction_guidance": "For a retry, what to correct, in model-safe prose: every problem found, each tied "
                               "to the response field it is about, then what to return. Empty for a refresh.",
        "prompt_fingerprint": "`sha256:` of the current prompt of the family (the one to send with the request).",
        "schema_fingerprint": "`sha256:` of the current LLM schema of the family.",
        "validator_policy_fingerprint": "`sha256:` of the validator policy that judged the slot.",
        "input_fingerprint": "Reconciliations only: `sha256:` of the entry list the request was built with (the "
                             "labelled chunk registry entries it shows); the answer must carry it back. Null for "
                             "every other family.",
        "candidate_sha256": "Judge requests only: hex sha256 of the judged attempt's raw response; the verdict must "
                            "carry it back. Null for a retry or refresh.",
        "judge": "Judge requests only: the judge asked (`docs/judges.md`). Null for a retry or refresh.",
        "judge_fingerprint": "Judge requests only: `sha256:` of the judge's prompt and response schema; a verdict "
                             "under another fingerprint is stale. Null for a retry or refresh.",
    },
    example={
        "request_id": "r-49d341ac4faeff5a21c36da30632cd51", "kind": "retry", "family": "enemy-events",
        "source_id": "crd3:C1E001", "chunk_id": "x-0019", "candidate_id": "c-aae09478b85065fe", "attempt": 2,
        "correction_guidance": "Your previous response could not be accepted. Every problem found is listed below. "
                               "Fix all of them and return one complete corrected replacement response: every "
                               "record, not only the changed ones, in the same JSON shape.\n- The appeared event of "
                               "the enemy \"Veteran\" (units 569–7128): It cites unit 7128, which is not in the "
                               "transcript excerpt. Cite only unit ids shown in the excerpt (units 541–570).\nReturn "
                               "only the corrected JSON response.",
        "prompt_fingerprint": "sha256:831bbccbc1b1f302a88f4a7802410b2f5a0837e301d5592dfa5e76840b108418",
        "schema_fingerprint": "sha256:d5bf63e7682ca4eda29f4c698fc0c2fb5feb6adde7d1dff7c2a411ac647cf6f7",
        "validator_policy_fingerprint": "sha256:8317936cd42fb413f816db46af6edf2b48fa0d4f07c4f1d43b8ec8b7c732b9d7",
        "input_fingerprint": None, "candidate_sha256": None, "judge": None, "judge_fingerprint": None,
    },
    origin="out/demo/run1/retry_requests/",
    more_examples=({
        "request_id": "r-aad0121b09391ecb46c6deae6dc7cfe1", "kind": "refresh", "family": "spells",
        "source_id": "crd3:C1E035", "chunk_id": "x-0061", "candidate_id": "c-c73a2e78a613f190", "attempt": 2,
        "correction_guidance": "",
        "prompt_fingerprint": "sha256:2c76b0f99d8f5bfe307e6c975e826c302c13573ab6dae22e68c7525e98270030",
        "schema_fingerprint": "sha256:026f6f5a31ce79369f204f9e2e8e384e82faeec38fdd065ac2923521e2db980a",
        "validator_policy_fingerprint": "sha256:a964dde8084056400a8c68d31f213252b2df57646cffe21816770db60d978373",
        "input_fingerprint": None, "candidate_sha256": None, "judge": None, "judge_fingerprint": None,
    },),
)

EVALUATIONS = OutputDoc(
    schema="outputs/evaluation.v1", folder="evaluations/", command="reprocess", audience="operators",
    row="one row per input candidate that was evaluated (every candidate that is not a dead letter or filtered "
        "out by `--families`)",
    intro="Operator-facing: issues carry the validators' own wording, which is never sent to a producer.",
    fields={
        "candidate_id": "The candidate record's `candidate_id` (unique within a run).",
        "family": "Its family.",
        "source_id": "Its transcript.",
        "chunk_id": "Its chunk (`*` for a reconciliation).",
        "attempt": "Its attempt number.",
        "verdict": "`accepted`: the slot's artifact comes from it; `superseded`: it passes, but another attempt of "
                   "the slot was accepted; `rejected`: it does not pass; `deferred`: it could not be judged yet (no "
                   "accepted registry for an occurrence or reconciliation, or a reconciliation made for another "
                   "entry list).",
        "issues": "Every problem found, in one pass; empty for a passing attempt. Bounded: past 50 the last row is "
                  "validator `bound`, reason code `more_issues` (\"and N more issues\"), not a defect.",
        "issues[].validator": "The check that found it, e.g. `spells.catalog`, `npc-registry.identity`, "
                              "`structure` (the response is not JSON or does not fit the LLM schema).",
        "issues[].reason_code": "A stable code for the kind of problem, e.g. `span_outside_chunk`, `duplicate_name`; "
                                "what the report and the queries count.",
        "issues[].location": "Where in the response, e.g. `spells[1].spell_name`; empty when about the whole "
                             "response.",
        "issues[].message": "The problem in a line, for operators.",
        "endpoints_reordered": "How many of the response's cited ranges the job put in document order (their "
                               "endpoints came back reversed). An accepted slot whose every passing attempt has "
                               "a count above zero is a producer retry saved (manifest `endpoint_ordering`).",
        "producer": "Who made the attempt, as its candidate record named it (`provider`, `model`): what its "
                    "usage is priced as (`--prices` of the report and compare, `docs/batch.md`).",
        "producer.provider": "e.g. `openai` (both OpenAI targets' answers), `anthropic`; `simulated` in the demo.",
        "producer.model": "The model, as the candidate record named it.",
        "usage": "What the provider billed for the attempt, as its candidate carried it (`import-batch` fills it "
                 "from every provider's result); null when the candidate said nothing: its cost is then unknown, "
                 "never zero. The report and compare add these up per family and verdict.",
        "usage.input_tokens": "Every token of the prompt, cached ones included.",
        "usage.output_tokens": "Every token generated, reasoning included.",
        "usage.cached_input_tokens": "The part of `input_tokens` read from a prompt cache; null when the provider "
                                     "did not say (priced as uncached).",
        "usage.batch": "Whether the answer came through a provider's batch API (its batch discount applies).",
    },
    example={
        "candidate_id": "c-aae09478b85065fe", "family": "enemy-events", "source_id": "crd3:C1E001",
        "chunk_id": "x-0019", "attempt": 1, "verdict": "rejected",
        "issues": [{"validator": "enemy_events.source_reference", "reason_code": "unresolved_unit",
                    "location": "events[0].evidence[1]",
                    "message": "evidence endpoint(s) [7128] do not resolve in source crd3:C1E001"}],
        "endpoints_reordered": 0,
        "producer": {"provider": "simulated", "model": "sim-1"},
        "usage": {"input_tokens": 1484, "output_tokens": 61, "cached_input_tokens": 0, "batch": False},
    },
    origin="out/demo/run1/evaluations/",
)

DEAD_LETTERS = OutputDoc(
    schema="outputs/dead_letter.v1", folder="dead_letters/", command="reprocess", audience="operators",
    row="one input record the job could not use (not JSON or not UTF-8, a required field missing, an unknown "
        "source, family or chunk, a duplicate candidate id, a record over `--max-record-bytes`, ...)",
    intro="Dead letters count in the conservation blocks of the manifest: every input record is an evaluation, a "
          "dead letter or counted as filtered.",
    fields={
        "input": "The input it came from: `transcripts`, `candidates` or `prior_registries`.",
        "reason": "Why it could not be used, in a line.",
        "payload": "The original record, byte for byte: as text when it is UTF-8, else base64.",
        "payload_encoding": "`utf-8` or `base64`: how to read `payload`.",
    },
    example={"input": "candidates", "reason": "record is missing a string 'source_id'",
             "payload": "{\"candidate_id\": \"c-26\"}", "payload_encoding": "utf-8"},
    origin="`dead_letters/` of a run on the test archive, `tests/fixture_archive.py` (the demo writes no dead letter)",
    more_examples=({"input": "candidates", "reason": "record is not valid UTF-8 text",
                    "payload": "eyJjYW5kaWRhdGVfaWQiOiAiYy0yMSIsICJzb3VyY2VfaWQiOiAiY3JkMzpTMSIsICJmYW1pbHkiOiAic3BlbP/+In0=",
                    "payload_encoding": "base64"},),
)

SLOTS = OutputDoc(
    schema="outputs/slot_change.v1", folder="slots/", command="compare", audience="operators",
    row="one slot whose outcome or accepted records differ between run A and run B",
    intro="A slot's outcome in a run is read off what the run wrote for it: `accepted` (an "
          "artifact), `retry` or `refresh` (a request of that kind), `exhausted` (evaluated, nothing passed, no "
          "request), `deferred` (every evaluation deferred, as the job counts it: also a reconciliation waiting "
          "for its entry list, whose refresh request carries the current list) or `absent` (nothing of the slot). "
          "`records` says which records changed, by the names their family gives them; `compare.html` lists "
          "every changed slot with what to do next.",
    fields={
        "family": "The slot's family.",
        "source_id": "The slot's transcript.",
        "chunk_id": "The slot's chunk (`*` for a reconciliation).",
        "transition": "The slot's outcome in each run.",
        "transition.from": "Its outcome in run A.",
        "transition.to": "Its outcome in run B.",
        "change": "`regression`: accepted in A, not in B; `fix`: the reverse; `records_changed`: accepted in both, "
                  "with other records; `other`: another change of outcome.",
        "deciding_a": "The attempt the outcome rests on in run A: the accepted one, the one a request replaces, "
                      "else the latest; null when run A holds nothing of the slot.",
        "deciding_a.candidate_id": "That attempt's candidate id.",
        "deciding_a.attempt": "Its attempt number.",
        "deciding_a.reason_codes": "Its reason codes, distinct and sorted; empty when it passed.",
        "deciding_a.records_sha256": "For an accepted slot: hex sha256 of the artifact's `records` as canonical "
                                     "JSON (the same whichever format the run was written in); null otherwise.",
        "deciding_b": "The same for run B.",
        "deciding_b.candidate_id": "That attempt's candidate id.",
        "deciding_b.attempt": "Its attempt number.",
        "deciding_b.reason_codes": "Its reason codes, distinct and sorted; empty when it passed.",
        "deciding_b.records_sha256": "As in `deciding_a`.",
        "records": "What changed in the slot's accepted records from A to B (a run that did not accept the slot has "
                   "none: a fix's records are all added, a regression's all removed); null when neither run "
                   "accepted it. Records equal in both runs are unchanged; of the others, those with the same name "
                   "are changed, the rest added or removed.",
        "records.added": "Records only in B.",
        "records.removed": "Records only in A.",
        "records.changed": "Records of A and B with the same name and other fields.",
        "records.unchanged": "Records equal in both runs.",
        "records.listed": "The first changes (changed, then added, then removed; records in document order), at "
                          "most 12 per slot.",
        "records.listed[].change": "`changed`, `added` or `removed`.",
        "records.listed[].record": "The record's transcript-grounded name, as its family names it: e.g. `The spell "
                                   "\"Shield\" cast by \"SAM\"`, `The NPC \"Grog\"`, `The turn of \"Vex\" in "
                                   "round 2`.",
        "records.listed[].fields": "A changed record's fields that differ (nested ones by dotted path, e.g. "
                                   "`cast.level`); empty for an added or removed record.",
        "records.listed[].fields[].field": "The field's path in the record.",
        "records.listed[].fields[].a": "Its value in A, as compact JSON (a list of evidence ranges as `units 86–87, "
                                       "90`), cut at 80 characters; null when the record has no such field in A.",
        "records.listed[].fields[].b": "The same in B.",
        "records.more": "Changes not listed (the bound): added + removed + changed − the listed ones.",
    },
    example={
        "family": "npc-registry", "source_id": "crd3:C1E001", "chunk_id": "x-0007",
        "transition": {"from": "deferred", "to": "accepted"}, "change": "fix",
        "deciding_a": {"candidate_id": "c-f83b8703c4d706b5", "attempt": 1, "reason_codes": ["awaiting_judgment"],
                       "records_sha256": None},
        "deciding_b": {"candidate_id": "c-f83b8703c4d706b5", "attempt": 1, "reason_codes": [],
                       "records_sha256": "174a6f094d6c8697bfe0eae0c8960a539f005c05524ee7d98eaeb6bfb0437b64"},
        "records": {"added": 2, "removed": 0, "changed": 0, "unchanged": 0, "more": 0, "listed": [
            {"change": "added", "record": "The NPC \"Lord Greyspine\"", "fields": []},
            {"change": "added", "record": "The NPC \"Grog\"", "fields": []}]},
    },
    origin="out/demo/compare/slots/",
)

# In the order the document shows them; the run folder's first, then compare's.
OUTPUT_DOCS: tuple[OutputDoc, ...] = (REQUESTS, EVALUATIONS, DEAD_LETTERS, SLOTS)

# --- the artifact example (ARTIFACT_EXAMPLE_FROM): an attempt under the earlier spells prompt, accepted by the
# rules alone in run 1 (a refresh replaces it), whose reversed second range the job put in order --------------

ARTIFACT_EXAMPLE: dict[str, Any] = {
    "artifact_id": "a-bdce18d27844f989a3e4fe015da6320e", "family": "spells", "schema_version": "v1",
    "source_id": "crd3:C1E035", "chunk_id": "x-0061",
    "records": [FAMILIES["spells"].docs.example],  # the family's example record is this artifact's
    "earliest_evidence_unit_id": 1807,
    "provenance": {
        "candidate_id": "c-c73a2e78a613f190", "attempt": 1,
        "producer": {"provider": "simulated", "model": "sim-1"},
        "prompt_fingerprint": "sha256:a17888e6d2f1ebfab9ec128379be62612fa93c5924cdbad20528368147c9b2ef",
        "schema_fingerprint": "sha256:026f6f5a31ce79369f204f9e2e8e384e82faeec38fdd065ac2923521e2db980a",
        "raw_response": "{\"spells\":[{\"spell_name\":\"Mass Heal\",\"caster_name\":\"ASHLEY\",\"cast\":{\"level\":9,"
                        "\"as_ritual\":false,\"target_names\":[\"Pike\"]},\"evidence\":[{\"start_unit_id\":1807,"
                        "\"end_unit_id\":1808},{\"start_unit_id\":1819,\"end_unit_id\":1814}]}]}",
        "raw_response_sha256": "fb0ae69b21fe010185955f927d7b31398aed979eddabd760a9868c3d68d2ca26",
        "judged_by": []},
    "validator_policy_fingerprint": "sha256:a964dde8084056400a8c68d31f213252b2df57646cffe21816770db60d978373",
}
