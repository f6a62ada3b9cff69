"""The prose of a run's manifest.json, for the data dictionary (``docgen.data_dictionary``): what each block
and key holds, and a real manifest of ``make demo`` cut to one family, one judge and two outputs. Its shape
is ``domain.manifest.build_manifest``'s plus ``files``; there is no schema file to take types from.
"""

from __future__ import annotations

from typing import Any, Mapping

# Where the example comes from (as every example's, see ``docgen.output_prose.EXAMPLES_FROM``).
MANIFEST_EXAMPLE_FROM = "out/demo/run2/manifest.json"

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

# The manifest as the page shows it: one family, one judge and two outputs of each map, and the options' paths
# as the demo's, relative to the folder that holds out/ (the real ones are absolute).
MANIFEST_CUT = {"family": "spells", "judge": "combat-semantics", "files": ("artifacts/spells", "evaluations")}


def cut_manifest(manifest: Mapping[str, Any], demo_folder: str) -> dict[str, Any]:
    """``manifest`` (a run of the demo written under ``demo_folder``) as MANIFEST_EXAMPLE shows one."""
    family, judge = MANIFEST_CUT["family"], MANIFEST_CUT["judge"]

    def by_family(block: Mapping[str, Any]) -> dict[str, Any]:
        return {key: ({family: value[family]} if key == "by_family" else value) for key, value in block.items()}

    def relative(value: Any) -> Any:
        prefix = demo_folder.rstrip("/") + "/"
        return "out/demo/" + value[len(prefix):] if isinstance(value, str) and value.startswith(prefix) else value

    cut = dict(manifest)
    cut.update({
        "outcomes": {family: manifest["outcomes"][family]},
        "fingerprints": {family: manifest["fingerprints"][family]},
        "invariant_failures": by_family(manifest["invariant_failures"]),
        "endpoint_ordering": {key: by_family(block) for key, block in manifest["endpoint_ordering"].items()},
        "refresh": by_family(manifest["refresh"]),
        "judges": {judge: manifest["judges"][judge]},
        "verdict_usage": {judge: manifest["verdict_usage"][judge]},
        "files": {output: manifest["files"][output] for output in MANIFEST_CUT["files"]},
        "options": {key: relative(value) for key, value in manifest["options"].items()},
    })
    return cut


# make demo's run 2 (MANIFEST_EXAMPLE_FROM), cut as cut_manifest cuts it.
MANIFEST_EXAMPLE: dict[str, Any] = {
    "conservation": {"candidates_in": 1705, "dead_letters": 0, "evaluations": 1705, "filtered": 0, "holds": True},
    "endpoint_ordering": {
        "deferrals_saved": {"by_family": {"spells": 0}, "total": 0},
        "retries_saved": {"by_family": {"spells": 1}, "total": 84},
    },
    "files": {
        "artifacts/spells": [{"bytes": 20612, "format": "avro", "path": "artifacts/spells/part-00000-of-00001.avro", "rows": 136, "sha256": "f3852995b2d613ea5b44b3d7e108b40cd99d91e8180f523d93a6e7cf5644c5bd"}],
        "evaluations": [{"bytes": 53093, "format": "avro", "path": "evaluations/part-00000-of-00001.avro", "rows": 1705, "sha256": "fc1ea994ea84a1961b92a98ad3ed5a876b42a7c43951853012be034b195b21ef"}],
    },
    "fingerprints": {
        "spells": {
            "llm_schema": "sha256:026f6f5a31ce79369f204f9e2e8e384e82faeec38fdd065ac2923521e2db980a",
            "prompt": "sha256:2c76b0f99d8f5bfe307e6c975e826c302c13573ab6dae22e68c7525e98270030",
            "validator_policy": "sha256:a964dde8084056400a8c68d31f213252b2df57646cffe21816770db60d978373",
        },
    },
    "inputs": {"blank_lines_skipped": {"candidates": 0, "transcripts": 0}, "candidates": 1705, "transcripts": 2},
    "invariant_failures": {"by_family": {"spells": 0}, "total": 0},
    "judges": {
        "combat-semantics": {
            "awaiting": 0,
            "fail": 12,
            "family": "combat-turns",
            "fingerprint": "sha256:a46cef5c4c1ec39c333173d6b3e2347705905a5a211bf722557937a3790a9137",
            "pass": 118,
            "requests": 0,
            "stale": 0,
            "superseded": 0,
            "unjudged": 0,
            "unmatched": 0,
            "unsure": 9,
            "unusable": 7,
        },
    },
    "options": {
        "candidates": "out/demo/archive/candidates*",
        "families": None,
        "judges": ["combat-semantics", "npc-identity", "spell-cast"],
        "max_attempts": 3,
        "max_judge_attempts": 2,
        "max_record_bytes": 8388608,
        "output": "out/demo/run2",
        "output_format": "avro",
        "prior_registries": None,
        "refresh_stale": True,
        "transcripts": "out/demo/archive/transcripts.jsonl.gz",
        "verdicts": "out/demo/archive/verdicts-backfill.jsonl",
    },
    "outcomes": {"spells": {"accepted": 136, "deferred": 2, "exhausted": 4, "retry": 0, "stale": 142, "superseded": 117}},
    "outputs": {
        "artifacts": 1244,
        "dead_letters": 0,
        "evaluations": 1705,
        "judge_requests": 2,
        "refresh_requests": 4,
        "retry_requests": 52,
    },
    "prior_registry_conservation": {"dead_letters": 0, "holds": True, "prior_registries_in": 0, "valid": 0},
    "refresh": {
        "artifacts_current": 1244,
        "artifacts_stale": 0,
        "by_family": {
            "spells": {
                "artifacts_current": 136,
                "artifacts_stale": 0,
                "current_over_stale": 117,
                "entry_list_changed": 0,
                "entry_list_slots_waiting": 0,
                "excerpt_chars": 0,
                "refresh_requests": 0,
                "slots_on_earlier_prompt": 0,
                "slots_to_refresh": 0,
            },
        },
        "current_over_stale": 117,
        "entry_list_changed": 5,
        "entry_list_slots_waiting": 4,
        "excerpt_chars": 92961,
        "refresh_requests": 4,
        "refresh_stale": True,
        "slots_on_earlier_prompt": 0,
        "slots_to_refresh": 4,
    },
    "runner": "FnApiRunner",
    "totals": {"accepted": 1244, "deferred": 6, "exhausted": 18, "retry": 52, "stale": 142, "superseded": 132},
    "transcript_conservation": {"dead_letters": 0, "holds": True, "transcripts_in": 2, "usable": 2},
    "unreadable_files": {
        "by_input": {},
        "conservation_not_provable_for": [],
        "count": 0,
        "paths": [],
        "records_may_be_missing": False,
    },
    "verdict_conservation": {
        "applied": 418,
        "dead_letters": 0,
        "holds": True,
        "stale": 0,
        "superseded": 0,
        "unmatched": 0,
        "unusable": 12,
        "verdicts_in": 430,
    },
    "verdict_usage": {
        "combat-semantics": {
            "by_producer": [{"batch": True, "cached_input_tokens": 18624, "cached_unknown": 0, "input_tokens": 229188, "model": "sim-2", "output_tokens": 1620, "provider": "openai", "with_usage": 146}],
            "cached_input_tokens": 18624,
            "cached_unknown": 0,
            "input_tokens": 229188,
            "output_tokens": 1620,
            "with_usage": 146,
        },
    },
}
