"""The compiled build's bookkeeping (bench.compiled): when it is rebuilt, and how a process uses it.

The compiled code itself is tested by running the domain's tests on it (`make test`'s second run).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import domain.evidence
from bench import compiled

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def sources(tmp_path):
    """A copy of what the wheel is built from."""
    for name in compiled.SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, tmp_path / name)
    return tmp_path


def test_the_key_follows_every_source_file_and_nothing_else(sources):
    key = compiled.build_key(sources)
    assert compiled.build_key(sources) == key
    cache = sources / "domain" / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "evidence.cpython-311.pyc").write_bytes(b"stale bytecode")
    (sources / "notes.txt").write_text("not part of the wheel")
    assert compiled.build_key(sources) == key

    for edited in ("domain/evidence.py", "transforms/read.py", "setup.py"):
        path = sources / edited
        original = path.read_bytes()
        path.write_bytes(original + b"\n# an edit\n")
        assert compiled.build_key(sources) != key, edited
        path.write_bytes(original)
    assert compiled.build_key(sources) == key

    added = sources / "assets" / "new.json"
    added.write_text("{}")
    assert compiled.build_key(sources) != key
    added.unlink()
    (sources / "domain" / "evidence.py").rename(sources / "domain" / "evidence2.py")  # a rename is a change
    assert compiled.build_key(sources) != key


def test_a_process_on_the_build_imports_it_before_the_checkout(tmp_path):
    fake = tmp_path / "build"
    (fake / "domain").mkdir(parents=True)
    (fake / "domain" / "__init__.py").write_text("WHERE = 'build'\n")
    env = compiled.environment(fake, base={**os.environ, "PYTHONPATH": "/elsewhere"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(fake), str(compiled.REPO)]
    # Started in the checkout, as the bench and Beam's workers are: without PYTHONSAFEPATH,
    # the working directory would come first and the checkout's pure domain with it.
    probe = "import domain, bench; print(getattr(domain, 'WHERE', 'checkout'), bench.__file__)"
    found = subprocess.run([sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    assert found[0] == "build"
    assert found[1].startswith(str(ROOT / "bench"))  # what the wheel does not hold still comes from the checkout
    unsafe = {**env, "PYTHONSAFEPATH": ""}
    assert subprocess.run([sys.executable, "-c", probe], env=unsafe, cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split()[0] == "checkout"


def test_a_run_meant_for_the_compiled_domain_refuses_the_pure_one():
    env = {**os.environ, "NOTARIUS_EXPECT_COMPILED": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_issues.py"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    if compiled.is_compiled_file(domain.evidence.__file__):  # this run is itself on the compiled build
        assert proc.returncode == 0, proc.stdout[-2000:]
    else:
        assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]  # pytest's usage error
        assert "is not compiled" in proc.stderr
