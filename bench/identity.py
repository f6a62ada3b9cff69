"""Byte-identity check for domain optimisations: digest every output row of an archive.

    .venv/bin/python -m bench.identity --transcripts G --candidates G --out before.json
    .venv/bin/python -m bench.identity --transcripts G --candidates G --compare before.json
    .venv/bin/python -m bench.identity ... --code /tmp/old-checkout --out before.json   # another version's domain/

Calls ``domain.reprocess.process_source`` once per source (sorted source ids,
the same grouping as ``bench.loop``) and hashes, per output, the exact bytes
of every row in the order the domain returned them (orjson, as the job
writes JSON Lines), plus the counts. Two versions of the domain that give the
same digests give byte-identical outputs on that archive, guidance included.
``--code DIR`` imports ``domain`` from DIR instead (e.g. ``git archive main``
unpacked somewhere), so a baseline can be taken without switching branches.
Exit status 1 when ``--compare`` finds a difference; the first differing row
of each output is printed.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import sys
from pathlib import Path

import orjson

from bench.lines import read_grouped

TAGS = ("artifacts", "retry_requests", "evaluations", "dead_letters")


def digests(transcripts: str, candidates: str, keep_rows: bool = False) -> dict:
    from domain.reprocess import RunConfig, process_source  # after --code has set sys.path

    transcript_lines, candidate_lines = read_grouped(transcripts), read_grouped(candidates)
    hashes = {tag: hashlib.sha256() for tag in (*TAGS, "counts")}
    rows_seen = {tag: 0 for tag in TAGS}
    kept: dict[str, list[bytes]] = {tag: [] for tag in TAGS}
    config = RunConfig()
    for source_id in sorted(transcript_lines.keys() | candidate_lines.keys()):
        gc.disable()
        result = process_source(source_id, transcript_lines.get(source_id, ()), candidate_lines.get(source_id, ()),
                                config)
        gc.enable()
        for tag in TAGS:
            for row in getattr(result, tag):
                line = orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)
                hashes[tag].update(line)
                rows_seen[tag] += 1
                if keep_rows:
                    kept[tag].append(line)
        hashes["counts"].update(orjson.dumps([source_id, sorted(result.counts.items())]) + b"\n")
    out = {"rows": rows_seen, "sha256": {tag: h.hexdigest() for tag, h in hashes.items()}}
    if keep_rows:
        out["_rows"] = kept
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.identity", description=__doc__.split("\n")[0])
    p.add_argument("--transcripts", required=True)
    p.add_argument("--candidates", required=True)
    p.add_argument("--code", type=Path, help="import domain/ from this checkout instead")
    p.add_argument("--out", type=Path, help="write the digests here")
    p.add_argument("--compare", type=Path, help="compare with digests written by --out")
    p.add_argument("--rows-out", type=Path, help="also write every row, one file per output (to diff)")
    args = p.parse_args(argv)
    if args.code:
        sys.path.insert(0, str(args.code.resolve()))
        for name in [m for m in sys.modules if m.split(".")[0] in ("domain", "assets")]:
            del sys.modules[name]
    result = digests(args.transcripts, args.candidates, keep_rows=args.rows_out is not None)
    rows = result.pop("_rows", None)
    if args.rows_out and rows:
        args.rows_out.mkdir(parents=True, exist_ok=True)
        for tag, lines in rows.items():
            (args.rows_out / f"{tag}.jsonl").write_bytes(b"".join(lines))
    text = orjson.dumps(result, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    if args.out:
        args.out.write_bytes(text + b"\n")
    print(text.decode())
    if args.compare:
        before = orjson.loads(args.compare.read_bytes())
        differ = [tag for tag in before["sha256"] if before["sha256"][tag] != result["sha256"].get(tag)]
        if differ:
            print(f"DIFFERENT: {', '.join(differ)}", file=sys.stderr)
            return 1
        print("identical", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
