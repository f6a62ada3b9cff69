"""Run integrity: the manifest's listing of every output file, and a folder checked against it.

The manifest is a run's commit record: it is written after every output file
is final and lists each one (path relative to the folder, format, byte size,
sha256, row count), grouped by output. A folder *verifies* when every listed
file is there with the same size, hash and row count, no ``part-*`` file is
unlisted, the listed rows agree with the manifest's counts, and conservation
holds. Pure: the caller reads the files; this module only compares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

MANIFEST_NAME = "manifest.json"
FILES_KEY = "files"
PART_PREFIX = "part-"
# The job's outputs, a folder each: one per family under artifacts/, and these beside it.
ARTIFACTS = "artifacts"
NON_ARTIFACT_OUTPUTS = ("retry_requests", "evaluations", "dead_letters")


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


def _safe(path: Any) -> bool:
    if not isinstance(path, str) or not path or path.startswith("/") or "://" in path or "\\" in path:
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def listed_files(manifest: Mapping[str, Any]) -> dict[str, OutputFile]:
    """The files a manifest lists, by relative path."""
    block = manifest.get(FILES_KEY) if isinstance(manifest, Mapping) else None
    if not isinstance(block, Mapping):
        raise ManifestError("the manifest lists no files (written by a version without run integrity?)")
    listed: dict[str, OutputFile] = {}
    for output, rows in block.items():
        if not isinstance(rows, list):
            raise ManifestError(f"the manifest's files of {output!r} are not a list")
        for row in rows:
            try:
                f = OutputFile(row["path"], row["format"], row["bytes"], row["sha256"], row["rows"])
            except (KeyError, TypeError) as exc:
                raise ManifestError(f"a file entry of {output!r} lacks {exc}") from None
            if not _safe(f.path) or output_of(f.path) != output:
                raise ManifestError(f"the manifest lists {f.path!r} under {output!r}: not a path inside this folder")
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


def _conservation_problems(manifest: Mapping[str, Any], rows: Mapping[str, int]) -> list[str]:
    problems = []
    equations = (
        ("conservation", "candidates_in", ("evaluations", "dead_letters", "filtered")),
        ("transcript_conservation", "transcripts_in", ("usable", "dead_letters")),
        ("prior_registry_conservation", "prior_registries_in", ("valid", "dead_letters")),
    )
    for block, total, parts in equations:
        c = manifest.get(block)
        if not isinstance(c, Mapping):
            problems.append(f"{block}: missing from the manifest")
            continue
        try:
            balanced = c[total] == sum(c[p] for p in parts)
        except (KeyError, TypeError):
            balanced = False
        if balanced and c.get("holds") is not True:
            unreadable = manifest.get("unreadable_files", {})
            paths = unreadable.get("paths", []) if isinstance(unreadable, Mapping) else []
            why = f": input files could not be read to their end ({', '.join(paths[:3])})" if paths else ""
            problems.append(f"{block} is not claimed by the manifest{why}")
        elif not balanced:
            problems.append(f"{block} does not hold: {total} {c.get(total)} != "
                            + " + ".join(f"{p} {c.get(p)}" for p in parts))
    counted = manifest.get("outputs", {})
    conservation = manifest.get("conservation", {})
    expected = {
        "evaluations": conservation.get("evaluations") if isinstance(conservation, Mapping) else None,
        "dead_letters": counted.get("dead_letters") if isinstance(counted, Mapping) else None,
        "artifacts": counted.get("artifacts") if isinstance(counted, Mapping) else None,
    }
    for output, count in expected.items():  # an output the listing has no file of is not checked
        if count is not None and output in rows and rows[output] != count:
            problems.append(f"{output}: the files hold {rows.get(output, 0)} rows, the manifest counts {count}")
    return problems


def verify_run(manifest: Mapping[str, Any], found: Mapping[str, OutputFile | str | None],
               part_files: Iterable[str]) -> Verdict:
    """Compare a folder with its manifest.

    ``found``: for each listed path, what is there now (None: no file; a str: why it cannot be read);
    ``part_files``: every ``part-*`` file in the folder, relative paths.
    """
    try:
        listed = listed_files(manifest)
    except ManifestError as exc:
        return Verdict(0, (str(exc),))
    problems: list[str] = []
    rows: dict[str, int] = {}
    for path, want in sorted(listed.items()):
        top = path.split("/", 1)[0]
        rows[top] = rows.get(top, 0) + want.rows
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
    problems.extend(_conservation_problems(manifest, rows))
    return Verdict(len(listed), tuple(problems))
