"""The Makefile: ``make help`` lists every target, and ``.venv`` follows the interpreter PYTHON names.

Dry runs (``make -n``) and a refusal that stops before any install: nothing here creates a real environment.
A venv made by another interpreter is a fake one whose ``bin/python`` answers the Makefile's question
("version real-path") as Python 3.10 would.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAKEFILE = (ROOT / "Makefile").read_text()

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def make(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    return subprocess.run(["make", "--no-print-directory", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def declared_targets() -> list[str]:
    """The rules a user runs: lower-case names at the start of a line, not variables (`x := ...`)."""
    return re.findall(r"^([a-z][a-z0-9-]*):(?!=)", MAKEFILE, re.M)


def test_make_help_lists_every_target_with_its_comment():
    targets = declared_targets()
    assert {"demo", "test", "install", "clean", "flink-down", "peers-env", "help"} <= set(targets)
    done = make("-s", "help")
    assert done.returncode == 0, done.stderr
    listed = dict(re.findall(r"^  (\S+)\s+(\S.*)$", done.stdout, re.M))
    for target in targets:
        assert listed.get(target, "").strip(), f"make help does not explain {target}"
        assert "$(" not in listed[target]  # what a user reads, not a variable's name


def test_the_readme_commands_are_unchanged():
    assert "\tsh scripts/ensure_chromium.sh\n" in MAKEFILE
    assert "\t$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile\n" in MAKEFILE
    # ... which needs pytest-xdist on a fresh machine: a declared test dependency, installed by `make test`.
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(re.match(r"pytest-xdist\b", requirement) for requirement in extras)
    assert "\t$(BIN)/python -m pipelines.demo --output out/demo\n" in MAKEFILE
    assert re.search(r"^demo: \$\(STAMP\) ", MAKEFILE, re.M) and re.search(r"^test: \$\(STAMP\) ", MAKEFILE, re.M)


def test_the_minimum_python_is_pyprojects():
    required = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    (minimum,) = re.findall(r"^MIN_PYTHON := (\S+)$", MAKEFILE, re.M)
    assert required == f">={minimum}"


def fake_python(path: Path, identity: str, runs: bool = True) -> Path:
    """A `python` that reports ``identity`` to the Makefile's question, and fails (or passes) anything else."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nif [ "$1" = "-I" ]; then echo "{identity}"; exit 0; fi\nexit {0 if runs else 1}\n')
    path.chmod(0o755)
    return path


def installed_stamp(venv: Path) -> None:
    stamp = venv / ".installed-stamp"
    stamp.touch()
    newer = max((ROOT / "pyproject.toml").stat().st_mtime, (ROOT / "setup.py").stat().st_mtime) + 60
    os.utime(stamp, (newer, newer))  # up to date by its age: only the interpreter can make it stale


def test_a_venv_made_by_another_python_is_made_again(tmp_path):
    venv = tmp_path / "venv"
    fake_python(venv / "bin" / "python", "3.10.13 /opt/python3.10/bin/python3.10")
    installed_stamp(venv)
    done = make("-n", "install", f"VENV={venv}", f"PYTHON={sys.executable}")
    assert done.returncode == 0, done.stderr
    assert f"-m venv --clear {venv}" in done.stdout
    assert f"{venv} runs Python 3.10.13 (/opt/python3.10/bin/python3.10), not PYTHON={sys.executable}" in done.stdout
    assert f"{venv}/bin/python -m pip install" in done.stdout


def test_a_venv_of_the_python_asked_for_is_left_alone(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    installed_stamp(venv)
    done = make("-n", "install", f"VENV={venv}", f"PYTHON={sys.executable}")
    assert done.returncode == 0, done.stderr
    assert "Nothing to be done" in done.stdout and "venv" not in done.stdout.replace(str(venv), "")


def test_a_python_too_old_is_refused_in_one_line_before_the_venv_is_touched(tmp_path):
    venv = tmp_path / "venv"
    fake_python(venv / "bin" / "python", f"{sys.version.split()[0]} {os.path.realpath(sys.executable)}")
    (venv / "kept").write_text("the earlier venv")
    old = fake_python(tmp_path / "old" / "python3.10", "3.10.13 /opt/python3.10/bin/python3.10", runs=False)
    done = make("install", f"VENV={venv}", f"PYTHON={old}")
    assert done.returncode != 0
    ours = [line for line in done.stderr.splitlines() if not line.startswith("make: ***")]
    assert ours == [f"make: PYTHON={old} is Python 3.10.13; the project needs Python 3.11 or newer: "
                    f"make install PYTHON=python3.11"]
    assert (venv / "kept").read_text() == "the earlier venv" and not (venv / ".installed-stamp").exists()
