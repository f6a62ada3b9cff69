"""Evaluate one raw response of one family under the current policy (contract §5).

Parse (msgspec structs derived from the response model first, then the pydantic
model itself; the JSON Schema only explains a failure), adapt to the
typed candidate (endpoint ordering, sorting, de-duplication: each cited range
resolved once, ``domain.evidence``), then every validator of the family,
collecting every issue in one pass.
"""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache, partial
from typing import Any, Sequence, get_args

import orjson
from pydantic import ValidationError

from domain.evidence import earliest_start, evidence_is_canonical
from domain.families.base import Adapted, EvaluationContext, FamilySpec, StrictModel
from domain.families.common import StructuralContext, invalid_json_issue, structural_issues
from domain.families.response_structs import fast_response_decoder
from domain.frozen import Value
from domain.issues import Issue


class CandidateResult(Value):
    passed: bool
    issues: tuple[Issue, ...]
    adapted: Adapted | None
    # Cited ranges (as the response wrote them) that endpoint ordering swapped (contract §5 step 3).
    # Only the nine extraction families order endpoints; a reversed resolvable range that
    # reached their strict source-reference validator would be rejected, so a passing attempt
    # with a count above zero passes *because of* the ordering (what the report calls a saved
    # retry). Counted by the adapter as it resolves each range (``Adapted.endpoints_reordered``).
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
    return CandidateResult(not issues, tuple(issues), adapted, adapted.endpoints_reordered)


def _unparsed(spec: FamilySpec, text: str) -> CandidateResult:
    """The failed result of a response the model rejects: why, explained by the JSON Schema."""
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return CandidateResult(False, (invalid_json_issue(exc),), None)
    return CandidateResult(False, structural_issues(_structural_context(spec), document), None)


# Every invariant issue's validator key starts with this; the engine counts them per family.
INVARIANT_PREFIX = "invariant."


def is_invariant_issue(issue: Issue) -> bool:
    return issue.validator.startswith(INVARIANT_PREFIX)


def normalization_invariants(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    """Derived-state checks after canonicalization (contract §4.2), per candidate.

    They guard against application bugs, so they are operator diagnostics
    only: their issues carry no correction, and the producer is never told it
    can repair state it does not control. The per-source check that artifact
    ids are unique is :func:`duplicate_artifact_ids`.
    """
    index = ctx.transcript.index
    found: list[Issue] = []
    cited: list = []  # every record's evidence: the earliest start is read from all of it
    for n, record in enumerate(adapted.records):
        refs = getattr(record, "evidence", None)
        if refs is None:
            continue
        refs = tuple(refs)
        if len(refs) == 1 and refs[0].index is index and refs[0].first <= refs[0].last:
            cited.append(refs[0])  # evidence_is_canonical of one resolved forward range, without its call
            continue
        if not evidence_is_canonical(index, refs):
            found.append(Issue(f"{INVARIANT_PREFIX}evidence", "evidence_not_canonical", f"records[{n}].evidence",
                               "canonical evidence is not sorted, forward and de-duplicated", None))
        cited.extend(refs)
    if cited:
        earliest = earliest_start(index, cited)
        if (None if earliest is None else earliest.start_unit_id) != adapted.earliest_evidence_unit_id:
            found.append(Issue(f"{INVARIANT_PREFIX}earliest", "earliest_evidence_inconsistent",
                               "earliest_evidence_unit_id",
                               f"earliest_evidence_unit_id {adapted.earliest_evidence_unit_id!r} does not match "
                               f"the records", None))
    return tuple(found)


def duplicate_artifact_ids(artifact_ids: Sequence[str]) -> tuple[tuple[int, Issue], ...]:
    """Per-source invariant: every artifact id is unique (contract §4.2).

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
