"""Entry points and their options.

Two of Beam's log records say nothing an operator needs, and would be the first
lines they read around any error of ours, so they are dropped (every other record
passes):

- importing Beam without Google's optional ``apitools`` logs a warning on the root
  logger ("apitools not found, and bigquery client libraries are not available");
- every job-server run (Flink, the portable runner) logs "Really starting service"
  and, at exit, "Really destroying service" at WARNING: routine start and stop, not
  a problem. A service that fails says so through the runner's error;
- a local worker's log (``--direct_running_mode=multi_processing``) reaches the
  command through Beam's logging service, which logs each entry again ("Worker:
  severity: WARN ...", a routine start-up warning in every worker): below ERROR
  they are dropped, so a run with two workers is as quiet as one with none unless
  a worker fails (its workers log only that way: ``runners.warm_workers``).

A command started by a Python without Beam (``python3 -m pipelines.reprocess``
outside the project's venv) ends with one line saying how to run it, not with
a ModuleNotFoundError traceback: this package is every command's first import.
"""

from __future__ import annotations  # `str | None` below, read by a Python too old for the project too

import logging


def _not_the_apitools_notice(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("apitools not found")


def _not_a_routine_service_line(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(("Really starting service", "Really destroying service"))


def _a_worker_failure_or_not_a_worker_line(record: logging.LogRecord) -> bool:
    return record.msg != "Worker: %s" or record.levelno >= logging.ERROR


logging.getLogger().addFilter(_not_the_apitools_notice)
logging.getLogger("apache_beam.utils.subprocess_server").addFilter(_not_a_routine_service_line)
logging.getLogger("apache_beam.runners.portability.local_job_service").addFilter(_a_worker_failure_or_not_a_worker_line)


def _our_command() -> str | None:
    """The command this process runs, when it is one of ours (``python -m pipelines.X`` or the console
    script); None otherwise (a test run, an importing library)."""
    import os
    import sys

    argv = getattr(sys, "orig_argv", [])
    module = argv[argv.index("-m", 1) + 1] if "-m" in argv[1:-1] else ""  # after any interpreter flag (-E -s ...)
    if module.startswith("pipelines."):
        return "notarius-reprocess" if module == "pipelines.cli" else f"python -m {module}"
    if len(argv) >= 2 and os.path.basename(argv[1]) == "notarius-reprocess":
        return "notarius-reprocess"
    return None


def _until_the_command_takes_signals() -> None:
    """Ctrl-C or SIGTERM while the command's modules are still being imported (Beam takes about a second):
    one line and the shell's exit code. Once the command runs, pipelines.interruption takes over."""
    import os
    import signal
    import sys

    prog = _our_command()
    if prog is None:
        return

    def early(signum, _frame):
        word = "terminated" if signum == signal.SIGTERM else "interrupted"
        sys.stdout.flush()
        print(f"{prog}: {word}: nothing committed", file=sys.stderr, flush=True)
        os._exit(128 + signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:  # an ignored signal stays ignored (nohup, background)
            signal.signal(signum, early)


def _refuse_a_python_without_beam() -> None:
    """One line, exit 1, when a command of ours starts in a Python that lacks Beam (an importing library
    gets Python's own ImportError)."""
    import importlib.util
    import sys

    # sys.argv[0] is "-m" while `python -m` imports the module's packages (Python < 3.10 has no orig_argv).
    prog = _our_command() or ("python -m pipelines" if sys.argv[:1] == ["-m"] else None)
    if prog is None or importlib.util.find_spec("apache_beam") is not None:
        return
    raise SystemExit(f"{prog}: apache_beam is not installed in this Python ({sys.executable}): run `make install` "
                     "in the checkout and use .venv/bin/python, or `. .venv/bin/activate` first")


_refuse_a_python_without_beam()
_until_the_command_takes_signals()
