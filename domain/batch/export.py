"""The export's domain steps: one source's request rows (retries and refreshes,
contract §6.1) -> provider request lines, the plan that splits lines into files
within the provider's limits, and the export manifest.

Every request read ends in exactly one place: a request line, a dead letter
(with its original bytes and the reason), or counted as filtered (outside
``--families`` / ``--kinds`` / ``--only-request-ids``). The manifest proves it.

A source-level reconciliation request lists the source's accepted chunk
registry entries (contract §4.1): the export reads them from the run's registry
artifacts (``registries`` input), labelled exactly as the job labels them. A
request that names the list it was built with (``input_fingerprint``) is
exported only when those artifacts give exactly that list; otherwise it is a
dead letter, never a prompt for another list.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Mapping, Sequence

import orjson

from domain import counters as c
from domain.assets import current_fingerprints, llm_schema_path, load_json_asset
from domain.batch.estimate import estimate_block, estimated_input_tokens
from domain.batch.prices import PriceTable
from domain.batch.prompts import (RetryRequest, RetryRequestError, build_judge_prompt, build_prompt, judge_of,
                                  parse_retry_request)
from domain.batch.providers import PROVIDERS, Provider, RequestSettings
from domain.families import FAMILIES
from domain.families.base import ListedEntry
from domain.families.reconciliation import listed_entries
from domain.families.registry_family import RegistryRecord  # what ``listed_entries`` reads
from domain.intake import INPUT_TRANSCRIPTS, resolve_transcript
from domain.rows import dead_letter_row
from domain.registry_artifacts import chunk_registry_records
from domain.judges import JudgeSpec
from domain.revision import KIND_JUDGE, REQUEST_KINDS
from domain.source import Transcript

INPUT_RETRY_REQUESTS = "retry_requests"
INPUT_REGISTRIES = "registries"  # the run's accepted chunk registry artifacts (for reconciliation prompts)
INPUT_JUDGED = "candidates"  # the archive's candidates: judge requests show the judged attempt's records
# Where a run keeps them, relative to its output folder: every chunk registry family's key ends in
# "-registry" (tests/test_batch_backfill.py keeps that true).
REGISTRY_ARTIFACTS = "artifacts/*-registry/part-*"
OUTPUT_TAGS = ("requests", "dead_letters")

REQUESTS_PREFIX = "requests-"
REQUESTS_SUFFIX = ".jsonl"
INDEX_SUFFIX = ".index.jsonl"  # the line-to-id map beside each request file


@dataclass(frozen=True, slots=True)
class ExportConfig:
    provider_name: str
    settings: RequestSettings
    max_bytes_per_file: int
    families: frozenset[str] | None = None
    only_request_ids: frozenset[str] | None = None
    kinds: frozenset[str] | None = None  # None: retry and refresh requests

    @property
    def provider(self) -> Provider:
        return PROVIDERS[self.provider_name]


def schema_problems(provider: Provider, families: Iterable[str]) -> tuple[str, ...]:
    """Every place where a family's LLM schema leaves the provider's subset."""
    return tuple(f"{family}: {problem}" for family in sorted(families)
                 for problem in provider.schema_problems(load_json_asset(llm_schema_path(family))))


@lru_cache(maxsize=None)
def _provider_schema(provider_name: str, family: str) -> dict:
    return PROVIDERS[provider_name].schema(load_json_asset(llm_schema_path(family)))


def export_source_groups(config: ExportConfig, source_id: str, grouped: Mapping[str, Sequence[bytes]]):
    """The per-key function for ``JoinAndApply``: ({tag: rows}, counts)."""
    rows, dead, counts = export_source(source_id, grouped.get(INPUT_TRANSCRIPTS, ()),
                                       grouped.get(INPUT_RETRY_REQUESTS, ()), config,
                                       registry_lines=grouped.get(INPUT_REGISTRIES, ()),
                                       candidate_lines=grouped.get(INPUT_JUDGED, ()))
    return {"requests": rows, "dead_letters": dead}, counts


def export_source(source_id: str, transcript_lines: Sequence[bytes], request_lines: Sequence[bytes],
                  config: ExportConfig, registry_lines: Sequence[bytes] = (),
                  candidate_lines: Sequence[bytes] = ()) -> tuple[list[dict], list[dict], dict[str, int]]:
    counts: Counter[str] = Counter()
    dead: list[dict] = []

    def reject(reason: str, raw: bytes) -> None:
        counts[c.dead_letters(INPUT_RETRY_REQUESTS)] += 1
        dead.append(dead_letter_row(INPUT_RETRY_REQUESTS, reason, raw))

    chosen: dict[str, tuple[RetryRequest, bytes]] = {}
    for raw in sorted(request_lines):  # sorted: the kept duplicate does not depend on arrival order
        try:
            request = parse_retry_request(raw)
        except RetryRequestError as exc:
            reject(str(exc), raw)
            continue
        if (config.families is not None and request.family not in config.families) or (
                config.kinds is not None and request.kind not in config.kinds) or (
                config.only_request_ids is not None and request.request_id not in config.only_request_ids):
            counts[c.FILTERED] += 1
        elif request.request_id in chosen:
            reject(f"duplicate request_id {request.request_id!r}: kept another record", raw)
        else:
            chosen[request.request_id] = (request, raw)
    registries = _chunk_registries(source_id, registry_lines, dead, counts)
    if not chosen:
        return [], dead, dict(counts)

    # The job's resolution (domain.intake): copies that say the same thing are one transcript.
    resolution = resolve_transcript(source_id, transcript_lines)
    transcript, problem = resolution.transcript, resolution.unknown_source or ""
    entries: dict[str, tuple[ListedEntry, ...]] = {}
    if transcript is not None:
        entries = {kind: listed_entries(transcript, found) for kind, found in registries.items()}
    judged = _judged_candidates(candidate_lines, {r.candidate_id for r, _ in chosen.values() if r.kind == KIND_JUDGE})
    rows = []
    for request_id in sorted(chosen):
        request, raw = chosen[request_id]
        if transcript is None:
            reject(problem, raw)
            continue
        spec = FAMILIES.get(request.family)
        try:
            row = request_row(config, request, transcript, raw,
                              entries.get(spec.registry_kind or "") if spec is not None else None,
                              judged.get(request.candidate_id))
        except RetryRequestError as exc:
            reject(str(exc), raw)
            continue
        counts[c.STALE_REQUESTS] += int((request.prompt_fingerprint, request.schema_fingerprint) != current_fingerprints(request.family))
        counts[c.shaped(request.kind)] += 1
        rows.append(row)
    counts[c.SHAPED] += len(rows)
    return rows, dead, dict(counts)


def _judged_candidates(lines: Sequence[bytes], wanted: set[str]) -> dict[str, bytes]:
    """The candidate lines judge requests name, by candidate id (the rest of the archive is skipped
    unread; an unreadable line is the job's dead letter, not the export's)."""
    if not wanted:
        return {}
    found: dict[str, bytes] = {}
    for line in lines:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        cid = record.get("candidate_id") if isinstance(record, dict) else None
        if cid in wanted and cid not in found:
            found[cid] = line
    return found


def _chunk_registries(source_id: str, lines: Sequence[bytes], dead: list[dict],
                      counts: Counter) -> dict[str, list[tuple[str, tuple[RegistryRecord, ...]]]]:
    """Per registry kind: (chunk_id, records) of every accepted chunk registry artifact of the source.
    Lines that are not one are dead letters (input ``registries``)."""
    found: dict[str, list[tuple[str, tuple[RegistryRecord, ...]]]] = defaultdict(list)
    for raw in sorted(set(lines)):
        try:
            kind, chunk_id, records = chunk_registry_records(source_id, raw)
        except ValueError as exc:
            counts[c.dead_letters(INPUT_REGISTRIES)] += 1
            dead.append(dead_letter_row(INPUT_REGISTRIES, str(exc), raw))
            continue
        counts[c.REGISTRIES_USED] += 1
        found[kind].append((chunk_id, records))
    return {kind: sorted(items, key=lambda item: item[0]) for kind, items in found.items()}


def request_row(config: ExportConfig, request: RetryRequest, transcript: Transcript, raw: bytes,
                registry_entries: Sequence[ListedEntry] | None = None, candidate_line: bytes | None = None) -> dict:
    """One provider line and its index entry. Raises :class:`RetryRequestError`."""
    provider = config.provider
    judge = None
    if request.kind == KIND_JUDGE:  # contract §4.3: the judge's prompt and schema over the judged attempt
        judge = judge_of(request)
        prompt = build_judge_prompt(request, judge, transcript, candidate_line)
        schema_key, schema = f"judge-{judge.name}", _judge_provider_schema(provider.name, judge)
    else:
        prompt = build_prompt(request, transcript, registry_entries)
        schema_key, schema = request.family, _provider_schema(provider.name, request.family)
    wire_id = provider.wire_id(request.request_id)
    line_obj = provider.request_line(wire_id, prompt, schema_key, schema, config.settings)
    line = orjson.dumps(line_obj)
    if len(line) + 1 > config.max_bytes_per_file:
        raise RetryRequestError(f"the request line has {len(line) + 1} bytes, more than one file may hold "
                                f"({config.max_bytes_per_file})")
    prompt_fp, schema_fp = current_fingerprints(request.family)
    index = {
        "request_id": request.request_id, "kind": request.kind, "wire_id": wire_id, "family": request.family,
        "source_id": request.source_id, "chunk_id": request.chunk_id, "replaces_candidate_id": request.candidate_id,
        "attempt": request.attempt, "provider": provider.name, "model": config.settings.model,
        # What the model is shown now: the current assets, whatever the request was built under.
        "prompt_fingerprint": prompt_fp, "schema_fingerprint": schema_fp,
        "line_sha256": hashlib.sha256(line).hexdigest(), "content_key": provider.content_key(line_obj),
        # Reconciliations: the entry list the line shows (the request's own, checked); import-batch
        # copies it onto the answer's candidate. None for every other family.
        "input_fingerprint": prompt.input_fingerprint,
        # contract §6.4: the rule's estimate of the line's input tokens (domain.batch.estimate); import-batch
        # puts the billed count beside it.
        "estimated_input_tokens": estimated_input_tokens(prompt, schema),
    }
    if judge is not None:  # what import-batch copies onto the verdict record (contract §3.3)
        index.update({"judge": judge.name, "judge_fingerprint": judge.fingerprint(),
                      "candidate_sha256": request.candidate_sha256})
    return {"custom_id": request.request_id, "line": line, "index": index, "raw": raw}


@lru_cache(maxsize=None)
def _judge_provider_schema(provider_name: str, judge: JudgeSpec) -> dict:
    return PROVIDERS[provider_name].schema(load_json_asset(judge.schema_path))


def choose_among_duplicates(custom_id: str, rows: Sequence[dict]) -> tuple[dict, list[dict]]:
    """One row per request id across sources: the smallest (source, bytes) wins;
    the others become dead letters."""
    ordered = sorted(rows, key=lambda r: (r["index"]["source_id"], r["raw"]))
    dead = [dead_letter_row(INPUT_RETRY_REQUESTS, f"duplicate request_id {custom_id!r}: kept another record", r["raw"])
            for r in ordered[1:]]
    return ordered[0], dead


@dataclass(frozen=True, slots=True)
class FilePlan:
    """Which file each request id goes to; files fill in request-id order."""

    file_of: Mapping[str, int]
    files: int


def plan_files(sizes: Iterable[tuple[str, int]], max_lines: int | None, max_bytes: int) -> FilePlan:
    """Greedy split of (id, line size incl. newline) pairs, in id order, so that no
    file has more than ``max_lines`` lines or ``max_bytes`` bytes."""
    file_of: dict[str, int] = {}
    current = lines = used = 0
    for custom_id, size in sorted(sizes):
        if lines and ((max_lines is not None and lines + 1 > max_lines) or used + size > max_bytes):
            current, lines, used = current + 1, 0, 0
        file_of[custom_id] = current
        lines, used = lines + 1, used + size
    return FilePlan(file_of, current + 1 if file_of else 0)


def file_names(number: int, files: int) -> tuple[str, str]:
    """(requests file, index file) names of file ``number`` of ``files``."""
    stem = f"{REQUESTS_PREFIX}{number:05d}-of-{files:05d}"
    return stem + REQUESTS_SUFFIX, stem + INDEX_SUFFIX


def index_line(number: int, index: bytes) -> bytes:
    """The index file's line for request line ``number`` (from 1) whose index entry is ``index``
    (orjson bytes of a non-empty object without a ``line`` key): ``{"line": number, **entry}`` as
    orjson writes it, without parsing the entry again."""
    return b'{"line":%d,%s\n' % (number, index[1:])


def build_export_manifest(counts: Mapping[str, int], files: Sequence[Mapping[str, Any]], *,
                          options: Mapping[str, Any], runner: str, prices: PriceTable | None = None) -> dict:
    def n(name: str) -> int:
        return int(counts.get(name, 0))

    files = sorted(files, key=lambda f: f["requests_file"])
    exported = sum(f["lines"] for f in files)
    requests_in, dead = n(c.records_in(INPUT_RETRY_REQUESTS)), n(c.dead_letters(INPUT_RETRY_REQUESTS))
    filtered = n(c.FILTERED)
    families = sorted(options.get("families") or FAMILIES)
    by_kind = {kind: n(c.shaped(kind)) for kind in REQUEST_KINDS}
    return {
        "provider": options["provider"],
        "model": options["model"],
        "files": list(files),
        "inputs": {"retry_requests": requests_in, "transcripts": n(c.records_in(INPUT_TRANSCRIPTS)),
                   "transcript_dead_letters": n(c.dead_letters(INPUT_TRANSCRIPTS)),
                   "blank_lines_skipped": n(c.blank_lines(INPUT_RETRY_REQUESTS)),
                   "registry_artifacts": n(c.records_in(INPUT_REGISTRIES)), "registry_artifacts_used": n(c.REGISTRIES_USED),
                   "registry_dead_letters": n(c.dead_letters(INPUT_REGISTRIES))},
        "exported_by_kind": by_kind,
        "stale": n(c.STALE_REQUESTS),
        "conservation": {"retry_requests_in": requests_in, "exported": exported, "dead_letters": dead,
                         "filtered": filtered, "holds": requests_in == exported + dead + filtered},
        "fingerprints": {f: dict(zip(("prompt", "llm_schema"), current_fingerprints(f))) for f in families},
        "estimate": estimate_block(counts, provider=options["provider"], model=options["model"],
                                   max_output_tokens=options["max_output_tokens"], prices=prices,
                                   prices_file=options.get("prices")),
        "options": dict(options),
        "runner": runner,
    }
