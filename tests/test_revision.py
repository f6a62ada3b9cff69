"""Prompt revisions (contract §6.1): current attempts win, refresh requests plan the re-extraction.

Slots are generated with hypothesis (attempt numbers, pass or fail, current or
stale) and run through the real per-source entry point. The selection rule as
it was before revisions were known is kept here as the reference
(:func:`before_revisions`): with no stale attempt, or only stale ones, every
outcome must be exactly what it gives.
"""

from __future__ import annotations

import random

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.assets import current_fingerprints
from domain.manifest import build_manifest
from domain.reprocess import RunConfig, process_source
from domain.revision import REQUEST_KINDS, choose_accepted, next_attempt, refresh_due
from domain.schemas import REQUEST_KINDS as SCHEMA_REQUEST_KINDS

SOURCE = "crd3:R"
TRANSCRIPT = orjson.dumps({
    "source_id": SOURCE,
    "units": [{"unit_id": u, "speaker": "MATT", "text": f"line {u}: Grog casts Fireball."} for u in (7, 3, 9)],
    "chunks": [{"chunk_id": "x-1", "kind": "extraction", "unit_ids": [7, 3, 9]}],
})
PASSING = orjson.dumps({"spells": [{"spell_name": "Fireball", "caster_name": "Grog",
                                    "cast": {"level": 3, "as_ritual": False, "target_names": []},
                                    "evidence": [{"start_unit_id": 7, "end_unit_id": 3}]}]}).decode()
FAILING = "not json"
STALE_PROMPT = "sha256:" + "1" * 64


def line(cid: str, attempt: int, passes: bool, current: bool, family: str = "spells", chunk: str = "x-1") -> bytes:
    prompt, schema = current_fingerprints(family)
    return orjson.dumps({
        "candidate_id": cid, "family": family, "source_id": SOURCE, "chunk_id": chunk, "attempt": attempt,
        "producer": {"provider": "simulated", "model": "m"},
        "prompt_fingerprint": prompt if current else STALE_PROMPT, "schema_fingerprint": schema,
        "raw_response": PASSING if passes else FAILING, "received_at": "2026-10-01T12:00:00Z"})


# (attempt number, passes, current) per candidate; ids c-0, c-1, ... in generation order.
attempts_st = st.lists(st.tuples(st.integers(1, 6), st.booleans(), st.booleans()), min_size=1, max_size=6)


def run(attempts, max_attempts=3, refresh=False, order=None):
    lines = [line(f"c-{n}", a, p, c) for n, (a, p, c) in enumerate(attempts)]
    if order is not None:
        lines = [lines[i] for i in order]
    return process_source(SOURCE, [TRANSCRIPT], lines, RunConfig(max_attempts=max_attempts, refresh_stale=refresh))


def before_revisions(attempts, max_attempts):
    """The decision before contract §6.1: the earliest passing attempt wins; else one retry from the latest
    attempt while the budget lasts. Returns ({candidate: verdict}, accepted id, (replaced id, attempt) | None)."""
    ordered = sorted(((a, f"c-{n}", p) for n, (a, p, _) in enumerate(attempts)), key=lambda t: (t[0], t[1]))
    accepted = next((cid for _, cid, p in ordered if p), None)
    verdicts = {cid: ("accepted" if cid == accepted else "superseded" if p else "rejected") for _, cid, p in ordered}
    retry = None
    if accepted is None and ordered[-1][0] < max_attempts:
        retry = (ordered[-1][1], ordered[-1][0] + 1)
    return verdicts, accepted, retry


def requests_of(result, kind):
    return [r for r in result.retry_requests if r["kind"] == kind]


@settings(max_examples=150, deadline=None)
@given(attempts=attempts_st, max_attempts=st.integers(1, 4), refresh=st.booleans(), stale=st.booleans())
def test_a_slot_all_current_or_all_stale_is_decided_exactly_as_before(attempts, max_attempts, refresh, stale):
    attempts = [(a, p, not stale) for a, p, _ in attempts]
    result = run(attempts, max_attempts, refresh)
    verdicts, accepted, retry = before_revisions(attempts, max_attempts)
    assert {e["candidate_id"]: e["verdict"] for e in result.evaluations} == verdicts
    assert [a["provenance"]["candidate_id"] for a in result.artifacts] == ([accepted] if accepted else [])
    assert [(r["candidate_id"], r["attempt"]) for r in requests_of(result, "retry")] == ([retry] if retry else [])
    outcome_keys = {k for k in result.counts if k.startswith("outcome/")}
    expected = {"outcome/spells/" + o for o, hit in (("accepted", accepted), ("retry", retry),
                                                     ("exhausted", not accepted and not retry),
                                                     ("superseded", "superseded" in verdicts.values()),
                                                     ("stale", stale)) if hit}
    assert outcome_keys == expected


@settings(max_examples=150, deadline=None)
@given(attempts=attempts_st, max_attempts=st.integers(1, 4), refresh=st.booleans())
def test_a_passing_current_attempt_wins_over_every_passing_stale_one(attempts, max_attempts, refresh):
    result = run(attempts, max_attempts, refresh)
    ordered = sorted((a, f"c-{n}", p, c) for n, (a, p, c) in enumerate(attempts))
    current_passing = [cid for _, cid, p, c in ordered if p and c]
    any_passing = [cid for _, cid, p, _ in ordered if p]
    chosen = [a["provenance"]["candidate_id"] for a in result.artifacts]
    if current_passing:
        assert chosen == [current_passing[0]]
    else:  # no passing current attempt: the earliest passing one, as before
        assert chosen == any_passing[:1]
    verdicts = {e["candidate_id"]: e["verdict"] for e in result.evaluations}
    assert sorted(cid for cid, v in verdicts.items() if v == "superseded") == sorted(set(any_passing) - set(chosen))
    if chosen:
        assert result.artifacts[0]["provenance"]["prompt_fingerprint"] == (
            current_fingerprints("spells")[0] if current_passing else STALE_PROMPT)


@settings(max_examples=150, deadline=None)
@given(attempts=attempts_st, max_attempts=st.integers(1, 4))
def test_refresh_stale_writes_one_request_per_eligible_slot_and_never_two_requests(attempts, max_attempts):
    plain, refreshed = run(attempts, max_attempts), run(attempts, max_attempts, refresh=True)
    assert requests_of(plain, "refresh") == []
    retries = requests_of(refreshed, "retry")
    assert retries == requests_of(plain, "retry")  # the flag changes nothing else
    assert refreshed.evaluations == plain.evaluations and refreshed.artifacts == plain.artifacts
    has_current = any(c for _, _, c in attempts)
    refreshes = requests_of(refreshed, "refresh")
    assert len(refreshes) == (0 if has_current or retries else 1)
    assert len(refreshed.retry_requests) <= 1  # one slot, never two requests
    assert plain.counts.get("revision/spells/refresh_due", 0) == (0 if has_current or retries else 1)
    if refreshes:
        (request,) = refreshes
        ordered = sorted((a, f"c-{n}") for n, (a, _, _) in enumerate(attempts))
        accepted = [a["provenance"]["candidate_id"] for a in refreshed.artifacts]
        assert request["attempt"] == max(a for a, _, _ in attempts) + 1  # not limited by the budget
        assert request["candidate_id"] == (accepted[0] if accepted else ordered[-1][1])
        assert request["correction_guidance"] == ""
        assert (request["prompt_fingerprint"], request["schema_fingerprint"]) == current_fingerprints("spells")
        assert refreshed.counts["revision/spells/refresh"] == 1
        assert refreshed.counts["revision/spells/refresh_excerpt_chars"] > 0


@settings(max_examples=60, deadline=None)
@given(attempts=attempts_st, max_attempts=st.integers(1, 4), seed=st.integers(0, 2**32))
def test_requests_are_deterministic_whatever_the_arrival_order(attempts, max_attempts, seed):
    order = list(range(len(attempts)))
    random.Random(seed).shuffle(order)
    assert run(attempts, max_attempts, True, order) == run(attempts, max_attempts, True)


def test_a_refresh_id_names_the_revision_not_only_the_slot():
    first = requests_of(run([(1, True, False)], refresh=True), "refresh")[0]
    again = requests_of(run([(1, True, False)], refresh=True), "refresh")[0]
    assert first == again and first["request_id"].startswith("r-")
    retry = requests_of(run([(1, False, False)]), "retry")[0]
    assert retry["request_id"] != first["request_id"]


def test_once_the_refresh_answer_is_in_the_slot_is_never_refreshed_again():
    before = run([(1, True, False)], refresh=True)
    answered = run([(1, True, False), (2, True, True)], refresh=True)
    assert len(requests_of(before, "refresh")) == 1
    assert answered.retry_requests == ()
    assert [a["provenance"]["candidate_id"] for a in answered.artifacts] == ["c-1"]
    assert answered.counts["revision/spells/current_over_stale"] == 1
    # A failing refresh answer: the stale artifact stays, no new request (the budget is spent at 3).
    failed = run([(1, True, False), (2, False, True)], refresh=True)
    assert [a["provenance"]["candidate_id"] for a in failed.artifacts] == ["c-0"] and failed.retry_requests == ()


def test_deferred_slots_are_not_refreshed():
    lines = [line("c-occ", 1, True, False, family="npc-occurrences")]
    result = process_source(SOURCE, [TRANSCRIPT], lines, RunConfig(refresh_stale=True))
    assert result.counts["outcome/npc-occurrences/deferred"] == 1
    assert result.retry_requests == () and "revision/npc-occurrences/refresh_due" not in result.counts


@given(passed=st.lists(st.booleans(), max_size=8), data=st.data())
def test_choose_accepted_is_the_earliest_passing_current_else_the_earliest_passing(passed, data):
    current = data.draw(st.lists(st.booleans(), min_size=len(passed), max_size=len(passed)))
    chosen = choose_accepted(passed, current)
    if not any(passed):
        assert chosen is None
    else:
        assert passed[chosen]
        assert current[chosen] == any(p and c for p, c in zip(passed, current))
        assert not any(passed[n] and current[n] == current[chosen] for n in range(chosen))


def test_refresh_rule_and_next_attempt():
    assert refresh_due(has_current=False, retried=False)
    assert not refresh_due(has_current=True, retried=False)
    assert not refresh_due(has_current=False, retried=True)
    assert not refresh_due(has_current=False, retried=False, attempts_spent=True)
    assert next_attempt([3, 1, 7]) == 8
    assert SCHEMA_REQUEST_KINDS == REQUEST_KINDS


def test_the_manifest_counts_refresh_requests_per_family():
    result = run([(1, True, False)], refresh=True)
    counts = {**result.counts, "candidates_in": 1}
    manifest = build_manifest(counts, options={"refresh_stale": True}, runner="test")
    refresh = manifest["refresh"]
    assert refresh["refresh_stale"] is True and refresh["refresh_requests"] == 1 == refresh["slots_to_refresh"]
    assert refresh["by_family"]["spells"]["refresh_requests"] == 1
    assert refresh["by_family"]["spells"]["artifacts_stale"] == 1
    assert refresh["excerpt_chars"] == refresh["by_family"]["spells"]["excerpt_chars"] > 0
    assert manifest["outputs"]["refresh_requests"] == 1 and manifest["outputs"]["retry_requests"] == 0


def test_request_rows_of_both_kinds_match_the_generated_schemas():
    import io

    import fastavro
    from jsonschema import Draft202012Validator

    from domain.assets import load_json_asset, read_asset
    from domain.schemas import generated_request_schemas

    for path, data in generated_request_schemas().items():
        assert read_asset(path) == data, f"assets/{path} is stale: run python -m domain.schemagen"
    rows = [*run([(1, True, False)], refresh=True).retry_requests, *run([(1, False, True)]).retry_requests]
    assert sorted(r["kind"] for r in rows) == ["refresh", "retry"]
    validator = Draft202012Validator(load_json_asset("outputs/retry_request.v1.json"))
    for row in rows:
        validator.validate(row)
    refresh = next(r for r in rows if r["kind"] == "refresh")
    assert list(validator.iter_errors({**refresh, "correction_guidance": "Fix it."}))  # a refresh never guides
    assert list(validator.iter_errors({**refresh, "kind": "retry", "correction_guidance": ""}))
    schema = fastavro.parse_schema(load_json_asset("outputs/retry_request.v1.avsc"))
    buffer = io.BytesIO()
    fastavro.writer(buffer, schema, rows)
    assert list(fastavro.reader(io.BytesIO(buffer.getvalue()))) == rows


def test_the_report_shows_the_refresh_section_per_family_and_where_the_requests_are():
    from pipelines.pages.report import refresh_section

    result = run([(1, True, False)], refresh=True)
    manifest = build_manifest({**result.counts, "candidates_in": 1}, options={"refresh_stale": True}, runner="t")
    html = refresh_section(manifest, "out/<run>")
    chars = manifest["refresh"]["excerpt_chars"]
    assert '<section id="refresh">' in html and "<td>spells</td>" in html
    assert f"<td>{chars:,}</td>" in html and "refresh requests written" in html
    assert "out/&lt;run&gt;/retry_requests/" in html and "--kinds refresh" in html and "<run>" not in html
    planned = build_manifest({**run([(1, True, False)]).counts, "candidates_in": 1}, options={}, runner="t")
    assert "run the job with <code>--refresh-stale</code>" in refresh_section(planned, "out")
    assert "no refresh counts" in refresh_section({}, "out")


def test_the_retry_economy_and_the_report_examples_ignore_refresh_requests():
    from analysis.ground_truth import TruthRow
    from analysis.retry_economy import retry_economy, retry_requests_only
    from analysis.slots import Slot
    from analysis.run_summary import summarize_run
    from sample.sim_vocabulary import SIMULATED_VOCABULARY

    result = run([(1, True, False)], refresh=True)
    (refresh,) = result.retry_requests
    truth = [TruthRow("c-0", Slot("spells", SOURCE, "x-1"), 1, (), True)]
    economy = retry_economy(truth, result.evaluations, result.retry_requests, 3, SIMULATED_VOCABULARY)
    assert economy.coverage.ok and economy.coverage.unexpected_requests == ()
    assert retry_requests_only([refresh, {"request_id": "old"}]) == [{"request_id": "old"}]
    summary = summarize_run(lambda: result.evaluations, lambda: result.retry_requests)
    assert summary.examples == ()
