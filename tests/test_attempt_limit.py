"""Attempt numbers are bounded (issue 29, finding 10): no request ever asks for an attempt
beyond MAX_ATTEMPT_NUMBER, the highest the candidate envelope accepts.

A slot whose highest attempt is the bound has spent its attempt space: whatever the
retry budget and with or without ``--refresh-stale`` it gets no request; a failing
one is exhausted, an accepted one stays accepted. Either way it is not a slot to
refresh, so ``slots_to_refresh`` stays the number of refresh requests the flag writes.
"""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import domain.intake as intake
import domain.slot_decision as slot_decision
from domain.assets import current_fingerprints
from domain.intake import INPUT_CANDIDATES, INPUT_TRANSCRIPTS, EnvelopeError, parse_candidate
from domain.manifest import build_manifest
from domain.reprocess import RunConfig, process_source_groups
from domain.revision import MAX_ATTEMPT_NUMBER, next_attempt

MAX = MAX_ATTEMPT_NUMBER
SOURCE = "crd3:T-MAX"
CHUNKS = ("x-1", "x-2", "x-3")
TRANSCRIPT = orjson.dumps({
    "source_id": SOURCE,
    "units": [{"unit_id": u, "speaker": "MATT", "text": f"line {u}: Grog casts Fireball."} for u in (7, 3, 9)],
    "chunks": [{"chunk_id": chunk, "kind": "extraction", "unit_ids": [7, 3, 9]} for chunk in CHUNKS],
})
PASSING = orjson.dumps({"spells": [{"spell_name": "Fireball", "caster_name": "Grog",
                                    "cast": {"level": 3, "as_ritual": False, "target_names": []},
                                    "evidence": [{"start_unit_id": 7, "end_unit_id": 9}]}]}).decode()
FAILING = "not json"
STALE_PROMPT = "sha256:" + "1" * 64


def line(cid: str, attempt: int, passes: bool, current: bool, chunk: str = "x-1") -> bytes:
    prompt, schema = current_fingerprints("spells")
    return orjson.dumps({
        "candidate_id": cid, "family": "spells", "source_id": SOURCE, "chunk_id": chunk, "attempt": attempt,
        "producer": {"provider": "simulated", "model": "m"},
        "prompt_fingerprint": prompt if current else STALE_PROMPT, "schema_fingerprint": schema,
        "raw_response": PASSING if passes else FAILING, "received_at": "2026-10-01T12:00:00Z"})


def run(lines, *, max_attempts: int = 3, refresh: bool = False):
    """Rows by output and counts, as the per-key runner step gets them (no pipeline)."""
    config = RunConfig(max_attempts=max_attempts, refresh_stale=refresh)
    return process_source_groups(config, SOURCE, {INPUT_TRANSCRIPTS: [TRANSCRIPT], INPUT_CANDIDATES: list(lines)})


def manifest_of(counts, lines, refresh: bool):
    return build_manifest({**counts, "candidates_in": len(lines)}, options={"refresh_stale": refresh}, runner="test")


def test_the_bound_has_one_definition_and_is_the_envelopes():
    assert slot_decision.MAX_ATTEMPT_NUMBER is MAX_ATTEMPT_NUMBER is intake.MAX_ATTEMPT_NUMBER
    assert parse_candidate(line("c-0", MAX, False, True)).attempt == MAX
    with pytest.raises(EnvelopeError):
        parse_candidate(line("c-0", MAX + 1, False, True))


def test_next_attempt_never_numbers_past_the_bound():
    assert next_attempt([1, MAX - 1]) == MAX
    with pytest.raises(ValueError):
        next_attempt([1, MAX])


@pytest.mark.parametrize("max_attempts", [3, MAX, MAX + 1])
def test_a_failing_stale_slot_at_the_bound_gets_no_refresh_request_and_is_exhausted(max_attempts):
    lines = [line("c-0", 1, False, False), line("c-1", MAX, False, False)]
    outputs, counts = run(lines, max_attempts=max_attempts, refresh=True)
    assert outputs["retry_requests"] == ()
    assert counts["outcome/spells/exhausted"] == 1 and "outcome/spells/retry" not in counts
    # Not a slot to refresh: no request can be numbered for it, with or without the flag.
    assert "revision/spells/refresh_due" not in counts and "revision/spells/refresh" not in counts
    refresh = manifest_of(counts, lines, True)["refresh"]
    assert refresh["slots_to_refresh"] == 0 == refresh["refresh_requests"]


def test_an_accepted_stale_slot_at_the_bound_keeps_its_artifact_and_is_not_refreshed():
    lines = [line("c-0", MAX, True, False)]
    outputs, counts = run(lines, refresh=True)
    assert [a["provenance"]["candidate_id"] for a in outputs.get("artifacts/spells", [])] == ["c-0"]
    assert outputs["retry_requests"] == ()
    # Its outcome is accepted (one outcome per slot): not exhausted, not a slot to refresh.
    assert counts["outcome/spells/accepted"] == 1 and "outcome/spells/exhausted" not in counts
    assert "revision/spells/refresh_due" not in counts
    assert counts["revision/spells/accepted_stale"] == 1


def test_a_failing_slot_at_the_bound_is_exhausted_whatever_the_budget():
    for max_attempts in (MAX, MAX + 1, 2**63):
        lines = [line("c-0", MAX - 1, False, True), line("c-1", MAX, False, True)]
        outputs, counts = run(lines, max_attempts=max_attempts, refresh=True)
        assert outputs["retry_requests"] == (), max_attempts
        assert counts["outcome/spells/exhausted"] == 1 and "outcome/spells/retry" not in counts, max_attempts


def test_a_slot_one_below_the_bound_gets_its_request_for_the_bound_and_the_answer_closes_it():
    # A retry: failing current attempt at MAX - 1 with a budget beyond the bound.
    outputs, counts = run([line("c-0", MAX - 1, False, True)], max_attempts=MAX + 1)
    (retry,) = outputs["retry_requests"]
    assert (retry["kind"], retry["attempt"], counts["outcome/spells/retry"]) == ("retry", MAX, 1)
    answered, counts = run([line("c-0", MAX - 1, False, True), line("c-1", retry["attempt"], False, True)],
                           max_attempts=MAX + 1)
    assert answered["retry_requests"] == () and counts["outcome/spells/exhausted"] == 1

    # A refresh: stale slots at MAX - 1, failing (budget spent) and accepted.
    for passes in (False, True):
        outputs, counts = run([line("c-0", MAX - 1, passes, False)], refresh=True)
        (refresh,) = outputs["retry_requests"]
        assert (refresh["kind"], refresh["attempt"]) == ("refresh", MAX)
        assert counts["revision/spells/refresh_due"] == 1 == counts["revision/spells/refresh"]
        # Its answer, failing and stale once more (say the prompt moved again): the loop still closes.
        answered, counts = run([line("c-0", MAX - 1, passes, False), line("c-1", refresh["attempt"], False, False)],
                               refresh=True)
        assert answered["retry_requests"] == () and "revision/spells/refresh_due" not in counts


# Attempt numbers near the bound (and a few small ones); budgets small, at and beyond the bound.
attempt_st = st.one_of(st.integers(MAX - 3, MAX), st.integers(1, 3))
budget_st = st.one_of(st.integers(1, 4), st.integers(MAX - 2, MAX + 2), st.just(2**63))
slot_st = st.lists(st.tuples(attempt_st, st.booleans(), st.booleans()), min_size=1, max_size=4)


@settings(max_examples=120, deadline=None)
@given(slots=st.lists(slot_st, min_size=1, max_size=len(CHUNKS)), max_attempts=budget_st, refresh=st.booleans())
def test_no_request_beyond_the_bound_and_the_outcomes_still_add_up(slots, max_attempts, refresh):
    lines = [line(f"c-{s}-{n}", attempt, passes, current, chunk=CHUNKS[s])
             for s, attempts in enumerate(slots) for n, (attempt, passes, current) in enumerate(attempts)]
    outputs, counts = run(lines, max_attempts=max_attempts, refresh=refresh)
    requests = outputs["retry_requests"]

    assert all(1 <= r["attempt"] <= MAX for r in requests)
    by_chunk = {r["chunk_id"]: r for r in requests}
    assert len(by_chunk) == len(requests)  # never two requests for a slot
    for s, attempts in enumerate(slots):
        highest = max(a for a, _, _ in attempts)
        any_passes, has_current = any(p for _, p, _ in attempts), any(c for _, _, c in attempts)
        spent = highest == MAX
        expect_retry = not any_passes and highest < max_attempts and not spent
        expect_refresh = refresh and not expect_retry and not has_current and not spent
        request = by_chunk.get(CHUNKS[s])
        assert (request["kind"] if request else None) == (
            "retry" if expect_retry else "refresh" if expect_refresh else None)
        if request:
            assert request["attempt"] == highest + 1

    # One outcome per slot; request rows agree with the counts and the manifest.
    outcome = {name: counts.get(f"outcome/spells/{name}", 0) for name in ("accepted", "retry", "exhausted", "deferred")}
    assert sum(outcome.values()) == len(slots)
    assert outcome["accepted"] == len(outputs.get("artifacts/spells", []))
    kinds = [r["kind"] for r in requests]
    assert outcome["retry"] == kinds.count("retry")
    assert counts.get("revision/spells/refresh", 0) == kinds.count("refresh")
    assert counts.get("revision/spells/refresh", 0) == (counts.get("revision/spells/refresh_due", 0) if refresh else 0)
    manifest = manifest_of(counts, lines, refresh)
    assert manifest["outputs"]["retry_requests"] + manifest["outputs"]["refresh_requests"] == len(requests)
    assert manifest["totals"]["exhausted"] == outcome["exhausted"]
    assert manifest["conservation"]["holds"]
