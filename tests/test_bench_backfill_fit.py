"""bench.backfill's fit: each command's fixed part and cost per item of its own, from the sizes of one run."""

import pytest

from bench.backfill import COMPARE, EXPORT, JOB, fit_lines, fits


def step(wall_s: float, cpu_s: float, rss_mb: float) -> dict:
    return {"wall_s": {"median": wall_s}, "cpu_s": {"median": cpu_s}, "rss_mb": {"median": rss_mb}}


def point(candidates: int, requests: int, slots: int) -> dict:
    """A size of the loop whose commands cost exactly 2 s + 10 µs per candidate (the job), 1 s + 50 µs per
    request (export-batch) and 3 s + 4 µs per slot (compare); RSS 200 MB + 300 MB per million items."""
    return {"candidates": candidates, "items": {"candidates": candidates, "requests_exported": requests,
                                                "slots_compared": slots},
            "steps": {JOB: step(2 + 10e-6 * candidates, 1.5 + 9e-6 * candidates, 200 + 300e-6 * candidates),
                      EXPORT: step(1 + 50e-6 * requests, 0.5 + 40e-6 * requests, 200 + 300e-6 * requests),
                      COMPARE: step(3 + 4e-6 * slots, 2 + 3e-6 * slots, 200 + 300e-6 * slots)}}


def test_each_command_is_fitted_per_its_own_items_over_the_sizes():
    fitted = fits([point(10_000, 1_800, 60_000), point(100_000, 17_000, 610_000), point(1_000_000, 175_000, 6_050_000)])
    assert fitted[JOB]["item"] == "candidate" and fitted[EXPORT]["item"] == "request" and fitted[COMPARE]["item"] == "slot"
    assert (fitted[JOB]["fixed_s"], fitted[JOB]["us_per_item"]) == (pytest.approx(2), pytest.approx(10))
    assert (fitted[EXPORT]["fixed_s"], fitted[EXPORT]["us_per_item"]) == (pytest.approx(1), pytest.approx(50))
    assert (fitted[COMPARE]["cpu_fixed_s"], fitted[COMPARE]["cpu_us_per_item"]) == (pytest.approx(2), pytest.approx(3))
    assert fitted[COMPARE]["rss_fixed_mb"] == pytest.approx(200) and fitted[COMPARE]["rss_mb_per_million"] == pytest.approx(300)
    lines = fit_lines(fitted)
    assert any(line.startswith("- export-batch") and "wall = 1.00 s + 50.0 µs x requests" in line for line in lines)
    assert any("CPU = 2.00 s + 3.0 µs x slots" in line for line in lines)


def test_least_squares_not_two_points_when_a_size_is_off_the_line():
    pts = [point(10_000, 1_000, 1), point(100_000, 1_000, 1), point(1_000_000, 1_000, 1)]
    pts[1]["steps"][JOB]["wall_s"]["median"] += 0.9  # the middle size measured slow
    fitted = fits(pts)
    assert fitted[JOB]["us_per_item"] != pytest.approx(10) and fitted[JOB]["us_per_item"] == pytest.approx(9.5, abs=0.5)


def test_one_size_has_no_fit():
    assert fits([point(100_000, 17_000, 610_000)]) == {}


def test_run_2_reads_the_imported_answers_whatever_folder_the_bench_was_given(tmp_path, monkeypatch):
    """A relative --results made the answers' link dangle: run 2 then read no answers and compare found no change."""
    from pathlib import Path

    from bench.archive import Archive
    from bench.backfill import link_run2_inputs

    archive_folder = tmp_path / "archive"
    archive_folder.mkdir()
    (archive_folder / "candidates-0.jsonl.gz").write_bytes(b"gz")
    archive = Archive(archive_folder, "", "", 1, 1, 1, 1, 1)
    monkeypatch.chdir(tmp_path)
    work = Path("results/scratch/loop-10")  # relative, as `--results out/bench/x` gives it
    (work / "import").mkdir(parents=True)
    (work / "import" / "candidates.jsonl").write_bytes(b'{"answer": 1}\n')
    link_run2_inputs(archive, work)
    assert (work / "after" / "candidates-backfill.jsonl").read_bytes() == b'{"answer": 1}\n'
    assert (work / "after" / "candidates-0.jsonl.gz").read_bytes() == b"gz"
