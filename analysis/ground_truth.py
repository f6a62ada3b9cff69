"""The simulated producer's ground truth, as the analyses read it: one row per candidate naming every
injected defect by kind, record name and cited range (``parse_truth_row``), and the producer's vocabulary
(``DefectVocabulary``: which kinds are benign, which endpoint ordering repairs, which hide the others),
written on the truth file's first line (``vocabulary_record``) and passed in rather than imported:
``analysis`` knows nothing of ``sample``. Whether the run should pass an attempt the truth describes
(``passes_in_the_run``) is here too. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from analysis.slots import Slot, slot_of
from domain.families import FAMILIES
from domain.families.base import ROLE_REGISTRY
from domain.judges import JUDGE_FAIL


# --- ground truth -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TruthDefect:
    kind: str
    record_name: str | None  # None (or blank) when the defect has no named record
    range: tuple[Any, Any] | None  # as the model wrote it, possibly reversed


@dataclass(frozen=True, slots=True)
class TruthRow:
    candidate_id: str
    slot: Slot
    attempt: int
    defects: tuple[TruthDefect, ...]
    expected_pass: bool
    # Semantic defects no rule sees, planted for the judges (contract §4.3): how many (0 without them).
    judge_defects: int = 0


def parse_truth_row(row: Mapping[str, Any]) -> TruthRow:
    defects = tuple(
        TruthDefect(d["kind"], d.get("record_name"), tuple(d["range"]) if d.get("range") is not None else None)
        for d in row["defects"]
    )
    return TruthRow(row["candidate_id"], slot_of(row), int(row["attempt"]), defects, bool(row["expected_pass"]),
                    len(row.get("judge_defects") or ()))


def judge_failed(evaluation: Mapping[str, Any]) -> bool:
    """An attempt a judge's fail rejected (contract §4.3): the rules passed it, the run's verdicts did not."""
    return any(isinstance(issue, Mapping) and issue.get("reason_code") == JUDGE_FAIL
               for issue in evaluation.get("issues") or ())


MEMBERSHIP_MISS = "not_in_registry"


def judged_registry_sources(evaluations: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Sources with a chunk registry attempt a judge's fail rejected: their occurrences may name an entry the
    truth assumed accepted."""
    return frozenset(row["source_id"] for row in evaluations
                     if _role_of(row.get("family")) == ROLE_REGISTRY and judge_failed(row))


def _role_of(family: Any) -> str | None:
    spec = FAMILIES.get(family) if isinstance(family, str) else None
    return spec.role if spec is not None else None


def passes_in_the_run(known: "TruthRow", evaluation: Mapping[str, Any], judged_sources: frozenset[str] = frozenset()
                      ) -> bool:
    """Whether the run should pass the attempt: the truth's rules, and no judge's fail - neither on it nor,
    for an occurrence that misses only registry names, on a registry of its source. A judge's verdict is
    an input of the run like the attempt itself; whether it was right is ``judge_figures``' business."""
    if not known.expected_pass or judge_failed(evaluation):
        return False
    issues = [i for i in evaluation.get("issues") or () if isinstance(i, Mapping)]
    return not (evaluation.get("source_id") in judged_sources and issues
                and all(i.get("reason_code") == MEMBERSHIP_MISS for i in issues))


@dataclass(frozen=True, slots=True)
class DefectVocabulary:
    """What the ground truth's defect kinds mean."""

    benign: frozenset[str]  # the candidate still passes
    canonicalized: frozenset[str]  # benign only because endpoint ordering repairs them
    unparseable: frozenset[str]  # the response is not JSON: nothing else can be seen
    schema: frozenset[str]  # the response fails its schema: record rules cannot run

    def detectable(self, defects: Iterable[TruthDefect]) -> tuple[TruthDefect, ...]:
        """The blocking defects a validator can see in one pass.

        A response that is not JSON hides every other defect, and one that
        fails its schema has no typed records for the semantic rules (contract
        §5, step 1): those hidden defects are not expected in the guidance.
        """
        blocking = [d for d in defects if d.kind not in self.benign]
        for layer in (self.unparseable, self.schema):
            seen = [d for d in blocking if d.kind in layer]
            if seen:
                return tuple(seen)
        return tuple(blocking)

    def passes_without_canonicalization(self, row: TruthRow) -> bool:
        return row.expected_pass and not any(d.kind in self.canonicalized for d in row.defects)


# The first line of a ground-truth file: what its producer's defect kinds mean, and the evaluations'
# reason codes each blocking kind is reported under (the truth counts defects by kind, the evaluations
# issues by code; benign kinds have none). The producer writes it, the commands given --truth read it.
VOCABULARY_KEY = "defect_vocabulary"
_VOCABULARY_SETS = ("benign", "canonicalized", "unparseable", "schema")
ReasonCodes = Mapping[str, tuple[str, ...]]


def vocabulary_record(vocabulary: DefectVocabulary, reason_codes: ReasonCodes) -> dict:
    """The vocabulary line of a ground-truth file, as JSON (sets sorted)."""
    return {VOCABULARY_KEY: {**{name: sorted(map(str, getattr(vocabulary, name))) for name in _VOCABULARY_SETS},
                             "reason_codes": {str(kind): list(codes) for kind, codes in reason_codes.items()}}}


def is_vocabulary_record(record: Mapping[str, Any]) -> bool:
    return VOCABULARY_KEY in record


def parse_vocabulary_record(record: Mapping[str, Any]) -> tuple[DefectVocabulary, dict[str, tuple[str, ...]]]:
    """The vocabulary and reason codes of a vocabulary line; ValueError saying what is missing."""
    words = record.get(VOCABULARY_KEY) if isinstance(record, Mapping) else None
    if not isinstance(words, Mapping):
        raise ValueError(f"no {VOCABULARY_KEY!r} object")

    def strings(value: Any, what: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"{VOCABULARY_KEY}.{what} is not a list of strings")
        return tuple(value)

    codes = words.get("reason_codes")
    if not isinstance(codes, Mapping):
        raise ValueError(f"{VOCABULARY_KEY}.reason_codes is not an object")
    vocabulary = DefectVocabulary(**{name: frozenset(strings(words.get(name), name)) for name in _VOCABULARY_SETS})
    return vocabulary, {kind: strings(value, f"reason_codes.{kind}") for kind, value in codes.items()}
