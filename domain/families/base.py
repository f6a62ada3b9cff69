"""What a family is: its one declaration, which everything else reads.

A family module owns its response model, adapter, validators, the prose of its
guidance and of its data-dictionary entry, and its judges, and exposes them as
one :class:`FamilySpec`. The engine, the schema generator (``domain.schemagen``),
the data dictionary (``docgen``) and the simulator's lists (``sample/``) derive
from the declarations; see docs/internal/dnd.md, "How to add a family".
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Mapping, Protocol

import orjson
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from domain import issues as shared_issues
from domain.evidence import SourceRef
from domain.frozen import Value, quick_init
from domain.issues import Issue
from domain.judges import JudgeSpec
from domain.source import Chunk, Transcript

# Roles decide processing order within a source and which prerequisites apply.
ROLE_REGISTRY = "registry"  # per-chunk registries: feed membership
ROLE_RECONCILIATION = "reconciliation"  # source-level merge of chunk registries
ROLE_OCCURRENCE = "occurrence"  # need an accepted registry of their kind
ROLE_EXTRACTION = "extraction"  # everything else over extraction chunks
ROLE_SCENE = "scene"  # scene chunks, exact-range contract, never reordered
ROLE_ORDER = (ROLE_REGISTRY, ROLE_RECONCILIATION, ROLE_OCCURRENCE, ROLE_EXTRACTION, ROLE_SCENE)


class StrictModel(BaseModel):
    """Base of every LLM response model: strict types, no extra keys, frozen.

    It must accept and reject exactly what the family's LLM schema does
    (tests/test_family_contracts.py proves it by differential testing).
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


def _integral_float_to_int(value: Any) -> Any:
    # JSON Schema counts 3.0 as an integer; strict pydantic would not. Agree with the schema.
    if type(value) is float and value.is_integer():
        return int(value)
    return value


# An integer exactly as the JSON Schema "integer" type means it.
JsonInt = Annotated[int, BeforeValidator(_integral_float_to_int)]


class Evidence(StrictModel):
    start_unit_id: JsonInt
    end_unit_id: JsonInt


# `evidence` in every extraction schema: an array with at least one item.
EvidenceList = Annotated[tuple[Evidence, ...], Field(min_length=1)]


@quick_init
@dataclass(frozen=True, slots=True)
class RegistryView:
    """Names (and aliases) of one kind accepted for a source, case/space folded."""

    kind: str
    folded_names: frozenset[str]

    def knows(self, name: str) -> bool:
        return fold_name(name) in self.folded_names


def fold_name(name: str) -> str:
    """Case and whitespace folding used for identity and membership."""
    return " ".join(name.split()).casefold()


@quick_init
@dataclass(frozen=True, slots=True)
class ListedEntry:
    """One entry of an accepted chunk registry as a reconciliation prompt lists it.

    ``label`` ("E1", "E2", ...) is prompt-local: the model sees it, nothing
    durable keeps it. ``chunk_id`` is internal and never shown to a model.
    """

    label: str
    chunk_id: str
    name: str
    aliases: tuple[str, ...]
    description: str
    evidence: tuple[SourceRef, ...]


class EvaluationContext(Value):
    transcript: Transcript
    chunk: Chunk | None
    # Accepted registry for the family's membership kind, when the family needs one.
    registry: RegistryView | None = None
    # Reconciliations: the entries the prompt listed (accepted chunk registries of the
    # kind, earliest evidence first, labelled E1, E2, ...). None for every other family.
    registry_entries: tuple[ListedEntry, ...] | None = None


class Adapted(Value):
    """A typed candidate after canonicalization: records in earliest-evidence order."""

    records: tuple[Any, ...]
    earliest_evidence_unit_id: int | None
    # Cited ranges, as the response wrote them, that endpoint ordering swapped (contract §5 step 3;
    # every one counts, duplicates included). Only the extraction adapters order endpoints.
    endpoints_reordered: int = 0


@dataclass(frozen=True)
class FamilyDocs:
    """What the data dictionary (docs/outputs.md) says of a family's records that no schema can.

    ``intro``: what one record is. ``fields``: what each field of a record means, by path under the
    artifact (``records[].cast.level``: "a.b" a field of a nested record, "a[]" each element of a
    list); types and rules are not repeated, they come from the schemas, and the evidence fields every
    citing family shares are described once, with the artifact's envelope. ``example``: one real
    record, as its artifact holds it, of the run ``docgen.output_prose.FAMILY_EXAMPLE_RUNS`` names (tested there).
    """

    intro: str
    fields: Mapping[str, str]
    example: Mapping[str, Any]


class Adapter(Protocol):
    def __call__(self, response: Any, transcript: Transcript) -> Adapted: ...


class Validator(Protocol):
    def __call__(self, adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]: ...


@dataclass(frozen=True, eq=False)  # identity hash: one spec object per family
class FamilySpec:
    key: str
    role: str
    chunk_kind: str  # "extraction", "scene" or "source" (chunk_id "*")
    response_model: type[StrictModel]
    # The top-level array of the response ("spells", "npcs", ...).
    list_field: str
    policy_version: str
    # Closed value sets by response field name (also in the LLM schema as enums).
    enums: Mapping[str, tuple[str, ...]]
    adapt: Adapter
    validators: tuple[Validator, ...]
    # Durable record of one adapted record (evidence as {source_id, start_unit_id, end_unit_id}).
    durable_record: Callable[[Any], dict]
    # Transcript-grounded name of a raw (possibly malformed) response record, for
    # structural guidance: e.g. 'the spell "Shield" cast by "SAM"'. None when unknown.
    describe_raw_record: Callable[[Any], str | None]
    # Its entry in the data dictionary (docs/outputs.md).
    docs: FamilyDocs
    # Transcript-grounded name of a record in its durable shape (what ``durable_record`` gives and an
    # artifact holds): 'The spell "Shield" cast by "SAM"'. The one name of a family's records outside
    # the validators: a judge's problem names its record by it (``subject_of``) and a comparison names
    # the records that changed by it (contract §6.3). Any mapping is named without raising (a missing or
    # odd field reads as blank).
    record_subject: Callable[[Mapping[str, Any]], str]
    # The kind of registry this family provides (registries) or needs (occurrences).
    registry_kind: str | None = None
    # Names a registry record contributes to membership (registries only).
    registry_names: Callable[[Any], tuple[str, ...]] | None = None
    # Durable record JSON Schema when it is not derived from the LLM schema's records.
    durable_record_schema: dict | None = None
    # When records are built from what the prompt listed rather than from the transcript
    # alone (reconciliations), the engine adapts through this instead of ``adapt``.
    adapt_in_context: Callable[[Any, EvaluationContext], Adapted] | None = None
    # Anything else that changes behaviour and must move the policy fingerprint.
    policy_extras: Mapping[str, Any] = field(default_factory=dict)
    # Semantic judges of the family (contract §4.3; domain.judges), declared here and nowhere else.
    judges: tuple[JudgeSpec, ...] = ()

    def __post_init__(self) -> None:
        if self.judges and self.role not in (ROLE_REGISTRY, ROLE_EXTRACTION):
            # A judge request shows the chunk's lines and the attempt's records (export-batch): families
            # whose records need a registry or an entry list to be read are not judged (yet).
            raise ValueError(f"family {self.key!r} ({self.role}) cannot declare judges")
        for judge in self.judges:
            if judge.family != self.key:
                raise ValueError(f"judge {judge.name!r} is declared by {self.key!r} but names family {judge.family!r}")

    def subject_of(self, record: Any) -> str:
        """The name of an adapted record: its durable shape's (``record_subject``)."""
        return self.record_subject(self.durable_record(record))

    @property
    def needs_registry(self) -> bool:
        return self.role == ROLE_OCCURRENCE

    @property
    def provides_registry(self) -> bool:
        return self.role in (ROLE_REGISTRY, ROLE_RECONCILIATION)

    def validator_policy_fingerprint(self) -> str:
        return _policy_fingerprint(self)


@lru_cache(maxsize=None)
def _policy_fingerprint(spec: FamilySpec) -> str:
    declared = {
        "family": spec.key,
        "policy_version": spec.policy_version,
        "enums": {k: list(v) for k, v in sorted(spec.enums.items())},
        "limits": {
            "max_issues": shared_issues.MAX_ISSUES,
            "max_guidance_chars": shared_issues.MAX_GUIDANCE_CHARS,
            "max_quoted_name_chars": shared_issues.MAX_QUOTED_NAME_CHARS,
        },
        "guidance_version": shared_issues.GUIDANCE_VERSION,
        "validators": [getattr(v, "__qualname__", repr(v)) for v in spec.validators],
        "extras": spec.policy_extras,
    }
    return "sha256:" + hashlib.sha256(orjson.dumps(declared, option=orjson.OPT_SORT_KEYS)).hexdigest()
