"""The job as a composite (pipelines.reprocess.ReprocessJob), tested as Beam's own examples test theirs:
a TestPipeline on the fixture archive and assert_that on what it returns."""

from __future__ import annotations

import orjson
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from domain.intake import INPUT_CANDIDATES, INPUT_TRANSCRIPTS
from domain.reprocess import OUTPUT_LABELS, RunConfig, process_source, process_source_groups
from domain.run_integrity import NON_ARTIFACT_OUTPUTS, artifact_output
from fixture_archive import write_archive
from pipelines import verify
from pipelines.options import DEFAULT_MAX_RECORD_BYTES
from pipelines.reprocess import JobSettings, ReprocessJob
from transforms.compression import decompressed
from transforms.raw_records import iter_lines, key_record


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



def _lines_by_source(paths) -> dict[str, list[bytes]]:
    """The files' records by source, keyed as the job's read step keys them (unkeyable ones left out)."""
    grouped: dict[str, list[bytes]] = {}
    for path in paths:
        with open(path, "rb") as raw, decompressed(raw, str(path)) as stream:
            for line, _ in iter_lines(stream, DEFAULT_MAX_RECORD_BYTES):
                keyed = key_record(line, "input", "source_id", DEFAULT_MAX_RECORD_BYTES) if line.strip() else None
                if isinstance(keyed, tuple):
                    grouped.setdefault(keyed[0], []).append(keyed[1])
    return grouped


def test_process_source_groups_gives_rows_by_output_folder_in_the_domains_order(tmp_path):
    # The job writes each label's block to that folder as it comes (no labelling step after it):
    # artifacts split by family in the order process_source returned them, the other outputs whole,
    # and no label the writers do not know.
    folder = tmp_path / "archive"
    write_archive(folder)
    transcripts = _lines_by_source(sorted(folder.glob("transcripts-*")))
    candidates = _lines_by_source(sorted(folder.glob("candidates-*")))
    config = RunConfig(max_attempts=3, refresh_stale=True)
    families_seen = set()
    for source in sorted(transcripts.keys() | candidates.keys()):
        grouped = {INPUT_TRANSCRIPTS: transcripts.get(source, []), INPUT_CANDIDATES: candidates.get(source, [])}
        outputs, counts = process_source_groups(config, source, grouped)
        whole = process_source(source, grouped[INPUT_TRANSCRIPTS], grouped[INPUT_CANDIDATES], config)
        assert set(outputs) <= set(OUTPUT_LABELS)
        assert dict(counts) == dict(whole.counts)
        for tag in NON_ARTIFACT_OUTPUTS:
            assert list(outputs[tag]) == list(getattr(whole, tag))
        for family in {row["family"] for row in whole.artifacts}:
            families_seen.add(family)
            assert list(outputs[artifact_output(family)]) == [r for r in whole.artifacts if r["family"] == family]
        assert sum(len(rows) for label, rows in outputs.items() if label.startswith("artifacts/")) == len(whole.artifacts)
    assert len(families_seen) >= 2  # the split is exercised


def test_the_read_step_has_one_output_and_the_join_is_its_only_consumer(tmp_path):
    # Flink's batch translation ships a stage's whole output to every consumer: dead letters and
    # counts as outputs of their own wrote the read stage's output three times (docs/benchmarks.md).
    archive = write_archive(tmp_path / "archive")
    settings = JobSettings(archive["transcripts"], archive["candidates"], str(tmp_path / "out"), "jsonl",
                           config=RunConfig(max_attempts=3), runner="TestPipeline")
    pipeline = TestPipeline()
    _ = pipeline | "Reprocess" >> ReprocessJob(settings)
    graph = pipeline.to_runner_api().components
    read = next(t for t in graph.transforms.values() if t.unique_name.endswith("/ReadAndKey"))
    assert len(read.outputs) == 1, dict(read.outputs)
    (output,) = read.outputs.values()
    consumers = [t.unique_name for t in graph.transforms.values()
                 if output in t.inputs.values() and not t.subtransforms]
    assert len(consumers) == 1 and consumers[0].startswith("Reprocess/PerSource/Join"), consumers


def test_job_options_make_each_view_once_and_a_copy_makes_its_own():
    # Beam asks for views hundreds of times per run (a parser built each time); the job's options
    # make one per class. Views share the values; a deep copy (Beam's Pipeline takes one) does not.
    import copy

    from apache_beam.options.pipeline_options import StandardOptions

    from pipelines.options import JobPipelineOptions, ReprocessOptions

    options = JobPipelineOptions(["--runner", "FnApiRunner", "--transcripts", "t.jsonl"])
    standard = options.view_as(StandardOptions)
    assert options.view_as(StandardOptions) is standard
    standard.runner = "Other"
    assert options.get_all_options()["runner"] == "Other"
    copied = copy.deepcopy(options)
    copied.view_as(StandardOptions).runner = "Copied"
    assert (options.view_as(StandardOptions).runner, copied.view_as(StandardOptions).runner) == ("Other", "Copied")
    assert copied.view_as(ReprocessOptions).transcripts == "t.jsonl"
