"""The project as its compiled wheel installs it, built once per state of the sources.

    python -m bench.compiled                 # builds it if needed; prints its folder
    python -m bench.compiled pytest ARGS     # pytest, with every import of the project from it

The wheel is what ``NOTARIUS_COMPILE=1 pip wheel .`` builds (setup.py: the hot
domain modules compiled by Cython, the rest as it is), installed without its
dependencies (they are this environment's) into ``out/compiled/<key>/``. The
key is a digest of every file the wheel is built from and of the interpreter,
so an edit is never measured or tested against an old build; older
builds are removed.

A process runs on it with :func:`environment`: ``PYTHONPATH`` puts the folder
first, and ``PYTHONSAFEPATH`` keeps the working directory off ``sys.path`` -
otherwise a process started in the checkout imports the checkout's pure
``domain`` first. Both are inherited by the processes a job starts (Beam's
multi-processing workers).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOT = REPO / "out" / "compiled"
# What the wheel is built from (pyproject.toml's packages, and the two build files).
SOURCES = ("domain", "transforms", "pipelines", "assets", "sample", "setup.py", "pyproject.toml")
# A module setup.py compiles: how a process shows which form of the domain it imported.
PROBE_MODULE = "domain.evidence"


def source_files(repo: Path = REPO) -> list[Path]:
    files: list[Path] = []
    for name in SOURCES:
        path = repo / name
        if path.is_file():
            files.append(path)
        else:
            files.extend(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return sorted(files)


def build_key(repo: Path = REPO) -> str:
    """A digest of what the build depends on: the files and the interpreter."""
    digest = hashlib.sha256()
    digest.update(f"{sys.executable} {platform.python_version()} {platform.machine()}\n".encode())
    for path in source_files(repo):
        digest.update(str(path.relative_to(repo)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def ensure_built(log=print) -> Path:
    """The folder of the current build, built first if there is none."""
    key = build_key()
    folder = ROOT / key
    if (folder / ".complete").exists():
        return folder
    log(f"building the compiled wheel for {key} (NOTARIUS_COMPILE=1, Cython; about a minute) ...")
    ROOT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT) as scratch:
        wheels, target = Path(scratch) / "wheels", Path(scratch) / "install"
        env = {**os.environ, "NOTARIUS_COMPILE": "1"}
        _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), str(REPO)],
             env)
        (wheel,) = wheels.glob("notarius_reprocess-*.whl")
        _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)], env)
        for old in ROOT.iterdir():
            if old.is_dir() and old.name != Path(scratch).name:
                shutil.rmtree(old, ignore_errors=True)
        target.rename(folder)
    probe = subprocess.run([sys.executable, "-c", f"import {PROBE_MODULE} as m; print(m.__file__)"],
                           env=environment(folder), cwd=REPO, capture_output=True, text=True, check=True)
    if not is_compiled_file(probe.stdout.strip()):
        raise SystemExit(f"the compiled build at {folder} imports {PROBE_MODULE} from {probe.stdout.strip()}")
    (folder / ".complete").write_text(key + "\n")
    return folder


def _run(cmd: list[str], env: dict) -> None:
    proc = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def environment(folder: Path, base: dict | None = None) -> dict[str, str]:
    """The environment of a process that imports the project from ``folder``; the checkout
    stays on the path after it, for what the wheel does not hold (``bench``)."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(REPO)])
    env["PYTHONSAFEPATH"] = "1"
    return env


def is_compiled_file(path: str) -> bool:
    return path.endswith((".so", ".pyd"))


def main(argv: list[str]) -> int:
    folder = ensure_built(log=lambda message: print(message, file=sys.stderr))
    if not argv:
        print(folder)
        return 0
    if argv[0] != "pytest":
        raise SystemExit("usage: python -m bench.compiled [pytest ARGS]")
    env = environment(folder)
    env["NOTARIUS_EXPECT_COMPILED"] = "1"  # tests/conftest.py refuses to run on the pure domain then
    return subprocess.run([sys.executable, "-m", "pytest", *argv[1:]], env=env, cwd=REPO).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
