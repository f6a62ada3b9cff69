"""SIMULATED producer: a test and demo double, NOT a model.

It reads transcript records (contract §3.1) and writes what an archive of raw
LLM extraction responses could look like (contract §3.2): one candidate record
per producer attempt for every per-chunk family, with content taken from the
chunk text (SRD spells and monsters mentioned, speakers, capitalised names)
and defects injected at known rates (`sample.sim_defects.DefectRates`). A
separate ground-truth file says, per candidate, which defects were injected
and whether the candidate should pass validation after endpoint
canonicalization.

With `--reconciliations` it also writes, per source and registry kind with an
accepted chunk registry, the source-level reconciliation attempts
(`chunk_id` "*", contract §4.1) whose labels E1, E2, ... follow the job's entry
order (`sample.sim_reconciliation`), with their proposal defects in the same
ground truth; each records the fingerprint of the entry list it was made from
(`input_fingerprint`, contract §3.2), as a careful producer does. Off by default, so archives made without it stay per-chunk only.

With `--usage` each candidate carries the usage a provider could have billed for it
(`sample.sim_usage`: input from the bytes of the prompt it answered, output from its response's,
some input cached; one attempt in ten recorded without usage). Off by default.

With `--revised-family F` the first attempt of every slot of family F was
produced under the earlier prompt kept in `sample/prompts/F.v0.md`
(`sample.revision`): its prompt fingerprint is that text's, so the job counts
it as stale (contract §6.1); later attempts came after the revision. Only the
fingerprint changes: responses, defects and ground truth are the same.

Everything is deterministic: each source draws from an RNG seeded by
(seed, source_id) and each slot from (seed, source_id, chunk_id, family), so
the same arguments give byte-identical files, independent of input order.

    python -m sample.simulated_producer --transcripts FILE \\
        --candidates-out FILE --truth-out FILE [--transcripts-out FILE] \\
        [--seed 7] [--sources N] [--candidates N] [--min-units N] [--max-units N] \\
        [--defect-rate NAME=P ...] [--reconciliations] [--revised-family F] [--usage]

Ground truth: first the words its defects are counted in (`sample.sim_vocabulary`:
which kinds are benign, which endpoint ordering repairs, the reason codes of the
others), then one JSON line per candidate:
    {"defect_vocabulary": {"benign", "canonicalized", "unparseable", "schema", "reason_codes"}}
    {"candidate_id", "family", "source_id", "chunk_id", "attempt",
     "defects": [{"kind", "record_name", "range": [start, end] | null}, ...],
     "expected_pass": bool}
Benign kinds (`sim_defects.BENIGN_KINDS`) are listed in `defects` too but
do not make `expected_pass` false.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import orjson

from sample import sim_usage
from sample.jsonl import dumps_line, open_output, read_jsonl
from sample.sim_defects import (
    EXTRACTION_FAMILIES, FAMILIES, OCCURRENCE_FAMILIES, REGISTRY_FAMILIES, REGISTRY_KIND, SCENE_FAMILIES,
    AttemptModel, ChunkShape, DefectKind, DefectRates, RatedKinds, applicable_kinds, is_failing,
    plan_attempts, rated, with_overrides,
)
from sample.sim_reconciliation import (BLOCKING, BYTE_LEVEL, RECONCILIATION_FAMILY, SOURCE_CHUNK,
                                       ReconciliationRates, applicable, clean_proposal,
                                       entry_list_fingerprint, listed_entries, split_overrides)
from sample.sim_reconciliation import inject as inject_reconciliation
from sample.sim_reconciliation import plan_attempts as plan_reconciliation_attempts
from sample.sim_injection import inject
from sample.sim_records import clean_records, missing_builders
from sample.sim_views import ChunkView, RegistryBook, SourceCues, SourceView
from sample.revision import earlier_prompt_fingerprint, revisable_families
from sample.sim_sources import (PreparedSource, SourceOptions, SourceSlot,
                                planned_chunk_counts, prepare_source, seed_int, source_slots)
from sample.sim_vocabulary import truth_vocabulary_line
from sample.simulated_judge import JudgeDefectRates, plant
from sample.text_cues import CueFinder

Fingerprints = Callable[[str], tuple[str, str]]

PRODUCER = {"provider": "simulated", "model": "sim-1"}
BASE_TIME = datetime(2026, 10, 1, 12, 0, 0, tzinfo=timezone.utc)
RECEIVED_SPREAD_SECONDS = 21 * 24 * 3600
RETRY_DELAY_SECONDS = 5400
DEFAULT_FINGERPRINTS = "domain.assets:current_fingerprints"


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    seed: int = 7
    rates: DefectRates = field(default_factory=DefectRates)
    attempts: AttemptModel = field(default_factory=AttemptModel)
    keep_probability: float = 1.0   # fraction of slots produced (from --candidates)
    reconciliations: bool = False   # also write source-level reconciliation attempts
    reconciliation_rates: ReconciliationRates = field(default_factory=ReconciliationRates)
    # Families whose first attempts were made under an earlier prompt (sample/prompts/<family>.v0.md).
    revised_families: frozenset[str] = frozenset()
    # Semantic defects no rule sees, planted into rule-passing attempts for the judges (sample.simulated_judge);
    # all rates 0 (the default) leave the archive and its truth byte for byte as without them.
    judge_defects: JudgeDefectRates = field(default_factory=JudgeDefectRates)
    # Billed usage on the candidates (sample.sim_usage: from the prompt's and the response's bytes; one
    # attempt in ten without). Off by default: archives made without it stay byte for byte as they were.
    usage: bool = False


@dataclass(frozen=True, slots=True)
class Emitted:
    """One candidate and its ground truth."""
    candidate: dict
    truth: dict


@dataclass(frozen=True, slots=True)
class SlotResult:
    emitted: list[Emitted]
    accepted_response: dict | None   # the response of the attempt the job accepts (contract §6.1)


def candidate_id(source_id: str, chunk_id: str, family: str, attempt: int) -> str:
    key = f"{source_id}\x1f{chunk_id}\x1f{family}\x1f{attempt}".encode()
    return "c-" + hashlib.sha256(key).hexdigest()[:16]


def stale_fingerprint(current: str, family: str) -> str:
    """A fingerprint string from an earlier prompt revision."""
    return "sha256:" + hashlib.sha256(f"previous:{family}:{current}".encode()).hexdigest()


def received_at(slot_seed: int, attempt: int) -> str:
    offset = slot_seed % RECEIVED_SPREAD_SECONDS + (attempt - 1) * RETRY_DELAY_SECONDS
    return (BASE_TIME + timedelta(seconds=offset)).strftime("%Y-%m-%dT%H:%M:%SZ")


def render_response(response: dict, kinds: Sequence[DefectKind], rng: random.Random) -> str:
    """The provider's text: compact JSON, or the odd-but-valid byte variants."""
    kinds = set(kinds)
    if DefectKind.CRLF_WHITESPACE in kinds:
        text = json.dumps(response, indent=2, ensure_ascii=rng.random() < 0.3)
        text = text.replace("\n", "\r\n")  # only whitespace: JSON strings escape \n
    elif DefectKind.NON_BMP_TEXT in kinds and rng.random() < 0.5:
        text = json.dumps(response, ensure_ascii=True)  # emoji as \ud83d\udc09 pairs
    else:
        text = orjson.dumps(response).decode()
    if DefectKind.TRUNCATED_JSON in kinds:
        text = text[:rng.randint(max(1, len(text) // 3), len(text) - 1)]
    if DefectKind.UTF8_BOM in kinds:
        text = "\ufeff" + text
    return text


class SimulatedProducer:
    """Turns prepared sources into candidate and ground-truth records."""

    def __init__(self, config: ProducerConfig, fingerprints: Fingerprints,
                 finder: CueFinder | None = None) -> None:
        self.config = config
        self._fingerprints = fingerprints
        self._fingerprint_cache: dict[str, tuple[str, str]] = {}
        self._applicable: dict[tuple[str, ChunkShape], RatedKinds] = {}
        self.finder = finder or CueFinder()
        self._source_cues: dict[int, SourceCues] = {}
        self._excerpt_bytes: dict[tuple[str, str], int] = {}
        self._prompt_bytes: dict[str, tuple[int, int]] = {}

    # ---------------------------------------------------------------- per source
    def source_cues(self, input_index: int, base_units: Sequence[dict]) -> SourceCues:
        cues = self._source_cues.get(input_index)
        if cues is None:
            cues = self._source_cues[input_index] = SourceCues(
                self.finder, [u["speaker"] for u in base_units], [u["text"] for u in base_units])
        return cues

    def candidates(self, prepared: PreparedSource, cues: SourceCues) -> Iterator[Emitted]:
        """Registries first (occurrences need to know which names get accepted)."""
        source = SourceView.of(prepared.record, cues)
        views: dict[str, ChunkView] = {}

        def view_of(chunk: dict) -> ChunkView:
            if chunk["chunk_id"] not in views:
                views[chunk["chunk_id"]] = ChunkView.of(source, chunk)
            return views[chunk["chunk_id"]]

        chunks = prepared.record["chunks"]
        extraction = [c for c in chunks if c["kind"] == "extraction"]
        scenes = [c for c in chunks if c["kind"] == "scene"]
        book = RegistryBook()
        registries: dict[tuple[str, str], list[Emitted]] = {}
        accepted: dict[str, list[tuple[str, list[dict]]]] = {kind: [] for kind in RECONCILIATION_FAMILY}
        for chunk in extraction:
            for family in REGISTRY_FAMILIES:
                result = self.slot(source.source_id, chunk, family, view_of, book)
                registries[chunk["chunk_id"], family] = result.emitted
                if result.accepted_response is not None:
                    records = next(iter(result.accepted_response.values()))
                    book.accept(REGISTRY_KIND[family], chunk["chunk_id"], records)
                    accepted[REGISTRY_KIND[family]].append((chunk["chunk_id"], records))
        for chunk in extraction:
            for family in EXTRACTION_FAMILIES:
                if family in REGISTRY_FAMILIES:
                    yield from registries.pop((chunk["chunk_id"], family))
                elif family in OCCURRENCE_FAMILIES and book.is_empty(REGISTRY_KIND[family]):
                    continue  # nothing accepted to refer to: the pipeline would defer these
                else:
                    yield from self.slot(source.source_id, chunk, family, view_of, book).emitted
        for chunk in scenes:
            for family in SCENE_FAMILIES:
                yield from self.slot(source.source_id, chunk, family, view_of, book).emitted
        if self.config.reconciliations:
            for kind, chunk_registries in accepted.items():
                if chunk_registries:  # without one the job defers: nothing to reconcile
                    yield from self.reconciliation_slot(source, kind, chunk_registries)

    def reconciliation_slot(self, source: SourceView, kind: str,
                            chunk_registries: list[tuple[str, list[dict]]]) -> list[Emitted]:
        """The attempts of one `(source, "*", <kind>-reconciliation)` slot."""
        family = RECONCILIATION_FAMILY[kind]
        slot_seed = seed_int(self.config.seed, source.source_id, SOURCE_CHUNK, family)
        rng = random.Random(slot_seed)
        if rng.random() >= self.config.keep_probability:
            return []
        entries = listed_entries(source.position, chunk_registries)
        shown = entry_list_fingerprint(source.position, entries)  # the list every attempt is made from
        clean = clean_proposal(entries)
        byte_rates = {k: self.config.rates.rate(k) for k in (*BYTE_LEVEL, DefectKind.BLANK_NAME)}
        plan = plan_reconciliation_attempts(rng, self.config.reconciliation_rates, byte_rates,
                                            self.config.attempts, applicable(clean))
        emitted = []
        shown_bytes = len(orjson.dumps([entry.record for entry in entries])) if self.config.usage else 0
        for attempt, kinds in enumerate(plan, start=1):
            response, defects = inject_reconciliation(clean, entries, kinds, rng)
            candidate = self.envelope(source.source_id, SOURCE_CHUNK, family, attempt,
                                      render_response(response, kinds, rng), kinds, slot_seed,
                                      input_fingerprint=shown, shown_bytes=shown_bytes)
            truth = {"candidate_id": candidate["candidate_id"], "family": family,
                     "source_id": source.source_id, "chunk_id": SOURCE_CHUNK, "attempt": attempt,
                     "defects": [defect.to_json() for defect in defects],
                     "expected_pass": not any(kind in BLOCKING for kind in kinds)}
            emitted.append(Emitted(candidate, truth))
        return emitted

    # ---------------------------------------------------------------- per slot
    def slot(self, source_id: str, chunk: dict, family: str,
             view_of: Callable[[dict], ChunkView], book: RegistryBook) -> SlotResult:
        slot_seed = seed_int(self.config.seed, source_id, chunk["chunk_id"], family)
        rng = random.Random(slot_seed)
        if rng.random() >= self.config.keep_probability:
            return SlotResult([], None)
        view = view_of(chunk)
        shape = ChunkShape(len(view.unit_ids), view.renumbered, view.has_outside)
        plan = plan_attempts(rng, self.applicable(family, shape), self.config.rates,
                             self.config.attempts)
        clean = clean_records(family, view, rng, book)
        emitted, accepted, accepted_stale = [], None, None
        for attempt, kinds in enumerate(plan, start=1):
            response, defects = inject(family, view, rng, book, clean, kinds)
            passes = not is_failing(kinds)
            judge_defects = None
            if self.config.judge_defects.enabled:  # an RNG of its own: the slot's draws stay as they were
                judge_defects = []
                if passes:
                    planting = random.Random(seed_int(slot_seed, attempt, "judge-defects"))
                    response, judge_defects = plant(family, response, view.chunk_speakers(),
                                                    self.config.judge_defects, planting)
            # The job accepts the earliest passing current attempt, else the earliest passing one
            # (contract §6.1): what later prompts list (registries) is that attempt's response.
            if passes and self.stale(family, attempt, kinds):
                accepted_stale = response if accepted_stale is None else accepted_stale
            elif passes and accepted is None:
                accepted = response
            candidate = self.envelope(source_id, chunk["chunk_id"], family, attempt,
                                      render_response(response, kinds, rng), kinds, slot_seed,
                                      shown_bytes=self.excerpt_bytes(view) if self.config.usage else 0)
            truth = {"candidate_id": candidate["candidate_id"], "family": family,
                     "source_id": source_id, "chunk_id": chunk["chunk_id"], "attempt": attempt,
                     "defects": [defect.to_json() for defect in defects],
                     "expected_pass": passes}
            if judge_defects is not None:
                truth["judge_defects"] = judge_defects
            emitted.append(Emitted(candidate, truth))
        return SlotResult(emitted, accepted if accepted is not None else accepted_stale)

    def applicable(self, family: str, shape: ChunkShape) -> RatedKinds:
        key = (family, shape)
        if key not in self._applicable:
            self._applicable[key] = rated(applicable_kinds(family, shape), self.config.rates)
        return self._applicable[key]

    def fingerprints(self, family: str) -> tuple[str, str]:
        if family not in self._fingerprint_cache:
            self._fingerprint_cache[family] = tuple(self._fingerprints(family))
        return self._fingerprint_cache[family]

    def stale(self, family: str, attempt: int, kinds: Sequence[DefectKind]) -> bool:
        """Whether the attempt's envelope carries another prompt fingerprint than the current one."""
        return ((attempt == 1 and family in self.config.revised_families)
                or DefectKind.STALE_PROMPT_FINGERPRINT in kinds)

    def excerpt_bytes(self, view: ChunkView) -> int:
        """UTF-8 bytes of the chunk's excerpt as a request shows it (``domain.batch.prompts``), once per chunk."""
        from domain.batch.prompts import excerpt_text  # with --usage only: the prompts import every family

        key = (view.source.source_id, view.chunk_id)
        if key not in self._excerpt_bytes:
            units = [SimpleNamespace(unit_id=view.source.unit_ids[pos], speaker=view.source.speakers[pos],
                                     text=view.source.texts[pos]) for pos in sorted(view.positions)]
            self._excerpt_bytes[key] = len(excerpt_text(units).encode("utf-8"))
        return self._excerpt_bytes[key]

    def prompt_bytes(self, family: str) -> tuple[int, int]:
        """(system prompt bytes, response schema bytes) of the family's requests, once per family."""
        from domain.assets import composed_prompt, llm_schema_path, load_json_asset

        if family not in self._prompt_bytes:
            self._prompt_bytes[family] = (len(composed_prompt(family)),
                                          len(orjson.dumps(load_json_asset(llm_schema_path(family)))))
        return self._prompt_bytes[family]

    def usage(self, candidate_id: str, family: str, attempt: int, shown_bytes: int, raw_response: str) -> dict | None:
        """What the attempt was billed (``sample.sim_usage``); None for the attempts recorded without usage."""
        if not sim_usage.recorded(candidate_id):
            return None
        system, schema = self.prompt_bytes(family)
        feedback = sim_usage.RETRY_FEEDBACK_BYTES if attempt > 1 else 0
        return sim_usage.usage_record(candidate_id, prompt_bytes=system + shown_bytes + schema + feedback,
                                      system_bytes=system, answer=raw_response, batch=False)

    def envelope(self, source_id: str, chunk_id: str, family: str, attempt: int,
                 raw_response: str, kinds: Sequence[DefectKind], slot_seed: int,
                 input_fingerprint: str | None = None, shown_bytes: int = 0) -> dict:
        """One candidate record (contract §3.2); ``input_fingerprint`` (reconciliations only): the
        entry list the attempt was made from; ``shown_bytes``: what the request showed besides the
        prompt (with ``usage``)."""
        prompt, schema = self.fingerprints(family)
        if attempt == 1 and family in self.config.revised_families:
            prompt = earlier_prompt_fingerprint(family)
        if DefectKind.STALE_PROMPT_FINGERPRINT in kinds:
            prompt = stale_fingerprint(prompt, family)
        record = {"candidate_id": candidate_id(source_id, chunk_id, family, attempt),
                  "family": family, "source_id": source_id, "chunk_id": chunk_id,
                  "attempt": attempt, "producer": PRODUCER,
                  "prompt_fingerprint": prompt, "schema_fingerprint": schema,
                  "raw_response": raw_response, "received_at": received_at(slot_seed, attempt)}
        if input_fingerprint is not None:
            record["input_fingerprint"] = input_fingerprint
        if self.config.usage:
            usage = self.usage(record["candidate_id"], family, attempt, shown_bytes, raw_response)
            if usage is not None:
                record["usage"] = usage
        return record


# -------------------------------------------------------------------- sizing

def mean_attempts_per_slot(config: ProducerConfig, samples: int = 4000) -> float:
    """Estimated candidates per slot under these rates (a fixed-seed simulation)."""
    rng = random.Random(seed_int("calibration", config.seed))
    shape = ChunkShape(30, False, True)
    weights = [9 if family in EXTRACTION_FAMILIES else 1 for family in FAMILIES]
    total = 0
    for _ in range(samples):
        family = rng.choices(FAMILIES, weights=weights)[0]
        kinds = rated(applicable_kinds(family, shape), config.rates)
        total += len(plan_attempts(rng, kinds, config.rates, config.attempts))
    return total / samples


def slots_of(seed: int, inputs: Sequence[dict], slots: Sequence[SourceSlot],
             options: SourceOptions) -> int:
    total = 0
    for slot in slots:
        extraction, scene = planned_chunk_counts(seed, inputs[slot.input_index], slot.source_id,
                                                 options)
        total += len(EXTRACTION_FAMILIES) * extraction + len(SCENE_FAMILIES) * scene
    return total


@dataclass(frozen=True, slots=True)
class Sizing:
    source_count: int
    keep_probability: float
    expected_candidates: float


def plan_size(inputs: Sequence[dict], config: ProducerConfig, options: SourceOptions,
              sources: int | None, target: int | None) -> Sizing:
    """How many sources, and which fraction of slots, reach about `target` candidates."""
    per_slot = mean_attempts_per_slot(config)
    count = sources or len(inputs)
    full = slots_of(config.seed, inputs, source_slots(inputs, count), options) * per_slot
    if target and not sources and full < target:
        per_source = full / count
        count = max(count, math.ceil(target / per_source))
        full = slots_of(config.seed, inputs, source_slots(inputs, count), options) * per_slot
    keep = min(1.0, target / full) if target and full else 1.0
    return Sizing(count, keep, full * keep)


# -------------------------------------------------------------------- running

@dataclass
class RunStats:
    sources: int = 0
    candidates: int = 0
    passing: int = 0
    defects: Counter = field(default_factory=Counter)
    families: Counter = field(default_factory=Counter)


def run(inputs: Sequence[dict], config: ProducerConfig, options: SourceOptions,
        fingerprints: Fingerprints, candidates_out: Path, truth_out: Path,
        transcripts_out: Path | None = None, source_count: int | None = None) -> RunStats:
    """Write candidates, truth (and transcripts); one source at a time."""
    producer = SimulatedProducer(config, fingerprints)
    stats = RunStats()
    with ExitStack() as stack:
        candidates_file = stack.enter_context(open_output(candidates_out))
        truth_file = stack.enter_context(open_output(truth_out))
        truth_file.write(truth_vocabulary_line())
        transcripts_file = (stack.enter_context(open_output(transcripts_out))
                            if transcripts_out else None)
        for slot in source_slots(inputs, source_count or len(inputs)):
            base = inputs[slot.input_index]
            prepared = prepare_source(config.seed, slot, base, options)
            if transcripts_file is not None:
                transcripts_file.write(dumps_line(prepared.record))
            cues = producer.source_cues(slot.input_index, base["units"])
            stats.sources += 1
            for item in producer.candidates(prepared, cues):
                candidates_file.write(dumps_line(item.candidate))
                truth_file.write(dumps_line(item.truth))
                _count(stats, item.truth)
    return stats


def _count(stats: RunStats, truth: dict) -> None:
    stats.candidates += 1
    stats.passing += truth["expected_pass"]
    stats.families[truth["family"]] += 1
    stats.defects.update(defect["kind"] for defect in truth["defects"])


def load_fingerprints(spec: str) -> Fingerprints:
    """`module:function`, imported only when the CLI needs it."""
    module_name, _, function_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise SystemExit(f"cannot import {module_name} for current fingerprints "
                         f"({error}); pass --fingerprints MODULE:FUNCTION") from error
    return getattr(module, function_name)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sample.simulated_producer",
        description="SIMULATED producer (a test/demo double, not a model): writes raw "
                    "model-candidate records with injected defects, plus ground truth.")
    parser.add_argument("--transcripts", required=True, nargs="+", type=Path,
                        help="transcript records (.jsonl or .jsonl.gz)")
    parser.add_argument("--candidates-out", required=True, type=Path)
    parser.add_argument("--truth-out", required=True, type=Path)
    parser.add_argument("--transcripts-out", "--output-transcripts", type=Path,
                        help="the transcripts the candidates refer to (needed with --sources "
                             "beyond the inputs or --min-units; enables renumbered regions)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--sources", type=int, help="number of sources (inputs are cycled)")
    parser.add_argument("--candidates", type=int, help="approximate number of candidates")
    parser.add_argument("--min-units", type=int, default=0,
                        help="pad shorter transcripts (repeating turns) to this many units")
    parser.add_argument("--max-units", type=int, default=0,
                        help="with --min-units: per-source target drawn from [min, max]")
    parser.add_argument("--extraction-chunk-units", type=int, default=30)
    parser.add_argument("--scene-chunk-units", type=int, default=120)
    parser.add_argument("--defect-rate", action="append", default=[], metavar="NAME=P",
                        help="override a DefectRates or AttemptModel field (repeatable)")
    parser.add_argument("--reconciliations", action="store_true",
                        help="also write source-level registry reconciliation attempts (chunk_id '*')")
    parser.add_argument("--revised-family", action="append", default=[], metavar="FAMILY",
                        choices=revisable_families(),
                        help="first attempts of this family were made under its earlier prompt "
                             "(sample/prompts/FAMILY.v0.md) and are stale for the job (repeatable)")
    parser.add_argument("--judge-defects", action="store_true",
                        help="plant semantic defects no rule sees (wrong actor, wrong caster, a player as an NPC) "
                             "at the demo's rates, for the judges (sample.simulated_judge); truth: judge_defects")
    parser.add_argument("--judge-defect-rate", action="append", default=[], metavar="NAME=P",
                        help="override a planted semantic defect's rate: wrong_actor, wrong_caster, player_as_npc")
    parser.add_argument("--usage", action="store_true",
                        help="give each candidate the usage a provider could have billed (sample.sim_usage: from "
                             "the prompt's and the response's bytes; one attempt in ten without)")
    parser.add_argument("--fingerprints", default=DEFAULT_FINGERPRINTS, metavar="MODULE:FUNC",
                        help="callable family -> (prompt_fingerprint, schema_fingerprint)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, fingerprints: Fingerprints | None = None) -> int:
    args = parse_args(argv)
    missing = missing_builders()
    if missing:  # every declared family is simulated, or none is: an archive without one would mislead
        raise SystemExit(f"the simulator cannot produce every declared family: {'; '.join(missing)}")
    try:
        reconciliation_rates, overrides = split_overrides(ReconciliationRates(), args.defect_rate)
        rates, attempts = with_overrides(DefectRates(), AttemptModel(), overrides)
    except ValueError as error:
        raise SystemExit(str(error)) from error
    inputs = [record for path in args.transcripts for record in read_jsonl(path)]
    if not inputs:
        raise SystemExit("no transcript records in --transcripts")
    writes_transcripts = args.transcripts_out is not None
    options = SourceOptions(min_units=args.min_units, max_units=args.max_units,
                            extraction_units=args.extraction_chunk_units,
                            scene_units=args.scene_chunk_units,
                            renumber_rate=rates.renumbered_source if writes_transcripts else 0.0)
    config = ProducerConfig(seed=args.seed, rates=rates, attempts=attempts)
    sizing = plan_size(inputs, config, options, args.sources, args.candidates)
    if not writes_transcripts and (sizing.source_count > len(inputs) or args.min_units):
        raise SystemExit("these options create sources the input does not have; "
                         "pass --transcripts-out FILE so the pipeline can read them")
    judge_defects = (JudgeDefectRates.demo() if args.judge_defects else JudgeDefectRates()).with_overrides(
        args.judge_defect_rate)
    config = ProducerConfig(seed=args.seed, rates=rates, attempts=attempts,
                            keep_probability=sizing.keep_probability,
                            reconciliations=args.reconciliations, judge_defects=judge_defects,
                            reconciliation_rates=reconciliation_rates,
                            revised_families=frozenset(args.revised_family), usage=args.usage)
    if args.candidates and sizing.expected_candidates < 0.9 * args.candidates:
        print(f"note: about {sizing.expected_candidates:.0f} candidates fit in "
              f"{sizing.source_count} sources; raise --sources or --min-units for more",
              file=sys.stderr)
    started = time.perf_counter()
    stats = run(inputs, config, options, fingerprints or load_fingerprints(args.fingerprints),
                args.candidates_out, args.truth_out, args.transcripts_out, sizing.source_count)
    elapsed = time.perf_counter() - started
    _report(stats, elapsed)
    return 0


def _report(stats: RunStats, elapsed: float) -> None:
    rate = stats.candidates / elapsed if elapsed else 0.0
    print(f"simulated {stats.candidates} candidates over {stats.sources} sources in "
          f"{elapsed:.1f}s ({rate:.0f}/s); {stats.passing} expected to pass", file=sys.stderr)
    for kind, count in sorted(stats.defects.items()):
        print(f"  {kind}: {count}", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
