"""`make demo` at small scale: simulated archive with a prompt revision -> run 1 (Avro, --refresh-stale)
-> export-batch -> simulated batch provider -> import-batch -> run 2 -> retry economy -> HTML reports.
This is the end-to-end test of the three runs of a backfill (SPEC §6.1)."""

from __future__ import annotations

import contextlib
import io

import orjson
import pytest

from pipelines import demo
from domain.assets import current_fingerprints
from pipelines.outputs import read_manifest, read_rows
from sample.revision import earlier_fingerprints
from test_report import SECTIONS

# A couple of hundred candidates from the bundled sample, with failures made common
# (fewer producer retries, more compound defects) so the retry economy has work to measure.
SMALL = ("--candidates", "200", "--defect-rate", "retry_after_failure=0.2",
         "--defect-rate", "multiple_defects=0.3", "--defect-rate", "truncated_json=0.05")


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = demo.main(["--output", str(root), *SMALL])
    return status, root, printed.getvalue()


def test_demo_succeeds_and_writes_everything(demo_run):
    status, root, _ = demo_run
    assert status == 0
    for path in ("archive/transcripts.jsonl.gz", "archive/candidates.jsonl.gz", "archive/ground-truth.jsonl",
                 "run1/manifest.json", "run1/report.html", "run1/retry_economy.json",
                 "backfill/batch/export_manifest.json", "backfill/import/import_manifest.json",
                 "archive/candidates-backfill.jsonl", "run2/manifest.json", "retry_economy.json", "report.html"):
        assert (root / path).is_file(), path
    for run in ("run1", "run2"):
        assert read_manifest(root / run)["conservation"]["holds"]


def test_demo_prints_the_figures_and_the_report_path(demo_run):
    _, root, printed = demo_run
    assert f"report: {root / 'report.html'}" in printed
    assert "leaks in retry guidance: 0" in printed and "retries saved by endpoint canonicalization" in printed


def test_demo_retry_economy(demo_run):
    _, root, _ = demo_run
    figures = orjson.loads((root / "retry_economy.json").read_bytes())
    assert figures["ok"] and figures["leaks"]["count"] == 0
    slots = figures["requests_per_failing_slot"]
    assert slots["failing_slots"] > 0 and slots["histogram"] == {"1": slots["failing_slots"]}
    assert slots["unexpected_requests"] == []
    recall = figures["defect_recall"]
    assert recall["total"] > 0 and recall["named"] >= 0.9 * recall["total"], recall["missed"]
    agreement = figures["verdict_agreement"]
    assert agreement["agreeing"] == agreement["compared"] > 0, agreement["disagreements"]


def test_demo_savings_agree_with_the_ground_truth(demo_run):
    _, root, _ = demo_run
    figures = orjson.loads((root / "retry_economy.json").read_bytes())
    by_re_evaluation = figures["retries_saved_by_canonicalization"]
    by_truth = figures["ground_truth_saved_by_canonicalization"]
    assert by_re_evaluation["retries_saved"] > 0 and by_re_evaluation["unavailable_slots"] == 0
    assert by_re_evaluation["by_family"] == by_truth["by_family"]


def test_demo_report_has_every_section(demo_run):
    _, root, _ = demo_run
    html = (root / "report.html").read_text(encoding="utf-8")
    for anchor in SECTIONS:
        assert f'<section id="{anchor}">' in html
    assert "<script" not in html and '<span class="ok">holds</span>' in html


# --- the prompt revision, end to end -----------------------------------------------------

def test_run1_counts_the_revised_family_stale_and_plans_one_refresh_per_slot(demo_run):
    _, root, _ = demo_run
    manifest = read_manifest(root / "run1")
    spells = manifest["refresh"]["by_family"]["spells"]
    assert manifest["outcomes"]["spells"]["stale"] > 0 and manifest["refresh"]["refresh_stale"] is True
    assert spells["refresh_requests"] == spells["slots_to_refresh"] > 0
    # Only the revision made attempts stale in this archive: nothing else to refresh.
    assert manifest["refresh"]["refresh_requests"] == spells["refresh_requests"]
    requests = read_rows(root / "run1" / "retry_requests")
    refresh = [r for r in requests if r["kind"] == "refresh"]
    assert len(refresh) == spells["refresh_requests"] and {r["family"] for r in refresh} == {"spells"}
    assert all(r["correction_guidance"] == "" for r in refresh)
    slots = [(r["family"], r["source_id"], r["chunk_id"]) for r in requests]
    assert len(slots) == len(set(slots))  # never two requests for one slot


def test_the_backfill_goes_through_the_provider_files_and_comes_back_current(demo_run):
    _, root, _ = demo_run
    export = orjson.loads((root / "backfill" / "batch" / "export_manifest.json").read_bytes())
    imported = orjson.loads((root / "backfill" / "import" / "import_manifest.json").read_bytes())
    run1 = read_manifest(root / "run1")
    refreshes, retries = run1["refresh"]["refresh_requests"], run1["outputs"]["retry_requests"]
    # Every request of run 1 goes out: the backfill and the retries (the comparison then shows both effects).
    assert export["exported_by_kind"] == {"retry": retries, "refresh": refreshes, "judge": 0} and export["conservation"]["holds"]
    assert imported["imported_by_kind"]["refresh"] == refreshes and imported["conservation"]["holds"]
    for line in (root / "archive" / "candidates-backfill.jsonl").read_bytes().splitlines():
        candidate = orjson.loads(line)
        assert (candidate["prompt_fingerprint"], candidate["schema_fingerprint"]) == current_fingerprints(
            candidate["family"])  # every answer is made under the current assets


def test_run2_accepts_the_current_attempts_over_the_earlier_prompts(demo_run):
    _, root, printed = demo_run
    run1, run2 = read_manifest(root / "run1"), read_manifest(root / "run2")
    before, after = run1["refresh"]["by_family"]["spells"], run2["refresh"]["by_family"]["spells"]
    assert after["current_over_stale"] == before["refresh_requests"]  # every refreshed accepted slot switched
    assert after["artifacts_stale"] == 0 and after["artifacts_current"] == run2["outcomes"]["spells"]["accepted"]
    assert after["refresh_requests"] == 0 and after["slots_to_refresh"] == 0  # once per revision
    earlier = earlier_fingerprints("spells")[0]
    artifacts = read_rows(root / "run2" / "artifacts" / "spells")
    assert artifacts and all(a["provenance"]["prompt_fingerprint"] != earlier for a in artifacts)
    assert f"run 2: {after['artifacts_current']} of {after['artifacts_current']} artifacts from the revised prompt" in printed
    html = (root / "report.html").read_text(encoding="utf-8")
    assert '<section id="refresh">' in html and "artifacts from the current prompt" in html


def test_demo_ends_with_the_comparison_and_the_report_links_it(demo_run):
    """The demo's last step sets run 1 beside run 2: the revised family's refreshed slots show as changed
    records, the retry answers as fixes, and run 2's report carries the comparison and a link to its page."""
    _, root, printed = demo_run
    document = orjson.loads((root / "compare" / "compare.json").read_bytes())
    from pipelines.verify import comparison_problems

    assert comparison_problems(str(root / "compare")) == []
    assert document["runs"]["a"]["folder"] == str(root / "run1") and document["runs"]["b"]["folder"] == str(root / "run2")
    spells = document["by_family"]["spells"]
    assert spells["changes"]["records_changed"] > 0  # the refreshed slots answered under the revised prompt
    assert document["total"]["requests_answered"]["passed"] > 0
    assert document["total"]["changes"]["fix"] > 0  # the retry answers went out too
    assert f"7/7 compare run 1 with run 2 -> {root / 'compare'}" in printed
    html = (root / "report.html").read_text()
    assert 'id="baseline"' in html and 'href="compare/compare.html"' in html


def test_report_baseline_reuses_a_matching_comparison_and_refuses_another(demo_run, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    _, root, _ = demo_run
    repo = Path(__file__).resolve().parent.parent
    before = (root / "compare" / "compare.json").read_bytes()
    done = subprocess.run([sys.executable, "-m", "pipelines.report", "--output", str(root / "run2"), "--html",
                           str(tmp_path / "r.html"), "--baseline", str(root / "run1"), "--comparison",
                           str(root / "compare")], cwd=repo, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (root / "compare" / "compare.json").read_bytes() == before  # reused, not rewritten
    assert 'id="baseline"' in (tmp_path / "r.html").read_text()
    refused = subprocess.run([sys.executable, "-m", "pipelines.report", "--output", str(root / "run1"), "--html",
                              str(tmp_path / "r2.html"), "--baseline", str(root / "run2"), "--comparison",
                              str(root / "compare")], cwd=repo, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 1 and "holds something other than the comparison" in refused.stderr
