"""The guards every command shares when it writes a folder: one module, so a new command gets them
by construction.

``claimed_output`` is a command's whole claim on its output folder:

1. the path is checked with its links resolved: not the root, no glob characters, not a file, not
   holding or within reach of any input (``pipelines.folders.check_output_folder``);
2. the folder is created (a name that cannot be created fails here, before any work);
3. one writer at a time: an exclusive lock inside it (local folders; see docs/reliability.md for
   object stores); a second command is refused with one line, and so is a command whose folder lies
   inside one another command writes (that command's --overwrite would move its files, or its verify
   find them unlisted), or whose --overwrite would remove a folder another command writes;
4. a folder that holds anything is refused unless ``--overwrite``, which empties it all or nothing
   and never through a link, and names on stderr what it removed that the earlier run had not
   written (a report written into the run's folder);
5. on every way out the command's temporary entries are removed and the lock released; Ctrl-C
   ends the command with one line ("interrupted: nothing committed in DIR") and exit code 130;
6. a full disk (or quota) ends it with one line ("no space left on PATH: nothing committed ...") and
   exit code 1, and what it wrote is removed: the folder is as before the command (a folder it made
   is gone; one it was given is empty, as the claim found it or ``--overwrite`` left it). Beam's
   tracebacks of the failed bundle are not printed (``runners.no_space``).

Refusals raise :class:`domain.errors.Refused` (nothing written), which the command's entry point says in
one line on stderr ("PROG: why") with exit code 1 (``pipelines.interruption.run_command``).
The options side (one declared table per command, bounds checked before any work) is
``pipelines.options``.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterable, Iterator, Mapping, Sequence

import orjson
from apache_beam.io.filesystem import BeamIOError, CompressionTypes
from apache_beam.io.filesystems import FileSystems

from domain.errors import NotariusError, Refused
from domain.run_integrity import MANIFEST_NAME, ManifestError, listed_files
from pipelines.interruption import Interruption, Terminated, interrupted, signal_came
from runners.no_space import bundle_failures_unlogged_when_out_of_space, no_space_left
from pipelines.folders import (LOCK_NAME, FolderLock, FolderLockedError, check_output_folder, empty_output_folder,
                               folder_state, locked_folder_above, remove_entries, remove_temporary_entries)
from transforms.files import is_local, list_files


def enclosing_run(folder: str) -> str | None:
    """The nearest folder above ``folder`` that holds a commit record (a run's or a comparison's
    ``manifest.json``): writing inside it would add files its verify does not expect."""
    if not is_local(folder):
        return None  # one listing per prefix level on an object store: not worth it for a warning this rare
    parent = os.path.dirname(folder)
    while parent and parent != os.path.dirname(parent):
        if os.path.isfile(os.path.join(parent, MANIFEST_NAME)):
            return parent
        parent = os.path.dirname(parent)
    return None


def _no_space(folder: str, path: str | None, committed: bool, lock: FolderLock | None,
              created: bool, keep_contents: bool) -> Refused:
    """What a command that ran out of room says, once what it wrote is removed (never after its commit
    record was written, never in a folder whose contents are the command's own business) and its lock
    released."""
    inside = path is not None and os.path.abspath(path).startswith(os.path.join(folder, ""))
    where = path if path is not None and not inside else folder
    if path is None and not is_local(folder):
        where = "a worker's disk"  # a bucket does not fill up: the room ran out where a worker wrote
    left = [] if committed or keep_contents else remove_entries(folder)
    if lock is not None:
        lock.release()
    if keep_contents:  # the demo: it has put back what it set aside
        return Refused(f"no space left on {where}; free some space and run it again")
    if committed:
        return Refused(f"no space left on {where} after the result was committed in {folder}")
    if left:
        what = f"could not remove {', '.join(left[:5])}{' ...' if len(left) > 5 else ''}"
    elif created and folder_state(folder) == "empty":
        try:
            os.rmdir(folder)
            what = "the folder is removed (this command made it)"
        except OSError:
            what = "what this command wrote there is removed"  # another command's lock file is in it now
    else:
        what = "what this command wrote there is removed"
    said = f"no space left on {where}: nothing committed" + ("" if where == folder else f" in {folder}")
    return Refused(f"{said}, {what}; free some space and run it again")


def _create(folder: str) -> bool:
    """Create a local folder (and its parents); True when it did not exist before."""
    if not is_local(folder):
        return False  # object stores have no folders: the first object makes it
    existed = os.path.isdir(folder)
    os.makedirs(folder, exist_ok=True)
    return not existed


def committed_files(folder: str) -> set[str] | None:
    """The files (relative paths) a folder's commit record says its command wrote: ``manifest.json``
    itself, every file it lists and its documents (a comparison's compare.json and compare.html); None
    when the folder holds no record that lists its files."""
    path = FileSystems.join(folder, MANIFEST_NAME)
    try:
        if not FileSystems.exists(path):
            return None
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            manifest = orjson.loads(handle.read())
        written = {MANIFEST_NAME, *listed_files(manifest)}
    except (OSError, BeamIOError, orjson.JSONDecodeError, ManifestError):
        return None  # not a record to go by (a folder of that name, altered, foreign): nothing to compare
    documents = manifest.get("documents")
    if isinstance(documents, dict):
        written |= {name for name in documents if isinstance(name, str)}
    return written


def not_written(folder: str, written: set[str]) -> list[str]:
    """What ``folder`` holds besides the files in ``written`` (relative paths), each named by its
    outermost entry that holds none of them (``notes/`` for a folder of the user's); the folder's own
    lock file left out."""
    if is_local(folder):
        present = [os.path.relpath(os.path.join(parent, name), folder)
                   for parent, folders, files in os.walk(folder, followlinks=False)
                   for name in files + [f for f in folders if os.path.islink(os.path.join(parent, f))]]
    else:
        prefix = folder.rstrip("/") + "/"
        present = [path[len(prefix):] for path in list_files(folder) if path.startswith(prefix)]
    holding = {"/".join(rel.split("/")[:n]) for rel in written for n in range(1, rel.count("/") + 1)}
    named = set()
    for rel in present:
        if rel in written or rel == LOCK_NAME:
            continue
        parts = rel.split("/")
        n = next(n for n in range(1, len(parts) + 1) if "/".join(parts[:n]) not in holding)
        named.add("/".join(parts[:n]) + ("/" if n < len(parts) else ""))
    return sorted(named)


def named_briefly(names: Sequence[str], most: int = 5) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


@contextmanager
def claimed_output(prog: str, output: str, *, inputs: Mapping[str, str | Sequence[str] | None],
                   writes: Iterable[str], overwrite: bool, remove_first: Iterable[str] = (),
                   commit_record: str | None = None, keep_contents: bool = False) -> Iterator[str]:
    """Hold ``output`` for one command; yields the real folder to write.

    ``inputs``: flag -> the pattern(s) the command reads; ``writes``: sample paths (relative) it
    writes, for the within-reach check; ``remove_first``: what ``--overwrite`` removes before the
    rest (the commit record); ``commit_record``: the file whose presence means the command's result
    is committed (said on Ctrl-C); ``keep_contents``: what the folder holds is the command's own
    business (the demo, which replaces only what it wrote), neither refused nor removed."""
    if signal_came():  # a Ctrl-C as the command started whose raise a library swallowed: touch nothing
        raise KeyboardInterrupt
    target = check_output_folder(output, dict(inputs), writes)  # OutputFolderError: refused
    folder = target.folder
    run = enclosing_run(folder)
    if run is not None:
        raise Refused(f"--output {output!r} lies inside the committed folder {run} (it holds "
                      f"{MANIFEST_NAME}): that folder would no longer verify; write outside it")
    try:
        created = _create(folder)
    except OSError as exc:
        raise Refused(f"--output {output!r} cannot be created: {exc.strerror or exc}") from None
    lock = None
    try:
        if is_local(folder):
            try:
                lock = FolderLock.acquire(folder, prog)
            except FolderLockedError as exc:
                raise Refused(f"--output {output!r} is in use: {exc}; one command writes a folder at a time") from None
            except OSError as exc:
                raise Refused(f"--output {output!r} cannot be written: {exc.strerror or exc}") from None
            above = locked_folder_above(folder)  # after taking ours: of two such commands, one sees the other
            if above is not None:
                raise Refused(f"--output {output!r} lies inside {above.folder}, which is being written "
                              f"by {above.holder}; one command writes a folder at a time") from None
        if not keep_contents:
            earlier = committed_files(folder) if overwrite and folder_state(folder) == "not-empty" else None
            extra = not_written(folder, earlier) if earlier is not None else []
            empty_output_folder(output, target, overwrite=overwrite, remove_first=remove_first)
            if extra:
                print(f"{prog}: --overwrite also removed what the earlier run in {folder} had not written: "
                      f"{named_briefly(extra)}", file=sys.stderr)
    except NotariusError:
        if lock is not None:
            lock.release()
        if created and folder_state(folder) == "empty":
            try:
                os.rmdir(folder)  # refused: as if never asked
            except OSError:
                pass  # another command's lock file is in it now: the folder is theirs
        raise
    interruption = Interruption()
    try:
        with interruption, bundle_failures_unlogged_when_out_of_space():  # said in one line below
            if signal_came():  # ... or while the folder was being made ready
                raise KeyboardInterrupt
            yield folder
            if interruption.seen:  # ... or while it ran: reported as the interruption it was
                raise KeyboardInterrupt
    except BaseException as error:
        if interruption.seen or isinstance(error, (KeyboardInterrupt, Terminated)):
            committed = commit_record is not None and FileSystems.exists(FileSystems.join(folder, commit_record))
            remove_temporary_entries(folder)
            raise interrupted(prog, folder, committed,
                              terminated=interruption.terminated or isinstance(error, Terminated)) from None
        ran_out, path = no_space_left(error)
        if not ran_out:
            raise
        committed = commit_record is not None and FileSystems.exists(FileSystems.join(folder, commit_record))
        remove_temporary_entries(folder)
        held, lock = lock, None  # released once what the command wrote is removed
        raise _no_space(folder, path, committed, held, created, keep_contents) from None
    finally:
        remove_temporary_entries(folder)
        if lock is not None:
            lock.release()


def file_to_write(flag: str, path: str) -> str:
    """A file a command is about to write (a report, a figures file): a path naming a folder is refused,
    and its folder is created; a mistake is refused (:class:`Refused`)."""
    if not is_local(path):
        return path
    if os.path.isdir(path):
        raise Refused(f"{flag} {path!r} is a folder; name the file to write")
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise Refused(f"{flag} {path!r}: its folder cannot be created ({exc.strerror or exc})") from None
    if not os.access(parent, os.W_OK):
        raise Refused(f"{flag} {path!r}: its folder is not writable")
    return path


def command_as_typed(subcommand: str = "") -> str:
    """How the user can run this tool's ``subcommand`` as printed: ``notarius-reprocess`` when that name
    on PATH is this installation's, else this Python with ``-m pipelines.cli`` (a venv not activated)."""
    import shutil

    script = shutil.which("notarius-reprocess")
    here = os.path.dirname(os.path.abspath(sys.executable))
    if script and os.path.dirname(os.path.abspath(script)) == here:
        command = "notarius-reprocess"
    else:
        python = os.path.relpath(sys.executable) if not os.path.relpath(sys.executable).startswith("..") \
            else sys.executable
        command = f"{python} -m pipelines.cli"
    return f"{command} {subcommand}".rstrip()
