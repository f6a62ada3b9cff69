"""Where a command starts and how it ends (issue 39).

A command's process does its first steps in ``pipelines.entry`` (signals, Beam's notices, the job's warm
workers); importing any module of ``pipelines/`` does none of it. Library code raises the project's errors
(``domain.errors``); the console entry point (``pipelines.interruption.run_command``) alone turns one into
the command's line and exit code, in the name of the command it ended.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from domain.errors import NotariusError, Refused
from pipelines.interruption import command_named, run_command
from pipelines.options import HelpShown, OptionsError

ROOT = Path(__file__).resolve().parent.parent

# Imports every module of pipelines/ in a process that looks like a command's (its argv asks for two warm
# workers, its orig_argv names a command) and says what changed: signal handlers, log filters, child processes.
IMPORT_EVERYTHING = r"""
import importlib, json, logging, os, pkgutil, signal, sys

sys.orig_argv = [sys.executable, "-m", "pipelines.reprocess"]
sys.argv = ["-m", "--direct_running_mode=multi_processing", "--direct_num_workers=2"]
signals = (signal.SIGINT, signal.SIGTERM)
before = {s: signal.getsignal(s) for s in signals}
import pipelines
names = sorted(m.name for m in pkgutil.iter_modules(pipelines.__path__, "pipelines."))
for name in names:
    importlib.import_module(name)


def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rpartition(")")[2].split()[1])
    except OSError:
        return None


loggers = [logging.getLogger()] + [logger for logger in logging.Logger.manager.loggerDict.values()
                                   if isinstance(logger, logging.Logger)]
print(json.dumps({
    "imported": names,
    "handlers": [int(s) for s in signals if signal.getsignal(s) is not before[s]],
    "filtered": sorted(logger.name for logger in loggers if logger.filters),
    "children": [pid for pid in os.listdir("/proc") if pid.isdigit() and parent_of(pid) == os.getpid()],
}))
"""


def test_importing_every_module_of_pipelines_starts_nothing():
    """No signal handler, no log filter, no process: a test, a REPL or a library that imports a command module
    gets names, nothing more (before: the package installed filters, and handlers in a command's process)."""
    done = subprocess.run([sys.executable, "-c", IMPORT_EVERYTHING], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=True)
    seen = json.loads(done.stdout.splitlines()[-1])
    assert {"pipelines.reprocess", "pipelines.cli", "pipelines.entry", "pipelines.demo"} <= set(seen["imported"])
    assert seen["handlers"] == [] and seen["filtered"] == [] and seen["children"] == [], seen


def test_an_error_is_said_in_the_name_of_the_command_it_ended(capsys):
    @command_named("inner")
    def inner(argv):
        raise Refused("why it stopped")

    @command_named("outer")
    def outer(argv):
        return inner(argv)  # a command run by another (the demo runs the job, the report runs compare)

    with pytest.raises(SystemExit) as ended:
        run_command("entry", outer, [])
    assert ended.value.code == "inner: why it stopped"  # printed by Python on stderr, exit status 1
    with pytest.raises(SystemExit) as ended:
        run_command("entry", lambda argv: (_ for _ in ()).throw(OptionsError("--x is wrong")), [])
    assert ended.value.code == "entry: --x is wrong"  # not marked: the entry point's own name
    assert capsys.readouterr().err == ""


def test_the_exit_code_and_the_line_are_the_errors():
    class Unhappy(NotariusError):
        exit_code = 3

    def ends(error):
        def main(argv):
            raise error
        return main

    with pytest.raises(SystemExit) as ended:
        run_command("prog", ends(Refused("the whole line", names_the_command=False)), [])
    assert ended.value.code == "the whole line"
    with pytest.raises(SystemExit) as ended:
        run_command("prog", ends(HelpShown()), [])
    assert ended.value.code == 0  # --help answered: nothing more said
    with pytest.raises(SystemExit) as ended:
        run_command("prog", ends(Unhappy("three")), [])
    assert ended.value.code == 3


def test_an_error_of_ours_is_said_as_it_is_but_any_other_is_left_to_python():
    def main(argv):
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        run_command("prog", main, [])


def test_every_command_module_names_itself_as_the_console_script_dispatches_it():
    """The console script runs ``notarius-reprocess CMD`` as CMD's module: its errors are named
    ``notarius-reprocess CMD``, the name its own ``PROG`` says (and ``python -m`` says too)."""
    import importlib

    from pipelines import cli

    for name, command in cli.COMMANDS.items():
        assert importlib.import_module(command.module).PROG == f"{cli.PROG} {name}", name
