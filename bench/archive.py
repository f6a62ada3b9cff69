"""Synthetic archives for the benchmarks, built once per parameter set and cached.

The archive comes from the simulated producer (``sample.simulated_producer``)
with its default defect mix, over the bundled CRD3 sample padded to
3,000-6,000 units per source. The producer writes one source at a time; its
two outputs are then cut into ``shards`` gzip files at line boundaries, the
way a real archive is sharded (``transcripts-*``, ``candidates-*``), so a
multi-worker runner has more than one file to read in parallel.

The cache key is the parameters plus a digest of the producer's code: a
changed producer builds a fresh archive rather than silently reusing a stale
one. A build goes to a temporary folder renamed into place when complete, so
an interrupted build is never mistaken for a cached one.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
CANDIDATES_PER_SOURCE = 500  # 100,000 candidates over 200 sources: the default density
GZIP_LEVEL = 6


@dataclass(frozen=True)
class ArchiveSpec:
    candidates: int = 100_000
    sources: int = 200
    min_units: int = 3000
    max_units: int = 6000
    seed: int = 7
    shards: int = 4

    @classmethod
    def at_density(cls, candidates: int, **overrides) -> "ArchiveSpec":
        """``candidates`` at the default density: sources grow with size, each stays 3k-6k units."""
        sources = max(1, math.ceil(candidates / CANDIDATES_PER_SOURCE))
        return cls(candidates=candidates, sources=sources, **overrides)

    def key(self) -> str:
        params = json.dumps(asdict(self), sort_keys=True).encode()
        return f"c{self.candidates}-s{self.sources}-" + hashlib.sha256(params + producer_digest()).hexdigest()[:12]


@dataclass(frozen=True)
class Archive:
    folder: Path
    transcripts_glob: str
    candidates_glob: str
    sources: int
    candidates_in: int  # candidate lines written (the job's candidates_in)
    transcripts_in: int
    input_bytes: int  # uncompressed bytes of both inputs
    largest_source_bytes: int  # uncompressed transcript + candidate bytes of the largest source
    built_in_s: float | None = None


def producer_digest() -> bytes:
    digest = hashlib.sha256()
    for path in sorted((REPO / "sample").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.digest()


def ensure_archive(spec: ArchiveSpec, cache_dir: Path, log=print) -> Archive:
    folder = cache_dir.resolve() / spec.key()
    meta_path = folder / "meta.json"
    if not meta_path.exists():
        log(f"building archive {folder.name} ({spec.candidates} candidates, {spec.sources} sources)...")
        _build(spec, folder)
    meta = json.loads(meta_path.read_text())
    return Archive(
        folder=folder,
        transcripts_glob=str(folder / "transcripts-*.jsonl.gz"),
        candidates_glob=str(folder / "candidates-*.jsonl.gz"),
        sources=meta["spec"]["sources"],
        candidates_in=meta["candidates_in"],
        transcripts_in=meta["transcripts_in"],
        input_bytes=meta["input_bytes"],
        largest_source_bytes=meta["largest_source_bytes"],
        built_in_s=meta.get("built_in_s"),
    )


def _build(spec: ArchiveSpec, folder: Path) -> None:
    staging = folder.with_name(folder.name + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    started = time.perf_counter()
    subprocess.run([
        sys.executable, "-m", "sample.simulated_producer",
        "--transcripts", str(REPO / "sample" / "data" / "crd3-sample.transcripts.jsonl.gz"),
        "--transcripts-out", str(staging / "transcripts.jsonl"),
        "--candidates-out", str(staging / "candidates.jsonl"),
        "--truth-out", str(staging / "truth.jsonl"),
        "--seed", str(spec.seed), "--sources", str(spec.sources), "--candidates", str(spec.candidates),
        "--min-units", str(spec.min_units), "--max-units", str(spec.max_units),
    ], check=True, cwd=REPO)
    (staging / "truth.jsonl").unlink()
    per_source: dict[str, int] = {}
    counts = {}
    total = 0
    for name in ("transcripts", "candidates"):
        source = staging / f"{name}.jsonl"
        counts[name], size = _shard(source, staging / name, spec.shards, per_source)
        total += size
        source.unlink()
    meta = {
        "spec": asdict(spec),
        "candidates_in": counts["candidates"],
        "transcripts_in": counts["transcripts"],
        "input_bytes": total,
        "largest_source_bytes": max(per_source.values(), default=0),
        "built_in_s": round(time.perf_counter() - started, 1),
    }
    (staging / "meta.json").write_text(json.dumps(meta, indent=2))
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)


def _shard(source: Path, prefix: Path, shards: int, per_source: dict[str, int]) -> tuple[int, int]:
    """Cut ``source`` into ``shards`` contiguous gzip files of about equal size; (lines, bytes).

    Also adds each line's size to ``per_source`` under its ``source_id``.
    """
    size = source.stat().st_size
    budget = math.ceil(size / shards)
    lines = written = 0
    outputs = [gzip.open(f"{prefix}-{n:05d}-of-{shards:05d}.jsonl.gz", "wb", compresslevel=GZIP_LEVEL)
               for n in range(shards)]
    try:
        with open(source, "rb") as handle:
            for line in handle:
                if not line.strip():
                    continue
                outputs[min(written // budget, shards - 1)].write(line)
                sid = orjson.loads(line)["source_id"]
                per_source[sid] = per_source.get(sid, 0) + len(line)
                lines += 1
                written += len(line)
    finally:
        for out in outputs:
            out.close()
    return lines, written
