"""The runner workaround the entry points apply (runners/workarounds.py)."""

import time

from apache_beam.runners.portability.fn_api_runner import worker_handlers
from apache_beam.runners.worker.data_plane import ClosableOutputStream

from fixture_archive import write_archive
from pipelines import reprocess
from runners.workarounds import send_stage_inputs_whole


def bytes_delivered_while_flushes_block(limit_ms: int, seconds: float = 1.6) -> tuple[int, int]:
    """Write a stage input the way the runner does (many chunks, then close) into a data-plane
    stream with the given flush interval, each flush blocking as a full send queue makes it."""
    delivered = []

    def blocking_flush(data: bytes) -> None:
        delivered.append(len(data))
        time.sleep(0.4)

    stream = ClosableOutputStream.create(lambda data: delivered.append(len(data)), blocking_flush, limit_ms)
    chunk, written = b"x" * 65536, 0
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        stream.write(chunk)
        written += len(chunk)
        time.sleep(0.005)
    stream.close()
    return written, sum(delivered)


def test_with_the_jobs_setting_nothing_written_during_a_blocked_flush_is_lost(monkeypatch):
    monkeypatch.setattr(worker_handlers, "DATA_BUFFER_TIME_LIMIT_MS", 1000)  # Beam's own value
    send_stage_inputs_whole()
    written, delivered = bytes_delivered_while_flushes_block(worker_handlers.DATA_BUFFER_TIME_LIMIT_MS)
    assert delivered == written


def test_the_job_applies_it_before_it_runs(monkeypatch, tmp_path):
    monkeypatch.setattr(worker_handlers, "DATA_BUFFER_TIME_LIMIT_MS", 1000)
    archive = write_archive(tmp_path / "archive")
    reprocess.run(["--transcripts", archive["transcripts"], "--candidates", archive["candidates"],
                   "--output", str(tmp_path / "out"), "--progress-seconds", "0"])
    assert worker_handlers.DATA_BUFFER_TIME_LIMIT_MS == 0
