"""Each composite PTransform on small data, with TestPipeline and assert_that (no D&D here)."""

import gzip
import io

import apache_beam as beam
import fastavro
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from output_reader import read_rows
from transforms.process import BLOCKS, COUNTS, JoinAndApply, SumCounts, rider, summed_counts
from transforms.read import COUNTS as READ_COUNTS
from transforms.raw_records import (OVERSIZE_PAYLOAD_HEAD, UTF8_BOM, Blocks, Oversize, avro_record_to_json,
                                    decode_block, encode_block, key_record, split_lines)
from transforms.read import DEAD, KEYED, KeyedInput, ReadKeyedInputs
from transforms.write import OutputSpec, WriteOutputs, arrow_schema

OPTIONS = PipelineOptions(["--runner=FnApiRunner"])


def test_read_keyed_inputs_keys_counts_and_dead_letters(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(b'{"k": "s1", "v": 1}\r\n\n{"k": "s2"}\nnot json\n')
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(b'{"k": "s1", "v": 2}\n{"v": 3}\n' + b"x" * 200 + b"\n"))
    (tmp_path / "c.jsonl").write_bytes(b"")
    with TestPipeline(options=OPTIONS) as p:
        read = p | ReadKeyedInputs((KeyedInput(str(tmp_path / "*"), "candidates", "k", 100),))
        keyed = read[KEYED] | beam.FlatMap(lambda kv: [(kv[0], kv[1][0], line) for line in decode_block(kv[1][1])])
        assert_that(keyed, equal_to([("s1", "candidates", b'{"k": "s1", "v": 1}'), ("s2", "candidates", b'{"k": "s2"}'),
                                     ("s1", "candidates", b'{"k": "s1", "v": 2}')]), label="keyed")
        reasons = read[DEAD] | beam.FlatMap(lambda rows: [r["reason"].split(" (")[0] for r in rows])
        assert_that(reasons, equal_to(["record is not valid JSON", "record is missing a string 'k'",
                                       "record exceeds --max-record-bytes"]), label="dead")
        totals = read[READ_COUNTS] | beam.CombineGlobally(SumCounts())
        assert_that(totals, equal_to([{"blank_lines/candidates": 1, "candidates_in": 6,
                                       "dead_letters/candidates": 3}]), label="counts")


def test_several_inputs_are_read_in_one_step_each_record_named_by_its_input(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "c").mkdir()
    (tmp_path / "t" / "a.jsonl").write_bytes(b'{"id": "s1", "t": 1}\n{"id": "s2", "t": 2}\n')
    (tmp_path / "c" / "a.jsonl").write_bytes(b'{"src": "s1", "c": 1}\n{"c": 2}\n')
    (tmp_path / "c" / "b.jsonl.gz").write_bytes(gzip.compress(b'{"src": "s1", "c": 3}\n\n'))
    inputs = (KeyedInput(str(tmp_path / "t" / "*"), "transcripts", "id", 100),
              KeyedInput(str(tmp_path / "c" / "*"), "candidates", "src", 100),
              KeyedInput(str(tmp_path / "none" / "*"), "registries", "id", 100))
    with TestPipeline(options=OPTIONS) as p:
        read = p | ReadKeyedInputs(inputs)
        keyed = read[KEYED] | beam.FlatMap(lambda kv: [(kv[0], kv[1][0], line) for line in decode_block(kv[1][1])])
        assert_that(keyed, equal_to([("s1", "transcripts", b'{"id": "s1", "t": 1}'),
                                     ("s2", "transcripts", b'{"id": "s2", "t": 2}'),
                                     ("s1", "candidates", b'{"src": "s1", "c": 1}'),
                                     ("s1", "candidates", b'{"src": "s1", "c": 3}')]), label="keyed")
        dead = read[DEAD] | beam.FlatMap(lambda rows: [(r["input"], r["reason"]) for r in rows])
        assert_that(dead, equal_to([("candidates", "record is missing a string 'src'")]), label="dead")
        totals = read[READ_COUNTS] | beam.CombineGlobally(SumCounts())
        assert_that(totals, equal_to([{"transcripts_in": 2, "dead_letters/transcripts": 0, "blank_lines/transcripts": 0,
                                       "candidates_in": 3, "dead_letters/candidates": 1,
                                       "blank_lines/candidates": 1}]), label="counts")


def test_inputs_read_together_need_distinct_names():
    with pytest.raises(ValueError, match="distinct"):
        ReadKeyedInputs((KeyedInput("a*", "x", "k", 10), KeyedInput("b*", "x", "k", 10)))


def test_key_record_keys_a_line_or_says_why_not_without_beam():
    line = b'{"source_id": "s1", "text": "x"}'
    assert key_record(line, "candidates", "source_id", 100) == ("s1", line)
    reasons = {
        b"\xff{}": "record is not valid UTF-8 text",
        b'{"source_id": ': "record is not valid JSON (unexpected end of data at character 14)",
        b"[1]": "record is not a JSON object",
        b'{"x": 1}': "record is missing a string 'source_id'",
        b'{"source_id": " "}': "record is missing a string 'source_id'",
        b'{"source_id": "s1", "pad": "' + b"x" * 200 + b'"}': "record exceeds --max-record-bytes (100 bytes)",
    }
    for bad, reason in reasons.items():
        row = key_record(bad, "candidates", "source_id", 100)
        assert row["input"] == "candidates" and row["reason"] == reason, bad
    huge = b"x" * (OVERSIZE_PAYLOAD_HEAD + 10)
    assert key_record(huge, "candidates", "source_id", 100)["payload"] == "x" * OVERSIZE_PAYLOAD_HEAD


def test_split_lines_gives_records_an_oversize_head_and_drops_only_the_files_byte_order_mark():
    def split(data: bytes, limit: int, drop_bom: bool = True) -> list:
        return [("oversize", line.head) if type(line) is Oversize else line
                for line in split_lines(io.BytesIO(data), limit, drop_bom)]

    assert split(UTF8_BOM + b"ab\r\n\ncd\n" + UTF8_BOM + b"ef", 8) == [b"ab", b"", b"cd", UTF8_BOM + b"ef"]
    assert split(UTF8_BOM + b"ab\n", 8, drop_bom=False) == [UTF8_BOM + b"ab"]
    # The mark counts toward the first line's length; an oversize first line loses it from its head too.
    assert split(UTF8_BOM + b"abcdef\nxy\n", 8) == [("oversize", b"abcdef"), b"xy"]
    assert split(UTF8_BOM + b"abcde\nxy\n", 8) == [b"abcde", b"xy"]
    assert split(b"0123456789" * 3 + b"\nxy", 8) == [("oversize", b"012345678"), b"xy"]


def test_blocks_flush_past_their_budget_and_round_trip():
    blocks = Blocks(budget=6)
    assert not blocks.add("a", b"12") and not blocks.add("b", b"3") and blocks.add("a", b"456")
    assert {key: decode_block(block) for key, block in blocks.flush()} == {"a": [b"12", b"456"], "b": [b"3"]}
    assert blocks.flush() == [] and blocks.size == 0


def test_an_avro_line_held_costs_its_length_not_the_encoders_buffer():
    # Lines wait in a file's blocks, budgeted by their length: each must hold no more memory than that
    # (orjson's own result keeps a buffer of 4 KiB and more; 376 MB for ~15 MB of lines in compare).
    import tracemalloc

    records = [{"source_id": f"s{n}", "text": "x" * (n % 3000)} for n in range(400)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        lines = [avro_record_to_json(record) for record in records]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert lines[7] == b'{"source_id":"s7","text":"xxxxxxx"}'
    length = sum(map(len, lines))
    assert held < length + 100 * len(lines) + 8192, (held, length)


def _memory_held(make):
    """(what ``make()`` returned, the bytes of Python memory it still holds once returned)."""
    import tracemalloc

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        made = make()
        return made, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_a_parquet_line_held_costs_its_length_not_the_encoders_buffer(tmp_path):
    # As Avro's: a Parquet file's rows, read as JSON lines, wait in its blocks.
    import pyarrow as pa
    import pyarrow.parquet as pq
    from apache_beam.io import fileio
    from apache_beam.io.filesystem import FileMetadata

    from transforms.read import _parquet_lines

    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist([{"source_id": f"s{n}", "text": "x" * (n % 3000)} for n in range(400)]),
                   path)
    readable = fileio.ReadableFile(FileMetadata(str(path), path.stat().st_size))
    spec = KeyedInput(str(path), "rows", "source_id", 1 << 20)
    lines, held = _memory_held(lambda: list(_parquet_lines(spec, readable)))
    assert lines[7] == b'{"source_id":"s7","text":"xxxxxxx"}'
    length = sum(map(len, lines))
    assert held < length + 100 * len(lines) + 8192, (held, length)


def test_an_avro_dead_letters_payload_held_costs_its_length():
    # Dead letters wait in blocks of DEAD_BLOCK_ROWS rows, each with its record's payload.
    from transforms.raw_records import avro_payload

    records = [{"source_id": f"s{n}", "text": b"\xff" * (n % 3000)} for n in range(400)]
    payloads, held = _memory_held(lambda: [avro_payload(record) for record in records])
    assert payloads[1] == b'{"source_id":"s1","text":{"base64":"/w=="}}'
    length = sum(map(len, payloads))
    assert held < length + 100 * len(payloads) + 8192, (held, length)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=40))
def test_a_block_gives_back_exactly_its_records(records):
    # Any bytes, line breaks and empty records included: a block frames records by length.
    block = encode_block(records)
    assert isinstance(block, bytes) and decode_block(block) == records
    assert all(type(record) is bytes for record in decode_block(block))


def test_join_and_apply_calls_fn_once_per_key_with_every_input():
    def fn(key, groups):
        rows = [{"key": key, "a": sorted(groups.get("a", [])), "b": sorted(groups.get("b", []))}]
        return {"rows": rows}, {"keys": 1}

    with TestPipeline(options=OPTIONS) as p:
        keyed = p | beam.Create([("k1", ("a", encode_block([b"1"]))), ("k2", ("a", encode_block([b"3"]))),
                                 ("k1", ("b", encode_block([b"x"]))), ("k1", ("a", encode_block([b"2"])))])
        out = keyed | JoinAndApply(fn, ("rows",))
        # One (label, block) element per key and label: the block whole, as fn returned it.
        assert_that(out[BLOCKS], equal_to([("rows", [{"key": "k1", "a": [b"1", b"2"], "b": [b"x"]}]),
                                           ("rows", [{"key": "k2", "a": [b"3"], "b": []}])]), label="rows")
        assert_that(out[COUNTS] | beam.CombineGlobally(SumCounts()), equal_to([{"keys": 2}]), label="counts")


def test_summed_counts_is_what_sum_counts_gives():
    # The manifest step adds up a list of counts (one dict per bundle) with summed_counts; other
    # steps combine with SumCounts: the same totals, in the same (sorted) order.
    many = [{"b": 2, "a": 1}, {}, {"c": 5, "a": 3}]
    combine = SumCounts()
    acc = combine.merge_accumulators([combine.add_input(combine.create_accumulator(), c) for c in many])
    assert list(summed_counts(many).items()) == list(combine.extract_output(acc).items()) == [("a", 4), ("b", 2),
                                                                                            ("c", 5)]
    assert summed_counts([]) == {}


def test_read_for_a_join_sends_dead_letters_and_counts_through_it_as_riders(tmp_path):
    # One collection out of the read step; the join hands its dead letters and counts on untouched,
    # and a record whose key is the riders' marker is still an ordinary record.
    (tmp_path / "a.jsonl").write_bytes(b'{"k": "s1"}\nnot json\n{"k": "rider"}\n\n')
    (tmp_path / "b.jsonl").write_bytes(b'{"k": "s1"}\n{"v": 1}\n')
    calls = []

    def fn(key, groups):
        calls.append(key)
        return {"rows": [{"key": key, "n": len(groups["candidates"])}]}, {"sources": 1}

    with TestPipeline(options=OPTIONS) as p:
        read = p | ReadKeyedInputs((KeyedInput(str(tmp_path / "*"), "candidates", "k", 100),),
                                   dead_letters_label="dead")
        out = read | JoinAndApply(fn, ("rows", "dead"))
        rows = out[BLOCKS] | beam.FlatMap(lambda block: [(block[0], r.get("key"), r.get("n"),
                                                          r.get("reason", "").split(" (")[0] or None)
                                                         for r in block[1]])
        assert_that(rows, equal_to([("rows", "s1", 2, None), ("rows", "rider", 1, None),
                                    ("dead", None, None, "record is not valid JSON"),
                                    ("dead", None, None, "record is missing a string 'k'")]), label="rows")
        totals = out[COUNTS] | beam.CombineGlobally(SumCounts())
        assert_that(totals, equal_to([{"blank_lines/candidates": 1, "candidates_in": 5,
                                       "dead_letters/candidates": 2, "sources": 2}]), label="counts")


def test_a_rider_with_an_undeclared_label_is_refused():
    with pytest.raises(Exception, match="not one of"):
        with TestPipeline(options=OPTIONS) as p:
            _ = p | beam.Create([rider(("f", 1), BLOCKS, ("other", [{"x": 1}]))]) | JoinAndApply(
                lambda key, groups: ({}, {}), ("rows",))


def test_join_and_apply_refuses_an_undeclared_output():
    with pytest.raises(Exception, match="not one of"):
        with TestPipeline(options=OPTIONS) as p:
            keyed = p | beam.Create([("k", ("a", encode_block([b"1"])))])
            _ = keyed | JoinAndApply(lambda key, groups: ({"other": [{"x": 1}]}, {}), ("rows",))


@pytest.mark.parametrize("fmt", ["jsonl", "avro", "parquet"])
def test_write_outputs_writes_every_labelled_folder_in_one_step(tmp_path, fmt):
    avro = {"type": "record", "name": "Row", "fields": [{"name": "family", "type": "string"},
                                                       {"name": "n", "type": "long"}]}
    schema = {"avro": avro, "jsonl": None,
              "parquet": arrow_schema({"fields": [{"name": "family", "type": "string", "nullable": False},
                                                  {"name": "n", "type": "int64", "nullable": False}]})}[fmt]
    rows = [{"family": "a", "n": 1}, {"family": "b", "n": 2}, {"family": "a", "n": 3}]
    specs = {label: OutputSpec(str(tmp_path / label), fmt, schema) for label in ("by/a", "by/b", "by/c", "all")}
    with TestPipeline(options=OPTIONS) as p:
        blocks = p | beam.Create([rows[:2], rows[2:], []])
        labelled = (blocks | "ByKey" >> beam.FlatMap(lambda b: [(f"by/{r['family']}", [r]) for r in b]),
                    blocks | "All" >> beam.Map(lambda b: ("all", b))) | beam.Flatten()
        written = labelled | WriteOutputs(specs, str(tmp_path))
        assert_that(written | beam.Map(lambda item: (item[0], item[1].rsplit("/", 1)[-1])),
                    equal_to([(label, f"part-00000-of-00001.{fmt}") for label in specs]))

        def counted_as_written_equals_read_back(items):
            # The one definition of a file's facts is reading it (transforms.files, what verify does);
            # the writer's count while writing must agree with it for every format, empty shards included.
            from transforms.files import read_file_facts
            assert len(items) == len(specs)
            for _, path, facts in items:
                read = read_file_facts(path, fmt)
                assert read.row_error is None and facts == {"bytes": read.bytes, "sha256": read.sha256,
                                                            "rows": read.rows}, path

        assert_that(written, counted_as_written_equals_read_back, label="FactsAsWritten")
    key = lambda r: r["n"]  # noqa: E731
    assert sorted(read_rows(tmp_path / "all"), key=key) == rows
    assert sorted(read_rows(tmp_path / "by" / "a"), key=key) == [rows[0], rows[2]]
    assert read_rows(tmp_path / "by" / "b") == [rows[1]]
    assert read_rows(tmp_path / "by" / "c") == [] and list((tmp_path / "by" / "c").glob("part-*"))
    assert not list(tmp_path.glob(".temp-*"))  # the temporary folder is gone
    from transforms.files import read_file_facts
    assert read_file_facts(str(next((tmp_path / "by" / "c").glob("part-*"))), fmt).rows == 0  # a real, empty file
    if fmt == "avro":  # a real Avro file that another reader opens
        with open(next((tmp_path / "by" / "b").glob("part-*")), "rb") as handle:
            assert list(fastavro.reader(handle)) == [rows[1]]
    elif fmt == "jsonl":
        assert all(orjson.loads(line) for line in next((tmp_path / "all").glob("part-*")).read_bytes().splitlines())


def test_write_outputs_refuses_an_undeclared_label(tmp_path):
    with pytest.raises(Exception, match="no output 'x'"):
        with TestPipeline(options=OPTIONS) as p:
            _ = p | beam.Create([("x", [{"n": 1}])]) | WriteOutputs({"y": OutputSpec(str(tmp_path / "y"), "jsonl")},
                                                                   str(tmp_path))


def test_a_block_is_coded_whole_and_sized_from_its_first_row():
    """The runner samples element sizes by encoding them: a block (a source's rows of one output)
    is sized from its first row alone; encoding and decoding still move the whole block."""
    import threading

    from transforms.process import BlockCoder, LabelledBlock

    coder = beam.coders.registry.get_coder(LabelledBlock)
    assert isinstance(coder, BlockCoder)
    block = LabelledBlock(("rows", [{"a": 1, "b": "x"}, {"a": 2, "b": "yy"}]))
    back = coder.decode(coder.encode(block))
    assert back == block and type(back) is LabelledBlock
    row_size = len(beam.coders.FastPrimitivesCoder().encode({"a": 1, "b": "x"}))
    assert coder.get_impl().estimate_size(block) == len("rows") + 2 * row_size
    unencodable = LabelledBlock(("rows", [{"a": 1}, {"lock": threading.Lock()}]))
    with pytest.raises(Exception):
        coder.encode(unencodable)
    assert coder.get_impl().estimate_size(unencodable) > 0  # the second row is never encoded
    with TestPipeline(options=OPTIONS) as p:
        out = p | beam.Create([("k", ("a", encode_block([b"1"])))]) | JoinAndApply(
            lambda key, groups: ({"rows": [{"k": key}]}, {}), ("rows",))
        assert out[BLOCKS].element_type is LabelledBlock
        assert_that(out[BLOCKS] | beam.Map(type), equal_to([LabelledBlock]))
