"""Warnings a finished run's summary ends with: a run that could use none of its input is almost
always an operator mistake (a transcripts file passed as ``--candidates``, the wrong archive), and
must not look like a normal run. The exit code stays 0 (contract §6: non-zero only when the job fails or
conservation does not hold); the warning line says what happened and why.
"""

from __future__ import annotations

from typing import Any, Mapping

MAX_REASON_CHARS = 200


def _most_common(reasons: Mapping[str, int]) -> str:
    if not reasons:
        return ""
    reason, count = min(reasons.items(), key=lambda item: (-item[1], item[0]))
    shown = reason if len(reason) <= MAX_REASON_CHARS else reason[:MAX_REASON_CHARS] + "…"
    return f"; most common reason ({count}x): {shown}"


def nothing_usable_warnings(manifest: Mapping[str, Any], dead_letter_reasons: Mapping[str, Mapping[str, int]]) -> list[str]:
    """One warning per input every record of which is a dead letter.

    ``dead_letter_reasons``: input (``candidates``, ``transcripts``) -> reason -> count, from the
    run's dead letters (only read when a warning is due: see ``inputs_needing_reasons``)."""
    warnings = []
    for name, flag in (("candidates", "--candidates"), ("transcripts", "--transcripts")):
        if _read(manifest)[name] == 0:
            warnings.append(f"warning: no {name[:-1]} was read: the files {flag} matched hold no record")
    for name, noun in inputs_needing_reasons(manifest).items():
        counted = _counts(manifest)[name]
        warnings.append(f"warning: every {noun} ({counted}) is a dead letter: nothing was evaluated from it"
                        f"{_most_common(dead_letter_reasons.get(name, {}))}")
    return warnings


def _read(manifest: Mapping[str, Any]) -> dict[str, int]:
    return {"candidates": manifest["conservation"]["candidates_in"],
            "transcripts": manifest["transcript_conservation"]["transcripts_in"]}


def _counts(manifest: Mapping[str, Any]) -> dict[str, int]:
    c, t = manifest["conservation"], manifest["transcript_conservation"]
    return {"candidates": c["candidates_in"] - c["filtered"], "transcripts": t["transcripts_in"]}


def inputs_needing_reasons(manifest: Mapping[str, Any]) -> dict[str, str]:
    """The inputs (name -> noun) of which every record read became a dead letter."""
    c, t = manifest["conservation"], manifest["transcript_conservation"]
    due = {}
    if t["transcripts_in"] > 0 and t["dead_letters"] == t["transcripts_in"]:
        due["transcripts"] = "transcript"
    if c["candidates_in"] - c["filtered"] > 0 and c["dead_letters"] == c["candidates_in"] - c["filtered"]:
        due["candidates"] = "candidate"
    return due
