"""Avro container mechanics done by hand (transforms/avro_container.py), checked against fastavro."""

import io

import fastavro
from hypothesis import given, settings
from hypothesis import strategies as st

from test_compression import SCHEMA, rows, written
from transforms.avro_container import avro_long, read_avro_long
from transforms.files import ROW_COUNTERS, _HashedStream


@given(st.integers(min_value=-2**63, max_value=2**63 - 1))
def test_avro_long_is_what_fastavro_encodes(n):
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, "long", n)
    assert avro_long(n) == buffer.getvalue()


@given(st.integers(min_value=-2**63, max_value=2**63 - 1))
def test_a_long_reads_back_as_written(n):
    assert read_avro_long(io.BytesIO(avro_long(n))) == n


def _count_from_headers(data: bytes):
    stream = _HashedStream(io.BytesIO(data))
    try:
        return ROW_COUNTERS["avro"](stream), stream.size
    except (ValueError, EOFError):
        return "damaged", None


def _count_by_fastavro(data: bytes):
    try:
        return sum(block.num_records for block in fastavro.block_reader(io.BytesIO(data)))
    except Exception:
        return "damaged"


@settings(max_examples=60, deadline=None)
@given(rows, st.sampled_from([None, 64, 500]), st.sampled_from(["ours", "null", "deflate"]))
def test_header_count_is_the_number_of_rows_read_without_decoding_a_block(records, sync_interval, codec):
    if codec == "ours":
        data = written(records, sync_interval)
    else:
        buffer = io.BytesIO()
        fastavro.writer(buffer, SCHEMA, records, codec=codec, sync_interval=sync_interval or 16000,
                        metadata={"note": "x" * 300})
        data = buffer.getvalue()
    assert _count_from_headers(data) == (len(records), len(data))  # every byte read (and hashed)


@settings(max_examples=60, deadline=None)
@given(rows.filter(bool), st.data())
def test_a_cut_file_counts_as_fastavro_reads_it_or_is_damaged(records, data):
    whole = written(records, 64)
    cut = data.draw(st.integers(min_value=0, max_value=len(whole) - 1))
    ours, _ = _count_from_headers(whole[:cut])
    theirs = _count_by_fastavro(whole[:cut])
    # A cut exactly after a block's sync marker leaves a shorter valid file; every other cut is damage.
    assert ours == theirs or (ours == "damaged" and theirs != "damaged" and theirs < len(records))
