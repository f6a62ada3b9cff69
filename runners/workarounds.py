"""Workarounds for defects of the runners this project launches, each with its evidence.

Applied by the entry points before a pipeline runs; each says what to remove it for.
"""

from __future__ import annotations

from apache_beam.coders.coder_impl import create_OutputStream
from apache_beam.runners.portability.fn_api_runner import execution, fn_runner, worker_handlers
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


def send_stage_inputs_in_pieces() -> None:
    """The FnApiRunner holds a grouped stage input four times at once: the grouping table, the one
    bytes object ``_GroupingBuffer.partition`` encodes it into, the data-plane stream that copies it
    and the message that copies the stream. In process, every copy stays until the stage's bundle
    runs; at 101k candidates export-batch's per-source stage input (28 MB of compressed transcript
    blocks) peaked at 116 MB of copies, and at 1M that was most of its 1.65 GB. The job's per-source
    step, fed ~30 MB of keyed blocks at 101k candidates and ~300 MB at 1M, peaked at 1.68 GB at 1M;
    in pieces, 0.91 GB.

    Here a grouping is encoded in pieces of whole elements (``STAGE_INPUT_PIECE_BYTES``), each key
    leaving the table as it is encoded, in the table's order as before, and each piece goes as one
    message: the input is held about twice (pieces and messages), never four times. Only the
    global window's grouping is replaced (the only one this project runs); the others keep Beam's.
    Per-message flushes happen on the bundle thread, so ``send_stage_inputs_whole``'s race (a timer
    thread's flush) cannot come back. Remove once Beam streams a stage's input itself."""
    if getattr(execution.GroupingBuffer.partition, "in_pieces", False):
        return
    beams_partition = BEAMS_GROUPING_PARTITION

    def partition(self, n: int) -> list[list[bytes]]:
        if self._grouped_output or not self._windowing.is_default():
            return beams_partition(self, n)
        windowed = GlobalWindows.windowed_value(
            None, timestamp=GlobalWindow().max_timestamp(),
            pane_info=windowed_value.PaneInfo(is_first=True, is_last=True, timing=windowed_value.PaneInfoTiming.ON_TIME,
                                              index=0, nonspeculative_index=0)).with_value
        coder = self._post_grouped_coder.get_impl()
        decode_key = self._key_coder.get_impl().decode
        pieces: list[list[bytes]] = [[] for _ in range(n)]
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
        return pieces

    def send_input(self, process_bundle_id: str, read_transform_id: str, byte_streams) -> None:
        data_out = self._worker_handler.data_conn.output_stream(process_bundle_id, read_transform_id)
        for byte_stream in byte_streams or []:
            data_out.write(byte_stream)
            data_out.flush()  # one message per piece
        data_out.close()

    partition.in_pieces = True
    execution.GroupingBuffer.partition = partition
    fn_runner.BundleManager._send_input_to_worker = send_input

