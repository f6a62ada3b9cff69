"""A prompt revision for the demo: earlier wordings of family prompts, kept as text.

The simulated archive can hold one family whose first attempts were produced
under an earlier prompt (``simulated_producer --revised-family``). That prompt
is real text (``sample/prompts/<family>.v0.md``, composed with the shared
includes exactly as the installed prompt is), so its fingerprint is the sha256
of what a model would have read, as contract §8 defines it. The installed assets
are the revised version.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from domain.assets import compose_text, current_fingerprints, fingerprint

EARLIER = "prompts/{family}.v0.md"


def revisable_families() -> tuple[str, ...]:
    """Families with an earlier prompt kept under sample/prompts/."""
    folder = resources.files("sample").joinpath("prompts")
    return tuple(sorted(entry.name[: -len(".v0.md")] for entry in folder.iterdir() if entry.name.endswith(".v0.md")))


@lru_cache(maxsize=None)
def earlier_prompt(family: str) -> bytes:
    """The earlier prompt of ``family`` as the model read it (includes expanded)."""
    try:
        text = resources.files("sample").joinpath(EARLIER.format(family=family)).read_bytes()
    except FileNotFoundError:
        raise ValueError(f"no earlier prompt kept for {family!r}; kept: {', '.join(revisable_families())}") from None
    return compose_text(text)


def earlier_prompt_fingerprint(family: str) -> str:
    """The prompt fingerprint of attempts made before the revision (the LLM schema did not change)."""
    return fingerprint(earlier_prompt(family))


def earlier_fingerprints(family: str) -> tuple[str, str]:
    """(prompt, LLM schema) fingerprints of attempts made before the revision, against the installed schema."""
    return earlier_prompt_fingerprint(family), current_fingerprints(family)[1]
