"""The output folder of a command: its state, its lock, how it is emptied and what it may be.

The policy ``pipelines.guards.claimed_output`` applies to every command's --output: one writer per local
folder (an exclusive lock file inside it, ``FolderLock``; a folder inside one another command writes is
refused), a folder's state with the lock ignored, ``--overwrite`` emptying it all or nothing and never
through a link, and the check of the path itself (``check_output_folder``: not the root, no glob
characters, not a file, out of reach of every input). The filesystem helpers it builds on (listing,
patterns, file facts) are ``transforms.files``.
"""

from __future__ import annotations

import os
import shutil
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from domain.errors import NotariusError
from transforms.files import (GLOB_CHARACTERS, absolute_pattern, is_filesystem_root, is_local, list_files,
                              matching_files, normalized_folder, pattern_regex, resolved_folder, resolved_pattern)

# A command's lock file inside the folder it writes (FolderLock); never part of what the folder holds.
LOCK_NAME = ".notarius.lock"


def folder_state(folder: str) -> str:
    """``absent``, ``empty``, ``not-empty`` or ``file`` (the path names a file). A folder holding only
    a command's lock file is empty."""
    if is_local(folder):
        if not os.path.lexists(folder):
            parent = os.path.dirname(folder)
            while not os.path.lexists(parent):
                parent = os.path.dirname(parent)
            return "absent" if os.path.isdir(parent) else "file"
        if not os.path.isdir(folder):
            return "file"
        return "not-empty" if set(os.listdir(folder)) - {LOCK_NAME} else "empty"
    if FileSystems.exists(folder):  # an object under the folder's own name
        return "file"
    return "not-empty" if list_files(folder) else "absent"


def _unremovable(folder: str) -> str | None:
    """A folder under ``folder`` (itself included, links not followed) whose entries we may not remove."""
    for parent, _, _ in os.walk(folder, followlinks=False):
        if not os.access(parent, os.W_OK | os.X_OK):
            return parent
    return None


# Where --overwrite moves a folder's earlier contents before deleting them (inside the folder: one rename each).
STAGING_PREFIX = ".overwritten-"


def remove_folder_contents(folder: str, first: Iterable[str] = ()) -> None:
    """Remove everything under ``folder`` (never anything outside it, never through a link); the paths in
    ``first`` go first.

    Locally: a folder whose entries we may not remove, or a folder inside that a command is writing (it
    holds its lock: FolderLockedError), is found before anything moves (then nothing is removed); the
    inner folders' locks are held until the end, so no command starts in one meanwhile; every entry is renamed into one staging folder inside ``folder`` (``first`` first: a crash
    in between leaves no manifest behind) and the staging folder is deleted. A rename that fails puts
    the moved entries back; a deletion the system refuses past the permission check (an immutable
    file, another user's entry in a sticky folder) puts what remains back in place and raises. Names
    are used as they are, never as patterns (an entry may be called ``[ab]``)."""
    if not is_local(folder):
        for path in first:
            if FileSystems.exists(path):
                FileSystems.delete([path])
        prefix = folder.rstrip("/") + "/"
        inside = [path for path in list_files(folder) if path.startswith(prefix)]
        if inside:
            FileSystems.delete(inside)
        return
    blocked = _unremovable(folder)
    if blocked is not None:
        raise OSError(f"no permission to remove what {blocked} holds; nothing was removed")
    first_names = [os.path.relpath(path, folder) for path in first]
    names = [n for n in first_names if "/" not in n and os.path.lexists(os.path.join(folder, n))]
    names += sorted(set(os.listdir(folder)) - set(names) - {LOCK_NAME})
    if not names:
        return
    with inner_locks_held(folder):  # a folder inside that a command is writing is refused, not moved
        _move_and_delete(folder, names)


def _move_and_delete(folder: str, names: list[str]) -> None:
    staging = os.path.join(folder, f"{STAGING_PREFIX}{uuid.uuid4().hex}")
    os.mkdir(staging)
    moved: list[str] = []
    try:
        for name in names:
            os.rename(os.path.join(folder, name), os.path.join(staging, name))
            moved.append(name)
    except OSError:
        for name in reversed(moved):  # as it was
            os.rename(os.path.join(staging, name), os.path.join(folder, name))
        os.rmdir(staging)
        raise
    try:
        shutil.rmtree(staging)  # unlinks links, never follows them
    except OSError as exc:
        # Refused by the system past the permission check (an immutable file, a sticky folder of another
        # user's): what remains goes back in place, so the folder shows what is left, nothing hidden.
        for name in os.listdir(staging):
            os.rename(os.path.join(staging, name), os.path.join(folder, name))
        os.rmdir(staging)
        raise OSError(f"{exc.strerror or exc} ({exc.filename}); the entries that could not be removed are back in "
                      f"place, the others are gone") from None


def remove_temporary_entries(folder: str) -> list[str]:
    """Remove what a command leaves only while it runs (writers' ``.temp-*`` folders, half-written
    ``*.tmp`` documents, overwrite staging) at the top of ``folder``; returns their names."""
    if not is_local(folder) or not os.path.isdir(folder):
        return []
    removed = []
    for name in sorted(os.listdir(folder)):
        if not (name.startswith((".temp-", STAGING_PREFIX)) or name.endswith(".tmp")):
            continue
        path = os.path.join(folder, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed.append(name)
        except OSError:
            pass  # a leftover that cannot go is no part of the outputs (verify reads part-* files only)
    return removed


def remove_entries(folder: str) -> list[str]:
    """Remove every entry of ``folder`` but its lock file, each in place (a full disk may have no room for the
    staging folder ``remove_folder_contents`` makes), never through a link; returns the names that could not
    be removed. On an object store: every object under the folder's prefix."""
    if not is_local(folder):
        prefix = folder.rstrip("/") + "/"
        inside = [path for path in list_files(folder) if path.startswith(prefix)]
        try:
            if inside:
                FileSystems.delete(inside)
        except Exception:  # noqa: BLE001 - BeamIOError naming what failed: what is still there is said
            return sorted(path[len(prefix):] for path in list_files(folder) if path.startswith(prefix))
        return []
    left = []
    for name in sorted(set(os.listdir(folder)) - {LOCK_NAME}):
        path = os.path.join(folder, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)  # unlinks links, never follows them
            else:
                os.unlink(path)
        except OSError:
            left.append(name)
    return left


class FolderLockedError(NotariusError, OSError):
    """Another command holds a folder's lock."""

    def __init__(self, folder: str, holder: str) -> None:
        super().__init__(f"{folder} is being written by {holder}")
        self.folder = folder
        self.holder = holder


def _lock_or_refuse(fd: int, folder: str) -> None:
    """An exclusive lock on ``fd`` at once, or the folder refused naming its holder (``fd`` closed)."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder_named(fd)
        os.close(fd)
        raise FolderLockedError(folder, holder) from None


def _holder_named(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, 512).decode("utf-8", "replace").strip() or "another command"


class FolderLock:
    """One writer per local folder: an exclusive ``flock`` on ``LOCK_NAME`` inside it, held for the
    whole command. The kernel releases it when the process ends, however it ends, so a killed run
    leaves no stale lock (only the lock file, which every check ignores)."""

    # The lock files this process holds, as (device, inode): a folder inside one of them may be written
    # by this process (the demo runs its commands into its own folder), never by another.
    _held: set[tuple[int, int]] = set()

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.fd = fd

    @classmethod
    def acquire(cls, folder: str, holder: str) -> "FolderLock":
        path = os.path.join(folder, LOCK_NAME)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            _lock_or_refuse(fd, folder)
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # the holder removed the file as we waited: lock the one now there
        lock = cls(path, fd)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{holder} (pid {os.getpid()})\n".encode("utf-8"))
        except OSError:
            lock.release()  # a full disk has no room for the holder's name: no lock file is left behind
            raise
        stat = os.fstat(fd)
        cls._held.add((stat.st_dev, stat.st_ino))
        return lock

    def release(self) -> None:
        stat = os.fstat(self.fd)
        self._held.discard((stat.st_dev, stat.st_ino))
        try:
            if os.path.samestat(stat, os.stat(self.path)):
                os.unlink(self.path)  # while still locked: the next writer never locks a removed file
        except OSError:
            pass
        os.close(self.fd)


def lock_holder(folder: str) -> str | None:
    """Who holds ``folder``'s lock when another command does (what it wrote in the lock file); None when
    nobody does, or this process (a ``FolderLock`` of ours).

    The probe is a shared lock taken and dropped at once: a command taking the folder's lock in that
    instant is refused as if it were held, which only happens between two commands that would conflict."""
    import fcntl

    try:
        fd = os.open(os.path.join(folder, LOCK_NAME), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None  # no lock file: nobody writes it
    try:
        stat = os.fstat(fd)
        if (stat.st_dev, stat.st_ino) in FolderLock._held:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder_named(fd)
        return None
    finally:
        os.close(fd)  # drops the probe's lock


def locked_folder_above(folder: str) -> FolderLockedError | None:
    """The nearest folder above local ``folder`` that another command is writing (it holds its lock):
    what is written inside it would be moved or removed by that command's --overwrite, or land among its
    outputs unlisted."""
    parent = os.path.dirname(folder)
    while parent != os.path.dirname(parent):
        holder = lock_holder(parent)
        if holder is not None:
            return FolderLockedError(parent, holder)
        parent = os.path.dirname(parent)
    return None


@contextmanager
def inner_locks_held(folder: str) -> Iterator[None]:
    """Hold the lock of every folder under local ``folder`` (not its own, links not followed) while the
    block runs, so no command starts writing one of them meanwhile; FolderLockedError, nothing held,
    when one is being written (by another command, or by this process under another claim)."""
    held: list[int] = []
    try:
        for parent, _, names in os.walk(folder, followlinks=False):
            if parent == folder or LOCK_NAME not in names:
                continue
            try:
                fd = os.open(os.path.join(parent, LOCK_NAME), os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue  # gone meanwhile (its holder ended), or a link: no lock of ours
            _lock_or_refuse(fd, parent)
            held.append(fd)
        yield
    finally:
        for fd in held:
            os.close(fd)


def pattern_reaches(pattern: str, path: str) -> bool:
    """Would ``FileSystems.match([pattern])`` return a file at ``path``? (Beam's own pattern syntax:
    ``*`` stays within a folder, ``**`` crosses folders.)"""
    if pattern.endswith("/"):
        pattern += "*"  # as FileSystems.match reads it
    return pattern_regex(pattern).match(path) is not None


class OutputFolderError(NotariusError, ValueError):
    """An output folder a job must not write into; its text is the one line shown to the operator."""


@dataclass(frozen=True)
class OutputTarget:
    """An output folder that passed the checks: the real folder to write, and whether the path given
    reaches it through a link."""

    folder: str
    through_link: bool


def check_output_folder(output: str, input_patterns: dict[str, str | Sequence[str] | None],
                        sample_outputs: Iterable[str]) -> OutputTarget:
    """Refuse a folder a command must not write into; nothing is created or removed here.

    Refused: the filesystem (or bucket) root; glob characters in the path (Beam's writers match their
    own temporary files with it); a path that names a file; a folder that is, holds or is within reach
    of an input (``sample_outputs``: paths relative to the folder that the command writes). Paths and
    patterns are compared with their links resolved, so no link leads around the check."""
    given = normalized_folder(output)
    folder = resolved_folder(output)
    for path in (given, folder):
        if is_filesystem_root(path):
            raise OutputFolderError(f"--output {output!r} is the root of its filesystem; name a folder for this run")
        bad = sorted({ch for ch in path if ch in GLOB_CHARACTERS})
        if bad:
            raise OutputFolderError(f"--output {output!r} contains {' '.join(bad)}: Beam reads those as a file "
                                    f"pattern; choose a folder name without them")
    if folder_state(folder) == "file":
        raise OutputFolderError(f"--output {output!r} is a file, not a folder")
    # Compared both as given and with links resolved: an input read through a link inside the folder
    # is inside it as far as --overwrite is concerned (it would remove the link), wherever the link leads.
    folders = {folder, given} if is_local(output) else {folder}
    prefixes = tuple(f.rstrip("/") + "/" for f in folders)
    sample_outputs = list(sample_outputs)
    for flag, patterns in sorted(input_patterns.items()):
        for pattern in ([patterns] if isinstance(patterns, str) else list(patterns or ())):
            if not pattern:
                continue
            as_given = matching_files(absolute_pattern(pattern))
            matched = as_given + [resolved_folder(path) for path in as_given]
            inside = [path for path in matched if path in folders or path.startswith(prefixes)]
            if inside:
                raise OutputFolderError(f"--output {output!r} holds input files of {flag} ({inside[0]}); write the "
                                        f"outputs to a folder of their own")
            reached = [rel for rel in sample_outputs for candidate_pattern in {resolved_pattern(pattern),
                                                                                absolute_pattern(pattern)}
                       for candidate_folder in folders
                       if pattern_reaches(candidate_pattern, FileSystems.join(candidate_folder, rel))]
            if reached:
                raise OutputFolderError(f"--output {output!r} is within reach of {flag} {pattern!r} (it would "
                                        f"match {reached[0]}): the next run would read this run's outputs as "
                                        f"input; write outside the input folders")
    return OutputTarget(folder, through_link=is_local(output) and folder != given)


def empty_output_folder(output: str, target: OutputTarget, *, overwrite: bool,
                        remove_first: Iterable[str] = ()) -> None:
    """A folder that holds anything is refused, unless ``overwrite``: then it is emptied (all or nothing,
    ``remove_first`` relative paths before the rest), never through a link."""
    if folder_state(target.folder) != "not-empty":
        return
    if not overwrite:
        raise OutputFolderError(f"--output {output!r} already holds files (an earlier run?); choose an empty "
                                f"folder, or pass --overwrite to replace its contents")
    if target.through_link:
        raise OutputFolderError(f"--output {output!r} leads through a link to {target.folder}; --overwrite never "
                                f"deletes through a link: name {target.folder} itself")
    try:
        remove_folder_contents(target.folder, [FileSystems.join(target.folder, rel) for rel in remove_first])
    except FolderLockedError as exc:
        raise OutputFolderError(f"--output {output!r} holds {exc.folder}, which is being written by {exc.holder}; "
                                f"--overwrite removed nothing: wait for that command to end") from None
    except (OSError, BeamIOError) as exc:
        raise OutputFolderError(f"--overwrite could not empty {output!r}: {exc}") from None
