"""Run integrity: the manifest's listing of every output file, and a folder checked against it.

The manifest is a run's commit record: it is written after every output file
is final and lists each one (path relative to the folder, format, byte size,
sha256, row count), grouped by output. A folder *verifies* when every listed
file is there with the same size, hash and row count, no ``part-*`` file is
unlisted, every output the manifest declares (one per family it counts, and
the three beside them) is listed with at least one file, the listed rows agree
with the manifest's counts, those counts agree with each other, and
conservation holds. A manifest of any shape gives a verdict, never an
exception: each problem is one line. Pure: the caller reads the files; this
module only compares.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

MANIFEST_NAME = "manifest.json"
FILES_KEY = "files"
PART_PREFIX = "part-"
# The job's outputs, a folder each: one per family under artifacts/, and these beside it.
ARTIFACTS = "artifacts"
NON_ARTIFACT_OUTPUTS = ("retry_requests", "evaluations", "dead_letters")
FILE_FIELDS = ("path", "format", "bytes", "sha256", "rows")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# The job's counters and file readers are 64-bit; a larger number in a manifest is not a count it wrote.
_MAX_COUNT = 2**63 - 1
# Each conservation block (domain.manifest): its total, the parts that must add up to it, and the
# input whose files it counts, by the name unreadable_files.by_input gives that input.
CONSERVATION_BLOCKS = (
    ("conservation", "candidates_in", ("evaluations", "dead_letters", "filtered"), "candidates"),
    ("transcript_conservation", "transcripts_in", ("usable", "dead_letters"), "transcripts"),
    ("prior_registry_conservation", "prior_registries_in", ("valid", "dead_letters"), "prior_registries"),
    ("verdict_conservation", "verdicts_in", ("applied", "superseded", "unusable", "stale", "unmatched", "dead_letters"),
     "verdicts"),
)
# outputs.* as domain.manifest writes them; retry_requests/ holds the retry and the refresh requests.
OUTPUT_COUNTS = ("artifacts", "retry_requests", "refresh_requests", "judge_requests", "evaluations", "dead_letters")


class ManifestError(ValueError):
    """A manifest without a usable file listing."""


@dataclass(frozen=True)
class OutputFile:
    path: str  # relative to the run folder, "/"-separated
    format: str
    bytes: int
    sha256: str
    rows: int

    def as_row(self) -> dict:
        return {"path": self.path, "format": self.format, "bytes": self.bytes, "sha256": self.sha256,
                "rows": self.rows}


def artifact_output(family: str) -> str:
    """The output holding one family's artifacts: ``artifacts/spells``."""
    return f"{ARTIFACTS}/{family}"


def output_of(path: str) -> str:
    """The output a file belongs to: its folder (``artifacts/spells``, ``evaluations``)."""
    return path.rpartition("/")[0]


def relative_path(folder: str, path: str) -> str:
    """``path`` relative to ``folder``; a path outside it is a bug of the caller."""
    prefix = folder.rstrip("/") + "/"
    if not path.startswith(prefix):
        raise ValueError(f"{path!r} is not inside {folder!r}")
    return path[len(prefix):]


def is_part_file(path: str) -> bool:
    return path.rpartition("/")[2].startswith(PART_PREFIX)


def files_block(files: Iterable[OutputFile]) -> dict[str, list[dict]]:
    """The manifest's ``files`` block: output -> its files sorted by path."""
    grouped: dict[str, list[OutputFile]] = {}
    for f in files:
        grouped.setdefault(output_of(f.path), []).append(f)
    return {output: [f.as_row() for f in sorted(group, key=lambda f: f.path)]
            for output, group in sorted(grouped.items())}


def is_count(value: Any) -> bool:
    """A number of rows, bytes or records as the job writes one: a non-negative integer (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_COUNT


def shown(value: Any) -> str:
    """A manifest value as a problem names it: short, JSON-like, on one line."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):  # not JSON (a caller's object), or an int too long to print
        text = type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def one_line(text: str) -> str:
    """``text`` with line breaks and other unprintable characters escaped: a problem is one line."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def _safe(path: Any) -> bool:
    if (not isinstance(path, str) or not path or not path.isprintable() or path.startswith("/") or "://" in path
            or "\\" in path):
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def _listed_file(output: Any, row: Any) -> OutputFile:
    if not isinstance(row, Mapping):
        raise ManifestError(f"a file entry of {shown(output)} is {shown(row)}, not an object")
    lacking = [name for name in FILE_FIELDS if name not in row]
    if lacking:
        raise ManifestError(f"a file entry of {shown(output)} lacks {', '.join(lacking)}")
    path, fmt, size, sha256, rows = (row[name] for name in FILE_FIELDS)
    if not _safe(path) or output_of(path) != output:
        raise ManifestError(f"the manifest lists {shown(path)} under {shown(output)}: not a path inside this folder")
    if not is_part_file(path):  # the readers read part-* files only: rows in another file would count unread
        raise ManifestError(f"the manifest lists {path}: not a {PART_PREFIX}* file")
    # The writer names each file after its format (part-*.avro, .jsonl, .parquet).
    if not isinstance(fmt, str) or not fmt or not path.endswith("." + fmt):
        raise ManifestError(f"{path}: format {shown(fmt)} is not the format of its name")
    for name, value in (("bytes", size), ("rows", rows)):
        if not is_count(value):
            raise ManifestError(f"{path}: {name} is {shown(value)}, not a count")
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise ManifestError(f"{path}: sha256 is {shown(sha256)}, not a SHA-256 hex digest")
    return OutputFile(path, fmt, size, sha256, rows)


def listed_files(manifest: Any) -> dict[str, OutputFile]:
    """The files a manifest lists, by relative path; ManifestError (one line) when the listing is not usable."""
    if not isinstance(manifest, Mapping):
        raise ManifestError(f"{MANIFEST_NAME} holds {shown(manifest)}, not a JSON object")
    if FILES_KEY not in manifest:
        raise ManifestError("the manifest lists no files (written by a version without run integrity?)")
    block = manifest[FILES_KEY]
    if not isinstance(block, Mapping):
        raise ManifestError(f"the manifest's {FILES_KEY} is {shown(block)}, not an object")
    listed: dict[str, OutputFile] = {}
    for output, rows in block.items():
        if not isinstance(rows, list):
            raise ManifestError(f"the manifest's files of {shown(output)} are {shown(rows)}, not a list")
        for row in rows:
            f = _listed_file(output, row)
            if f.path in listed:
                raise ManifestError(f"the manifest lists {f.path} twice")
            listed[f.path] = f
    return listed


@dataclass(frozen=True)
class Verdict:
    files: int
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        if self.ok:
            return f"verified: {self.files} files as listed, conservation holds"
        return f"NOT VERIFIED: {len(self.problems)} problem(s)"


# --- what the manifest claims ------------------------------------------------------------------------

_ABSENT = object()


class ManifestReader:
    """Typed reads of the manifest's values. A value that is missing or of the wrong type reads as None
    and is noted, once, as a problem: each check then skips what it cannot compare."""

    def __init__(self, manifest: Mapping[str, Any]) -> None:
        self.manifest = manifest
        self.problems: dict[str, None] = {}  # in order, without repeats

    def note(self, problem: str) -> None:
        self.problems.setdefault(problem, None)

    def _value(self, keys: Sequence[Any]) -> Any:
        node: Any = self.manifest
        for depth, key in enumerate(keys):
            if not isinstance(node, Mapping):
                self.note(f"manifest: {_dotted(keys[:depth])} is {shown(node)}, not an object")
                return _ABSENT
            if key not in node:
                self.note(f"manifest: {_dotted(keys[:depth + 1])} is missing")
                return _ABSENT
            node = node[key]
        return node

    def _typed(self, keys: Sequence[Any], fits: Callable[[Any], bool], expected: str) -> Any:
        value = self._value(keys)
        if value is _ABSENT:
            return None
        if not fits(value):
            self.note(f"manifest: {_dotted(keys)} is {shown(value)}, not {expected}")
            return None
        return value

    def count(self, *keys: Any) -> int | None:
        return self._typed(keys, is_count, "a count")

    def flag(self, *keys: Any) -> bool | None:
        return self._typed(keys, lambda v: isinstance(v, bool), "true or false")

    def block(self, *keys: Any) -> Mapping | None:
        return self._typed(keys, lambda v: isinstance(v, Mapping), "an object")

    def names(self, *keys: Any) -> list[str] | None:
        return self._typed(keys, lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                           "a list of names")


# What runs made before semantic judges (contract §4.3) did not write; such a run still verifies.
_JUDGE_KEYS = ("judges", "verdict_conservation")


def _before_judges(manifest: Any) -> bool:
    """A manifest written before judges existed: none of their blocks, and no judge request count."""
    if not isinstance(manifest, Mapping) or any(key in manifest for key in _JUDGE_KEYS):
        return False
    outputs = manifest.get("outputs")
    return not (isinstance(outputs, Mapping) and "judge_requests" in outputs)


def _dotted(keys: Sequence[Any]) -> str:
    return ".".join(str(key) for key in keys)


def _contradiction(what: str, claimed: int | None, other: str, derived: int | None) -> list[str]:
    """A problem when two of the manifest's own figures (both read) disagree."""
    if claimed is None or derived is None or claimed == derived:
        return []
    return [f"the manifest contradicts itself: {what} {claimed} != {other} {derived}"]


def _sum(values: Iterable[int | None]) -> int | None:
    """The sum, or None when a value could not be read (that is a problem already)."""
    total = 0
    for value in values:
        if value is None:
            return None
        total += value
    return total


def _families(read: ManifestReader) -> list[str] | None:
    """The families the run covers: those ``outcomes`` counts (the job counts and writes every family,
    with or without --families). None when ``outcomes`` cannot be read."""
    outcomes = read.block("outcomes")
    if outcomes is None:
        return None
    families = []
    for name in outcomes:
        if isinstance(name, str) and _safe(name) and "/" not in name:
            families.append(name)
        else:
            read.note(f"manifest: outcomes counts {shown(name)}, which is not a family's name")
    families.sort()
    options = read.manifest.get("options")
    chosen = options.get("families") if isinstance(options, Mapping) else None
    if chosen is not None:
        if not (isinstance(chosen, list) and all(isinstance(name, str) for name in chosen)):
            read.note(f"manifest: options.families is {shown(chosen)}, not a list of names")
        else:
            for name in chosen:
                if name not in families:
                    read.note(f"manifest: options.families names {shown(name)}, which outcomes does not count")
    return families


def _output_problems(rows: Mapping[str, int], families: list[str] | None) -> list[str]:
    """Every output the run declares has at least one listed file (the writer gives an empty output
    one empty shard), and nothing else is listed."""
    declared = set(NON_ARTIFACT_OUTPUTS) | {artifact_output(f) for f in families or ()}
    problems = [f"missing output: {output}: the manifest lists no file of it"
                for output in sorted(declared - rows.keys())]
    for output in sorted(rows.keys() - declared):
        if families is None and output.startswith(ARTIFACTS + "/"):
            continue  # which families the run covers is not known: a problem already
        problems.append(f"undeclared output: {output}: listed, but the manifest counts nothing for it")
    return problems


def _unreadable_files(read: ManifestReader) -> tuple[dict[str, int] | None, list[str]]:
    """Unreadable input files per input (None when the block is not usable), and the block's contradictions."""
    count = read.count("unreadable_files", "count")
    paths = read.names("unreadable_files", "paths")
    listed_by_input = read.block("unreadable_files", "by_input")
    not_provable = read.names("unreadable_files", "conservation_not_provable_for")
    may_be_missing = read.flag("unreadable_files", "records_may_be_missing")
    inputs = {input_name for *_, input_name in CONSERVATION_BLOCKS}
    by_input: dict[str, int] | None = None
    if listed_by_input is not None:
        by_input = {}
        for name in listed_by_input:
            n = read.count("unreadable_files", "by_input", name)
            if name not in inputs:
                read.note(f"manifest: unreadable_files.by_input names {shown(name)}, which is not an input of the job")
            elif n == 0:  # domain.manifest names only an input that has unreadable files
                read.note(f"manifest: unreadable_files.by_input.{name} is 0, not a number of unreadable files")
            elif n is not None:
                by_input[name] = n
    problems = []
    if count is not None and paths is not None:
        problems += _contradiction("unreadable_files.count", count, "the number of unreadable_files.paths", len(paths))
    if by_input is not None:
        problems += _contradiction("unreadable_files.count", count, "the sum of unreadable_files.by_input",
                                   sum(by_input.values()))
        if not_provable is not None and sorted(not_provable) != sorted(by_input):
            problems.append("the manifest contradicts itself: unreadable_files.conservation_not_provable_for names "
                            f"{', '.join(sorted(not_provable)) or 'no input'}, unreadable_files.by_input "
                            f"{', '.join(sorted(by_input)) or 'no input'}")
    if count is not None and may_be_missing is not None and may_be_missing != (count > 0):
        problems.append(f"the manifest contradicts itself: unreadable_files.records_may_be_missing is "
                        f"{shown(may_be_missing)} with {count} unreadable file(s)")
    return by_input, problems


def _conservation_problems(read: ManifestReader, unreadable: Mapping[str, int] | None) -> list[str]:
    """Each conservation block balances and claims to hold exactly when none of its input's files was
    unreadable (a run with an unreadable input file never verifies: what it lost is unknown)."""
    paths = read.names("unreadable_files", "paths") or []
    problems = []
    older = _before_judges(read.manifest)
    for block, total_name, part_names, input_name in CONSERVATION_BLOCKS:
        if older and block in _JUDGE_KEYS:
            continue
        total = read.count(block, total_name)
        parts = [read.count(block, name) for name in part_names]
        holds = read.flag(block, "holds")
        balance = _sum(parts)
        if total is None or balance is None:
            continue
        if total != balance:
            problems.append(f"{block} does not hold: {total_name} {total} != "
                            + " + ".join(f"{name} {value}" for name, value in zip(part_names, parts)))
            continue
        not_readable = (unreadable or {}).get(input_name, 0)
        if holds is False:
            why = (f": input files could not be read to their end ({', '.join(paths[:3])})"
                   if not_readable and paths else "")
            problems.append(f"{block} is not claimed by the manifest{why}")
        elif holds is True and not_readable:
            problems.append(f"{block} claims to hold, but {not_readable} {input_name} file(s) could not be read "
                            "to their end (unreadable_files)")
    return problems


def _outcome_counts(read: ManifestReader, families: list[str]) -> tuple[list[str], dict[str, dict[str, int | None]]]:
    """The outcome names (``totals``' keys) and each family's count of each."""
    totals = read.block("totals")
    names = sorted({"accepted", "retry"} | ({k for k in totals if isinstance(k, str)} if totals is not None else set()))
    per_family: dict[str, dict[str, int | None]] = {}
    for family in families:
        entry = read.block("outcomes", family)
        per_family[family] = {name: read.count("outcomes", family, name) if entry is not None else None
                              for name in names}
        for name in entry or ():
            if totals is not None and name not in names:
                read.note(f"manifest: outcomes.{family}.{name} is counted in no total")
    return names, per_family


def _refresh_problems(read: ManifestReader, families: list[str] | None) -> tuple[int | None, list[str]]:
    """refresh.refresh_requests, and the refresh block's contradictions (totals against by_family,
    requests without --refresh-stale)."""
    refresh = read.block("refresh")
    enabled = read.flag("refresh", "refresh_stale")
    requests = read.count("refresh", "refresh_requests")
    by_family = read.block("refresh", "by_family")
    problems = []
    if refresh is not None and by_family is not None and families is not None:
        counters = sorted({"refresh_requests"} | {k for k in refresh if isinstance(k, str)
                                                  and k not in ("refresh_stale", "by_family")})
        for family in families:
            entry = read.block("refresh", "by_family", family)
            for name in entry or ():
                if name not in counters:
                    read.note(f"manifest: refresh.by_family.{family}.{name} is counted in no total")
        for name in by_family:
            if name not in families:
                read.note(f"manifest: refresh.by_family.{name} is a family outcomes does not count")
        for name in counters:
            parts = [read.count("refresh", "by_family", family, name) for family in families]
            problems += _contradiction(f"refresh.{name}", read.count("refresh", name),
                                       f"the sum of refresh.by_family.*.{name}", _sum(parts))
    if isinstance(refresh, Mapping) and "slots_on_earlier_prompt" in refresh:  # not in runs made before it
        stale, due = read.count("refresh", "slots_on_earlier_prompt"), read.count("refresh", "slots_to_refresh")
        if stale is not None and due is not None and stale > due:
            problems.append(f"the manifest contradicts itself: refresh.slots_on_earlier_prompt {stale} > "
                            f"refresh.slots_to_refresh {due} (they are some of the slots to refresh)")
    if enabled is False and requests:
        problems.append(f"the manifest contradicts itself: refresh.refresh_requests {requests} without "
                        "refresh.refresh_stale (no refresh request is written without --refresh-stale)")
    options = read.manifest.get("options")
    asked = options.get("refresh_stale", False) if isinstance(options, Mapping) else None
    if isinstance(asked, bool) and enabled is not None and asked != enabled:
        problems.append(f"the manifest contradicts itself: options.refresh_stale {shown(asked)} != "
                        f"refresh.refresh_stale {shown(enabled)}")
    return requests, problems


def _count_problems(read: ManifestReader, rows: Mapping[str, int], families: list[str] | None) -> list[str]:
    """The listed rows of each output against the manifest's count of them, and the counts against each other."""
    problems: list[str] = []

    def files_hold(output: str, claimed: int | None, detail: str = "") -> None:
        if claimed is not None and output in rows and rows[output] != claimed:  # an unlisted output: a problem already
            problems.append(f"{output}: the files hold {rows[output]} rows, the manifest counts {claimed}{detail}")

    older = _before_judges(read.manifest)
    outputs = {name: 0 if older and name == "judge_requests" else read.count("outputs", name) for name in OUTPUT_COUNTS}

    # artifacts/<family>: one row per accepted slot.
    if families is not None:
        names, per_family = _outcome_counts(read, families)
        for family in families:
            files_hold(artifact_output(family), per_family[family]["accepted"])
        for name in names:
            problems += _contradiction(f"totals.{name}", read.count("totals", name), f"the sum of outcomes.*.{name}",
                                       _sum(per_family[f][name] for f in families))
        problems += _contradiction("outputs.artifacts", outputs["artifacts"], "the sum of outcomes.*.accepted",
                                   _sum(per_family[f]["accepted"] for f in families))
        problems += _contradiction("outputs.retry_requests", outputs["retry_requests"], "the sum of outcomes.*.retry",
                                   _sum(per_family[f]["retry"] for f in families))
    artifact_outputs = [output for output in rows if output.startswith(ARTIFACTS + "/")]
    if artifact_outputs and outputs["artifacts"] is not None:
        artifact_rows = sum(rows[output] for output in artifact_outputs)
        if artifact_rows != outputs["artifacts"]:
            problems.append(f"{ARTIFACTS}: the files hold {artifact_rows} rows, "
                            f"the manifest counts {outputs['artifacts']}")

    # retry_requests/: a row per retry and per refresh request.
    refresh_requests, refresh_problems = _refresh_problems(read, families)
    problems += refresh_problems
    problems += _contradiction("outputs.refresh_requests", outputs["refresh_requests"], "refresh.refresh_requests",
                               refresh_requests)
    retries, refreshes, judge_requests = outputs["retry_requests"], outputs["refresh_requests"], outputs["judge_requests"]
    if retries is not None and refreshes is not None and judge_requests is not None:
        files_hold("retry_requests", retries + refreshes + judge_requests,
                   f" ({retries} retry + {refreshes} refresh + {judge_requests} judge requests)")

    # Judge requests: one block entry per judge of the run (options.judges), their requests adding up.
    judges = None if older else read.block("judges")
    if judges is not None:
        options = read.manifest.get("options") if isinstance(read.manifest, Mapping) else None
        run_judges = options.get("judges", []) if isinstance(options, Mapping) else None  # absent: no judges
        if run_judges is not None and not (isinstance(run_judges, list) and all(isinstance(j, str) for j in run_judges)):
            problems.append(f"manifest: options.judges is {shown(run_judges)}, not a list of names")
        elif run_judges is not None and sorted(map(str, judges)) != sorted(run_judges):
            problems.append(f"the manifest contradicts itself: judges lists {sorted(map(str, judges))}, "
                            f"options.judges {sorted(run_judges)}")
        problems += _contradiction("outputs.judge_requests", outputs["judge_requests"], "the sum of judges.*.requests",
                                   _sum(read.count("judges", name, "requests") for name in judges))

    # evaluations/: a row per candidate evaluated.
    evaluations = read.count("conservation", "evaluations")
    files_hold("evaluations", evaluations)
    problems += _contradiction("outputs.evaluations", outputs["evaluations"], "conservation.evaluations", evaluations)

    # dead_letters/: every input's dead letters.
    files_hold("dead_letters", outputs["dead_letters"])
    problems += _contradiction("outputs.dead_letters", outputs["dead_letters"],
                               "the dead letters of the conservation blocks",
                               _sum(read.count(block, "dead_letters") for block, *_ in CONSERVATION_BLOCKS))

    problems += _contradiction("inputs.candidates", read.count("inputs", "candidates"), "conservation.candidates_in",
                               read.count("conservation", "candidates_in"))
    problems += _contradiction("inputs.transcripts", read.count("inputs", "transcripts"),
                               "transcript_conservation.transcripts_in",
                               read.count("transcript_conservation", "transcripts_in"))
    return problems


# verdict_usage (contract §6.4): per judge, these totals are the sums of its by_producer cells.
USAGE_MEASURES = ("with_usage", "input_tokens", "cached_input_tokens", "cached_unknown", "output_tokens")
# A judge's verdict records: applied (pass, fail, unsure) and the others its counters count.
_JUDGE_VERDICT_PARTS = ("pass", "fail", "unsure", "superseded", "unusable", "stale", "unmatched")


def _verdict_usage_problems(read: ManifestReader) -> list[str]:
    """``verdict_usage`` against itself and the ``judges`` block: the same judges, each judge's totals the sums
    of its producers' cells, no more verdicts with usage than the judge's verdict records, no more cached input
    tokens than input tokens. A manifest made before the block (none) is not checked, unless it names judges:
    a run with judges has written the block since judges exist in a release (issue 41 landed with them)."""
    if not isinstance(read.manifest, Mapping):
        return []
    if "verdict_usage" not in read.manifest:
        judges = read.manifest.get("judges")
        if isinstance(judges, Mapping) and judges:
            return [f"the manifest has no verdict_usage block, though it names judges ({', '.join(map(str, judges))})"]
        return []
    block, judges = read.block("verdict_usage"), read.block("judges")
    if block is None:
        return []
    problems = []
    if judges is not None and sorted(map(str, block)) != sorted(map(str, judges)):
        problems.append(f"the manifest contradicts itself: verdict_usage lists {sorted(map(str, block))}, judges "
                        f"{sorted(map(str, judges))}")
    for name in block:
        cells = read.manifest["verdict_usage"][name].get("by_producer") if isinstance(
            read.manifest["verdict_usage"][name], Mapping) else None
        if not (isinstance(cells, list) and all(
                isinstance(c, Mapping) and isinstance(c.get("provider"), str) and isinstance(c.get("model"), str)
                and isinstance(c.get("batch"), bool) and all(is_count(c.get(m)) for m in USAGE_MEASURES)
                for c in cells)):
            read.note(f"manifest: verdict_usage.{name}.by_producer is {shown(cells)}, not a list of usage cells")
            continue
        totals = {measure: read.count("verdict_usage", name, measure) for measure in USAGE_MEASURES}
        for measure, total in totals.items():
            problems += _contradiction(f"verdict_usage.{name}.{measure}", total,
                                       f"the sum of verdict_usage.{name}.by_producer[].{measure}",
                                       sum(int(c[measure]) for c in cells))
        if totals["cached_input_tokens"] is not None and totals["input_tokens"] is not None \
                and totals["cached_input_tokens"] > totals["input_tokens"]:
            problems.append(f"the manifest contradicts itself: verdict_usage.{name}.cached_input_tokens "
                            f"{totals['cached_input_tokens']} > input_tokens {totals['input_tokens']}")
        if judges is not None and name in judges:
            records = _sum(read.count("judges", name, part) for part in _JUDGE_VERDICT_PARTS)
            if records is not None and totals["with_usage"] is not None and totals["with_usage"] > records:
                problems.append(f"the manifest contradicts itself: verdict_usage.{name}.with_usage "
                                f"{totals['with_usage']} > its {records} verdict records (judges.{name})")
    return problems


def _claim_problems(manifest: Mapping[str, Any], listed: Mapping[str, OutputFile]) -> list[str]:
    """What the manifest claims, checked against its listing and against itself: missing or undeclared
    outputs, then values missing or of the wrong type, conservation, and counts that disagree."""
    read = ManifestReader(manifest)
    rows: dict[str, int] = {}
    for f in listed.values():
        rows[output_of(f.path)] = rows.get(output_of(f.path), 0) + f.rows
    families = _families(read)
    outputs = _output_problems(rows, families)
    unreadable, unreadable_problems = _unreadable_files(read)
    conservation = _conservation_problems(read, unreadable)
    counts = _count_problems(read, rows, families) + _verdict_usage_problems(read)
    return outputs + list(read.problems) + conservation + unreadable_problems + counts


def verify_run(manifest: Any, found: Mapping[str, OutputFile | str | None], part_files: Iterable[str]) -> Verdict:
    """Compare a folder with its manifest (any JSON value: a malformed one is a problem, not an exception).

    ``found``: for each listed path, what is there now (None: no file; a str: why it cannot be read);
    ``part_files``: every ``part-*`` file in the folder, relative paths.
    """
    try:
        listed = listed_files(manifest)
    except ManifestError as exc:
        return Verdict(0, (one_line(str(exc)),))
    problems: list[str] = []
    for path, want in sorted(listed.items()):
        have = found.get(path)
        if have is None:
            problems.append(f"missing: {path}")
            continue
        if isinstance(have, str):
            problems.append(f"altered: {path}: {have}")
            continue
        changes = [f"{what} {getattr(want, what)} -> {getattr(have, what)}" for what in ("bytes", "rows")
                   if getattr(want, what) != getattr(have, what)]
        if want.sha256 != have.sha256:
            changes.append("sha256 differs")
        if changes:
            problems.append(f"altered: {path}: {', '.join(changes)}")
    for path in sorted(set(part_files) - listed.keys()):
        problems.append(f"unlisted: {path}")
    problems.extend(_claim_problems(manifest, listed))
    return Verdict(len(listed), tuple(one_line(p) for p in problems))
