"""Prompt revisions (SPEC §6.1): current and stale attempts, which passing
attempt a slot accepts, and which slots get a refresh request.

An attempt is *current* when both its prompt and its LLM schema fingerprint
are the ones the installed assets have now; otherwise it is *stale*. A
passing current attempt beats every passing stale one; among equals the
earliest wins (the order the caller gives: attempt number, then candidate id).
So a slot whose attempts are all stale, or all current, is decided exactly as
before revisions were known.

With ``--refresh-stale`` a slot that has no current attempt, is not deferred
and gets no retry request in this run gets one refresh request: extract the
chunk again under the current prompt, without correction guidance. Pure
functions only: the slot decider calls them.
"""

from __future__ import annotations

from typing import Sequence

KIND_RETRY = "retry"
KIND_REFRESH = "refresh"
REQUEST_KINDS = (KIND_RETRY, KIND_REFRESH)


def is_current(prompt_fingerprint: str, schema_fingerprint: str, current: tuple[str, str]) -> bool:
    """Both fingerprints equal the current assets' (prompt, LLM schema) fingerprints."""
    return (prompt_fingerprint, schema_fingerprint) == current


def choose_accepted(passed: Sequence[bool], current: Sequence[bool]) -> int | None:
    """Index of the accepted attempt, attempts given earliest first; None when none passes.

    The earliest passing current attempt, else the earliest passing one.
    """
    if len(passed) != len(current):
        raise ValueError("one current flag per attempt")
    passing = [n for n, ok in enumerate(passed) if ok]
    if not passing:
        return None
    for n in passing:
        if current[n]:
            return n
    return passing[0]


def refresh_due(*, has_current: bool, deferred: bool, retried: bool) -> bool:
    """Whether a slot is one to refresh: no current attempt, not deferred, no retry request now.

    (``--refresh-stale`` decides whether the request is written; the count of due
    slots is reported either way.)
    """
    return not has_current and not deferred and not retried


def next_attempt(attempts: Sequence[int]) -> int:
    """The attempt number of any new request for the slot: one more than the highest seen."""
    return max(attempts) + 1
