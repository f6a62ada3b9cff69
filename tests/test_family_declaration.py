"""A family's declaration is the one place: adding a family is its module, its assets and its simulator builder
(docs/internal/dnd.md, "How to add a family").

A toy family (tests/fixtures/toy_family/: declaration, prompt and LLM schema, simulator builder), registered
from a temporary package, flows through the schema generator, the data dictionary, the simulator and the job
with no other change; and the simulator refuses to run while a declared family has no builder.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import jsonschema
import orjson
import pytest

from domain.families import FAMILIES
from sample import simulated_producer
from sample.sim_defects import FAMILIES as SIMULATED
from sample.sim_records import missing_builders

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "tests" / "fixtures" / "toy_family"
KEY = "toy-speakers"
PASSING = {"accepted", "superseded"}

# Run in a process of its own, the toy family registered before anything reads the registry: what listing its
# module in domain/families/__init__.py's _MODULES does. The assets package is a copy holding the toy's assets.
DRIVER = textwrap.dedent("""
    import json, sys
    from pathlib import Path

    from domain.families import FAMILIES
    import toy_speakers.family as toy

    FAMILIES[toy.KEY] = toy.SPEC
    import toy_speakers.simulator  # noqa: F401 - its builder registers itself (@simulates)

    out = Path(sys.argv[1])
    from domain import schemagen
    assert schemagen.main([]) == 0
    from docgen import data_dictionary
    (out / "outputs.md").write_text(data_dictionary.render(), encoding="utf-8")
    (out / "problems.json").write_text(json.dumps(data_dictionary.problems()), encoding="utf-8")
    from sample import simulated_producer
    archive = out / "archive"
    assert simulated_producer.main([
        "--transcripts", sys.argv[2], "--sources", "1", "--candidates", "700", "--seed", "3",
        "--transcripts-out", str(archive / "transcripts.jsonl"), "--candidates-out", str(archive / "candidates.jsonl"),
        "--truth-out", str(archive / "truth.jsonl")]) == 0
    from pipelines import reprocess
    sys.exit(reprocess.main(["--transcripts", str(archive / "transcripts.jsonl"), "--candidates",
                             str(archive / "candidates.jsonl"), "--output", str(out / "run"),
                             "--output-format", "jsonl"]))
""")


def jsonl(folder: Path) -> list[dict]:
    return [orjson.loads(line) for path in sorted(folder.glob("part-*")) for line in path.read_bytes().splitlines()
            if line.strip()]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """The toy family's package and a copy of the assets package with its assets, then one process that
    generates the schemas, renders the data dictionary, simulates an archive and runs the job on it."""
    packages, out = tmp_path_factory.mktemp("packages"), tmp_path_factory.mktemp("toy")
    shutil.copytree(ROOT / "assets", packages / "assets", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(TOY / "assets", packages / "assets", dirs_exist_ok=True)
    shutil.copytree(TOY / "toy_speakers", packages / "toy_speakers")
    (packages / "driver.py").write_text(DRIVER, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(packages / "driver.py"), str(out),
                           str(ROOT / "sample" / "data" / "crd3-sample.transcripts.jsonl.gz")],
                          cwd=packages, capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": f"{packages}:{ROOT}", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return packages, out


def test_the_schema_generator_writes_the_toys_durable_schemas(toy_run):
    packages, _ = toy_run
    schemas = packages / "assets" / "dnd" / KEY / "schemas"
    assert sorted(p.name for p in schemas.iterdir()) == [
        "dnd_toy_speakers.v1.arrow.json", "dnd_toy_speakers.v1.avsc", "dnd_toy_speakers.v1.json",
        "dnd_toy_speakers_llm.v1.json"]
    durable = orjson.loads((schemas / "dnd_toy_speakers.v1.json").read_bytes())
    record = durable["properties"]["records"]["items"]
    assert record["required"] == ["speaker_name", "evidence"]
    assert "source_id" in record["properties"]["evidence"]["items"]["properties"]


def test_the_data_dictionary_documents_the_toy_from_its_declaration(toy_run):
    _, out = toy_run
    assert orjson.loads((out / "problems.json").read_bytes()) == []
    text = (out / "outputs.md").read_text(encoding="utf-8")
    section = text.split(f"### {KEY}\n", 1)[1].split("\n### ", 1)[0]
    assert section.startswith("\nOne record is one person who speaks in the chunk.\n")
    assert "| `records[].speaker_name` | string / string | no |  | Who speaks, as the transcript names them. |" \
        in section
    assert '{"speaker_name": "MATT", "evidence": [{"source_id": "crd3:C1E001"' in section
    assert f"[{KEY}](#{KEY})" in text  # listed with the others


def test_the_simulator_produces_the_toy_and_the_job_decides_it_as_its_truth_says(toy_run):
    packages, out = toy_run
    candidates = [c for c in jsonl_file(out / "archive" / "candidates.jsonl") if c["family"] == KEY]
    attempts = Counter(c["attempt"] for c in candidates)
    assert attempts[1] >= 10 and attempts[2] >= 1, attempts
    truth = {t["candidate_id"]: t for t in jsonl_file(out / "archive" / "truth.jsonl") if t.get("family") == KEY}
    assert set(truth) == {c["candidate_id"] for c in candidates}

    manifest = orjson.loads((out / "run" / "manifest.json").read_bytes())
    assert manifest["conservation"]["holds"] and manifest["outcomes"][KEY]["accepted"] >= 1
    evaluations = [e for e in jsonl(out / "run" / "evaluations") if e["family"] == KEY]
    assert {e["candidate_id"] for e in evaluations} == set(truth)
    for evaluation in evaluations:  # the job passes exactly what the simulator meant to pass
        assert (evaluation["verdict"] in PASSING) == truth[evaluation["candidate_id"]]["expected_pass"], evaluation
    assert any(e["verdict"] == "rejected" for e in evaluations)
    artifacts = jsonl(out / "run" / "artifacts" / KEY)
    assert len(artifacts) == manifest["outcomes"][KEY]["accepted"]
    validator = jsonschema.Draft202012Validator(
        orjson.loads((packages / "assets" / "dnd" / KEY / "schemas" / "dnd_toy_speakers.v1.json").read_bytes()))
    for artifact in artifacts:
        validator.validate(artifact)
    assert {r["family"] for r in jsonl(out / "run" / "retry_requests")} >= {KEY}


def jsonl_file(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


# --- the simulator knows every declared family ------------------------------------------------------

def test_the_simulator_has_a_builder_for_every_declared_family():
    assert missing_builders() == []
    assert set(SIMULATED) == {key for key, spec in FAMILIES.items() if spec.chunk_kind != "source"}


@pytest.fixture
def toy_without_builder(monkeypatch):
    monkeypatch.syspath_prepend(str(TOY))
    from toy_speakers.family import SPEC

    monkeypatch.setitem(FAMILIES, KEY, SPEC)
    return SPEC


def test_a_declared_family_without_a_builder_is_named_and_the_simulator_refuses_to_run(toy_without_builder,
                                                                                       tmp_path):
    assert missing_builders() == [f"{KEY} (no builder: register one with @sample.sim_records.simulates)"]
    with pytest.raises(SystemExit) as refused:
        simulated_producer.main(["--transcripts", str(ROOT / "sample" / "data" / "crd3-sample.transcripts.jsonl.gz"),
                                 "--candidates-out", str(tmp_path / "c.jsonl"), "--truth-out", str(tmp_path / "t")])
    assert str(refused.value.code).startswith(f"the simulator cannot produce every declared family: {KEY} (")
    assert not (tmp_path / "c.jsonl").exists()
