"""ISA-L compression (transforms/compression.py): standard formats any reader opens."""

import io
import zlib

import fastavro
from hypothesis import given, settings
from hypothesis import strategies as st

from transforms.avro_container import avro_long
from transforms.compression import deflate_avro_block, deflate_avro_writer

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
