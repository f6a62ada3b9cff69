"""Console script ``notarius-reprocess``.

With no command it runs the reprocess job with its contract §6 flags; the commands
around it are in ``COMMANDS`` (``notarius-reprocess --help`` lists them all,
``notarius-reprocess help CMD`` shows one's options).

Each entry point is imported only when it runs: every Beam PipelineOptions
subclass joins one shared flag parser, so a job's flags must not be visible to
another job's run.
"""

from __future__ import annotations

if __name__ == "__main__":  # `python -m pipelines.cli`: its first steps, then this module imported as itself
    from pipelines.entry import run_module

    run_module("pipelines.cli")

import difflib
import importlib
import sys
from dataclasses import dataclass

from domain.errors import Refused
from pipelines.interruption import command_named, run_command
from runners.collector import freeze_for_exit

PROG = "notarius-reprocess"


@dataclass(frozen=True)
class Command:
    module: str  # its ``main(argv)`` runs the command; ``--help`` prints its options
    summary: str  # the one line --help shows


COMMANDS = {
    "verify": Command("pipelines.verify", "check a run (or comparison) folder against its manifest: files, sizes, "
                      "sha256, rows, conservation"),
    "compare": Command("pipelines.compare", "compare two run folders that verify, slot by slot: regressions, fixes, "
                       "records changed"),
    "export-batch": Command("pipelines.batch_export", "turn a run's retry, refresh and judge requests into provider "
                            "batch request files"),
    "import-batch": Command("pipelines.batch_import", "turn provider batch result files into the next run's "
                            "candidates (and judge verdicts)"),
}

OVERVIEW = f"""\
usage: {PROG} [COMMAND] [OPTIONS]

Re-process an archive of LLM extraction output for D&D transcripts (an Apache
Beam batch job): every candidate is checked under the current policy, each
still-failing chunk gets one retry request with correction guidance, and the
canonical artifacts, evaluations, dead letters and a manifest proving that no
record was lost are written under --output.

commands:
  (none)        run the job: --transcripts GLOB --candidates GLOB --output DIR
                (its options below)
{{commands}}
  help [CMD]    this text, or CMD's options (what CMD --help prints)
  --version     this package's version, Apache Beam's and Python's

The job's options:
"""


def overview() -> str:
    import textwrap

    lines = [textwrap.fill(command.summary, width=79, initial_indent=f"  {name:<14}", subsequent_indent=" " * 16)
             for name, command in COMMANDS.items()]
    return OVERVIEW.format(commands="\n".join(lines))


def version_line() -> str:
    """From the installed distributions' metadata: importing Beam to ask it would take a second."""
    import platform
    from importlib import metadata

    def installed(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "(not installed)"

    return (f"{PROG} {installed('notarius-reprocess')} (Apache Beam {installed('apache-beam')}, "
            f"Python {platform.python_version()})")


def main(argv: list[str] | None = None) -> int:
    """The command ``argv`` names (the job without one); what ends it is said by the entry point's
    ``run_command`` (``console_main``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return _dispatch(argv)


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] == "help":
        return _help(argv[1:])
    if argv and argv[0] in COMMANDS:
        return importlib.import_module(COMMANDS[argv[0]].module).main(argv[1:])
    if argv and not argv[0].startswith("-"):
        _refuse_a_misspelt_command(argv[0])
    if "--version" in argv:
        print(version_line())
        return 0
    from pipelines.options import help_text, wants_help

    if wants_help(argv):
        print(overview() + help_text(PROG), end="")
        return 0
    from pipelines.entry import start_job_workers_early

    start_job_workers_early(argv)  # before Beam's import below: the zygote imports meanwhile
    from pipelines import reprocess

    return reprocess.main(argv)


def _known_commands() -> str:
    return ", ".join([*COMMANDS, "help"])


@command_named(f"{PROG} help")
def _help(names: list[str]) -> int:
    """``help``: the top-level text; ``help CMD``: exactly what ``CMD --help`` prints (it runs that)."""
    if not names or names == ["help"]:
        return _dispatch(["--help"])
    if len(names) == 1 and names[0] in COMMANDS:
        return _dispatch([names[0], "--help"])
    raise Refused(f"no command {' '.join(names)!r}; the commands are {_known_commands()} (the job itself: {PROG} --help)")


def _refuse_a_misspelt_command(word: str) -> None:
    """The job takes no positional argument: a first word close to a command's name is that command misspelt.
    Any other word is left to the job's own check (a stray word, often a glob the shell expanded)."""
    close = difflib.get_close_matches(word, [*COMMANDS, "help"], n=1)
    if close:
        raise Refused(f"no command {word!r} (did you mean {close[0]}?); the commands are {_known_commands()}")


def console_main() -> int:
    """``main`` through the console entry point, in a process that ends with it (without the first steps of
    ``pipelines.entry.console_main``, the console script)."""
    # A signal before a command holds its folder (during imports, say) is one line too; after: pipelines.guards.
    return freeze_for_exit(run_command(PROG, main))

