"""The ground truth as data: the simulated producer writes the words its defects are counted in on the truth
file's first line, and the commands given ``--truth`` read them there (pipelines.truth), never from sample/."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.retry_economy import DefectVocabulary, parse_vocabulary_record, vocabulary_record
from pipelines import retry_economy
from pipelines.truth import TruthFileError, ground_truth, read_truth
from sample import simulated_producer
from sample.sim_vocabulary import SIMULATED_REASON_CODES, SIMULATED_VOCABULARY, truth_vocabulary_line

SAMPLE = Path(__file__).resolve().parent.parent / "sample" / "data" / "crd3-sample.transcripts.jsonl.gz"


@pytest.fixture(scope="module")
def produced(tmp_path_factory):
    out = tmp_path_factory.mktemp("truth")
    assert simulated_producer.main(["--transcripts", str(SAMPLE), "--candidates-out", str(out / "c.jsonl"),
                                    "--truth-out", str(out / "t.jsonl.gz"), "--candidates", "300",
                                    "--reconciliations"]) == 0
    return out


def test_the_producers_truth_file_declares_the_vocabulary_the_commands_read(produced):
    truth = ground_truth(produced / "t.jsonl.gz")
    assert truth.vocabulary == SIMULATED_VOCABULARY and truth.reason_codes == SIMULATED_REASON_CODES
    candidates = [orjson.loads(line) for line in (produced / "c.jsonl").read_bytes().splitlines()]
    assert [row.candidate_id for row in read_truth(truth)] == [c["candidate_id"] for c in candidates]


def test_the_simulated_batch_truth_declares_it_too(tmp_path):
    from sample import simulated_batch

    assert simulated_batch.run(str(tmp_path / "requests-*"), [], tmp_path / "results.jsonl", tmp_path / "t.jsonl",
                               seed=7) == (0, 0)
    truth = ground_truth(tmp_path / "t.jsonl")
    assert truth.vocabulary == SIMULATED_VOCABULARY and read_truth(truth) == []


def test_truth_files_joined_end_to_end_read_as_one_when_their_vocabularies_agree(produced, tmp_path):
    rows = gzip.decompress((produced / "t.jsonl.gz").read_bytes())
    joined = tmp_path / "joined.jsonl"
    joined.write_bytes(rows + rows)  # what the demo does with the producer's and the batch's truth
    assert len(read_truth(ground_truth(joined))) == 2 * len(read_truth(ground_truth(produced / "t.jsonl.gz")))

    other = orjson.loads(truth_vocabulary_line())
    other["defect_vocabulary"]["benign"] = []
    joined.write_bytes(rows + orjson.dumps(other) + b"\n" + rows.split(b"\n", 1)[1])
    with pytest.raises(TruthFileError, match=r"line \d+ is not ground truth .*other than the first line's"):
        read_truth(ground_truth(joined))


@pytest.mark.parametrize("first", [b"", b'{"candidate_id": "c-1", "family": "spells"}', b"not json",
                                   b'{"defect_vocabulary": {"benign": "utf8_bom"}}'])
def test_a_file_without_a_vocabulary_first_is_refused_in_one_line(tmp_path, capsys, first):
    path = tmp_path / "truth.jsonl"
    path.write_bytes(first + b"\n")
    with pytest.raises(TruthFileError, match="its first line declares no defect vocabulary"):
        ground_truth(path)
    with pytest.raises(SystemExit) as exited:
        retry_economy.main(["--truth", str(path), "--output", str(tmp_path / "run")])
    message = str(exited.value.code)
    assert message.startswith(f"python -m pipelines.retry_economy: --truth {path}: not a ground-truth file")
    assert "\n" not in message


def test_a_row_that_is_not_ground_truth_is_refused_with_its_line(tmp_path):
    path = tmp_path / "truth.jsonl"
    path.write_bytes(truth_vocabulary_line() + b"\n" + b'{"candidate_id": "c-1"}\n')
    with pytest.raises(TruthFileError, match=r"line 3 is not ground truth \(KeyError"):
        read_truth(ground_truth(path))


kinds = st.frozensets(st.text(min_size=1, max_size=12), max_size=5)


@given(benign=kinds, canonicalized=kinds, unparseable=kinds, schema=kinds,
       codes=st.dictionaries(st.text(min_size=1, max_size=12), st.lists(st.text(max_size=12), max_size=3).map(tuple),
                             max_size=5))
def test_the_vocabulary_line_reads_back_as_written(benign, canonicalized, unparseable, schema, codes):
    vocabulary = DefectVocabulary(benign, canonicalized, unparseable, schema)
    line = orjson.loads(orjson.dumps(vocabulary_record(vocabulary, codes)))
    assert parse_vocabulary_record(line) == (vocabulary, codes)
