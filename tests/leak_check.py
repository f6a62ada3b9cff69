"""The shared leak check: nothing internal in model-facing guidance (SPEC §7)."""

from __future__ import annotations

import re
from typing import Iterable

_PATH_INDEX = re.compile(r"\w\[\d+\]|\[\d+\]\.")  # spells[3], [0].cast
_JSON_POINTER = re.compile(r"(^|\s)/[A-Za-z_]+/\d+")  # /spells/3
_HASH = re.compile(r"sha256|[0-9a-f]{32,}", re.IGNORECASE)


def assert_model_safe(guidance: str, issues: Iterable[dict] = (), *ids: str) -> None:
    """No code paths, JSON pointers, hashes, reason codes, validator keys or the given ids."""
    assert not _PATH_INDEX.search(guidance), guidance
    assert not _JSON_POINTER.search(guidance), guidance
    assert not _HASH.search(guidance), guidance
    assert "Traceback" not in guidance and "Error:" not in guidance
    for token in ids:
        assert token not in guidance, token
    for issue in issues:
        assert issue["reason_code"] not in guidance, issue["reason_code"]
        assert issue["validator"] not in guidance, issue["validator"]
