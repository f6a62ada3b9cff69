import re

import pytest

import domain.assets as assets
from domain.assets import SHARED_EVIDENCE_PROMPT, compose_prompt, composed_prompt, current_fingerprints, fingerprint, read_asset
from domain.families import FAMILIES
from domain.families.base import ROLE_SCENE

EXTRACTION_FAMILIES = sorted(k for k, s in FAMILIES.items() if s.role != ROLE_SCENE and s.chunk_kind == "extraction")


def test_shared_instruction_states_the_ordering_rule():
    text = read_asset(SHARED_EVIDENCE_PROMPT).decode()
    assert "start_unit_id" in text and "EARLIER" in text and "end_unit_id" in text


@pytest.mark.parametrize("family", EXTRACTION_FAMILIES)
def test_every_extraction_prompt_contains_the_shared_instruction_byte_identically(family):
    shared = read_asset(SHARED_EVIDENCE_PROMPT)
    composed = composed_prompt(family)
    assert shared in composed
    assert b"{{include" not in composed


def test_assets_load_from_the_package_not_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assets.read_asset.cache_clear()
    assert read_asset(SHARED_EVIDENCE_PROMPT)


def test_fingerprints_follow_bytes(monkeypatch):
    base = {"p.md": b"Intro\n{{include s.md}}\nEnd\n", "s.md": b"Shared rule.\n"}

    def fake_read(path):
        return base[path]

    monkeypatch.setattr(assets, "read_asset", fake_read)
    first = fingerprint(compose_prompt("p.md"))
    assert compose_prompt("p.md") == b"Intro\nShared rule.\nEnd\n"
    assert fingerprint(compose_prompt("p.md")) == first  # stable
    base["s.md"] = b"Shared rule, revised.\n"
    assert fingerprint(compose_prompt("p.md")) != first  # an included asset's change moves the composed fingerprint


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_current_fingerprints_are_sha256_of_exact_bytes(family):
    prompt_fp, schema_fp = current_fingerprints(family)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", prompt_fp)
    assert prompt_fp == fingerprint(composed_prompt(family))
    assert schema_fp == fingerprint(read_asset(assets.llm_schema_path(family)))
