"""Evaluate one raw response of one family under the current policy (SPEC §5).

Parse (typed fast path; the JSON Schema only explains a failure), adapt to the
typed candidate (endpoint ordering, sorting, de-duplication), then every
validator of the family, collecting every issue in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import orjson
from pydantic import ValidationError

from domain.evidence import earliest_evidence_unit_id, evidence_is_canonical
from domain.families.base import Adapted, EvaluationContext, FamilySpec
from domain.families.common import StructuralContext, invalid_json_issue, structural_issues
from domain.issues import Issue


@dataclass(frozen=True, slots=True)
class CandidateResult:
    passed: bool
    issues: tuple[Issue, ...]
    adapted: Adapted | None


def parse_copy(raw_response: str) -> str:
    """The text the parser reads: the raw response minus a leading byte-order mark.

    A BOM is transport noise, not a defect; the raw response itself is never
    changed (provenance keeps it byte for byte).
    """
    return raw_response[1:] if raw_response.startswith("\ufeff") else raw_response


@lru_cache(maxsize=None)
def _structural_context(spec: FamilySpec) -> StructuralContext:
    return StructuralContext(spec.key, spec.list_field, dict(spec.enums), spec.describe_raw_record)


def evaluate_response(spec: FamilySpec, raw_response: str, ctx: EvaluationContext) -> CandidateResult:
    text = parse_copy(raw_response)
    try:
        response = spec.response_model.model_validate_json(text)
    except ValidationError:
        try:
            document = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            return CandidateResult(False, (invalid_json_issue(exc),), None)
        return CandidateResult(False, structural_issues(_structural_context(spec), document), None)
    adapted = spec.adapt(response, ctx.transcript)
    issues: list[Issue] = []
    for validator in spec.validators:
        issues.extend(validator(adapted, ctx))
    issues.extend(normalization_invariants(adapted, ctx))
    return CandidateResult(not issues, tuple(issues), adapted)


def normalization_invariants(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    """Derived-state checks after canonicalization (SPEC §4.2).

    They guard against application bugs, so they are operator diagnostics
    only: their issues carry no correction, and the producer is never told it
    can repair state it does not control.
    """
    index = ctx.transcript.index
    found: list[Issue] = []
    for n, record in enumerate(adapted.records):
        refs = getattr(record, "evidence", None)
        if refs is not None and not evidence_is_canonical(index, tuple(refs)):
            found.append(Issue("invariant.evidence", "evidence_not_canonical", f"records[{n}].evidence",
                               "canonical evidence is not sorted, forward and de-duplicated", None))
    recorded = [ref for record in adapted.records for ref in (getattr(record, "evidence", None) or ())]
    if recorded and earliest_evidence_unit_id(index, recorded) != adapted.earliest_evidence_unit_id:
        found.append(Issue("invariant.earliest", "earliest_evidence_inconsistent", "earliest_evidence_unit_id",
                           f"earliest_evidence_unit_id {adapted.earliest_evidence_unit_id!r} does not match the records",
                           None))
    return tuple(found)
