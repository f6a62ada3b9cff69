"""SIMULATED batch provider: a demo double, NOT a model.

It plays a provider's batch service on files, as a user's provider would:
it reads the request files ``export-batch`` wrote for ``openai-chat`` (and
their ``.index.jsonl``), answers each request with what the simulated producer
extracts from the request's chunk - a clean answer under the current prompt -
and writes an OpenAI Batch output file (``{"id", "custom_id", "response":
{"status_code", "request_id", "body": <chat.completion>}, "error"}`` per line)
for ``import-batch``. It never reads the job's outputs: only the request lines,
their index (which slot) and the transcripts.

It also writes ground truth (the simulated producer's format, its vocabulary first) for the
candidates ``import-batch`` will make of its answers, whose ids are digests of
the result line, so the retry economy of the next run knows them.

Families it answers: every per-chunk family whose records need no registry
(registries, spells, combat turns, enemy events, scenes), and the three
registry reconciliations, from the entry list their request line shows (a
clean proposal, labelled against exactly that list; ``import-batch`` gives the
candidate the list's fingerprint from the export index). Requests of other
families get no line and count as missing in the import.

    python -m sample.simulated_batch --requests 'batch/requests-*' \\
        --transcripts GLOB --results-out FILE --truth-out FILE [--seed 7]
"""

from __future__ import annotations

import argparse
import glob
import random
import sys
from pathlib import Path
from typing import Sequence

import orjson

from domain.batch.ledger import candidate_id, parse_index_row
from domain.batch.prompts import ENTRIES_HEADING
from domain.batch.providers import PROVIDERS
from domain.families import FAMILIES
from domain.revision import KIND_JUDGE
from sample.jsonl import dumps_line, open_output, read_jsonl
from sample.sim_reconciliation import RECONCILIATION_FAMILY, Entry, clean_proposal
from sample.sim_records import FAMILY_BUILDERS, clean_records
from sample.sim_views import ChunkView, RegistryBook, SourceCues, SourceView
from sample.sim_sources import seed_int
from sample.sim_vocabulary import truth_vocabulary_line
from sample.sim_usage import chat_request_bytes, chat_usage
from sample.text_cues import CueFinder

PROVIDER = "openai-chat"
RECONCILIATIONS = frozenset(RECONCILIATION_FAMILY.values())
# Every declared family whose records need no registry (domain/families/).
ANSWERED_FAMILIES = frozenset(key for key, spec in FAMILIES.items() if not spec.needs_registry)
CREATED = 1794052800  # 2026-11-12T12:00:00Z: after the revision, after every archived attempt
REQUESTS_SUFFIX, INDEX_SUFFIX = ".jsonl", ".index.jsonl"


def request_pairs(pattern: str) -> list[tuple[Path, Path]]:
    """(requests file, index file) for every requests file the glob names."""
    folder, glob = Path(pattern).parent, Path(pattern).name
    files = sorted(p for p in folder.glob(glob) if p.name.endswith(REQUESTS_SUFFIX) and not p.name.endswith(INDEX_SUFFIX))
    return [(p, p.with_name(p.name[: -len(REQUESTS_SUFFIX)] + INDEX_SUFFIX)) for p in files]


class Answerer:
    def __init__(self, transcripts: Sequence[dict], seed: int) -> None:
        self.records = {record["source_id"]: record for record in transcripts}
        self.seed = seed
        self.finder = CueFinder()
        self.sources: dict[str, SourceView] = {}

    def source(self, source_id: str) -> SourceView:
        if source_id not in self.sources:
            record = self.records[source_id]
            cues = SourceCues(self.finder, [u["speaker"] for u in record["units"]], [u["text"] for u in record["units"]])
            self.sources[source_id] = SourceView.of(record, cues)
        return self.sources[source_id]

    def answer(self, family: str, source_id: str, chunk_id: str, request_line: dict | None = None) -> str | None:
        """The model's text for one slot: the producer's clean records; None when not answered.
        A reconciliation is answered from the entry list its request line shows."""
        if family not in ANSWERED_FAMILIES or source_id not in self.records:
            return None
        if family in RECONCILIATIONS:
            entries = shown_entries(request_line or {})
            return None if entries is None else orjson.dumps({"entities": clean_proposal(entries)}).decode()
        chunk = next((c for c in self.records[source_id]["chunks"] if c["chunk_id"] == chunk_id), None)
        if chunk is None:
            return None
        rng = random.Random(seed_int(self.seed, source_id, chunk_id, family, "revised-prompt"))
        records = clean_records(family, ChunkView.of(self.source(source_id), chunk), rng, RegistryBook())
        return orjson.dumps({FAMILY_BUILDERS[family].list_key: records}).decode()


def shown_entries(request_line: dict) -> list[Entry] | None:
    """The entries an openai-chat reconciliation request shows the model (its user turn's entry
    list, one JSON object per line); None when the line shows none."""
    try:
        parts = request_line["body"]["messages"][1]["content"]
        text = next(part["text"] for part in parts if part["text"].startswith(ENTRIES_HEADING))
    except (KeyError, IndexError, TypeError, StopIteration):
        return None
    listed = [orjson.loads(line) for line in text[len(ENTRIES_HEADING):].splitlines() if line.strip()]
    return [Entry(e["label"], "", {"name": e["name"], "aliases": e["aliases"], "description": e["description"],
                                   "evidence": e["evidence"]}) for e in listed]


def result_line(n: int, custom_id: str, model: str, text: str, request_line: dict | None = None) -> dict:
    """One OpenAI Batch output line answering ``custom_id`` with ``text``; with its ``request_line``, the
    completion bills simulated usage derived from the request and the answer (``sample.sim_usage``)."""
    completion = {"id": f"chatcmpl-sim-{n:06d}", "object": "chat.completion", "created": CREATED, "model": model,
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                               "finish_reason": "stop"}]}
    if request_line is not None:
        prompt_bytes, system_bytes = chat_request_bytes(request_line)
        completion["usage"] = chat_usage(custom_id, prompt_bytes=prompt_bytes, system_bytes=system_bytes, answer=text)
    return {"id": f"batch_req_sim_{n:06d}", "custom_id": custom_id,
            "response": {"status_code": 200, "request_id": f"req_sim_{n:06d}", "body": completion}, "error": None}


def run(pattern: str, transcripts: Sequence[dict], results_out: Path, truth_out: Path, seed: int) -> tuple[int, int]:
    """Answer every request; returns (requests read, answered)."""
    answerer, provider = Answerer(transcripts, seed), PROVIDERS[PROVIDER]
    read = answered = 0
    with open_output(results_out) as results, open_output(truth_out) as truth:
        truth.write(truth_vocabulary_line())
        for requests_path, index_path in request_pairs(pattern):
            index = [parse_index_row(raw, str(index_path)) for raw in index_path.read_bytes().splitlines() if raw.strip()]
            lines = requests_path.read_bytes().splitlines()
            for row in index:
                if row.kind == KIND_JUDGE:  # a judge's question, not an extraction: sample.simulated_judge answers it
                    continue
                read += 1
                if row.provider != PROVIDER:
                    raise SystemExit(f"{index_path}: exported for {row.provider}; the simulated batch plays {PROVIDER}")
                request_line = orjson.loads(lines[row.line - 1])
                text = answerer.answer(row.family, row.source_id, row.chunk_id, request_line)
                if text is None:
                    continue
                answered += 1
                raw = orjson.dumps(result_line(answered, row.wire_id, row.model, text, request_line))
                results.write(raw + b"\n")
                truth.write(dumps_line({"candidate_id": candidate_id(provider, row, raw), "family": row.family,
                                        "source_id": row.source_id, "chunk_id": row.chunk_id, "attempt": row.attempt,
                                        "defects": [], "expected_pass": True}))
    return read, answered


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sample.simulated_batch", description=__doc__.split("\n")[0])
    parser.add_argument("--requests", required=True, help="glob of export-batch's requests-*.jsonl (openai-chat)")
    parser.add_argument("--transcripts", required=True,
                        help="glob of the archive's transcript files (.jsonl[.gz]), as every command takes them")
    parser.add_argument("--results-out", required=True, type=Path, help="the batch output file to write")
    parser.add_argument("--truth-out", required=True, type=Path, help="ground truth of the answers")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    paths = sorted(glob.glob(args.transcripts))
    if not paths:
        raise SystemExit(f"{parser.prog}: --transcripts {args.transcripts!r} matches no files")
    transcripts = [record for path in paths for record in read_jsonl(path)]
    read, answered = run(args.requests, transcripts, args.results_out, args.truth_out, args.seed)
    print(f"simulated batch: answered {answered} of {read} requests -> {args.results_out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
