"""The demo's folder (``out/demo``): what the demo owns in it, set aside while the demo builds its next
state, put back on every way out but completion. Nothing else in the folder is moved or removed.

The next state is built in place, not in a folder aside: the runs record their absolute folders (a
manifest's options, a comparison's runs, a report's baseline), so a state built elsewhere and moved
would name folders that are not there. The previous state moves aside instead, one rename per entry.
Every step is a rename, and the aside folder's name says how far the demo got, so a demo killed
midway (SIGKILL) leaves a state the next demo finishes or undoes before it starts:

  .demo-setting-aside-ID   the previous state moving aside: what is in it goes back
  .demo-previous-ID        building: the entries in place are the unfinished next state
  .demo-restoring-ID       putting the previous state back: the unfinished one is out of the way
  .demo-discarded-ID       completed: the previous state, to delete
  .demo-unfinished-ID      an unfinished state, to delete
"""

from __future__ import annotations

import os
import re
import shutil
import uuid

import orjson

from domain.run_integrity import MANIFEST_NAME
from pipelines.guards import committed_files, not_written
from pipelines.interruption import signals_deferred
from pipelines.folders import LOCK_NAME, STAGING_PREFIX

# The file that says a folder is the demo's and lists what the demo wrote in it; written when a demo completes.
MARK = ".notarius-demo"
# What the demo writes (relative to its folder); its own entries are these and only these.
ARCHIVE_FILES = ("transcripts.jsonl.gz", "candidates.jsonl.gz", "ground-truth.jsonl", "ground-truth-backfill.jsonl",
                 "candidates-backfill.jsonl", "verdicts-backfill.jsonl")
OWN_FOLDERS = ("run1", "backfill", "run2", "compare")
OWN_ENTRIES = (MARK, *OWN_FOLDERS, "report.html", "retry_economy.json", *(f"archive/{name}" for name in ARCHIVE_FILES))
_ASIDE = re.compile(r"\.demo-(setting-aside|previous|restoring|discarded|unfinished)-[0-9a-f]+")


def own_entries(folder: str) -> list[str]:
    """The demo's entries that ``folder`` holds (relative paths)."""
    return [rel for rel in OWN_ENTRIES if os.path.lexists(os.path.join(folder, rel))]


def _aside(root: str, state: str) -> str:
    return os.path.join(root, f".demo-{state}-{uuid.uuid4().hex}")


def _move(source_root: str, target_root: str, rel: str) -> None:
    target = os.path.join(target_root, rel)
    if os.path.lexists(target):  # a rename would replace a file (or an empty folder) without a word
        raise FileExistsError(f"{target} is in the way")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.rename(os.path.join(source_root, rel), target)


def _remove_empty(folder: str) -> None:
    """``folder`` and the empty folders under it removed (a folder still holding something stays)."""
    for parent, _, _ in os.walk(folder, topdown=False):
        try:
            os.rmdir(parent)
        except OSError:
            pass


def _move_back(root: str, aside: str) -> None:
    """Every entry of ``aside`` back in place (none of them is there), then ``aside`` gone."""
    for rel in own_entries(aside):
        _move(aside, root, rel)
    _remove_empty(aside)  # what is left: the archive/ folder of the aside layout


def _renamed(aside: str, state: str) -> str:
    renamed = _aside(os.path.dirname(aside), state)
    os.rename(aside, renamed)
    return renamed


def has_aside(root: str) -> bool:
    """Whether ``root`` holds a demo's aside folder (a demo was killed there)."""
    return any(_ASIDE.fullmatch(name) for name in os.listdir(root)) if os.path.isdir(root) else False


def recover(root: str) -> None:
    """Finish or undo what a demo killed in ``root`` left midway, so ``root`` holds the last complete
    demo (or no demo) again."""
    for name in sorted(os.listdir(root)):
        match = _ASIDE.fullmatch(name)
        if match is None:
            continue
        aside, state = os.path.join(root, name), match[1]
        if state == "setting-aside":
            _move_back(root, aside)
        elif state == "previous":
            put_back(root, aside)
        elif state == "restoring":
            _move_back(root, aside)
        else:
            shutil.rmtree(aside)


def set_aside(root: str) -> str:
    """Move the demo's entries of ``root`` into an aside folder; returns it (``.demo-previous-ID``). The
    caller defers signals around it (``signals_deferred``), so the folder is known to it when one came."""
    aside = _aside(root, "setting-aside")
    os.mkdir(aside)
    try:
        for rel in own_entries(root):
            _move(root, aside, rel)
    except OSError:
        _move_back(root, aside)  # as it was
        raise
    return _renamed(aside, "previous")


def put_back(root: str, previous: str) -> None:
    """The unfinished state out of the way, the previous state (``set_aside``'s folder) back in place."""
    unfinished = _aside(root, "unfinished")
    try:
        with signals_deferred():
            os.mkdir(unfinished)
            for rel in own_entries(root):
                _move(root, unfinished, rel)
            if not os.path.isdir(os.path.join(previous, "archive")):
                _remove_empty(os.path.join(root, "archive"))  # made by the unfinished state
            _move_back(root, _renamed(previous, "restoring"))
    finally:
        shutil.rmtree(unfinished, ignore_errors=True)  # cut short by a second signal: the next demo deletes it


def discard(root: str, previous: str) -> None:
    """The next state is complete: the previous one (``set_aside``'s folder) is deleted."""
    shutil.rmtree(_renamed(previous, "discarded"))


# --- what the demo wrote: its record, and what its folders hold besides --------------------------------

def _temporary(rel: str) -> bool:
    """A command's lock file or temporary entry (left by a killed command): never anyone's data."""
    return any(part == LOCK_NAME or part.startswith((".temp-", STAGING_PREFIX)) or part.endswith(".tmp")
               for part in rel.split("/"))


def _files(root: str, entry: str) -> list[str]:
    """The files (and links) under the entry ``entry`` of ``root``, relative to ``root``."""
    top = os.path.join(root, entry)
    if not os.path.lexists(top):
        return []
    if not os.path.isdir(top) or os.path.islink(top):
        return [entry]
    return [os.path.relpath(os.path.join(parent, name), root)
            for parent, folders, files in os.walk(top, followlinks=False)
            for name in files + [f for f in folders if os.path.islink(os.path.join(parent, f))]]


def write_record(root: str, prog: str) -> None:
    """The mark, listing every file the demo's entries hold now (all of it the demo's and its commands')."""
    files = sorted(rel for entry in own_entries(root) if entry != MARK for rel in _files(root, entry)
                   if not _temporary(rel))
    record = {"written_by": prog, "note": "a rerun of the demo replaces these files, and nothing else here",
              "files": files}
    path = os.path.join(root, MARK)
    with open(path + ".tmp", "wb") as handle:
        handle.write(orjson.dumps(record, option=orjson.OPT_INDENT_2))
    os.replace(path + ".tmp", path)


def recorded_files(root: str) -> set[str] | None:
    """The files the last complete demo wrote in ``root``; None when its mark lists none (a demo from before
    the record: its folders are replaced whole, as they were then)."""
    try:
        with open(os.path.join(root, MARK), "rb") as handle:
            record = orjson.loads(handle.read())
        files = record["files"]
    except (OSError, orjson.JSONDecodeError, TypeError, KeyError):
        return None
    return {rel for rel in files if isinstance(rel, str)} if isinstance(files, list) else None


def not_the_demos(root: str) -> list[str]:
    """What the demo's folders (run1/, backfill/, run2/, compare/) hold that neither the demo wrote (its
    record) nor a command wrote and committed there (a run's or a comparison's manifest lists it, as when
    the docs' steps rewrite a folder): the user's, which the demo must not delete. Temporary entries of
    a killed command are not anyone's data."""
    recorded = recorded_files(root)
    if recorded is None:
        return []
    written = set(recorded)
    for entry in OWN_FOLDERS:
        for parent, _, files in os.walk(os.path.join(root, entry), followlinks=False):
            if MANIFEST_NAME in files:
                base = os.path.relpath(parent, root)
                written |= {f"{base}/{rel}" for rel in committed_files(parent) or ()}
    written |= {rel for entry in OWN_FOLDERS for rel in _files(root, entry) if _temporary(rel)}
    foreign = []
    for entry in OWN_FOLDERS:
        if os.path.isdir(os.path.join(root, entry)) and not os.path.islink(os.path.join(root, entry)):
            inside = {rel[len(entry) + 1:] for rel in written if rel.startswith(entry + "/")}
            foreign += [f"{entry}/{rel}" for rel in not_written(os.path.join(root, entry), inside)]
    return foreign
