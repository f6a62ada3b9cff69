"""The ground truth as data: the simulated producer writes the words its defects are counted in on the truth
file's first line, and the commands given ``--truth`` read them there (pipelines.truth), never from sample/."""

from __future__ import annotations

import contextlib
import gzip
import io
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.ground_truth import DefectVocabulary, parse_vocabulary_record, vocabulary_record
from pipelines import retry_economy
from pipelines.truth import TruthFileError, ground_truth, read_truth
from sample import simulated_producer
from sample.sim_vocabulary import SIMULATED_REASON_CODES, SIMULATED_VOCABULARY, truth_vocabulary_line

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample" / "data" / "crd3-sample.transcripts.jsonl.gz"


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
    with pytest.raises(TruthFileError) as exited:
        retry_economy.main(["--truth", str(path), "--output", str(tmp_path / "run")])
    message = exited.value.line("another command")  # what the command says: named for it
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


# --- a truth file that does not cover the run ----------------------------------------------------------

@pytest.fixture(scope="module")
def run_and_truth(tmp_path_factory):
    """A run of a simulated archive, and its ground truth (every candidate)."""
    from pipelines import reprocess

    out = tmp_path_factory.mktemp("covered")
    assert simulated_producer.main(["--transcripts", str(SAMPLE), "--transcripts-out", str(out / "t.jsonl.gz"),
                                    "--candidates-out", str(out / "c.jsonl"), "--truth-out", str(out / "truth.jsonl"),
                                    "--candidates", "150"]) == 0
    with contextlib.redirect_stdout(io.StringIO()):
        assert reprocess.main(["--transcripts", str(out / "t.jsonl.gz"), "--candidates", str(out / "c.jsonl"),
                               "--output", str(out / "run"), "--output-format", "jsonl", "--progress-seconds", "0"]) == 0
    return out


def test_a_truth_file_that_does_not_cover_the_run_is_named_in_one_line(run_and_truth, tmp_path):
    """A truth without some of the run's candidates (e.g. a run that read the backfill's answers, measured
    against the first archive's truth only) would count them as defect-free: the report says which, in one
    line, exit 1, and writes nothing."""
    lines = (run_and_truth / "truth.jsonl").read_bytes().splitlines(keepends=True)
    rows = [orjson.loads(line) for line in lines[1:]]
    dropped_source = rows[-1]["source_id"]
    kept = [line for line, row in zip(lines[1:], rows) if row["source_id"] != dropped_source]
    dropped = sorted(row["candidate_id"] for row in rows if row["source_id"] == dropped_source)
    partial = tmp_path / "partial.jsonl"
    partial.write_bytes(lines[0] + b"".join(kept))
    run = run_and_truth / "run"
    done = subprocess.run([sys.executable, "-m", "pipelines.report", "--output", str(run), "--truth", str(partial),
                           "--html", str(tmp_path / "report.html")], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert done.returncode == 1 and done.stdout == "", done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"python -m pipelines.report: --truth {partial} does not cover the run in {run}: "
                           f"{len(dropped):,} of {len(rows):,} evaluated candidates have no ground truth "
                           f"(by source: {dropped_source} {len(dropped):,}; first: {', '.join(dropped[:3])})")
    assert not (tmp_path / "report.html").exists()
    with pytest.raises(TruthFileError) as refused:
        retry_economy.main(["--output", str(run), "--truth", str(partial), "--json", str(tmp_path / "e.json")])
    assert re.match("python -m pipelines.retry_economy: --truth .* does not cover the run",
                    refused.value.line("another command"))
    # The whole truth covers it; so does one that holds more (the candidates of another archive too).
    assert retry_economy.load_figures(run, ground_truth(run_and_truth / "truth.jsonl")).economy is not None
    more = tmp_path / "more.jsonl"
    more.write_bytes(b"".join(lines) + b"".join(lines[1:]).replace(b'"c-', b'"other-c-'))
    assert retry_economy.load_figures(run, ground_truth(more)).economy is not None


@given(st.lists(st.tuples(st.sampled_from(["crd3:A", "crd3:B", "crd3:C", "crd3:D", "crd3:E"]), st.booleans()),
                max_size=40))
def test_the_uncovered_line_counts_every_missing_candidate_by_source(candidates):
    """``candidates``: (source, whether the truth has a row for it), one per evaluated candidate."""
    from analysis.ground_truth import parse_truth_row
    from pipelines.truth import GroundTruth, uncovered

    evaluations = [{"candidate_id": f"c-{n:03d}", "source_id": source} for n, (source, _) in enumerate(candidates)]
    rows = [parse_truth_row({"candidate_id": row["candidate_id"], "family": "spells", "source_id": row["source_id"],
                             "chunk_id": "x-1", "attempt": 1, "defects": [], "expected_pass": True})
            for row, (_, known) in zip(evaluations, candidates) if known]
    truth = GroundTruth(Path("t.jsonl"), SIMULATED_VOCABULARY, SIMULATED_REASON_CODES)
    line = uncovered(truth, rows, evaluations, "run")
    missing = [row for row, (_, known) in zip(evaluations, candidates) if not known]
    if not missing:
        assert line is None
        return
    assert "\n" not in line and f": {len(missing):,} of {len(evaluations):,} evaluated candidates " in line
    shown = dict(re.findall(r"(crd3:\w) (\d+)", line))
    sources = sorted({row["source_id"] for row in missing})
    assert list(shown) == sources[:3] and all(int(shown[s]) == sum(r["source_id"] == s for r in missing)
                                              for s in shown)
    assert (f"and {len(sources) - 3} more sources" in line) == (len(sources) > 3)
    assert f"first: {', '.join(sorted(r['candidate_id'] for r in missing)[:3])})" in line
