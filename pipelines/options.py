"""Command-line options of the reprocess job, declared in one place.

``JOB_OPTIONS`` is the job's own flags: the Beam options class, the bounds
check and the unknown-flag check all read it, so a new flag is one row.
Beam's own options (``--runner``, ``--direct_num_workers``, ...) pass through;
anything no options class declares is an error before any work starts.
"""

from __future__ import annotations

import argparse
import difflib
from dataclasses import dataclass
from typing import Any, Sequence

from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

from domain.families import FAMILIES
from transforms.files import matching_files

DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024


class OptionsError(ValueError):
    """A command line the job refuses; its text is the one line shown to the operator."""


@dataclass(frozen=True)
class JobOption:
    flag: str  # "--max-attempts"; the underscore spelling is accepted too
    help: str
    default: Any = None
    type: Any = str
    choices: tuple[str, ...] | None = None
    minimum: int | None = None  # integer options: the smallest value that makes sense
    switch: bool = False  # a flag without a value
    required: bool = False  # checked by check_values, not argparse (see ReprocessOptions)

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def spellings(self) -> tuple[str, ...]:
        underscored = "--" + self.dest
        return (self.flag,) if underscored == self.flag else (self.flag, underscored)


JOB_OPTIONS: tuple[JobOption, ...] = (
    JobOption("--transcripts", required=True, help="Glob of transcript files (.jsonl, .jsonl.gz, .avro)."),
    JobOption("--candidates", required=True, help="Glob of raw model-candidate files."),
    JobOption("--output", required=True,
              help="Output directory (local, gs://, s3://); it must be empty or absent (see --overwrite)."),
    JobOption("--prior-registries", "Optional glob of canonical registry artifacts from an earlier run (JSON Lines, "
                                    "Avro or Parquet); their names count for occurrence membership."),
    JobOption("--output-format", "Format of the part-* files (default avro).", default="avro",
              choices=("avro", "jsonl", "parquet")),
    JobOption("--max-attempts", "Producer attempts per slot before it is exhausted (default 3).", default=3,
              type=int, minimum=1),
    JobOption("--families", "Comma-separated family keys to process; others are counted as filtered."),
    JobOption("--refresh-stale", "Write one refresh request per slot that rests only on attempts made under an "
                                 "earlier prompt or schema (SPEC 6.1): a new extraction under the current prompt.",
              default=False, switch=True),
    JobOption("--max-record-bytes", "Records larger than this become dead letters (default 8 MiB).",
              default=DEFAULT_MAX_RECORD_BYTES, type=int, minimum=1),
    JobOption("--progress-seconds", "Log progress on stderr at most this often, in seconds (default 5; 0: never).",
              default=5.0, type=float, minimum=0),
    JobOption("--overwrite", "Replace the output folder's earlier contents (removed before this run writes).",
              default=False, switch=True),
)


def parse_choices(value: str | None, known, flag: str, noun: str) -> frozenset[str] | None:
    """``FLAG a,b`` -> the chosen names (None: all); a list naming nothing, or an unknown name, stops the command."""
    if value is None:
        return None
    chosen = frozenset(part.strip() for part in value.split(",") if part.strip())
    if not chosen:
        raise SystemExit(f"{flag} {value!r} names no {noun}; known: {', '.join(sorted(known))}")
    unknown = sorted(chosen - set(known))
    if unknown:
        raise SystemExit(f"{flag}: unknown {noun} {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return chosen


def required_files(flag: str, pattern: str) -> list[str]:
    """The files an input pattern matches; none stops the command (a mistyped pattern would read nothing)."""
    found = matching_files(pattern)
    if not found:
        raise SystemExit(f"{flag} {pattern!r} matches no files")
    return found


def parse_families(value: str | None) -> frozenset[str] | None:
    """``--families a,b`` -> the chosen family keys (None: all); unknown keys stop the command."""
    return parse_choices(value, FAMILIES, "--families", "family")


class ReprocessOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser) -> None:
        # Not argparse-required: Beam parses every loaded PipelineOptions subclass with one
        # parser, so a required flag here would break any other pipeline in the process.
        for option in JOB_OPTIONS:
            if option.switch:
                parser.add_argument(*option.spellings, dest=option.dest, action="store_true", default=option.default,
                                    help=option.help)
            else:
                parser.add_argument(*option.spellings, dest=option.dest, default=option.default, type=option.type,
                                    choices=option.choices, help=option.help)


def help_text(prog: str) -> str:
    """This job's options (Beam's own parser would list only ``-h``)."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog, add_help=False, epilog="Any Beam option passes through (--runner, "
                                     "--direct_num_workers, ...). With no --runner the job runs in-process.")
    ReprocessOptions._add_argparse_args(parser)  # pylint: disable=protected-access
    return parser.format_help()


def wants_help(argv: Sequence[str]) -> bool:
    return any(arg in ("-h", "--help") for arg in argv)


class _StrictParser(_BeamArgumentParser):
    def error(self, message):  # argparse would print its usage and exit; one line is enough
        raise OptionsError(message)


def unknown_arguments(argv: Sequence[str]) -> list[str]:
    """The arguments no loaded PipelineOptions class declares (the ones Beam would only log and drop).

    A malformed value of a declared option (``--max-attempts x``) raises OptionsError."""
    parser = _StrictParser(allow_abbrev=False)
    classes: dict[str, type] = {}
    for cls in PipelineOptions.__subclasses__():  # as PipelineOptions.get_all_options collects them
        classes.setdefault(str(cls), cls)
    for cls in classes.values():
        cls._add_argparse_args(parser)  # pylint: disable=protected-access
    _, unknown = parser.parse_known_args(list(argv))
    return list(unknown)


# Runners whose job server declares options of its own (Java pipeline options such as Flink's
# --checkpointingInterval): Python knows them only when the job is submitted.
JOB_SERVER_RUNNERS = ("PortableRunner", "FlinkRunner", "SparkRunner", "PrismRunner")


def _job_flags() -> list[str]:
    return [spelling for option in JOB_OPTIONS for spelling in option.spellings]


def parser_flags(parser: argparse.ArgumentParser) -> list[str]:
    """Every long flag an argparse parser declares (a command whose own flags are not PipelineOptions)."""
    return [flag for action in parser._actions for flag in action.option_strings if flag.startswith("--")]


def check_arguments(argv: Sequence[str], runner: str | None = None, job_flags: Sequence[str] | None = None) -> list[str]:
    """Refuse an unknown flag or a stray word before anything runs.

    ``job_flags``: the command's own flags, for the near-miss hint (default: the reprocess
    job's). With a job-server runner, an unknown flag that is not a near miss of one of them
    is passed on to the job server (which refuses what it does not know either); those flags
    are returned so the caller can say so."""
    known_flags = list(job_flags) if job_flags is not None else _job_flags()
    unknown = unknown_arguments(argv)
    passed_on: list[str] = []
    job_server = bool(runner) and runner.rsplit(".", 1)[-1] in JOB_SERVER_RUNNERS
    for n, arg in enumerate(unknown):
        if arg.startswith("-"):
            name = arg.split("=", 1)[0]
            near = difflib.get_close_matches(name, known_flags, n=1, cutoff=0.75)
            if job_server and not near:
                passed_on.append(name)
                continue
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise OptionsError(f"unknown option {name}{hint}: see --help for this job's options; Beam's own options "
                               f"pass through")
        if job_server and n and unknown[n - 1].startswith("-") and "=" not in unknown[n - 1]:
            continue  # the value of a flag passed on
        raise OptionsError(f"unexpected argument {arg!r}: every value belongs to an option (--name value); "
                           f"quote a glob so that the shell does not expand it")
    return passed_on


def check_values(opts: ReprocessOptions) -> None:
    """Required flags present and every numeric flag within its bounds."""
    missing = [o.flag for o in JOB_OPTIONS if o.required and not getattr(opts, o.dest)]
    if missing:
        raise OptionsError(f"missing required option(s): {', '.join(missing)}")
    for option in JOB_OPTIONS:
        value = getattr(opts, option.dest)
        if option.minimum is not None and value < option.minimum:
            raise OptionsError(f"{option.flag} must be at least {option.minimum} (got {value})")
    parse_families(opts.families)
