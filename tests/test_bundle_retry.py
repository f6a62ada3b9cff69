"""A bundle that fails once and is retried leaves the outputs unchanged and not duplicated.

Who retries: Beam's in-process FnApiRunner (this job's default) does NOT retry
a failed bundle - the job fails (apache/beam#18640, noted in Beam's own
direct_runner_test.py). Dataflow retries failed bundles (batch: up to four
times) and Flink restarts from the last checkpoint or the whole job. The
runner here that retries like a production runner is Beam's
BundleBasedDirectRunner (``TransformExecutor``: up to 4 attempts per bundle,
a failed attempt's outputs are discarded and only the successful attempt's
are committed). So:

* on the BundleBasedDirectRunner, a per-source step that fails once - AFTER
  the bundle has emitted rows - still gives exactly the rows of a clean run,
  each once, and the same manifest;
* on the FnApiRunner the same failure fails the run, and no manifest (which
  would claim conservation) is written.

What makes retries safe is ours to prove: the per-source function is pure
(same input, same output, no side effect) and the counts travel as data
through a CombineFn, not as side-effect counters.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest

from fixture_archive import run_job, write_archive
from output_reader import canonical
from pipelines import reprocess
from domain.reprocess import process_source_groups


class FailsOnce:
    """Wraps the per-source function so that exactly one call fails: the second one.

    By then the first key's rows and counts have been emitted. The failing call
    returns its rows intact and counts that raise when read, which the per-key
    step does after emitting the rows - so the failed bundle attempt has already
    produced output that must not survive. State lives in files, so it survives
    pickling and worker processes.
    """

    def __init__(self, markers: Path) -> None:
        self.markers = str(markers)

    def __call__(self, config, source_id, grouped):
        outputs, counts = process_source_groups(config, source_id, grouped)
        markers = Path(self.markers)
        (markers / ("seen-" + hashlib.sha256(source_id.encode()).hexdigest())).touch()
        failed = markers / "failed"
        if failed.exists() or len(list(markers.glob("seen-*"))) < 2:
            return outputs, counts
        return outputs, _CountsThatFail(counts, failed, source_id)


class _CountsThatFail(dict):
    def __init__(self, counts, marker: Path, source_id: str) -> None:
        super().__init__(counts)
        self._marker, self._source_id = marker, source_id

    def _fail(self, *args):
        self._marker.write_text(self._source_id)
        raise RuntimeError("injected bundle failure")

    items = keys = values = __iter__ = _fail


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return write_archive(tmp_path_factory.mktemp("archive"))


def run_jsonl(archive, out: Path, *extra) -> dict:
    return run_job(archive, out, "--output-format", "jsonl", *extra)[1]


def manifest_counts(out: Path) -> dict:
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    return {key: manifest[key] for key in ("inputs", "outcomes", "totals", "outputs", "conservation",
                                           "transcript_conservation")}


@pytest.fixture(scope="module")
def clean(archive, tmp_path_factory):
    out = tmp_path_factory.mktemp("clean")
    return out, run_jsonl(archive, out, "--runner=BundleBasedDirectRunner")


def test_a_retried_bundle_leaves_the_outputs_unchanged_and_not_duplicated(archive, clean, tmp_path, monkeypatch):
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setattr(reprocess, "process_source_groups", FailsOnce(markers))
    out = tmp_path / "retried"
    retried = run_jsonl(archive, out, "--runner=BundleBasedDirectRunner")

    assert (markers / "failed").exists()  # one bundle attempt failed, after emitting rows
    clean_out, clean_rows = clean
    assert retried.keys() == clean_rows.keys()
    for name, rows in retried.items():
        assert canonical(rows) == canonical(clean_rows[name]), name  # a multiset: a duplicate would show
    assert sum(len(rows) for rows in retried.values()) > 20
    assert manifest_counts(out) == manifest_counts(clean_out)


def test_without_bundle_retries_a_failure_fails_the_run_and_writes_no_manifest(archive, tmp_path, monkeypatch):
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setattr(reprocess, "process_source_groups", FailsOnce(markers))
    out = tmp_path / "failed"
    argv = ["--transcripts", archive["transcripts"], "--candidates", archive["candidates"], "--output", str(out),
            "--output-format", "jsonl"]  # the default FnApiRunner
    with pytest.raises(Exception, match="injected bundle failure"):
        reprocess.main(argv)
    assert not (out / "manifest.json").exists()
