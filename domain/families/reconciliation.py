"""What the three registry reconciliations (NPCs, items, locations) share (contract §4.1).

A reconciliation merges the accepted per-chunk registries of one kind into one
registry for the whole source. Its prompt lists every entry of those
registries, earliest evidence first, under prompt-local labels ``E1``,
``E2``, ... (:func:`listed_entries`, :func:`render_entry_list`); the model
answers with entities that name their members by label.

Validation is one pass over the proposal (:func:`proposal_issues`): every
problem is a typed :class:`ProposalIssue` with a category. ONE renderer
(:func:`proposal_correction`) turns a category into prose for all three
families; a family only adds its nouns and one short supplement sentence.
Labels and entry names are model-facing (the model saw them); chunk ids and
positions in canonical output are not, so the renderer never uses them.

An accepted reconciliation is the source-level registry: each entity carries
its members' canonical evidence (union, document order) and which chunk
registry entries it merged.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Annotated, Any, Container, Iterable, Mapping, Sequence

import orjson
from pydantic import Field

from domain.evidence import SourceRef, canonical_evidence, earliest_start
from domain.families.base import (
    ROLE_RECONCILIATION,
    Adapted,
    EvaluationContext,
    FamilyDocs,
    FamilySpec,
    ListedEntry,
    StrictModel,
    fold_name,
)
from domain.families.common import cited, durable_text, order_records, raw_text
from domain.frozen import Value
from domain.issues import Correction, Issue, IssueCollector, quote_name
from domain.evidence_contract import DURABLE_EVIDENCE
from domain.source import Transcript

LIST_FIELD = "entities"
LABEL_PREFIX = "E"

UNKNOWN_LABEL = "unknown_label"
UNASSIGNED_ENTRY = "unassigned_entry"
ENTRY_IN_SEVERAL_ENTITIES = "entry_in_several_entities"
NAME_CONFLICT = "name_conflict"
BLANK_NAME = "blank_name"
PROPOSAL_CATEGORIES = (UNKNOWN_LABEL, UNASSIGNED_ENTRY, ENTRY_IN_SEVERAL_ENTITIES, NAME_CONFLICT, BLANK_NAME)

# How many member labels an entity's subject shows before "and N more".
MAX_LABELS_SHOWN = 4


# --- the response --------------------------------------------------------------------

class ReconciledEntity(StrictModel):
    name: str
    aliases: tuple[str, ...]
    description: str
    member_labels: Annotated[tuple[str, ...], Field(min_length=1)]


class ReconciliationResponse(StrictModel):
    entities: tuple[ReconciledEntity, ...]


class ReconciledRecord(Value):  # built per record: a domain.frozen.Value, made in C
    name: str
    aliases: tuple[str, ...]
    description: str
    # As the model gave them: the proposal check needs unknown and repeated labels too.
    member_labels: tuple[str, ...]
    # The listed entries those labels name, in list order, each once.
    members: tuple[ListedEntry, ...]
    # Union of the members' canonical evidence, sorted by document position.
    evidence: tuple[SourceRef, ...]


# --- the entry list the prompt shows ----------------------------------------------------

def listed_entries(transcript: Transcript, registries: Iterable[tuple[str, Sequence[Any]]]) -> tuple[ListedEntry, ...]:
    """Every entry of the accepted chunk registries, labelled E1, E2, ... by earliest evidence.

    ``registries`` holds (chunk_id, adapted registry records) per accepted chunk
    registry. Ties (same earliest unit) go by chunk_id, then by the record's place
    in its artifact, so the list does not depend on the order slots were decided.
    """
    index = transcript.index
    keyed = []
    for chunk_id, records in registries:
        for n, record in enumerate(records):
            earliest = earliest_start(index, record.evidence)
            keyed.append(((earliest is None, earliest.first if earliest is not None else 0, chunk_id, n), chunk_id,
                          record))
    keyed.sort(key=lambda item: item[0])
    return tuple(
        ListedEntry(f"{LABEL_PREFIX}{number}", chunk_id, rec.name, tuple(rec.aliases), rec.description,
                    tuple(rec.evidence))
        for number, (_, chunk_id, rec) in enumerate(keyed, start=1)
    )


def render_entry_list(entries: Sequence[ListedEntry]) -> str:
    """The entry list as the producer appends it to the prompt: one JSON object per line.

    Only what the model may see: label, name, aliases, description and cited ranges.
    """
    return "".join(
        orjson.dumps({
            "label": e.label,
            "name": e.name,
            "aliases": list(e.aliases),
            "description": e.description,
            "evidence": [{"start_unit_id": r.start_unit_id, "end_unit_id": r.end_unit_id} for r in e.evidence],
        }).decode() + "\n"
        for e in entries
    )


def entry_list_fingerprint(entries: Sequence[ListedEntry]) -> str:
    """The entry list's fingerprint (contract §4.1): ``sha256:`` over its canonical rendering,
    :func:`render_entry_list` (labels, names, aliases, descriptions and cited ranges, in label
    order; no chunk ids). The ONE definition: the job pins reconciliation attempts and requests
    to it, export-batch checks a request's list against it, producers record it.
    """
    return "sha256:" + hashlib.sha256(render_entry_list(entries).encode("utf-8")).hexdigest()


def short_fingerprint(value: str) -> str:
    """A fingerprint as operator messages name it: ``sha256:`` and its first 12 hex digits."""
    return value if len(value) <= 19 else value[:19] + "…"


ENTRY_LIST_CHANGED = "entry_list_changed"


def made_for_other_lists(attempts: Sequence[Any], current_fingerprint: str) -> tuple[bool, ...]:
    """Per attempt (each with ``attempt`` and ``input_fingerprint``), whether it was made for
    another entry list than the current one (contract §4.1): pinned to another list, or not pinned at
    all but older than an attempt pinned to another list (the list had already changed once since
    it was made). An unpinned attempt with no such later attempt is judged against the current list."""
    other_pinned = [a.attempt for a in attempts
                    if a.input_fingerprint is not None and a.input_fingerprint != current_fingerprint]
    latest_other = max(other_pinned, default=0)
    return tuple(
        a.input_fingerprint != current_fingerprint if a.input_fingerprint is not None else a.attempt < latest_other
        for a in attempts)


def entry_list_changed_issue(family: str, attempt_fingerprint: str | None, current_fingerprint: str) -> Issue:
    """The one operator-only issue of an attempt made for another entry list (contract §4.1): it is
    not evaluated (its labels name other entries), never accepted, never told it erred. An attempt
    that recorded no list is one only when a later attempt was pinned to another list."""
    made_for = (f"made for entry list {short_fingerprint(attempt_fingerprint)!r}" if attempt_fingerprint is not None
                else "made without a recorded entry list, before a later attempt made for another list")
    return Issue(f"{family}.entry_list", ENTRY_LIST_CHANGED, "input_fingerprint",
                 f"{made_for}, but the source's accepted chunk "
                 f"registries now list {short_fingerprint(current_fingerprint)!r}: its labels name other entries, so "
                 "it is not evaluated; the slot waits for an attempt on the current list", None)


# --- adaptation ---------------------------------------------------------------------------

def adapt_in_context(response: ReconciliationResponse, ctx: EvaluationContext) -> Adapted:
    """Entities with their members resolved against the listed entries, earliest evidence first."""
    entries = ctx.registry_entries or ()
    by_label = {entry.label: entry for entry in entries}
    list_order = {entry.label: n for n, entry in enumerate(entries)}
    transcript = ctx.transcript
    records = []
    for entity in response.entities:
        known = sorted({label for label in entity.member_labels if label in by_label}, key=list_order.__getitem__)
        members = tuple(by_label[label] for label in known)
        evidence = canonical_evidence(transcript.index, transcript.source_id,
                                      (ref for member in members for ref in member.evidence))
        records.append(ReconciledRecord(entity.name, entity.aliases, entity.description, entity.member_labels,
                                        members, evidence))
    return order_records(transcript.index, records)


def adapt_without_entries(response: ReconciliationResponse, transcript: Transcript) -> Adapted:
    """The same adapter when nothing was listed: no label resolves, no entity has evidence."""
    return adapt_in_context(response, EvaluationContext(transcript, None))


# --- the proposal check: typed issues ------------------------------------------------------

@dataclass(frozen=True, slots=True)
class EntityRef:
    """An entity as the model wrote it: its name and the listed labels among its members."""

    name: str
    labels: tuple[str, ...]

    @classmethod
    def of(cls, record: ReconciledRecord) -> EntityRef:
        return cls(record.name, tuple(member.label for member in record.members))


@dataclass(frozen=True, slots=True)
class ProposalIssue:
    """One problem of a reconciliation proposal, typed by category.

    ``location`` and ``message`` are the operator side; everything else is what
    the renderer may show the model (entity names, labels, entry names).
    """

    category: str
    location: str
    message: str
    entity: EntityRef | None = None
    entry: ListedEntry | None = None
    label: str | None = None
    field: str | None = None  # "name" or "aliases"
    value: str | None = None  # the clashing name or alias
    others: tuple[EntityRef, ...] = ()


def proposal_issues(records: Sequence[ReconciledRecord], entries: Sequence[ListedEntry]) -> tuple[ProposalIssue, ...]:
    """Every problem of the proposal in one pass: labels first, then entries, then names."""
    found: list[ProposalIssue] = []
    holders: dict[str, dict[int, None]] = {entry.label: {} for entry in entries}  # ordered sets
    refs = [EntityRef.of(record) for record in records]  # once per entity: issues share them
    for n, record in enumerate(records):
        unknown: set[str] = set()
        for k, label in enumerate(record.member_labels):
            if label in holders:
                holders[label][n] = None
            elif label not in unknown:  # a repeated unknown label is one problem
                unknown.add(label)
                found.append(ProposalIssue(UNKNOWN_LABEL, f"{LIST_FIELD}[{n}].member_labels[{k}]",
                                           f"label {label!r} is not one of the {len(entries)} listed entries",
                                           entity=refs[n], label=label))
    for entry in entries:
        owners = list(holders[entry.label])
        if not owners:
            found.append(ProposalIssue(UNASSIGNED_ENTRY, entry.label,
                                       f"entry {entry.label} (chunk {entry.chunk_id}) is in no entity", entry=entry))
        elif len(owners) > 1:
            found.append(ProposalIssue(
                ENTRY_IN_SEVERAL_ENTITIES, entry.label,
                f"entry {entry.label} is in entities {', '.join(f'{LIST_FIELD}[{n}]' for n in owners)}",
                entry=entry, others=tuple(refs[n] for n in owners)))
    found.extend(_name_issues(records, refs))
    return tuple(found)


def _name_issues(records: Sequence[ReconciledRecord], refs: Sequence[EntityRef]) -> list[ProposalIssue]:
    """Blank names and aliases, and folded names shared by two entities.

    Every clash is reported once per entity that repeats a name an earlier
    entity owns (a name repeated inside one entity is no clash).
    """
    found: list[ProposalIssue] = []
    owner: dict[str, int] = {}
    for n, record in enumerate(records):
        reported: set[str] = set()
        for field_name, value in [("name", record.name)] + [("aliases", alias) for alias in record.aliases]:
            where = f"{LIST_FIELD}[{n}].{field_name}"
            folded = fold_name(value)
            if not folded:
                found.append(ProposalIssue(BLANK_NAME, where, f"blank {field_name}", entity=refs[n],
                                           field=field_name))
                continue
            first = owner.setdefault(folded, n)
            if first != n and folded not in reported:
                reported.add(folded)
                found.append(ProposalIssue(NAME_CONFLICT, where, f"name {value!r} repeats {LIST_FIELD}[{first}]",
                                           entity=refs[n], field=field_name, value=value,
                                           others=(refs[first],)))
    return found


# --- the ONE category-to-prose renderer ------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ReconciliationWords:
    """What differs between the three families in guidance: nouns and one supplement sentence."""

    noun: str  # "NPC"
    plural: str  # "NPCs"
    one: str  # the noun with its article: "an NPC"
    supplement: str  # a short family-specific rule, added where merge decisions are asked for


def entity_subject(words: ReconciliationWords, entity: EntityRef) -> str:
    return name_subject(words, entity.name)


def name_subject(words: ReconciliationWords, name: str) -> str:
    """An entity by its name: 'The NPC "Grog"'."""
    if name.strip():
        return f"The {words.noun} {quote_name(name)}"
    return f"The {words.noun} with a blank `name`"


def entity_labels(entity: EntityRef) -> str:
    shown = list(entity.labels[:MAX_LABELS_SHOWN])
    more = len(entity.labels) - len(shown)
    text = ", ".join(shown)  # listed labels only (E1, E2, ...): the model's unknown ones are quoted elsewhere
    text += f" and {more} more" if more > 0 else ""
    return f"entr{'y' if len(entity.labels) == 1 else 'ies'} {text}" if shown else ""


def entry_subject(entry: ListedEntry) -> str:
    return f"Entry {entry.label} {quote_name(entry.name)}"


def _named(words: ReconciliationWords, entity: EntityRef) -> str:
    """An entity inside a sentence: 'the NPC "Grog" (entries E1, E4)'."""
    subject = entity_subject(words, entity)
    labels = entity_labels(entity)
    return f"{subject[:1].lower()}{subject[1:]}" + (f" ({labels})" if labels else "")


def _with_supplement(text: str, words: ReconciliationWords) -> str:
    return f"{text} {words.supplement}" if words.supplement else text


def _label_span(listed: int) -> str:
    if listed <= 1:
        return f"the label {LABEL_PREFIX}1"
    return f"the labels {LABEL_PREFIX}1 to {LABEL_PREFIX}{listed}"


def _is_listed_label(text: str, listed: int) -> bool:
    """True when ``text`` is exactly one of the labels the prompt listed (E1 to E<listed>)."""
    number = text[len(LABEL_PREFIX):]
    return (text.startswith(LABEL_PREFIX) and number.isascii() and number.isdigit()
            and not number.startswith("0") and 1 <= int(number) <= listed)


def proposal_correction(issue: ProposalIssue, words: ReconciliationWords, listed: int,
                        known: Container = ()) -> Correction:
    """The model-facing correction of one proposal issue; ``listed`` is how many entries the prompt listed,
    ``known`` the transcript's index (its unit ids are written exactly)."""
    noun, plural = words.noun, words.plural
    if issue.category == UNKNOWN_LABEL:
        assert issue.entity is not None
        label = issue.label or ""
        trimmed = label.strip()
        if trimmed != label and _is_listed_label(trimmed, listed):
            # A listed label with spaces around it: quoting would strip them and make it look valid.
            side = "before it" if label.endswith(trimmed) else "after it" if label.startswith(trimmed) else "around it"
            return Correction(
                entity_subject(words, issue.entity), entity_labels(issue.entity),
                f"Its `member_labels` include the label {quote_name(trimmed, 20)} with extra spaces {side}, "
                f"so it does not match the list.",
                f"Write each label exactly as the list writes it, with no spaces: {quote_name(trimmed, 20)}.")
        return Correction(
            entity_subject(words, issue.entity), entity_labels(issue.entity),
            f"Its `member_labels` include {quote_name(issue.label, 20)}, which is not a label in the list of entries.",
            f"Use only {_label_span(listed)}, exactly as the list writes them.")
    if issue.category == UNASSIGNED_ENTRY:
        assert issue.entry is not None
        return Correction(
            entry_subject(issue.entry), cited(issue.entry.evidence, known),
            f"It is not in the `member_labels` of any {noun}.",
            _with_supplement(f"Put every listed entry in exactly one {noun}: add it to the {noun} it refers to, "
                             f"or make it {words.one} of its own.", words))
    if issue.category == ENTRY_IN_SEVERAL_ENTITIES:
        assert issue.entry is not None
        shown = issue.others[:MAX_LABELS_SHOWN]  # bounded: a line too long for the guidance would be dropped
        holders = " and ".join(quote_name(other.name) if other.name.strip() else "one with a blank `name`"
                               for other in shown)
        more = len(issue.others) - len(shown)
        holders += f" and {more} more" if more > 0 else ""
        return Correction(
            entry_subject(issue.entry), cited(issue.entry.evidence, known),
            f"It is in the `member_labels` of several {plural}: {holders}.",
            _with_supplement(f"Put it in exactly one {noun}: keep it in the {noun} it refers to and remove it "
                             f"from the others, or merge those {plural} if they are the same.", words))
    if issue.category == NAME_CONFLICT:
        assert issue.entity is not None and issue.others
        what = "name" if issue.field == "name" else "alias"
        return Correction(
            entity_subject(words, issue.entity), entity_labels(issue.entity),
            f"Its {what} {quote_name(issue.value)} is also used by {_named(words, issue.others[0])}.",
            _with_supplement(f"Each name or alias must belong to exactly one {noun}: merge the two {plural} if "
                             f"they are the same, or remove the repeated name.", words))
    if issue.category == BLANK_NAME:
        assert issue.entity is not None
        problem = "Its `name` is blank." if issue.field == "name" else "Its `aliases` contain a blank entry."
        return Correction(entity_subject(words, issue.entity), entity_labels(issue.entity), problem,
                          f"Give every {noun} a non-blank `name` and remove blank `aliases`.")
    raise ValueError(f"unknown proposal category {issue.category!r}")


# --- the family ------------------------------------------------------------------------------

def durable_reconciled_schema() -> dict:
    """The durable record: the entity, the chunk-registry entries it merged, their evidence."""
    string = {"type": "string"}
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "aliases", "description", "members", "evidence"],
        "properties": {
            "name": {**string, "description": "The entity's name."},
            "aliases": {"type": "array", "items": string},
            "description": string,
            "members": {
                "type": "array",
                "description": "The chunk registry entries merged into this entity, in document order.",
                "items": {
                    "type": "object", "additionalProperties": False, "required": ["chunk_id", "name"],
                    "properties": {"chunk_id": string, "name": string},
                },
            },
            "evidence": {
                "type": "array",
                "description": "Union of the members' canonical evidence, sorted by document position.",
                "items": copy.deepcopy(DURABLE_EVIDENCE),
            },
        },
    }


@dataclass(frozen=True)
class ReconciliationFamily:
    key: str  # "npc-reconciliation"
    kind: str  # registry kind: "npc"
    words: ReconciliationWords

    def validate_proposal(self, adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
        """Every proposal issue of the candidate, each with the shared renderer's correction."""
        out = IssueCollector(f"{self.key}.proposal")
        entries = ctx.registry_entries
        if entries is None:
            # A request-level prerequisite the engine guarantees; nothing the producer can repair.
            out.add("no_entry_list", LIST_FIELD, "no listed entries in the evaluation context", None)
            return out.issues()
        for issue in proposal_issues(adapted.records, entries):
            out.add(issue.category, issue.location, issue.message,
                    proposal_correction(issue, self.words, len(entries), ctx.transcript.index))
        return out.issues()

    def describe_raw_record(self, raw: Any) -> str | None:
        name = raw_text(raw, "name")
        return None if name is None else name_subject(self.words, name)

    def record_subject(self, record: Mapping[str, Any]) -> str:
        return name_subject(self.words, durable_text(record, "name"))

    @staticmethod
    def durable_record(rec: ReconciledRecord) -> dict:
        return {
            "name": rec.name,
            "aliases": list(rec.aliases),
            "description": rec.description,
            "members": [{"chunk_id": m.chunk_id, "name": m.name} for m in rec.members],
            "evidence": [ref.as_record() for ref in rec.evidence],
        }

    @staticmethod
    def registry_names(rec: ReconciledRecord) -> tuple[str, ...]:
        return (rec.name, *rec.aliases)

    # --- the data dictionary ------------------------------------------------------------------

    def docs(self, intro: str, example: dict) -> FamilyDocs:
        """The family's data-dictionary entry: its intro and example, the fields' meanings shared."""
        noun, registry = self.words.noun, f"{self.kind}-registry"
        return FamilyDocs(intro, {
            "records[].name": f"The {noun}'s name in the merged registry; no two entities share a folded name or "
                              "alias.",
            "records[].aliases": f"Other names of the same {noun}; empty when none.",
            "records[].description": f"A short description of the {noun}.",
            "records[].members": f"The accepted `{registry}` entries (of this source's chunks) merged into this "
                                 "entity, in document order; every entry belongs to exactly one entity.",
            "records[].members[].chunk_id": f"The chunk whose `{registry}` artifact holds the entry.",
            "records[].members[].name": "The entry's `name` in that artifact.",
            "records[].evidence": "The union of the members' evidence, sorted by document position, without "
                                  "duplicates.",
        }, example)

    def spec(self, policy_version: str, docs: FamilyDocs) -> FamilySpec:
        return FamilySpec(
            key=self.key,
            role=ROLE_RECONCILIATION,
            chunk_kind="source",
            response_model=ReconciliationResponse,
            list_field=LIST_FIELD,
            policy_version=policy_version,
            enums={},
            adapt=adapt_without_entries,
            adapt_in_context=adapt_in_context,
            validators=(self.validate_proposal,),
            durable_record=self.durable_record,
            describe_raw_record=self.describe_raw_record,
            docs=docs,
            record_subject=self.record_subject,
            registry_kind=self.kind,
            registry_names=self.registry_names,
            durable_record_schema=durable_reconciled_schema(),
            policy_extras={"categories": list(PROPOSAL_CATEGORIES), "label_prefix": LABEL_PREFIX,
                           "supplement": self.words.supplement, "max_labels_shown": MAX_LABELS_SHOWN},
        )
