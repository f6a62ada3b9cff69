"""Counter keys: the one place their names are built and read back.

Every step that counts adds to a flat ``{key: int}`` dict (the reading step
per file, the per-source step per source, export-batch per source); the runner
sums them and the manifests read them back. Each key has one builder here, used
by the steps that write it (``transforms.read``, ``domain.reprocess``,
``domain.slot_decision``, ``domain.batch.export``, ``pipelines.batch_export``)
and by the readers that look it up (``domain.manifest``, the export manifest,
``analysis.compare``), so a key cannot be spelled two ways.

A key that was never incremented is absent (the readers count it as 0); a step
adds a key only when it has something to count, except where noted.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Mapping

import orjson

# The manifest's outcome table (contract §6): a slot's outcome (accepted, retry, exhausted, deferred)
# once per slot, superseded and stale once per candidate. The one definition.
OUTCOME_ACCEPTED = "accepted"
OUTCOME_SUPERSEDED = "superseded"
OUTCOME_RETRY = "retry"
OUTCOME_EXHAUSTED = "exhausted"
OUTCOME_DEFERRED = "deferred"
OUTCOME_STALE = "stale"
OUTCOMES = (OUTCOME_ACCEPTED, OUTCOME_SUPERSEDED, OUTCOME_RETRY, OUTCOME_EXHAUSTED, OUTCOME_DEFERRED, OUTCOME_STALE)

# --- plain keys --------------------------------------------------------------------------------

EVALUATIONS = "evaluations"  # evaluation rows (one per admitted candidate)
FILTERED = "filtered"  # records of a known kind outside the command's filters (--families, --kinds, ...)
TRANSCRIPTS_OK = "transcripts_ok"  # the one usable transcript of a source
PRIOR_REGISTRIES_VALID = "prior_registries_valid"  # prior registry artifacts whose names were used
# export-batch
SHAPED = "shaped"  # request lines written
STALE_REQUESTS = "stale"  # requests built under other assets than the current ones
REGISTRIES_USED = "registries_used"  # registry artifacts read for reconciliation prompts


# --- per input (the reading step and the per-key steps) ----------------------------------------

def records_in(input_name: str) -> str:
    """Non-blank records read from the input (oversize and undecodable ones included)."""
    return f"{input_name}_in"


def dead_letters(input_name: str) -> str:
    """Dead-letter rows of the input, wherever they were decided."""
    return f"dead_letters/{input_name}"


def blank_lines(input_name: str) -> str:
    """Blank lines skipped (outside conservation)."""
    return f"blank_lines/{input_name}"


# A file that could not be read to its end: "unreadable_file/<input>/<path>" = 1. The reading step
# writes it; the manifest lists those files (records may be missing from them).
UNREADABLE_FILE = "unreadable_file"


def unreadable_file(input_name: str, path: str) -> str:
    return f"{UNREADABLE_FILE}/{input_name}/{path}"


def unreadable_files(counts: Mapping[str, int]) -> dict[str, list[str]]:
    """Input name -> sorted paths of the files that could not be read to their end."""
    found: dict[str, list[str]] = {}
    prefix = UNREADABLE_FILE + "/"
    for key in counts:
        if key.startswith(prefix):
            input_name, _, path = key[len(prefix):].partition("/")
            found.setdefault(input_name, []).append(path)
    return {name: sorted(paths) for name, paths in sorted(found.items())}


# --- per family (the per-source step) ----------------------------------------------------------

def outcome(family: str, name: str) -> str:
    """``name`` is one of :data:`OUTCOMES`."""
    return f"outcome/{family}/{name}"


def invariant_failures(family: str) -> str:
    """Normalization-invariant issues (contract §4.2): our bugs, for operators."""
    return f"invariant_failures/{family}"


def reordering_saved_retries(family: str) -> str:
    """Accepted slots that needed endpoint ordering to pass (contract §5 step 3)."""
    return f"reordering_saved_retries/{family}"


def reordering_saved_deferrals(family: str) -> str:
    """Slots that would have been deferred without it (no surviving registry of their kind)."""
    return f"reordering_saved_deferrals/{family}"


# Prompt revisions (contract §6.1, §4.1): "revision/<family>/<counter>", each with its name in the
# manifest's ``refresh`` block (domain.manifest.refresh_block says what each counts).
REFRESH_DUE = "refresh_due"
# The slots to refresh because their attempts are all under an earlier prompt or schema; the others are
# reconciliations waiting for their entry list (contract §4.1), so that each due slot has one reason.
REFRESH_DUE_STALE = "refresh_due_stale"
REFRESH = "refresh"
REFRESH_EXCERPT_CHARS = "refresh_excerpt_chars"
ACCEPTED_CURRENT = "accepted_current"
ACCEPTED_STALE = "accepted_stale"
CURRENT_OVER_STALE = "current_over_stale"
ENTRY_LIST_CHANGED = "entry_list_changed"
ENTRY_LIST_WAITING = "entry_list_waiting"
REVISION_COUNTS = ((REFRESH_DUE, "slots_to_refresh"), (REFRESH_DUE_STALE, "slots_on_earlier_prompt"),
                   (REFRESH, "refresh_requests"),
                   (REFRESH_EXCERPT_CHARS, "excerpt_chars"), (ACCEPTED_CURRENT, "artifacts_current"),
                   (ACCEPTED_STALE, "artifacts_stale"), (CURRENT_OVER_STALE, "current_over_stale"),
                   (ENTRY_LIST_CHANGED, "entry_list_changed"), (ENTRY_LIST_WAITING, "entry_list_slots_waiting"))


def revision(family: str, counter: str) -> str:
    """``counter`` is one of the first names of :data:`REVISION_COUNTS`."""
    return f"revision/{family}/{counter}"


class FamilyKeys:
    """Every per-family key of one family, built once (the slot decider adds a few per slot).
    A plain slotted class, not a dataclass: nothing to generate at import."""

    __slots__ = ("accepted", "superseded", "retry", "exhausted", "deferred", "stale", "invariant_failures",
                 "refresh_due", "refresh_due_stale", "refresh", "refresh_excerpt_chars", "accepted_current", "accepted_stale",
                 "current_over_stale", "entry_list_changed", "entry_list_waiting", "reordering_saved_retries",
                 "reordering_saved_deferrals")

    def __init__(self, family: str) -> None:
        for name in OUTCOMES:
            setattr(self, name, outcome(family, name))
        self.invariant_failures = invariant_failures(family)
        for counter, _ in REVISION_COUNTS:
            setattr(self, counter, revision(family, counter))
        self.reordering_saved_retries = reordering_saved_retries(family)
        self.reordering_saved_deferrals = reordering_saved_deferrals(family)


@lru_cache(maxsize=None)
def family_keys(family: str) -> FamilyKeys:
    return FamilyKeys(family)


# --- semantic judges (contract §4.3) -----------------------------------------------------------------

# "judge/<judge>/<counter>": the manifest's ``judges`` block, one entry per judge of the run.
# requests: judge requests written; pass / fail / unsure: the applied verdicts by what they say;
# and every verdict record that named the judge, in exactly one of applied (pass + fail + unsure),
# superseded, unusable, stale, unmatched. Beside them, per judge: unjudged (attempts decided by the
# rules alone: asked too often without a usable answer, or a refresh replaces them) and
# awaiting (slots deferred for its verdict).
JUDGE_REQUESTS = "requests"
JUDGE_SUPERSEDED = "superseded"
JUDGE_UNUSABLE = "unusable"
JUDGE_STALE = "stale"
JUDGE_UNMATCHED = "unmatched"
JUDGE_UNJUDGED = "unjudged"
JUDGE_AWAITING = "awaiting"
JUDGE_COUNTERS = (JUDGE_REQUESTS, "pass", "fail", "unsure", JUDGE_UNUSABLE, JUDGE_STALE, JUDGE_UNMATCHED,
                  JUDGE_SUPERSEDED, JUDGE_UNJUDGED, JUDGE_AWAITING)
JUDGE_PREFIX = "judge/"
# Verdict records for a judge this run does not know (unknown name, or not among --judges).
VERDICTS_OTHER_JUDGE = "verdicts_other_judge"
# Verdict records naming a candidate id no candidate of the run has (counted where they are joined).
VERDICTS_UNRESOLVED = "verdicts_unresolved"


def judge(name: str, counter: str) -> str:
    """``counter`` is one of :data:`JUDGE_COUNTERS`, or a verdict (pass, fail, unsure)."""
    return f"{JUDGE_PREFIX}{name}/{counter}"


def judge_counts(counts: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """Judge name -> {counter: value} for every judge counted (every counter present, 0 when absent)."""
    found: dict[str, dict[str, int]] = {}
    for key, value in counts.items():
        if key.startswith(JUDGE_PREFIX):
            name, _, counter = key[len(JUDGE_PREFIX):].rpartition("/")
            found.setdefault(name, dict.fromkeys(JUDGE_COUNTERS, 0))[counter] = value
    return dict(sorted(found.items()))


# --- export-batch ------------------------------------------------------------------------------

def shaped(kind: str) -> str:
    """Request lines written of one request kind (``retry``, ``refresh``)."""
    return f"{SHAPED}/{kind}"


# export-batch's estimate (contract §6.4): "estimate/<kind>/<family>/<measure>" per exported line, where
# measure is one of ESTIMATE_MEASURES. Counted from the lines written (after duplicates across
# sources are dropped), so the estimate covers exactly the files.
ESTIMATE_PREFIX = "estimate/"
ESTIMATE_REQUESTS = "requests"
ESTIMATE_INPUT_TOKENS = "input_tokens"
ESTIMATE_MEASURES = (ESTIMATE_REQUESTS, ESTIMATE_INPUT_TOKENS)


def estimate(kind: str, family: str, measure: str) -> str:
    return f"{ESTIMATE_PREFIX}{kind}/{family}/{measure}"


def estimates(counts: Mapping[str, int]) -> dict[str, dict[str, dict[str, int]]]:
    """Kind -> family -> {measure: value} for every (kind, family) counted."""
    found: dict[str, dict[str, dict[str, int]]] = {}
    for key, value in counts.items():
        if key.startswith(ESTIMATE_PREFIX):
            kind, family, measure = key[len(ESTIMATE_PREFIX):].split("/")
            found.setdefault(kind, {}).setdefault(family, dict.fromkeys(ESTIMATE_MEASURES, 0))[measure] = value
    return found


# --- what the judges' answers were billed (contract §6.4) ------------------------------------------

# "verdict_usage/<JSON [judge, provider, model, batch, measure]>" per verdict record of a judge of the
# run (applied, superseded, unusable, stale or unmatched: every one its judge's counters count) that
# carries a usage; nothing is added for a verdict without one, so a run whose verdicts carry none
# counts what it counted before. The key is JSON: provider and model names are the producer's own
# text and may hold any character. The manifest's ``verdict_usage`` block reads them back.
VERDICT_USAGE_PREFIX = "verdict_usage/"
USAGE_WITH = "with_usage"
USAGE_CACHED_UNKNOWN = "cached_unknown"
USAGE_MEASURES = (USAGE_WITH, "input_tokens", "cached_input_tokens", USAGE_CACHED_UNKNOWN, "output_tokens")


def verdict_usage(judge_name: str, provider: str, model: str, batch: bool, measure: str) -> str:
    """``measure`` is one of :data:`USAGE_MEASURES`."""
    return VERDICT_USAGE_PREFIX + orjson.dumps([judge_name, provider, model, batch, measure]).decode("utf-8")


def verdict_usages(counts: Mapping[str, int]) -> dict[str, dict[tuple[str, str, bool], dict[str, int]]]:
    """Judge -> (provider, model, batch) -> {measure: value} for every verdict usage counted."""
    found: dict[str, dict[tuple[str, str, bool], dict[str, int]]] = {}
    for key, value in counts.items():
        if key.startswith(VERDICT_USAGE_PREFIX):
            judge_name, provider, model, batch, measure = orjson.loads(key[len(VERDICT_USAGE_PREFIX):])
            cell = found.setdefault(judge_name, {}).setdefault((provider, model, batch), dict.fromkeys(USAGE_MEASURES, 0))
            cell[measure] = value
    return found
