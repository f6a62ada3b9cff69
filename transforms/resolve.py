"""Key records by a key they do not carry, through another input that maps it (an index join).

Generic: nothing here knows a D&D rule. Some records name another input's
record rather than the join key: a verdict names a candidate (``candidate_id``)
and not its source, which the per-source join needs. ``KeyThroughIndex`` reads
both inputs keyed by that foreign key, in buckets of it (``KeyedInput.key_buckets``:
many records per block, whatever the keys), groups each bucket, and re-keys each
record by the join key of the one index record that carries the same foreign key.

The output is what ``ReadKeyedInputs(..., dead_letters_label=...)`` gives, ready to be
flattened with it before a ``JoinAndApply``: ``(key, (input name, block))`` pairs,
and riders for the records' dead letters and counts. A record whose foreign key no
index record carries, or several index records with different join keys carry, is
counted (``unresolved_counter``) and dropped, so conservation can name it.
"""

from __future__ import annotations

from dataclasses import dataclass

import apache_beam as beam

from transforms.process import COUNTS, RIDER, rider
from transforms.read import KeyedInput, ReadKeyedInputs
from transforms.raw_records import decode_block, encode_block, key_record

INDEX = "index"


class _ResolveBucket(beam.DoFn):
    """One bucket: the index's records and the records to key -> the records keyed by their join key."""

    def __init__(self, input_name: str, foreign_field: str, key_field: str, max_record_bytes: int,
                 unresolved_counter: str) -> None:
        self.input_name = input_name
        self.foreign_field = foreign_field
        self.key_field = key_field
        self.max_record_bytes = max_record_bytes
        self.unresolved_counter = unresolved_counter

    def process(self, element):
        bucket, named_blocks = element
        if type(bucket) is tuple and bucket[0] == RIDER:  # the records' dead letters and counts ride on
            for payload in named_blocks:
                yield bucket, payload
            return
        keys: dict[str, set[str]] = {}
        records: list[bytes] = []
        for name, block in named_blocks:
            lines = decode_block(block)
            if name != INDEX:
                records.extend(lines)
                continue
            for line in lines:
                foreign = key_record(line, INDEX, self.foreign_field, self.max_record_bytes)
                joined = key_record(line, INDEX, self.key_field, self.max_record_bytes)
                if not isinstance(foreign, dict) and not isinstance(joined, dict):
                    keys.setdefault(foreign[0], set()).add(joined[0])
        by_key: dict[str, list[bytes]] = {}
        unresolved = 0
        for line in records:
            foreign = key_record(line, self.input_name, self.foreign_field, self.max_record_bytes)
            found = keys.get(foreign[0]) if not isinstance(foreign, dict) else None
            if found is None or len(found) != 1:
                unresolved += 1
                continue
            by_key.setdefault(next(iter(found)), []).append(line)
        for key, lines in by_key.items():
            yield key, (self.input_name, encode_block(lines))
        if unresolved:
            yield rider(("unresolved", self.input_name, bucket), COUNTS, {self.unresolved_counter: unresolved})


@dataclass
class KeyThroughIndex(beam.PTransform):
    """PBegin -> ``records`` keyed by the ``key_field`` of the ``index`` record that shares their
    ``foreign_field`` (e.g. verdicts keyed by the source of the candidate they name), with their
    dead letters and counts as riders (``dead_letters_label``). ``index`` is read for its two
    fields only: its own dead letters and counts are the main read's business, not counted here."""

    records: KeyedInput
    index: KeyedInput
    key_field: str
    dead_letters_label: str
    unresolved_counter: str
    buckets: int = 256

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, pbegin):
        foreign = self.records.key_field
        records = KeyedInput(self.records.pattern, self.records.input_name, foreign, self.records.max_record_bytes,
                             fields=self.records.fields, progress=self.records.progress, key_buckets=self.buckets)
        index = KeyedInput(self.index.pattern, INDEX, foreign, self.index.max_record_bytes, fields=self.index.fields,
                           key_buckets=self.buckets)
        read_records = pbegin | "ReadRecords" >> ReadKeyedInputs((records,), dead_letters_label=self.dead_letters_label)
        read_index = (pbegin | "ReadIndex" >> ReadKeyedInputs((index,))).keyed
        return (
            (read_records, read_index)
            | "Together" >> beam.Flatten()
            | "ByBucket" >> beam.GroupByKey()
            | "Resolve" >> beam.ParDo(_ResolveBucket(records.input_name, foreign, self.key_field,
                                                     records.max_record_bytes, self.unresolved_counter))
        )
