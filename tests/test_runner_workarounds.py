"""The runner workaround the entry points apply (runners/workarounds.py)."""

import time

from apache_beam.runners.portability.fn_api_runner import worker_handlers
from apache_beam.runners.worker.data_plane import ClosableOutputStream

from fixture_archive import write_archive
from pipelines import reprocess
from runners.workarounds import send_stage_inputs_whole


def bytes_delivered_while_flushes_block(limit_ms: int, seconds: float = 1.6) -> tuple[int, int]:
    """Write a stage input the way the runner does (many chunks, then close) into a data-plane
    stream with the given flush interval, each flush blocking as a full send queue makes it."""
    delivered = []

    def blocking_flush(data: bytes) -> None:
        delivered.append(len(data))
        time.sleep(0.4)

    stream = ClosableOutputStream.create(lambda data: delivered.append(len(data)), blocking_flush, limit_ms)
    chunk, written = b"x" * 65536, 0
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        stream.write(chunk)
        written += len(chunk)
        time.sleep(0.005)
    stream.close()
    return written, sum(delivered)


def test_with_the_jobs_setting_nothing_written_during_a_blocked_flush_is_lost(monkeypatch):
    monkeypatch.setattr(worker_handlers, "DATA_BUFFER_TIME_LIMIT_MS", 1000)  # Beam's own value
    send_stage_inputs_whole()
    written, delivered = bytes_delivered_while_flushes_block(worker_handlers.DATA_BUFFER_TIME_LIMIT_MS)
    assert delivered == written


def test_the_job_applies_it_before_it_runs(monkeypatch, tmp_path):
    monkeypatch.setattr(worker_handlers, "DATA_BUFFER_TIME_LIMIT_MS", 1000)
    archive = write_archive(tmp_path / "archive")
    reprocess.run(["--transcripts", archive["transcripts"], "--candidates", archive["candidates"],
                   "--output", str(tmp_path / "out"), "--progress-seconds", "0"])
    assert worker_handlers.DATA_BUFFER_TIME_LIMIT_MS == 0


def grouping_buffer(keys: int, values_per_key: int):
    """A global-window grouping of (str, bytes) pairs as the runner fills one: windowed KVs in, encoded."""
    from apache_beam import coders
    from apache_beam.coders.coder_impl import create_OutputStream
    from apache_beam.runners.portability.fn_api_runner import execution
    from apache_beam.transforms import core
    from apache_beam.transforms.window import GlobalWindows

    window_coder = GlobalWindows().get_window_coder()
    kv = coders.TupleCoder([coders.StrUtf8Coder(), coders.BytesCoder()])
    pre = coders.WindowedValueCoder(kv, window_coder)
    post = coders.WindowedValueCoder(coders.TupleCoder([coders.StrUtf8Coder(), coders.IterableCoder(coders.BytesCoder())]),
                                     window_coder)
    buffer = execution.GroupingBuffer(pre, post, core.Windowing(GlobalWindows()))
    stream = create_OutputStream()
    for n in range(values_per_key):
        for k in range(keys):  # every key met again and again, as a read's blocks come
            pre.get_impl().encode_to_stream(GlobalWindows.windowed_value((f"key{k:04d}", b"v" * (n + k % 7))), stream, True)
    buffer.append(stream.get())
    return buffer


def test_a_grouping_in_pieces_is_beams_encoding_cut_between_whole_elements(monkeypatch):
    from apache_beam.runners.portability.fn_api_runner import execution, fn_runner

    from runners import workarounds

    # Beam's own methods come back after the test (the workaround replaces them for the process).
    monkeypatch.setattr(execution.GroupingBuffer, "partition", execution.GroupingBuffer.partition)
    monkeypatch.setattr(fn_runner.BundleManager, "_send_input_to_worker", fn_runner.BundleManager._send_input_to_worker)
    beams = grouping_buffer(300, 20).partition(2)
    monkeypatch.setattr(workarounds, "STAGE_INPUT_PIECE_BYTES", 2048)
    workarounds.send_stage_inputs_in_pieces()
    buffer = grouping_buffer(300, 20)
    pieces = buffer.partition(2)
    assert all(len(part) > 5 for part in pieces)  # cut, each piece a message of its own
    assert [b"".join(part) for part in pieces] == [b"".join(part) for part in beams]  # the same bytes, in order
    assert not buffer._table and buffer.partition(2) is pieces  # the table let go; partitioned once


def test_a_stage_fed_in_pieces_gets_every_value_of_every_key(monkeypatch):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.portability.fn_api_runner import execution, fn_runner
    from apache_beam.testing.util import assert_that, equal_to

    from runners import workarounds

    monkeypatch.setattr(execution.GroupingBuffer, "partition", execution.GroupingBuffer.partition)
    monkeypatch.setattr(fn_runner.BundleManager, "_send_input_to_worker", fn_runner.BundleManager._send_input_to_worker)
    monkeypatch.setattr(workarounds, "STAGE_INPUT_PIECE_BYTES", 1024)
    workarounds.send_stage_inputs_in_pieces()
    pairs = [(f"k{n % 97}", n) for n in range(5000)]
    expected = [(f"k{k}", sorted(n for n in range(5000) if n % 97 == k)) for k in range(97)]
    with beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        grouped = (p | beam.Create(pairs) | beam.GroupByKey()
                   | beam.MapTuple(lambda key, values: (key, sorted(values))))
        assert_that(grouped, equal_to(expected))


def test_the_job_feeds_its_per_source_step_in_pieces_and_writes_the_same_files(monkeypatch, tmp_path):
    from pathlib import Path

    from apache_beam.coders.coder_impl import create_OutputStream
    from apache_beam.runners.portability.fn_api_runner import execution, fn_runner

    from fixture_archive import run_job
    from runners import workarounds

    # Beam's own methods, whatever an earlier run in this process installed; back as they were after the test.
    monkeypatch.setattr(execution.GroupingBuffer, "partition", workarounds.BEAMS_GROUPING_PARTITION)
    monkeypatch.setattr(fn_runner.BundleManager, "_send_input_to_worker", workarounds.BEAMS_SEND_INPUT)
    archive = write_archive(tmp_path / "archive")
    with monkeypatch.context() as beams_own:  # the run before: the whole grouping in one bytes, as Beam sends it
        beams_own.setattr(reprocess, "send_stage_inputs_in_pieces", lambda: None)
        run_job(archive, tmp_path / "whole", "--output-format", "jsonl")
    assert not getattr(execution.GroupingBuffer.partition, "in_pieces", False)

    pieces = []
    monkeypatch.setattr(workarounds, "STAGE_INPUT_PIECE_BYTES", 1)  # each key its own piece
    monkeypatch.setattr(workarounds, "create_OutputStream",
                        lambda: pieces.append(1) or create_OutputStream())
    run_job(archive, tmp_path / "pieces", "--output-format", "jsonl")
    # Through the workaround (Beam's partition makes none of these), a piece per key of its groupings: the
    # files reshuffled, the sources joined (13 here).
    assert len(pieces) >= 10

    def files(folder: Path) -> dict[str, bytes]:
        return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.jsonl"))}

    whole, cut = files(tmp_path / "whole"), files(tmp_path / "pieces")
    assert whole and whole == cut  # every row, in the same order


def in_memory_messages():
    """Messages of two bundles, interleaved, as an in-process channel holds them."""
    from apache_beam.portability.api import beam_fn_api_pb2 as fn

    def data(bundle: str, payload: bytes, is_last: bool = False):
        return fn.Elements.Data(instruction_id=bundle, transform_id="t", data=payload, is_last=is_last)

    return [data("b1", b"a"), data("b2", b"x"), data("b1", b""), data("b1", b"b"),
            fn.Elements.Timers(instruction_id="b1", transform_id="t", timer_family_id="f", timers=b"t1"),
            fn.Elements.Timers(instruction_id="b1", transform_id="t", timer_family_id="f", is_last=True),
            data("b2", b"y"), data("b1", b"c"), data("b1", b"", is_last=True)]


def read_in_memory(input_elements, add_while_reading: bool = False):
    """(what reading bundle b1 yields, what the channel keeps) with the channel's ``input_elements``."""
    from apache_beam.portability.api import beam_fn_api_pb2 as fn
    from apache_beam.runners.worker.data_plane import InMemoryDataChannel

    channel = InMemoryDataChannel()
    channel._inputs = in_memory_messages()
    read = []
    for element in input_elements(channel, "b1", []):
        read.append(element.SerializeToString())
        if add_while_reading and len(read) == 2:  # the other side writes while this one reads
            channel._inputs.append(fn.Elements.Data(instruction_id="b1", transform_id="t", data=b"late"))
            channel._inputs.append(fn.Elements.Data(instruction_id="b2", transform_id="t", data=b"z"))
    return read, [m.SerializeToString() for m in channel._inputs]


def test_in_process_data_read_as_released_is_what_beam_reads(monkeypatch):
    from apache_beam.runners.worker import data_plane

    from runners import workarounds

    monkeypatch.setattr(data_plane.InMemoryDataChannel, "input_elements", workarounds.BEAMS_IN_MEMORY_INPUT_ELEMENTS)
    workarounds.release_stage_data_as_read()
    released = data_plane.InMemoryDataChannel.input_elements
    assert released is not workarounds.BEAMS_IN_MEMORY_INPUT_ELEMENTS
    for add_while_reading in (False, True):
        beams = read_in_memory(workarounds.BEAMS_IN_MEMORY_INPUT_ELEMENTS, add_while_reading)
        assert read_in_memory(released, add_while_reading) == beams
        assert len(beams[0]) == 5 + add_while_reading and len(beams[1]) == 2 + add_while_reading


def test_in_process_data_leaves_the_channel_as_it_is_read(monkeypatch):
    import sys

    from apache_beam.runners.worker import data_plane

    from runners import workarounds

    monkeypatch.setattr(data_plane.InMemoryDataChannel, "input_elements", workarounds.BEAMS_IN_MEMORY_INPUT_ELEMENTS)
    workarounds.release_stage_data_as_read()
    sent, spare = in_memory_messages(), in_memory_messages()[:1]
    channel = data_plane.InMemoryDataChannel()
    channel._inputs = list(sent)
    unreferenced = [sys.getrefcount(m) for n, m in enumerate(spare)][0]  # held by its list alone
    held = []
    for element in channel.input_elements("b1", []):
        if element is sent[-2]:  # the last data: every message of b1 before it read
            held = [sys.getrefcount(m) for n, m in enumerate(sent) if n < 4 and m.instruction_id == "b1"]
    assert held == [unreferenced] * 3  # the channel let go of each (Beam's holds every one to the end)


def test_a_grouping_sent_in_pieces_is_let_go_as_it_is_sent_and_cannot_be_read_again(monkeypatch):
    import types

    import pytest
    from apache_beam.runners.portability.fn_api_runner import execution, fn_runner
    from apache_beam.runners.worker.data_plane import InMemoryDataChannel

    from runners import workarounds

    monkeypatch.setattr(execution.GroupingBuffer, "partition", workarounds.BEAMS_GROUPING_PARTITION)
    monkeypatch.setattr(fn_runner.BundleManager, "_send_input_to_worker", workarounds.BEAMS_SEND_INPUT)
    monkeypatch.setattr(workarounds, "STAGE_INPUT_PIECE_BYTES", 2048)
    workarounds.send_stage_inputs_in_pieces()
    beams = b"".join(workarounds.BEAMS_GROUPING_PARTITION(grouping_buffer(300, 20), 1)[0])
    buffer = grouping_buffer(300, 20)
    [pieces] = buffer.partition(1)
    count = len(pieces)
    channel = InMemoryDataChannel()
    manager = types.SimpleNamespace(_worker_handler=types.SimpleNamespace(data_conn=channel))
    fn_runner.BundleManager._send_input_to_worker(manager, "bundle_1", "read", pieces)
    messages = [m for m in channel.inverse()._inputs if m.data]
    assert pieces == [] and len(messages) == count > 5  # each piece left as its own message
    assert b"".join(m.data for m in messages) == beams  # Beam's bytes, in order
    with pytest.raises(RuntimeError, match="cannot be read again"):
        buffer.partition(1)


def test_a_grouping_made_into_pieces_hands_the_tables_memory_back(monkeypatch):
    from apache_beam.runners.portability.fn_api_runner import execution, fn_runner

    from runners import workarounds

    monkeypatch.setattr(execution.GroupingBuffer, "partition", workarounds.BEAMS_GROUPING_PARTITION)
    monkeypatch.setattr(fn_runner.BundleManager, "_send_input_to_worker", workarounds.BEAMS_SEND_INPUT)
    trimmed = []
    monkeypatch.setattr(workarounds, "_return_freed_memory", lambda: trimmed.append(1))
    workarounds.send_stage_inputs_in_pieces()
    buffer = grouping_buffer(50, 4)
    buffer.partition(2)
    buffer.partition(2)
    assert trimmed == [1]  # once the table is gone, not at every read of the pieces
