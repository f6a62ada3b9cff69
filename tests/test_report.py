"""The HTML report: its content, its escaping, its commands, and how it renders in headless Chromium."""

from __future__ import annotations

import dataclasses
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import orjson
import pytest

from analysis.compare_folder import comparison_document, rows_block
from analysis.retry_economy import retry_economy
from analysis.savings import recorded_savings
from analysis.run_summary import summarize_run
from domain.families import FAMILIES
from domain.manifest import build_manifest
from domain.reprocess import RunConfig, process_source
from domain.run_integrity import OutputFile, files_block
from pipelines import report, retry_economy as economy_cli
from pipelines.pages import html as html_page, report as run_page
from pipelines.retry_economy import RunFigures
from pipelines.truth import GroundTruth
from sample.sim_vocabulary import SIMULATED_REASON_CODES, SIMULATED_VOCABULARY, truth_vocabulary_line
from test_retry_economy import MAX_ATTEMPTS, PLAN, VOCABULARY, hand_run, transcript_record
from transforms.files import format_of, read_file_facts

ROOT = Path(__file__).resolve().parent.parent
ENSURE_CHROMIUM = ROOT / "scripts" / "ensure_chromium.sh"
SECTIONS = ("outcomes", "conservation", "stale", "defects", "canonicalization", "retry-economy", "examples")
HOSTILE = '<script>alert(1)</script> & "quoted" </pre><b>bold</b>'
ACCEPTED_RGB = (0x2E, 0x7D, 0x32)


def figures_of(run, requests=None, truth=True, savings=True) -> RunFigures:
    requests = tuple(run.requests if requests is None else requests)
    manifest = build_manifest(run.counts, options={"max_attempts": MAX_ATTEMPTS}, runner="hand")
    economy = retry_economy(run.truth, run.evaluations, requests, MAX_ATTEMPTS, VOCABULARY) if truth else None
    kinds = {}
    for row in run.truth:
        for d in row.defects:
            kinds[d.kind] = kinds.get(d.kind, 0) + 1
    return RunFigures(
        output_dir="out/hand", manifest=manifest, summary=summarize_run(lambda: run.evaluations, lambda: requests),
        savings=recorded_savings(manifest) if savings else None,
        savings_note="" if savings else "the archive is not at hand",
        truth=GroundTruth(Path("truth.jsonl"), SIMULATED_VOCABULARY, SIMULATED_REASON_CODES) if truth else None,
        truth_kinds=kinds if truth else {}, economy=economy)


@pytest.fixture(scope="module")
def run():
    return hand_run()


@pytest.fixture(scope="module")
def hostile_html(run) -> str:
    """A report whose example request carries markup the page must show as text."""
    base = run.requests[0]
    hostile = dict(base, request_id="r-hostile", correction_guidance="\n- ".join([HOSTILE] * 6))
    return run_page.render_report(figures_of(run, (*run.requests, hostile)))


# --- content ------------------------------------------------------------------------------------

def test_report_has_every_section_and_escapes_data(hostile_html):
    for anchor in SECTIONS:
        assert f'<section id="{anchor}">' in hostile_html
    assert "<script" not in hostile_html and "<b>bold" not in hostile_html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quoted&quot; &lt;/pre&gt;" in hostile_html
    assert "Content-Security-Policy" in hostile_html and "http://" not in hostile_html.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")


def test_report_shows_the_figures(run):
    html = run_page.render_report(figures_of(run))
    assert f"{len(PLAN)} candidates in = {len(PLAN)} evaluated + 0 dead letters + 0 filtered" in html
    assert "retries saved, of 7 accepted slots" in html and "deferrals avoided too" in html
    assert "defect recall (3 of 3 named)" in html
    assert "leaks in retry guidance (must be 0)" in html
    assert "requests per failing slot, 2 slots (must be 1)" in html
    assert "Method: recorded by the job, nothing is re-evaluated" in html
    # The example requests are the job's guidance, verbatim but escaped.
    enemy = next(r for r in run.requests if r["family"] == "enemy-events")
    assert html_page.e(enemy["correction_guidance"]) in html


def test_report_is_deterministic(run):
    assert run_page.render_report(figures_of(run)) == run_page.render_report(figures_of(run))


def test_report_without_truth_or_archive_says_what_is_missing(run):
    html = run_page.render_report(figures_of(run, truth=False, savings=False))
    assert "Not computed: the archive is not at hand." in html
    assert "Pass <code>--truth</code>" in html
    assert "From the ground truth" not in html


def test_examples_prefer_long_requests_one_per_family(run):
    base = run.requests[0]
    requests = [dict(base, request_id=f"r-{n}", family=f, correction_guidance="x" + "\n- y" * n)
                for n, f in enumerate(["a", "a", "b", "c", "d"])]
    chosen = summarize_run(lambda: (), lambda: requests).examples
    assert [r["family"] for r in chosen] == ["d", "c", "b"]



def section_of(html: str, anchor: str) -> str:
    start = html.index(f'<section id="{anchor}">')
    return html[start:html.index("</section>", start)]


def test_a_run_with_nothing_to_refresh_says_so_instead_of_zero_cards(run):
    """Run 2 of the demo: nothing rests on an earlier prompt; three "0" cards read as "nothing happened"."""
    refresh = section_of(run_page.render_report(figures_of(run)), "refresh")
    assert "no slot rests only on an earlier prompt in this run" in refresh
    for label in ("slots resting only on an earlier prompt", "refresh requests written",
                  "characters of excerpt they send"):
        assert label not in refresh
    assert "7 of 7</b>artifacts from the current prompt" in refresh


def test_a_run_with_slots_to_refresh_keeps_its_cards(run):
    figures = figures_of(run)
    manifest = {**figures.manifest, "refresh": {**figures.manifest["refresh"], "slots_to_refresh": 3,
                                                "slots_on_earlier_prompt": 3, "refresh_requests": 3,
                                                "excerpt_chars": 1200, "refresh_stale": True}}
    refresh = section_of(run_page.render_report(dataclasses.replace(figures, manifest=manifest)), "refresh")
    assert "<b>3</b>slots resting only on an earlier prompt" in refresh and "<b>1,200</b>" in refresh
    assert "no slot rests only on an earlier prompt" not in refresh.lower()
    assert "waiting for their entry list</div>" not in refresh


@pytest.mark.parametrize("counted", [True, False], ids=["counted", "a run written before it was counted"])
def test_reconciliations_waiting_for_their_entry_list_are_not_said_to_rest_on_an_earlier_prompt(run, counted):
    """Issue 42 item 4: run 2 of the demo refreshes reconciliations whose entry list changed; no prompt changed."""
    figures = figures_of(run)
    block = {**figures.manifest["refresh"], "slots_to_refresh": 2, "entry_list_slots_waiting": 2,
             "refresh_requests": 2, "excerpt_chars": 900, "refresh_stale": True, "slots_on_earlier_prompt": 0}
    if not counted:
        del block["slots_on_earlier_prompt"]
    manifest = {**figures.manifest, "refresh": block}
    refresh = section_of(run_page.render_report(dataclasses.replace(figures, manifest=manifest)), "refresh")
    assert "<b>0</b>slots resting only on an earlier prompt" in refresh
    assert "<b>2</b>reconciliation slots deferred, waiting for their entry list" in refresh
    assert "No slot rests only on an earlier prompt</b>: every slot to refresh is a reconciliation" in refresh


def comparison_of(answers: dict[tuple[str, str, str], int]) -> dict:
    """A comparison document whose run A's requests were answered in B as ``answers`` says:
    (family, request kind, answer status) -> requests."""
    tallies = {("answer", *key): n for key, n in answers.items()}
    listed = {run: {"evaluations": 0, "retry_requests": 0, "artifacts": 0} for run in ("a", "b")}
    return comparison_document(tallies, families=sorted({family for family, _, _ in answers}),
                               runs={"a": {"folder": "out/run1"}, "b": {"folder": "out/run2"}},
                               rows=rows_block(listed, {}))


def test_with_a_baseline_the_backfill_section_says_what_the_backfill_answered(run):
    document = comparison_of({("spells", "refresh", "passed"): 117, ("spells", "refresh", "failed_again"): 1,
                              ("spells", "refresh", "unanswered"): 1, ("npc-registry", "retry", "passed"): 2,
                              ("combat-turns", "retry", "unanswered"): 41})
    html = run_page.render_report(figures_of(run), (document, "compare/compare.html"))
    refresh = section_of(html, "refresh")
    assert ("this run answered: 118 of 119 refresh requests answered (117 passed, 1 failed again, 0 deferred); "
            "2 of 43 retry requests answered (2 passed, 0 failed again, 0 deferred).") in refresh
    assert "<b>118 of 119</b>refresh requests of the baseline run answered in this run" in refresh
    assert '<b class="fail">117</b>of those answers passed' in refresh
    assert "no slot rests only on an earlier prompt in this run" in refresh  # this run wrote none itself
    # Without a baseline, nothing is said about one.
    assert "What the backfill answered" not in section_of(run_page.render_report(figures_of(run)), "refresh")


def test_a_baseline_that_wrote_no_refresh_request_says_so(run):
    document = comparison_of({("spells", "retry", "unanswered"): 5})
    refresh = section_of(run_page.render_report(figures_of(run), (document, "c.html")), "refresh")
    assert "this run answered: no refresh request; 0 of 5 retry requests answered." in refresh
    assert "refresh requests of the baseline run answered" not in refresh


def test_the_defect_charts_say_how_their_vocabularies_map(run):
    """Reason codes (evaluations) against injected kinds (truth): one kind, several codes, said and shown."""
    defects = section_of(run_page.render_report(figures_of(run)), "defects")
    assert "The two charts count in different words" in defects
    # The hand run's truth injects 4 blank names; one hides behind truncated JSON, so 3 issues report them.
    assert ("<tr><td><code>blank_name</code></td><td>4</td><td><code>blank_name</code> 3, "
            "<code>blank_spell_name</code> 0, <code>blank_caster_name</code> 0, <code>blank_npc_name</code> 0, "
            "<code>blank_item_name</code> 0, <code>blank_location_name</code> 0, <code>blank_actor_name</code> 0, "
            "<code>blank_enemy_name</code> 0</td><td>3</td></tr>") in defects
    assert "<tr><td><code>truncated_json</code></td><td>1</td><td><code>invalid_json</code> 1</td><td>1</td></tr>" \
        in defects
    assert "<tr><td><code>duplicate_engaged</code></td><td>1</td><td><code>duplicate_engaged</code> 1</td>" in defects
    # Without the truth there is one chart, and nothing to map.
    assert "count in different words" not in section_of(
        run_page.render_report(figures_of(run, truth=False)), "defects")


def test_the_mapping_covers_every_blocking_kind_of_the_simulated_producer():
    from sample.sim_defects import BLOCKING_KINDS
    from sample.sim_reconciliation import ReconciliationDefect

    mapping = SIMULATED_REASON_CODES
    assert set(mapping) == {str(k) for k in (*BLOCKING_KINDS, *ReconciliationDefect)}
    assert not set(mapping) & {str(k) for k in SIMULATED_VOCABULARY.benign}
    assert len(mapping["blank_name"]) == 8 and all(c.startswith("blank_") for c in mapping["blank_name"])


def test_a_reason_code_no_kind_maps_to_is_named(run):
    figures = figures_of(run)
    summary = dataclasses.replace(figures.summary, reason_codes={**figures.summary.reason_codes, "round_below_one": 2})
    defects = section_of(run_page.render_report(dataclasses.replace(figures, summary=summary)), "defects")
    assert "the simulated producer does not inject them): <code>round_below_one</code> 2." in defects


def test_the_header_shows_paths_relative_to_the_report(run, tmp_path):
    figures = figures_of(run)
    figures = dataclasses.replace(figures, output_dir=str(tmp_path / "demo" / "run2"), truth=dataclasses.replace(
        figures.truth, path=tmp_path / "demo" / "backfill" / "ground-truth.jsonl"))
    written = report.write_report(figures, tmp_path / "demo" / "report.html")
    meta = Path(written).read_text(encoding="utf-8").split('<p class="meta">', 1)[1].split("</p>", 1)[0]
    assert meta.startswith("Outputs: run2 · runner: hand · ground truth: backfill/ground-truth.jsonl")
    assert str(tmp_path) not in meta
    # A report inside the run's folder; a remote run stays as given.
    html = run_page.render_report(figures, report_dir=str(tmp_path / "demo" / "run2"))
    assert "Outputs: . (this folder)" in html and "ground truth: ../backfill/ground-truth.jsonl" in html
    remote = dataclasses.replace(figures, output_dir="gs://bucket/runs/run2")
    assert "Outputs: gs://bucket/runs/run2 ·" in run_page.render_report(remote, report_dir=str(tmp_path))


def test_shown_path():
    assert run_page.shown_path("/a/b/run2", "/a/b") == "run2"
    assert run_page.shown_path("/a/archive/t.jsonl", "/a/b") == "../archive/t.jsonl"
    assert run_page.shown_path("s3://bucket/run", "/a/b") == "s3://bucket/run"
    assert run_page.shown_path("/a/b/run2", "gs://bucket/x") == "/a/b/run2"
    assert run_page.shown_path("/a/b/run2", None) == "/a/b/run2"
    assert report.report_folder("gs://bucket/x/report.html") == "gs://bucket/x"


# --- the commands, over files ------------------------------------------------------------------

def files_of(job: Path) -> dict[str, list[dict]]:
    """The manifest's ``files`` block for the ``part-*`` files of a folder made by hand."""
    described = []
    for path in sorted(job.rglob("part-*")):
        fmt = format_of(str(path))
        facts = read_file_facts(str(path), fmt)
        described.append(OutputFile(path.relative_to(job).as_posix(), fmt, facts.bytes, facts.sha256, facts.rows))
    return files_block(described)


def write_job(run, root: Path, requests=None) -> tuple[Path, Path]:
    """The hand run as a job output folder (JSON Lines) plus its archive and truth."""
    archive = root / "archive"
    archive.mkdir(parents=True)
    (archive / "transcripts.jsonl").write_bytes(
        b"\n".join(orjson.dumps(transcript_record(s)) for s in ("S1", "S2")) + b"\n")
    (archive / "candidates.jsonl").write_bytes(b"\n".join(p.line() for p in PLAN) + b"\n")
    truth = archive / "ground-truth.jsonl"
    truth.write_bytes(truth_vocabulary_line() + b"\n".join(orjson.dumps(p.truth()) for p in PLAN) + b"\n")
    job = root / "job"
    for name, rows in (("evaluations", run.evaluations), ("retry_requests", run.requests if requests is None else requests),
                       ("dead_letters", ())):
        (job / name).mkdir(parents=True)
        (job / name / "part-00000-of-00001.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    options = {"transcripts": str(archive / "transcripts.jsonl"), "candidates": str(archive / "candidates.jsonl"),
               "max_attempts": MAX_ATTEMPTS}
    # Every output the job writes, artifacts/<family> too (an empty shard for a family without any):
    # verify refuses a folder without one of them.
    artifacts = [artifact for source_id in ("S1", "S2") for artifact in process_source(
        source_id, [orjson.dumps(transcript_record(source_id))], [p.line() for p in PLAN if p.source_id == source_id],
        RunConfig(max_attempts=MAX_ATTEMPTS)).artifacts]
    for family in sorted(FAMILIES):
        (job / "artifacts" / family).mkdir(parents=True)
        (job / "artifacts" / family / "part-00000-of-00001.jsonl").write_bytes(
            b"".join(orjson.dumps(a) + b"\n" for a in artifacts if a["family"] == family))
    manifest = {**build_manifest(run.counts, options=options, runner="hand"), "files": files_of(job)}
    (job / "manifest.json").write_bytes(orjson.dumps(manifest))
    return job, truth


def test_report_command_writes_and_prints_the_report(run, tmp_path, capsys):
    job, truth = write_job(run, tmp_path)
    assert report.main(["--output", str(job), "--truth", str(truth)]) == 0
    out = capsys.readouterr().out
    assert f"report: {job / 'report.html'}" in out
    html = (job / "report.html").read_text(encoding="utf-8")
    assert "retries saved, of 7 accepted slots" in html and "per the ground truth" in html


def test_retry_economy_command(run, tmp_path, capsys):
    job, truth = write_job(run, tmp_path)
    assert economy_cli.main(["--truth", str(truth), "--output", str(job)]) == 0
    figures = orjson.loads((job / "retry_economy.json").read_bytes())
    assert figures["ok"] and figures["leaks"]["count"] == 0
    assert figures["defect_recall"]["named"] == figures["defect_recall"]["total"] == 3
    assert figures["requests_per_failing_slot"]["histogram"] == {"1": 2}
    assert figures["retries_saved_by_canonicalization"]["by_family"] == {"npc-registry": 2, "spells": 1}
    assert figures["ground_truth_saved_by_canonicalization"]["slots"] == 3
    assert "leaks in retry guidance: 0" in capsys.readouterr().out


def test_retry_economy_command_fails_on_a_leak(run, tmp_path):
    leaky = [dict(r, correction_guidance=r["correction_guidance"] + f" ({r['candidate_id']})") for r in run.requests]
    job, truth = write_job(run, tmp_path, requests=leaky)
    assert economy_cli.main(["--truth", str(truth), "--output", str(job), "--json", str(tmp_path / "f.json")]) == 1
    assert orjson.loads((tmp_path / "f.json").read_bytes())["leaks"]["count"] == 2


# --- headless Chromium ----------------------------------------------------------------------------

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         "--force-color-profile=srgb", "--enable-logging=stderr", "--v=0")


def find_browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


@pytest.fixture(scope="module")
def chromium() -> str:
    """A headless Chromium; installed by scripts/ensure_chromium.sh when that is possible."""
    path = find_browser()
    if path is None:
        result = subprocess.run(["sh", str(ENSURE_CHROMIUM)], capture_output=True, text=True, timeout=1200)
        path = find_browser()
        if path is None:
            reason = (result.stdout.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
            pytest.skip(f"no headless Chromium can be had here: {reason}")
    return path


def browse(chromium: str, page: Path, tmp_path: Path, *action: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    profile.mkdir()
    return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *action, page.as_uri()],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "HOME": str(tmp_path)})


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def png_pixels(path: Path) -> tuple[int, int, int, bytes]:
    """(width, height, channels, unfiltered pixel bytes) of an 8-bit RGB(A) PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    channels = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(b"".join(idat)), width * channels
    out, previous = bytearray(), bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        out += line
        previous = line
    return width, height, channels, bytes(out)


@pytest.fixture(scope="module")
def report_page(hostile_html, tmp_path_factory) -> Path:
    page = tmp_path_factory.mktemp("page") / "report.html"
    page.write_text(hostile_html, encoding="utf-8")
    return page


def test_chromium_renders_the_report_without_console_errors(chromium, report_page, tmp_path):
    result = browse(chromium, report_page, tmp_path, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    for anchor in SECTIONS:
        assert f'<section id="{anchor}">' in dom
    assert dom.count("<rect") > 10  # the bar charts are in the page
    assert "<script" not in dom and "<b>bold</b>" not in dom  # the hostile guidance stayed text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    assert console_lines(result.stderr) == []


def test_console_check_sees_a_console_error(chromium, tmp_path):
    """The control for the test above: a page that loads a remote image logs a console error."""
    page = tmp_path / "bad.html"
    page.write_text(f'<!DOCTYPE html><html><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" '
                    f'content="{html_page.CSP}"><title>x</title></head><body>'
                    '<img src="https://example.invalid/x.png"></body></html>', encoding="utf-8")
    result = browse(chromium, page, tmp_path, "--dump-dom")
    assert console_lines(result.stderr), result.stderr[-2000:]


def test_chromium_screenshot_is_not_blank(chromium, report_page, tmp_path):
    shot = tmp_path / "shot.png"
    result = browse(chromium, report_page, tmp_path, "--window-size=1000,900", f"--screenshot={shot}")
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    width, height, channels, pixels = png_pixels(shot)
    assert (width, height) == (1000, 900)
    colours = {pixels[i:i + 3] for i in range(0, len(pixels), channels * 7)}
    assert len(colours) > 20  # text, bars, rules: not one flat colour
    accepted = sum(1 for i in range(0, len(pixels), channels) if tuple(pixels[i:i + 3]) == ACCEPTED_RGB)
    assert accepted > 500  # the accepted bars were painted


def test_ensure_chromium_script_reports_the_browser(chromium):
    result = subprocess.run(["sh", str(ENSURE_CHROMIUM)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert result.stdout.strip() == f"chromium: {shutil.which(Path(chromium).name)}"
