#!/usr/bin/env python3
"""Beam's Python SDK worker pool on loopback: Python workers out of process, one per slot.

With ``--environment_type=LOOPBACK`` every Python SDK worker of a Flink job
runs inside the submitting process, so parallelism 2 still gives Python one
core. With ``--environment_type=EXTERNAL --environment_config=localhost:PORT
--sdk_worker_parallelism=2`` Flink asks this pool for two workers per
TaskManager, and the pool starts each as its own ``python`` process (Beam's
``BeamFnExternalWorkerPoolServicer`` in process mode).

Unlike ``python -m apache_beam.runners.worker.worker_pool_main``, which listens
on all interfaces, this pool listens on localhost only (an unauthenticated
pool runs whatever code it is sent). The pool starts workers with a bare
``python``; ``worker_pool()`` and ``main()`` put this interpreter's directory
first on ``PATH`` so that is the project's environment.

One pool may serve several TaskManagers (``session_cluster.py start
--taskmanagers 2``). Beam's pool keeps its worker processes by worker id alone,
but each TaskManager numbers its workers itself (``1-1``, ``2-1``, ...), so two
TaskManagers ask for the same ids: when one stopped its worker ``2-1``, Beam's
pool killed the other TaskManager's ``2-1``, whose task then waited for its
worker for ever ("Still waiting for startup of environment ... for worker id
2-1"). This pool keeps each worker under the connection that asked for it as
well (``_PerClientPool``), and stops a worker only for the connection that
started it.

CLI (foreground; Ctrl-C or SIGTERM stops the pool and its workers):

    .venv/bin/python scripts/flink/worker_pool.py --port 50000

Library:

    with worker_pool(port) as address:   # "localhost:PORT"
        run([..., "--environment_type=EXTERNAL", f"--environment_config={address}",
             "--sdk_worker_parallelism=2"])
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path


def _env_with_this_python() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}


def serve(port: int) -> None:
    """Run the pool in this process until SIGTERM/SIGINT; then stop its workers."""
    os.environ["PATH"] = _env_with_this_python()["PATH"]
    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2_grpc
    from apache_beam.runners.worker.worker_pool_main import kill_process_gracefully
    from apache_beam.utils import thread_pool_executor

    server = grpc.server(
        thread_pool_executor.shared_unbounded_instance(),
        options=[("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)],
    )
    bound = server.add_insecure_port(f"localhost:{port}")
    if not bound:
        raise SystemExit(f"worker_pool: cannot listen on localhost:{port}")
    pool = _per_client_pool_class()(use_process=True)
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(pool, server)
    server.start()
    print(f"worker pool listening on localhost:{bound}", file=sys.stderr, flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(5.0):
        pool.reap()
    server.stop(0)
    for worker in pool.all_workers():
        kill_process_gracefully(worker)


def _per_client_pool_class():
    """Beam's process-mode pool, its workers keyed by (client connection, worker id) (module docstring)."""
    from apache_beam.portability.api import beam_fn_api_pb2
    from apache_beam.runners.worker.worker_pool_main import (
        BeamFnExternalWorkerPoolServicer,
        kill_process_gracefully,
    )

    class _PerClientPool(BeamFnExternalWorkerPoolServicer):
        def __init__(self, **kwargs) -> None:
            super().__init__(**kwargs)
            self._lock = threading.Lock()
            self._owned: dict[tuple[str, str], subprocess.Popen] = {}

        def StartWorker(self, request, context):  # noqa: N802 - gRPC method name
            key, previous = (context.peer(), request.worker_id), None
            with self._lock:  # Beam's entry under the bare id lives only inside this lock
                response = super().StartWorker(request, context)
                process = self._worker_processes.pop(request.worker_id, None)
                if process is not None:
                    previous = self._owned.pop(key, None)
                    self._owned[key] = process
            if process is not None and previous is not None:  # the same client reusing an id
                kill_process_gracefully(previous)
            return response

        def StopWorker(self, request, context):  # noqa: N802 - gRPC method name
            with self._lock:
                process = self._owned.pop((context.peer(), request.worker_id), None)
                if process is None:
                    # The client reconnected (a new peer address): stop the worker only if no other
                    # client has one of that id; otherwise it ends by itself once its TaskManager
                    # closes its control stream.
                    same_id = [key for key in self._owned if key[1] == request.worker_id]
                    if len(same_id) == 1:
                        process = self._owned.pop(same_id[0])
            if process is not None:
                print(f"stopping worker {request.worker_id} of {context.peer()}", file=sys.stderr, flush=True)
                kill_process_gracefully(process)
            return beam_fn_api_pb2.StopWorkerResponse()

        def reap(self) -> None:
            """Forget (and reap) workers that ended by themselves, so none lingers as a zombie."""
            with self._lock:
                for key, process in list(self._owned.items()):
                    if process.poll() is not None:
                        del self._owned[key]

        def all_workers(self) -> list:
            with self._lock:
                return [*self._owned.values(), *self._worker_processes.values()]

    return _PerClientPool


def launch(port: int, out, *, own_session: bool = False) -> subprocess.Popen[bytes]:
    """This file as a pool process on localhost:port, run by this interpreter, output to ``out``.

    ``own_session``: out of the caller's process group, so it outlives the caller and its Ctrl-C
    (``session_cluster.py start`` leaves it running until ``stop``)."""
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--port", str(port)],
        env=_env_with_this_python(),
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=own_session,
    )


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"worker pool exited with code {proc.returncode} during start-up")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"worker pool not listening on localhost:{port} after {timeout_s:.0f}s")


@contextlib.contextmanager
def worker_pool(port: int, *, log_file: Path | None = None, timeout_s: float = 60.0) -> Iterator[str]:
    """A pool process for the block; yields its ``--environment_config`` address."""
    out = open(log_file, "ab") if log_file else subprocess.DEVNULL
    proc = launch(port, out)
    try:
        wait_for_port(port, proc, timeout_s)
        yield f"localhost:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log_file:
            out.close()  # type: ignore[union-attr]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=50000)
    serve(parser.parse_args(argv).port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
