"""Fault injection: the job is killed (SIGKILL to its process group) at several points of a run.

After each kill the folder either has no manifest or verifies: a reader that
trusts only folders with a manifest never sees a half-written run. A rerun with
``--overwrite`` then writes what an undisturbed run writes. The kill points are
events seen in the output folder (the writers' first temporary folder, the first
final ``part-*`` file, every final file before the manifest), so each kill lands
in a different phase; when the run gets past a point before it is seen, the kill
lands later, and the promise is the same.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixture_archive import write_archive
from pipelines import reprocess
from pipelines.verify import verify_folder

ROOT = Path(__file__).resolve().parent.parent
TWO_WORKERS = ("--direct_num_workers=2", "--direct_running_mode=multi_processing")
PARTS = 16  # final part-* files of a fixture run: 13 artifact families + 3 outputs


def part_files(out: Path) -> list[Path]:
    return [p for p in out.rglob("part-*") if "beam-temp" not in str(p)]


KILL_POINTS = {
    "writers-started": lambda out: out.exists() and any(out.rglob("beam-temp-*")),
    "first-part-file": lambda out: bool(part_files(out)),
    "all-part-files": lambda out: len(part_files(out)) >= PARTS,
}


def argv(archive: dict, out: Path, *extra: str) -> list[str]:
    return ["--transcripts", archive["transcripts"], "--candidates", archive["candidates"], "--output", str(out),
            "--output-format", "jsonl", "--overwrite", *extra]


def sorted_lines(out: Path) -> dict[str, list[bytes]]:
    """Each output folder's lines, sorted: the bytes written, whatever the sharding and row order."""
    return {str(folder.relative_to(out)): sorted(line for part in folder.glob("part-*")
                                                 for line in part.read_bytes().splitlines())
            for folder in sorted({p.parent for p in part_files(out)})}


def kill_at(archive: dict, out: Path, point: str, extra: tuple[str, ...]) -> str:
    """Start the job, SIGKILL its process group once ``point`` is seen; returns what happened."""
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.reprocess", *argv(archive, out, *extra)], cwd=ROOT,
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    def seen(folder: Path) -> bool:
        try:
            return KILL_POINTS[point](folder)
        except OSError:  # the job renamed or removed something while we looked
            return False

    try:
        while proc.poll() is None and not seen(out):
            time.sleep(0.005)
        finished = proc.poll() is not None
        if not finished:
            os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=120)
    return "finished first" if finished else f"killed at {point}"


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return write_archive(tmp_path_factory.mktemp("archive"))


@pytest.fixture(scope="module")
def undisturbed(archive, tmp_path_factory):
    out = tmp_path_factory.mktemp("undisturbed") / "out"
    assert reprocess.main(argv(archive, out)) == 0
    return sorted_lines(out)


# Two worker processes start slowly: one kill, mid-finalize, keeps the suite lean.
@pytest.mark.parametrize("mode,points", [((), tuple(KILL_POINTS)), (TWO_WORKERS, ("first-part-file",))],
                         ids=["in-process", "two-workers"])
def test_a_killed_run_leaves_no_manifest_or_a_verified_folder_and_a_rerun_repairs_it(archive, undisturbed, tmp_path,
                                                                                       mode, points):
    out = tmp_path / "out"
    events = []
    for point in points:
        events.append(kill_at(archive, out, point, mode))
        if (out / "manifest.json").exists():
            verdict = verify_folder(str(out))
            assert verdict.ok, (events, verdict.problems)
        else:  # an uncommitted folder: verify says so
            assert not verify_folder(str(out)).ok
    assert any(e.startswith("killed") for e in events), events  # at least one kill landed inside the run

    assert reprocess.main(argv(archive, out)) == 0
    assert verify_folder(str(out)).ok
    assert sorted_lines(out) == undisturbed
    assert not list(out.rglob("beam-temp-*")), "the rerun left temporary files of a killed run"
