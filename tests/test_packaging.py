"""What Dataflow workers would install (``--setup_file ./setup.py``) carries the whole job.

Builds the source distribution the way Beam's stager does, installs it into a
fresh virtual environment (not editable, outside the checkout), and runs the
job from there on the fixture archive.
"""

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import orjson
import pytest

from fixture_archive import write_archive

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(900)
def test_sdist_installs_and_runs_the_job_outside_the_checkout(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir", str(dist), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    (sdist,) = dist.glob("notarius_reprocess-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    for needed in ("assets/dnd/shared/prompts/common-dnd-extraction-evidence.md",
                   "assets/dnd/spells/catalog/srd-5.1-spells.json",
                   "assets/dnd/combat-turns/schemas/dnd_combat_turns.v1.avsc",
                   "assets/outputs/evaluation.v1.avsc", "setup.py", "pyproject.toml"):
        assert any(name.endswith(needed) for name in names), needed

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(sdist)], check=True, capture_output=True,
                   timeout=600)

    archive = write_archive(tmp_path / "archive")
    out = tmp_path / "out"
    workdir = tmp_path / "elsewhere"  # not the checkout: nothing may load from the working directory
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [str(python), "-m", "pipelines.reprocess", "--transcripts", archive["transcripts"], "--candidates",
         archive["candidates"], "--output", str(out), "--output-format", "jsonl"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    location = subprocess.run([str(python), "-c", "import domain; print(domain.__file__)"], cwd=workdir, env=env,
                              capture_output=True, text=True, check=True).stdout
    assert str(venv) in location  # the installed copy ran, not the checkout
    # The job does not import analysis/ (the report, compare and the retry economy do): installed too.
    imported = "import analysis.compare, analysis.run_summary; print(analysis.__file__)"
    analysis = subprocess.run([str(python), "-c", imported], cwd=workdir, env=env, capture_output=True, text=True,
                              check=True).stdout
    assert str(venv) in analysis
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["conservation"]["holds"]
    assert manifest["conservation"]["candidates_in"] == archive["candidates_in"]
