"""Every citation of the contract lands on a section of docs/contract.md (issue 42 item 1).

Code, help text and documents cite the contract by section: "contract §6.1" in
code and text, a link ``[contract §6.1](contract.md#s6-1)`` in Markdown. Each
numbered section of docs/contract.md has an explicit anchor (``s6-1``). These
tests read every tracked file (``git ls-files``) and fail on a citation or a
link whose anchor the contract does not have, on a Markdown link whose path
does not reach docs/contract.md from the citing file, and on any citation of
the old, outside document ("SPEC §6.1", SPEC.md). ``scripts/cite_contract.py``
rewrites the old form; it is tested here on plain text.
"""

from __future__ import annotations

import importlib.util
import posixpath
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = "docs/contract.md"
# The files that spell the old form, and bad citations, on purpose: to look for them.
CHECKERS = frozenset({"scripts/cite_contract.py", "tests/test_contract_citations.py"})


def _load_script():
    spec = importlib.util.spec_from_file_location("cite_contract", ROOT / "scripts" / "cite_contract.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The citation grammar is the script's: one definition of what a citation is, for the rewrite and the check.
SCRIPT = _load_script()
CITATION, CHAINED, FENCE = SCRIPT.CITATION, SCRIPT.CHAINED, SCRIPT.FENCE
OLD = (SCRIPT.CITES_OLD, SCRIPT.POINTS_AT_OLD)  # the old forms on one line (not the script's line-break hint)
# Any mention of an anchor of the contract: "contract.md#s6-1", in a link or not.
ANCHORED = re.compile(r"contract\.md#(?P<anchor>[\w-]+)")
# A Markdown link: its target path (may be empty: a link within the page) and anchor.
MD_LINK = re.compile(r"\]\((?P<path>[^)\s#]*)(?:#(?P<anchor>[^)\s]*))?\)")
# A line that is only an anchor: stricter than the script's search, to find one placed inside a paragraph.
ANCHOR = re.compile(r'^<a id="(?P<id>[^"]+)"></a>\s*$')
HEADING = re.compile(r"^(?P<level>#{2,3}) (?P<number>\d+(?:\.\d+)?)\.? ")

# Every section the project has cited (the numbering it has always used).
CITED_SECTIONS = ("1", "2", "3", "3.1", "3.2", "3.3", "4", "4.1", "4.2", "4.3", "5", "5.3", "6", "6.1", "6.2",
                  "6.3", "6.4", "7", "8", "9")


anchor_of = SCRIPT.anchor


def tracked_texts() -> dict[str, str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the tracked files are unknown")
    names = listed.stdout
    texts = {}
    for name in names.decode("utf-8").split("\0"):
        if not name:
            continue
        try:
            texts[name] = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue  # binary (a gzip sample), or deleted in the working tree
    # The contract itself, tracked or not yet (a branch that adds it).
    texts[CONTRACT] = (ROOT / CONTRACT).read_text(encoding="utf-8")
    return texts


def contract_anchors(text: str) -> list[str]:
    return [m["id"] for line in text.splitlines() if (m := ANCHOR.match(line))]


def outside_code(text: str):
    """(line number, line) of a Markdown text with fenced blocks left out and inline code spans
    blanked: what renders as Markdown, where a link is a link."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if fence is not None:
            if opened and opened[1] == fence:
                fence = None
            continue
        if opened:
            fence = opened[1]
            continue
        yield number, re.sub(r"(`+)(.*?)\1", lambda m: " " * len(m[0]), line)


def citation_problems(path: str, text: str, anchors: frozenset[str]) -> list[str]:
    """What in one file cites a section or anchor the contract does not have."""
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for m in CITATION.finditer(line):
            for section in [m["first"], *(c["n"] for c in CHAINED.finditer(m["chain"]))]:
                if anchor_of(section) not in anchors:
                    problems.append(f"{path}:{number}: contract §{section} has no anchor #{anchor_of(section)}")
        for m in ANCHORED.finditer(line):
            if m["anchor"] not in anchors:
                problems.append(f"{path}:{number}: #{m['anchor']} is not an anchor of {CONTRACT}")
    if path.endswith(".md"):
        for number, line in outside_code(text):
            for m in MD_LINK.finditer(line):
                target = m["path"]
                if target and not target.endswith("contract.md") or "://" in target:
                    continue  # a link to another page
                if not target and path != CONTRACT:
                    continue  # a link within another page
                reached = posixpath.normpath(posixpath.join(posixpath.dirname(path), target)) if target else path
                if reached != CONTRACT:
                    problems.append(f"{path}:{number}: ({target}) does not reach {CONTRACT} from {path}")
                elif m["anchor"] is not None and m["anchor"] not in anchors:
                    problems.append(f"{path}:{number}: #{m['anchor']} is not an anchor of {CONTRACT}")
    return list(dict.fromkeys(problems))  # a link is both a mention and a link: named once


def old_citations(path: str, text: str) -> list[str]:
    return [f"{path}:{number}: {line.strip()[:120]}" for number, line in enumerate(text.splitlines(), 1)
            if any(pattern.search(line) for pattern in OLD)]


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return tracked_texts()


@pytest.fixture(scope="module")
def anchors(texts) -> frozenset[str]:
    return frozenset(contract_anchors(texts[CONTRACT]))


def test_every_numbered_section_has_its_own_anchor(texts):
    lines = texts[CONTRACT].splitlines()
    found = contract_anchors(texts[CONTRACT])
    assert len(found) == len(set(found)), sorted(a for a in found if found.count(a) > 1)
    numbered = []
    for n, line in enumerate(lines):
        heading = HEADING.match(line)
        if heading is None:
            continue
        numbered.append(heading["number"])
        above = next((lines[m] for m in range(n - 1, -1, -1) if lines[m].strip()), "")
        own = ANCHOR.match(above)
        assert own is not None and own["id"] == anchor_of(heading["number"]), (
            f"{CONTRACT}: '{line}' needs <a id=\"{anchor_of(heading['number'])}\"></a> on the line above it")
    assert set(CITED_SECTIONS) <= set(numbered), sorted(set(CITED_SECTIONS) - set(numbered))


def test_every_citation_and_link_lands_on_an_anchor(texts, anchors):
    problems = [problem for path, text in sorted(texts.items()) if path not in CHECKERS
                for problem in citation_problems(path, text, anchors)]
    assert not problems, "\n".join(problems)


def test_the_code_and_the_docs_cite_the_contract(texts):
    citing = {path for path, text in texts.items() if path != CONTRACT and CITATION.search(text)}
    assert {"README.md", "docs/internal/dnd.md", "domain/slot_decision.py", "pipelines/options.py"} <= citing
    assert len(citing) > 50


def test_nothing_cites_the_old_outside_document(texts):
    left = [line for path, text in sorted(texts.items()) if path not in CHECKERS
            for line in old_citations(path, text)]
    assert not left, "run python scripts/cite_contract.py:\n" + "\n".join(left)


# --- the checks themselves, on planted text ----------------------------------------------------------

PLANTED_ANCHORS = frozenset({"s4", "s4-1", "s6-1"})


@pytest.mark.parametrize("path, text", [
    ("domain/x.py", "# the rule (contract §6.2)"),
    ("domain/x.py", "# the rules (contract §4.1 and §4.7)"),
    ("docs/x.md", "as [contract §6.1](contract.md#s6-9) says"),
    ("docs/x.md", "as [contract §6.1](docs/contract.md#s6-1) says"),  # the path is README's
    ("README.md", "as [contract §6.1](contract.md#s6-1) says"),
    ("docs/internal/x.md", "as [contract §4](contract.md#s4) says"),
    (CONTRACT, "see [below](#s9)"),
    ("pipelines/x.py", 'HELP = "see docs/contract.md#s7-1"'),
])
def test_a_planted_bad_citation_is_found(path, text):
    assert citation_problems(path, text, PLANTED_ANCHORS)


@pytest.mark.parametrize("path, text", [
    ("domain/x.py", "# the rule (contract §6.1; contract §4, §4.1)"),
    ("docs/x.md", "as [contract §6.1](contract.md#s6-1) and [§4.1](contract.md#s4-1) say"),
    ("docs/internal/x.md", "as [contract §4](../contract.md#s4) says; [dnd](dnd.md#10-registry) too"),
    ("sample/data/README.md", "records ([contract §4.1](../../docs/contract.md#s4-1))"),
    ("docs/x.md", "in code: `[contract §6.1](docs/contract.md#s6-1)`"),  # a code span is no link
    (CONTRACT, "see [below](#s4-1)"),
])
def test_a_good_citation_passes(path, text):
    assert citation_problems(path, text, PLANTED_ANCHORS) == []


def test_old_citations_are_found():
    for text in ("(SPEC §6.1)", "SPEC 6.3", "the SPEC's fields", "see ../shared/SPEC.md", "SPEC\u00a0§4"):
        assert old_citations("x.py", text), text
    for text in ("SPEC = FamilySpec(", "SPEC_ENUMS[family]", "(SPEC, text, CTX)", "contract §6.1"):
        assert not old_citations("x.py", text), text


# --- scripts/cite_contract.py -------------------------------------------------------------------

@pytest.fixture(scope="module")
def cite():
    return SCRIPT


@pytest.mark.parametrize("path, old, new", [
    ("domain/x.py", "# (SPEC §6.1, §4.1)", "# (contract §6.1, §4.1)"),
    ("domain/x.py", '"""the rules (SPEC\n    §4): ..."""', '"""the rules (contract\n    §4): ..."""'),
    ("domain/x.py", "# (SPEC 6.1)", "# (contract §6.1)"),
    ("domain/x.py", "exactly the SPEC's fields", "exactly the contract's fields"),
    ("domain/x.py", "# (SPEC §7.5)", "# (SPEC §7.5)"),  # no such section: left for --check
    ("docs/x.md", "stale (SPEC §6.1).", "stale ([contract §6.1](contract.md#s6-1))."),
    ("docs/internal/x.md", "applies SPEC §4.1 and §4.2.",
     "applies [contract §4.1](../contract.md#s4-1) and [§4.2](../contract.md#s4-2)."),
    ("README.md", "rules (SPEC §4–§8)", "rules ([contract §4](docs/contract.md#s4)–[§8](docs/contract.md#s8))"),
    ("docs/x.md", "run `x` (SPEC §6.1)", "run `x` ([contract §6.1](contract.md#s6-1))"),
    ("docs/x.md", "in code `SPEC §6.1` stays plain", "in code `contract §6.1` stays plain"),
    ("docs/x.md", "```\nSPEC §6.1\n```\n", "```\ncontract §6.1\n```\n"),
    ("docs/x.md", "hand-written contract §6.1 here", "hand-written [contract §6.1](contract.md#s6-1) here"),
])
def test_the_script_rewrites_old_citations(cite, path, old, new):
    anchors = frozenset(anchor_of(s) for s in CITED_SECTIONS)
    once = cite.rewrite(old, path, anchors)
    assert once == new
    assert cite.rewrite(once, path, anchors) == once  # idempotent


def test_the_script_never_rewrites_what_a_model_reads(cite):
    for path in ("assets/dnd/spells/prompts/spells.md", "assets/dnd/shared/prompts/common-dnd-extraction-evidence.md",
                 "assets/dnd/spells/schemas/dnd_spells_llm.v1.json", "assets/dnd/spells/judges/spell-cast.md",
                 "assets/dnd/spells/judges/spell-cast.schema.json", "sample/prompts/spells.v0.md"):
        assert cite.model_facing(path), path
    for path in ("assets/dnd/spells/schemas/dnd_spells.v1.avsc", "assets/outputs/evaluation.v1.json", "docs/x.md"):
        assert not cite.model_facing(path), path


def test_the_script_finds_nothing_left(cite):
    assert cite.leftovers() == []
