"""Micro-benchmarks of the per-candidate hot path, on inputs taken from the archive.

Each piece runs over a list of real inputs (the first sources of the
benchmark archive) in a tight loop; the time per call is the median of
``REPEATS`` passes, with min and max. In-process, single-threaded, no Beam.
"""

from __future__ import annotations

import gzip
import glob
import time
from typing import Callable, Sequence

import orjson
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from bench.archive import Archive
from bench.stats import markdown_table, summary
from domain.assets import llm_schema_path, load_json_asset
from domain.evaluate import evaluate_response, parse_copy
from domain.evidence import SourceRef, resolve_range, span_within_chunk
from domain.families import FAMILIES
from domain.families.common import llm_schema_walk
from domain.families.schema_walk import violations
from domain.families.base import EvaluationContext, RegistryView
from domain.issues import quote_name, render_guidance
from domain.source import Chunk, Transcript, parse_transcript
from transforms.progress import ProgressSpec

REPEATS = 5
MIN_PASS_SECONDS = 0.2
SAMPLE_SOURCES = 10


def timed(fn: Callable[[object], object], inputs: Sequence[object]) -> dict:
    """µs per call over ``inputs``: median (min, max) of REPEATS passes of at least MIN_PASS_SECONDS."""
    loops = 1
    while True:  # calibrate: enough loops over the inputs for one pass to last MIN_PASS_SECONDS
        start = time.perf_counter()
        for _ in range(loops):
            for item in inputs:
                fn(item)
        elapsed = time.perf_counter() - start
        if elapsed >= MIN_PASS_SECONDS:
            break
        loops *= 2
    passes = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(loops):
            for item in inputs:
                fn(item)
        passes.append((time.perf_counter() - start) / (loops * len(inputs)) * 1e6)
    return {**summary(passes), "inputs": len(inputs)}


def _sample(archive: Archive) -> tuple[dict[str, Transcript], list[bytes], list[dict]]:
    transcripts: dict[str, Transcript] = {}
    lines: list[bytes] = []
    for path in sorted(glob.glob(archive.transcripts_glob)):
        with gzip.open(path, "rb") as handle:
            for line in handle:
                transcript = parse_transcript(line)
                transcripts[transcript.source_id] = transcript
                lines.append(line)
                if len(transcripts) >= SAMPLE_SOURCES:
                    break
        if len(transcripts) >= SAMPLE_SOURCES:
            break
    candidates = []
    for path in sorted(glob.glob(archive.candidates_glob)):
        with gzip.open(path, "rb") as handle:
            candidates += [c for c in map(orjson.loads, handle) if c["source_id"] in transcripts]
    return transcripts, lines, candidates


def _names(candidate: dict) -> list[str]:
    """The string values of a response's records (what subjects quote)."""
    try:
        document = orjson.loads(parse_copy(candidate["raw_response"]))
    except orjson.JSONDecodeError:
        return []
    records = next(iter(document.values()), []) if isinstance(document, dict) and document else []
    return [v for r in records if isinstance(r, dict) for v in r.values() if isinstance(v, str) and len(v) < 80]


def _parses(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def run(archive: Archive) -> dict:
    transcripts, transcript_lines, candidates = _sample(archive)
    lines = [orjson.dumps(c) for c in candidates]
    texts = [parse_copy(c["raw_response"]) for c in candidates]
    parseable = [t for t in texts if _parses(t)]

    typed, invalid_docs, contexts = [], [], []
    for cand, text in zip(candidates, texts):
        spec = FAMILIES.get(cand["family"])
        if spec is None:
            continue
        try:
            spec.response_model.model_validate_json(text)
            typed.append((spec.response_model, text))
        except ValidationError:
            try:
                invalid_docs.append((cand["family"], orjson.loads(text)))
            except orjson.JSONDecodeError:
                pass
        transcript = transcripts[cand["source_id"]]
        registry = RegistryView(spec.registry_kind, frozenset()) if spec.needs_registry else None
        contexts.append((spec, cand["raw_response"], EvaluationContext(transcript, transcript.chunk(cand["chunk_id"]), registry)))

    validators = {family: Draft202012Validator(load_json_asset(llm_schema_path(family))) for family in FAMILIES}
    walks = {family: llm_schema_walk(family) for family in FAMILIES}
    issue_sets = [r.issues for r in (evaluate_response(*c) for c in contexts) if not r.passed and r.issues]

    largest = max(transcripts.values(), key=lambda t: len(t.units))
    ids = largest.index.unit_ids_in_order
    sid = largest.source_id
    n = len(ids)
    forward = [SourceRef(sid, ids[i], ids[min(i + 5, n - 1)]) for i in range(0, n, 7)]
    reversed_refs = [SourceRef(sid, r.end_unit_id, r.start_unit_id) for r in forward]
    whole = Chunk("bench-all", "extraction", tuple(ids), tuple(range(n)))
    long_spans = [SourceRef(sid, ids[i], ids[n - 1 - i]) for i in range(0, n // 2, max(1, n // 200))]
    chunk_30 = next(c for c in largest.chunks.values() if c.kind == "extraction")
    short_spans = [SourceRef(sid, chunk_30.unit_ids[i], chunk_30.unit_ids[-1]) for i in range(len(chunk_30.unit_ids))]
    resolved_short_spans = [resolve_range(largest.index, sid, r.start_unit_id, r.end_unit_id) for r in short_spans]

    names = [name for c in candidates for name in _names(c)]
    units = sum(len(t.units) for t in transcripts.values()) // len(transcripts)
    results = {
        f"parse one transcript (parse_transcript, {units:,} units on average; once per source)":
            timed(parse_transcript, transcript_lines),
        "parse candidate envelope (orjson.loads)": timed(orjson.loads, lines),
        "parse raw response (orjson.loads)": timed(orjson.loads, parseable),
        "fast-path model validation (pydantic model_validate_json, passing responses)":
            timed(lambda item: item[0].model_validate_json(item[1]), typed),
        "schema findings of failing documents, jsonschema iter_errors (the reference)":
            timed(lambda item: list(validators[item[0]].iter_errors(item[1])), invalid_docs),
        "schema findings of failing documents, compiled checks (schema_walk, what the job runs)":
            timed(lambda item: violations(walks[item[0]], item[1]), invalid_docs),
        "resolve a cited range (resolve_range), forward refs":
            timed(lambda ref: resolve_range(largest.index, sid, ref.start_unit_id, ref.end_unit_id), forward),
        "resolve and order a reversed range (resolve_range, ordered)":
            timed(lambda ref: resolve_range(largest.index, sid, ref.start_unit_id, ref.end_unit_id).ordered(),
                  reversed_refs),
        "span_within_chunk, 30-unit chunk": timed(lambda ref: span_within_chunk(largest.index, chunk_30, ref), short_spans),
        "span_within_chunk, 30-unit chunk, resolved refs (as adapters store them)":
            timed(lambda ref: span_within_chunk(largest.index, chunk_30, ref), resolved_short_spans),
        f"span_within_chunk, long spans in a {n:,}-unit chunk": timed(lambda ref: span_within_chunk(largest.index, whole, ref), long_spans),
        "guidance rendering (render_guidance, failing candidates)": timed(render_guidance, issue_sets),
        "quote a model-supplied name (quote_name; every record's subject)": timed(quote_name, names),
        "whole evaluate_response (all candidates, empty registries)": timed(lambda c: evaluate_response(*c), contexts),
        "serialize an output row (orjson.dumps)": timed(orjson.dumps, candidates),
        # Once per source, not per candidate; default interval, lines go nowhere.
        "progress tally, once per source (ProgressTracker.add)":
            timed(ProgressSpec("sources", ("candidates",)).tracker(emit=lambda line: None).add,
                  [{"candidates": 500, "transcripts": 1}] * 200),
    }
    return results


def table(results: dict) -> str:
    rows = [[name, f"{r['median']:.2f}", f"{r['min']:.2f}–{r['max']:.2f}", r["inputs"]] for name, r in results.items()]
    return markdown_table(["piece", "µs per call, median", "min–max", "inputs"], rows, "lrrr")
