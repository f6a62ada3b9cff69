"""The project installs and runs outside the checkout.

What Dataflow workers would install (``--setup_file ./setup.py``) carries the whole job: the source
distribution is built the way Beam's stager does, installed into a fresh virtual environment (not editable,
outside the checkout) with its dependencies, and the job runs from there on the fixture archive.

A wheel (``pip install .``) carries every file of the packages, assets included, and its console script
works from any folder: the wheel goes into a fresh venv without its dependencies, which it borrows from
this test's environment (a path line, so that environment's editable install of the checkout is not
loaded): a full dependency install would take minutes, and the sdist test above already does one.
"""

import os
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
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


PACKAGES = ("domain", "analysis", "transforms", "pipelines", "runners", "assets", "sample")


def tracked_package_files() -> list[str]:
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--", *PACKAGES], capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the files the packages should carry are unknown")
    return [name for name in listed.stdout.splitlines() if (ROOT / name).is_file()]


@pytest.mark.timeout(300)
def test_the_wheel_installs_and_its_console_script_runs_the_job_from_any_folder(tmp_path):
    dist = tmp_path / "dist"
    # Without isolation (setuptools and wheel are in this environment): offline, and the wheel is built from
    # the sdist, in a folder of its own, not from a build/ folder the checkout may hold from an earlier build.
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)], check=True,
                   capture_output=True, timeout=240)
    (wheel,) = dist.glob("notarius_reprocess-*.whl")
    carried = set(zipfile.ZipFile(wheel).namelist())
    missing = [name for name in tracked_package_files() if name not in carried]
    assert not missing, missing  # every module, prompt, schema, catalog and sample file

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True, timeout=240)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    borrowed = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "borrowed_dependencies.pth").write_text("".join(f"{path}\n" for path in sorted(borrowed)))

    elsewhere = tmp_path / "elsewhere"  # not the checkout: nothing may load from the working directory
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    script = venv / "bin" / "notarius-reprocess"

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(script), *argv], cwd=elsewhere, env=env, capture_output=True, text=True,
                              timeout=600)

    where = subprocess.run([str(python), "-c", "import importlib, importlib.metadata as m; "
                            f"print(*[importlib.import_module(p).__file__ for p in {PACKAGES!r}], sep='\\n'); "
                            "print(m.distribution('notarius-reprocess').locate_file(''))"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert len(where) == len(PACKAGES) + 1
    assert all(path.startswith(site) for path in where), where  # the installed copy, never the checkout

    version = run("--version")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith(f"notarius-reprocess {project} (Apache Beam ")

    shown = run("--help")
    assert shown.returncode == 0, shown.stderr
    for name in ("verify", "compare", "export-batch", "import-batch", "--transcripts"):
        assert name in shown.stdout

    archive = write_archive(tmp_path / "archive")
    out = tmp_path / "out"
    job = run("--transcripts", archive["transcripts"], "--candidates", archive["candidates"], "--output", str(out),
              "--output-format", "jsonl")
    assert job.returncode == 0, job.stderr[-3000:]
    verified = run("verify", str(out))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["conservation"]["holds"]
    assert manifest["conservation"]["candidates_in"] == archive["candidates_in"]
