"""SIMULATED judge: a test and demo double, NOT a model.

Two halves, both deterministic:

- **Planting** (used by ``sample.simulated_producer --judge-defects``): semantic
  defects no rule can see, put into attempts that pass every rule, at known
  rates, and recorded in the ground truth under ``judge_defects``:
  ``wrong_actor`` (combat-turns: an attack's actor and target swapped),
  ``wrong_caster`` (spells: the spell given to another speaker of the chunk),
  ``player_as_npc`` (npc-registry: a person at the table listed as an NPC).
- **Answering** (``python -m sample.simulated_judge``): it plays a provider's batch
  service for the judge requests ``export-batch`` wrote (``openai-chat``), and
  answers each from that ground truth: ``fail`` naming every planted record
  (by its number in the list the request shows), else ``pass`` - with
  configurable error rates (a false pass, a false fail, ``unsure``, an unusable
  answer, a malformed line). It writes an OpenAI Batch output file for
  ``import-batch`` (each answer billed the usage ``sample.sim_usage`` derives from the request and the
  answer) and, per answer, what it said and what was true
  (``--answers-out``), from which the retry economy reports the judges' precision
  and recall.

It never reads the job's outputs: only the request lines, their index and the
ground truth.

    python -m sample.simulated_judge --requests 'batch/requests-*' --truth GLOB \\
        --results-out FILE --answers-out FILE [--seed 7] [--rate NAME=P ...]
"""

from __future__ import annotations

import argparse
import glob
import random
import re
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Sequence

import orjson

from domain.batch.ledger import parse_index_row
from domain.revision import KIND_JUDGE
from sample.jsonl import dumps_line, open_output, read_jsonl
from sample.sim_sources import seed_int
from sample.simulated_batch import PROVIDER, request_pairs, result_line

WRONG_ACTOR, WRONG_CASTER, PLAYER_AS_NPC = "wrong_actor", "wrong_caster", "player_as_npc"
# What each planted kind changes, and the field a judge names for it.
PLANTED_FAMILIES = {WRONG_ACTOR: "combat-turns", WRONG_CASTER: "spells", PLAYER_AS_NPC: "npc-registry"}
PLANTED_FIELDS = {WRONG_ACTOR: "actor_name", WRONG_CASTER: "caster_name", PLAYER_AS_NPC: "name"}
NAME_FIELDS = {"combat-turns": "actor_name", "spells": "caster_name", "npc-registry": "name"}
EXPLANATIONS = {
    WRONG_ACTOR: "In the cited lines this character is the one attacked; the attack is made by the other named "
                 "combatant.",
    WRONG_CASTER: "In the cited lines someone else casts this spell; the named caster does not cast it.",
    PLAYER_AS_NPC: "This is a person at the table (a player or the game master), not a character of the story.",
}


def with_rates(rates, pairs: Sequence[str], noun: str):
    """``rates`` (a dataclass of probabilities) with ``NAME=P`` overrides; an unknown name stops the command."""
    known = [f.name for f in fields(rates)]
    values = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        if name not in known:
            raise SystemExit(f"unknown {noun} {name!r}; known: {', '.join(known)}")
        values[name] = float(value)
    return replace(rates, **values)


# --- planting ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class JudgeDefectRates:
    """Per rule-passing attempt of the family: the probability of one planted semantic defect."""
    wrong_actor: float = 0.0
    wrong_caster: float = 0.0
    player_as_npc: float = 0.0

    @classmethod
    def demo(cls) -> "JudgeDefectRates":
        return cls(wrong_actor=0.2, wrong_caster=0.15, player_as_npc=0.1)

    @property
    def enabled(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def with_overrides(self, pairs: Sequence[str]) -> "JudgeDefectRates":
        return with_rates(self, pairs, "judge defect")


def plant(family: str, response: dict, speakers: Sequence[str], rates: JudgeDefectRates,
          rng: random.Random) -> tuple[dict, list[dict]]:
    """``response`` (a rule-passing attempt) with at most one planted semantic defect, and its truth
    (``{"kind", "field", "record_name", "evidence"}``): the record as the judge will see it."""
    for kind, planted_family in PLANTED_FAMILIES.items():
        if planted_family == family and rng.random() < getattr(rates, kind):
            planted = _PLANTERS[kind](response, speakers, rng)
            if planted is not None:
                return planted
    return response, []


def _wrong_actor(response: dict, speakers: Sequence[str], rng: random.Random):
    turns = response["turns"]
    candidates = [n for n, t in enumerate(turns) if t["turn_kind"] == "attack" and t["target_names"]
                  and t["target_names"][0].strip() and t["target_names"][0] != t["actor_name"]]
    if not candidates:
        return None
    n = rng.choice(candidates)
    turn = dict(turns[n])
    turn["actor_name"], turn["target_names"] = turn["target_names"][0], [turn["actor_name"], *turn["target_names"][1:]]
    changed = [*turns[:n], turn, *turns[n + 1:]]
    return {**response, "turns": changed}, [_truth(WRONG_ACTOR, turn["actor_name"], turn["evidence"])]


def _wrong_caster(response: dict, speakers: Sequence[str], rng: random.Random):
    spells = response["spells"]
    if not spells:
        return None
    n = rng.randrange(len(spells))
    others = sorted({s for s in speakers if s.strip() and s != spells[n]["caster_name"]})
    if not others:
        return None
    spell = {**spells[n], "caster_name": rng.choice(others)}
    changed = [*spells[:n], spell, *spells[n + 1:]]
    return {**response, "spells": changed}, [_truth(WRONG_CASTER, spell["caster_name"], spell["evidence"])]


def _player_as_npc(response: dict, speakers: Sequence[str], rng: random.Random):
    taken = {" ".join(n.split()).casefold() for npc in response["npcs"] for n in (npc["name"], *npc["aliases"])}
    free = sorted({s for s in speakers if s.strip() and " ".join(s.split()).casefold() not in taken})
    if not free or not response["npcs"]:
        return None
    name = rng.choice(free)
    evidence = response["npcs"][0]["evidence"][:1]  # inside the chunk: the rules still pass
    npc = {"name": name, "aliases": [], "description": f"{name}, who is named in these lines.", "evidence": evidence}
    return {**response, "npcs": [*response["npcs"], npc]}, [_truth(PLAYER_AS_NPC, name, evidence)]


_PLANTERS = {WRONG_ACTOR: _wrong_actor, WRONG_CASTER: _wrong_caster, PLAYER_AS_NPC: _player_as_npc}


def _truth(kind: str, name: str, evidence: list[dict]) -> dict:
    return {"kind": kind, "field": PLANTED_FIELDS[kind], "record_name": name,
            "evidence": [[e["start_unit_id"], e["end_unit_id"]] for e in evidence]}


# --- answering -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class JudgeErrorRates:
    """How often the simulated judge answers wrongly or badly (per judge request)."""
    false_pass: float = 0.05   # a planted defect, answered pass
    false_fail: float = 0.03   # nothing planted, answered fail (naming the first record)
    unsure: float = 0.04
    unusable: float = 0.02     # a fail that names no problem
    malformed: float = 0.01    # not JSON

    def with_overrides(self, pairs: Sequence[str]) -> "JudgeErrorRates":
        return with_rates(self, pairs, "judge error rate")


_RECORD_LINE = re.compile(r"^(\d+)\. (\{.*\})$", re.MULTILINE)


def shown_records(request_line: dict) -> list[dict]:
    """The records a judge request line shows, in their numbered order."""
    content = "\n".join(_strings(request_line))
    return [orjson.loads(m.group(2)) for m in _RECORD_LINE.finditer(content)]


def _strings(node: Any):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def planted_numbers(family: str, records: Sequence[dict], planted: Sequence[dict]) -> list[tuple[int, dict]]:
    """(1-based number, planted truth) for every planted defect found among the shown records."""
    field = NAME_FIELDS.get(family)
    found = []
    for defect in planted:
        ranges = [list(r) for r in defect["evidence"]]
        for number, record in enumerate(records, start=1):
            cited = [[e["start_unit_id"], e["end_unit_id"]] for e in record.get("evidence", ())]
            if record.get(field) == defect["record_name"] and any(r in cited or r[::-1] in cited for r in ranges):
                found.append((number, defect))
                break
    return found


def answer(family: str, records: Sequence[dict], planted: Sequence[dict], rates: JudgeErrorRates,
           rng: random.Random) -> tuple[str, str, str]:
    """(the judge's text, what it said: pass/fail/unsure/unusable/malformed, the truth: fail/pass)."""
    found = planted_numbers(family, records, planted)
    truth = "fail" if found else "pass"
    draw = rng.random()
    if draw < rates.malformed:
        return "I think the records look mostly fine", "malformed", truth
    draw -= rates.malformed
    if draw < rates.unusable:
        return orjson.dumps({"verdict": "fail", "problems": []}).decode(), "unusable", truth
    draw -= rates.unusable
    if draw < rates.unsure:
        return orjson.dumps({"verdict": "unsure", "problems": []}).decode(), "unsure", truth
    draw -= rates.unsure
    if found and draw < rates.false_pass:
        return orjson.dumps({"verdict": "pass", "problems": []}).decode(), "pass", truth
    if not found and records and draw < rates.false_fail:
        field = NAME_FIELDS.get(family, "evidence")
        problems = [{"record": 1, "field": field,
                     "explanation": "The cited lines do not clearly show this; another reading is possible."}]
        return orjson.dumps({"verdict": "fail", "problems": problems}).decode(), "fail", truth
    if found:
        problems = [{"record": number, "field": defect["field"], "explanation": EXPLANATIONS[defect["kind"]]}
                    for number, defect in found][:10]
        return orjson.dumps({"verdict": "fail", "problems": problems}).decode(), "fail", truth
    return orjson.dumps({"verdict": "pass", "problems": []}).decode(), "pass", truth


def run(pattern: str, truth_paths: Sequence[str], results_out: Path, answers_out: Path, seed: int,
        rates: JudgeErrorRates) -> tuple[int, int]:
    """Answer every judge request of the export; returns (judge requests read, answered)."""
    planted: dict[str, list[dict]] = {}
    for path in truth_paths:
        for row in read_jsonl(path):
            if row.get("judge_defects"):
                planted[row["candidate_id"]] = row["judge_defects"]
    read = answered = 0
    with open_output(results_out) as results, open_output(answers_out) as answers:
        for requests_path, index_path in request_pairs(pattern):
            lines = requests_path.read_bytes().splitlines()
            for raw_index in index_path.read_bytes().splitlines():
                if not raw_index.strip():
                    continue
                row = parse_index_row(raw_index, str(index_path))
                if row.kind != KIND_JUDGE:
                    continue
                if row.provider != PROVIDER:
                    raise SystemExit(f"{index_path}: exported for {row.provider}; the simulated judge plays {PROVIDER}")
                read += 1
                request_line = orjson.loads(lines[row.line - 1])
                records = shown_records(request_line)
                rng = random.Random(seed_int(seed, "judge", row.request_id))
                text, said, truth = answer(row.family, records, planted.get(row.judged_candidate_id or "", ()), rates,
                                           rng)
                answered += 1
                results.write(orjson.dumps(result_line(answered, row.wire_id, row.model, text, request_line)) + b"\n")
                answers.write(dumps_line({"request_id": row.request_id, "judge": row.judge, "family": row.family,
                                          "candidate_id": row.judged_candidate_id, "said": said, "truth": truth}))
    return read, answered


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sample.simulated_judge", description=__doc__.split("\n")[0])
    parser.add_argument("--requests", required=True, help="glob of export-batch's requests-*.jsonl (openai-chat)")
    parser.add_argument("--truth", required=True, action="append",
                        help="ground truth of the judged candidates (the simulated producer's; repeatable globs)")
    parser.add_argument("--results-out", required=True, type=Path, help="the batch output file to write")
    parser.add_argument("--answers-out", required=True, type=Path, help="what it said and what was true, per request")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rate", action="append", default=[], metavar="NAME=P",
                        help="an error rate: false_pass, false_fail, unsure, unusable, malformed (repeatable)")
    args = parser.parse_args(argv)
    truth = sorted(path for pattern in args.truth for path in glob.glob(pattern))
    read, answered = run(args.requests, truth, args.results_out, args.answers_out, args.seed,
                         JudgeErrorRates().with_overrides(args.rate))
    print(f"simulated judge: answered {answered} of {read} judge requests -> {args.results_out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
