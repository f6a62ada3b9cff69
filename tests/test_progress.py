"""Progress on long runs: a tally per worker, logged on stderr at most once per interval."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixture_archive import write_archive
from transforms.progress import ProgressSpec, size_text

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


def test_where_the_input_size_is_known_a_line_says_how_much_of_it_is_done():
    clock, lines = Clock(), []
    spec = ProgressSpec("files", ("records",), 5.0, ("reading candidates", "read candidates"),
                        total_keys=3, total_bytes=2_400_000)
    t = spec.tracker(clock, lines.append)
    clock.now += 6.0
    t.add({"records": 16384}, keys=0, done_bytes=600_000)  # a large file, part read
    clock.now += 6.0
    t.add({"records": 100}, done_bytes=1_200_000)  # its end
    t.add({"records": 50}, done_bytes=600_000)
    t.finish()
    assert lines == ["reading candidates: 0 of 3 files, 16,384 records, 25% of 2.4 MB in 6.0 s (2,731 records/s)",
                     "reading candidates: 1 of 3 files, 16,484 records, 75% of 2.4 MB in 12.0 s (1,374 records/s)",
                     "read candidates 2 of 3 files, 16,534 records, 100% of 2.4 MB in 12.0 s (1,378 records/s)"]


@given(files=st.lists(st.lists(st.integers(0, 10**6), min_size=1, max_size=5), max_size=8),
       extra=st.integers(0, 3))
def test_the_share_done_grows_to_all_of_the_input_and_never_past_it(files, extra):
    """Each file's bytes arrive in parts (ticks, then its end); the share only grows, and it says 100%
    exactly when every byte of the input is counted (a file that grew since it was listed: still 100%)."""
    clock, lines = Clock(), []
    total = sum(sum(parts) for parts in files)
    spec = ProgressSpec("files", ("records",), 1e-9, ("reading x", "read x"), total_keys=len(files),
                        total_bytes=total + extra)
    t = spec.tracker(clock, lines.append)
    for parts in files:
        for part in parts[:-1]:
            clock.now += 1.0
            t.add({"records": 1}, keys=0, done_bytes=part)
        clock.now += 1.0
        t.add({"records": 1}, done_bytes=parts[-1])
    t.finish()
    if not total + extra:
        assert all(" of 0 B" not in line and "%" not in line for line in lines)
        return
    shares = [int(re.search(r", (\d+)% of ", line).group(1)) for line in lines]
    assert shares == sorted(shares) and all(0 <= share <= 100 for share in shares)
    if lines:
        assert (shares[-1] == 100) == (round(100 * total / (total + extra)) == 100)
        assert lines[-1].startswith(f"read x {len(files)} of {len(files)} files, ")


def test_a_large_file_says_its_share_while_it_is_read(tmp_path, monkeypatch):
    """The read counts a file's bytes as stored while it reads them (not only at its end)."""
    from apache_beam.io.filesystems import FileSystems

    from transforms import read

    monkeypatch.setattr(read, "tune_collector", lambda: None)  # the test process's collector stays as it is
    path = tmp_path / "candidates.jsonl"
    path.write_bytes(b"".join(b'{"source_id": "s-%d", "pad": "%s"}\n' % (n % 7, b"x" * 80) for n in range(60_000)))
    spec = read.with_known_size(read.KeyedInput(str(path), "candidates", "source_id", 1 << 20,
                                                progress=read.reading_progress("candidates", 1e-9)))
    assert (spec.progress.total_keys, spec.progress.total_bytes) == (1, path.stat().st_size)
    reader = read._ReadAndKey({"candidates": spec}, "dead_letters")
    reader.setup()
    lines: list[str] = []
    reader.trackers["candidates"].emit = lines.append
    (metadata,) = FileSystems.match([str(path)])[0].metadata_list
    list(reader.process(("candidates", metadata)))
    reader.teardown()
    shares = [int(re.search(r", (\d+)% of ", line).group(1)) for line in lines]
    assert len(lines) == 60_000 // read.PROGRESS_RECORDS + 2  # a line per tick, the file's end, the closing line
    assert any(0 < share < 100 for share in shares) and shares == sorted(shares) and shares[-1] == 100
    assert lines[-1].startswith("read candidates 1 of 1 files, 60,000 records, 100% of ")


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
    files = list(Path(archive['candidates']).parent.glob('candidates*'))
    assert read_lines and read_lines[-1].startswith(  # how many files and bytes the input holds: all of them
        f"read candidates {len(files)} of {len(files)} files, {manifest['inputs']['candidates']:,} records, "
        f"100% of {size_text(sum(f.stat().st_size for f in files))} in ")
    assert not [line for line in quiet.stderr.splitlines() if " progress (pid " in line]
    assert chatty.stdout.replace("chatty", "quiet") == quiet.stdout  # the summary does not change
    assert "processing:" not in chatty.stdout and "candidates/s" not in chatty.stdout
