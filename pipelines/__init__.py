"""Entry points and their options.

Two of Beam's log records say nothing an operator needs, and would be the first
lines they read around any error of ours, so they are dropped (every other record
passes):

- importing Beam without Google's optional ``apitools`` logs a warning on the root
  logger ("apitools not found, and bigquery client libraries are not available");
- every job-server run (Flink, the portable runner) logs "Really starting service"
  and, at exit, "Really destroying service" at WARNING: routine start and stop, not
  a problem. A service that fails says so through the runner's error.
"""

import logging


def _not_the_apitools_notice(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("apitools not found")


def _not_a_routine_service_line(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(("Really starting service", "Really destroying service"))


logging.getLogger().addFilter(_not_the_apitools_notice)
logging.getLogger("apache_beam.utils.subprocess_server").addFilter(_not_a_routine_service_line)


def _our_command() -> str | None:
    """The command this process runs, when it is one of ours (``python -m pipelines.X`` or the console
    script); None otherwise (a test run, an importing library)."""
    import os
    import sys

    argv = getattr(sys, "orig_argv", [])
    if len(argv) >= 3 and argv[1] == "-m" and argv[2].startswith("pipelines."):
        return "notarius-reprocess" if argv[2] == "pipelines.cli" else f"python -m {argv[2]}"
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


_until_the_command_takes_signals()
