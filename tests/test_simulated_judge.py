"""The simulated judge (issue #40 item 6): planted semantic defects no rule sees, and a judge that
answers from their ground truth with known error rates.

The planted defects must pass every rule (else a rule, not a judge, would find them), must leave
an archive made without them byte for byte as it was, and must be found by the judge through the
real export-batch request lines.
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.reprocess import RunConfig, process_source
from pipelines.demo import bundled_transcripts
from sample import simulated_producer as sim
from sample.jsonl import read_jsonl
from sample.simulated_judge import (PLANTED_FAMILIES, JudgeDefectRates, JudgeErrorRates, answer, planted_numbers,
                                    shown_records)


def produce(out: Path, *args: str) -> tuple[list[dict], list[dict], list[dict]]:
    out.mkdir(parents=True, exist_ok=True)
    assert sim.main(["--transcripts", str(bundled_transcripts()), "--candidates-out", str(out / "c.jsonl"),
                     "--truth-out", str(out / "truth.jsonl"), "--transcripts-out", str(out / "t.jsonl"),
                     "--seed", "5", *args]) == 0
    return (list(read_jsonl(out / "c.jsonl")), list(read_jsonl(out / "truth.jsonl")), list(read_jsonl(out / "t.jsonl")))


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return produce(tmp_path_factory.mktemp("planted"), "--judge-defects")


def test_without_judge_defects_the_archive_is_byte_for_byte_unchanged(tmp_path, planted):
    out = tmp_path / "plain"
    produce(out)
    zero = tmp_path / "zero"
    produce(zero, "--judge-defect-rate", "wrong_actor=0")  # rates all zero: the same bytes as without
    assert (out / "c.jsonl").read_bytes() == (zero / "c.jsonl").read_bytes()
    assert (out / "truth.jsonl").read_bytes() == (zero / "truth.jsonl").read_bytes()
    assert b"judge_defects" not in (out / "truth.jsonl").read_bytes()


def test_planted_defects_are_of_each_kind_and_pass_every_rule(planted):
    candidates, truth, transcripts = planted
    kinds = {d["kind"] for row in truth for d in row.get("judge_defects", ())}
    assert kinds == set(PLANTED_FAMILIES)
    by_source: dict[str, list[bytes]] = {}
    for c in candidates:
        by_source.setdefault(c["source_id"], []).append(orjson.dumps(c))
    planted_ids = {row["candidate_id"] for row in truth if row.get("judge_defects")}
    verdicts = {}
    for t in transcripts:
        result = process_source(t["source_id"], [orjson.dumps(t)], by_source.get(t["source_id"], []), RunConfig())
        verdicts.update({e["candidate_id"]: e["verdict"] for e in result.evaluations})
    # No rule sees them: every attempt with a planted defect passes (accepted or superseded).
    assert planted_ids and all(verdicts[cid] in ("accepted", "superseded") for cid in planted_ids)


def test_the_judge_answers_from_the_truth_without_errors():
    records = [{"actor_name": "Grog", "turn_kind": "attack", "evidence": [{"start_unit_id": 3, "end_unit_id": 3}]},
               {"actor_name": "goblin", "turn_kind": "attack", "evidence": [{"start_unit_id": 10, "end_unit_id": 11}]}]
    defect = {"kind": "wrong_actor", "field": "actor_name", "record_name": "goblin", "evidence": [[10, 11]]}
    exact = JudgeErrorRates(false_pass=0, false_fail=0, unsure=0, unusable=0, malformed=0)
    text, said, truth = answer("combat-turns", records, [defect], exact, random.Random(1))
    assert (said, truth) == ("fail", "fail")
    assert orjson.loads(text)["problems"] == [{"record": 2, "field": "actor_name",
                                               "explanation": orjson.loads(text)["problems"][0]["explanation"]}]
    assert answer("combat-turns", records, [], exact, random.Random(1))[1:] == ("pass", "pass")
    assert planted_numbers("combat-turns", records, [{**defect, "record_name": "Vex"}]) == []


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32), st.booleans())
def test_error_rates_are_what_the_judge_says_and_never_change_the_truth(seed, planted_defect):
    records = [{"caster_name": "SAM", "spell_name": "Shield", "evidence": [{"start_unit_id": 1, "end_unit_id": 1}]}]
    defect = {"kind": "wrong_caster", "field": "caster_name", "record_name": "SAM", "evidence": [[1, 1]]}
    always = JudgeErrorRates(false_pass=0, false_fail=0, unsure=0, unusable=0, malformed=1)
    text, said, truth = answer("spells", records, [defect] if planted_defect else [], always, random.Random(seed))
    assert said == "malformed" and truth == ("fail" if planted_defect else "pass")
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(text)


def test_shown_records_reads_the_numbered_records_of_a_request_line():
    line = {"body": {"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": [
        {"type": "text", "text": "Transcript excerpt.\n\n{\"unit_id\": 1}"},
        {"type": "text", "text": "Records to judge.\n\n1. {\"name\": \"A\"}\n2. {\"name\": \"B\"}"}]}]}}
    assert shown_records(line) == [{"name": "A"}, {"name": "B"}]


def test_rates_are_overridable_and_unknown_names_refused():
    assert JudgeDefectRates().with_overrides(["wrong_actor=0.5"]).wrong_actor == 0.5
    assert not JudgeDefectRates().enabled and JudgeDefectRates.demo().enabled
    with pytest.raises(SystemExit):
        JudgeErrorRates().with_overrides(["nope=1"])
