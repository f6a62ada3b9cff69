"""A comparison's folder (contract §6.3): the run folders' rows read against the rows their manifests list,
``compare.json`` folded from the slots' tallies, the folder's own manifest and its check.

Pure, like ``analysis.compare`` (the rules per slot) which it builds on: the pipeline (``pipelines.compare``)
reads the files and hands their facts in.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Iterable, Mapping, Sequence

from analysis.compare import (ANSWER_STATUSES, ANSWER_UNANSWERED, ARTIFACT_CHANGES, COMPARED_OUTPUTS,
                              OCCURRENCE_FAMILIES, OUTPUT_ARTIFACTS, RUN_A, RUN_B, RUNS, SITUATIONS, SLOT_CHANGES,
                              SLOT_OUTCOMES)
from analysis.slots import RowError
from domain import counters
from domain.revision import REQUEST_KINDS
from domain.run_integrity import ManifestError, ManifestReader, listed_files, output_of, shown

# What compare writes under --output.
SLOTS_OUTPUT = "slots"
COMPARE_JSON = "compare.json"
COMPARE_HTML = "compare.html"
COMPARE_KIND = "compare"  # the manifest's "kind": a comparison's folder, not a run's
# compare.html lists the changed slots on one page per source (a source's slots are what the job holds at
# once): pages/<name>.html, each a document of the folder's manifest.
PAGES_FOLDER = "pages"
_PAGE_NAME = re.compile(r"pages/[A-Za-z0-9._-]+\.html")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def page_name(source_id: str) -> str:
    """The page of a source's changed slots, relative to the comparison folder: its id made safe for a file
    name, and a hash of it (two ids made alike stay apart)."""
    digest = hashlib.sha256(source_id.encode("utf-8")).hexdigest()[:12]
    return f"{PAGES_FOLDER}/{_UNSAFE.sub('_', source_id)[:60]}-{digest}.html"


def is_page_name(name: Any) -> bool:
    """A name :func:`page_name` can give (so reading it stays inside the folder's pages/)."""
    return isinstance(name, str) and _PAGE_NAME.fullmatch(name) is not None



# --- rows read against rows listed ------------------------------------------------------------------

def input_name(run: str, output: str) -> str:
    """The name one output of one run is read under (``a.evaluations``)."""
    return f"{run}.{output}"


def listed_rows(manifest: Mapping[str, Any]) -> dict[str, int]:
    """Rows of each compared output as a (verified) run's manifest lists them; artifacts of every family together."""
    try:
        listed = listed_files(manifest)
    except ManifestError as exc:
        raise RowError(str(exc)) from None
    rows = dict.fromkeys(COMPARED_OUTPUTS, 0)
    for f in listed.values():
        output = compared_output(f.path)
        if output is not None:
            rows[output] += f.rows
    return rows


def compared_output(path: str) -> str | None:
    """The output compare reads a run's file as (``artifacts`` for every family's); None: one it does not read."""
    output = output_of(path)
    output = OUTPUT_ARTIFACTS if output.startswith(OUTPUT_ARTIFACTS + "/") else output
    return output if output in COMPARED_OUTPUTS else None


def rows_block(listed: Mapping[str, Mapping[str, int]], read_counts: Mapping[str, int]) -> dict:
    """Per run and output: the rows its manifest lists and the rows compare read (``{input}_in`` of the
    reading step, less the records it could not read: ``dead_letters/{input}``); holds when they agree."""
    block: dict[str, Any] = {}
    holds = True
    for run in RUNS:
        block[run] = {}
        for output in COMPARED_OUTPUTS:
            name = input_name(run, output)
            unreadable = int(read_counts.get(counters.dead_letters(name), 0))
            read = int(read_counts.get(counters.records_in(name), 0)) - unreadable
            want = int(listed[run][output])
            block[run][output] = {"listed": want, "read": read, "unreadable": unreadable}
            holds = holds and read == want and not unreadable
    block["holds"] = holds
    return block


# --- the document: compare.json ---------------------------------------------------------------------

def _family_block(tallies: Mapping[tuple, int], family: str | None) -> dict:
    """The counts of one family (None: every family) from the summed tallies."""
    def n(kind: str, *rest: str) -> int:
        if family is not None:
            return int(tallies.get((kind, family, *rest), 0))
        return sum(int(v) for k, v in tallies.items() if k[0] == kind and k[2:] == rest)

    transitions: dict[str, dict[str, int]] = {}
    reason_codes: dict[str, dict[str, int]] = {run: {} for run in RUNS}
    for key, value in sorted(tallies.items()):
        if family is not None and key[1] != family:
            continue
        if key[0] == "transition":
            row = transitions.setdefault(key[2], {})
            row[key[3]] = row.get(key[3], 0) + value
        elif key[0] == "reason_code":
            codes = reason_codes[key[2]]
            codes[key[3]] = codes.get(key[3], 0) + value
    in_a, in_b, both = n("slots", RUN_A), n("slots", RUN_B), n("slots", "both")
    counted = sum(sum(row.values()) for row in transitions.values())
    answered = {kind: {status: n("answer", kind, status) for status in ANSWER_STATUSES} for kind in REQUEST_KINDS}
    requests = {status: sum(answered[kind][status] for kind in REQUEST_KINDS) for status in ANSWER_STATUSES}
    block = {
        "slots": {"in_a": in_a, "in_b": in_b, "in_both": both, "in_a_or_b": in_a + in_b - both},
        "transitions": {src: dict(sorted(dst.items(), key=_outcome_order)) for src, dst in
                        sorted(transitions.items(), key=_outcome_order)},
        "conservation": {"slots_in_a_or_b": in_a + in_b - both, "counted_in_transitions": counted,
                         "holds": counted == in_a + in_b - both},
        "changes": {change: n("change", change) for change in SLOT_CHANGES},
        "changed_slots": sum(n("change", change) for change in SLOT_CHANGES),
        "situations": {name: n("situation", name) for name in SITUATIONS},
        "artifacts": {what: n("artifact", what) for what in ARTIFACT_CHANGES},
        "reason_codes": {run: dict(sorted(codes.items(), key=lambda kv: (-kv[1], kv[0])))
                         for run, codes in reason_codes.items()},
        "requests_answered": {
            "requests": sum(requests.values()),
            "answered": sum(requests[s] for s in ANSWER_STATUSES if s != ANSWER_UNANSWERED),
            **requests,
            "by_kind": answered,
        },
    }
    if family is None or family in OCCURRENCE_FAMILIES:
        block["failed_after_registry_change"] = n("registry_failure")
    return block


def _outcome_order(item: tuple[str, Any]) -> int:
    return SLOT_OUTCOMES.index(item[0]) if item[0] in SLOT_OUTCOMES else len(SLOT_OUTCOMES)


def comparison_document(tallies: Mapping[tuple, int], *, families: Iterable[str], runs: Mapping[str, Mapping],
                        rows: Mapping[str, Any], examples: Mapping[str, Sequence[dict]] = {}) -> dict:
    """``compare.json``: per family and in total, the transitions (every slot of A or B in exactly one:
    recorded as ``conservation``), changes, accepted artifacts, reason codes, requests of A answered in B
    and, for occurrence families, attempts that failed after their registry changed.

    ``tallies``: the slots' tallies summed; ``families``: every family either run counts; ``runs``: what
    to say of each run (its folder, format); ``rows``: :func:`rows_block`; ``examples``: a few slot rows
    per change (listed in slot order)."""
    names = sorted(set(families) | {key[1] for key in tallies})
    by_family = {family: _family_block(tallies, family) for family in names}
    total = _family_block(tallies, None)
    slots_hold = total["conservation"]["holds"] and all(b["conservation"]["holds"] for b in by_family.values())
    return {
        "runs": {run: dict(runs[run]) for run in RUNS},
        "total": total,
        "by_family": by_family,
        "conservation": {"slots": {**total["conservation"], "holds": slots_hold}, "rows": dict(rows),
                         "holds": slots_hold and bool(rows.get("holds"))},
        "examples": {change: sorted(examples.get(change, ()), key=slot_row_order) for change in SLOT_CHANGES},
    }


def slot_row_order(row: Mapping[str, Any]) -> tuple[str, str, str]:
    """How slot rows are listed (examples): by family, source, chunk."""
    return row["family"], row["source_id"], row["chunk_id"]


# --- the comparison folder's own manifest ---------------------------------------------------------

def document_facts(data: bytes) -> dict:
    """A document the folder holds beside its part files (compare.json, compare.html): size and hash."""
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def comparison_manifest(document: Mapping[str, Any], *, files: Mapping[str, list], documents: Mapping[str, dict],
                        options: Mapping[str, Any], runner: str) -> dict:
    """The comparison folder's commit record: what was compared, the counts that must agree with the files,
    ``documents`` (compare.json and compare.html: bytes, sha256) and ``files``
    (``domain.run_integrity.files_block``)."""
    return {
        "kind": COMPARE_KIND,
        "runs": document["runs"],
        "options": dict(options),
        "runner": runner,
        "outputs": {SLOTS_OUTPUT: document["total"]["changed_slots"]},
        "conservation": {"holds": document["conservation"]["holds"]},
        "documents": dict(documents),
        "files": dict(files),
    }


def comparison_folder_problems(manifest: Any, found: Mapping[str, Any], part_files: Iterable[str],
                               documents: Mapping[str, dict | str | None], page_files: Iterable[str] = ()) -> list[str]:
    """A comparison folder against its manifest (one line per problem; none: the folder is as committed).
    A manifest of any shape gives problems, never an exception (a value of the wrong type is one).

    ``found``: for each listed path, the file's facts now (``OutputFile``), why they cannot be had (a str) or
    None (no file); ``part_files``: every ``part-*`` file in the folder; ``documents``: each document's facts
    now, why they cannot be had (a str) or None (missing); ``page_files``: every file under ``pages/``."""
    try:
        listed = listed_files(manifest)
    except ManifestError as exc:
        return [str(exc)]
    problems = []
    if manifest.get("kind") != COMPARE_KIND:
        problems.append(f"the manifest's kind is {shown(manifest.get('kind'))}, not {COMPARE_KIND!r}")
    for path, want in sorted(listed.items()):
        have = found.get(path)
        if have is None:
            problems.append(f"missing: {path}")
        elif isinstance(have, str):
            problems.append(f"altered: {path}: {have}")
        elif (have.bytes, have.sha256, have.rows) != (want.bytes, want.sha256, want.rows):
            problems.append(f"altered: {path}")
    problems += [f"unlisted: {path}" for path in sorted(set(part_files) - listed.keys())]
    read = ManifestReader(manifest)
    rows = sum(f.rows for f in listed.values() if output_of(f.path) == SLOTS_OUTPUT)
    claimed = read.count("outputs", SLOTS_OUTPUT)
    checks = []
    if claimed is not None and rows != claimed:
        checks.append(f"{SLOTS_OUTPUT}: the files hold {rows} rows, the manifest counts {claimed}")
    listed_documents = read.block("documents") or {}
    pages = [name for name in listed_documents if is_page_name(name)]
    checks += [f"manifest: documents lists {shown(name)}, not a document compare writes"
               for name in listed_documents if name not in (COMPARE_JSON, COMPARE_HTML) and not is_page_name(name)]
    for name in (COMPARE_JSON, COMPARE_HTML, *pages):
        want_doc = read.block("documents", name)
        have_doc = documents.get(name)
        if want_doc is None:
            continue  # missing or not an object: noted by the reader
        if have_doc is None:
            checks.append(f"missing: {name}")
        elif isinstance(have_doc, str):
            checks.append(f"altered: {name}: {have_doc}")
        elif have_doc != want_doc:
            checks.append(f"altered: {name}")
    checks += [f"unlisted: {name}" for name in sorted(set(page_files) - set(pages))]
    if read.flag("conservation", "holds") is False:
        checks.append("the comparison's conservation does not hold")
    return problems + list(read.problems) + checks
