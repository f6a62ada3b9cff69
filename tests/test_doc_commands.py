"""Every documented shell command runs as copied (issue 33).

Each fenced ``sh``/``bash`` block of README.md and docs/*.md runs, in document order and in one shell per
document (as a reader types them), in a checkout that holds a finished demo (``out/demo/``, what
``make demo`` writes) and the project's ``.venv``, with
nothing substituted: the docs use the demo's own paths. A block that cannot run here (a provider's
network, a benchmark of many minutes, the README's two commands themselves) says so in an HTML
comment right above its fence: ``<!-- not run by tests: why -->``; the test lists those by name with
their reason and fails on a marker without one. docs/querying.md has its own test
(tests/test_querying.py), which runs its blocks against a Parquet run.
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# In the order a reader meets them; later documents may read what earlier ones wrote.
DOCUMENTS = ("README.md", "docs/batch.md", "docs/revising-a-prompt.md", "docs/judges.md", "docs/running.md",
             "docs/benchmarks.md")
OWN_TEST = {"docs/querying.md": "tests/test_querying.py runs every block against a Parquet run of the demo"}
NOT_RUN = re.compile(r"^<!--\s*not run by tests:\s*(?P<reason>.*?)\s*-->\s*$")
FENCE = re.compile(r"^```(?P<lang>[A-Za-z]*)\s*$")
SHELLS = ("sh", "bash", "shell")


@dataclass(frozen=True)
class Block:
    document: str
    line: int  # of the opening fence
    text: str
    not_run: str | None  # the reason, when marked

    @property
    def name(self) -> str:
        return f"{self.document}:{self.line}"


def shell_blocks(document: str) -> list[Block]:
    lines = (ROOT / document).read_text(encoding="utf-8").splitlines()
    blocks, n = [], 0
    while n < len(lines):
        fence = FENCE.match(lines[n])
        if not fence:
            n += 1
            continue
        end = next(m for m in range(n + 1, len(lines)) if lines[m].startswith("```"))
        if fence["lang"] in SHELLS:
            above = next((lines[m] for m in range(n - 1, -1, -1) if lines[m].strip()), "")
            marker = NOT_RUN.match(above.strip())
            blocks.append(Block(document, n + 1, "\n".join(lines[n + 1:end]), marker["reason"] if marker else None))
        n = end + 1
    return blocks


def all_blocks() -> list[Block]:
    return [block for document in DOCUMENTS for block in shell_blocks(document)]


def test_every_document_with_shell_blocks_is_covered():
    documented = {str(p.relative_to(ROOT)) for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
                  if shell_blocks(str(p.relative_to(ROOT)))}
    assert documented <= set(DOCUMENTS) | set(OWN_TEST), documented - set(DOCUMENTS) - set(OWN_TEST)


def test_a_block_not_run_says_why():
    for block in all_blocks():
        if block.not_run is not None:
            assert len(block.not_run) > 10, f"{block.name}: say why it is not run"
    print("\n".join(f"not run: {b.name}: {b.not_run}" for b in all_blocks() if b.not_run is not None))


def test_the_parser_finds_blocks_and_markers(tmp_path, monkeypatch):
    doc = tmp_path / "d.md"
    doc.write_text("text\n\n<!-- not run by tests: needs the network -->\n```sh\nexit 1\n```\n\n```sh\necho hi\n```\n"
                   "```python\nprint(1)\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert shell_blocks("d.md") == [Block("d.md", 4, "exit 1", "needs the network"), Block("d.md", 8, "echo hi", None)]


@pytest.fixture(scope="module")
def finished_demo(tmp_path_factory):
    """``out/demo`` as ``make demo`` leaves it (a smaller archive: the same steps)."""
    from pipelines import demo

    root = tmp_path_factory.mktemp("demo")
    with contextlib.redirect_stdout(io.StringIO()):
        status = demo.main(["--output", str(root / "demo"), "--candidates", "300"])
    assert status == 0
    return root / "demo"


def checkout_after_make_demo(finished_demo: Path, where: Path) -> Path:
    """A folder as a user's checkout is after ``make demo``: out/demo, the venv, the project's folders."""
    where.mkdir()
    shutil.copytree(finished_demo, where / "out" / "demo", symlinks=True)
    (where / ".venv").symlink_to(Path(sys.executable).parent.parent)
    for name in ("assets", "sample", "domain", "analysis", "pipelines", "transforms", "runners", "scripts",
                 "setup.py", "pyproject.toml", "Makefile"):
        (where / name).symlink_to(ROOT / name)
    return where


RUNNABLE = [block for block in all_blocks() if block.not_run is None]
DOCUMENTS_TO_RUN = [document for document in DOCUMENTS if any(b.document == document for b in RUNNABLE)]


def test_there_are_blocks_to_run():
    assert len(RUNNABLE) >= 10, [b.name for b in RUNNABLE]


@pytest.mark.parametrize("document", DOCUMENTS_TO_RUN)
def test_a_documents_commands_run_as_copied(finished_demo, tmp_path, document):
    """A document's blocks run in order in one shell, as a reader types them (a variable one block sets,
    the next uses), in a fresh checkout after make demo."""
    workspace = checkout_after_make_demo(finished_demo, tmp_path / "checkout")
    venv_bin = workspace / ".venv" / "bin"
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(venv_bin.parent)}
    blocks = [block for block in RUNNABLE if block.document == document]
    script = "\n".join(f"echo '@@ {block.name}' >&2\n{block.text}" for block in blocks)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=900)
    failed = [line[3:] for line in done.stderr.splitlines() if line.startswith("@@ ")][-1:]
    assert done.returncode == 0, (f"{failed} failed (exit {done.returncode}):\n--- stderr\n{done.stderr[-3000:]}"
                                  f"\n--- stdout\n{done.stdout[-2000:]}")
    assert "Traceback (most recent call last)" not in done.stderr, done.stderr[-3000:]


def test_the_readmes_first_job_reads_the_demos_run_1_inputs_only(finished_demo, tmp_path):
    """"Running the job" reads what the demo's run 1 read (the first attempts), not the backfill's answers
    beside them: a reader comparing its out/run1 with out/demo/run1 compares runs of the same archive."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Running the job"):]
    block = next(b for b in shell_blocks("README.md") if f"\n{b.text}\n" in section)
    candidates = re.findall(r"--candidates\s+(?:'([^']+)'|(\S+))", block.text)
    assert candidates, block.text
    workspace = checkout_after_make_demo(finished_demo, tmp_path / "checkout")
    run1 = sorted(Path(p).name for p in glob.glob(json.loads(
        (finished_demo / "run1" / "manifest.json").read_text())["options"]["candidates"]))
    assert (finished_demo / "archive" / "candidates-backfill.jsonl").is_file()  # the file the example must not read
    for quoted, bare in candidates:
        read = sorted(Path(p).name for p in glob.glob(str(workspace / (quoted or bare))))
        assert read == run1, f"{block.name}: --candidates {quoted or bare} reads {read}, the demo's run 1 read {run1}"
