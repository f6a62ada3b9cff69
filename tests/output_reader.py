"""Read a job's output folder back (Avro or JSON Lines), for tests and tools."""

from __future__ import annotations

from pathlib import Path

import fastavro
import orjson

OUTPUTS = ("retry_requests", "evaluations", "dead_letters")


def read_rows(folder: Path) -> list[dict]:
    rows: list[dict] = []
    for path in sorted(folder.glob("part-*")):
        if path.suffix == ".avro":
            with open(path, "rb") as handle:
                rows.extend(fastavro.reader(handle))
        else:
            rows.extend(orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip())
    return rows


def read_outputs(out: Path) -> dict[str, list[dict]]:
    result = {name: read_rows(out / name) for name in OUTPUTS}
    for family_dir in sorted((out / "artifacts").iterdir()):
        result[f"artifacts/{family_dir.name}"] = read_rows(family_dir)
    return result


def canonical(rows: list[dict]) -> list[bytes]:
    """Rows as sorted canonical JSON: equal outputs compare equal whatever the sharding."""
    return sorted(orjson.dumps(row, option=orjson.OPT_SORT_KEYS) for row in rows)
