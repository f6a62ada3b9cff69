"""Evaluate one raw response of one family under the current policy (SPEC §5).

Parse (msgspec structs derived from the response model first, then the pydantic
model itself; the JSON Schema only explains a failure), adapt to the
typed candidate (endpoint ordering, sorting, de-duplication), then every
validator of the family, collecting every issue in one pass.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, Sequence, get_args

import orjson
from pydantic import ValidationError

from domain.evidence import earliest_of_sort_keys, evidence_sort_keys, range_positions, sort_keys_are_canonical
from domain.families.base import Adapted, EvaluationContext, FamilySpec, StrictModel
from domain.families.common import StructuralContext, invalid_json_issue, structural_issues
from domain.families.response_structs import fast_response_decoder
from domain.frozen import quick_init
from domain.issues import Issue


@quick_init
@dataclass(frozen=True, slots=True)
class CandidateResult:
    passed: bool
    issues: tuple[Issue, ...]
    adapted: Adapted | None
    # Cited ranges (as the response wrote them) that endpoint ordering swapped (SPEC §5 step 3).
    endpoints_reordered: int = 0


def parse_copy(raw_response: str) -> str:
    """The text the parser reads: the raw response minus a leading byte-order mark.

    A BOM is transport noise, not a defect; the raw response itself is never
    changed (provenance keeps it byte for byte).
    """
    return raw_response[1:] if raw_response.startswith("\ufeff") else raw_response


@lru_cache(maxsize=None)
def _structural_context(spec: FamilySpec) -> StructuralContext:
    return StructuralContext(spec.key, spec.list_field, dict(spec.enums), spec.describe_raw_record,
                             partial(_record_accepted, record_model(spec)))


def record_model(spec: FamilySpec) -> type[StrictModel]:
    """The typed model of one record of the family's response (its list field's items)."""
    return get_args(spec.response_model.model_fields[spec.list_field].annotation)[0]


def _record_accepted(model: type[StrictModel], record: Any) -> bool:
    # Through JSON text, as the response itself is validated: strict pydantic reads a JSON
    # array as a tuple, a Python list not.
    try:
        model.model_validate_json(orjson.dumps(record))
    except (ValidationError, orjson.JSONEncodeError):
        return False
    return True


def evaluate_response(spec: FamilySpec, raw_response: str, ctx: EvaluationContext) -> CandidateResult:
    text = parse_copy(raw_response)
    response = fast_response_decoder(spec.response_model)(text)
    if response is None:  # refused by the structs: the model decides (and accepts, e.g., 3.0 as 3)
        try:
            response = spec.response_model.model_validate_json(text)
        except ValidationError:
            return _unparsed(spec, text)
    if spec.adapt_in_context is not None:
        adapted = spec.adapt_in_context(response, ctx)
    else:
        adapted = spec.adapt(response, ctx.transcript)
    issues: list[Issue] = []
    for validator in spec.validators:
        issues.extend(validator(adapted, ctx))
    issues.extend(normalization_invariants(adapted, ctx))
    return CandidateResult(not issues, tuple(issues), adapted, reordered_ranges(spec, response, ctx))


def _unparsed(spec: FamilySpec, text: str) -> CandidateResult:
    """The failed result of a response the model rejects: why, explained by the JSON Schema."""
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return CandidateResult(False, (invalid_json_issue(exc),), None)
    return CandidateResult(False, structural_issues(_structural_context(spec), document), None)


def reordered_ranges(spec: FamilySpec, response: object, ctx: EvaluationContext) -> int:
    """How many cited ranges of a parsed response endpoint ordering swaps.

    Counted per range as written (a reversed range written twice counts
    twice). Only the nine extraction families order endpoints; a reversed
    resolvable range that reached their strict source-reference validator
    would be rejected, so a passing attempt with a count above zero passes
    *because of* the ordering (what the report calls a saved retry).
    """
    if spec.chunk_kind != "extraction":
        return 0
    # order_endpoints swaps a reference of the current source when both ids resolve and the
    # start sits later; every reference here is cited in the current source (no SourceRef
    # built twice on the hot path).
    index = ctx.transcript.index
    source_id, positions = index.source_id, index.positions
    swapped = 0
    for item in getattr(response, spec.list_field):
        for ev in getattr(item, "evidence", None) or ():
            resolved = range_positions(source_id, positions, source_id, ev.start_unit_id, ev.end_unit_id)
            if resolved is not None and resolved[0] > resolved[1]:
                swapped += 1
    return swapped


# Every invariant issue's validator key starts with this; the engine counts them per family.
INVARIANT_PREFIX = "invariant."


def is_invariant_issue(issue: Issue) -> bool:
    return issue.validator.startswith(INVARIANT_PREFIX)


def normalization_invariants(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    """Derived-state checks after canonicalization (SPEC §4.2), per candidate.

    They guard against application bugs, so they are operator diagnostics
    only: their issues carry no correction, and the producer is never told it
    can repair state it does not control. The per-source check that artifact
    ids are unique is :func:`duplicate_artifact_ids`.
    """
    index = ctx.transcript.index
    found: list[Issue] = []
    keys_of_all: list[tuple] = []  # every record's evidence sort keys: the earliest start is read from them
    for n, record in enumerate(adapted.records):
        refs = getattr(record, "evidence", None)
        if refs is None:
            continue
        refs = tuple(refs)
        keys = evidence_sort_keys(index, refs)
        if not sort_keys_are_canonical(keys, refs):
            found.append(Issue(f"{INVARIANT_PREFIX}evidence", "evidence_not_canonical", f"records[{n}].evidence",
                               "canonical evidence is not sorted, forward and de-duplicated", None))
        keys_of_all.extend(keys)
    if keys_of_all:
        earliest = earliest_of_sort_keys(index, keys_of_all)
        if (None if earliest is None else earliest[1]) != adapted.earliest_evidence_unit_id:
            found.append(Issue(f"{INVARIANT_PREFIX}earliest", "earliest_evidence_inconsistent",
                               "earliest_evidence_unit_id",
                               f"earliest_evidence_unit_id {adapted.earliest_evidence_unit_id!r} does not match "
                               f"the records", None))
    return tuple(found)


def duplicate_artifact_ids(artifact_ids: Sequence[str]) -> tuple[tuple[int, Issue], ...]:
    """Per-source invariant: every artifact id is unique (SPEC §4.2).

    Returns (position, operator-only issue) for every artifact whose id another
    artifact of the source shares. Ids are hashes over the slot and the
    candidate, so a hit means our derivation is broken, never the producer.
    """
    positions: dict[str, list[int]] = defaultdict(list)
    for n, artifact_id in enumerate(artifact_ids):
        positions[artifact_id].append(n)
    found = []
    for artifact_id, shared in positions.items():
        if len(shared) > 1:
            for n in shared:
                found.append((n, Issue(f"{INVARIANT_PREFIX}artifact_id", "duplicate_artifact_id", "artifact_id",
                                       f"artifact_id {artifact_id} is shared by {len(shared)} artifacts of this source",
                                       None)))
    return tuple(sorted(found, key=lambda item: item[0]))
