"""The durable evidence item, ``{source_id, start_unit_id, end_unit_id}``, as JSON Schema: one definition
for the generated artifact contracts (``domain.schemas``) and the reconciliation family's record schema."""

DURABLE_EVIDENCE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["source_id", "start_unit_id", "end_unit_id"],
    "properties": {
        "source_id": {"type": "string"},
        "start_unit_id": {"type": "integer"},
        "end_unit_id": {"type": "integer"},
    },
}
