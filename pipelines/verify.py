"""``notarius-reprocess verify DIR`` (or ``python -m pipelines.verify DIR``): check a run folder.

Every file the manifest lists must be there with the same byte size, sha256
and row count; no ``part-*`` file may be unlisted; the listed rows must agree
with the manifest's counts and conservation must hold. Prints a short
verdict; exits 0 only when all of it holds (1 when it does not, 2 on a usage
error). The comparison is ``domain.run_integrity.verify_run``; this is the
wiring (reading through Beam's filesystems, so ``gs://`` works too).
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

import orjson
from apache_beam.io.filesystems import FileSystems

from domain.run_integrity import (MANIFEST_NAME, ManifestError, OutputFile, Verdict, is_part_file, listed_files,
                                  relative_path, verify_run)
from transforms.collector import freeze_for_exit
from transforms.files import folder_state, list_files, normalized_folder, read_file_facts


def _verdict_and_manifest(output: str) -> tuple[Verdict, dict | None]:
    """The verdict on a run folder, and its manifest when it could be parsed."""
    folder = normalized_folder(str(output))
    state = folder_state(folder)
    if state in ("absent", "empty"):
        return Verdict(0, (f"{output} does not exist or is empty",)), None
    if state == "file":
        return Verdict(0, (f"{output} is a file, not a run folder",)), None
    manifest_path = FileSystems.join(folder, MANIFEST_NAME)
    if not FileSystems.exists(manifest_path):
        return Verdict(0, (f"no {MANIFEST_NAME}: not a committed run (still running, failed or killed)",)), None
    try:
        with FileSystems.open(manifest_path) as handle:
            manifest = orjson.loads(handle.read())
        listed = listed_files(manifest)
    except orjson.JSONDecodeError as exc:
        return Verdict(0, (f"{MANIFEST_NAME} is not valid JSON ({exc})",)), None
    except ManifestError as exc:
        return Verdict(0, (str(exc),)), manifest
    present = {relative_path(folder, path) for path in list_files(folder)}
    found: dict[str, OutputFile | str | None] = {}
    for rel, want in listed.items():
        if rel not in present:
            found[rel] = None
            continue
        facts = read_file_facts(FileSystems.join(folder, rel), want.format)
        if facts.row_error is not None:  # reported with what else changed
            changed = [f"bytes {want.bytes} -> {facts.bytes}"] if facts.bytes != want.bytes else []
            changed += ["sha256 differs"] if facts.sha256 != want.sha256 else []
            found[rel] = ", ".join([*changed, facts.row_error])
            continue
        found[rel] = OutputFile(rel, want.format, facts.bytes, facts.sha256, facts.rows)
    return verify_run(manifest, found, [rel for rel in present if is_part_file(rel)]), manifest


def verify_folder(output: str) -> Verdict:
    return _verdict_and_manifest(output)[0]


def require_verified(output) -> dict:
    """For the commands that read a run folder: refuse one that does not verify, with the reason;
    returns the manifest it verified (read once: what was verified is what the caller reads)."""
    verdict, manifest = _verdict_and_manifest(str(output))
    if not verdict.ok:
        raise SystemExit(f"{output} does not verify ({verdict.problems[0]}"
                         + (f"; and {len(verdict.problems) - 1} more" if len(verdict.problems) > 1 else "")
                         + f"); see: notarius-reprocess verify {output}")
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="notarius-reprocess verify", description=__doc__.split("\n")[0])
    parser.add_argument("folder", help="the job's output folder (--output of the run)")
    args = parser.parse_args(argv)
    verdict = verify_folder(args.folder)
    for problem in verdict.problems:
        print(f"  {problem}")
    print(f"{args.folder}: {verdict.summary()}")
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(freeze_for_exit(main()))
