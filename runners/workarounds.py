"""Workarounds for defects of the runners this project launches, each with its evidence.

Applied by the entry points before a pipeline runs; each says what to remove it for.
"""

from __future__ import annotations

import ctypes

from apache_beam.coders.coder_impl import create_OutputStream
from apache_beam.portability.api import beam_fn_api_pb2
from apache_beam.runners.portability.fn_api_runner import execution, fn_runner, worker_handlers
from apache_beam.runners.worker import data_plane
from apache_beam.transforms.window import GlobalWindow, GlobalWindows
from apache_beam.utils import windowed_value


def send_stage_inputs_whole() -> None:
    """The FnApiRunner sends each stage's input to a worker process in one message at close.

    Beam 2.77's runner flushes its data-plane output streams every second
    (``worker_handlers.DATA_BUFFER_TIME_LIMIT_MS`` = 1000) from a timer thread,
    while the bundle thread is still writing the stage's input. ``flush()``
    takes its lock but ``write()`` does not: when the flush callback blocks on
    the full 100 MB send queue, chunks written meanwhile are cleared unsent
    after it returns. With two multi-processing workers and more than ~100 MB
    of stage input per worker (1M candidates), one run in five lost whole read
    bundles' records; conservation caught it and the run exited 2
    (docs/benchmarks.md). With the limit at 0 the stream has no timer and
    sends on close; a stage input then travels as one message (gRPC's 2 GB
    limit per worker and stage), or as pieces of a few MB where
    ``send_stage_inputs_in_pieces`` is applied too (every entry point here). In-process
    runs use no gRPC channel and are unaffected. Remove once Beam's buffered
    stream clears only what it sent.
    """
    worker_handlers.DATA_BUFFER_TIME_LIMIT_MS = 0


# Most bytes of one piece of a grouped stage input (whole elements; one element may be larger).
STAGE_INPUT_PIECE_BYTES = 8 << 20
# Beam's own methods that send_stage_inputs_in_pieces replaces for the process (tests put them back).
BEAMS_GROUPING_PARTITION = execution.GroupingBuffer.partition
BEAMS_SEND_INPUT = fn_runner.BundleManager._send_input_to_worker
BEAMS_IN_MEMORY_INPUT_ELEMENTS = data_plane.InMemoryDataChannel.input_elements


def _return_freed_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere nothing). The grouping
    table's values, let go as the pieces are made, were most of the heap: glibc keeps such pages for later
    allocations, but the pieces and messages come from mmap, so the process would hold both."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):
        pass


class _Pieces(list):
    """One worker's pieces of a grouped stage input; ``sent`` once they have left, one by one."""

    sent = False


def send_stage_inputs_in_pieces() -> None:
    """The FnApiRunner holds a grouped stage input four times at once: the grouping table, the one
    bytes object ``_GroupingBuffer.partition`` encodes it into, the data-plane stream that copies it
    and the message that copies the stream. In process, every copy stays until the stage's bundle
    runs; at 101k candidates export-batch's per-source stage input (28 MB of compressed transcript
    blocks) peaked at 116 MB of copies, and at 1M that was most of its 1.65 GB. The job's per-source
    step, fed ~30 MB of keyed blocks at 101k candidates and ~300 MB at 1M, peaked at 1,677 MB at 1M;
    in pieces, 906 MB; with the pieces let go as sent and the table's pages handed back, 847 MB.

    Here a grouping is encoded in pieces of whole elements (``STAGE_INPUT_PIECE_BYTES``), each key
    leaving the table as it is encoded, in the table's order as before, and each piece goes as one
    message, let go as it is sent: the input is held about once (pieces, then messages). A grouping
    so sent cannot be read again: a second read raises instead of finding it empty. Once the
    pieces are made, the heap pages the table held go back to the system (``_return_freed_memory``). Only the
    global window's grouping is replaced (the only one this project runs); the others keep Beam's.
    Per-message flushes happen on the bundle thread, so ``send_stage_inputs_whole``'s race (a timer
    thread's flush) cannot come back. Remove once Beam streams a stage's input itself."""
    if getattr(execution.GroupingBuffer.partition, "in_pieces", False):
        return
    beams_partition = BEAMS_GROUPING_PARTITION

    def partition(self, n: int) -> list[list[bytes]]:
        if self._grouped_output and any(isinstance(part, _Pieces) and part.sent for part in self._grouped_output):
            raise RuntimeError("a grouped stage input sent in pieces was let go as it was sent: it cannot be read "
                               "again (runners.workarounds.send_stage_inputs_in_pieces)")
        if self._grouped_output or not self._windowing.is_default():
            return beams_partition(self, n)
        windowed = GlobalWindows.windowed_value(
            None, timestamp=GlobalWindow().max_timestamp(),
            pane_info=windowed_value.PaneInfo(is_first=True, is_last=True, timing=windowed_value.PaneInfoTiming.ON_TIME,
                                              index=0, nonspeculative_index=0)).with_value
        coder = self._post_grouped_coder.get_impl()
        decode_key = self._key_coder.get_impl().decode
        pieces: list[list[bytes]] = [_Pieces() for _ in range(n)]
        streams = [create_OutputStream() for _ in range(n)]
        for index, encoded_key in enumerate(list(self._table)):
            values = self._table.pop(encoded_key)
            stream = streams[index % n]
            coder.encode_to_stream(windowed((decode_key(encoded_key), values)), stream, True)
            if stream.size() >= STAGE_INPUT_PIECE_BYTES:
                pieces[index % n].append(stream.get())
                streams[index % n] = create_OutputStream()
        for part, stream in zip(pieces, streams):
            if stream.size() or not part:
                part.append(stream.get())
        self._grouped_output = pieces
        self._table.clear()
        _return_freed_memory()
        return pieces

    def send_input(self, process_bundle_id: str, read_transform_id: str, byte_streams) -> None:
        data_out = self._worker_handler.data_conn.output_stream(process_bundle_id, read_transform_id)
        if isinstance(byte_streams, _Pieces):  # a grouping's: each piece let go once it is a message
            byte_streams.sent = True
            byte_streams.reverse()
            while byte_streams:
                data_out.write(byte_streams.pop())
                data_out.flush()
        else:
            for byte_stream in byte_streams or []:
                data_out.write(byte_stream)
                data_out.flush()  # one message per piece
        data_out.close()

    partition.in_pieces = True
    execution.GroupingBuffer.partition = partition
    fn_runner.BundleManager._send_input_to_worker = send_input


def release_stage_data_as_read() -> None:
    """In process, runner and worker pass a bundle's data through ``InMemoryDataChannel``: a list of
    messages that the reading side walks and replaces only once it has read to the end, so every
    message of a bundle stays until the last is read, beside what the reader made of them: the
    worker's decoded stage input, or the runner's grouping table of the stage's output. At 1M
    candidates the job's read step's output (~300 MB of keyed blocks) was held twice at its end so.

    Here each message leaves the list as it is read; messages of other bundles stay, in order, as
    Beam's reader leaves them, and messages added while reading are read too, as before. Only the
    in-process channel is replaced (gRPC's queues already let go of what they hand over). Remove once
    Beam's reader lets go of the messages it has read."""
    if getattr(data_plane.InMemoryDataChannel.input_elements, "releasing", False):
        return

    def input_elements(self, instruction_id: str, unused_expected_inputs, abort_callback=None):
        others = []
        while self._inputs:
            unread, self._inputs = self._inputs, []
            unread.reverse()  # popped from the end: in the order written
            while unread:
                element = unread.pop()
                if element.instruction_id != instruction_id:
                    others.append(element)
                elif isinstance(element, beam_fn_api_pb2.Elements.Timers):
                    if not element.is_last:
                        yield element
                elif isinstance(element, beam_fn_api_pb2.Elements.Data) and (element.data or element.is_last):
                    yield element
                del element
        self._inputs = others

    input_elements.releasing = True
    data_plane.InMemoryDataChannel.input_elements = input_elements
