"""Convert CRD3 episode files into transcript records (contract §3.1).

One unit per CRD3 turn:

- `unit_id` = the turn's NUMBER + 1 (CRD3 numbers from 0; unit ids must be
  positive), so ids are unique within an episode;
- `speaker` = the turn's NAMES joined with ", " (multi-speaker turns and
  non-person speakers such as ALL, SOUND or "ALL - SAM - MATT" are kept);
- `text` = the turn's UTTERANCES joined with single spaces, otherwise
  untouched (curly apostrophes, ♪, double spaces and U+0085 survive).

Turns that repeat the previous turn stay separate units. Chunk plans are
fixed-size runs of units in document order, materialized as explicit
`unit_ids` lists: extraction chunks `x-0001`, ... and scene chunks `s-0001`, ...

    python -m sample.crd3 --output FILE.jsonl[.gz] EPISODE.json...
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import orjson

from sample.jsonl import write_jsonl

SOURCE_PREFIX = "crd3:"
DEFAULT_EXTRACTION_CHUNK_UNITS = 30
DEFAULT_SCENE_CHUNK_UNITS = 120
EXTRACTION = ("x", "extraction")
SCENE = ("s", "scene")


def source_id_for(path: str | Path) -> str:
    """`crd3:<episode stem>`, e.g. `crd3:C1E001` for `.../C1E001.json`."""
    return SOURCE_PREFIX + Path(path).name.split(".", 1)[0]


def turn_to_unit(turn: dict) -> dict:
    return {
        "unit_id": int(turn["NUMBER"]) + 1,
        "speaker": ", ".join(turn["NAMES"]),
        "text": " ".join(turn["UTTERANCES"]),
    }


def chunk_plan(unit_ids: Sequence[int], size: int, prefix: str, kind: str) -> list[dict]:
    """Consecutive runs of `size` units (the last may be shorter), in order."""
    if size < 1:
        raise ValueError(f"chunk size must be positive, got {size}")
    return [
        {"chunk_id": f"{prefix}-{number:04d}", "kind": kind,
         "unit_ids": list(unit_ids[start:start + size])}
        for number, start in enumerate(range(0, len(unit_ids), size), start=1)
    ]


def chunk_plans(unit_ids: Sequence[int],
                extraction_units: int = DEFAULT_EXTRACTION_CHUNK_UNITS,
                scene_units: int = DEFAULT_SCENE_CHUNK_UNITS) -> list[dict]:
    """Extraction chunks followed by scene chunks; each plan covers every unit once."""
    return (chunk_plan(unit_ids, extraction_units, *EXTRACTION)
            + chunk_plan(unit_ids, scene_units, *SCENE))


def check_unit_ids(source_id: str, units: Sequence[dict]) -> None:
    seen: set[int] = set()
    for unit in units:
        unit_id = unit["unit_id"]
        if unit_id < 1 or unit_id in seen:
            raise ValueError(f"{source_id}: unit id {unit_id} is not positive and unique")
        seen.add(unit_id)


def transcript_record(source_id: str, units: list[dict],
                      extraction_units: int = DEFAULT_EXTRACTION_CHUNK_UNITS,
                      scene_units: int = DEFAULT_SCENE_CHUNK_UNITS) -> dict:
    check_unit_ids(source_id, units)
    unit_ids = [unit["unit_id"] for unit in units]
    return {"source_id": source_id, "units": units,
            "chunks": chunk_plans(unit_ids, extraction_units, scene_units)}


def episode_to_transcript(episode: dict, source_id: str,
                          extraction_units: int = DEFAULT_EXTRACTION_CHUNK_UNITS,
                          scene_units: int = DEFAULT_SCENE_CHUNK_UNITS) -> dict:
    """Transcript record of one parsed CRD3 episode object (turns in list order)."""
    units = [turn_to_unit(turn) for turn in episode["TURNS"]]
    return transcript_record(source_id, units, extraction_units, scene_units)


def load_episode(path: str | Path) -> dict:
    return orjson.loads(Path(path).read_bytes())


def convert_files(paths: Iterable[str | Path],
                  extraction_units: int = DEFAULT_EXTRACTION_CHUNK_UNITS,
                  scene_units: int = DEFAULT_SCENE_CHUNK_UNITS) -> Iterator[dict]:
    for path in paths:
        yield episode_to_transcript(load_episode(path), source_id_for(path),
                                    extraction_units, scene_units)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sample.crd3",
        description="Convert CRD3 episode JSON files into transcript records (JSON Lines).")
    parser.add_argument("--output", required=True,
                        help="output .jsonl file (gzip-compressed when it ends in .gz)")
    parser.add_argument("--extraction-chunk-units", type=int,
                        default=DEFAULT_EXTRACTION_CHUNK_UNITS)
    parser.add_argument("--scene-chunk-units", type=int, default=DEFAULT_SCENE_CHUNK_UNITS)
    parser.add_argument("episodes", nargs="+", help="CRD3 episode files, e.g. C1E001.json")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    records = convert_files(args.episodes, args.extraction_chunk_units, args.scene_chunk_units)
    count = write_jsonl(args.output, records)
    print(f"wrote {count} transcript record(s) to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
