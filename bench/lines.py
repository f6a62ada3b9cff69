"""The archive's JSON Lines grouped by source, as the bench's plain loops read them.

Decompressed as the job reads (``transforms.compression``). No ``domain``
import on purpose: ``bench.identity --code DIR`` must be able to
choose which ``domain`` is imported after this module is loaded.
"""

from __future__ import annotations

import glob
from collections import defaultdict

from transforms.compression import decompressed
from transforms.json_keys import trusted_key


def read_grouped(pattern: str) -> dict[str, list[bytes]]:
    """Every non-blank line of the matching files, by ``source_id`` (streamed: no whole-file buffer)."""
    grouped: dict[str, list[bytes]] = defaultdict(list)
    for path in sorted(glob.glob(pattern)):
        with open(path, "rb") as raw, decompressed(raw, path) as handle:
            for line in handle:
                line = line.rstrip(b"\r\n")
                if line.strip():
                    grouped[trusted_key(line, "source_id")].append(line)  # keyed as the job's read step keys
    return grouped
