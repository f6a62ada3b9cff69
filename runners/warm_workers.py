"""Warm workers for the DirectRunner's multi-processing mode: forked from a process that imported them first.

Beam starts each multi-processing worker as a fresh ``python -m
apache_beam.runners.worker.sdk_worker_main``, and only once the runner has
imported Beam, built and translated the graph (about 1.5 s here); each
worker then spends about a second importing Beam and the job's modules
before its first bundle, while the runner waits. Meanwhile the second core
idled through the runner's own start-up (docs/benchmarks.md).

Here one process, the *zygote*, is started first thing. It imports the
worker's modules while the runner imports its own, then forks one worker per
request; a fork of an imported process is ready in milliseconds. PySpark's
``daemon.py`` starts its Python workers the same way.

The runner still launches every worker through its own command line, so its
logging server, the worker's environment variables and its exit handling
stay Beam's: the command becomes this file run as a small client (``python
-S -I``, no site packages, a few milliseconds) that hands its environment to
the zygote over a Unix socket, waits, and exits with the worker's status.
When no zygote answers (it failed to start, or exited), the client replaces
itself with Beam's own command, so a run never depends on the zygote.

This module imports only the standard library at the top: the client runs it
as a script without site packages, and the entry point starts the zygote
before it imports Beam.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

# Beam's worker command (FnApiRunner, multi_processing): what the client falls back to.
BEAM_WORKER_MODULE = "apache_beam.runners.worker.sdk_worker_main"
# What a forked worker runs: "module:function", called with no arguments; its return value
# (or SystemExit code) is the worker's exit status.
DEFAULT_ENTRY = "runners.warm_workers:run_beam_worker"

FORKED = b"F"  # sent by a forked worker first thing: the request is taken
# Native threads some imports start, off in the zygote: a fork copies only the thread that forks, so the zygote
# must have no other (numpy's OpenBLAS server, pyarrow's jemalloc purger; neither does this job's work).
SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}
_STATUS = struct.Struct("!i")  # the worker's exit status, sent by the worker itself when it ends
_LENGTH = struct.Struct("!I")


def run_beam_worker() -> int:
    """Beam's SDK worker, as ``python -m apache_beam.runners.worker.sdk_worker_main`` runs it."""
    import logging

    from apache_beam.runners.worker import sdk_worker_main

    from runners.no_space import fall_silent_when_out_of_space

    fall_silent_when_out_of_space()  # the runner says a full disk in one line, not each worker its traceback
    # A worker logs through the runner's logging service, as a cold one does, and the runner shows what failed
    # (pipelines/__init__.py); the handler forked from the zygote would print every INFO line on the shared stderr.
    quiet_root = logging.getLogger()
    for handler in list(quiet_root.handlers):
        quiet_root.removeHandler(handler)
    sdk_worker_main.main(sys.argv)
    return 0


# ---------------------------------------------------------------- the runner's side


@dataclass
class Zygote:
    """A started zygote: ``worker_command`` is what the runner runs for each worker; ``close()`` ends it."""

    process: subprocess.Popen
    folder: str  # holds the listening socket
    worker_command: str
    _closed: bool = field(default=False, repr=False)

    def close(self) -> None:
        """End the zygote (workers it forked end with the runner's control channel, as Beam's do)."""
        if self._closed:
            return
        self._closed = True
        if self.process.stdin:
            self.process.stdin.close()  # the zygote ends at end of file on its standard input
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def start_zygote(preload: tuple[str, ...], entry: str = DEFAULT_ENTRY, python: str = sys.executable) -> Zygote:
    """Start a zygote that imports ``preload`` (and ``entry``'s module) now and forks a worker per request.

    The listening socket is bound here, before the zygote runs, so a worker
    launched while the zygote still imports waits in the socket's backlog
    instead of missing it; the zygote holds the only copy, so once it is gone
    a client's connection is refused at once and the client falls back.
    """
    folder = tempfile.mkdtemp(prefix="notarius-zygote-")
    socket_path = os.path.join(folder, "socket")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(socket_path)
        listener.listen(64)
        process = subprocess.Popen(
            [python, "-m", __name__, "serve", str(listener.fileno()), entry, *preload],
            stdin=subprocess.PIPE, pass_fds=(listener.fileno(),), env={**SINGLE_THREADED, **os.environ})
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        listener.close()
    return Zygote(process, folder, client_command(socket_path, python))


def client_command(socket_path: str, python: str = sys.executable) -> str:
    """The shell command the runner runs for each worker (Beam runs it with ``shell=True``)."""
    from shlex import quote

    fallback = [python, "-m", BEAM_WORKER_MODULE]
    # exec: the shell becomes the client, so the runner's kill reaches it and no idle shell waits.
    return "exec " + " ".join(quote(part) for part in [python, "-S", "-I", os.path.abspath(__file__), "connect",
                                                       socket_path, "--", *fallback])


_started: Zygote | None = None  # started by start_early, for the runner that runner_with_warm_workers makes


# Forking a process that imported Beam is safe on Linux (no threads yet); macOS's system libraries are not fork-safe.
FORK_IS_SAFE = sys.platform.startswith("linux")


def looks_multi_processing(argv: list[str]) -> bool:
    """Whether ``argv`` asks the FnApiRunner for multi-processing workers, read without Beam (its import takes a second).

    Only the spelled-out forms count; ``runner_with_warm_workers`` decides with the parsed options."""
    mode = runner = None
    for index, argument in enumerate(argv):
        name, equals, value = argument.partition("=")
        if not equals:
            value = argv[index + 1] if index + 1 < len(argv) else ""
        if name == "--direct_running_mode":
            mode = value
        elif name == "--runner":
            runner = value
    return FORK_IS_SAFE and mode == "multi_processing" and runner in (None, "FnApiRunner")


def start_early(argv: list[str], preload: tuple[str, ...]) -> None:
    """Start the zygote now if ``argv`` looks like a multi-processing run: call it before importing Beam."""
    global _started
    if _started is None and looks_multi_processing(argv):
        _started = _zygote_or_none(preload)
        if _started is not None:
            atexit.register(_close_unclaimed)  # a run refused before it starts leaves no zygote or socket behind


def _close_unclaimed() -> None:
    global _started
    if _started is not None:
        _started.close()
        _started = None


def _zygote_or_none(preload: tuple[str, ...]) -> Zygote | None:
    """A started zygote, or None (said on stderr) when it cannot start: the run then starts its workers cold."""
    try:
        return start_zygote(preload)
    except OSError as error:  # e.g. a socket path beyond the system's limit under a long $TMPDIR
        print(f"notarius-reprocess: warm workers unavailable ({error}); the workers start cold", file=sys.stderr)
        return None


def runner_with_warm_workers(options, preload: tuple[str, ...]):
    """``(runner, zygote)`` for ``options``: an FnApiRunner whose multi-processing workers are forked from a zygote,
    or ``(None, None)`` when the options ask for anything else (a zygote started early for them is ended)."""
    global _started
    from apache_beam.options.pipeline_options import DirectOptions, StandardOptions

    zygote, _started = _started, None
    if options.view_as(StandardOptions).runner != "FnApiRunner" or not FORK_IS_SAFE or \
            options.view_as(DirectOptions).direct_running_mode != "multi_processing":
        if zygote is not None:
            zygote.close()
        return None, None
    if zygote is None:
        zygote = _zygote_or_none(preload)
        if zygote is None:
            return None, None
    return _fn_api_runner(zygote.worker_command), zygote


def _fn_api_runner(worker_command: str):
    from apache_beam.portability import python_urns
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    class WarmWorkersRunner(FnApiRunner):
        """The FnApiRunner, launching its multi-processing workers with ``worker_command``."""

        def run_via_runner_api(self, pipeline_proto, options):
            # multi_processing puts Beam's own command in the graph's subprocess environment.
            for environment in pipeline_proto.components.environments.values():
                if environment.urn == python_urns.SUBPROCESS_SDK:
                    environment.payload = worker_command.encode()
            return super().run_via_runner_api(pipeline_proto, options)

    return WarmWorkersRunner()


# ---------------------------------------------------------------- the client (the runner's worker command)


def connect(socket_path: str, fallback: list[str]) -> int:
    """Hand this process's environment to the zygote; return the forked worker's exit status.

    Without a zygote to answer, becomes ``fallback`` (Beam's own worker command)."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(socket_path)
        request = json.dumps(dict(os.environ)).encode()
        client.sendall(_LENGTH.pack(len(request)) + request)
        forked = _receive(client, len(FORKED))
    except OSError:
        forked = b""
    if forked != FORKED:  # refused, or the zygote ended before forking: Beam's worker, started cold
        client.close()
        os.execvp(fallback[0], fallback)
    status = _receive(client, _STATUS.size)
    if len(status) != _STATUS.size:
        print("warm worker ended without reporting a status (killed?)", file=sys.stderr)
        return 1
    return _STATUS.unpack(status)[0]


def _receive(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


# ---------------------------------------------------------------- the zygote


def serve(listener_fd: int, entry: str, preload: list[str]) -> int:
    """Import, then fork one worker per connection until standard input ends (the runner closed it or died)."""
    import gc
    import importlib

    # Ctrl-C reaches the whole process group: the runner handles it, and the zygote ends with the runner
    # (its standard input closes) instead of printing a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    listener = socket.socket(fileno=listener_fd)
    module_name, _, function_name = entry.partition(":")
    for name in (*preload, module_name):
        importlib.import_module(name)
    function = getattr(sys.modules[module_name], function_name)
    threads = len(os.listdir("/proc/self/task"))
    if threads > 1:  # exits: every client falls back to Beam's command
        print(f"zygote: {threads} threads after importing {', '.join(preload)}; a fork would copy one of them,"
              " so the workers start cold", file=sys.stderr)
        return 0
    # What the zygote holds now is shared by every worker: frozen, the workers' collections never walk it
    # (and never touch its pages, which would copy them).
    gc.freeze()
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ)
    while True:
        ready = {key.fd for key, _ in selector.select()}
        _reap()
        if sys.stdin.fileno() in ready and not os.read(sys.stdin.fileno(), 4096):
            return 0
        if listener.fileno() in ready:
            connection, _ = listener.accept()
            with connection:
                environment = _request(connection)
                if environment is None:
                    continue
                try:
                    pid = os.fork()
                except OSError as error:  # the connection closes unanswered: the client starts Beam's worker
                    print(f"zygote: cannot fork a worker ({error}); it starts cold", file=sys.stderr)
                    continue
                if pid == 0:  # the worker
                    selector.close()
                    listener.close()
                    _run_worker(connection, environment, function)  # never returns


def _request(connection: socket.socket) -> dict | None:
    header = _receive(connection, _LENGTH.size)
    if len(header) != _LENGTH.size:
        return None
    body = _receive(connection, _LENGTH.unpack(header)[0])
    try:
        return json.loads(body)
    except ValueError:
        return None


def _reap() -> None:
    """Collect ended workers, so none stays a zombie while the zygote runs."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# How long a worker lives on after Ctrl-C, silenced: the runner, which reports the interruption, tears
# it down first (a worker gone at once would make the runner's threads fail, loudly, before it knows why).
QUIET_GRACE_SECONDS = 5.0


def _end_quietly(signum, _frame) -> None:
    """Ctrl-C in a worker (or its client): the runner reports it in one line; this process stops speaking
    and ends when the runner goes, or after a grace period."""
    import threading

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    timer = threading.Timer(QUIET_GRACE_SECONDS, os._exit, (128 + signum,))
    timer.daemon = True
    timer.start()


def _run_worker(connection: socket.socket, environment: dict, function) -> None:
    status = 1
    try:
        connection.sendall(FORKED)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)  # not the runner's pipe: the zygote alone watches it
        os.close(devnull)
        os.environ.clear()
        os.environ.update(environment)
        # Ctrl-C reaches the whole process group: the runner reports it (one line, pipelines.guards); a worker
        # just ends, without a traceback of its own per thread.
        signal.signal(signal.SIGINT, _end_quietly)
        try:
            result = function()
            status = result if isinstance(result, int) else 0
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        except BaseException:  # noqa: BLE001 - reported like an uncaught exception, then the status
            import traceback

            traceback.print_exc()
            status = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            connection.sendall(_STATUS.pack(status))
        finally:
            os._exit(status)


if __name__ == "__main__":
    if sys.argv[1] == "connect":
        signal.signal(signal.SIGINT, _end_quietly)  # as its worker: the runner reports Ctrl-C
        separator = sys.argv.index("--")
        sys.exit(connect(sys.argv[2], sys.argv[separator + 1:]))
    if sys.argv[1] == "serve":
        sys.exit(serve(int(sys.argv[2]), sys.argv[3], sys.argv[4:]))
    sys.exit(f"usage: {sys.argv[0]} connect SOCKET -- FALLBACK... | serve FD ENTRY [MODULE...]")
