"""ISA-L compression (transforms/compression.py): standard formats any reader opens, and every line before
the damage of a cut or corrupt gzip file."""

import gzip
import io
import os
import random
import tempfile
import zlib

import fastavro
from apache_beam.io import fileio
from apache_beam.io.filesystems import FileSystems
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.batch_import import UnreadableFile, read_lines
from transforms.avro_container import avro_long
from transforms.compression import decompressed, deflate_avro_block, deflate_avro_writer
from transforms.raw_records import iter_lines
from transforms.read import KeyedInput, _text_lines

SCHEMA = fastavro.parse_schema({
    "type": "record", "name": "Row", "fields": [
        {"name": "text", "type": "string"},
        {"name": "n", "type": "long"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ]})

rows = st.lists(st.fixed_dictionaries({
    "text": st.text(max_size=300),
    "n": st.integers(min_value=-2**63, max_value=2**63 - 1),
    "tags": st.lists(st.text(max_size=20), max_size=5),
}), max_size=200)


def written(records, sync_interval=None) -> bytes:
    buffer = io.BytesIO()
    writer = deflate_avro_writer(buffer, SCHEMA)
    if sync_interval is not None:
        writer.sync_interval = sync_interval
    for record in records:
        writer.write(record)
    writer.flush()
    return buffer.getvalue()


@settings(max_examples=60, deadline=None)
@given(rows, st.sampled_from([None, 64]))
def test_files_are_deflate_avro_that_fastavro_reads_back_row_for_row(records, sync_interval):
    data = written(records, sync_interval)
    reader = fastavro.reader(io.BytesIO(data))
    assert reader.codec == "deflate"
    assert list(reader) == records


@settings(max_examples=30, deadline=None)
@given(st.binary(max_size=5000))
def test_each_block_is_its_length_then_raw_deflate_as_the_avro_specification_says(block):
    # What a reader of another language does with a deflate block: read the long, inflate without a zlib header.
    buffer = io.BytesIO()
    deflate_avro_block(buffer, block, None)
    encoded = buffer.getvalue()
    length = fastavro.schemaless_reader(io.BytesIO(encoded), "long")
    data = encoded[len(avro_long(length)):]
    assert len(data) == length
    assert zlib.decompress(data, -15) == block


def test_a_file_of_many_blocks_reads_back_and_is_smaller_than_its_rows():
    records = [{"text": "Magic Missile hits the goblin. " * 20, "n": n, "tags": ["spell"]} for n in range(500)]
    data = written(records, sync_interval=2000)
    blocks = list(fastavro.block_reader(io.BytesIO(data)))
    assert len(blocks) > 1
    assert [row for block in blocks for row in block] == records
    assert len(data) < sum(len(r["text"]) for r in records) / 5


# --- a damaged gzip file gives every line before the damage (docs/reliability.md §2) -------------------------

def many_lines(seed: int, count: int) -> list[bytes]:
    """JSON-like lines of varied length and content, so that the deflate stream has many blocks."""
    rnd = random.Random(seed)
    return [b'{"source_id": "s%d", "text": "%s"}' % (n, bytes(rnd.choice(b"abcdefghij ") for _ in range(rnd.randint(0, 300))))
            for n in range(count)]


def complete_lines(data: bytes) -> list[bytes]:
    """The lines of ``data`` that end in a line break, without it."""
    return data.split(b"\n")[:-1]


def read_lines_of_the_stream(data: bytes) -> tuple[list[bytes], Exception | None]:
    """(lines, the error that ended reading): ``decompressed`` split by ``iter_lines`` (the report's reader)."""
    lines: list[bytes] = []
    try:
        with decompressed(io.BytesIO(data), "c.jsonl.gz") as stream:
            for line, oversize in iter_lines(stream, 1 << 20):
                assert not oversize
                lines.append(line)
    except Exception as error:  # noqa: BLE001 - the damage, reported by the caller
        return lines, error
    return lines, None


def _as_file(data: bytes, read) -> tuple[list[bytes], Exception | None]:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "c.jsonl.gz")
        with open(path, "wb") as handle:
            handle.write(data)
        lines: list[bytes] = []
        try:
            for line in read(path):
                lines.append(line)
        except Exception as error:  # noqa: BLE001 - the damage, reported by the caller
            return lines, error
    return lines, None


def read_as_the_job_does(data: bytes) -> tuple[list[bytes], Exception | None]:
    """The job's read step (transforms/read.py) reading a file through Beam's filesystems."""
    def read(path: str):
        [metadata] = FileSystems.match([path])[0].metadata_list
        for line in _text_lines(KeyedInput(path, "candidates", "source_id", 1 << 20), fileio.ReadableFile(metadata)):
            assert type(line) is bytes  # no line is past the limit (an Oversize)
            yield line

    return _as_file(data, read)


def read_as_import_batch_does(data: bytes) -> tuple[list[bytes], Exception | None]:
    """import-batch's reader of results files (pipelines/batch_import.py)."""
    def read(path: str):
        count = 0
        try:
            for _, line in read_lines(path):
                count += 1
                yield line
        except UnreadableFile as error:
            assert error.lines_read == count
            raise

    return _as_file(data, read)


READERS = [read_lines_of_the_stream, read_as_the_job_does, read_as_import_batch_does]


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32), count=st.integers(1, 2000), members=st.integers(1, 3), cut=st.floats(0, 1),
       reader=st.sampled_from(READERS))
def test_a_cut_gzip_gives_every_complete_line_zlib_decodes_from_the_cut_bytes(seed, count, members, cut, reader):
    lines = many_lines(seed, count)
    step = -(-count // members)
    whole = b"".join(gzip.compress(b"".join(line + b"\n" for line in lines[at:at + step]))
                     for at in range(0, count, step))  # one member per part, as `cat a.gz b.gz` makes
    kept = whole[:1 + int(cut * (len(whole) - 2))]  # one byte or more kept, one or more cut
    expected = []
    rest = kept
    while rest:  # zlib, one member at a time, as much as it decodes from the bytes that remain
        member = zlib.decompressobj(31)
        expected.append(member.decompress(rest))
        rest = member.unused_data if member.eof else b""
    read, error = reader(kept)
    assert read == complete_lines(b"".join(expected))
    assert error is not None  # the file is still reported unreadable


def test_the_last_lines_before_a_cut_near_the_end_are_read():
    # The case: ISA-L dropped the 8 KiB its last read had inflated (81 of 85 complete lines were read).
    whole = gzip.compress(b"".join(line + b"\n" for line in many_lines(7, 3000)))
    kept = whole[:-200]
    expected = complete_lines(zlib.decompressobj(31).decompress(kept))
    for reader in READERS:
        read, error = reader(kept)
        assert len(read) == len(expected) and read == expected, reader.__name__
        assert isinstance(error, EOFError) or "EOFError" in str(error)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32), count=st.integers(50, 1500), where=st.floats(0, 1), flip=st.integers(1, 255))
def test_a_corrupt_gzip_gives_every_line_zlib_decodes_before_the_damage(seed, count, where, flip):
    whole = bytearray(gzip.compress(b"".join(line + b"\n" for line in many_lines(seed, count))))
    at = 10 + int(where * (len(whole) - 19))  # inside the deflate data: the header and trailer stay as written
    whole[at] ^= flip
    member = zlib.decompressobj(31)  # zlib byte by byte: every byte it decodes before it finds the damage
    pieces, damaged = [], False
    for n in range(len(whole)):
        try:
            pieces.append(member.decompress(bytes(whole[n:n + 1])))
        except zlib.error:
            damaged = True
            break
    damaged = damaged or not member.eof
    expected = complete_lines(b"".join(pieces))
    for reader in READERS:
        read, error = reader(bytes(whole))
        assert read[:len(expected)] == expected, reader.__name__  # none lost; ISA-L may decode a little further
        if damaged:
            assert error is not None


def test_a_sound_gzip_reads_whole_in_every_reader():
    lines = many_lines(3, 5000)
    data = gzip.compress(b"".join(line + b"\n" for line in lines)) + gzip.compress(b"tail\n") + b"\0" * 20
    for reader in READERS:
        assert reader(data) == (lines + [b"tail"], None), reader.__name__
