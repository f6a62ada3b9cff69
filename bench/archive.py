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

Archives larger than the producer is worth running for (10M candidates: the
producer would take a quarter of an hour) are copies of a built one
(``replicated_archive``): every source again under a new id, each of its
records rewritten to match, so the copy is a valid archive of N times the
sources in which no record collides with another (``sized_archive`` picks the
route by size). Cached the same way, under the base's key and the count.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import re
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
    # The archive of a prompt revision (the loop's bench, bench.backfill): the first attempts of this family
    # were made under its earlier prompt (the producer's --revised-family), and every attempt carries billed
    # usage (--usage). None: the plain bench archive.
    revised_family: str | None = None
    # The judges' bench (bench.judges): attempts that pass the rules carry semantic defects only a judge sees
    # (the producer's --judge-defects), and the truth the simulated judge answers from is kept
    # (``truth-judges.jsonl``: the rows that planted one). None: the plain bench archive.
    judge_defects: bool | None = None

    @classmethod
    def at_density(cls, candidates: int, **overrides) -> "ArchiveSpec":
        """``candidates`` at the default density: sources grow with size, each stays 3k-6k units."""
        sources = max(1, math.ceil(candidates / CANDIDATES_PER_SOURCE))
        return cls(candidates=candidates, sources=sources, **overrides)

    def key(self) -> str:
        # Fields at None stay out of the key: adding one leaves every earlier archive's key as it was.
        params = json.dumps({k: v for k, v in asdict(self).items() if v is not None}, sort_keys=True).encode()
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


# Sizes above this that are whole multiples of it are copies of the archive of this size.
REPLICATE_UNIT = 1_000_000
# Part of a replicated archive's cache key: bump it when what a copy rewrites changes.
REPLICA_VERSION = 1
# gzip level of the copies: level 1 writes ~4x faster than 6 for ~25% more bytes, and the
# copies exist only to be read by the bench.
REPLICA_GZIP_LEVEL = 1
# The record fields a copy rewrites: the source a record belongs to, and the candidate id
# (unique per attempt). Everything else that must be unique per source derives from these in
# the job (request ids hash source and candidate id; artifact ids, slots and evidence name the
# source); input_fingerprint hashes an entry list's rendering, which names no source, so it
# stays valid in every copy.
REWRITTEN_FIELDS = ("source_id", "candidate_id")
_COPY_MARK = re.compile(rb"\.r\d+$")


def sized_archive(candidates: int, cache_dir: Path, log=print) -> Archive:
    """The bench's archive of ``candidates``: built by the producer, or above REPLICATE_UNIT (whole
    multiples of it) copies of the REPLICATE_UNIT archive."""
    if candidates > REPLICATE_UNIT and candidates % REPLICATE_UNIT == 0:
        base = ensure_archive(ArchiveSpec.at_density(REPLICATE_UNIT), cache_dir, log)
        return replicated_archive(base, candidates // REPLICATE_UNIT, cache_dir, log)
    return ensure_archive(ArchiveSpec.at_density(candidates), cache_dir, log)


def copy_suffix(copy: int) -> bytes:
    """What copy ``copy`` appends to each rewritten id (copy 0 is the base itself)."""
    return b"" if copy == 0 else f".r{copy}".encode()


_ID_FIELD = re.compile(rb'"(' + b"|".join(f.encode() for f in REWRITTEN_FIELDS) + rb')"(\s*:\s*")((?:[^"\\]|\\.)*)"')
_BOM = b"\xef\xbb\xbf"


def rewrite_line(line: bytes, suffix: bytes) -> tuple[bytes, bytes | None]:
    """(the line as the copy of ``suffix`` has it, the source id it belongs to, or None).

    A JSON object gets ``suffix`` after each of REWRITTEN_FIELDS that is a string. A line that
    is not one (a dead letter in the base, and in every copy) keeps its bytes but for those ids
    where they appear as a key with a string value, as the job's fast key path finds them. An id
    that already ends like a copy's (``.r<digits>``) is refused: two copies could then share an
    id. Copy 0 (no suffix) is the base's line byte for byte."""
    body = line.rstrip(b"\r\n")
    bom = _BOM if body.startswith(_BOM) else b""
    body = body[len(bom):]
    try:
        record = orjson.loads(body)
    except orjson.JSONDecodeError:
        record = None
    if not isinstance(record, dict):
        ids = {m.group(1).decode(): m.group(3) for m in reversed(list(_ID_FIELD.finditer(body)))}
        for name, value in ids.items():
            _check_id(name, value)
        new = _ID_FIELD.sub(lambda m: m.group(0)[:-1] + suffix + b'"', body) if suffix else body
        source = ids.get("source_id")
        return bom + new + b"\n", source + suffix if source else None
    for name in REWRITTEN_FIELDS:
        value = record.get(name)
        if isinstance(value, str):
            _check_id(name, value.encode())
            if suffix:
                record[name] = value + suffix.decode()
    source = record.get("source_id")
    source = source.encode() if isinstance(source, str) else None
    if not suffix:
        return line if line.endswith(b"\n") else line + b"\n", source
    return bom + orjson.dumps(record) + b"\n", source


def _check_id(name: str, value: bytes) -> None:
    if _COPY_MARK.search(value):
        raise ValueError(f"{name} {value!r} already ends like a copy's id (.r<digits>): cannot replicate")


def _copy_file(task: tuple[str, str, int]) -> tuple[int, int, dict[bytes, int]]:
    """One base file as copy ``copy``: (lines, uncompressed bytes written, bytes per source)."""
    source_path, target_path, copy = task
    suffix = copy_suffix(copy)
    lines = written = 0
    per_source: dict[bytes, int] = {}
    with gzip.open(source_path, "rb") as src, gzip.open(target_path, "wb", compresslevel=REPLICA_GZIP_LEVEL) as out:
        for line in src:
            if not line.strip():
                continue
            new, source = rewrite_line(line, suffix)
            out.write(new)
            lines += 1
            written += len(new)
            if source is not None:
                per_source[source] = per_source.get(source, 0) + len(new)
    return lines, written, per_source


def replicated_archive(base: Archive, copies: int, cache_dir: Path, log=print, processes: int | None = None) -> Archive:
    """``base`` ``copies`` times over (copy 0 is the base's records as they are), cached.

    Every source of copy k > 0 is the base's under ``<source_id>.r<k>``, each candidate under
    ``<candidate_id>.r<k>``: so every record maps to one (base record, copy), the job treats
    each copy's sources exactly as the base's, and every count of its manifest is ``copies``
    times the base's. Each base file becomes ``copies`` files (``<input>-<n>-of-<total>``),
    written by ``processes`` worker processes (default: one per core)."""
    if copies < 1:
        raise ValueError(f"copies must be at least 1 (got {copies})")
    folder = cache_dir.resolve() / f"{base.folder.name}-x{copies}-v{REPLICA_VERSION}"
    if not (folder / "meta.json").exists():
        log(f"building archive {folder.name} ({copies} copies of {base.folder.name})...")
        _replicate(base, copies, folder, processes)
    return ensure_archive_at(folder)


def _replicate(base: Archive, copies: int, folder: Path, processes: int | None) -> None:
    import multiprocessing

    staging = folder.with_name(folder.name + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    started = time.perf_counter()
    tasks, inputs = [], {}
    for name in ("transcripts", "candidates"):
        files = sorted(base.folder.glob(f"{name}-*.jsonl.gz"))
        total = len(files) * copies
        inputs[name] = []
        for copy in range(copies):
            for n, path in enumerate(files):
                target = staging / f"{name}-{copy * len(files) + n:05d}-of-{total:05d}.jsonl.gz"
                tasks.append((str(path), str(target), copy))
                inputs[name].append(len(tasks) - 1)
    # Largest files first, so the last task is a small one.
    order = sorted(range(len(tasks)), key=lambda i: -os.path.getsize(tasks[i][0]))
    with multiprocessing.get_context("spawn").Pool(processes or os.cpu_count() or 1) as pool:
        results = dict(zip(order, pool.map(_copy_file, [tasks[i] for i in order], chunksize=1)))
    counts = {name: sum(results[i][0] for i in indexes) for name, indexes in inputs.items()}
    per_source: dict[bytes, int] = {}
    for _lines, _written, sizes in results.values():
        for source, size in sizes.items():
            per_source[source] = per_source.get(source, 0) + size
    if counts["candidates"] != base.candidates_in * copies or counts["transcripts"] != base.transcripts_in * copies:
        raise RuntimeError(f"replication wrote {counts}, not {copies} x the base's "
                           f"({base.candidates_in} candidates, {base.transcripts_in} transcripts)")
    meta = {
        "spec": {**json.loads((base.folder / "meta.json").read_text())["spec"],
                 "candidates": base.candidates_in * copies, "sources": base.sources * copies},
        "replica_of": base.folder.name,
        "copies": copies,
        "candidates_in": counts["candidates"],
        "transcripts_in": counts["transcripts"],
        "input_bytes": sum(written for _lines, written, _sizes in results.values()),
        "largest_source_bytes": max(per_source.values(), default=0),
        "built_in_s": round(time.perf_counter() - started, 1),
    }
    (staging / "meta.json").write_text(json.dumps(meta, indent=2))
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)


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
    return ensure_archive_at(folder)


def ensure_archive_at(folder: Path) -> Archive:
    """The built archive in ``folder`` (its meta.json written last, when complete)."""
    meta = json.loads((folder / "meta.json").read_text())
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
        *(["--revised-family", spec.revised_family, "--usage", "--defect-rate", "stale_prompt_fingerprint=0"]
          if spec.revised_family else []),
        *(["--judge-defects"] if spec.judge_defects else []),
    ], check=True, cwd=REPO)
    if spec.judge_defects:
        keep_judge_truth(staging / "truth.jsonl", staging / JUDGE_TRUTH)
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


JUDGE_TRUTH = "truth-judges.jsonl"


def keep_judge_truth(truth: Path, kept: Path) -> int:
    """Copy the truth rows that planted a semantic defect (what the simulated judge needs); how many."""
    n = 0
    with open(truth, "rb") as rows, open(kept, "wb") as out:
        for line in rows:
            if b'"judge_defects"' in line and orjson.loads(line).get("judge_defects"):
                out.write(line)
                n += 1
    return n


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
