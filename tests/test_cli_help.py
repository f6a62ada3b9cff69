"""The console script shows the tool: ``--help`` lists every command, ``help CMD`` is ``CMD --help``,
``--version`` names the installed versions, and a Python without Beam gets one line saying how to run.

The help texts are read in-process (argparse, no pipeline runs); the interpreter without Beam is a real
process: a fresh virtual environment (which never sees any site-packages but its own) and, when the machine
has one, the system Python.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from pipelines import cli
from pipelines.interruption import run_command

ROOT = Path(__file__).resolve().parent.parent
# What the console script dispatches to besides the job (pipelines/cli.py), spelled out so that a command
# added there without help fails here.
COMMAND_NAMES = ("verify", "compare", "export-batch", "import-batch")


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = run_command(cli.PROG, cli.main, argv)  # what the console script runs
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)  # what Python prints for SystemExit("...")
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_help_describes_the_job_and_lists_every_command_then_the_jobs_options(capsys):
    code, out, err = run_cli(["--help"], capsys)
    assert (code, err) == (0, "")
    commands = out[out.index("commands:"):out.index("The job's options:")]
    assert "(none)" in commands and "run the job" in commands
    for name in (*COMMAND_NAMES, "help", "--version"):
        assert re.search(rf"^  {re.escape(name)}\b", commands, re.M), name
    for command in getattr(cli, "COMMANDS", {}).values():  # one line each (wrapped), not a copy of the command's help
        assert " ".join(command.summary.split()) in " ".join(commands.split())
    assert out.index("commands:") < out.index("--transcripts") and "--max-attempts" in out  # the job's options
    assert "archive" in out[:out.index("commands:")]  # a description first


def test_every_command_the_console_script_dispatches_to_is_listed():
    source = (ROOT / "pipelines" / "cli.py").read_text()
    # Less the job itself and the module's own name (its `python -m` hand-off, pipelines.entry).
    dispatched = set(re.findall(r'"(pipelines\.\w+)"', source)) - {"pipelines.reprocess", "pipelines.cli"}
    assert set(cli.COMMANDS) == set(COMMAND_NAMES)
    assert dispatched == {command.module for command in cli.COMMANDS.values()}
    # Every module under pipelines/ with a `main(argv)` that the console script could run is one of them, the
    # job, or a tool run as `python -m` (documented in the README, not a subcommand).
    modules_with_main = {f"pipelines.{path.stem}" for path in (ROOT / "pipelines").glob("*.py")
                         if re.search(r"^def main\(", path.read_text(), re.M)}
    python_m_tools = {"pipelines.reprocess", "pipelines.demo", "pipelines.report", "pipelines.retry_economy"}
    assert modules_with_main - python_m_tools - {"pipelines.cli"} <= dispatched


@pytest.mark.parametrize("name", COMMAND_NAMES)
def test_help_cmd_prints_what_cmd_help_prints(name, capsys):
    via_help = run_cli(["help", name], capsys)
    direct = run_cli([name, "--help"], capsys)
    assert via_help == direct
    code, out, err = direct
    assert (code, err) == (0, "")
    assert f"usage: notarius-reprocess {name}" in out  # that command's own help, not the overview
    assert "commands:" not in out


def test_help_alone_prints_the_top_level_help(capsys):
    assert run_cli(["help"], capsys) == run_cli(["--help"], capsys)


@pytest.mark.parametrize("argv", [["help", "nope"], ["help", "verify", "compare"], ["help", "--version"]])
def test_an_unknown_help_topic_is_one_line_naming_the_commands(argv, capsys):
    code, out, err = run_cli(argv, capsys)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    for name in COMMAND_NAMES:
        assert name in err


def test_a_misspelt_command_is_named_with_its_near_miss(capsys):
    code, out, err = run_cli(["verfy", "out/run1"], capsys)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "did you mean verify?" in err


def test_version_names_this_package_and_beam_from_their_metadata(capsys):
    import apache_beam.version

    code, out, err = run_cli(["--version"], capsys)
    assert (code, err) == (0, "")
    assert out.startswith(f"notarius-reprocess {metadata.version('notarius-reprocess')} ")
    assert f"Apache Beam {apache_beam.version.__version__}" in out
    assert out.count("\n") == 1


def test_the_console_script_prints_the_same_help_in_its_own_process():
    script = Path(sys.executable).parent / "notarius-reprocess"
    if not script.exists():
        pytest.skip("the console script is not installed beside this Python")
    runs = [subprocess.run([str(script), *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
            for argv in (["help", "compare"], ["compare", "--help"])]
    assert runs[0].returncode == runs[1].returncode == 0
    assert runs[0].stdout == runs[1].stdout and "usage: notarius-reprocess compare" in runs[0].stdout


# --- a Python without Beam ---------------------------------------------------------------------------------

def entry_modules() -> list[str]:
    """Every module under pipelines/ meant to be run (``python -m pipelines.X``)."""
    return sorted(f"pipelines.{path.stem}" for path in (ROOT / "pipelines").glob("*.py")
                  if 'if __name__ == "__main__":' in path.read_text())


def lacks_beam(python: str) -> bool:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('apache_beam') is not None)"
    try:
        return subprocess.run([python, "-E", "-s", "-c", probe], capture_output=True, timeout=60).returncode == 0
    except OSError:
        return False


@pytest.fixture(scope="module")
def pythons_without_beam(tmp_path_factory) -> list[str]:
    # A fresh venv sees no site-packages but its own (empty): it lacks Beam on any machine.
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    found = [str(venv / "bin" / "python")]
    if os.path.exists("/usr/bin/python3") and lacks_beam("/usr/bin/python3"):
        found.append("/usr/bin/python3")  # the system Python a user would type `python3` for
    assert lacks_beam(found[0])
    return found


@pytest.mark.parametrize("module", entry_modules())
def test_a_python_without_beam_is_told_in_one_line_how_to_run(module, pythons_without_beam):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    for python in pythons_without_beam:
        # -E -s: nothing from the environment or the user's site; the checkout is found as the working directory.
        proc = subprocess.run([python, "-E", "-s", "-m", module, "--help"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 1, (python, proc.stderr)
        assert proc.stdout == ""
        assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, (python, proc.stderr)
        assert "apache_beam is not installed in this Python" in proc.stderr
        assert "make install" in proc.stderr and ".venv/bin/python" in proc.stderr


def test_importing_the_package_without_beam_is_left_to_python(pythons_without_beam):
    """Only a command is refused: a library importing pipelines/ gets Python's own ImportError (no exit)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([pythons_without_beam[0], "-E", "-s", "-c", "import pipelines; print('imported')"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, "imported\n"), proc.stderr
