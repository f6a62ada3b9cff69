"""The run manifest (contract §6): counts, outcomes, conservation, fingerprints."""

from __future__ import annotations

from typing import Any, Mapping

from domain import counters as c
from domain.assets import current_fingerprints
from domain.counters import OUTCOMES, REVISION_COUNTS
from domain.families import FAMILIES
from domain.intake import INPUT_CANDIDATES, INPUT_PRIOR_REGISTRIES, INPUT_TRANSCRIPTS, INPUT_VERDICTS
from domain.judges import JUDGE_VERDICTS


def current_asset_fingerprints() -> dict[str, dict[str, str]]:
    out = {}
    for key, spec in sorted(FAMILIES.items()):
        prompt, schema = current_fingerprints(key)
        out[key] = {"prompt": prompt, "llm_schema": schema, "validator_policy": spec.validator_policy_fingerprint()}
    return out


def build_manifest(counts: Mapping[str, int], *, options: Mapping[str, Any], runner: str) -> dict:
    def n(name: str) -> int:
        return int(counts.get(name, 0))

    outcomes = {
        family: {outcome: n(c.outcome(family, outcome)) for outcome in OUTCOMES} for family in sorted(FAMILIES)
    }
    # Normalization-invariant failures (contract §4.2): our bugs, for operators; never a producer retry.
    invariant_failures = {family: n(c.invariant_failures(family)) for family in sorted(FAMILIES)}
    # What endpoint ordering saved (contract §5 step 3), recorded so no reader has to re-evaluate.
    saved_retries = {family: n(c.reordering_saved_retries(family)) for family in sorted(FAMILIES)}
    saved_deferrals = {family: n(c.reordering_saved_deferrals(family)) for family in sorted(FAMILIES)}
    candidates_in, evaluations = n(c.records_in(INPUT_CANDIDATES)), n(c.EVALUATIONS)
    candidate_dead, filtered = n(c.dead_letters(INPUT_CANDIDATES)), n(c.FILTERED)
    transcripts_in, transcripts_ok = n(c.records_in(INPUT_TRANSCRIPTS)), n(c.TRANSCRIPTS_OK)
    transcript_dead = n(c.dead_letters(INPUT_TRANSCRIPTS))
    prior_in, prior_valid = n(c.records_in(INPUT_PRIOR_REGISTRIES)), n(c.PRIOR_REGISTRIES_VALID)
    prior_dead = n(c.dead_letters(INPUT_PRIOR_REGISTRIES))
    # Files that could not be read to their end (corrupt compression, a truncated or unreadable
    # Avro block): how many records their damaged part held is unknown, so conservation over
    # that input cannot be proved and is not claimed.
    unreadable = c.unreadable_files(counts)
    unreadable_block = {
        "count": sum(len(paths) for paths in unreadable.values()),
        "by_input": {name: len(paths) for name, paths in unreadable.items()},
        "paths": sorted(path for paths in unreadable.values() for path in paths),
        "records_may_be_missing": bool(unreadable),
        # Which conservation blocks cannot be proved (their "holds" is false because of these files).
        "conservation_not_provable_for": sorted(unreadable),
    }
    candidates_provable = not unreadable.get(INPUT_CANDIDATES)
    transcripts_provable = not unreadable.get(INPUT_TRANSCRIPTS)
    refresh = refresh_block(counts, enabled=bool(options.get("refresh_stale")))
    judges = judges_block(counts, options.get("judges") or ())
    verdicts = verdict_conservation(counts, judges, provable=not unreadable.get(INPUT_VERDICTS))
    return {
        "inputs": {
            "transcripts": transcripts_in,
            "candidates": candidates_in,
            "blank_lines_skipped": {"transcripts": n(c.blank_lines(INPUT_TRANSCRIPTS)),
                                    "candidates": n(c.blank_lines(INPUT_CANDIDATES))},
        },
        "outcomes": outcomes,
        "totals": {outcome: sum(f[outcome] for f in outcomes.values()) for outcome in OUTCOMES},
        "outputs": {
            "artifacts": sum(f["accepted"] for f in outcomes.values()),
            "retry_requests": sum(f["retry"] for f in outcomes.values()),
            # Refresh requests are rows of retry_requests/ too (kind "refresh"), beside the retries.
            "refresh_requests": refresh["refresh_requests"],
            "evaluations": evaluations,
            # Judge requests are rows of retry_requests/ too (kind "judge", contract §4.3).
            "judge_requests": sum(judge["requests"] for judge in judges.values()),
            "dead_letters": candidate_dead + transcript_dead + prior_dead + verdicts["dead_letters"],
        },
        "invariant_failures": {"by_family": invariant_failures, "total": sum(invariant_failures.values())},
        "endpoint_ordering": {
            "retries_saved": {"by_family": saved_retries, "total": sum(saved_retries.values())},
            "deferrals_saved": {"by_family": saved_deferrals, "total": sum(saved_deferrals.values())},
        },
        "conservation": {
            "candidates_in": candidates_in,
            "evaluations": evaluations,
            "dead_letters": candidate_dead,
            "filtered": filtered,
            "holds": candidates_provable and candidates_in == evaluations + candidate_dead + filtered,
        },
        "transcript_conservation": {
            "transcripts_in": transcripts_in,
            "usable": transcripts_ok,
            "dead_letters": transcript_dead,
            "holds": transcripts_provable and transcripts_in == transcripts_ok + transcript_dead,
        },
        "unreadable_files": unreadable_block,
        "prior_registry_conservation": {
            "prior_registries_in": prior_in,
            "valid": prior_valid,
            "dead_letters": prior_dead,
            "holds": not unreadable.get(INPUT_PRIOR_REGISTRIES) and prior_in == prior_valid + prior_dead,
        },
        "verdict_conservation": verdicts,
        "judges": judges,
        "verdict_usage": verdict_usage_block(counts, options.get("judges") or ()),
        "refresh": refresh,
        "fingerprints": current_asset_fingerprints(),
        "options": dict(options),
        "runner": runner,
    }


def judges_block(counts: Mapping[str, int], judge_names) -> dict:
    """Per judge of the run (contract §4.3): its family and fingerprint, and what its verdicts and
    requests came to (``domain.counters.JUDGE_COUNTERS``). Verdicts of a judge the run does not have
    are not counted per judge: they are unmatched (``verdict_conservation``)."""
    declared = {judge.name: judge for spec in FAMILIES.values() for judge in spec.judges}
    counted = c.judge_counts(counts)
    block = {}
    for name in sorted(judge_names):
        judge = declared[name]
        block[name] = {"family": judge.family, "fingerprint": judge.fingerprint(),
                       **counted.get(name, dict.fromkeys(c.JUDGE_COUNTERS, 0))}
    return block


def verdict_usage_block(counts: Mapping[str, int], judge_names) -> dict:
    """Per judge of the run (contract §6.4): what its verdict records were billed, as they carried it (a verdict
    without ``usage`` adds nothing: ``with_usage`` of the judge's verdicts, the rest of them unknown), in
    total and per producer (provider, model, and whether through a batch API: what prices them)."""
    found = c.verdict_usages(counts)
    block = {}
    for name in sorted(judge_names):
        by_producer = [{"provider": provider, "model": model, "batch": batch, **measures}
                       for (provider, model, batch), measures in sorted(found.get(name, {}).items())]
        block[name] = {**{measure: sum(cell[measure] for cell in by_producer) for measure in c.USAGE_MEASURES},
                       "by_producer": by_producer}
    return block


def verdict_conservation(counts: Mapping[str, int], judges: Mapping[str, Mapping[str, int]], *, provable: bool) -> dict:
    """Verdict records are inputs (contract §4.3): every one read is applied (pass, fail or unsure on its
    attempt), superseded, unusable, stale, unmatched (no attempt of the run it could apply to, or a
    judge the run does not have) or a dead letter."""
    def n(name: str) -> int:
        return int(counts.get(name, 0))

    counted = c.judge_counts(counts)  # every judge named, those of the run or not
    applied = sum(v[verdict] for v in counted.values() for verdict in JUDGE_VERDICTS)
    parts = {name: sum(v[name] for v in counted.values())
             for name in (c.JUDGE_SUPERSEDED, c.JUDGE_UNUSABLE, c.JUDGE_STALE, c.JUDGE_UNMATCHED)}
    parts[c.JUDGE_UNMATCHED] += n(c.VERDICTS_OTHER_JUDGE) + n(c.VERDICTS_UNRESOLVED)
    verdicts_in, dead = n(c.records_in(INPUT_VERDICTS)), n(c.dead_letters(INPUT_VERDICTS))
    return {"verdicts_in": verdicts_in, "applied": applied, **parts, "dead_letters": dead,
            "holds": provable and verdicts_in == applied + sum(parts.values()) + dead}


def refresh_block(counts: Mapping[str, int], *, enabled: bool) -> dict:
    """Prompt revisions (contract §6.1), per family and in total:

    - ``slots_to_refresh``: slots with no current attempt, not deferred, without a retry request,
      whose highest attempt is below ``MAX_ATTEMPT_NUMBER`` (``domain.revision.refresh_due``), and
      reconciliation slots waiting for an attempt on the current entry list (the one deferral
      that is refreshed, contract §4.1);
    - ``slots_on_earlier_prompt``: of those, the slots whose attempts are all under an earlier prompt or
      schema (the rest, ``slots_to_refresh - slots_on_earlier_prompt``, are reconciliations waiting for
      their entry list: each slot to refresh is counted for one reason);
    - ``refresh_requests``: refresh requests written (0 unless ``--refresh-stale``), one per such slot;
    - ``excerpt_chars``: characters of transcript excerpt (reconciliations: entry list) they send;
    - ``artifacts_current`` / ``artifacts_stale``: accepted artifacts from current / stale attempts;
    - ``current_over_stale``: artifacts whose current attempt won over an earlier passing stale one;
    - ``entry_list_changed``: reconciliation attempts made for another entry list than the source's
      current one (contract §4.1): verdict ``deferred`` (reason ``entry_list_changed``), not evaluated;
      rows of ``evaluations/`` like any other, counted in no outcome of their own;
    - ``entry_list_slots_waiting``: reconciliation slots every attempt of which was made for another
      list: their one outcome is ``deferred`` (counted there too); each is a slot to refresh unless
      its highest attempt is ``MAX_ATTEMPT_NUMBER``.
    """
    by_family = {family: {name: int(counts.get(c.revision(family, counter), 0)) for counter, name in REVISION_COUNTS}
                 for family in sorted(FAMILIES)}
    totals = {name: sum(f[name] for f in by_family.values()) for _, name in REVISION_COUNTS}
    return {"refresh_stale": enabled, **totals, "by_family": by_family}


def refresh_reasons(refresh: Mapping[str, Any]) -> tuple[int, int]:
    """(slots to refresh because their prompt or schema changed, reconciliation slots to refresh because they
    wait for their entry list) of a ``refresh`` block or one family's entry in it: every slot to refresh in
    exactly one. A manifest written before ``slots_on_earlier_prompt`` was counted: the waiting slots are
    taken off the slots to refresh."""
    due = int(refresh.get("slots_to_refresh", 0) or 0)
    stale = refresh.get("slots_on_earlier_prompt")
    if not isinstance(stale, int):
        stale = max(due - int(refresh.get("entry_list_slots_waiting", 0) or 0), 0)
    return stale, due - stale
