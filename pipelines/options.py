"""Command-line options of the reprocess job, declared in one place.

``JOB_OPTIONS`` is the job's own flags: the Beam options class, the bounds
check and the unknown-flag check all read it, so a new flag is one row.
Beam's own options (``--runner``, ``--direct_num_workers``, ...) pass through;
anything no options class declares is an error before any work starts.
"""

from __future__ import annotations

import argparse
import difflib
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions, _BeamArgumentParser

from domain.errors import NotariusError
from domain.families import FAMILIES
from domain.revision import MAX_ATTEMPT_NUMBER
from runners.job_service import (DEFAULT_WAIT_S, JOB_SERVER_RUNNERS, JobServiceUnreachable, external_job_endpoint,
                                 wait_for_job_service)
from transforms.files import OUTPUT_FORMATS, dangling_links, is_local, literal_pattern, matching_files

DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024
# The largest integer any output (Avro long, the manifest's JSON through orjson) can hold.
INT64_MAX = 2**63 - 1


class OptionsError(NotariusError, ValueError):
    """A command line the job refuses; its text is the one line shown to the operator."""


class HelpShown(NotariusError):
    """``--help`` was answered: its text is printed, and the command ends there, exit 0, with nothing more
    said (as argparse ends, but through the command's entry point: ``pipelines.interruption.run_command``)."""

    exit_code = 0

    def line(self, prog: str) -> None:
        return None


@dataclass(frozen=True)
class JobOption:
    flag: str  # "--max-attempts"; the underscore spelling is accepted too
    help: str
    default: Any = None
    type: Any = str
    choices: tuple[str, ...] | None = None
    minimum: float | None = None  # numeric options: the smallest value that makes sense
    maximum: float | None = None  # numeric options: the largest (integers: at most INT64_MAX in any case)
    switch: bool = False  # a flag without a value
    required: bool = False  # checked by check_values, not argparse (see ReprocessOptions)
    non_empty: bool = False  # a string that must hold more than blanks (a model name)
    existing_file: bool = False  # a path that must name a readable file, not a folder
    many: bool = False  # one or more values (a list)

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
              choices=OUTPUT_FORMATS),
    JobOption("--max-attempts", "Producer attempts per slot before it is exhausted (default 3).", default=3,
              type=int, minimum=1, maximum=MAX_ATTEMPT_NUMBER),
    JobOption("--families", "Comma-separated family keys to process; others are counted as filtered."),
    JobOption("--refresh-stale", "Write one refresh request per slot that rests only on attempts made under an "
                                 "earlier prompt or schema (contract §6.1): a new extraction under the current prompt.",
              default=False, switch=True),
    JobOption("--judges", "Semantic judges to run (contract §4.3, docs/judges.md): comma-separated judge names, or all "
                          "(default: none, the deterministic validators alone)."),
    JobOption("--verdicts", "Optional glob of verdict records (the judges' answers, import-batch's verdicts.jsonl; "
                            "JSON Lines, .gz, Avro or Parquet) to apply."),
    JobOption("--max-judge-attempts", "Judge requests per attempt and judge without a usable answer before the "
                                      "attempt is decided by the rules alone (default 2).", default=2, type=int,
              minimum=1, maximum=100),
    JobOption("--max-record-bytes", "Records larger than this become dead letters (default 8 MiB).",
              default=DEFAULT_MAX_RECORD_BYTES, type=int, minimum=1),
    JobOption("--progress-seconds", "Log progress on stderr at most this often, in seconds (default 5; 0: never).",
              default=5.0, type=float, minimum=0),
    JobOption("--overwrite", "Replace the output folder's earlier contents (removed before this run writes).",
              default=False, switch=True),
)


# --- prices (contract §6.4): one flag and one reader for every command that states money ------------------

PRICES_OPTION = JobOption(
    "--prices", "Your prices per provider/model (JSON, docs/batch.md): money beside the tokens, the batch discount "
                "taken off batch traffic. None are built in; a model the file lacks is named and its cost left "
                "unknown, never zero.", existing_file=True)


def read_prices(path: str):
    """The operator's price table (``domain.batch.prices``); OptionsError (one line, nothing written) when the
    file is not one."""
    from apache_beam.io.filesystems import FileSystems

    from domain.batch.prices import PricesError, parse_prices

    with FileSystems.open(path) as handle:
        data = handle.read()
    try:
        return parse_prices(data)
    except PricesError as exc:
        raise OptionsError(f"--prices {path!r}: {exc}") from None


def parse_choices(value: str | None, known, flag: str, noun: str) -> frozenset[str] | None:
    """``FLAG a,b`` -> the chosen names (None: all); a list naming nothing, or an unknown name, stops the command."""
    if value is None:
        return None
    chosen = frozenset(part.strip() for part in value.split(",") if part.strip())
    if not chosen:
        raise OptionsError(f"{flag} {value!r} names no {noun}; known: {', '.join(sorted(known))}")
    unknown = sorted(chosen - set(known))
    if unknown:
        raise OptionsError(f"{flag}: unknown {noun} {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return chosen


def required_files(flag: str, pattern: str) -> list[str]:
    """The files an input pattern matches; none stops the command (a mistyped pattern would read nothing),
    and so do a pattern naming a folder (it would be read as one unreadable file) and a link it matches to a
    file that is not there (Beam's match would leave it out: an input lost without a word)."""
    dangling = dangling_links(pattern)
    if dangling:
        raise OptionsError(f"{flag} {pattern!r} matches {len(dangling)} link(s) to a file that does not exist, "
                           f"such as {dangling[0]}: restore or remove them")
    found = matching_files(pattern)
    if not found:
        raise OptionsError(f"{flag} {pattern!r} matches no files")
    folders = [path for path in found if is_local(path) and os.path.isdir(path)]
    if folders:
        raise OptionsError(f"{flag} {pattern!r} names a folder; give a pattern of its files, such as "
                           f"{folders[0].rstrip('/')}/*")
    return found


def parse_families(value: str | None) -> frozenset[str] | None:
    """``--families a,b`` -> the chosen family keys (None: all); unknown keys stop the command."""
    return parse_choices(value, FAMILIES, "--families", "family")


def declared_judges() -> dict[str, str]:
    """Judge name -> the family that declares it (contract §4.3: judges are declared with their family)."""
    return {judge.name: spec.key for spec in FAMILIES.values() for judge in spec.judges}


def parse_judges(value: str | None) -> frozenset[str]:
    """``--judges a,b`` or ``all`` -> the chosen judge names (empty: none); unknown names stop the command."""
    if value is None:
        return frozenset()
    if value.strip() == "all":
        return frozenset(declared_judges())
    return parse_choices(value, declared_judges(), "--judges", "judge") or frozenset()


class JobPipelineOptions(PipelineOptions):
    """Beam's options, with one view per options class, made the first time it is asked for.

    Why: Beam asks the pipeline's options for a view hundreds of times while it builds and translates a
    graph (every type-hint check, every apply), and each new view builds an argparse parser for its
    class and parses the flags again: about 250 parsers per run of the job. A view holds nothing of
    its own (every view of one options object reads and writes its shared values), so the view made
    once is the view made each time."""

    def view_as(self, cls):
        views = self.__dict__.setdefault("_views", {})  # not an option: PipelineOptions.__setattr__ refuses it
        view = views.get(cls)
        if view is None:
            view = views[cls] = super().view_as(cls)
        return view

    def __getstate__(self):
        # A copy (Beam's Pipeline deep-copies its options) or a pickle makes its own views: copying
        # them would copy every view's parsed flags.
        return {name: value for name, value in super().__getstate__().items() if name != "_views"}


class ReprocessOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser) -> None:
        # Not argparse-required: Beam parses every loaded PipelineOptions subclass with one
        # parser, so a required flag here would break any other pipeline in the process.
        add_options(parser, JOB_OPTIONS)


# Every command that runs a Beam pipeline: how long a job server named by --job_endpoint may take to answer.
JOB_SERVICE_OPTIONS: tuple[JobOption, ...] = (
    JobOption("--job-endpoint-wait", f"With --job_endpoint: seconds to wait for that job server to answer before "
                                     f"giving up (default {DEFAULT_WAIT_S:g}).",
              default=DEFAULT_WAIT_S, type=float, minimum=1),
)


class JobServiceOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser) -> None:
        add_options(parser, JOB_SERVICE_OPTIONS)


def help_text(prog: str) -> str:
    """This job's options (Beam's own parser would list only ``-h``)."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog, add_help=False, epilog="Any Beam option passes through (--runner, "
                                     "--direct_num_workers, ...). With no --runner the job runs in-process.")
    ReprocessOptions._add_argparse_args(parser)  # pylint: disable=protected-access
    JobServiceOptions._add_argparse_args(parser)  # pylint: disable=protected-access
    return parser.format_help()


def reachable_job_service(options: PipelineOptions) -> None:
    """With a job-server runner and ``--job_endpoint``: wait at most ``--job-endpoint-wait`` seconds for that
    job server to answer (runners.job_service); OptionsError naming the endpoint if it does not."""
    endpoint = external_job_endpoint(options)
    if endpoint is None:
        return
    try:
        wait_for_job_service(endpoint, options.view_as(JobServiceOptions).job_endpoint_wait)
    except JobServiceUnreachable as exc:
        raise OptionsError(str(exc)) from None


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


def _job_flags() -> list[str]:
    return [spelling for option in JOB_OPTIONS for spelling in option.spellings]


def _service_flags() -> list[str]:
    return [spelling for option in JOB_SERVICE_OPTIONS for spelling in option.spellings]


def check_arguments(argv: Sequence[str], runner: str | None = None, job_flags: Sequence[str] | None = None) -> list[str]:
    """Refuse an unknown flag or a stray word before anything runs.

    ``job_flags``: the command's own flags, for the near-miss hint (default: the reprocess
    job's). With a job-server runner, an unknown flag that is not a near miss of one of them
    is passed on to the job server (which refuses what it does not know either); those flags
    are returned so the caller can say so."""
    known_flags = [*(job_flags if job_flags is not None else _job_flags()), *_service_flags()]
    unknown = unknown_arguments(argv)
    passed_on: list[str] = []
    # A job server declares options of its own (Java pipeline options such as Flink's
    # --checkpointingInterval), which Python knows only when the job is submitted.
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


def _value_problem(option: JobOption, value: Any) -> str | None:
    """Why a parsed value of ``option`` cannot be used, or None."""
    if value is None or option.switch:
        return None
    if option.type in (int, float):
        if option.type is float and not math.isfinite(value):
            return f"{option.flag} must be a finite number (got {value})"
        if option.minimum is not None and value < option.minimum:
            return f"{option.flag} must be at least {option.minimum:g} (got {value})"
        maximum = option.maximum if option.maximum is not None else (INT64_MAX if option.type is int else None)
        if maximum is not None and value > maximum:
            return f"{option.flag} must be at most {maximum:g} (got {value})" if option.type is float else \
                f"{option.flag} must be at most {maximum} (got {value})"
    if (option.non_empty or option.required) and isinstance(value, str) and not value.strip():
        return f"{option.flag} must not be empty"
    if option.existing_file:
        if is_local(value) and os.path.isdir(value):
            return f"{option.flag} {value!r} is a folder; name a file"
        if not (os.path.exists(value) if is_local(value) else matching_files(literal_pattern(value))):
            return f"{option.flag} {value!r}: no such file"
    return None


def refuse_repeated(argv: Sequence[str], table: Sequence[JobOption]) -> None:
    """An option given twice (``--candidates A --candidates B``): argparse would keep the last one without a
    word, and the run would read half of what was meant."""
    for option in table:
        given = [arg for arg in argv if arg in option.spellings or arg.split("=", 1)[0] in option.spellings]
        if len(given) > 1:
            hint = " (give all its values after one of them)" if option.many else \
                " (one value only: a glob can name several files)"
            raise OptionsError(f"{option.flag} is given {len(given)} times{hint}")


def check_option_values(values: Any, table: Sequence[JobOption]) -> None:
    """Required options present and every value usable (bounds, finite floats, non-empty strings,
    files that exist): the one check every command's table goes through. ``values``: an object
    with one attribute per option (a PipelineOptions view, an argparse Namespace)."""
    missing = [o.flag for o in table if o.required and getattr(values, o.dest) is None]
    if missing:
        raise OptionsError(f"missing required option(s): {', '.join(missing)}")
    for option in table:
        value = getattr(values, option.dest)
        for one in (value if option.many and value is not None else [value]):
            problem = _value_problem(option, one)
            if problem:
                raise OptionsError(problem)


def check_values(opts: ReprocessOptions) -> None:
    """The job's options: the table's checks, and ``--families`` naming known families."""
    check_option_values(opts, JOB_OPTIONS)
    parse_families(opts.families)
    judges = parse_judges(opts.judges)
    if opts.verdicts is not None and not judges:
        raise OptionsError("--verdicts needs --judges: name the judges whose verdicts to apply (or --judges all)")


class _CommandParser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print its usage and exit 2; one line and exit 1, as the job
        raise OptionsError(message)


def add_options(parser: argparse.ArgumentParser, table: Sequence[JobOption]) -> None:
    """Declare a table's options on an argparse parser."""
    for option in table:
        if option.switch:
            parser.add_argument(*option.spellings, dest=option.dest, action="store_true", default=option.default,
                                help=option.help)
        else:
            parser.add_argument(*option.spellings, dest=option.dest, default=option.default, type=option.type,
                                choices=option.choices, help=option.help, **({"nargs": "+"} if option.many else {}))


def command_parser(prog: str, description: str, table: Sequence[JobOption]) -> argparse.ArgumentParser:
    """The parser of a subcommand whose options are a table: mistakes raise OptionsError."""
    parser = _CommandParser(prog=prog, description=description, allow_abbrev=False)
    add_options(parser, table)
    return parser


def parse_command(prog: str, description: str, table: Sequence[JobOption], argv: Sequence[str],
                  known_only: bool = False):
    """Parse and check a subcommand's flags; an operator mistake is an OptionsError (its line: "PROG: why"),
    ``--help`` prints the help and raises HelpShown.

    ``known_only``: return (values, the arguments left for Beam) instead of refusing them."""
    parser = command_parser(prog, description, table)
    if wants_help(argv):
        parser.print_help()
        raise HelpShown()
    refuse_repeated(argv, table)
    if known_only:
        values, rest = parser.parse_known_args(list(argv))
    else:
        values, rest = parser.parse_args(list(argv)), []
    check_option_values(values, table)
    return (values, rest) if known_only else values


def beam_options(prog: str, beam_args: Sequence[str], job_flags: Sequence[str], default_runner: str,
                 preflight=None) -> PipelineOptions:
    """A Beam subcommand's pipeline options: the arguments its own parser left must be Beam's (an unknown
    flag stops it; with a job-server runner, one that is not a near miss of ``job_flags`` is passed on,
    and said); ``preflight()`` runs before the job server is waited for; no --runner: ``default_runner``.
    A mistake is an OptionsError."""
    options = JobPipelineOptions(list(beam_args))
    standard = options.view_as(StandardOptions)
    # What is neither a flag of the command nor a Beam option would otherwise be dropped by Beam without a word.
    passed_on = check_arguments(beam_args, standard.runner, job_flags=job_flags)
    refuse_repeated(beam_args, JOB_SERVICE_OPTIONS)
    check_option_values(options.view_as(JobServiceOptions), JOB_SERVICE_OPTIONS)
    if preflight is not None:
        preflight()
    reachable_job_service(options)  # last: the only check that may take a while
    if passed_on:
        print(f"{prog}: passing {', '.join(passed_on)} on to the runner's job server", file=sys.stderr)
    if not standard.runner:
        standard.runner = default_runner
    return options
