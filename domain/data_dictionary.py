"""The data dictionary of the job's outputs, ``docs/outputs.md``: rendered from the schemas the job writes with.

Types, nullability and rules (patterns, allowed values, minimums) come from the
output schema files under ``assets/`` at the moment of rendering: the Avro
schema of each output (``*.avsc``, what the writers use), the Arrow schema of
its Parquet files (``*.arrow.json``) and its JSON Schema (``*.json``), all
produced by ``python -m domain.schemagen``. What no schema can say - what a
field means, a short example row, what the manifest's blocks hold - is the
prose below, kept here beside the renderer so the two change together.

    python -m domain.data_dictionary           # writes docs/outputs.md
    python -m domain.data_dictionary --check   # exit 1 when docs/outputs.md is not what render() gives

``tests/test_data_dictionary.py`` fails when a field of any output schema (at
any depth) has no entry here, when an entry names a field no schema has, when a
manifest key is undocumented (or documented but never written), when an
example row does not validate, and when docs/outputs.md is stale. A new field:
add its meaning below (and to the example row when the schema requires it),
then run the command above.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import assets as _assets_package
from domain.families import FAMILIES

ASSETS_DIR = Path(_assets_package.__file__).resolve().parent
DOC_PATH = Path(__file__).resolve().parent.parent / "docs" / "outputs.md"
GENERATOR = "python -m domain.data_dictionary"

# =================================================================================================
# The prose: what each field means. Paths: "a.b" a field of a nested record, "a[]" an element of a
# list (so "records[].evidence[].start_unit_id"). Types and rules are not repeated here: they come
# from the schemas.
# =================================================================================================

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


def _registry_fields(noun: str) -> dict[str, str]:
    return {
        "records[].name": f"The {noun}'s name as the transcript most often gives it; unique within the artifact "
                          "after case and whitespace folding.",
        "records[].aliases": f"Other names, titles or spellings of the same {noun} in the chunk; empty when none. "
                             "Never blank, never another entry's name.",
        "records[].description": f"A short description of the {noun}, from the chunk.",
    }


def _reconciliation_fields(noun: str, registry: str) -> dict[str, str]:
    return {
        "records[].name": f"The {noun}'s name in the merged registry; no two entities share a folded name or alias.",
        "records[].aliases": f"Other names of the same {noun}; empty when none.",
        "records[].description": f"A short description of the {noun}.",
        "records[].members": f"The accepted `{registry}` entries (of this source's chunks) merged into this "
                             "entity, in document order; every entry belongs to exactly one entity.",
        "records[].members[].chunk_id": f"The chunk whose `{registry}` artifact holds the entry.",
        "records[].members[].name": "The entry's `name` in that artifact.",
        "records[].evidence": "The union of the members' evidence, sorted by document position, without duplicates.",
    }


def _occurrence_fields(noun: str, name_field: str, registry: str, kinds: str) -> dict[str, str]:
    return {
        f"records[].{name_field}": f"The {noun} as named in the chunk: a name or alias of the source's accepted "
                                   f"{noun} registry (its `{registry.replace('-registry', '-reconciliation')}` "
                                   f"artifact when one is accepted, else the union of its `{registry}` artifacts).",
        "records[].kind": kinds,
    }


FAMILY_INTROS: dict[str, str] = {
    "spells": "One record is one spell cast in the chunk.",
    "npc-registry": "One record is one non-player character the chunk names (player characters are not NPCs).",
    "npc-reconciliation": "Source-level (`chunk_id` `*`): one record is one NPC of the source's merged registry, "
                          "the chunk registry entries that name the same NPC brought together.",
    "npc-occurrences": "One record is one appearance or mention of a known NPC in the chunk.",
    "item-registry": "One record is one item the chunk names.",
    "item-reconciliation": "Source-level (`chunk_id` `*`): one record is one item of the source's merged registry.",
    "item-occurrences": "One record is one thing that happens to or with a known item in the chunk.",
    "location-registry": "One record is one location the chunk names.",
    "location-reconciliation": "Source-level (`chunk_id` `*`): one record is one location of the source's merged "
                               "registry.",
    "location-occurrences": "One record is one visit, departure or mention of a known location in the chunk.",
    "combat-turns": "One record is one turn taken in combat.",
    "enemy-events": "One record is one thing that happens to or with an enemy.",
    "scene-descriptions": "One record is the one scene of a scene chunk (exactly one per artifact). Its range is "
                          "the scene chunk's own and is never reordered.",
}

FAMILY_RECORD_FIELDS: dict[str, dict[str, str]] = {
    "spells": {
        "records[].spell_name": "The spell as named in the transcript (SRD spells are checked against the catalog; "
                                "unknown names are allowed).",
        "records[].caster_name": "Who casts it, as named in the transcript.",
        "records[].cast": "How it is cast.",
        "records[].cast.level": "Slot level 0-9 (0 for a cantrip); null when not stated. For a catalog spell, at "
                                "least its base level.",
        "records[].cast.as_ritual": "Cast as a ritual; true only for a spell the catalog tags as ritual.",
        "records[].cast.target_names": "Who or what it targets, as named; empty when not stated.",
    },
    "npc-registry": _registry_fields("NPC"),
    "npc-reconciliation": _reconciliation_fields("NPC", "npc-registry"),
    "npc-occurrences": _occurrence_fields(
        "NPC", "npc_name", "npc-registry",
        "How the NPC occurs: `present` (there, silent), `speaking`, `acting` or only `mentioned`."),
    "item-registry": _registry_fields("item"),
    "item-reconciliation": _reconciliation_fields("item", "item-registry"),
    "item-occurrences": {
        **_occurrence_fields("item", "item_name", "item-registry",
                             "What happens to the item: `acquired`, `used`, `transferred`, `lost` or only "
                             "`mentioned`."),
        "records[].holder_name": "Who holds the item after the occurrence; always given for `acquired` and "
                                 "`transferred`, otherwise null when not stated.",
    },
    "location-registry": _registry_fields("location"),
    "location-reconciliation": _reconciliation_fields("location", "location-registry"),
    "location-occurrences": _occurrence_fields(
        "location", "location_name", "location-registry",
        "How the location occurs: `visited`, `departed` or only `mentioned`."),
    "combat-turns": {
        "records[].round": "The combat round of the turn, counted from 1.",
        "records[].actor_name": "Who takes the turn, as named in the transcript.",
        "records[].turn_kind": "The turn's main action.",
        "records[].target_names": "Who or what the turn targets, as named; at least one for an `attack`.",
    },
    "enemy-events": {
        "records[].enemy_name": "The enemy as named in the transcript.",
        "records[].kind": "What happens to or with the enemy; at most one `engaged` event per enemy (case-folded) "
                          "in an artifact.",
    },
    "scene-descriptions": {
        "records[].source_id": "The transcript (the artifact's `source_id`).",
        "records[].kind": "What the scene is mainly about.",
        "records[].title": "A short title for the scene.",
        "records[].summary": "What happens in the scene, in a few sentences.",
        "records[].start_unit_id": "The scene chunk's first unit, exactly.",
        "records[].end_unit_id": "The scene chunk's last unit, exactly.",
    },
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
    },
    example={
        "candidate_id": "c-a1b48f1d41ea1ec3", "family": "spells", "source_id": "crd3:C1E001", "chunk_id": "x-0061",
        "attempt": 2, "verdict": "rejected",
        "issues": [{"validator": "spells.shape", "reason_code": "blank_spell_name", "location": "spells[1].spell_name",
                    "message": "blank spell_name"},
                   {"validator": "spells.catalog", "reason_code": "not_a_ritual",
                    "location": "spells[0].cast.as_ritual", "message": "Wall of Stone has no ritual tag"}],
        "endpoints_reordered": 0,
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
    "records": [{"spell_name": "Lightning Bolt", "caster_name": "MATT",
                 "cast": {"level": 3, "as_ritual": False, "target_names": ["Pike", "Hope"]},
                 "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 2139, "end_unit_id": 2139}]}],
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

# One record per family (the spells one is the artifact's above).
RECORD_EXAMPLES: dict[str, dict[str, Any]] = {
    "spells": ARTIFACT_EXAMPLE["records"][0],
    "npc-registry": {"name": "Nostoc Greyspine", "aliases": ["Greyspine"], "description": "Named by LAURA: \"Nostoc "
                     "Greyspine.\"", "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 249,
                                                   "end_unit_id": 249}]},
    "npc-reconciliation": {"name": "Alcove", "aliases": [], "description": "Named by TALIESIN: \"Can we pass by the "
                           "Alcove?\"", "members": [{"chunk_id": "x-0059", "name": "Alcove"},
                                                    {"chunk_id": "x-0060", "name": "Alcove"}],
                           "evidence": [{"source_id": "crd3:C1E035", "start_unit_id": 1764, "end_unit_id": 1764},
                                        {"source_id": "crd3:C1E035", "start_unit_id": 1774, "end_unit_id": 1776}]},
    "npc-occurrences": {"npc_name": "Pan", "kind": "present",
                        "evidence": [{"source_id": "crd3:C1E035", "start_unit_id": 30, "end_unit_id": 30}]},
    "item-registry": {"name": "sword", "aliases": [], "description": "Named by TALIESIN: \"I hand her my sword.\"",
                      "evidence": [{"source_id": "crd3:C1E035", "start_unit_id": 919, "end_unit_id": 919}]},
    "item-reconciliation": {"name": "bag", "aliases": [], "description": "Named by TRAVIS: \"I put it in the bag of "
                            "holding.\"", "members": [{"chunk_id": "x-0017", "name": "bag"},
                                                      {"chunk_id": "x-0039", "name": "bag"}],
                            "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 483, "end_unit_id": 483},
                                         {"source_id": "crd3:C1E001", "start_unit_id": 1164, "end_unit_id": 1164}]},
    "item-occurrences": {"item_name": "coin", "kind": "acquired", "holder_name": "SAM",
                         "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 8, "end_unit_id": 9}]},
    "location-registry": {"name": "Firebrook Inn", "aliases": ["Inn"], "description": "Named by MATT: \"she was "
                          "staying at the Firebrook Inn.\"", "evidence": [{"source_id": "crd3:C1E001",
                                                                           "start_unit_id": 202,
                                                                           "end_unit_id": 204}]},
    "location-reconciliation": {"name": "cave", "aliases": [], "description": "Named by MATT: \"with the back of the "
                                "cave wall.\"", "members": [{"chunk_id": "x-0026", "name": "cave"},
                                                            {"chunk_id": "x-0055", "name": "cave"}],
                                "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 768, "end_unit_id": 768},
                                             {"source_id": "crd3:C1E001", "start_unit_id": 1649,
                                              "end_unit_id": 1650}]},
    "location-occurrences": {"location_name": "mine", "kind": "departed",
                             "evidence": [{"source_id": "crd3:C1E035", "start_unit_id": 1, "end_unit_id": 2}]},
    "combat-turns": {"round": 2, "actor_name": "MATT", "turn_kind": "attack", "target_names": ["Grick"],
                     "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 87, "end_unit_id": 88}]},
    "enemy-events": {"enemy_name": "Noble", "kind": "engaged",
                     "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 7, "end_unit_id": 8}]},
    "scene-descriptions": {"source_id": "crd3:C1E001", "kind": "combat", "title": "Combat: tunnel",
                           "summary": "ORION opens with \"Yeah.\"; LAURA closes with \"All of them?\".",
                           "start_unit_id": 1561, "end_unit_id": 1680},
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
    "unreadable_files": {"by_input": {}, "conservation_not_provable_for": [], "count": 0, "paths": [],
                         "records_may_be_missing": False},
}

# =================================================================================================
# The schemas: reading every output schema file under assets/
# =================================================================================================

# The files of one schema; the longest suffix first (an Arrow schema also ends in .json).
SCHEMA_SUFFIXES = (".arrow.json", ".avsc", ".json")


def artifact_schema(family: str) -> str:
    """Asset path without extension of a family's durable schemas: ``dnd/spells/schemas/dnd_spells.v1``."""
    return f"dnd/{family}/schemas/dnd_{family.replace('-', '_')}.v1"


def output_schema_files() -> dict[str, list[str]]:
    """Every output schema file under assets/, by schema (asset path without extension): the durable
    artifact schemas of assets/dnd/*/schemas/ (not the LLM-facing ``*_llm.*``) and assets/outputs/."""
    found: dict[str, list[str]] = {}
    paths = [*ASSETS_DIR.glob("outputs/*"), *ASSETS_DIR.glob("dnd/*/schemas/*")]
    for path in sorted(paths):
        name = path.relative_to(ASSETS_DIR).as_posix()
        suffix = next((s for s in SCHEMA_SUFFIXES if name.endswith(s)), None)
        if suffix is None or "_llm." in name:
            continue
        found.setdefault(name[: -len(suffix)], []).append(name)
    return found


def load_schema(path: str) -> Any:
    return json.loads((ASSETS_DIR / path).read_text(encoding="utf-8"))


def avro_fields(schema: Mapping) -> Iterator[tuple[str, Any, bool]]:
    """(path, Avro type without its null branch, nullable) of every field, depth first, named types resolved."""
    named: dict[str, Any] = {}

    def resolve(avro_type: Any) -> tuple[Any, bool]:
        nullable = isinstance(avro_type, list) and "null" in avro_type
        if isinstance(avro_type, list):
            rest = [t for t in avro_type if t != "null"]
            avro_type = rest[0] if len(rest) == 1 else rest
        if isinstance(avro_type, str) and avro_type in named:
            avro_type = named[avro_type]
        if isinstance(avro_type, dict) and "name" in avro_type and avro_type.get("type") in ("record", "enum"):
            named.setdefault(avro_type["name"], avro_type)
        return avro_type, nullable

    def walk(record: Mapping, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        for fld in record["fields"]:
            path = f"{prefix}{fld['name']}"
            avro_type, nullable = resolve(fld["type"])
            yield path, avro_type, nullable
            yield from inner(avro_type, path)

    def inner(avro_type: Any, path: str) -> Iterator[tuple[str, Any, bool]]:
        if isinstance(avro_type, dict) and avro_type.get("type") == "record":
            yield from walk(avro_type, path + ".")
        elif isinstance(avro_type, dict) and avro_type.get("type") == "array":
            item, _ = resolve(avro_type["items"])
            yield from inner(item, path + "[]")

    yield from walk(schema, "")


def avro_type_name(avro_type: Any) -> str:
    if isinstance(avro_type, str):
        return avro_type
    if isinstance(avro_type, list):
        return " or ".join(avro_type_name(t) for t in avro_type)
    kind = avro_type.get("type")
    if kind == "array":
        items = avro_type["items"]
        items = [t for t in items if t != "null"][0] if isinstance(items, list) else items
        return f"array<{avro_type_name(items)}>"
    if kind in ("record", "enum"):
        return kind
    return avro_type_name(kind)


def json_schema_paths(schema: Mapping) -> set[str]:
    """Every property path of a JSON Schema (``properties`` and array ``items``, through ``allOf``)."""
    paths: set[str] = set()

    def walk(node: Any, prefix: str) -> None:
        if not isinstance(node, Mapping):
            return
        for name, sub in node.get("properties", {}).items():
            path = f"{prefix}{name}"
            paths.add(path)
            walk(sub, path + ".")
            items = sub.get("items") if isinstance(sub, Mapping) else None
            while isinstance(items, Mapping):
                walk(items, path + "[].")
                path, items = path + "[]", items.get("items")
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in node.get(key, []):
                walk(sub, prefix)
        for key in ("if", "then", "else"):
            walk(node.get(key), prefix)

    walk(schema, "")
    return paths


def json_schema_node(schema: Mapping, path: str) -> Mapping:
    node: Any = schema
    for part in path.split("."):
        name, lists = part.rstrip("[]"), part.count("[]")
        node = node["properties"][name]
        for _ in range(lists):
            node = node["items"]
    return node


def arrow_fields(schema: Mapping) -> dict[str, tuple[str, bool]]:
    """{path: (Arrow type, nullable)} of every field of an ``*.arrow.json`` description."""
    found: dict[str, tuple[str, bool]] = {}

    def type_name(arrow_type: Any) -> str:
        if isinstance(arrow_type, str):
            return arrow_type
        if "list" in arrow_type:
            return f"list<{type_name(arrow_type['list']['type'])}>"
        return "struct"

    def inner(arrow_type: Any, path: str) -> None:
        if isinstance(arrow_type, dict) and "struct" in arrow_type:
            walk(arrow_type["struct"], path + ".")
        elif isinstance(arrow_type, dict) and "list" in arrow_type:
            inner(arrow_type["list"]["type"], path + "[]")

    def walk(fields: list, prefix: str) -> None:
        for fld in fields:
            path = prefix + fld["name"]
            found[path] = (type_name(fld["type"]), bool(fld["nullable"]))
            inner(fld["type"], path)

    walk(schema["fields"], "")
    return found


def schema_paths(files: list[str]) -> set[str]:
    """The field paths of one schema's files (Avro, JSON Schema, Arrow), together."""
    paths: set[str] = set()
    for name in files:
        data = load_schema(name)
        if name.endswith(".avsc"):
            paths.update(path for path, _, _ in avro_fields(data))
        elif name.endswith(".arrow.json"):
            paths.update(arrow_fields(data))
        else:
            paths.update(json_schema_paths(data))
    return paths


def _rule(node: Mapping) -> str:
    """What the JSON Schema requires of a value beyond its type."""
    parts = []
    if "const" in node:
        parts.append(f"always `{node['const']}`")
    if "enum" in node:
        parts.append("one of " + ", ".join(f"`{value}`" for value in node["enum"]))
    if "pattern" in node:
        parts.append(f"pattern `{node['pattern']}`")
    if "minimum" in node:
        parts.append(f"≥ {node['minimum']}")
    if "maximum" in node:
        parts.append(f"≤ {node['maximum']}")
    if node.get("minLength"):
        parts.append("not empty" if node["minLength"] == 1 else f"at least {node['minLength']} characters")
    if node.get("minItems"):
        parts.append(f"at least {node['minItems']} item" + ("s" if node["minItems"] > 1 else ""))
    return "; ".join(parts)


@dataclass(frozen=True)
class FieldRow:
    path: str
    avro: str
    parquet: str
    nullable: bool
    rule: str


def field_rows(schema: str) -> list[FieldRow]:
    """One row per field of a schema, in the Avro schema's order, with its Parquet type and JSON Schema rule."""
    avro = load_schema(schema + ".avsc")
    arrow = arrow_fields(load_schema(schema + ".arrow.json"))
    json_schema = load_schema(schema + ".json")
    rows = []
    for path, avro_type, nullable in avro_fields(avro):
        parquet, arrow_nullable = arrow.get(path, ("?", nullable))
        try:
            rule = _rule(json_schema_node(json_schema, path))
        except (KeyError, TypeError):
            rule = ""
        rows.append(FieldRow(path, avro_type_name(avro_type), parquet, nullable or arrow_nullable, rule))
    return rows


def artifact_envelope_rows() -> list[FieldRow]:
    """The artifact fields outside ``records``, the same in every family (the ``family`` rule, a constant,
    differs: it is given as the folder's family)."""
    by_family = {family: [row for row in field_rows(artifact_schema(family))
                          if not (row.path == "records" or row.path.startswith("records["))]
                 for family in FAMILIES}
    first = next(iter(by_family.values()))
    for family, rows in by_family.items():
        if [(r.path, r.avro, r.parquet, r.nullable) for r in rows] != [(r.path, r.avro, r.parquet, r.nullable)
                                                                       for r in first]:
            raise ValueError(f"the artifact envelope of {family} differs from the others'")
    return [FieldRow(r.path, r.avro, r.parquet, r.nullable, "the folder's family" if r.path == "family" else r.rule)
            for r in first]


# =================================================================================================
# Checks: what the test asserts, and what the command line reports
# =================================================================================================


def family_meanings(family: str) -> dict[str, str]:
    """Every entry that may describe a field of ``family``'s artifacts."""
    return {**ARTIFACT_FIELDS, **EVIDENCE_FIELDS, **FAMILY_RECORD_FIELDS.get(family, {})}


def meaning_of(schema: str, path: str) -> str | None:
    """The entry for a field of ``schema`` (an asset path without extension), or None."""
    for family in FAMILIES:
        if schema == artifact_schema(family):
            return family_meanings(family).get(path)
    for doc in OUTPUT_DOCS:
        if doc.schema == schema:
            return doc.fields.get(path)
    return None


def undocumented_fields() -> list[str]:
    """``schema: path`` of every field of an output schema file under assets/ with no entry here."""
    missing = []
    for schema, files in output_schema_files().items():
        for path in sorted(schema_paths(files)):
            if meaning_of(schema, path) is None:
                missing.append(f"{schema}: {path}")
    return missing


def unknown_entries() -> list[str]:
    """Entries naming a field that no schema has (where they are meant to apply)."""
    files = output_schema_files()
    paths = {schema: schema_paths(names) for schema, names in files.items()}
    family_schemas = [artifact_schema(family) for family in FAMILIES]
    unknown = []
    for path in ARTIFACT_FIELDS:
        if not all(path in paths.get(schema, ()) for schema in family_schemas):
            unknown.append(f"artifacts (every family): {path}")
    for path in EVIDENCE_FIELDS:
        if not any(path in paths.get(schema, ()) for schema in family_schemas):
            unknown.append(f"artifacts (evidence): {path}")
    for family, entries in FAMILY_RECORD_FIELDS.items():
        if family not in FAMILIES:
            unknown.append(f"artifacts/{family}: no such family")
            continue
        unknown += [f"artifacts/{family}: {path}" for path in entries
                    if path not in paths.get(artifact_schema(family), ())]
    for doc in OUTPUT_DOCS:
        if doc.schema not in paths:
            unknown.append(f"{doc.folder}: no schema files {doc.schema}.*")
            continue
        unknown += [f"{doc.schema}: {path}" for path in doc.fields if path not in paths[doc.schema]]
    return unknown


def documented_schemas() -> set[str]:
    return {artifact_schema(family) for family in FAMILIES} | {doc.schema for doc in OUTPUT_DOCS}


def problems() -> list[str]:
    """Everything that keeps the dictionary from describing the schemas as they are."""
    found = [f"no entry for {item}" for item in undocumented_fields()]
    found += [f"entry for a field no schema has: {item}" for item in unknown_entries()]
    found += [f"no section for the schema {schema} ({', '.join(files)})"
              for schema, files in output_schema_files().items() if schema not in documented_schemas()]
    found += [f"no intro or record example for the family {family}"
              for family in FAMILIES if family not in FAMILY_INTROS or family not in RECORD_EXAMPLES]
    return found


# =================================================================================================
# Rendering
# =================================================================================================

_DIGEST = re.compile(r"^(sha256:)?([0-9a-f]{64})$")
_MAX_SHOWN = 100


def _shorten(value: Any) -> Any:
    """Example values as shown: digests cut to 8 hex digits, long text to its beginning (marked with …)."""
    if isinstance(value, str):
        digest = _DIGEST.match(value)
        if digest:
            return f"{digest.group(1) or ''}{digest.group(2)[:8]}…"
        return value if len(value) <= _MAX_SHOWN else value[: _MAX_SHOWN - 4] + "…"
    if isinstance(value, Mapping):
        return {key: _shorten(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shorten(item) for item in value]
    return value


def render_example(row: Mapping[str, Any]) -> str:
    """A row as JSON: one top-level field per line, each value on its line."""
    lines = [f"  {json.dumps(key)}: {json.dumps(_shorten(value), ensure_ascii=False)}" for key, value in row.items()]
    return "```json\n{\n" + ",\n".join(lines) + "\n}\n```"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _field_table(rows: list[FieldRow], meaning: Any) -> list[str]:
    out = ["| field | type (Avro / Parquet) | null | rule | meaning |", "|---|---|---|---|---|"]
    for row in rows:
        text = meaning(row.path)
        out.append(f"| `{row.path}` | {row.avro} / {row.parquet} | {'yes' if row.nullable else 'no'} | "
                   f"{_cell(row.rule)} | {_cell(text) if text else '**(no entry)**'} |")
    return out


def _anchor(title: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^a-z0-9 _-]", "", title.lower()).replace(" ", "-")


def _manifest_items(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(documented-form path, value) of every key of a manifest or an excerpt of one: family names, output
    folders and input names as ``<family>``, ``<output>``, ``<input>``; the elements of a list as ``[]``."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if prefix == "files.":
                key = "<output>"
            elif prefix.endswith("by_input."):
                key = "<input>"
            elif prefix == "judges.":
                key = "<judge>"
            elif key in FAMILIES:
                key = "<family>"
            yield prefix + key, item
            yield from _manifest_items(item, prefix + key + ".")
    elif isinstance(value, list):
        for item in value:
            yield from _manifest_items(item, prefix[:-1] + "[].")


def manifest_paths(manifest: Mapping[str, Any]) -> set[str]:
    """The paths of a manifest as MANIFEST_FIELDS names them: every key whose value is not an object."""
    return {path for path, value in _manifest_items(manifest) if not isinstance(value, Mapping)}


def render() -> str:
    out: list[str] = [
        "# Outputs: the data dictionary",
        "",
        f"<!-- Generated by `{GENERATOR}` from the output schemas under assets/ and the prose in "
        "domain/data_dictionary.py: edit those, not this file. tests/test_data_dictionary.py checks it. -->",
        "",
        "Every folder a run writes, every field of its rows (type, whether it can be null, what the schema requires "
        "of it, what it means) and a short example row; then the manifest. The types and rules below are read from "
        "the schemas the job writes with - the Avro schemas (`*.avsc`), the Arrow schemas of the Parquet files "
        "(`*.arrow.json`) and the JSON Schemas (`*.json`) under `assets/outputs/` and "
        "`assets/dnd/<family>/schemas/`, all generated by `python -m domain.schemagen` - so they are the contract, "
        f"and this page is regenerated from them (`{GENERATOR}`).",
        "",
        "## A run folder",
        "",
        "`notarius-reprocess --output DIR` (or `python -m pipelines.reprocess`) writes, under `DIR`:",
        "",
        "| folder | audience | one row is | schema |",
        "|---|---|---|---|",
        "| [`artifacts/<family>/`](#artifactsfamily) | downstream | the one canonical artifact of an accepted slot | "
        "`assets/dnd/<family>/schemas/dnd_<family>.v1.*` |",
    ]
    for doc in OUTPUT_DOCS:
        if doc.command != "reprocess":
            continue
        out.append(f"| [`{doc.folder}`](#{_anchor(doc.folder)}) | {doc.audience} | {_cell(doc.row)} | "
                   f"`assets/{doc.schema}.*` |")
    out += [
        "| [`manifest.json`](#manifestjson) | operators | the run's counts, conservation, fingerprints, options and "
        "the list of every file (written last) | none: see below |",
        "",
        "A *slot* is `(source_id, chunk_id, family)`: one chunk of one transcript, extracted by one family. Each "
        "folder holds sharded files named `part-NNNNN-of-NNNNN` with the extension of `--output-format`: `.avro` "
        "(the default), `.jsonl` or `.parquet`. Every format holds the same rows; raw responses are byte-identical "
        "in each. Read only a folder that has `manifest.json` (`notarius-reprocess verify DIR` checks it); query "
        "one with DuckDB: `docs/querying.md`.",
        "",
        "### Types",
        "",
        "| Avro | Parquet (Arrow) | JSON Lines |",
        "|---|---|---|",
        "| `string` | `string` | string |",
        "| `long` | `int64` | number (an integer) |",
        "| `boolean` | `bool` | `true` / `false` |",
        "| `enum` | `string` | string |",
        "| `record` | `struct` | object |",
        "| `array<T>` | `list<T>` | array |",
        "| null = yes: a union with `null` | nullable | `null` |",
        "",
        "A field path `a.b` is field `b` of the record in field `a`; `a[]` stands for each element of the list in "
        "`a` (in DuckDB: `unnest(a)`). Every field is always present; *null* says whether its value can be null. "
        "*Rule* is what the JSON Schema requires beyond the type. In the examples, digests are cut to their first "
        "8 hex digits and long text to its beginning (`…`); the rows are otherwise real rows of `make demo`.",
        "",
        "## `artifacts/<family>/`",
        "",
        "For downstream: one row per accepted slot, the slot's canonical artifact. The fields outside `records` "
        "are the same in every family:",
        "",
    ]
    out += _field_table(artifact_envelope_rows(), lambda path: ARTIFACT_FIELDS.get(path))
    out += ["", "An artifact (`artifacts/spells/`):", "", render_example(ARTIFACT_EXAMPLE), "",
            "Each family's `records`:", ""]
    out += [", ".join(f"[{family}](#{_anchor(family)})" for family in FAMILIES), ""]
    for family in FAMILIES:
        rows = [row for row in field_rows(artifact_schema(family))
                if row.path == "records" or row.path.startswith("records[")]
        meanings = family_meanings(family)
        out += [f"### {family}", "", FAMILY_INTROS.get(family, "**(no intro)**"), ""]
        out += _field_table(rows, lambda path, meanings=meanings: meanings.get(path))
        example = RECORD_EXAMPLES.get(family)
        if example is not None:
            out += ["", "A record:", "", "```json",
                    json.dumps(_shorten(example), ensure_ascii=False), "```"]
        out.append("")
    for doc in OUTPUT_DOCS:
        if doc.command == "compare":
            continue
        out += _output_section(doc, "##")
    out += _manifest_section()
    compare_docs = [doc for doc in OUTPUT_DOCS if doc.command == "compare"]
    if compare_docs:
        out += ["## A comparison folder", "",
                "`notarius-reprocess compare RUN_A RUN_B --output DIR` compares two run folders (each must verify) "
                "and writes, under `DIR`, `compare.json` (per family and in total: transition counts, accepted "
                "artifacts changed or not, reason codes in A and B, requests of A answered in B), `compare.html` "
                "(the same at a glance), its own `manifest.json`, and:", ""]
        for doc in compare_docs:
            out += _output_section(doc, "###")
    return "\n".join(out).rstrip("\n") + "\n"


def _output_section(doc: OutputDoc, level: str) -> list[str]:
    out = [f"{level} `{doc.folder}`", "", f"For {doc.audience}: {doc.row}. {doc.intro}", ""]
    out += _field_table(field_rows(doc.schema), lambda path: doc.fields.get(path))
    examples = (doc.example, *doc.more_examples)
    out += ["", "Example rows:" if len(examples) > 1 else "An example row:", ""]
    for example in examples:
        out += [render_example(example), ""]
    return out


def _manifest_section() -> list[str]:
    out = ["## `manifest.json`", "",
           "One JSON object, written last (by temporary name and rename) once every output file is final: a folder "
           "without it is not a finished run. Keys are sorted. `<family>` stands for each family's key (every "
           "family appears, with zeros), `<output>` for each output folder (`artifacts/spells`, `evaluations`, ...), "
           "`<input>` for an input name. Its blocks: "
           + ", ".join(f"[`{block}`](#{_anchor(block)})" for block in MANIFEST_BLOCKS) + ".", ""]
    for block, text in MANIFEST_BLOCKS.items():
        entries = [(path, kind, meaning) for path, (kind, meaning) in MANIFEST_FIELDS.items()
                   if path == block or path.startswith(block + ".")]
        out += [f"### `{block}`", "", text, "", "| key | type | meaning |", "|---|---|---|"]
        out += [f"| `{path}` | {kind} | {_cell(meaning)} |" for path, kind, meaning in entries]
        out.append("")
    out += ["A manifest (the demo's run 2; maps by family cut to one family, `files` to two outputs):", "",
            render_example(MANIFEST_EXAMPLE), ""]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m domain.data_dictionary", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that docs/outputs.md is current")
    args = parser.parse_args(argv)
    text = render()
    found = problems()
    for problem in found:
        print(f"data dictionary: {problem}", file=sys.stderr)
    if args.check:
        current = DOC_PATH.read_text(encoding="utf-8") if DOC_PATH.exists() else ""
        if current != text:
            print(f"{DOC_PATH} is stale: run {GENERATOR}", file=sys.stderr)
            return 1
        return 1 if found else 0
    DOC_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {DOC_PATH}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
