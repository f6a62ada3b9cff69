"""Workarounds for defects of the runners this project launches, each with its evidence.

Applied by the entry points before a pipeline runs; each says what to remove it for.
"""

from __future__ import annotations

from apache_beam.runners.portability.fn_api_runner import worker_handlers


def send_stage_inputs_whole() -> None:
    """The FnApiRunner sends each stage's input to a worker process in one message at close.

    Beam 2.77's runner flushes its data-plane output streams every second
    (``worker_handlers.DATA_BUFFER_TIME_LIMIT_MS`` = 1000) from a timer thread,
    while the bundle thread is still writing the stage's input. ``flush()``
    takes its lock but ``write()`` does not: when the flush callback blocks on
    the full 100 MB send queue, chunks written meanwhile are cleared unsent
    after it returns. With two multi-processing workers and more than ~100 MB
    of stage input per worker (1M candidates), one run in five lost whole read
    bundles' records; conservation caught it and the run exited 2
    (docs/benchmarks.md). With the limit at 0 the stream has no timer and
    sends on close; a stage input then travels as one message (gRPC's 2 GB
    limit per worker and stage; this job sends ~150 MB at 1M). In-process
    runs use no gRPC channel and are unaffected. Remove once Beam's buffered
    stream clears only what it sent.
    """
    worker_handlers.DATA_BUFFER_TIME_LIMIT_MS = 0
