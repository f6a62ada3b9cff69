"""What a run cost, and what its open requests will (contract §6.4): the files read for ``analysis.cost``.

For the report (compare counts its runs' cost in its own job, beside the comparison:
``analysis.cost.comparison_counts``). Plain file reading, no pipeline:

- the run's ``evaluations/`` rows, streamed (every attempt, with its producer and billed usage),
  twice more for the retries endpoint canonicalization saved (the second pass keeps only the
  slots the first found reordered);
- its manifest's ``judges`` and ``verdict_usage`` (what the judges' answers were billed);
- its open requests (``retry_requests/``: retries, refreshes and judge requests), estimated by
  export-batch's own code (``domain.batch.export.export_source``, so by its rule,
  ``domain.batch.estimate``) for a target provider: the run's transcripts (its manifest's
  ``--transcripts``), its accepted chunk registries (its ``artifacts/*-registry/``, for
  reconciliation prompts) and, for judge requests, the judged candidates (its ``--candidates``).
  It holds the requests and the transcripts of the sources they name; a request export-batch
  would refuse (its transcript or judged candidate changed since) is counted as not estimated,
  with the reason.
"""

from __future__ import annotations

import fnmatch
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import orjson

from analysis.cost import (VERDICT_ORDER, CostTable, attempt_cells, cost_table, saved_retry_cells, table_line,
                           verdict_cells)
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
    attempts = cost_table("attempts", attempt_cells(iter_rows(evaluations)), prices)
    saved = cost_table("slots", saved_retry_cells(lambda: iter_rows(evaluations)), prices)
    verdicts = cost_table("verdicts", verdict_cells(manifest), prices)
    recorded = ((manifest.get("endpoint_ordering") or {}).get("retries_saved") or {}).get("total")
    requests, note = open_requests_estimate(out, manifest, target, prices, prices_file)
    return RunCost(attempts, saved, verdicts, recorded, requests, note, prices_file,
                   prices.currency if prices is not None else None)


def _json_line(row: Mapping[str, Any]) -> bytes:
    return avro_record_to_json(dict(row))  # Avro rows may hold bytes (UTF-8 text)


def open_requests_estimate(out: str, manifest: Mapping[str, Any], target: Target, prices: PriceTable | None,
                           prices_file: str | None) -> tuple[dict[str, Any] | None, str]:
    """export-batch's ``estimate`` of the run's open requests for ``target`` (None and why, when it cannot be
    made), with ``not_estimated`` (requests export-batch would refuse: how many, and the first reasons)."""
    by_source: dict[str, list[bytes]] = defaultdict(list)
    judged: set[str] = set()
    families: set[str] = set()
    listing: set[str] = set()  # sources with a reconciliation request: the only prompts that list registries
    for row in iter_rows(join_path(str(out), "retry_requests")):
        by_source[row["source_id"]].append(_json_line(row))
        families.add(row["family"])
        if row.get("kind") == KIND_JUDGE:
            judged.add(row["candidate_id"])
        if getattr(FAMILIES.get(row["family"]), "chunk_kind", None) == "source":
            listing.add(row["source_id"])
    options = manifest.get("options") or {}
    provider = PROVIDERS[target.provider]
    config = ExportConfig(provider_name=provider.name,
                          settings=RequestSettings(model=target.model or "", max_output_tokens=target.max_output_tokens),
                          max_bytes_per_file=provider.max_bytes)
    counts: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    if by_source:
        transcripts = options.get("transcripts")
        if not transcripts or not input_paths(transcripts):
            return None, (f"the run's transcripts ({transcripts!r}, its --transcripts) match no files: the requests "
                          "cannot be rendered to count them")
        # Registry artifacts only where a prompt lists them (domain.batch.prompts.build_prompt; what the estimate
        # counts of the others is the same without them): every source's were 150 MB of the report's 388 at 101k.
        registries = _registry_lines(out, manifest, listing)
        candidates = _candidate_lines(options.get("candidates"), judged) if judged else {}
        found: dict[str, tuple[Counter, list[str]]] = {}
        for source_id, lines in transcripts_by_source(transcripts, set(by_source)):
            rows, dead, _ = export_source(source_id, lines, by_source[source_id], config,
                                          registry_lines=registries.get(source_id, ()),
                                          candidate_lines=candidates.get(source_id, ()))
            estimated: Counter[str] = Counter()
            for row in rows:
                estimated.update(estimate_counts(row["index"]))
            found[source_id] = (estimated, [letter["reason"] for letter in dead if letter["input"] == "retry_requests"])
        for source_id in sorted(by_source):  # summed in source order, as the reasons' ties are listed
            source_counts, reasons = found[source_id]
            counts.update(source_counts)
            refused.update(reasons)
    # Priced only for a named model; without one the block says no prices (the model is unknown, not unpriced).
    named = target.model is not None
    block = estimate_block(counts, provider=provider.name, model=target.model or "",
                           max_output_tokens=target.max_output_tokens,
                           prices=prices if named else None, prices_file=prices_file if named else None)
    block["model_named"] = named
    block["target"] = block["prices"]["key"] if named else f"{provider.name} (no --model)"
    block["not_estimated"] = {"requests": sum(refused.values()),
                              "reasons": [{"reason": reason, "requests": n} for reason, n in refused.most_common(3)]}
    return block, ""


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


def _registry_lines(out: str, manifest: Mapping[str, Any], sources: set[str]) -> dict[str, list[bytes]]:
    """The run's accepted chunk registry artifacts of these sources (reconciliation prompts list them): the
    files its manifest lists under ``artifacts/*-registry/``, as export-batch reads them by default."""
    lines: dict[str, list[bytes]] = defaultdict(list)
    for rel in sorted(listed_files(manifest)):
        if fnmatch.fnmatchcase(rel, REGISTRY_ARTIFACTS):
            for row in iter_file_rows(join_path(str(out), rel)):
                if row["source_id"] in sources:
                    lines[row["source_id"]].append(_json_line(row))
    return lines


def _candidate_lines(pattern: str | None, wanted: set[str]) -> dict[str, list[bytes]]:
    """Source id -> the records of the judged candidates in the run's --candidates (export-batch keeps the
    first of an id)."""
    found: dict[str, list[bytes]] = defaultdict(list)
    if not pattern or not input_paths(pattern):
        return found
    for line in input_records(pattern):
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("candidate_id") in wanted and isinstance(record.get("source_id"), str):
            found[record["source_id"]].append(line)
    return found


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
