"""The prose of the outputs no family owns, for the data dictionary (``docgen.data_dictionary``).

What each field of the artifact envelope, the retry requests, the evaluations, the dead letters and a
comparison's slots means, a real example row of each, and what each key of the manifest holds. What a
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
    example: Mapping[str, Any]  # a real row of the demo (long strings shortened when rendered)
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
        "request_id": "r-f7ae3b18883dfc9f023523eecd29f06c", "kind": "retry", "family": "item-occurrences",
        "source_id": "crd3:C1E001", "chunk_id": "x-0052", "candidate_id": "c-9b5199f9f0f7797f", "attempt": 3,
        "correction_guidance": "Your previous response could not be accepted. Every problem found is listed below. "
                               "Fix all of them and return one complete corrected replacement response: every "
                               "record, not only the changed ones, in the same JSON shape.\n- The response: It "
                               "stops before the JSON is complete. Return one complete JSON object and nothing "
                               "else.\nReturn only the corrected JSON response.",
        "prompt_fingerprint": "sha256:39c4a6bcc4260dd896b0c1bceb44a9f34c6de40cda73f27cec295762b21841b7",
        "schema_fingerprint": "sha256:9ea012b4087d685469c7d6ec6afd4ee7dcc38aa85fce53f9ce15e7eb214950a4",
        "validator_policy_fingerprint": "sha256:271935431c79f4fc2f6e3f0a47cd708fb9582df3932ba920d38733ef09bfd7d6",
        "input_fingerprint": None, "candidate_sha256": None, "judge": None, "judge_fingerprint": None,
    },
    more_examples=({
        "request_id": "r-3bbfa751b4cfed2c5912845390eb53fe", "kind": "refresh", "family": "spells",
        "source_id": "crd3:C1E001", "chunk_id": "x-0001", "candidate_id": "c-836c5eccc6a191eb", "attempt": 2,
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
        "candidate_id": "c-a1b48f1d41ea1ec3", "family": "spells", "source_id": "crd3:C1E001", "chunk_id": "x-0061",
        "attempt": 2, "verdict": "rejected",
        "issues": [{"validator": "spells.shape", "reason_code": "blank_spell_name", "location": "spells[1].spell_name",
                    "message": "blank spell_name"},
                   {"validator": "spells.catalog", "reason_code": "not_a_ritual",
                    "location": "spells[0].cast.as_ritual", "message": "Wall of Stone has no ritual tag"}],
        "endpoints_reordered": 0,
        "producer": {"provider": "openai", "model": "gpt-4.1-mini"},
        "usage": {"input_tokens": 4892, "output_tokens": 228, "cached_input_tokens": 508, "batch": True},
    },
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
        "family": "spells", "source_id": "crd3:C1E001", "chunk_id": "x-0026",
        "transition": {"from": "accepted", "to": "accepted"}, "change": "records_changed",
        "deciding_a": {"candidate_id": "c-1f4fc5e9130f11b5", "attempt": 1, "reason_codes": ["unjudged"],
                       "records_sha256": "44ba39de0ba9590cbf7270f5fe8b37b7bea30349d6ec6341de01d1dabd227f6d"},
        "deciding_b": {"candidate_id": "c-f8914fbf3236a51162c7740d9248f3d3", "attempt": 2,
                       "reason_codes": ["judge_unsure"],
                       "records_sha256": "65ac15307e547696c70f8d95154f45d119583d9ee8918567bdf9d00750ee7e4c"},
        "records": {"added": 0, "removed": 0, "changed": 1, "unchanged": 0, "more": 0, "listed": [
            {"change": "changed", "record": "The spell \"Fireball\" cast by \"ORION\"",
             "fields": [{"field": "cast.level", "a": "5", "b": "3"},
                        {"field": "evidence", "a": "units 769–770", "b": "units 757–759, 769"}]}]},
    },
)

# In the order the document shows them; the run folder's first, then compare's.
OUTPUT_DOCS: tuple[OutputDoc, ...] = (REQUESTS, EVALUATIONS, DEAD_LETTERS, SLOTS)

# --- example rows (real rows of `make demo`'s run 2) -------------------------------------------------

ARTIFACT_EXAMPLE: dict[str, Any] = {
    "artifact_id": "a-9b1e67c428ed8c4d2b7a2671933ca0cb", "family": "spells", "schema_version": "v1",
    "source_id": "crd3:C1E001", "chunk_id": "x-0072",
    "records": [FAMILIES["spells"].docs.example],  # the family's example record is this artifact's
    "earliest_evidence_unit_id": 2139,
    "provenance": {
        "candidate_id": "c-ea8189ee646ff2a5aa62ceed98fcc536", "attempt": 2,
        "producer": {"provider": "openai", "model": "sim-2"},
        "prompt_fingerprint": "sha256:2c76b0f99d8f5bfe307e6c975e826c302c13573ab6dae22e68c7525e98270030",
        "schema_fingerprint": "sha256:026f6f5a31ce79369f204f9e2e8e384e82faeec38fdd065ac2923521e2db980a",
        "raw_response": "{\"spells\":[{\"spell_name\":\"Lightning Bolt\",\"caster_name\":\"MATT\",\"cast\":{\"level\":3,"
                        "\"as_ritual\":false,\"target_names\":[\"Pike\",\"Hope\"]},\"evidence\":[{\"start_unit_id\":"
                        "2139,\"end_unit_id\":2139}]}]}",
        "raw_response_sha256": "354e9770752601aa77a690bc066278af29b846c04759cfb0a818117ed3e3eab7",
        "judged_by": []},
    "validator_policy_fingerprint": "sha256:a964dde8084056400a8c68d31f213252b2df57646cffe21816770db60d978373",
}


# --- manifest.json (no schema file: its shape is domain/manifest.py's build_manifest plus `files`) ----

MANIFEST_BLOCKS: dict[str, str] = {
    "inputs": "What was read.",
    "outcomes": "Per family, how its slots (and attempts) came out.",
    "totals": "`outcomes` summed over the families.",
    "outputs": "Rows written per output.",
    "invariant_failures": "Normalization-invariant failures (derived state that is not canonical): the job's own "
                          "bugs, for operators, never sent to a producer. Expected 0.",
    "endpoint_ordering": "What putting reversed ranges in document order saved (recorded by the job; the report "
                         "reads it).",
    "conservation": "Candidates: every record read is an evaluation, a dead letter or filtered.",
    "transcript_conservation": "Transcripts: every record read is usable or a dead letter.",
    "prior_registry_conservation": "`--prior-registries`: every record read is valid or a dead letter.",
    "verdict_conservation": "`--verdicts`: every verdict record read is applied, superseded, unusable, stale, "
                            "unmatched or a dead letter (`docs/judges.md`).",
    "judges": "Per judge of the run (`--judges`): its family and fingerprint, the judge requests written and what "
              "its verdicts came to. Empty without `--judges`.",
    "verdict_usage": "Per judge of the run (`--judges`): what its verdict records were billed, as each carried it "
                     "(`usage`): in total and per producer (provider, model, batch or not: what `--prices` prices). "
                     "Verdicts without usage add nothing (their cost is unknown); a judge's verdict records are "
                     "`judges.<judge>` applied + superseded + unusable + stale + unmatched. Empty without `--judges`.",
    "unreadable_files": "Input files that could not be read to their end (corrupt compression, a cut Avro file): "
                        "how many records their damaged part held is unknown, so their input's `holds` is false "
                        "and the job exits 2.",
    "refresh": "Prompt revisions: slots resting on attempts under an earlier prompt or schema, the refresh "
               "requests written for them, and where the accepted artifacts come from; totals beside `by_family`.",
    "fingerprints": "The current assets of each family, the ones every attempt is compared with.",
    "options": "The job's options (as given, after defaults).",
    "runner": "The Beam runner that ran the job.",
    "files": "Every output file, by output: the run's commit record (`verify` checks it). Written last; a folder "
             "without `manifest.json` is not a finished run.",
}

_SLOT_OUTCOMES = {
    "accepted": "slots with an accepted artifact",
    "superseded": "attempts that pass but were not the one accepted",
    "retry": "slots that got a retry request",
    "exhausted": "slots with no passing attempt and no budget left",
    "deferred": "slots that could not be decided yet (no accepted registry for an occurrence or reconciliation, "
                "or every reconciliation attempt made for another entry list)",
    "stale": "attempts made under an earlier prompt or LLM schema (also counted in their slot's outcome)",
}
_REFRESH_COUNTS = {
    "slots_to_refresh": "slots with no current attempt, not deferred and without a retry request (and "
                        "reconciliation slots waiting for an attempt on the current entry list)",
    "slots_on_earlier_prompt": "of the slots to refresh, those whose attempts are all under an earlier prompt or "
                               "schema (the others are reconciliation slots waiting for their entry list)",
    "refresh_requests": "refresh requests written (0 without `--refresh-stale`): one per slot to refresh",
    "excerpt_chars": "characters of transcript excerpt (reconciliations: of entry list) those requests send",
    "artifacts_current": "accepted artifacts from a current attempt",
    "artifacts_stale": "accepted artifacts from a stale attempt",
    "current_over_stale": "artifacts whose current attempt won over an earlier passing stale one",
    "entry_list_changed": "reconciliation attempts made for another entry list than the source's current one: "
                          "verdict `deferred`, reason `entry_list_changed`, not evaluated",
    "entry_list_slots_waiting": "reconciliation slots every attempt of which was made for another list (their "
                                "outcome is `deferred`)",
}

# path -> (type, meaning). "<family>" a family's key, "<output>" an output folder (`artifacts/spells`,
# `evaluations`, ...), "<input>" an input name, "<judge>" a judge's name; "[]" the elements of a list.
MANIFEST_FIELDS: dict[str, tuple[str, str]] = {
    "inputs.transcripts": ("integer", "Transcript records read (blank lines not counted)."),
    "inputs.candidates": ("integer", "Candidate records read (blank lines not counted)."),
    "inputs.blank_lines_skipped.transcripts": ("integer", "Blank lines skipped in JSON Lines transcript files."),
    "inputs.blank_lines_skipped.candidates": ("integer", "Blank lines skipped in JSON Lines candidate files."),
    **{f"outcomes.<family>.{name}": ("integer", meaning[0].upper() + meaning[1:] + ".")
       for name, meaning in _SLOT_OUTCOMES.items()},
    **{f"totals.{name}": ("integer", f"`outcomes.<family>.{name}` summed.") for name in _SLOT_OUTCOMES},
    "outputs.artifacts": ("integer", "Rows of `artifacts/` (all families): one per accepted slot."),
    "outputs.retry_requests": ("integer", "Rows of `retry_requests/` with `kind` `retry`."),
    "outputs.refresh_requests": ("integer", "Rows of `retry_requests/` with `kind` `refresh`."),
    "outputs.judge_requests": ("integer", "Rows of `retry_requests/` with `kind` `judge` (0 without `--judges`)."),
    "outputs.evaluations": ("integer", "Rows of `evaluations/`."),
    "outputs.dead_letters": ("integer", "Rows of `dead_letters/` (every input)."),
    "invariant_failures.by_family.<family>": ("integer", "Invariant failures in the family's attempts."),
    "invariant_failures.total": ("integer", "All families."),
    "endpoint_ordering.retries_saved.by_family.<family>": (
        "integer", "Accepted slots none of whose passing attempts passes without ordering (each cites a reversed "
                   "range, which the strict validator rejects): each a producer retry saved."),
    "endpoint_ordering.retries_saved.total": ("integer", "All families."),
    "endpoint_ordering.deferrals_saved.by_family.<family>": (
        "integer", "Occurrence or reconciliation slots decided although, without ordering, their source would have "
                   "had no accepted chunk registry of their kind (they would have been deferred)."),
    "endpoint_ordering.deferrals_saved.total": ("integer", "All families."),
    "conservation.candidates_in": ("integer", "Candidate records read."),
    "conservation.evaluations": ("integer", "Rows of `evaluations/`."),
    "conservation.dead_letters": ("integer", "Candidate records among `dead_letters/`."),
    "conservation.filtered": ("integer", "Candidates of families outside `--families`, counted and not evaluated."),
    "conservation.holds": ("boolean", "`candidates_in = evaluations + dead_letters + filtered`, and every candidate "
                                      "file was read to its end. The job exits non-zero when false."),
    "transcript_conservation.transcripts_in": ("integer", "Transcript records read."),
    "transcript_conservation.usable": ("integer", "Transcripts the job could use."),
    "transcript_conservation.dead_letters": ("integer", "Transcript records among `dead_letters/`."),
    "transcript_conservation.holds": ("boolean", "`transcripts_in = usable + dead_letters`, and every transcript "
                                                 "file was read to its end."),
    "prior_registry_conservation.prior_registries_in": ("integer", "Prior registry records read (0 without "
                                                                   "`--prior-registries`)."),
    "prior_registry_conservation.valid": ("integer", "Records used for occurrence membership."),
    "prior_registry_conservation.dead_letters": ("integer", "Prior registry records among `dead_letters/`."),
    "prior_registry_conservation.holds": ("boolean", "`prior_registries_in = valid + dead_letters`, and every file "
                                                     "was read to its end."),
    "verdict_conservation.verdicts_in": ("integer", "Verdict records read (0 without `--verdicts`)."),
    "verdict_conservation.applied": ("integer", "Verdicts taken as their attempt's verdict of their judge (pass, "
                                                "fail or unsure)."),
    "verdict_conservation.superseded": ("integer", "Usable verdicts of an attempt and judge for which a later one "
                                                   "was applied."),
    "verdict_conservation.unusable": ("integer", "Verdicts whose answer could not be used (not JSON, outside the "
                                                 "judge's schema, a fail with no problem, a pass with problems, a "
                                                 "record the judge was not shown)."),
    "verdict_conservation.stale": ("integer", "Verdicts given under another judge fingerprint (a revised judge "
                                              "prompt or schema): never applied."),
    "verdict_conservation.unmatched": ("integer", "Verdicts that name no attempt this run judges: an unknown "
                                                  "candidate id or raw-response hash, a judge the run does not have, "
                                                  "or an attempt a rule rejects or that waits."),
    "verdict_conservation.dead_letters": ("integer", "Verdict records among `dead_letters/`."),
    "verdict_conservation.holds": ("boolean", "`verdicts_in = applied + superseded + unusable + stale + unmatched "
                                              "+ dead_letters`, and every verdict file was read to its end."),
    "judges.<judge>.family": ("string", "The family the judge judges."),
    "judges.<judge>.fingerprint": ("string", "`sha256:` of the judge's prompt and response schema now."),
    "judges.<judge>.requests": ("integer", "Judge requests written for it."),
    "judges.<judge>.pass": ("integer", "Applied verdicts that say `pass`."),
    "judges.<judge>.fail": ("integer", "Applied verdicts that say `fail` (their attempt rejected)."),
    "judges.<judge>.unsure": ("integer", "Applied verdicts that say `unsure` (their attempt passes)."),
    "judges.<judge>.unusable": ("integer", "Its verdicts that could not be used."),
    "judges.<judge>.stale": ("integer", "Its verdicts under another fingerprint."),
    "judges.<judge>.unmatched": ("integer", "Its verdicts that name no attempt this run judges."),
    "judges.<judge>.superseded": ("integer", "Its usable verdicts a later one replaced."),
    "judges.<judge>.unjudged": ("integer", "Attempts decided by the rules alone: asked `--max-judge-attempts` "
                                           "times without a usable answer, or replaced by a refresh this run."),
    "judges.<judge>.awaiting": ("integer", "Slots deferred waiting for its verdict (`awaiting_judgment`)."),
    **{f"verdict_usage.<judge>{where}.{name}": ("integer", meaning) for where in ("", ".by_producer[]")
       for name, meaning in (
           ("with_usage", "Verdict records that carried a usage."),
           ("input_tokens", "Their billed input tokens (cached ones included)."),
           ("cached_input_tokens", "The part of those read from a cache, where the provider said it."),
           ("cached_unknown", "Those verdicts whose cached input the provider did not say."),
           ("output_tokens", "Their billed output tokens."))},
    "verdict_usage.<judge>.by_producer": ("array of object", "Per producer of its verdicts that carried a usage "
                                                              "(sorted by provider, model, batch)."),
    "verdict_usage.<judge>.by_producer[].provider": ("string", "The verdicts' `producer.provider` (e.g. `openai`)."),
    "verdict_usage.<judge>.by_producer[].model": ("string", "Their `producer.model`."),
    "verdict_usage.<judge>.by_producer[].batch": ("boolean", "Whether they came through a batch API (`usage.batch`)."),
    "unreadable_files.count": ("integer", "Files that could not be read to their end (0 in a sound run)."),
    "unreadable_files.by_input.<input>": ("integer", "Of those, the files of one input (`transcripts`, "
                                                     "`candidates`, `prior_registries`); inputs with none are "
                                                     "left out."),
    "unreadable_files.paths": ("array of string", "Their paths, sorted."),
    "unreadable_files.records_may_be_missing": ("boolean", "True when there is any: records of those files may "
                                                           "be missing from every output."),
    "unreadable_files.conservation_not_provable_for": ("array of string", "The inputs whose conservation block "
                                                                          "cannot be proved (its `holds` is false)."),
    "refresh.refresh_stale": ("boolean", "Whether the run had `--refresh-stale`."),
    **{f"refresh.{name}": ("integer", meaning[0].upper() + meaning[1:] + ", all families.")
       for name, meaning in _REFRESH_COUNTS.items()},
    **{f"refresh.by_family.<family>.{name}": ("integer", meaning[0].upper() + meaning[1:] + ".")
       for name, meaning in _REFRESH_COUNTS.items()},
    "fingerprints.<family>.prompt": ("string", "`sha256:` of the family's current prompt (composed: include lines resolved)."),
    "fingerprints.<family>.llm_schema": ("string", "`sha256:` of the family's current LLM schema."),
    "fingerprints.<family>.validator_policy": ("string", "`sha256:` of the family's validator policy."),
    "options.transcripts": ("string", "`--transcripts`."),
    "options.candidates": ("string", "`--candidates`."),
    "options.output": ("string", "`--output`."),
    "options.output_format": ("string", "`--output-format`: `avro`, `jsonl` or `parquet`."),
    "options.max_attempts": ("integer", "`--max-attempts`."),
    "options.families": ("array of string or null", "`--families`, sorted; null when every family."),
    "options.max_record_bytes": ("integer", "`--max-record-bytes`."),
    "options.prior_registries": ("string or null", "`--prior-registries`; null when not given."),
    "options.refresh_stale": ("boolean", "`--refresh-stale`."),
    "options.judges": ("array of string", "`--judges`, sorted; empty when none."),
    "options.verdicts": ("string or null", "`--verdicts`; null when not given."),
    "options.max_judge_attempts": ("integer", "`--max-judge-attempts`."),
    "runner": ("string", "e.g. `FnApiRunner` (the default, in-process), `FlinkRunner`, `DataflowRunner`."),
    "files.<output>": ("array of object", "The output's `part-*` files."),
    "files.<output>[].path": ("string", "Relative to the run folder, `/`-separated."),
    "files.<output>[].format": ("string", "`avro`, `jsonl` or `parquet`."),
    "files.<output>[].bytes": ("integer", "Its size."),
    "files.<output>[].sha256": ("string", "Hex sha256 of its bytes."),
    "files.<output>[].rows": ("integer", "Rows it holds."),
}

# A real manifest (the demo's run 2), maps by family cut to one family and `files` to two outputs.
MANIFEST_EXAMPLE: dict[str, Any] = {
    "conservation": {"candidates_in": 1684, "dead_letters": 0, "evaluations": 1684, "filtered": 0, "holds": True},
    "endpoint_ordering": {"deferrals_saved": {"by_family": {"spells": 0}, "total": 0},
                          "retries_saved": {"by_family": {"spells": 1}, "total": 88}},
    "files": {
        "artifacts/spells": [{"bytes": 16917, "format": "avro", "path": "artifacts/spells/part-00000-of-00001.avro",
                              "rows": 136,
                              "sha256": "8ee222d689e2c902af4febbfbadb9d5a9cc63cf818694c770c05ecccd9f31bba"}],
        "evaluations": [{"bytes": 36012, "format": "avro", "path": "evaluations/part-00000-of-00001.avro",
                         "rows": 1684, "sha256": "d4551259a3d4b99eb4dd3a486722dcedd6dbcb9705ad71d5ffdf61a753da629d"}]},
    "fingerprints": {"spells": {
        "llm_schema": "sha256:026f6f5a31ce79369f204f9e2e8e384e82faeec38fdd065ac2923521e2db980a",
        "prompt": "sha256:2c76b0f99d8f5bfe307e6c975e826c302c13573ab6dae22e68c7525e98270030",
        "validator_policy": "sha256:a964dde8084056400a8c68d31f213252b2df57646cffe21816770db60d978373"}},
    "inputs": {"blank_lines_skipped": {"candidates": 0, "transcripts": 0}, "candidates": 1684, "transcripts": 2},
    "invariant_failures": {"by_family": {"spells": 0}, "total": 0},
    "options": {"candidates": "out/demo/archive/candidates*", "families": None, "max_attempts": 3,
                "max_record_bytes": 8388608, "output": "out/demo/run2", "output_format": "avro",
                "prior_registries": None, "refresh_stale": True, "judges": [], "verdicts": None,
                "max_judge_attempts": 2, "transcripts": "out/demo/archive/transcripts.jsonl.gz"},
    "outcomes": {"spells": {"accepted": 136, "deferred": 0, "exhausted": 3, "retry": 3, "stale": 142,
                            "superseded": 119}},
    "outputs": {"artifacts": 1260, "dead_letters": 0, "evaluations": 1684, "judge_requests": 0,
                "refresh_requests": 0, "retry_requests": 43},
    "prior_registry_conservation": {"dead_letters": 0, "holds": True, "prior_registries_in": 0, "valid": 0},
    "refresh": {"artifacts_current": 1260, "artifacts_stale": 0,
                "by_family": {"spells": {"artifacts_current": 136, "artifacts_stale": 0, "current_over_stale": 119,
                                         "entry_list_changed": 0, "entry_list_slots_waiting": 0,
                                         "excerpt_chars": 0, "refresh_requests": 0, "slots_on_earlier_prompt": 0,
                                         "slots_to_refresh": 0}},
                "current_over_stale": 119, "entry_list_changed": 0, "entry_list_slots_waiting": 0,
                "excerpt_chars": 0, "refresh_requests": 0, "refresh_stale": True, "slots_on_earlier_prompt": 0,
                "slots_to_refresh": 0},
    "runner": "FnApiRunner",
    "totals": {"accepted": 1260, "deferred": 0, "exhausted": 17, "retry": 43, "stale": 142, "superseded": 134},
    "transcript_conservation": {"dead_letters": 0, "holds": True, "transcripts_in": 2, "usable": 2},
    "verdict_conservation": {"applied": 0, "dead_letters": 0, "holds": True, "stale": 0, "superseded": 0,
                             "unmatched": 0, "unusable": 0, "verdicts_in": 0},
    "judges": {"combat-semantics": {
        "family": "combat-turns", "fingerprint": "sha256:d0105a96c85797a24a08fd4b017eca0f5b4d496675370ac80d0469622d09afa9",
        "requests": 0, "pass": 0, "fail": 0, "unsure": 0, "unusable": 0, "stale": 0, "unmatched": 0, "superseded": 0,
        "unjudged": 0, "awaiting": 0}},
    "verdict_usage": {"combat-semantics": {
        "with_usage": 146, "input_tokens": 229188, "cached_input_tokens": 18624, "cached_unknown": 0,
        "output_tokens": 1620,
        "by_producer": [{"provider": "openai", "model": "sim-2", "batch": True, "with_usage": 146,
                         "input_tokens": 229188, "cached_input_tokens": 18624, "cached_unknown": 0,
                         "output_tokens": 1620}]}},
    "unreadable_files": {"by_input": {}, "conservation_not_provable_for": [], "count": 0, "paths": [],
                         "records_may_be_missing": False},
}
