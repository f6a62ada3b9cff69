#!/usr/bin/env python3
"""Beam's gRPC servers in the job server and the TaskManagers, bound to the address they are given.

Beam's Java servers (the job server's job and artifact staging services, and
the Fn API servers a TaskManager opens for each job's Python workers: control,
data, state, logging, provisioning, artifacts) are all made by one class,
``org.apache.beam.sdk.fn.server.ServerFactory$InetSocketAddressServerFactory``.
It works out the address to listen on (``localhost:8099`` from
``--job-host``/``--job-port``, or the loopback address for a free port) and then
builds the server with ``NettyServerBuilder.forPort(address.getPort())``,
which drops the host: every one of those servers listens on all interfaces,
whatever ``--job-host`` says (Beam 2.73; no flag changes it).

This module makes a copy of that one class in which that call is
``NettyServerBuilder.forAddress(address)``: the same builder, given the whole
address, so each server listens where Beam meant it to (loopback for the
free ports, ``--job-host`` for the job service). The copy is put on the
classpath before the job server jar (the kept job server, every TaskManager),
so the JVM loads it instead of the jar's. The change is three bytes of one
method's code plus a constant-pool entry for ``forAddress``; the code keeps
its length, so no offset or stack map moves, and the JVM verifies the class
as it loads it.

Standard library only. ``loopback_jar(jar, cache_dir)`` gives the jar to put
first on the classpath (None when the jar's class already binds to the host,
as a fixed Beam would); ``jar_command`` runs the job server with it;
``LoopbackPatchError`` says why no copy could be made (a jar whose class
differs from the one this module knows).
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import zipfile
from pathlib import Path

FACTORY_CLASS = "org/apache/beam/sdk/fn/server/ServerFactory$InetSocketAddressServerFactory"
_NETTY_BUILDER_SUFFIX = "/io/grpc/netty/NettyServerBuilder"  # under Beam's vendored gRPC package
_SOCKET_ADDRESS = "java/net/InetSocketAddress"

# Constant-pool tags (JVM spec 4.4) and the bytes each entry takes after its tag.
_UTF8, _CLASS, _NAME_AND_TYPE, _METHODREF = 1, 7, 12, 10
_FIXED_SIZE = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4,
               19: 2, 20: 2}
_WIDE_TAGS = (5, 6)  # long and double take two constant-pool slots
# Opcodes of the call being changed: aload_1; invokevirtual getPort; invokestatic forPort.
_ALOAD_1, _INVOKEVIRTUAL, _INVOKESTATIC, _NOP = 0x2B, 0xB6, 0xB8, 0x00


class LoopbackPatchError(RuntimeError):
    """The jar's server factory is not the one this module knows how to change."""


def _constant_pool(data: bytes) -> tuple[dict[int, tuple[int, object]], int, int]:
    """(index -> (tag, value), the pool's entry count, the offset where the pool ends)."""
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise LoopbackPatchError("not a Java class file")
    (count,) = struct.unpack_from(">H", data, 8)
    entries: dict[int, tuple[int, object]] = {}
    offset, index = 10, 1
    while index < count:
        tag = data[offset]
        offset += 1
        if tag == _UTF8:
            (length,) = struct.unpack_from(">H", data, offset)
            entries[index] = (tag, data[offset + 2: offset + 2 + length].decode("utf-8", "replace"))
            offset += 2 + length
        elif tag in _FIXED_SIZE:
            size = _FIXED_SIZE[tag]
            raw = data[offset: offset + size]
            if tag == _CLASS:
                entries[index] = (tag, struct.unpack(">H", raw)[0])
            elif tag in (_METHODREF, _NAME_AND_TYPE):
                entries[index] = (tag, struct.unpack(">HH", raw))
            offset += size
        else:
            raise LoopbackPatchError(f"unknown constant-pool tag {tag}")
        index += 2 if tag in _WIDE_TAGS else 1
    return entries, count, offset


def _methods(entries: dict[int, tuple[int, object]]) -> dict[int, tuple[str, str, str, int]]:
    """Methodref index -> (class name, method name, descriptor, class entry index)."""
    def utf8(i: object) -> str:
        return str(entries[int(i)][1])  # type: ignore[arg-type]

    found = {}
    for index, (tag, value) in entries.items():
        if tag == _METHODREF:
            class_index, nat_index = value  # type: ignore[misc]
            name_index, descriptor_index = entries[nat_index][1]  # type: ignore[misc]
            found[index] = (utf8(entries[class_index][1]), utf8(name_index), utf8(descriptor_index), class_index)
    return found


def _utf8_entry(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack(">BH", _UTF8, len(raw)) + raw


def bind_to_given_address(class_bytes: bytes) -> bytes | None:
    """The server factory class with ``forPort(address.getPort())`` replaced by ``forAddress(address)``;
    None when it already builds its servers from the whole address (nothing to change)."""
    entries, count, pool_end = _constant_pool(class_bytes)
    methods = _methods(entries)
    builders = {cls for cls, _, _, _ in methods.values() if cls.endswith(_NETTY_BUILDER_SUFFIX)}
    if len(builders) != 1:
        raise LoopbackPatchError(f"{FACTORY_CLASS} names no single NettyServerBuilder (found {sorted(builders)})")
    builder = builders.pop()
    for_port = [(i, m) for i, m in methods.items() if m[:3] == (builder, "forPort", f"(I)L{builder};")]
    get_port = [i for i, m in methods.items() if m[:3] == (_SOCKET_ADDRESS, "getPort", "()I")]
    code = class_bytes[pool_end:]
    calls = [bytes([_ALOAD_1, _INVOKEVIRTUAL, *g.to_bytes(2, "big"), _INVOKESTATIC, *f.to_bytes(2, "big")])
             for g in get_port for f, _ in for_port]
    found = [call for call in calls if call in code]
    if not found:
        if any(m[:2] == (builder, "forAddress") for m in methods.values()):
            return None  # already listens on the address it is given (a fixed Beam, or this very patch)
        raise LoopbackPatchError(f"{FACTORY_CLASS} builds its servers neither with forPort(address.getPort()) "
                                 "nor with forAddress")
    if len(found) != 1 or code.count(found[0]) != 1:
        raise LoopbackPatchError(f"{FACTORY_CLASS}: more than one forPort(address.getPort()) call")
    call = found[0]
    builder_class_index = next(m[3] for i, m in for_port if i == int.from_bytes(call[-2:], "big"))
    # Four new entries at the end of the pool: the name and descriptor of forAddress, their
    # NameAndType, and the Methodref on the builder class the class already names.
    name_index, descriptor_index, nat_index, method_index = count, count + 1, count + 2, count + 3
    added = (_utf8_entry("forAddress") + _utf8_entry(f"(Ljava/net/SocketAddress;)L{builder};")
             + struct.pack(">BHH", _NAME_AND_TYPE, name_index, descriptor_index)
             + struct.pack(">BHH", _METHODREF, builder_class_index, nat_index))
    # aload_1 stays (the address), getPort becomes three nops, forPort(int) becomes forAddress(SocketAddress).
    replacement = bytes([_ALOAD_1, _NOP, _NOP, _NOP, _INVOKESTATIC, *method_index.to_bytes(2, "big")])
    return (class_bytes[:8] + struct.pack(">H", count + 4) + class_bytes[10:pool_end] + added
            + code.replace(call, replacement))


def loopback_jar(jar: str | Path, cache_dir: Path) -> Path | None:
    """A jar holding the changed server factory of ``jar``, for the classpath before it; None when the
    jar's own class already binds to the given address. Written once per distinct class, atomically.

    A jar, not a folder: the job server ships every entry of its classpath to Flink with each job,
    and Flink accepts only jar files there."""
    try:
        with zipfile.ZipFile(jar) as archive:
            original = archive.read(f"{FACTORY_CLASS}.class")
    except KeyError:
        raise LoopbackPatchError(f"{jar} holds no {FACTORY_CLASS}") from None
    except (OSError, zipfile.BadZipFile) as e:
        raise LoopbackPatchError(f"cannot read {jar}: {e}") from None
    patched = bind_to_given_address(original)
    if patched is None:
        return None
    target = cache_dir / f"beam-loopback-{hashlib.sha256(patched).hexdigest()[:16]}.jar"
    if not target.is_file():
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cache_dir, suffix=".part", delete=False) as out:
            with zipfile.ZipFile(out, "w") as archive:
                # A fixed date: the same class gives the same jar.
                archive.writestr(zipfile.ZipInfo(f"{FACTORY_CLASS}.class", (1980, 1, 1, 0, 0, 0)), patched)
        os.replace(out.name, target)
    return target


def _manifest(jar: str | Path) -> dict[str, str]:
    """The main attributes of the jar's manifest (continuation lines joined)."""
    with zipfile.ZipFile(jar) as archive:
        text = archive.read("META-INF/MANIFEST.MF").decode("utf-8")
    attributes: dict[str, str] = {}
    name = None
    for line in text.replace("\r\n", "\n").split("\n"):
        if not line:
            break  # the main section ends at the first empty line
        if line.startswith(" ") and name is not None:
            attributes[name] += line[1:]
        elif ":" in line:
            name, value = line.split(":", 1)
            attributes[name] = value.strip()
    return attributes


def jar_command(jar: str | Path, first: Path | None) -> list[str]:
    """The ``java`` arguments that run ``jar`` as ``java -jar`` does, with ``first`` ahead of it on the
    classpath: ``-jar`` takes no classpath, so the manifest's main class and its Add-Exports and
    Add-Opens (which only ``-jar`` reads) become arguments."""
    try:
        attributes = _manifest(jar)
    except (OSError, KeyError, zipfile.BadZipFile) as e:
        raise LoopbackPatchError(f"cannot read the manifest of {jar}: {e}") from None
    main = attributes.get("Main-Class")
    if not main:
        raise LoopbackPatchError(f"{jar} names no Main-Class")
    modules = [f"--add-exports={target}=ALL-UNNAMED" for target in attributes.get("Add-Exports", "").split()]
    modules += [f"--add-opens={target}=ALL-UNNAMED" for target in attributes.get("Add-Opens", "").split()]
    classpath = os.pathsep.join([*([str(first)] if first is not None else []), str(Path(jar).resolve())])
    return [*modules, "-cp", classpath, main]
