"""The guards every command shares when it writes a folder: one module, so a new command gets them
by construction.

``claimed_output`` is a command's whole claim on its output folder:

1. the path is checked with its links resolved: not the root, no glob characters, not a file, not
   holding or within reach of any input (``transforms.files.check_output_folder``);
2. the folder is created (a name that cannot be created fails here, before any work);
3. one writer at a time: an exclusive lock inside it (local folders; see docs/reliability.md for
   object stores); a second command is refused with one line;
4. a folder that holds anything is refused unless ``--overwrite``, which empties it all or nothing
   and never through a link;
5. on every way out the command's temporary entries are removed and the lock released; Ctrl-C
   ends the command with one line ("interrupted: nothing committed in DIR") and exit code 130.

Refusals end the command with one line on stderr ("PROG: why") and exit code 1, nothing written.
The options side (one declared table per command, bounds checked before any work) is
``pipelines.options``.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterable, Iterator, Mapping, Sequence

from apache_beam.io.filesystems import FileSystems

from domain.run_integrity import MANIFEST_NAME
from pipelines.interruption import Interruption, Terminated, interrupted
from transforms.files import (FolderLock, FolderLockedError, OutputFolderError, check_output_folder,
                              empty_output_folder, folder_state, is_local, remove_temporary_entries)

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


def _create(folder: str) -> bool:
    """Create a local folder (and its parents); True when it did not exist before."""
    if not is_local(folder):
        return False  # object stores have no folders: the first object makes it
    existed = os.path.isdir(folder)
    os.makedirs(folder, exist_ok=True)
    return not existed


@contextmanager
def claimed_output(prog: str, output: str, *, inputs: Mapping[str, str | Sequence[str] | None],
                   writes: Iterable[str], overwrite: bool, remove_first: Iterable[str] = (),
                   commit_record: str | None = None) -> Iterator[str]:
    """Hold ``output`` for one command; yields the real folder to write.

    ``inputs``: flag -> the pattern(s) the command reads; ``writes``: sample paths (relative) it
    writes, for the within-reach check; ``remove_first``: what ``--overwrite`` removes before the
    rest (the commit record); ``commit_record``: the file whose presence means the command's result
    is committed (said on Ctrl-C)."""
    try:
        target = check_output_folder(output, dict(inputs), writes)
    except OutputFolderError as exc:
        raise SystemExit(f"{prog}: {exc}") from None
    folder = target.folder
    run = enclosing_run(folder)
    if run is not None:
        raise SystemExit(f"{prog}: --output {output!r} lies inside the committed folder {run} (it holds "
                         f"{MANIFEST_NAME}): that folder would no longer verify; write outside it")
    try:
        created = _create(folder)
    except OSError as exc:
        raise SystemExit(f"{prog}: --output {output!r} cannot be created: {exc.strerror or exc}") from None
    lock = None
    try:
        if is_local(folder):
            try:
                lock = FolderLock.acquire(folder, prog)
            except FolderLockedError as exc:
                raise SystemExit(f"{prog}: --output {output!r} is in use: {exc}; one command writes a folder "
                                 f"at a time") from None
            except OSError as exc:
                raise SystemExit(f"{prog}: --output {output!r} cannot be written: {exc.strerror or exc}") from None
        try:
            empty_output_folder(output, target, overwrite=overwrite, remove_first=remove_first)
        except OutputFolderError as exc:
            raise SystemExit(f"{prog}: {exc}") from None
    except SystemExit:
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
        with interruption:
            yield folder
    except BaseException as error:
        if not (interruption.seen or isinstance(error, (KeyboardInterrupt, Terminated))):
            raise
        committed = commit_record is not None and FileSystems.exists(FileSystems.join(folder, commit_record))
        remove_temporary_entries(folder)
        raise interrupted(prog, folder, committed,
                          terminated=interruption.terminated or isinstance(error, Terminated)) from None
    finally:
        remove_temporary_entries(folder)
        if lock is not None:
            lock.release()


def file_to_write(prog: str, flag: str, path: str) -> str:
    """A file a command is about to write (a report, a figures file): a path naming a folder is refused,
    and its folder is created; a mistake ends the command with one line."""
    if not is_local(path):
        return path
    if os.path.isdir(path):
        raise SystemExit(f"{prog}: {flag} {path!r} is a folder; name the file to write")
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise SystemExit(f"{prog}: {flag} {path!r}: its folder cannot be created ({exc.strerror or exc})") from None
    if not os.access(parent, os.W_OK):
        raise SystemExit(f"{prog}: {flag} {path!r}: its folder is not writable")
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
