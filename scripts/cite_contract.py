"""Point every citation of the contract at docs/contract.md.

The contract used to live outside the repository and was cited as "SPEC §6.1"
(or "SPEC 6.1", "the SPEC's ..."). This rewrites every such citation in the
tracked files to the project's own contract:

- in Markdown, a link relative to the citing file:
  ``[contract §6.1](contract.md#s6-1)``, ``[contract §4.1](../contract.md#s4-1) and
  [§4.2](../contract.md#s4-2)``; a plain "contract §6.1" not yet linked becomes a link
  too; inside code spans and fenced blocks the plain form is kept;
- everywhere else (code, comments, help text, schemas, Makefile): ``contract §6.1``.

Model-facing assets (prompts, LLM and judge schemas) are never rewritten, since
a byte there moves a fingerprint (contract §8); ``--check`` lists them like any
leftover. A citation of a section docs/contract.md has no anchor for is left
as it is and listed too.

    python scripts/cite_contract.py          # rewrite in place; prints the files changed
    python scripts/cite_contract.py --check  # change nothing

Either way it then lists what is left (a citation it could not rewrite), and
exits 1 if anything is.

Idempotent: a second run changes nothing. Run it again after merging a branch
that still cites the old form.
"""

from __future__ import annotations

import argparse
import posixpath
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = "docs/contract.md"
# Files that must spell the old form to find it.
SELF = frozenset({"scripts/cite_contract.py", "tests/test_contract_citations.py"})

SECTION = r"\d+(?:\.\d+)?"
# What may join two sections of one citation: "§3.2, §6.4", "§4.1 and §4.2", "§4–§8".
JOIN = r"(?:,\s*|\s+and\s+|\s+or\s+|\s*[–/-]\s*)"
OLD = re.compile(rf"\bSPEC(?P<gap>\s+)§?(?P<first>{SECTION})\b(?P<chain>(?:{JOIN}§{SECTION}\b)*)")
OLD_POSSESSIVE = re.compile(r"(?P<the>\b[Tt]he\s+)?\bSPEC's\b")
# A plain citation in Markdown that is not yet a link's text ("[contract §..." is).
PLAIN = re.compile(rf"(?<!\[)\bcontract(?P<gap>\s+)§(?P<first>{SECTION})\b(?P<chain>(?:{JOIN}§{SECTION}\b)*)")
CHAINED = re.compile(rf"(?P<join>{JOIN})§(?P<n>{SECTION})\b")
ANCHOR = re.compile(r'<a id="(s[0-9][\w-]*)"></a>')
FENCE = re.compile(r"^\s*(```|~~~)")

CITES_OLD = re.compile(r"\bSPEC(?:\s*§|\s+\d|'s\b)")
POINTS_AT_OLD = re.compile(r"SPEC\.md|shared/SPEC")
OLD_AT_LINE_END = re.compile(r"(?:\(|\b(?:see|the|per|in|by) )SPEC\s*$")
LEFTOVERS = (
    (CITES_OLD, "cites the old SPEC"),
    (OLD_AT_LINE_END, "may cite the old SPEC across a line break"),
    (POINTS_AT_OLD, "points at the old SPEC.md"),
)
CITATION = re.compile(rf"\bcontract\s+§(?P<first>{SECTION})\b(?P<chain>(?:{JOIN}§{SECTION}\b)*)")
# A link into the contract: "(contract.md#s6-1)", "(../contract.md#s4)"; "(#s6-1)" inside it.
LINK = re.compile(r"\((?P<path>[\w./-]*contract\.md)?#(?P<anchor>[^)\s]+)\)")


def anchor(section: str) -> str:
    return "s" + section.replace(".", "-")


def contract_anchors(root: Path = ROOT) -> frozenset[str]:
    return frozenset(ANCHOR.findall((root / CONTRACT).read_text(encoding="utf-8")))


def tracked_files(root: Path = ROOT) -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, check=True, capture_output=True).stdout
    return sorted(name for name in listed.decode("utf-8").split("\0") if name)


def model_facing(path: str) -> bool:
    """An asset a model reads (its bytes are fingerprinted): never rewritten."""
    if path.startswith("sample/prompts/"):
        return True
    return path.startswith("assets/") and (path.endswith(".md") or path.endswith("_llm.v1.json")
                                          or "/judges/" in path)


def possessive(text: str) -> str:
    """"the SPEC's fields" -> "the contract's fields"."""
    return OLD_POSSESSIVE.sub(lambda m: f"{m['the'] or 'the '}contract's", text)


def sections_of(match: re.Match) -> list[str]:
    return [match["first"]] + [m["n"] for m in CHAINED.finditer(match["chain"])]


def plain(match: re.Match, anchors: frozenset[str]) -> str:
    if any(anchor(n) not in anchors for n in sections_of(match)):
        return match[0]  # an unknown section: left for --check to name
    return f"contract{match['gap']}§{match['first']}{match['chain']}"


def linked(match: re.Match, anchors: frozenset[str], target: str) -> str:
    if any(anchor(n) not in anchors for n in sections_of(match)):
        return match[0]
    rest = CHAINED.sub(lambda m: f"{m['join']}[§{m['n']}]({target}#{anchor(m['n'])})", match["chain"])
    return f"[contract{match['gap']}§{match['first']}]({target}#{anchor(match['first'])}){rest}"


def code_positions(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` inside fenced blocks or inline code spans (per line), where a link
    would not render."""
    spans, offset, fence = [], 0, None
    for line in text.splitlines(keepends=True):
        opened = FENCE.match(line)
        if fence is not None or opened:
            spans.append((offset, offset + len(line)))
            if opened and fence is None:
                fence = opened[1]
            elif opened and opened[1] == fence:
                fence = None
        else:
            ticks = [offset + m.start() for m in re.finditer(r"`+", line)]
            for start, end in zip(ticks[::2], ticks[1::2]):
                spans.append((start, end))
        offset += len(line)
    return spans


def rewrite_markdown(text: str, path: str, anchors: frozenset[str]) -> str:
    target = posixpath.relpath(CONTRACT, posixpath.dirname(path) or ".")
    text = possessive(text)
    for pattern in (OLD, PLAIN):
        code = code_positions(text)

        def one(match: re.Match) -> str:
            if any(start <= match.start() < end for start, end in code):
                return plain(match, anchors)
            return linked(match, anchors, target)

        text = pattern.sub(one, text)
    return text


def rewrite_code(text: str, anchors: frozenset[str]) -> str:
    text = possessive(text)
    return OLD.sub(lambda m: plain(m, anchors), text)


def rewrite(text: str, path: str, anchors: frozenset[str]) -> str:
    if path.endswith(".md"):
        return rewrite_markdown(text, path, anchors)
    return rewrite_code(text, anchors)


def read_text(root: Path, path: str) -> str | None:
    try:
        return (root / path).read_text(encoding="utf-8")
    except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
        return None  # binary, or listed but not checked out


def leftovers(root: Path = ROOT) -> list[str]:
    """``path:line: why: text`` for every old citation, and every citation of a missing anchor."""
    anchors = contract_anchors(root)
    found = []
    for path in tracked_files(root):
        if path in SELF:
            continue
        text = read_text(root, path)
        if text is None or ("SPEC" not in text and "contract" not in text):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            problems = [why for pattern, why in LEFTOVERS if pattern.search(line)]
            problems += [f"§{n} has no anchor in {CONTRACT}" for m in CITATION.finditer(line)
                         for n in sections_of(m) if anchor(n) not in anchors]
            problems += [f"#{m['anchor']} is not an anchor of {CONTRACT}" for m in LINK.finditer(line)
                         if m["anchor"] not in anchors and (m["path"] or path == CONTRACT)]
            found += [f"{path}:{number}: {why}: {line.strip()[:160]}" for why in problems]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; list leftovers, exit 1 if any")
    args = parser.parse_args(argv)
    if not args.check:
        anchors = contract_anchors()
        for path in tracked_files():
            if path in SELF or path == CONTRACT or model_facing(path):
                continue
            text = read_text(ROOT, path)
            if text is None:
                continue
            new = rewrite(text, path, anchors)
            if new != text:
                (ROOT / path).write_text(new, encoding="utf-8")
                print(f"rewrote {path}")
    left = leftovers()
    for line in left:
        print(line)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
