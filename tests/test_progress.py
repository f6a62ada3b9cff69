"""Progress on long runs: a tally per worker, logged on stderr at most once per interval."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixture_archive import write_archive
from transforms.progress import ProgressSpec

ROOT = Path(__file__).resolve().parent.parent


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def tracker(interval: float):
    clock, lines = Clock(), []
    return ProgressSpec("sources", ("candidates",), interval).tracker(clock, lines.append), clock, lines


def test_a_short_run_stays_silent():
    t, clock, lines = tracker(5.0)
    for _ in range(3):
        clock.now += 1.0
        t.add({"candidates": 10, "transcripts": 1})
    t.finish()
    assert lines == []


def test_a_long_run_says_how_far_it_got_and_how_fast():
    t, clock, lines = tracker(5.0)
    for _ in range(12):
        clock.now += 1.0
        t.add({"candidates": 500, "transcripts": 1})
    t.finish()
    assert lines == [
        "processing: 5 sources, 2,500 candidates in 5.0 s (500 candidates/s)",
        "processing: 10 sources, 5,000 candidates in 10.0 s (500 candidates/s)",
        "processed 12 sources, 6,000 candidates in 12.0 s (500 candidates/s)",
    ]


@given(steps=st.lists(st.tuples(st.floats(0, 10), st.integers(0, 1000)), max_size=60),
       interval=st.floats(0.5, 20))
def test_lines_are_at_least_one_interval_apart_and_the_tally_is_exact(steps, interval):
    t, clock, lines = tracker(interval)
    emitted_at = []
    for dt, n in steps:
        clock.now += dt
        before = len(lines)
        t.add({"candidates": n})
        if len(lines) > before:
            emitted_at.append(clock.now)
    assert all(b - a >= interval for a, b in zip([100.0, *emitted_at], emitted_at))
    assert (t.keys, t.records.get("candidates", 0)) == (len(steps), sum(n for _, n in steps))
    t.finish()
    assert len(lines) == (len(emitted_at) + 1 if emitted_at else 0)


def test_records_of_a_key_in_progress_are_tallied_without_finishing_it():
    clock, lines = Clock(), []
    t = ProgressSpec("files", ("records",), 5.0, ("reading candidates", "read candidates")).tracker(clock, lines.append)
    for _ in range(3):  # one large file, ticked while it is read
        clock.now += 3.0
        t.add({"records": 1000}, keys=0)
    t.add({"records": 10})
    t.finish()
    assert lines == ["reading candidates: 0 files, 2,000 records in 6.0 s (333 records/s)",
                     "read candidates 1 files, 3,010 records in 9.0 s (334 records/s)"]


def test_interval_zero_never_logs():
    t, clock, lines = tracker(0)
    for _ in range(5):
        clock.now += 100
        t.add({"candidates": 1})
    t.finish()
    assert lines == []


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return write_archive(tmp_path_factory.mktemp("archive"))


def job(archive, out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pipelines.reprocess", "--transcripts", archive["transcripts"],
           "--candidates", archive["candidates"], "--output", str(out), "--output-format", "jsonl", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_the_job_logs_progress_on_stderr_and_leaves_stdout_alone(archive, tmp_path):
    quiet = job(archive, tmp_path / "quiet", "--progress-seconds", "0")
    chatty = job(archive, tmp_path / "chatty", "--progress-seconds", "0.000001")
    progress = [line for line in chatty.stderr.splitlines() if " progress (pid " in line]
    assert any("processing: " in line and " sources, " in line and "candidates/s)" in line for line in progress)
    messages = [line.split(": ", 1)[1] for line in progress]
    assert [m for m in messages if m.startswith("processed ")][-1].startswith("processed 4 sources, 27 candidates")
    # Reading says how far it got too (a long read phase is not silent), counting every record read.
    manifest = json.loads((tmp_path / "chatty" / "manifest.json").read_text())
    read_lines = [m for m in messages if m.startswith("read candidates ")]
    assert read_lines and read_lines[-1].startswith(
        f"read candidates {len(list(Path(archive['candidates']).parent.glob('candidates*')))} files, "
        f"{manifest['inputs']['candidates']:,} records")
    assert not [line for line in quiet.stderr.splitlines() if " progress (pid " in line]
    assert chatty.stdout.replace("chatty", "quiet") == quiet.stdout  # the summary does not change
    assert "processing:" not in chatty.stdout and "candidates/s" not in chatty.stdout
