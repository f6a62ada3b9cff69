"""`make demo` at small scale: simulated archive -> job (Avro) -> retry economy -> HTML report."""

from __future__ import annotations

import contextlib
import io

import orjson
import pytest

from pipelines import demo
from pipelines.outputs import read_manifest
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
                 "job/manifest.json", "retry_economy.json", "report.html"):
        assert (root / path).is_file(), path
    assert read_manifest(root / "job")["conservation"]["holds"]


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
