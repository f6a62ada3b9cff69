"""The optional prior-registry input: earlier canonical registry artifacts feed membership."""

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.assets import current_fingerprints
from domain.registry_artifacts import RegistryArtifactError, chunk_registry_records
from domain.reprocess import process_source

SOURCE = "src-p"
TRANSCRIPT = orjson.dumps({
    "source_id": SOURCE,
    "units": [{"unit_id": u, "speaker": "MATT", "text": ""} for u in (5, 4, 3)],
    "chunks": [{"chunk_id": "x-1", "kind": "extraction", "unit_ids": [5, 4, 3]}],
})


def occurrence(cid, name):
    prompt_fp, schema_fp = current_fingerprints("npc-occurrences")
    raw = {"occurrences": [{"npc_name": name, "kind": "mentioned", "evidence": [{"start_unit_id": 5, "end_unit_id": 4}]}]}
    return orjson.dumps({"candidate_id": cid, "family": "npc-occurrences", "source_id": SOURCE, "chunk_id": "x-1",
                         "attempt": 1, "producer": {"provider": "p", "model": "m"}, "prompt_fingerprint": prompt_fp,
                         "schema_fingerprint": schema_fp, "raw_response": orjson.dumps(raw).decode(),
                         "received_at": "2026-01-01T00:00:00Z"})


def prior(family="npc-registry", names=(("Vex'ahlia", ["Vex"]),), source=SOURCE):
    return orjson.dumps({"family": family, "source_id": source, "records": [
        {"name": n, "aliases": a, "description": "", "evidence": []} for n, a in names]})


def verdicts(result):
    return {row["candidate_id"]: row["verdict"] for row in result.evaluations}


def test_without_any_registry_occurrences_are_deferred():
    result = process_source(SOURCE, [TRANSCRIPT], [occurrence("c1", "Vex")])
    assert verdicts(result) == {"c1": "deferred"}


def test_prior_registry_makes_membership_checkable():
    result = process_source(SOURCE, [TRANSCRIPT], [occurrence("c1", " vex "), occurrence("c2", "Scanlan")],
                            prior_registry_lines=[prior()])
    assert verdicts(result) == {"c1": "accepted", "c2": "rejected"}
    assert result.counts["prior_registries_valid"] == 1


def test_bad_prior_registries_are_dead_letters_with_reasons():
    lines = [b"{not json", prior(family="spells"), prior(source="elsewhere"), b'{"family": "npc-registry", "source_id": "src-p", "records": [{"name": 5}]}']
    result = process_source(SOURCE, [TRANSCRIPT], [], prior_registry_lines=lines)
    reasons = [d["reason"] for d in result.dead_letters]
    assert len(reasons) == 4 and all(d["input"] == "prior_registries" for d in result.dead_letters)
    assert any("not valid JSON" in r for r in reasons) and any("not a registry" in r for r in reasons)
    assert result.counts["dead_letters/prior_registries"] == 4


def test_the_job_reads_prior_registries(tmp_path):
    from output_reader import read_outputs
    from pipelines import reprocess

    (tmp_path / "t.jsonl").write_bytes(TRANSCRIPT + b"\n")
    (tmp_path / "c.jsonl").write_bytes(occurrence("c1", "Vex") + b"\n")
    (tmp_path / "prior.jsonl").write_bytes(prior() + b"\n" + b"{broken\n")
    argv = ["--transcripts", str(tmp_path / "t.jsonl"), "--candidates", str(tmp_path / "c.jsonl"),
            "--prior-registries", str(tmp_path / "prior.jsonl"), "--output", str(tmp_path / "out"),
            "--output-format", "jsonl"]
    assert reprocess.main(argv) == 0
    manifest = orjson.loads((tmp_path / "out" / "manifest.json").read_bytes())
    assert manifest["prior_registry_conservation"] == {"prior_registries_in": 2, "valid": 1, "dead_letters": 1,
                                                       "holds": True}
    outputs = read_outputs(tmp_path / "out")
    assert [e["verdict"] for e in outputs["evaluations"]] == ["accepted"]
    assert [d["input"] for d in outputs["dead_letters"]] == ["prior_registries"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=6) | st.sampled_from(["npc-registry", SOURCE, "x-1"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10)
registry_fields = st.sampled_from(["family", "source_id", "chunk_id", "records", "name", "aliases", "description",
                                   "evidence", "start_unit_id"])
# Artifact-shaped lines whose every field may hold any JSON value (a family that is a list, aliases that are a number).
artifact_like = st.recursive(
    json_values,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(registry_fields, inner, max_size=5),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(artifact_like, min_size=1, max_size=4))
def test_any_json_line_as_a_registry_artifact_is_read_or_refused_never_a_crash(values):
    lines = [orjson.dumps(value) for value in values]
    result = process_source(SOURCE, [TRANSCRIPT], [], prior_registry_lines=lines)
    valid = result.counts.get("prior_registries_valid", 0)
    assert valid + result.counts.get("dead_letters/prior_registries", 0) == len(lines)
    for line in lines:  # export-batch's reader of the same files
        try:
            chunk_registry_records(SOURCE, line)
        except RegistryArtifactError:
            pass


def test_registry_artifacts_with_unhashable_family_or_numeric_aliases_are_dead_letters():
    lines = [b'{"family": [1], "source_id": "src-p", "records": []}',
             b'{"family": "npc-registry", "source_id": "src-p", "records": [{"name": "Vex", "aliases": 7}]}']
    result = process_source(SOURCE, [TRANSCRIPT], [], prior_registry_lines=lines)
    assert [d["reason"] for d in result.dead_letters] == [
        "prior artifact of family [1] is not a registry", "prior registry record aliases must be a list of strings"]


def test_the_registry_view_follows_each_accepted_registry():
    """Occurrence slots share one view of a kind's names until that kind's registry changes
    (role order accepts registries first; the view must not outlive a change in any order)."""
    from collections import Counter

    from domain.families import FAMILIES
    from domain.reprocess import RunConfig, _SourceRun
    from domain.source import parse_transcript

    decider = _SourceRun(parse_transcript(TRANSCRIPT), RunConfig(), Counter(), {"npc": frozenset({"vex"})})
    occurrences, registry = FAMILIES["npc-occurrences"], FAMILIES["npc-registry"]
    first = decider._context(occurrences, "x-1").registry
    assert first.knows("Vex") and not first.knows("Scanlan")
    assert decider._context(occurrences, "x-1").registry is first  # built once
    record = type("Record", (), {"name": "Scanlan", "aliases": ("Scanlan Shorthalt",)})()
    decider._remember_registry(registry, "x-1", (record,))
    after = decider._context(occurrences, "x-1").registry
    assert after.knows("Vex") and after.knows("scanlan shorthalt")
