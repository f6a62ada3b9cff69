"""scene-descriptions: one description per scene chunk, with an exact-range contract.

Not an extraction family: the response holds exactly one scene whose
``start_unit_id``/``end_unit_id`` are the scene chunk's first and last unit,
exactly. Nothing here is reordered or canonicalized - a reversed range is the
model's defect and is rejected, never repaired - and the shared extraction
containment helper does not apply.
"""

from __future__ import annotations

import copy
from typing import Any, Literal, Mapping, get_args

from domain.assets import llm_schema_path, load_json_asset
from domain.families.base import Adapted, EvaluationContext, FamilyDocs, FamilySpec, JsonInt, ROLE_SCENE, StrictModel
from domain.families.common import RecordIssues, durable_text, raw_text
from domain.frozen import Value
from domain.issues import Correction, Issue, IssueCollector, is_are, quote_name, render_range, render_units
from domain.source import Transcript, chunk_contains_positions

KEY = "scene-descriptions"
LIST_FIELD = "scenes"
SCENES_PER_CHUNK = 1

SceneKind = Literal["combat", "exploration", "social", "travel", "rest", "recap"]
SCENE_KINDS: tuple[str, ...] = get_args(SceneKind)


class SceneItem(StrictModel):
    kind: SceneKind
    title: str
    summary: str
    start_unit_id: JsonInt
    end_unit_id: JsonInt


class SceneDescriptionsResponse(StrictModel):
    scenes: tuple[SceneItem, ...]


class SceneRecord(Value):  # built per record: a domain.frozen.Value, made in C
    source_id: str
    kind: str
    title: str
    summary: str
    start_unit_id: int
    end_unit_id: int


def adapt(response: SceneDescriptionsResponse, transcript: Transcript) -> Adapted:
    """Scenes exactly as given: same order, endpoints untouched. Earliest evidence = the scene's start."""
    records = tuple(
        SceneRecord(transcript.source_id, item.kind, item.title, item.summary, item.start_unit_id, item.end_unit_id)
        for item in response.scenes
    )
    earliest = records[0].start_unit_id if records else None
    return Adapted(records, earliest)


def _subject(title: str | None, kind: str | None) -> str:
    if title is not None and title.strip():
        return f"The scene {quote_name(title)}"
    return f"The {kind} scene with a blank `title`" if kind in SCENE_KINDS else "The scene with a blank `title`"


def subject(record: SceneRecord) -> str:
    return _subject(record.title, record.kind)


def record_subject(record: Mapping[str, Any]) -> str:
    return _subject(durable_text(record, "title"), durable_text(record, "kind"))


def scene_range(record: SceneRecord, known) -> str:
    """A scene's range as the model wrote it (scenes cite no evidence list)."""
    return render_range(record.start_unit_id, record.end_unit_id, known)


def _required_range(first: int, last: int) -> str:
    return (f"Set `start_unit_id` to {first} and `end_unit_id` to {last}: the first and the last unit of the "
            f"excerpt, in that order.")


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def validate_scene_count(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    """Exactly one scene per scene chunk."""
    out = IssueCollector("scene_descriptions.count")
    count = len(adapted.records)
    if count == SCENES_PER_CHUNK:
        return out.issues()
    extent = ""
    if ctx.chunk is not None:
        extent = f", from unit {ctx.chunk.first_unit_id} to unit {ctx.chunk.last_unit_id}"
    if count == 0:
        out.add("no_scene", LIST_FIELD, "response has no scene",
                Correction("The response", "", "`scenes` is empty.",
                           f"Return exactly one scene that describes the whole excerpt{extent}."))
    else:
        out.add("several_scenes", LIST_FIELD, f"response has {count} scenes, expected exactly one",
                Correction("The response", "",
                           f"`scenes` has {count} scenes ({'; '.join(_lower_first(subject(r)) for r in adapted.records[:5])}), "
                           f"but the excerpt is exactly one scene.",
                           f"Return exactly one scene that describes the whole excerpt{extent}, combining "
                           f"what the separate scenes said."))
    return out.issues()


def validate_shape(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    out = RecordIssues("scene_descriptions.shape", LIST_FIELD, subject, ctx.transcript.index, scene_range)
    for n, rec in enumerate(adapted.records):
        if not rec.title.strip():
            out.add_for(n, rec, "blank_title", ".title", "blank title", "`title` is blank.",
                        "Give the scene a short title.")
        if not rec.summary.strip():
            out.add_for(n, rec, "blank_summary", ".summary", "blank summary", "`summary` is blank.",
                        "Summarise what happens in the scene in a few sentences.")
    return out.issues()


def validate_range(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    """Each scene's range is exactly (first unit, last unit) of the scene chunk; reversed ranges are rejected."""
    chunk, index = ctx.chunk, ctx.transcript.index
    out = RecordIssues("scene_descriptions.range", LIST_FIELD, subject, index, scene_range)
    if chunk is None:
        # A request-level prerequisite the job guarantees; nothing the producer can repair.
        out.add("no_scene_chunk", LIST_FIELD, "no scene chunk in the evaluation context", None)
        return out.issues()
    first, last = chunk.first_unit_id, chunk.last_unit_id
    for n, rec in enumerate(adapted.records):
        start, end = rec.start_unit_id, rec.end_unit_id
        if start == first and end == last:
            continue
        position_of = {start: index.position(start), end: index.position(end)}  # one entry when start == end
        # Membership by position (a binary search): never a scan of the chunk per scene.
        outside = [u for u, pos in position_of.items() if pos is None or not chunk_contains_positions(chunk, pos, pos)]
        start_pos, end_pos = position_of[start], position_of[end]
        if outside:
            code, message = "unit_outside_scene", f"endpoint(s) {outside!r} not in scene chunk {chunk.chunk_id}"
            problem = f"It cites {render_units(outside, index)}, which {is_are(len(outside))} not in the excerpt."
        elif start_pos is not None and end_pos is not None and start_pos > end_pos:
            code, message = "reversed_range", f"scene range {start}..{end} runs backwards in document order"
            problem = "Its range runs backwards: `start_unit_id` comes later in the excerpt than `end_unit_id`."
        else:
            code = "range_mismatch"
            message = f"scene range {start}..{end} != scene chunk {chunk.chunk_id} range {first}..{last}"
            problem = "Its range does not cover exactly the whole excerpt."
        out.add_for(n, rec, code, "", message, problem, _required_range(first, last))
    return out.issues()


def durable_record(rec: SceneRecord) -> dict:
    return {
        "source_id": rec.source_id,
        "kind": rec.kind,
        "title": rec.title,
        "summary": rec.summary,
        "start_unit_id": rec.start_unit_id,
        "end_unit_id": rec.end_unit_id,
    }


def durable_scene_schema() -> dict:
    """The durable record: the LLM scene item plus the ``source_id`` of the transcript."""
    item = copy.deepcopy(load_json_asset(llm_schema_path(KEY))["properties"][LIST_FIELD]["items"])
    item["properties"] = {"source_id": {"type": "string"}, **item["properties"]}
    item["required"] = ["source_id", *item["required"]]
    return item


def describe_raw_record(raw: Any) -> str | None:
    title = raw_text(raw, "title")
    return None if title is None else _subject(title, None)


SPEC = FamilySpec(
    key=KEY,
    role=ROLE_SCENE,
    chunk_kind="scene",
    response_model=SceneDescriptionsResponse,
    list_field=LIST_FIELD,
    policy_version="scene-descriptions-policy-3",
    enums={"kind": SCENE_KINDS},
    adapt=adapt,
    validators=(validate_scene_count, validate_shape, validate_range),
    durable_record=durable_record,
    describe_raw_record=describe_raw_record,
    docs=FamilyDocs(
        intro="One record is the one scene of a scene chunk (exactly one per artifact). Its range is the scene "
              "chunk's own and is never reordered.",
        fields={
            "records[].source_id": "The transcript (the artifact's `source_id`).",
            "records[].kind": "What the scene is mainly about.",
            "records[].title": "A short title for the scene.",
            "records[].summary": "What happens in the scene, in a few sentences.",
            "records[].start_unit_id": "The scene chunk's first unit, exactly.",
            "records[].end_unit_id": "The scene chunk's last unit, exactly.",
        },
        example={"source_id": "crd3:C1E035", "kind": "rest", "title": "Rest: keep",
                 "summary": "MARISHA opens with \"I didn't suck it up this game.\"; MATT closes with \"All right, roll "
                            "a d10.\".",
                 "start_unit_id": 721, "end_unit_id": 840},
    ),
    record_subject=record_subject,
    durable_record_schema=durable_scene_schema(),
    policy_extras={"scenes_per_chunk": SCENES_PER_CHUNK, "exact_range": "chunk_first_last"},
)
