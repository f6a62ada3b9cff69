"""Compact SRD 5.1 name lists used by the simulated producer.

The bundled files `sample/data/srd-spell-names.json` (name, level, ritual)
and `sample/data/srd-monster-names.json` (names) are extracted from the
5e-database project's `5e-SRD-Spells.json` / `5e-SRD-Monsters.json` (MIT;
SRD 5.1 content under the OGL 1.0a; see sample/data/ATTRIBUTION.md).
Rebuild them with:

    python -m sample.srd --srd-dir ../shared/reference/srd --output-dir sample/data
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import orjson

DATA_DIR = Path(__file__).resolve().parent / "data"
SPELLS_FILE = "srd-spell-names.json"
MONSTERS_FILE = "srd-monster-names.json"
SOURCE_NOTE = ("Extracted from 5e-database (github.com/5e-bits/5e-database, src/2014/en/, "
               "MIT License); SRD 5.1 content under the Open Gaming License 1.0a. "
               "See sample/data/ATTRIBUTION.md.")


@dataclass(frozen=True, slots=True)
class SrdSpell:
    name: str
    level: int  # 0 = cantrip
    ritual: bool


def extract_spells(srd_spells: list[dict]) -> list[dict]:
    rows = [{"name": s["name"], "level": int(s["level"]), "ritual": bool(s["ritual"])}
            for s in srd_spells]
    return sorted(rows, key=lambda row: row["name"])


def extract_monsters(srd_monsters: list[dict]) -> list[str]:
    return sorted({m["name"] for m in srd_monsters})


def build(srd_dir: Path, output_dir: Path) -> None:
    spells = extract_spells(orjson.loads((srd_dir / "5e-SRD-Spells.json").read_bytes()))
    monsters = extract_monsters(orjson.loads((srd_dir / "5e-SRD-Monsters.json").read_bytes()))
    output_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in ((SPELLS_FILE, spells), (MONSTERS_FILE, monsters)):
        (output_dir / name).write_bytes(compact_json(rows))


def compact_json(rows: list) -> bytes:
    """`{"source": ..., "entries": [...]}` with one entry per line (small, diffable)."""
    entries = b",\n".join(b"  " + orjson.dumps(row) for row in rows)
    return (b'{"source": ' + orjson.dumps(SOURCE_NOTE) + b',\n "entries": [\n'
            + entries + b"\n]}\n")


@lru_cache(maxsize=1)
def load_spells() -> tuple[SrdSpell, ...]:
    rows = orjson.loads((DATA_DIR / SPELLS_FILE).read_bytes())["entries"]
    return tuple(SrdSpell(row["name"], row["level"], row["ritual"]) for row in rows)


@lru_cache(maxsize=1)
def load_monsters() -> tuple[str, ...]:
    return tuple(orjson.loads((DATA_DIR / MONSTERS_FILE).read_bytes())["entries"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sample.srd",
                                     description="Extract compact SRD spell and monster lists.")
    parser.add_argument("--srd-dir", type=Path, required=True)
    parser.add_argument("--output-dir", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    build(args.srd_dir, args.output_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
