"""How a command's process starts: what it does before it imports its modules (Beam alone takes about a second).

Nothing here runs at import, and no module of ``pipelines/`` does anything when imported: a test, a REPL or a
library importing ``pipelines.reprocess`` gets no signal handler, no log filter and no process
(``tests/test_entry.py``). A command's process does it all here, first thing: ``python -m pipelines.X`` through
the ``if __name__ == "__main__"`` block at the top of X (before X's own imports: ``run_module``), the console
script ``notarius-reprocess`` through ``console_main``. In this order:

1. Ctrl-C or SIGTERM end the process with one line, ``PROG: interrupted: nothing committed``, and the shell's
   exit code, until the command takes the signals itself (``pipelines.interruption``, once its ``main`` runs);
2. a Python without Beam (``python3 -m pipelines.reprocess`` outside the venv) is refused in one line, exit 1,
   instead of a ModuleNotFoundError traceback;
3. two of Beam's log records that say nothing an operator needs are dropped (``quiet_beam_notices``);
4. the job, asked for multi-processing workers, starts their zygote (``runners.warm_workers``), which imports
   the job's modules while this process imports its own;
5. the command's module is imported as itself and its ``main`` runs (``pipelines.interruption.run_command``).

Only the standard library is imported at the top: this module runs in a Python that may lack Beam.
"""

from __future__ import annotations

import os
import signal
import sys

CONSOLE_SCRIPT = "notarius-reprocess"
CLI = "pipelines.cli"
JOB = "pipelines.reprocess"
# What the job's zygote does before its workers' first request (runners.warm_workers): drop Beam's notices, as
# the command did, then import the job's module, which imports everything its workers unpickle.
WORKER_PRELOAD = ("pipelines.entry:quiet_beam_notices", JOB)


def run_module(name: str) -> None:
    """``python -m NAME``: the first steps, then NAME imported as itself and its ``main`` run; ends the process."""
    _first_steps(CONSOLE_SCRIPT if name == CLI else f"python -m {name}")
    if name == JOB:
        start_job_workers_early(sys.argv[1:])
    sys.exit(_run(name))


def console_main() -> int:
    """The ``notarius-reprocess`` console script: the first steps, then ``pipelines.cli``."""
    _first_steps(CONSOLE_SCRIPT)
    return _run(CLI)


def _run(name: str) -> int:
    """The command module ``name``'s ``main`` with its ``PROG``, in a process that ends with it. The module is
    named, not imported here, as the console script names its commands: the commands import this module."""
    from runners.collector import freeze_for_exit, import_frozen

    module = import_frozen(name)  # no collector pass over what the import makes (runners.collector)
    from pipelines.interruption import run_command

    return freeze_for_exit(run_command(module.PROG, module.main))


def _first_steps(prog: str) -> None:
    _until_the_command_takes_signals(prog)
    _refuse_a_python_without_beam(prog)
    quiet_beam_notices()


def _until_the_command_takes_signals(prog: str) -> None:
    """Ctrl-C or SIGTERM while the command's modules are still being imported: one line and the shell's exit
    code. Once the command runs, pipelines.interruption takes over (and puts this back when it is done)."""

    def early(signum, _frame):
        word = "terminated" if signum == signal.SIGTERM else "interrupted"
        sys.stdout.flush()
        print(f"{prog}: {word}: nothing committed", file=sys.stderr, flush=True)
        os._exit(128 + signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:  # an ignored signal stays ignored (nohup, background)
            signal.signal(signum, early)


def _refuse_a_python_without_beam(prog: str) -> None:
    import importlib.util

    if importlib.util.find_spec("apache_beam") is None:
        raise SystemExit(f"{prog}: apache_beam is not installed in this Python ({sys.executable}): run "
                         "`make install` in the checkout and use .venv/bin/python, or `. .venv/bin/activate` first")


def quiet_beam_notices() -> None:
    """Drop two of Beam's log records, which would be the first lines an operator reads around any error of
    ours (every other record passes):

    - importing Beam without Google's optional ``apitools`` logs a warning on the root logger ("apitools not
      found, and bigquery client libraries are not available");
    - every job-server run (Flink, the portable runner) logs "Really starting service" and, at exit, "Really
      destroying service" at WARNING: routine start and stop, not a problem. A service that fails says so
      through the runner's error;
    - a local worker's log (``--direct_running_mode=multi_processing``) reaches the command through Beam's
      logging service, which logs each entry again ("Worker: severity: WARN ...", a routine start-up warning
      in every worker): below ERROR they are dropped, so a run with two workers is as quiet as one with none
      unless a worker fails (its workers log only that way: ``runners.warm_workers``)."""
    import logging

    logging.getLogger().addFilter(_not_the_apitools_notice)  # a filter already there is not added twice
    logging.getLogger("apache_beam.utils.subprocess_server").addFilter(_not_a_routine_service_line)
    logging.getLogger("apache_beam.runners.portability.local_job_service").addFilter(
        _a_worker_failure_or_not_a_worker_line)


def _not_the_apitools_notice(record) -> bool:
    return not str(record.msg).startswith("apitools not found")


def _not_a_routine_service_line(record) -> bool:
    return not str(record.msg).startswith(("Really starting service", "Really destroying service"))


def _a_worker_failure_or_not_a_worker_line(record) -> bool:
    return record.msg != "Worker: %s" or record.levelno >= 40  # logging.ERROR


def start_job_workers_early(argv: list[str]) -> None:
    """The job's zygote, started now when ``argv`` asks for multi-processing workers: call it before importing Beam."""
    from runners.warm_workers import start_early

    start_early(argv, WORKER_PRELOAD)
