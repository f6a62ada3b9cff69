"""``python -m domain.schemagen``: write every generated contract under ``assets/`` (durable artifact
schemas of every declared family, the output rows' JSON Schema, Avro and Arrow schemas, each judge's
response schema). The generators are the library ``domain.schemas``; tests compare the files with what
it generates, so a stale file fails the suite.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

import orjson

from domain.families import FAMILIES
from domain.judges import judge_response_schema
from domain.schemas import (generated_evaluation_schemas, generated_output_schemas, generated_request_schemas,
                            generated_schemas, generated_slot_change_schemas)


def generated_judge_schemas() -> dict[str, bytes]:
    """{asset path: bytes} of every declared judge's response schema (``domain.judges``)."""
    return {judge.schema_path: orjson.dumps(judge_response_schema(judge), option=orjson.OPT_INDENT_2) + b"\n"
            for spec in FAMILIES.values() for judge in spec.judges}


def main(argv: list[str] | None = None) -> int:
    root = Path(str(resources.files("assets")))  # the package the job reads its assets from
    for spec in FAMILIES.values():
        for path, data in generated_schemas(spec.key, spec.list_field, spec.durable_record_schema).items():
            (root / path).write_bytes(data)
            print(f"wrote assets/{path}")
    for path, data in {**generated_request_schemas(), **generated_slot_change_schemas()}.items():
        (root / path).write_bytes(data)
        print(f"wrote assets/{path}")
    for path, data in generated_judge_schemas().items():
        (root / path).write_bytes(data)
        print(f"wrote assets/{path}")
    for path, data in {**generated_evaluation_schemas(), **generated_output_schemas()}.items():
        (root / path).write_bytes(data)
        print(f"wrote assets/{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
