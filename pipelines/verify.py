"""``notarius-reprocess verify DIR`` (or ``python -m pipelines.verify DIR``): check a run folder.

Every file the manifest lists must be there with the same byte size, sha256
and row count; no ``part-*`` file may be unlisted; every output the manifest
declares must be listed; the listed rows must agree with the manifest's counts,
the counts with each other, and conservation must hold. Prints a short
verdict (a malformed manifest is a problem line, not a traceback); exits 0
only when all of it holds (1 when it does not, 2 on a usage error). The
comparison is ``domain.run_integrity.verify_run``; this is the wiring
(reading through Beam's filesystems, so ``gs://`` works too).
"""

from __future__ import annotations

if __name__ == "__main__":  # `python -m pipelines.verify`: its first steps, then this module imported as itself
    from pipelines.entry import run_module

    run_module("pipelines.verify")

import argparse
import os
import stat
from typing import Any, Sequence

import orjson
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from analysis.compare_folder import (COMPARE_HTML, COMPARE_JSON, COMPARE_KIND, PAGES_FOLDER,
                                     comparison_folder_problems, document_facts, is_page_name)
from domain.run_integrity import (MANIFEST_NAME, ManifestError, OutputFile, Verdict, is_part_file, listed_files,
                                  one_line, relative_path, verify_run)
from domain.errors import NotariusError
from pipelines.guards import command_as_typed
from pipelines.interruption import command_named
from transforms.write import join_path
from pipelines.folders import folder_state
from transforms.files import is_local, list_files, normalized_folder, read_file_facts


PROG = "notarius-reprocess verify"

# The one rule for what verify reads (a run's or a comparison's folder, its manifest included): a plain file.
NOT_A_PLAIN_FILE = "not a regular file (a link, a pipe or a device): the job writes plain files"


def _not_plain(path: str) -> bool:
    """A local path that is not a regular file. A pipe or a device never ends (a FIFO, a link to /dev/zero):
    reading it would hang verify, so it is refused unread. Object stores hold only objects."""
    if not is_local(path):
        return False
    try:
        return not stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False  # gone, or not ours to see: opening it says which


def _read_manifest(folder: str, committed: str = "run") -> tuple[Any, str | None]:
    """The manifest's JSON value, or why there is none to compare with (one line)."""
    manifest_path = FileSystems.join(folder, MANIFEST_NAME)
    if not FileSystems.exists(manifest_path):
        return None, f"no {MANIFEST_NAME}: not a committed {committed} (still running, failed or killed)"
    if _not_plain(manifest_path) and not os.path.isdir(manifest_path):  # a folder is named as one below
        return None, f"{MANIFEST_NAME} is {NOT_A_PLAIN_FILE}"
    try:
        with FileSystems.open(manifest_path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            data = handle.read()
    except OSError as exc:  # a folder of that name, no permission, a broken link
        return None, f"{MANIFEST_NAME} cannot be read ({type(exc).__name__}: {exc})"
    try:
        return orjson.loads(data), None
    except orjson.JSONDecodeError as exc:  # also: not UTF-8
        return None, f"{MANIFEST_NAME} is not valid JSON ({exc})"


def _listed_file(folder: str, want: OutputFile) -> OutputFile | str:
    """What is there now of one listed file: its facts, or why they cannot be had (one line)."""
    path = FileSystems.join(folder, want.path)
    if _not_plain(path):
        return NOT_A_PLAIN_FILE
    try:
        facts = read_file_facts(path, want.format)
    except OSError as exc:  # there, but not readable (permissions, a vanished object)
        return f"cannot be read ({type(exc).__name__}: {exc})"
    if facts.row_error is not None:  # reported with what else changed
        changed = [f"bytes {want.bytes} -> {facts.bytes}"] if facts.bytes != want.bytes else []
        changed += ["sha256 differs"] if facts.sha256 != want.sha256 else []
        return ", ".join([*changed, facts.row_error])
    return OutputFile(want.path, want.format, facts.bytes, facts.sha256, facts.rows)


def _found(folder: str, listed: dict[str, OutputFile]) -> tuple[dict[str, OutputFile | str | None], list[str]]:
    """What is there now of each listed file, and every part-* file in the folder (relative paths)."""
    present = {relative_path(folder, path) for path in list_files(folder)}
    found = {rel: _listed_file(folder, want) if rel in present else None for rel, want in listed.items()}
    return found, [rel for rel in present if is_part_file(rel)]


def _verdict_and_manifest(output: str) -> tuple[Verdict, dict | None]:
    """The verdict on a run folder, and its manifest when it could be parsed. Whatever the folder
    holds, a verdict: each problem one line, never a traceback."""
    try:
        folder = normalized_folder(str(output))
        state = folder_state(folder)
        if state in ("absent", "empty"):
            return _refusal(f"{output} does not exist or is empty"), None
        if state == "file":
            return _refusal(f"{output} is a file, not a run folder"), None
        manifest, unusable = _read_manifest(folder)
        if unusable is not None:
            return _refusal(unusable), None
        try:
            listed = listed_files(manifest)
        except ManifestError:
            return verify_run(manifest, {}, []), None  # the verdict names what is wrong with the listing
        found, part_files = _found(folder, listed)
    except OSError as exc:  # the folder itself cannot be listed or read
        return _refusal(f"{output} cannot be read ({type(exc).__name__}: {exc})"), None
    return verify_run(manifest, found, part_files), manifest


def _refusal(problem: str) -> Verdict:
    return Verdict(0, (one_line(problem),))


def verify_folder(output: str) -> Verdict:
    return _verdict_and_manifest(output)[0]


class NotVerified(NotariusError):
    """A run folder a command reads does not verify; the text names the first problem and how to see them all."""


def require_verified(output) -> dict:
    """For the commands that read a run folder: refuse one that does not verify, with the reason
    (NotVerified); returns the manifest it verified (read once: what was verified is what the caller reads)."""
    verdict, manifest = _verdict_and_manifest(str(output))
    if not verdict.ok:
        raise NotVerified(f"{output} does not verify ({verdict.problems[0]}"
                         + (f"; and {len(verdict.problems) - 1} more" if len(verdict.problems) > 1 else "")
                         + f"); see: {command_as_typed('verify')} {output}")
    return manifest


def _document(path: str) -> dict | str:
    """A document beside the part files (compare.json, compare.html): its facts, or why they cannot be had."""
    if _not_plain(path):
        return NOT_A_PLAIN_FILE
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            return document_facts(handle.read())
    except OSError as exc:
        return f"cannot be read ({type(exc).__name__}: {exc})"


def comparison_folder_facts(folder: str, manifest: Any) -> tuple[dict, list[str], dict, list[str]]:
    """What a comparison folder holds now, read as its manifest lists it (by the rules of a run's folder):
    each listed file's facts, every part file, each document's facts (compare.json, compare.html and every
    page), every file under pages/ (``comparison_folder_problems``' input)."""
    folder = normalized_folder(folder)
    present = {relative_path(folder, p) for p in list_files(folder)}
    try:
        listed = listed_files(manifest)
    except ManifestError:
        listed = {}  # the problem is named by comparison_folder_problems
    found = {rel: _listed_file(folder, want) for rel, want in listed.items() if rel in present}
    documents = {name: _document(join_path(folder, name)) for name in sorted(present)
                 if name in (COMPARE_JSON, COMPARE_HTML) or is_page_name(name)}
    pages = sorted(p for p in present if p.startswith(PAGES_FOLDER + "/"))
    return found, [p for p in present if is_part_file(p)], documents, pages


def comparison_problems(folder: str) -> list[str]:
    """A comparison folder checked against its manifest (``analysis.compare_folder.comparison_folder_problems``): every
    listed file there as listed, no part file or page unlisted, compare.json, compare.html and the pages as
    written. Whatever the
    folder holds, problems (one line each), never an exception."""
    try:
        folder = normalized_folder(folder)
        manifest, unusable = _read_manifest(folder, "comparison")
        if unusable is not None:
            return [unusable]
        return comparison_folder_problems(manifest, *comparison_folder_facts(folder, manifest))
    except OSError as exc:  # the folder itself cannot be listed or read
        return [f"{folder} cannot be read ({type(exc).__name__}: {exc})"]


def comparison_verdict(output: str) -> Verdict | None:
    """A comparison's folder (``notarius-reprocess compare``: its manifest's kind) checked against its own
    manifest; None for any other folder (a run's is checked by ``verify_folder``)."""
    try:
        manifest, unusable = _read_manifest(normalized_folder(str(output)))
    except OSError:
        return None
    if unusable is not None or not isinstance(manifest, dict) or manifest.get("kind") != COMPARE_KIND:
        return None
    problems = tuple(one_line(problem) for problem in comparison_problems(str(output)))
    try:
        files = len(listed_files(manifest))
    except ManifestError:
        files = 0
    return Verdict(files, problems)


@command_named(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("folder", help="the job's output folder (--output of the run)")
    args = parser.parse_args(argv)
    verdict = comparison_verdict(args.folder) or verify_folder(args.folder)
    for problem in verdict.problems:
        print(f"  {problem}")
    print(f"{args.folder}: {verdict.summary()}")
    return 0 if verdict.ok else 1

