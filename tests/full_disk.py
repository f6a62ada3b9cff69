"""Run one of our commands on a disk that fills up, for tests/test_guards.py.

    python tests/full_disk.py inject BYTES DIR LISTING -- MODULE ARGS...
        in this process: every file Beam's local filesystem writes shares BYTES of room; the write that
        goes past it writes what fits and fails with ENOSPC, as a full disk does (works anywhere).
    unshare -rm python tests/full_disk.py tmpfs DIR FREE_KIB LISTING -- MODULE ARGS...
        a real 3 MiB tmpfs mounted on DIR (in a mount namespace of its own) and filled until FREE_KIB are left.

Either way the command runs as ``python -m MODULE ARGS...`` would run it; this process exits with its
exit code, and LISTING receives, as JSON, the paths left under DIR (a tmpfs is gone with its namespace,
so what is left must be listed from inside).
"""

from __future__ import annotations

import errno
import json
import os
import runpy
import subprocess
import sys

TMPFS_BYTES = 3 << 20
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the project, as with -m


class _Room:
    left = 0


class _FillingFile:
    """A file being written on a disk with ``_Room.left`` bytes free."""

    def __init__(self, handle) -> None:
        self._handle = handle

    def write(self, data) -> int:
        data = bytes(data)
        if len(data) > _Room.left:
            self._handle.write(data[:_Room.left])
            _Room.left = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        _Room.left -= len(data)
        return self._handle.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._handle.close()

    def __getattr__(self, name):
        return getattr(self._handle, name)


def _inject(room: int) -> None:
    from pipelines.entry import quiet_beam_notices

    quiet_beam_notices()  # first, as a command's entry does: it drops a notice Beam logs at import

    from apache_beam.io import localfilesystem

    _Room.left = room
    opened = localfilesystem.LocalFileSystem._path_open

    def path_open(self, path, mode, *args, **kwargs):
        handle = opened(self, path, mode, *args, **kwargs)
        return _FillingFile(handle) if "w" in mode else handle

    localfilesystem.LocalFileSystem._path_open = path_open


def _mount_tmpfs(folder: str, free_kib: int) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", folder], check=True)
    stat = os.statvfs(folder)
    fill = stat.f_bavail * stat.f_frsize - free_kib * 1024
    with open(os.path.join(folder, "filler"), "wb") as handle:
        handle.write(b"\0" * fill)


def _left_under(folder: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(parent, name), folder)
                  for parent, folders, files in os.walk(folder) for name in folders + files if name != "filler")


def main(argv: list[str]) -> int:
    separator = argv.index("--")
    mode, options, (module, *args) = argv[0], argv[1:separator], argv[separator + 1:]
    if mode == "inject":
        room, folder, listing = int(options[0]), options[1], options[2]
        _inject(room)
    else:
        folder, free_kib, listing = options[0], int(options[1]), options[2]
        _mount_tmpfs(folder, free_kib)
    sys.argv = [module, *args]
    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        if isinstance(exit_.code, str):
            print(exit_.code, file=sys.stderr)
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        with open(listing, "w") as handle:
            json.dump(_left_under(folder), handle)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
