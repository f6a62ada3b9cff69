"""The job as a composite (pipelines.reprocess.ReprocessJob), tested as Beam's own examples test theirs:
a TestPipeline on the fixture archive and assert_that on what it returns."""

from __future__ import annotations

import orjson
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from domain.reprocess import RunConfig
from fixture_archive import write_archive
from pipelines import verify
from pipelines.reprocess import JobSettings, ReprocessJob


def test_the_composite_writes_a_run_that_verifies(tmp_path):
    archive = write_archive(tmp_path / "archive")
    out = tmp_path / "out"
    settings = JobSettings(archive["transcripts"], archive["candidates"], str(out), "jsonl",
                           config=RunConfig(max_attempts=3, refresh_stale=True), runner="TestPipeline")

    def committed(paths):
        # When the manifest's path comes out, the manifest is written and every file it lists is final.
        assert paths == [str(out / "manifest.json")]
        assert verify.verify_folder(str(out)).ok

    with TestPipeline() as pipeline:
        manifest_path = pipeline | ReprocessJob(settings)
        assert_that(manifest_path, equal_to([str(out / "manifest.json")]), label="OnePath")
        assert_that(manifest_path, committed, label="Committed")
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["conservation"]["holds"] and manifest["conservation"]["candidates_in"] == archive["candidates_in"]
    assert manifest["options"] == settings.manifest_options() and manifest["runner"] == "TestPipeline"
