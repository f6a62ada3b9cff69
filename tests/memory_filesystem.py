"""An in-memory object store for Beam's filesystems (scheme ``memtest://``), for tests.

Like GCS or S3 it has no folders: a "folder" is a key prefix, and deleting a
path that names no object deletes every object under it. Registered with Beam
by being defined (Beam looks FileSystem subclasses up by scheme), and shared by
everything in this process (the in-process runner).
"""

from __future__ import annotations

import io
import time

from apache_beam.io.filesystem import BeamIOError, FileMetadata, FileSystem

SCHEME = "memtest"


class _Upload(io.BytesIO):
    def __init__(self, store: dict, path: str) -> None:
        super().__init__()
        self._store, self._path = store, path

    def close(self) -> None:
        if not self.closed:
            self._store[self._path] = self.getvalue()
        super().close()


class MemoryFileSystem(FileSystem):
    objects: dict[str, bytes] = {}

    @classmethod
    def scheme(cls) -> str:
        return SCHEME

    def join(self, basepath, *paths):
        return "/".join([basepath.rstrip("/"), *(p.strip("/") for p in paths)])

    def split(self, path):
        head, _, tail = path.rpartition("/")
        return head, tail

    def mkdirs(self, path):
        pass

    def has_dirs(self):
        return False

    def _list(self, dir_or_prefix):
        for path, data in sorted(self.objects.items()):
            if path.startswith(dir_or_prefix):
                yield FileMetadata(path, len(data), time.time())

    def create(self, path, mime_type="application/octet-stream", compression_type=None):
        return _Upload(self.objects, path)

    def open(self, path, mime_type="application/octet-stream", compression_type=None):
        if path not in self.objects:
            raise BeamIOError(f"no object {path}")
        return io.BytesIO(self.objects[path])

    def copy(self, source_file_names, destination_file_names):
        for src, dst in zip(source_file_names, destination_file_names):
            self.objects[dst] = self.objects[src]

    def rename(self, source_file_names, destination_file_names):
        for src, dst in zip(source_file_names, destination_file_names):
            self.objects[dst] = self.objects.pop(src)

    def exists(self, path):
        return path in self.objects

    def size(self, path):
        return len(self.objects[path])

    def last_updated(self, path):
        return time.time()

    def checksum(self, path):
        return str(len(self.objects[path]))

    def metadata(self, path):
        return FileMetadata(path, len(self.objects[path]), time.time())

    def delete(self, paths):
        for path in paths:
            if path in self.objects:
                del self.objects[path]
                continue
            under = [p for p in self.objects if p.startswith(path.rstrip("/") + "/")]
            if not under:
                raise BeamIOError("Delete operation failed", {path: IOError(f"no object {path}")})
            for p in under:
                del self.objects[p]
