"""The job end to end on the fixture archive: outcomes, dead letters, conservation, contracts."""

import hashlib
import subprocess
import sys

import pytest
from jsonschema import Draft202012Validator

from domain.assets import durable_schema_path, load_json_asset
from output_reader import canonical
from pipelines import reprocess
from pipelines.options import OptionsError
from fixture_archive import EXPECTED_DEAD_LETTER_REASONS, EXPECTED_OUTCOMES, run_job, write_archive

OUTPUT_JSON_SCHEMAS = {
    "retry_requests": "outputs/retry_request.v1.json",
    "evaluations": "outputs/evaluation.v1.json",
    "dead_letters": "outputs/dead_letter.v1.json",
}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return write_archive(tmp_path_factory.mktemp("archive"))


@pytest.fixture(scope="module", params=["avro", "jsonl", "parquet"])
def job(request, archive, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"out-{request.param}")
    manifest, outputs = run_job(archive, out, "--output-format", request.param)
    return request.param, out, manifest, outputs


def test_conservation_holds_and_counts_match(job, archive):
    _, _, manifest, outputs = job
    c = manifest["conservation"]
    assert c["holds"] and manifest["transcript_conservation"]["holds"]
    assert c["candidates_in"] == archive["candidates_in"]
    assert c["evaluations"] == len(outputs["evaluations"])
    candidate_dead = [d for d in outputs["dead_letters"] if d["input"] == "candidates"]
    assert c["dead_letters"] == len(candidate_dead)
    assert manifest["inputs"]["transcripts"] == archive["transcripts_in"]


def test_every_outcome(job):
    _, _, manifest, outputs = job
    for family, expected in EXPECTED_OUTCOMES.items():
        assert manifest["outcomes"][family] == expected, family
    assert len(outputs["retry_requests"]) == sum(e["retry"] for e in EXPECTED_OUTCOMES.values())
    artifacts = sum(len(rows) for name, rows in outputs.items() if name.startswith("artifacts/"))
    assert artifacts == sum(e["accepted"] for e in EXPECTED_OUTCOMES.values())


def test_every_dead_letter_reason_with_original_bytes(job):
    _, _, _, outputs = job
    reasons = [d["reason"] for d in outputs["dead_letters"]]
    for fragment in EXPECTED_DEAD_LETTER_REASONS:
        assert any(fragment in r for r in reasons), (fragment, reasons)
    garbage = [d for d in outputs["dead_letters"] if d["payload"] == "this is not json"]
    assert len(garbage) == 1
    odd = [d for d in outputs["dead_letters"] if d["payload_encoding"] == "base64"]
    assert odd and b"\xff\xfe" in __import__("base64").b64decode(odd[0]["payload"])


def test_raw_responses_are_kept_byte_for_byte(job, archive):
    _, _, _, outputs = job
    raw_by_id = {r["candidate_id"]: r["raw_response"] for r in archive["good"]}
    artifacts = [a for name, rows in outputs.items() if name.startswith("artifacts/") for a in rows]
    assert artifacts
    for artifact in artifacts:
        prov = artifact["provenance"]
        assert prov["raw_response"] == raw_by_id[prov["candidate_id"]]
        assert prov["raw_response_sha256"] == hashlib.sha256(prov["raw_response"].encode()).hexdigest()


def test_reversed_endpoints_recovered_without_retry(job):
    _, _, _, outputs = job
    spells = {a["chunk_id"]: a for a in outputs["artifacts/spells"]}
    evidence = spells["x-1"]["records"][0]["evidence"][0]
    assert (evidence["start_unit_id"], evidence["end_unit_id"]) == (10, 7)  # document order, not id order
    assert spells["x-1"]["provenance"]["attempt"] == 1


def test_outputs_validate_against_their_schemas(job):
    _, _, _, outputs = job
    for name, rows in outputs.items():
        if name.startswith("artifacts/"):
            schema = load_json_asset(durable_schema_path(name.split("/", 1)[1]))
        else:
            schema = load_json_asset(OUTPUT_JSON_SCHEMAS[name])
        validator = Draft202012Validator(schema)
        for row in rows:
            errors = list(validator.iter_errors(row))
            assert not errors, (name, errors[0].message)


def test_retry_requests_are_model_safe(job):
    _, _, _, outputs = job
    for request in outputs["retry_requests"]:
        text = request["correction_guidance"]
        for token in (request["candidate_id"], request["source_id"], "sha256", "reason_code", "x-3", "/spells/"):
            assert token not in text
        assert "units" in text or "unit " in text


def test_formats_agree(archive, tmp_path):
    _, a = run_job(archive, tmp_path / "a", "--output-format", "avro")
    _, j = run_job(archive, tmp_path / "j", "--output-format", "jsonl")
    _, pq = run_job(archive, tmp_path / "p", "--output-format", "parquet")
    assert a.keys() == j.keys() == pq.keys()
    for name in a:
        assert canonical(a[name]) == canonical(j[name]) == canonical(pq[name]), name


def test_families_filter_counts_the_rest_as_filtered(archive, tmp_path):
    manifest, outputs = run_job(archive, tmp_path / "f", "--families", "spells", "--output-format", "jsonl")
    c = manifest["conservation"]
    assert c["holds"] and c["filtered"] > 0
    assert {e["family"] for e in outputs["evaluations"]} == {"spells"}


def test_console_script_prints_summary(archive, tmp_path):
    out = tmp_path / "cli"
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.reprocess", "--transcripts", archive["transcripts"], "--candidates",
         archive["candidates"], "--output", str(out), "--output-format", "jsonl"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "conservation" in proc.stdout and "holds" in proc.stdout and "spells" in proc.stdout


def test_no_match_is_a_clear_error(tmp_path):
    with pytest.raises(OptionsError, match="matches no files"):
        reprocess.run(["--transcripts", str(tmp_path / "none-*"), "--candidates", str(tmp_path / "x"),
                       "--output", str(tmp_path / "o")])


def test_the_dead_letter_examples_of_docs_outputs_md_are_rows_of_this_run(job):
    """The demo writes no dead letter: docs/outputs.md shows two of this archive's (and says so)."""
    from docgen.output_prose import DEAD_LETTERS

    _, _, _, outputs = job
    assert "tests/fixture_archive.py" in DEAD_LETTERS.origin
    for row in (DEAD_LETTERS.example, *DEAD_LETTERS.more_examples):
        assert row in outputs["dead_letters"], row
