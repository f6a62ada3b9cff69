"""Prompt revisions (contract §6.1): current and stale attempts, which passing
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

Attempt numbers are bounded (:data:`MAX_ATTEMPT_NUMBER`): the candidate
envelope accepts no other, so no request, retry or refresh, ever asks for an
attempt beyond it. A slot whose highest attempt is the bound has spent its
attempt space: it gets no request (a failing one is exhausted).
"""

from __future__ import annotations

from typing import Any, Sequence

KIND_RETRY = "retry"
KIND_REFRESH = "refresh"
KIND_JUDGE = "judge"  # a semantic judge's verdict on an attempt (contract §4.3)
REQUEST_KINDS = (KIND_RETRY, KIND_REFRESH, KIND_JUDGE)

# The highest attempt number: the candidate envelope accepts attempts 1..this (the signed 32-bit
# range), so a request for a later attempt could never be answered. The one definition: the
# envelope, the slot decider and the --max-attempts option import it from here.
MAX_ATTEMPT_NUMBER = 2**31 - 1


def is_current(prompt_fingerprint: str, schema_fingerprint: str, current: tuple[str, str]) -> bool:
    """Both fingerprints equal the current assets' (prompt, LLM schema) fingerprints."""
    return (prompt_fingerprint, schema_fingerprint) == current


def current_flags(attempts: Sequence[Any], current: tuple[str, str]) -> list[bool]:
    """:func:`is_current` of each attempt (anything with ``prompt_fingerprint`` and
    ``schema_fingerprint``), in one call per slot."""
    return [(a.prompt_fingerprint, a.schema_fingerprint) == current for a in attempts]


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


def refresh_due(*, has_current: bool, retried: bool, attempts_spent: bool = False) -> bool:
    """Whether a slot that was decided (not deferred: a deferred slot is never asked) is one to
    refresh: no current attempt, no retry request now, and an attempt number left for the request.

    (``--refresh-stale`` decides whether the request is written; the count of due
    slots, the manifest's ``slots_to_refresh``, is reported either way.) A slot
    whose attempts are spent (its highest attempt is ``MAX_ATTEMPT_NUMBER``) is
    not a slot to refresh: no refresh request can be numbered for it, so
    counting it would promise a request ``--refresh-stale`` cannot write, and
    ``slots_to_refresh`` stays the number of refresh requests the flag writes.
    """
    return not has_current and not retried and not attempts_spent


def next_attempt(attempts: Sequence[int]) -> int:
    """The attempt number of any new request for the slot: one more than the highest seen.

    Raises ValueError when that is beyond ``MAX_ATTEMPT_NUMBER``: such a slot gets
    no request (the slot decider checks before asking).
    """
    attempt = max(attempts) + 1
    if attempt > MAX_ATTEMPT_NUMBER:
        raise ValueError(f"attempt {attempt} is beyond the highest attempt number {MAX_ATTEMPT_NUMBER}")
    return attempt
