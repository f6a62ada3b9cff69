"""What a run cost, and what its open requests will (contract §6.4): the files read for ``analysis.cost``.

For the report (compare counts its runs' cost in its own job, beside the comparison:
``analysis.cost.comparison_counts``). Plain file reading, no pipeline:

- the run's ``evaluations/`` rows, streamed (every attempt, with its producer and billed usage),
  twice more for the retries endpoint canonicalization saved (the attempts' pass notes the slots
  some passing attempt had reordered; what is kept is a key per such slot, never a row);
- its manifest's ``judges`` and ``verdict_usage`` (what the judges' answers were billed);
- its open requests (``retry_requests/``: retries, refreshes and judge requests), estimated by
  export-batch's own code (``domain.batch.export.export_source``, so by its rule,
  ``domain.batch.estimate``) for a target provider: the run's transcripts (its manifest's
  ``--transcripts``), its accepted chunk registries (its ``artifacts/*-registry/``, for
  reconciliation prompts) and, for judge requests, the judged candidates (its ``--candidates``).
  The requests' lines wait on disk until their source's transcript is read; what is held is one
  source's lines at a time (``SpilledLines``, ``transcripts_by_source``). A request export-batch
  would refuse (its transcript or judged candidate changed since) is counted as not estimated,
  with the reason.
"""

from __future__ import annotations

import fnmatch
import os
import sqlite3
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import orjson

from analysis.cost import (VERDICT_ORDER, CostTable, attempt_cells, cost_table, note_reordered, saved_retry_cells,
                           table_line, verdict_cells)
from domain.batch.estimate import estimate_block, estimate_counts, estimate_summary
from domain.batch.export import REGISTRY_ARTIFACTS, ExportConfig, export_source
from domain.batch.prices import PriceTable
from domain.batch.providers import PROVIDERS, RequestSettings
from domain.families import FAMILIES
from domain.revision import KIND_JUDGE
from domain.run_integrity import listed_files
from pipelines.outputs import input_paths, input_records, iter_file_rows, iter_rows
from transforms.json_keys import key_of
from transforms.raw_records import avro_record_to_json
from transforms.write import join_path

DEFAULT_TARGET = "openai-chat"  # the request shape open requests are estimated for without --provider
DEFAULT_MAX_OUTPUT_TOKENS = 8192  # export-batch's default: the output upper bound per request


@dataclass(frozen=True)
class Target:
    """Where the open requests would go (export-batch's --provider, --model, --max-output-tokens)."""

    provider: str = DEFAULT_TARGET
    model: str | None = None
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS


@dataclass(frozen=True)
class RunCost:
    """A run's cost figures (``analysis.cost``) and the open requests' estimate."""

    attempts: CostTable
    saved: CostTable
    verdicts: CostTable
    saved_recorded: int | None  # the manifest's endpoint_ordering.retries_saved.total, to set beside
    requests: Mapping[str, Any] | None  # export-batch's ``estimate`` block of the open requests, plus its notes
    requests_note: str  # why the requests were not estimated, or ""
    prices_file: str | None
    currency: str | None

    @property
    def unpriced(self) -> tuple[str, ...]:
        names = set(self.attempts.unpriced) | set(self.saved.unpriced) | set(self.verdicts.unpriced)
        if self.requests is not None:
            names |= set(self.requests["unpriced"])
        return tuple(sorted(names))


def run_cost(out: str, manifest: Mapping[str, Any], prices: PriceTable | None, prices_file: str | None,
             target: Target = Target()) -> RunCost:
    """The cost figures of one run folder (that verified: ``manifest`` is what verify read)."""
    evaluations = join_path(str(out), "evaluations")
    reordered: set[str] = set()
    attempts = cost_table("attempts", attempt_cells(_noting_reordered(iter_rows(evaluations), reordered)), prices)
    saved = cost_table("slots", saved_retry_cells(lambda: iter_rows(evaluations), reordered), prices)
    verdicts = cost_table("verdicts", verdict_cells(manifest), prices)
    recorded = ((manifest.get("endpoint_ordering") or {}).get("retries_saved") or {}).get("total")
    requests, note = open_requests_estimate(out, manifest, target, prices, prices_file)
    return RunCost(attempts, saved, verdicts, recorded, requests, note, prices_file,
                   prices.currency if prices is not None else None)


def _noting_reordered(rows: Iterator[dict], reordered: set[str]) -> Iterator[dict]:
    """``rows``, each noted for the saved retries' first pass on the way (one read of the evaluations fewer)."""
    for row in rows:
        note_reordered(row, reordered)
        yield row


def _json_line(row: Mapping[str, Any]) -> bytes:
    return avro_record_to_json(dict(row))  # Avro rows may hold bytes (UTF-8 text)


def open_requests_estimate(out: str, manifest: Mapping[str, Any], target: Target, prices: PriceTable | None,
                           prices_file: str | None) -> tuple[dict[str, Any] | None, str]:
    """export-batch's ``estimate`` of the run's open requests for ``target`` (None and why, when it cannot be
    made), with ``not_estimated`` (requests export-batch would refuse: how many, and the first reasons).

    The lines a source's requests are rendered from (its requests, registry artifacts and judged
    candidates) wait in a local temporary file (``SpilledLines``) until its transcript is read: what stays in
    memory is one source's lines and the sources' names, never a line per request (at 1M candidates the
    request lines alone were ~70 MB, ~800 MB while each held orjson's worst-case buffer)."""
    options = manifest.get("options") or {}
    provider = PROVIDERS[target.provider]
    config = ExportConfig(provider_name=provider.name,
                          settings=RequestSettings(model=target.model or "", max_output_tokens=target.max_output_tokens),
                          max_bytes_per_file=provider.max_bytes)
    counts: Counter[str] = Counter()
    refused: dict[str, list[str]] = {}  # source -> the reasons of its requests export-batch would refuse
    with SpilledLines() as spilled:
        sources: set[str] = set()
        listing: set[str] = set()  # sources with a reconciliation request: the only prompts that list registries
        judges = False
        for row in iter_rows(join_path(str(out), "retry_requests")):
            spilled.add(REQUESTS, row["source_id"], _json_line(row))
            sources.add(row["source_id"])
            if row.get("kind") == KIND_JUDGE:
                spilled.add_judged(row["candidate_id"])
                judges = True
            if getattr(FAMILIES.get(row["family"]), "chunk_kind", None) == "source":
                listing.add(row["source_id"])
        if sources:
            transcripts = options.get("transcripts")
            if not transcripts or not input_paths(transcripts):
                return None, (f"the run's transcripts ({transcripts!r}, its --transcripts) match no files: the "
                              "requests cannot be rendered to count them")
            # Registry artifacts only where a prompt lists them (domain.batch.prompts.build_prompt; what the
            # estimate counts of the others is the same without them): every source's were 150 MB of the
            # report's 388 at 101k.
            _spill_registry_lines(spilled, out, manifest, listing)
            if judges:
                _spill_candidate_lines(spilled, options.get("candidates"))
            for source_id, lines in transcripts_by_source(transcripts, sources):
                rows, dead, _ = export_source(source_id, lines, spilled.lines(REQUESTS, source_id), config,
                                              registry_lines=spilled.lines(REGISTRIES, source_id),
                                              candidate_lines=spilled.lines(CANDIDATES, source_id))
                for row in rows:
                    counts.update(estimate_counts(row["index"]))  # sums: the order sources come in is no matter
                reasons = [letter["reason"] for letter in dead if letter["input"] == "retry_requests"]
                if reasons:
                    refused[source_id] = reasons
    reasons_in_order: Counter[str] = Counter()
    for source_id in sorted(refused):  # summed in source order, as the reasons' ties are listed
        reasons_in_order.update(refused[source_id])
    # Priced only for a named model; without one the block says no prices (the model is unknown, not unpriced).
    named = target.model is not None
    block = estimate_block(counts, provider=provider.name, model=target.model or "",
                           max_output_tokens=target.max_output_tokens,
                           prices=prices if named else None, prices_file=prices_file if named else None)
    block["model_named"] = named
    block["target"] = block["prices"]["key"] if named else f"{provider.name} (no --model)"
    block["not_estimated"] = {"requests": sum(reasons_in_order.values()),
                              "reasons": [{"reason": reason, "requests": n}
                                          for reason, n in reasons_in_order.most_common(3)]}
    return block, ""


REQUESTS, REGISTRIES, CANDIDATES = "requests", "registries", "candidates"  # what SpilledLines keeps, by source


class SpilledLines:
    """Lines kept by (what, source) in a temporary SQLite file, read back one source at a time, and the
    judged candidate ids: so the estimate holds no line per request in memory. Written once, then read
    (the index is built on the first read); a source's lines come back in the order they were added."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="notarius-estimate-")
        self._db = sqlite3.connect(os.path.join(self._folder.name, "lines.sqlite"))
        # A scratch file: no journal, no fsync, a small page cache (the point is to hold little).
        self._db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-2048;"
                               "CREATE TABLE lines (what TEXT, source TEXT, line BLOB);"
                               "CREATE TABLE judged (candidate_id TEXT PRIMARY KEY) WITHOUT ROWID;")
        self._indexed = False

    def __enter__(self) -> "SpilledLines":
        return self

    def __exit__(self, *exc) -> None:
        self._db.close()
        self._folder.cleanup()

    def add(self, what: str, source: str, line: bytes) -> None:
        self._db.execute("INSERT INTO lines VALUES (?, ?, ?)", (what, source, line))

    def add_judged(self, candidate_id: str) -> None:
        self._db.execute("INSERT OR IGNORE INTO judged VALUES (?)", (candidate_id,))

    def judged(self, candidate_id: object) -> bool:
        return self._db.execute("SELECT 1 FROM judged WHERE candidate_id = ?", (candidate_id,)).fetchone() is not None

    def lines(self, what: str, source: str) -> list[bytes]:
        if not self._indexed:
            self._db.execute("CREATE INDEX by_source ON lines (what, source)")
            self._indexed = True
        return [line for (line,) in self._db.execute("SELECT line FROM lines WHERE what = ? AND source = ? "
                                                     "ORDER BY rowid", (what, source))]


def transcripts_by_source(pattern: str, sources: set[str]) -> Iterator[tuple[str, list[bytes]]]:
    """(source, its transcript lines) for each of ``sources``, once each, those without a line last (with
    none). Two passes over the transcripts: the first counts each source's lines, the second hands a source on
    as soon as its last line is read, so what is held is the sources begun and not finished (one, in an
    archive whose files keep a source's lines together), never the archive's transcripts (the report held
    them all: 498 MB at 101k candidates, growing with the archive)."""
    expected: Counter[str] = Counter()
    for line in input_records(pattern):
        source_id = _source_key(line)
        if source_id in sources:
            expected[source_id] += 1
    pending: dict[str, list[bytes]] = defaultdict(list)
    for line in input_records(pattern):
        source_id = _source_key(line)
        if source_id in expected:
            pending[source_id].append(line)
            if len(pending[source_id]) == expected[source_id]:
                yield source_id, pending.pop(source_id)
    for source_id in sorted(sources - set(expected)):
        yield source_id, []


def _source_key(line: bytes) -> str | None:
    """A line's source id as export-batch's read step keys it (transforms.json_keys: without building the
    record, ~0.4 ms against ~4 ms a transcript line), else from the whole record."""
    return key_of(line, "source_id") or _field(line, "source_id")


def _field(line: bytes, name: str) -> str | None:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    value = record.get(name) if isinstance(record, dict) else None
    return value if isinstance(value, str) else None


def _spill_registry_lines(spilled: SpilledLines, out: str, manifest: Mapping[str, Any], sources: set[str]) -> None:
    """The run's accepted chunk registry artifacts of these sources (reconciliation prompts list them): the
    files its manifest lists under ``artifacts/*-registry/``, as export-batch reads them by default."""
    for rel in sorted(listed_files(manifest)):
        if fnmatch.fnmatchcase(rel, REGISTRY_ARTIFACTS):
            for row in iter_file_rows(join_path(str(out), rel)):
                if row["source_id"] in sources:
                    spilled.add(REGISTRIES, row["source_id"], _json_line(row))


def _spill_candidate_lines(spilled: SpilledLines, pattern: str | None) -> None:
    """The records of the judged candidates in the run's --candidates, by source (export-batch keeps the
    first of an id)."""
    if not pattern or not input_paths(pattern):
        return
    for line in input_records(pattern):
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if (isinstance(record, dict) and isinstance(record.get("source_id"), str)
                and isinstance(record.get("candidate_id"), str) and spilled.judged(record["candidate_id"])):
            spilled.add(CANDIDATES, record["source_id"], line)


# --- the lines the report (and the demo) print --------------------------------------------------

def requests_line(block: Mapping[str, Any] | None, note: str, prices_given: bool) -> str:
    """The open requests' estimate in one line: export-batch's summary line, for this run's requests."""
    if block is None:
        return f"open requests: not estimated ({note})"
    line = estimate_summary(block).removeprefix("estimate: ")
    if not block["model_named"]:
        line = line.replace("(no --prices)", "(no --model: name the model they go to)" if prices_given
                            else "(no --prices)")
    refused = block["not_estimated"]["requests"]
    return (f"open requests, as export-batch would send them to {block['target']}: {line}"
            + (f"; {refused} request(s) export-batch would refuse not counted" if refused else ""))


def cost_lines(cost: RunCost) -> list[str]:
    """What the report prints of the run's cost: its attempts (per verdict, with prices), the judges' verdicts,
    the open requests' estimate and the retries endpoint canonicalization saved."""
    lines = [table_line("cost of the run's attempts", cost.attempts, cost.currency, VERDICT_ORDER)]
    if cost.verdicts.groups:
        lines.append(table_line("cost of the judges' verdicts", cost.verdicts, cost.currency))
    lines.append(requests_line(cost.requests, cost.requests_note, cost.prices_file is not None))
    if cost.saved.groups:
        lines.append(table_line("the retries endpoint canonicalization saved would have cost", cost.saved,
                                cost.currency))
    else:
        lines.append("the retries endpoint canonicalization saved would have cost: nothing (no retry saved)")
    return lines
