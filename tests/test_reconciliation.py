"""Registry reconciliation (contract §4.1): entry labels, proposal issues, guidance, membership, deferral."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from pathlib import Path

import fastavro
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from domain.assets import current_fingerprints, durable_avro_schema_path, durable_schema_path, load_json_asset
from domain.evaluate import evaluate_response
from domain.evidence import SourceRef
from domain.families import FAMILIES
from domain.families.base import ROLE_RECONCILIATION, EvaluationContext, fold_name
from domain.families.reconciliation import (
    PROPOSAL_CATEGORIES,
    ReconciledRecord,
    listed_entries,
    proposal_issues,
    render_entry_list,
)
from domain.families.registry_family import RegistryRecord
from domain.reprocess import RunConfig, process_source
from domain.source import transcript_from_record
from leak_check import assert_model_safe

SOURCE = "crd3:T-REC"
UNIT_IDS = [10, 3, 7, 20, 1, 2, 50, 40, 30]  # document order: ids fall and rise
CHUNK_UNITS = {"x-1": [10, 3, 7], "x-2": [20, 1, 2], "x-3": [50, 40, 30]}
TRANSCRIPT_RECORD = {
    "source_id": SOURCE,
    "units": [{"unit_id": u, "speaker": "MATT", "text": f"line {u}"} for u in UNIT_IDS],
    "chunks": [{"chunk_id": c, "kind": "extraction", "unit_ids": u} for c, u in CHUNK_UNITS.items()]
    + [{"chunk_id": "s-1", "kind": "scene", "unit_ids": UNIT_IDS}],
}
TRANSCRIPT_LINE = orjson.dumps(TRANSCRIPT_RECORD)
TRANSCRIPT = transcript_from_record(TRANSCRIPT_RECORD)
INTERNAL = (SOURCE, "x-1", "x-2", "x-3", "s-1")

# kind -> (chunk registry family, its list field, reconciliation family, occurrence family, occurrence name field)
KINDS = {
    "npc": ("npc-registry", "npcs", "npc-reconciliation", "npc-occurrences", "npc_name"),
    "item": ("item-registry", "items", "item-reconciliation", "item-occurrences", "item_name"),
    "location": ("location-registry", "locations", "location-reconciliation", "location-occurrences",
                 "location_name"),
}
SUPPLEMENT_WORDS = {"npc": "Player characters are not NPCs", "item": "two healing potions",
                    "location": "a tavern in a city"}


def ev(start: int, end: int) -> dict:
    return {"start_unit_id": start, "end_unit_id": end}


def entry(name: str, *evidence: dict, aliases=()) -> dict:
    return {"name": name, "aliases": list(aliases), "description": f"about {name}", "evidence": list(evidence)}


def entity(name: str, *labels: str, aliases=()) -> dict:
    return {"name": name, "aliases": list(aliases), "description": f"{name}, merged", "member_labels": list(labels)}


def line(cid: str, family: str, chunk: str, response, attempt: int = 1) -> bytes:
    prompt_fp, schema_fp = current_fingerprints(family)
    raw = response if isinstance(response, str) else orjson.dumps(response).decode()
    return orjson.dumps({
        "candidate_id": cid, "family": family, "source_id": SOURCE, "chunk_id": chunk, "attempt": attempt,
        "producer": {"provider": "openai", "model": "gpt-4.1-mini"},
        "prompt_fingerprint": prompt_fp, "schema_fingerprint": schema_fp,
        "raw_response": raw, "received_at": "2026-10-01T12:00:00Z",
    })


def registry_line(cid: str, kind: str, chunk: str, *entries: dict) -> bytes:
    family, list_field = KINDS[kind][:2]
    return line(cid, family, chunk, {list_field: list(entries)})


def reconciliation_line(cid: str, kind: str, *entities: dict, attempt: int = 1) -> bytes:
    return line(cid, KINDS[kind][2], "*", {"entities": list(entities)}, attempt)


def occurrence_line(cid: str, kind: str, chunk: str, name: str, *evidence: dict) -> bytes:
    _, _, _, family, name_field = KINDS[kind]
    record = {name_field: name, "kind": "mentioned", "evidence": list(evidence)}
    if kind == "item":
        record["holder_name"] = None
    return line(cid, family, chunk, {"occurrences": [record]})


def run(*lines: bytes, max_attempts: int = 3):
    return process_source(SOURCE, [TRANSCRIPT_LINE], list(lines), RunConfig(max_attempts=max_attempts))


def evaluation(result, cid: str) -> dict:
    (row,) = [e for e in result.evaluations if e["candidate_id"] == cid]
    return row


def codes(row: dict) -> list[str]:
    return [issue["reason_code"] for issue in row["issues"]]


# Three accepted NPC chunk registries: E1 Grog (x-1), E2 Grog Strongjaw (x-2), E3 Pike (x-3).
GROG_REGISTRIES = (
    registry_line("c-r1", "npc", "x-1", entry("Grog", ev(7, 3))),
    registry_line("c-r2", "npc", "x-2", entry("Grog Strongjaw", ev(1, 2))),
    registry_line("c-r3", "npc", "x-3", entry("Pike", ev(40, 40))),
)


# --- the listed entries -----------------------------------------------------------------------

def record(name: str, *refs: tuple[int, int]) -> RegistryRecord:
    return RegistryRecord(name, (), "", tuple(SourceRef(SOURCE, s, e) for s, e in refs))


def test_entries_are_labelled_by_earliest_evidence_across_chunks():
    registries = [
        ("x-3", (record("Kima", (50, 30)),)),
        ("x-2", (record("Pike", (20, 1)), record("Scanlan", (2, 2)))),
        ("x-1", (record("Grog", (3, 7)), record("Vex", (3, 3)))),  # a tie at unit 3: artifact order decides
    ]
    entries = listed_entries(TRANSCRIPT, registries)
    assert [(e.label, e.name, e.chunk_id) for e in entries] == [
        ("E1", "Grog", "x-1"), ("E2", "Vex", "x-1"), ("E3", "Pike", "x-2"), ("E4", "Scanlan", "x-2"),
        ("E5", "Kima", "x-3")]
    assert listed_entries(TRANSCRIPT, list(reversed(registries))) == entries


chunk_registry = st.sampled_from(sorted(CHUNK_UNITS)).flatmap(lambda chunk: st.tuples(
    st.just(chunk),
    st.lists(st.lists(st.tuples(st.sampled_from(CHUNK_UNITS[chunk]), st.sampled_from(CHUNK_UNITS[chunk])),
                      min_size=1, max_size=3), max_size=4)))


@settings(max_examples=80, deadline=None)
@given(st.lists(chunk_registry, max_size=3, unique_by=lambda r: r[0]), st.randoms(use_true_random=False))
def test_entry_labels_are_dense_ordered_and_independent_of_slot_order(raw_registries, rnd):
    registries = []
    for chunk, records in raw_registries:
        built = [record(f"{chunk}/{n}", *refs) for n, refs in enumerate(records)]
        # the adapter's order: by earliest evidence, ties in response order
        adapted = evaluate_response(FAMILIES["npc-registry"], orjson.dumps({"npcs": [
            entry(r.name, *(ev(ref.start_unit_id, ref.end_unit_id) for ref in r.evidence)) for r in built]}).decode(),
            EvaluationContext(TRANSCRIPT, TRANSCRIPT.chunk(chunk))).adapted
        registries.append((chunk, adapted.records))
    entries = listed_entries(TRANSCRIPT, registries)
    assert [e.label for e in entries] == [f"E{n}" for n in range(1, len(entries) + 1)]
    earliest = [min(TRANSCRIPT.index.position(r.start_unit_id) for r in e.evidence) for e in entries]
    assert earliest == sorted(earliest)
    assert sorted(e.name for e in entries) == sorted(r.name for _, recs in registries for r in recs)
    shuffled = list(registries)
    rnd.shuffle(shuffled)
    assert listed_entries(TRANSCRIPT, shuffled) == entries


def test_the_entry_list_shows_only_what_the_model_may_see():
    entries = listed_entries(TRANSCRIPT, [("x-2", (RegistryRecord("Pike", ("Pike Trickfoot",), "a cleric",
                                                                   (SourceRef(SOURCE, 20, 1),)),))])
    text = render_entry_list(entries)
    assert orjson.loads(text) == {"label": "E1", "name": "Pike", "aliases": ["Pike Trickfoot"],
                                  "description": "a cleric", "evidence": [ev(20, 1)]}
    for token in INTERNAL:
        assert token not in text


# --- proposal issues: every category, alone and all at once -------------------------------------

def npc_context() -> EvaluationContext:
    registries = [("x-1", (record("Grog", (3, 7)),)), ("x-2", (record("Grog Strongjaw", (1, 2)),)),
                  ("x-3", (record("Pike", (40, 40)),))]
    return EvaluationContext(TRANSCRIPT, None, registry_entries=listed_entries(TRANSCRIPT, registries))


ONE_CATEGORY = {
    "unknown_label": [entity("Grog", "E1", "E2", "E7", aliases=["Grog Strongjaw"]), entity("Pike", "E3")],
    "unassigned_entry": [entity("Grog", "E1", "E2", aliases=["Grog Strongjaw"])],
    "entry_in_several_entities": [entity("Grog", "E1", "E2", aliases=["Grog Strongjaw"]), entity("Pike", "E3", "E2")],
    "name_conflict": [entity("Grog", "E1"), entity("grog", "E2", aliases=["Strongjaw"]), entity("Pike", "E3")],
    "blank_name": [entity("Grog", "E1", "E2", aliases=["Grog Strongjaw", " "]), entity("Pike", "E3")],
}


def evaluate_npc_proposal(entities: list[dict]):
    return evaluate_response(FAMILIES["npc-reconciliation"], orjson.dumps({"entities": entities}).decode(),
                             npc_context())


def test_a_clean_proposal_passes():
    result = evaluate_npc_proposal([entity("Grog", "E2", "E1", aliases=["Grog Strongjaw"]), entity("Pike", "E3")])
    assert result.passed and not result.issues


@pytest.mark.parametrize("category", PROPOSAL_CATEGORIES)
def test_each_proposal_category_is_detected_on_its_own(category):
    result = evaluate_npc_proposal(ONE_CATEGORY[category])
    assert not result.passed
    assert [issue.reason_code for issue in result.issues] == [category]
    (issue,) = result.issues
    assert issue.validator == "npc-reconciliation.proposal" and issue.correction is not None


def test_every_category_is_reported_in_one_evaluation():
    result = evaluate_npc_proposal([
        entity("Grog", "E1", "E9", aliases=["", "Pike"]),  # unknown E9, blank alias, alias of another entity
        entity("Pike", "E3", "E1"),  # E1 is in two entities; E2 is in none
    ])
    assert Counter(issue.reason_code for issue in result.issues) == Counter(PROPOSAL_CATEGORIES)


def independent_reading(entities: list[dict], labels: list[str]) -> Counter:
    """contract §4.1 read plainly: how many issues of each category a proposal should get."""
    holders = {label: {n for n, e in enumerate(entities) if label in e["member_labels"]} for label in labels}
    names = [(n, fold_name(name)) for n, e in enumerate(entities) for name in (e["name"], *e["aliases"])]
    holders_of_name = defaultdict(set)
    for n, folded in names:
        if folded:
            holders_of_name[folded].add(n)
    return Counter({
        "unknown_label": sum(len({x for x in e["member_labels"] if x not in labels}) for e in entities),
        "unassigned_entry": sum(1 for h in holders.values() if not h),
        "entry_in_several_entities": sum(1 for h in holders.values() if len(h) > 1),
        "name_conflict": sum(len(h) - 1 for h in holders_of_name.values()),  # every entity after the first
        "blank_name": sum(1 for _, folded in names if not folded),
    })


proposals = st.lists(st.fixed_dictionaries({
    "name": st.sampled_from(["Grog", "grog ", "Pike", " ", "Kima"]),
    "aliases": st.lists(st.sampled_from(["Strongjaw", "PIKE", "", "Lady Kima"]), max_size=2),
    "description": st.just("x"),
    "member_labels": st.lists(st.sampled_from(["E1", "E2", "E3", "E4", "e1", "E 2"]), min_size=1, max_size=3),
}), max_size=4)


@settings(max_examples=150, deadline=None)
@given(proposals)
def test_proposal_issues_match_an_independent_reading(entities):
    result = evaluate_npc_proposal(entities)
    found = Counter(issue.reason_code for issue in result.issues)
    assert found == +independent_reading(entities, ["E1", "E2", "E3"])
    assert result.passed == (not found)


# --- guidance: one renderer, model-facing words only ------------------------------------------------

@pytest.mark.parametrize("kind", sorted(KINDS))
def test_guidance_names_labels_and_entry_names_and_leaks_nothing(kind):
    result = run(
        registry_line("c-r1", kind, "x-1", entry("Grog", ev(7, 3))),
        registry_line("c-r2", kind, "x-2", entry("Grog Strongjaw", ev(1, 2))),
        registry_line("c-r3", kind, "x-3", entry("Pike", ev(40, 40))),
        reconciliation_line("c-rec", kind, entity("Grog", "E1", "E9", aliases=["", "Pike"]), entity("Pike", "E3", "E1")),
    )
    (request,) = result.retry_requests
    guidance = request["correction_guidance"]
    assert request["family"] == KINDS[kind][2] and request["chunk_id"] == "*" and request["attempt"] == 2
    assert '"E9"' in guidance  # the unknown label, as the model wrote it
    assert 'Entry E2 "Grog Strongjaw"' in guidance  # unassigned, by label and entry name
    assert 'Entry E1 "Grog"' in guidance  # in two entities
    assert "E1 to E3" in guidance  # the labels that exist
    assert SUPPLEMENT_WORDS[kind] in guidance
    assert all(SUPPLEMENT_WORDS[other] not in guidance for other in KINDS if other != kind)
    issues = evaluation(result, "c-rec")["issues"]
    assert {i["reason_code"] for i in issues} == set(PROPOSAL_CATEGORIES)
    assert_model_safe(guidance, issues, "c-rec", "c-r1", "c-r2", "c-r3", *INTERNAL, "entities", "chunk")
    for issue in issues:
        assert len(issue["message"]) <= 12 or issue["message"] not in guidance


def test_guidance_is_the_same_bytes_whatever_the_arrival_order():
    lines = [*GROG_REGISTRIES, reconciliation_line("c-rec", "npc", entity("Grog", "E1", "E9"))]
    first = run(*lines).retry_requests
    assert first and first == run(*reversed(lines)).retry_requests


# --- the job: order, membership, deferral, artifacts ---------------------------------------------------

def test_membership_switches_to_the_reconciled_registry_when_one_is_accepted():
    occurrences = (occurrence_line("c-o1", "npc", "x-2", "Big G", ev(20, 20)),
                   occurrence_line("c-o2", "npc", "x-2", "Grog Strongjaw", ev(1, 1)))
    # the reconciled registry renames: "Big G" is new, "Grog Strongjaw" is dropped
    reconciled = reconciliation_line("c-rec", "npc", entity("Grog", "E1", "E2", aliases=["Big G"]), entity("Pike", "E3"))
    with_reconciliation = run(*GROG_REGISTRIES, reconciled, *occurrences)
    assert evaluation(with_reconciliation, "c-rec")["verdict"] == "accepted"
    assert evaluation(with_reconciliation, "c-o1")["verdict"] == "accepted"
    assert codes(evaluation(with_reconciliation, "c-o2")) == ["not_in_registry"]

    union_only = run(*GROG_REGISTRIES, *occurrences)
    assert codes(evaluation(union_only, "c-o1")) == ["not_in_registry"]
    assert evaluation(union_only, "c-o2")["verdict"] == "accepted"

    failed = reconciliation_line("c-rec", "npc", entity("Grog", "E1", "E2", "E7", aliases=["Big G"]), entity("Pike", "E3"))
    with_rejected = run(*GROG_REGISTRIES, failed, *occurrences)
    assert evaluation(with_rejected, "c-rec")["verdict"] == "rejected"
    assert [evaluation(with_rejected, c)["verdict"] for c in ("c-o1", "c-o2")] == ["rejected", "accepted"]


def test_reconciliation_is_deferred_without_an_accepted_chunk_registry_of_its_kind():
    result = run(
        registry_line("c-item", "item", "x-1", entry("Bag of Holding", ev(10, 10))),  # another kind
        registry_line("c-npc", "npc", "x-2", entry(" ", ev(20, 20))),  # rejected: blank name
        reconciliation_line("c-rec", "npc", entity("Grog", "E1")),
        reconciliation_line("c-rec2", "npc", entity("Grog", "E1"), attempt=2),
    )
    assert evaluation(result, "c-npc")["verdict"] == "rejected"
    for cid in ("c-rec", "c-rec2"):
        assert evaluation(result, cid) == {**evaluation(result, cid), "verdict": "deferred", "issues": []}
    assert result.counts["outcome/npc-reconciliation/deferred"] == 1
    assert not any(r["family"] == "npc-reconciliation" for r in result.retry_requests)
    assert not any(a["family"] == "npc-reconciliation" for a in result.artifacts)


def test_source_chunk_is_only_for_reconciliations():
    result = run(
        registry_line("c-r1", "npc", "x-1", entry("Grog", ev(3, 7))),
        line("c-bad1", "npc-reconciliation", "x-1", {"entities": []}),
        line("c-bad2", "npc-registry", "*", {"npcs": []}),
    )
    reasons = sorted(d["reason"] for d in result.dead_letters)
    assert len(reasons) == 2
    assert "source-level: chunk_id must be '*'" in reasons[0]
    assert "unknown chunk '*'" in reasons[1]


def test_reconciled_artifact_carries_members_evidence_and_provenance():
    raw = orjson.dumps({"entities": [entity("Pike", "E3"),
                                     entity("Grog", "E2", "E1", "E2", aliases=["Grog Strongjaw"])]}).decode()
    result = run(
        registry_line("c-r1", "npc", "x-1", entry("Grog", ev(7, 3), ev(10, 10))),
        registry_line("c-r2", "npc", "x-2", entry("Grog Strongjaw", ev(2, 20), ev(20, 1))),
        registry_line("c-r3", "npc", "x-3", entry("Pike", ev(40, 40))),
        line("c-rec", "npc-reconciliation", "*", raw),
    )
    (artifact,) = [a for a in result.artifacts if a["family"] == "npc-reconciliation"]
    assert artifact["chunk_id"] == "*" and artifact["earliest_evidence_unit_id"] == 10
    grog, pike = artifact["records"]  # earliest evidence first, whatever the response order
    assert grog["members"] == [{"chunk_id": "x-1", "name": "Grog"}, {"chunk_id": "x-2", "name": "Grog Strongjaw"}]
    # the members' canonical evidence, one union in document order (10, 3..7, 20..1, 20..2)
    assert [(e["start_unit_id"], e["end_unit_id"]) for e in grog["evidence"]] == [(10, 10), (3, 7), (20, 1), (20, 2)]
    assert {e["source_id"] for e in grog["evidence"]} == {SOURCE}
    assert pike["members"] == [{"chunk_id": "x-3", "name": "Pike"}]
    provenance = artifact["provenance"]
    assert provenance["raw_response"] == raw and provenance["candidate_id"] == "c-rec"
    assert provenance["raw_response_sha256"] == hashlib.sha256(raw.encode()).hexdigest()
    Draft202012Validator(load_json_asset(durable_schema_path("npc-reconciliation"))).validate(artifact)
    avro = fastavro.parse_schema(load_json_asset(durable_avro_schema_path("npc-reconciliation")))
    assert fastavro.validation.validate(artifact, avro, raise_errors=True)


def test_reconciliations_are_decided_after_chunk_registries_and_before_occurrences():
    lines = [occurrence_line("c-o1", "npc", "x-2", "Big G", ev(20, 20)),
             reconciliation_line("c-rec", "npc", entity("Grog", "E1", "E2", aliases=["Big G"]), entity("Pike", "E3")),
             *GROG_REGISTRIES]
    result = run(*lines)
    assert [e["family"] for e in result.evaluations] == [
        "npc-registry", "npc-registry", "npc-registry", "npc-reconciliation", "npc-occurrences"]
    assert all(e["verdict"] == "accepted" for e in result.evaluations)


def test_reconciliation_families_are_registered_source_level_families():
    keys = {key for key, spec in FAMILIES.items() if spec.role == ROLE_RECONCILIATION}
    assert keys == {"npc-reconciliation", "item-reconciliation", "location-reconciliation"}
    assert {FAMILIES[k].chunk_kind for k in keys} == {"source"}
    assert {FAMILIES[k].registry_kind for k in keys} == set(KINDS)


def test_an_entity_with_no_listed_member_gets_one_issue_per_problem():
    entries = npc_context().registry_entries
    found = proposal_issues([ReconciledRecord("Grog", (), "", ("E9", "E9"), (), ())], entries)
    assert [(p.category, p.label or p.entry.label) for p in found] == [
        ("unknown_label", "E9"), ("unassigned_entry", "E1"), ("unassigned_entry", "E2"), ("unassigned_entry", "E3")]


# --- the simulated producer learns the families ------------------------------------------------------

SAMPLE = Path(__file__).resolve().parents[1] / "sample" / "data" / "crd3-sample.transcripts.jsonl.gz"


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    from sample import simulated_producer as sim
    from sample.jsonl import read_jsonl

    out = tmp_path_factory.mktemp("sim-rec")
    rates = ["unknown_label=0.2", "unassigned_entry=0.2", "entry_in_several_entities=0.2", "name_conflict=0.2",
             "blank_name=0.1", "renumbered_source=1", "reversed_endpoints_renumbered=0.5"]
    assert sim.main(["--transcripts", str(SAMPLE), "--candidates-out", str(out / "c.jsonl"),
                     "--truth-out", str(out / "t.jsonl"), "--transcripts-out", str(out / "tr.jsonl"),
                     "--seed", "5", "--sources", "6", "--reconciliations",
                     *[a for r in rates for a in ("--defect-rate", r)]], fingerprints=current_fingerprints) == 0
    candidates = list(read_jsonl(out / "c.jsonl"))
    truth = {t["candidate_id"]: t for t in read_jsonl(out / "t.jsonl") if "candidate_id" in t}
    transcripts = {r["source_id"]: orjson.dumps(r) for r in read_jsonl(out / "tr.jsonl")}
    by_source = defaultdict(list)
    for c in candidates:
        by_source[c["source_id"]].append(orjson.dumps(c))
    results = {s: process_source(s, [transcripts[s]], lines, RunConfig()) for s, lines in by_source.items()}
    return candidates, truth, results


def test_simulated_reconciliations_agree_with_the_job(simulated):
    candidates, truth, results = simulated
    reconciliations = [c for c in candidates if c["family"].endswith("-reconciliation")]
    assert {c["chunk_id"] for c in reconciliations} == {"*"}
    assert {c["family"] for c in reconciliations} == {"npc-reconciliation", "item-reconciliation",
                                                      "location-reconciliation"}
    verdicts = Counter()
    for result in results.values():
        assert not result.dead_letters
        assert not any(key.startswith("invariant_failures/") for key in result.counts)
        for row in result.evaluations:
            t = truth[row["candidate_id"]]
            assert row["verdict"] != "deferred" or not t["family"].endswith("-reconciliation")
            if row["verdict"] == "deferred":
                continue
            # labels, entry order and membership all agree, or this would not hold
            assert (row["verdict"] in ("accepted", "superseded")) == t["expected_pass"], (row, t)
            if t["family"].endswith("-reconciliation"):
                verdicts[row["verdict"]] += 1
                injected = {d["kind"] for d in t["defects"]}
                expected = {"invalid_json"} if "truncated_json" in injected else injected & set(PROPOSAL_CATEGORIES)
                assert expected <= set(codes(row)), (row, t)
    assert verdicts["accepted"] > 5 and verdicts["rejected"] > 5


def test_the_simulated_producer_leaves_reconciliations_out_by_default(tmp_path):
    from sample import simulated_producer as sim
    from sample.jsonl import read_jsonl

    assert sim.main(["--transcripts", str(SAMPLE), "--candidates-out", str(tmp_path / "c.jsonl"),
                     "--truth-out", str(tmp_path / "t.jsonl"), "--candidates", "300"],
                    fingerprints=current_fingerprints) == 0
    assert not any(c["chunk_id"] == "*" for c in read_jsonl(tmp_path / "c.jsonl"))


def test_simulated_clean_proposals_merge_entries_that_share_a_name():
    from sample.sim_reconciliation import Entry, clean_proposal

    entries = [Entry("E1", "x-1", {"name": "Grog", "aliases": [], "description": "a"}),
               Entry("E2", "x-2", {"name": "Pike", "aliases": [], "description": "b"}),
               Entry("E3", "x-3", {"name": "Grog Strongjaw", "aliases": ["grog"], "description": "c"})]
    assert clean_proposal(entries) == [
        {"name": "Grog", "aliases": ["Grog Strongjaw"], "description": "a", "member_labels": ["E1", "E3"]},
        {"name": "Pike", "aliases": [], "description": "b", "member_labels": ["E2"]},
    ]
