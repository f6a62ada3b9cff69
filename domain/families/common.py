"""Mechanics several families share: evidence adaptation, the lazy naming of a
record in guidance, the source-reference validator, registry identity and
membership, and structural (schema) guidance.

These are rules the families have in common (contract §4/§5), written once. Family
modules pass in what differs: the record's transcript-grounded subject and the
noun for their kind.
"""

from __future__ import annotations

import re
from operator import itemgetter
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Container, Mapping, Sequence

import orjson

if TYPE_CHECKING:  # imported on first use: jsonschema is 0.13 s of every process's start, launchers included
    from jsonschema import Draft202012Validator

from domain.assets import llm_schema_path, load_json_asset
from domain.evidence import SourceRef, canonical_written, earliest_start, resolve, span_within_chunk
from domain.families.base import Adapted, EvaluationContext, Evidence, fold_name
from domain.families.schema_walk import Walk, compiled_walk, violations
from domain.issues import (
    Correction,
    Issue,
    IssueCollector,
    is_are,
    quote_name,
    render_range,
    render_ranges,
    render_units,
)
from domain.source import (Chunk, DocumentIndex, Transcript, chunk_contains_positions, chunk_missing_positions,
                           contiguous_positions)


# --- adaptation -----------------------------------------------------------------

class EvidenceAdapter:
    """One candidate's evidence, adapted record by record: every extraction adapter
    builds its records' evidence through one of these.

    ``adapter(item.evidence)`` is the record's canonical evidence (``canonical_written``:
    each range the model wrote resolved once, put in document order, de-duplicated and
    sorted); ``adapter.adapted(records)`` orders the records (:func:`order_records`) and
    carries how many ranges were written backwards, the candidate's ``endpoints_reordered``.
    """

    __slots__ = ("_index", "_source_id", "_reordered")

    def __init__(self, transcript: Transcript) -> None:
        self._index = transcript.index
        self._source_id = transcript.source_id
        self._reordered = 0

    def __call__(self, evidence: Sequence[Evidence]) -> tuple[SourceRef, ...]:
        refs, backwards = canonical_written(self._index, self._source_id, evidence)
        if backwards:
            self._reordered += backwards
        return refs

    def adapted(self, records: Sequence[Any]) -> Adapted:
        return order_records(self._index, records, self._reordered)


def order_records(index: DocumentIndex, records: Sequence[Any], endpoints_reordered: int = 0) -> Adapted:
    """Records by earliest evidence (ties keep response order) and the overall earliest unit."""
    if len(records) == 1:  # most candidates hold one record: nothing to order
        best = earliest_start(index, records[0].evidence)
        return Adapted(tuple(records), None if best is None else best.start_unit_id, endpoints_reordered)
    keyed = []
    for n, record in enumerate(records):
        best = earliest_start(index, record.evidence)
        keyed.append(((best is None, best.first if best is not None else 0, n), record, best))
    keyed.sort(key=_first)  # itemgetter: no Python call per record
    ordered = tuple(map(_second, keyed))
    # The earliest start over all records is the first record's (positions identify unit ids).
    earliest = keyed[0][2] if keyed else None
    return Adapted(ordered, None if earliest is None else earliest.start_unit_id, endpoints_reordered)


_first = itemgetter(0)
_second = itemgetter(1)


# --- naming a record in guidance, lazily ------------------------------------------------

def evidence_ranges(record: Any, known: Container) -> str:
    """A record's cited ranges in model words (its ``evidence``)."""
    return cited(record.evidence, known)


class RecordIssues(IssueCollector):
    """The issues one validator finds in a candidate's records, each record named lazily.

    The ONE way a validator that walks records builds its corrections: it tests each
    rule and calls :meth:`add_for` for each one broken. A record's subject
    (``subject_of(record)``, its transcript-grounded name) and its cited ranges
    (``ranges_of(record, known)``) are built on its first issue and reused for the
    next, so a record that breaks no rule costs only its tests: no validator keeps a
    list of its flags to decide whether a record needs naming.
    """

    __slots__ = ("list_field", "known", "subject_of", "ranges_of", "_named", "_subject", "_ranged", "_ranges")

    def __init__(self, validator: str, list_field: str, subject_of: Callable[[Any], str], known: Container = (),
                 ranges_of: Callable[[Any, Container], str] = evidence_ranges) -> None:
        self.validator = validator  # IssueCollector's fields, set here (super().__init__ costs ~2k instructions
        self._issues: list[Issue] = []  # a candidate, for validators that run on every one)
        self.list_field = list_field
        self.known = known  # the transcript's index: its unit ids are written exactly
        self.subject_of = subject_of
        self.ranges_of = ranges_of
        self._named = self._ranged = None  # the record whose _subject / _ranges are held (set with them)

    def subject(self, record: Any) -> str:
        if record is not self._named:
            self._subject = self.subject_of(record)
            self._named = record
        return self._subject

    def ranges(self, record: Any) -> str:
        if record is not self._ranged:
            self._ranges = self.ranges_of(record, self.known)
            self._ranged = record
        return self._ranges

    def add_for(self, n: int, record: Any, reason_code: str, field: str, message: str, problem: str,
                fix: str) -> None:
        """One broken rule of ``record``, the ``n``-th of the response's list, at
        ``<list_field>[n]<field>``: the operator ``message``, and for the model the
        record's subject and cited ranges with the family's ``problem`` and ``fix``."""
        self.add(reason_code, f"{self.list_field}[{n}]{field}", message,
                 Correction(self.subject(record), self.ranges(record), problem, fix))


# --- source references -----------------------------------------------------------

def chunk_extent(chunk: Chunk) -> str:
    """The excerpt's range as the model saw it (document order; chunk ids exist, so exact)."""
    return render_range(chunk.first_unit_id, chunk.last_unit_id, (chunk.first_unit_id, chunk.last_unit_id))


# How many units of a gap a correction names before "and N more".
MAX_UNITS_SHOWN = 3


def source_reference_issues(
    validator: str, ctx: EvaluationContext, records: Sequence[Any], subject_of: Callable[[Any], str], list_field: str,
) -> tuple[Issue, ...]:
    """The strict source-reference rule shared by the nine extraction families (contract §5.3),
    over every record of a candidate (each has ``evidence``); a record's ranges are located
    at ``<list_field>[n].evidence[i]``.

    Every cited span must resolve in the current source and lie wholly inside the chunk
    the model saw (``span_within_chunk``, asked once per range). Reversed ranges that
    reach this point (another producer, an application bug) are rejected, not fixed. A
    record whose every range passes costs one containment test per range; its subject
    is built only for a range that fails.
    """
    index, chunk = ctx.transcript.index, ctx.chunk
    out: RecordIssues | None = None  # most candidates have no range to report
    # A chunk of consecutive units (most are): span_within_chunk of a ref resolved through ``index`` is
    # then two comparisons, made here without a call per range (tests/test_evidence.py holds them equal).
    bounds = contiguous_positions(chunk)
    for n, record in enumerate(records):
        i = 0
        for ref in record.evidence:
            if bounds is not None and ref.index is index and bounds[0] <= ref.first <= ref.last <= bounds[1]:
                i += 1
                continue
            if not span_within_chunk(index, chunk, ref):
                if out is None:
                    out = RecordIssues(validator, list_field, subject_of, index)
                _reference_issue(out, ctx, n, record, i, ref)
            i += 1
    return () if out is None else out.issues()


def _reference_issue(out: RecordIssues, ctx: EvaluationContext, n: int, record: Any, i: int, ref: SourceRef) -> None:
    """The wording of the ``i``-th range of a record, which is not wholly inside the chunk."""
    index, chunk = ctx.transcript.index, ctx.chunk
    where = f"{out.list_field}[{n}].evidence[{i}]"
    if ref.source_id != index.source_id:
        # The model writes unit ids only; adapters cite the current source. A range of
        # another source is our bug, so it is reported to operators, never to the producer.
        out.add("foreign_source", where,
                f"evidence cites source {ref.source_id!r}, not the current source {index.source_id!r}", None)
        return
    subject = out.subject(record)
    cited_range = render_range(ref.start_unit_id, ref.end_unit_id, index)
    extent = chunk_extent(chunk) if chunk is not None else "the excerpt"
    resolved = resolve(index, ref)
    if resolved is None:
        unresolved = list(dict.fromkeys(u for u in (ref.start_unit_id, ref.end_unit_id) if index.position(u) is None))
        out.add(
            "unresolved_unit",
            where,
            f"evidence endpoint(s) {unresolved!r} do not resolve in source {ctx.transcript.source_id}",
            Correction(subject, cited_range,
                       f"It cites {render_units(unresolved, index)}, which {is_are(len(unresolved))} not in the "
                       f"transcript excerpt.",
                       f"Cite only unit ids shown in the excerpt ({extent})."),
        )
        return
    first, last = resolved.first, resolved.last
    if first > last:
        out.add(
            "reversed_range",
            where,
            f"evidence start {ref.start_unit_id} comes after end {ref.end_unit_id} in document order",
            Correction(subject, cited_range, "Its range starts at a later unit than it ends.",
                       "Give the earlier unit as `start_unit_id` and the later one as `end_unit_id`."),
        )
    elif (chunk is not None and chunk_contains_positions(chunk, first, first)
          and chunk_contains_positions(chunk, last, last)):
        # Both ends are in the excerpt, but it has a gap between them: name the missing units.
        gap, total = chunk_missing_positions(chunk, first, last, MAX_UNITS_SHOWN)
        missing = [index.unit_ids_in_order[pos] for pos in gap]
        out.add(
            "span_outside_chunk",
            where,
            f"evidence span {ref.start_unit_id}..{ref.end_unit_id} crosses {total} unit(s) missing from chunk "
            f"{chunk.chunk_id}",
            Correction(subject, cited_range,
                       f"Its range includes {render_units(missing, index, total)}, which "
                       f"{is_are(total)} not in the transcript excerpt you were given.",
                       "Cite only units inside the excerpt: split the range around the missing "
                       f"unit{'s' if total != 1 else ''}, or drop the record if it has no other evidence."),
        )
    else:
        out.add(
            "span_outside_chunk",
            where,
            f"evidence span {ref.start_unit_id}..{ref.end_unit_id} is not wholly inside chunk "
            f"{chunk.chunk_id if chunk else None}",
            Correction(subject, cited_range, "Its range reaches beyond the transcript excerpt you were given.",
                       f"Cite only units inside the excerpt ({extent}), or drop the record if it has none."),
        )


def cited(refs: Sequence[SourceRef], known: Container = ()) -> str:
    """A record's cited ranges in model words, bounded. ``known``: the transcript's index
    (its ids are always written exactly)."""
    return render_ranges(((ref.start_unit_id, ref.end_unit_id) for ref in refs), known=known)


# --- registries: identity and membership ------------------------------------------------

def check_registry_identity(out: RecordIssues, noun: str, records: Sequence[Any]) -> None:
    """Names and aliases are non-blank and unique across entries after folding.

    ``records`` (each with ``name``, ``aliases`` and ``evidence``) are in adapted order.
    Entries are told apart by position, not by subject text, so two identical entries
    still clash; a name repeated inside one entry does not. Every clash is reported,
    naming both records and their cited ranges.
    """
    owner: dict[str, int] = {}
    holders: dict[int, str] = {}  # an earlier record's cited ranges, rendered once however many names it clashes on
    for n, record in enumerate(records):
        for field_name, value in [("name", record.name)] + [("aliases", alias) for alias in record.aliases]:
            folded = fold_name(value)
            if not folded:
                out.add_for(n, record, "blank_name", f".{field_name}", f"blank {field_name}",
                            f"Its `{field_name}` contains a blank entry.",
                            f"Give every {noun} a non-blank `name` and remove blank `aliases`.")
                continue
            first = owner.setdefault(folded, n)
            if first != n:
                holder = records[first]
                if first not in holders:
                    holders[first] = out.ranges_of(holder, out.known)
                other_subject = out.subject_of(holder)
                other = f"{other_subject[:1].lower()}{other_subject[1:]} ({holders[first]})"
                out.add_for(n, record, "duplicate_name", f".{field_name}", f"name {value!r} repeats {out.list_field}[{first}]",
                            f"Its {field_name} {quote_name(value)} is also used by {other}.",
                            f"Each name or alias must belong to exactly one {noun}: merge the two entries "
                            f"or remove the repeated name.")


def check_membership(out: RecordIssues, ctx: EvaluationContext, noun: str, n: int, record: Any, name: str,
                     field: str) -> None:
    """An occurrence must name a member of the source's accepted registry."""
    if ctx.registry is not None and not ctx.registry.knows(name):
        out.add_for(n, record, "not_in_registry", field, f"{name!r} is not in the accepted {ctx.registry.kind} registry",
                    f"{quote_name(name)} is not a known {noun} of this transcript.",
                    f"Use the exact name or alias of a known {noun}, or leave the occurrence out.")


# --- structural failures: schema errors as contextual guidance --------------------------

@lru_cache(maxsize=None)
def llm_schema_validator(family: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator  # on first use: see the module's imports

    # Not checked against the metaschema here: that check (dearer than building the validator) is a
    # test's, tests/test_family_contracts.py checks every family's schema, not each run's.
    return Draft202012Validator(load_json_asset(llm_schema_path(family)))


_TYPE_WORDS = {
    "string": "text",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


@dataclass(frozen=True)
class StructuralContext:
    family: str
    list_field: str
    enums: dict
    describe_raw_record: Callable[[Any], str | None]
    # Whether the family's typed record model accepts one raw record of ``list_field``.
    record_accepted: Callable[[Any], bool]


_JSON_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def invalid_json_issue(error: orjson.JSONDecodeError) -> Issue:
    text = str(error)
    if "number is infinity" in text:
        # Valid JSON whose number no parser can hold (1e400): say that, not "not valid JSON".
        found = _JSON_NUMBER.match(error.doc or "", error.pos or 0)
        number = quote_name(found.group(0), limit=24) if found else "a number"
        return Issue(
            "structure", "number_out_of_range", "", f"response holds a number out of range: {error}",
            Correction("The response", "",
                       f"It is valid JSON, but the number {number} is far too large to use.",
                       "Write every number as an ordinary value in range, and unit ids exactly as the "
                       "excerpt shows them."),
        )
    truncated = "end of data" in text or "EOF" in text
    problem = (
        "It stops before the JSON is complete." if truncated else "It is not valid JSON."
    )
    return Issue(
        "structure", "invalid_json", "", f"response is not valid JSON: {error}",
        Correction("The response", "", problem, "Return one complete JSON object and nothing else."),
    )


def structural_issues(sctx: StructuralContext, document: Any) -> tuple[Issue, ...]:
    """Every schema violation of ``document``, with model-facing prose.

    Called only when the fast path (the typed model) rejected the response, so
    its cost is paid on failures only.
    """
    try:
        errors = schema_errors(sctx, document)
    except RecursionError:
        errors = None
    if not errors:
        # The typed model and the schema disagree, or the document nests absurdly deep.
        return (
            Issue("structure", "schema_mismatch", "", "response rejected by the typed model",
                  Correction("The response", "", "It does not follow the required JSON shape.",
                             "Return exactly the fields the response schema lists, with their types.")),
        )
    return tuple(_schema_error_issue(sctx, document, path, error) for path, error in errors)


def schema_errors(sctx: StructuralContext, document: Any) -> list[tuple[list, Any]]:
    """Every violation of the family's LLM schema as (absolute path, error), sorted by path,
    then keyword: what ``Draft202012Validator.iter_errors`` finds in ``document``.

    The schema's compiled checks (``schema_walk``) find it, walking every record: cheaper
    than asking the typed model which records to skip (the explanation of a failure, 0.73 M
    instructions through jsonschema, is 0.16 M). jsonschema itself for a schema they do not
    cover or a document nested absurdly deep (:func:`_jsonschema_errors`).
    """
    walk = llm_schema_walk(sctx.family)
    found = None if walk is None else violations(walk, document)
    if found is None:
        return _jsonschema_errors(sctx, document)
    errors = [(list(v.path), v) for v in found]
    errors.sort(key=_error_order)
    return errors


def _error_order(item: tuple[list, Any]) -> tuple[list[str], str]:
    return [str(p) for p in item[0]], item[1].validator


def _jsonschema_errors(sctx: StructuralContext, document: Any) -> list[tuple[list, Any]]:
    """:func:`schema_errors` by jsonschema. Records the typed record model accepts are not
    walked: the model and the schema accept the same documents
    (tests/test_family_contracts.py), so such a record holds no violation, and the schemas
    use no keyword that relates one record to another (uniqueItems and the like are refused
    there). Walking a whole response in jsonschema costs about 0.3 ms, for a defect that is
    usually in one record."""
    records = document.get(sctx.list_field) if isinstance(document, dict) else None
    walked: list[int] | None = None  # positions of the records the validator sees, when some are left out
    if isinstance(records, list) and records:
        walked = [n for n, record in enumerate(records) if not sctx.record_accepted(record)] or [0]
        document = {**document, sctx.list_field: [records[n] for n in walked]}
    found = []
    for error in llm_schema_validator(sctx.family).iter_errors(document):
        path = list(error.absolute_path)
        if walked is not None and len(path) >= 2 and path[0] == sctx.list_field:
            path[1] = walked[path[1]]
        found.append((path, error))
    found.sort(key=_error_order)
    return found


@lru_cache(maxsize=None)
def llm_schema_walk(family: str) -> Walk | None:
    """The family's LLM schema compiled into plain checks, or None when jsonschema must walk it."""
    return compiled_walk(load_json_asset(llm_schema_path(family)))


def _schema_error_issue(sctx: StructuralContext, document: Any, path: list, error) -> Issue:
    location = "/" + "/".join(str(p) for p in path)
    subject = _structural_subject(sctx, document, path)
    field = next((p for p in reversed(path) if isinstance(p, str)), None)
    kind = error.validator
    if kind == "enum":
        allowed = sctx.enums.get(field) or tuple(error.validator_value)
        problem = f"`{field}` is {quote_name(error.instance)}, which is not an allowed value."
        fix = f"Use exactly one of: {', '.join(allowed)}."
    elif kind == "type":
        expected = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        words = " or ".join(_TYPE_WORDS.get(t, t) for t in expected)
        what = f"`{field}`" if field else "The response"
        problem = f"{what} has the wrong type."
        fix = f"It must be {words}."
    elif kind == "required":
        missing = [name for name in error.validator_value if isinstance(error.instance, dict) and name not in error.instance]
        names = ", ".join(f"`{name}`" for name in missing)
        problem = f"The field{'s' if len(missing) != 1 else ''} {names} {'are' if len(missing) != 1 else 'is'} missing."
        fix = "Include every field of the response shape."
    elif kind == "additionalProperties":
        extra = sorted(k for k in error.instance if k not in error.schema.get("properties", {}))
        problem = f"It has field{'s' if len(extra) != 1 else ''} {', '.join(quote_name(k, 40) for k in extra)} that the response shape does not allow."
        fix = "Remove them and use only the listed fields."
    elif kind == "minItems":
        problem = f"`{field}` is empty."
        fix = "Cite at least one range." if field == "evidence" else f"Give at least one entry in `{field}`."
    else:
        problem = f"`{field}` does not match the required shape." if field else "It does not match the required shape."
        fix = "Follow the response schema exactly."
    return Issue("structure", f"schema_{kind}", location, error.message[:300], Correction(subject, "", problem, fix))


def _structural_subject(sctx: StructuralContext, document: Any, path: list) -> str:
    if len(path) >= 2 and path[0] == sctx.list_field and isinstance(path[1], int):
        try:
            record = document[sctx.list_field][path[1]]
        except (KeyError, IndexError, TypeError):
            record = None
        try:
            named = sctx.describe_raw_record(record)
        except Exception:  # a malformed record must never break guidance
            named = None
        if named:
            return named
        n = path[1]
        ordinal = _ORDINALS[n] if n < len(_ORDINALS) else f"number {n + 1}"
        return f"The {ordinal} entry of `{sctx.list_field}`"
    return "The response"


def raw_text(record: Any, key: str) -> str | None:
    """A string field of a raw record, or None (for describe_raw_record functions)."""
    if isinstance(record, dict):
        value = record.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def durable_text(record: Any, key: str) -> str:
    """A string field of a durable record (an artifact's), or "" when it is missing or not a string: what
    a family's ``record_subject`` names, so that any mapping is named without raising."""
    value = record.get(key) if isinstance(record, Mapping) else None
    return value if isinstance(value, str) else ""


def durable_value(record: Any, key: str) -> Any:
    """Any field of a durable record, or None when it is missing (or the record is not a mapping)."""
    return record.get(key) if isinstance(record, Mapping) else None
