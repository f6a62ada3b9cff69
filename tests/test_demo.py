"""`make demo` at small scale: simulated archive with a prompt revision -> run 1 (Avro, --refresh-stale)
-> export-batch -> simulated batch provider -> import-batch -> run 2 -> retry economy -> HTML reports.
This is the end-to-end test of the three runs of a backfill (contract §6.1)."""

from __future__ import annotations

import contextlib
import gzip
import re
import io
import os
from html import escape

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import NotariusError
from pipelines import demo, demo_folder
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
    judges = run1["outputs"]["judge_requests"]
    # Every request of run 1 goes out: the backfill, the retries and the judges' questions (the comparison
    # then shows every effect).
    assert judges > 0
    assert export["exported_by_kind"] == {"retry": retries, "refresh": refreshes, "judge": judges}
    assert export["conservation"]["holds"]
    assert imported["imported_by_kind"]["refresh"] == refreshes and imported["conservation"]["holds"]
    assert imported["imported_by_kind"]["judge"] == imported["verdicts_written"] == judges
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
    assert f"8/8 compare run 1 with run 2 -> {root / 'compare'}" in printed
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


# --- issue 38: a rerun replaces the earlier demo only when it completes, and only what the demo wrote --------

def tree(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_ctrl_c_during_a_rerun_leaves_the_earlier_demo_and_the_users_files(demo_run, tmp_path):
    """Ctrl-C while the next demo is being built: the earlier complete demo is all there, byte for byte,
    with what the user added beside it (archive/ invites it), and one line is said."""
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    _, root, _ = demo_run
    folder = tmp_path / "demo"
    shutil.copytree(root, folder, symlinks=True)
    (folder / "archive" / "candidates-mine.jsonl").write_text("{}\n")
    (folder / "notes.txt").write_text("mine")
    before = tree(folder)
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.demo", "--output", str(folder), "--candidates", "50"],
                            cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)

    def building_run1() -> bool:  # the next run 1's writers are at work: the earlier demo is set aside
        try:
            return any(name.startswith(".temp-") for name in os.listdir(folder / "run1"))
        except OSError:
            return False

    while proc.poll() is None and not building_run1():
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]  # 0: the demo ended before the signal, which the test must not allow
    # The simulated producer's figures go to stderr too; of the rest, one line from the command the signal stopped.
    said = [line for line in stderr.splitlines() if "interrupted" in line or "Traceback" in line or "Error" in line]
    assert said == [f"notarius-reprocess: interrupted: nothing committed in {folder / 'run1'}"], stderr[-3000:]
    assert tree(folder) == before
    assert not [name for name in os.listdir(folder) if name.startswith(".demo-")]


def _fake_demo(version: str, fail_at: str | None = None, complete: bool = True):
    """Stands for the demo's steps (no Beam): writes a few of its entries, fails or stops where told."""
    def run(args, beam_args, root):
        for rel in ("archive/transcripts.jsonl.gz", "run1/manifest.json", "backfill/batch/requests.jsonl",
                    "report.html"):
            if rel == fail_at:
                raise RuntimeError("a step failed")
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(version)
        return (0, True) if complete else (1, False)
    return run


def test_a_rerun_replaces_what_the_demo_wrote_and_nothing_else(tmp_path, monkeypatch):
    folder = tmp_path / "demo"
    monkeypatch.setattr(demo, "_run", _fake_demo("v1"))
    assert demo.main(["--output", str(folder)]) == 0
    (folder / "archive" / "candidates-mine.jsonl").write_text("mine")
    (folder / "notes.txt").write_text("mine")
    monkeypatch.setattr(demo, "_run", _fake_demo("v2"))
    assert demo.main(["--output", str(folder)]) == 0
    after = tree(folder)
    assert {rel: after[rel] for rel in ("archive/candidates-mine.jsonl", "notes.txt")} == {
        "archive/candidates-mine.jsonl": b"mine", "notes.txt": b"mine"}
    assert all(after[rel] == b"v2" for rel in ("archive/transcripts.jsonl.gz", "run1/manifest.json", "report.html"))
    assert sorted(orjson.loads(after[".notarius-demo"])["files"]) == [
        "archive/transcripts.jsonl.gz", "backfill/batch/requests.jsonl", "report.html", "run1/manifest.json"]
    assert not [name for name in os.listdir(folder) if name.startswith(".demo-")]


@pytest.mark.parametrize("fake", [_fake_demo("v2", fail_at="backfill/batch/requests.jsonl"),
                                  _fake_demo("v2", complete=False)], ids=["a step raises", "a job fails"])
def test_a_rerun_that_does_not_complete_puts_the_earlier_demo_back(tmp_path, monkeypatch, fake):
    folder = tmp_path / "demo"
    monkeypatch.setattr(demo, "_run", _fake_demo("v1"))
    assert demo.main(["--output", str(folder)]) == 0
    (folder / "archive" / "candidates-mine.jsonl").write_text("mine")
    before = tree(folder)
    monkeypatch.setattr(demo, "_run", fake)
    try:
        assert demo.main(["--output", str(folder)]) == 1
    except RuntimeError:
        pass
    assert tree(folder) == before
    assert sorted(os.listdir(folder)) == [".notarius-demo", "archive", "backfill", "report.html", "run1"]


def test_a_first_demo_that_does_not_complete_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    folder = tmp_path / "demo"
    folder.mkdir()
    monkeypatch.setattr(demo, "_run", _fake_demo("v1", fail_at="report.html"))
    with pytest.raises(RuntimeError):
        demo.main(["--output", str(folder)])
    assert os.listdir(folder) == []


def test_the_demo_refuses_to_replace_its_folders_while_they_hold_the_users_files(tmp_path, monkeypatch):
    """What the user put in one of the demo's own folders (a provider's real answers downloaded into
    backfill/results/, as docs/revising-a-prompt.md says) would go with the folder: refused in one line."""
    folder = tmp_path / "demo"
    monkeypatch.setattr(demo, "_run", _fake_demo("v1"))
    assert demo.main(["--output", str(folder)]) == 0
    (folder / "backfill" / "results").mkdir()
    (folder / "backfill" / "results" / "output-1.jsonl").write_text("the provider's answers")
    before = tree(folder)
    with pytest.raises(NotariusError, match=r"demo/backfill/results/ is not the demo's: move it out of run1, backfill"):
        demo.main(["--output", str(folder)])
    assert tree(folder) == before


class _Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs (but ``finally`` blocks, which a second Ctrl-C also reaches)."""


def _renames_until_killed(n: int):
    """``os.rename`` that is killed at its ``n``-th call (from 0)."""
    real, done = os.rename, [0]

    def rename(src, dst):
        if done[0] == n:
            raise _Killed()
        done[0] += 1
        return real(src, dst)
    return rename


def _entries(entries, version: str) -> dict[str, bytes]:
    """The files that stand for the demo's ``entries`` (a folder holds one file)."""
    return {(rel if rel not in demo_folder.OWN_FOLDERS else f"{rel}/part-0"): f"{version} {rel}".encode()
            for rel in entries}


@settings(max_examples=200, deadline=None)
@given(previous=st.sets(st.sampled_from(demo_folder.OWN_ENTRIES)), following=st.sets(st.sampled_from(demo_folder.OWN_ENTRIES)),
       completes=st.booleans(), kill_at=st.integers(0, 30), kill_recovery_at=st.one_of(st.none(), st.integers(0, 30)))
def test_a_demo_killed_at_any_step_leaves_the_last_complete_demo(previous, following, completes, kill_at,
                                                                 kill_recovery_at):
    """Kill a demo at any rename (setting the earlier demo aside, building, putting it back, discarding it),
    and the next demo's recovery at any rename too: once a recovery runs to its end, the folder holds the
    last complete demo (the earlier one unless the discarding rename happened), the user's file untouched,
    and no aside folder."""
    import tempfile
    from pathlib import Path

    def write(root: Path, files: dict[str, bytes]) -> None:
        for rel, data in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)

    users = {"archive/mine.txt": b"the user's"}
    real_rename = os.rename
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        write(root, {**_entries(previous, "old"), **users})
        committed = False
        os.rename = _renames_until_killed(kill_at)
        try:
            aside = demo_folder.set_aside(str(root))
            write(root, _entries(following, "new"))
            if completes:
                demo_folder.discard(str(root), aside)  # one rename, then deleting: no rename after the commit
                committed = True
            else:
                demo_folder.put_back(str(root), aside)
        except _Killed:
            pass
        finally:
            os.rename = real_rename
        if kill_recovery_at is not None:
            os.rename = _renames_until_killed(kill_recovery_at)
            try:
                demo_folder.recover(str(root))
            except _Killed:
                pass
            finally:
                os.rename = real_rename
        demo_folder.recover(str(root))
        assert tree(root) == {**_entries(following if committed else previous, "new" if committed else "old"), **users}
        assert not [name for name in os.listdir(root) if name.startswith(".demo-")]


def test_the_demo_judges_and_run_2_applies_the_verdicts(demo_run):
    """Issue 40 item 7: run 1 asks the judges, the backfill answers them (simulated judge), run 2 applies
    every verdict: a judge's fail moves its slot to a retry whose guidance names the record."""
    _, root, printed = demo_run
    run1, run2 = read_manifest(root / "run1"), read_manifest(root / "run2")
    assert set(run1["options"]["judges"]) == {"combat-semantics", "spell-cast", "npc-identity"}
    assert run2["verdict_conservation"]["holds"] and run2["verdict_conservation"]["applied"] > 0
    assert sum(j["fail"] for j in run2["judges"].values()) > 0
    judged_retries = [r for r in read_rows(root / "run2" / "retry_requests")
                      if r["kind"] == "retry" and "A review of the cited lines found" in r["correction_guidance"]]
    assert judged_retries
    assert "judges:" in printed and "precision" in printed


def test_the_demo_shows_what_the_loop_cost(demo_run):
    """Issue 41 item 5: the simulated producer, provider and judge bill usage derived from their text; the demo
    prices it with the example prices file and prints and shows the cost of each run, of its open requests and
    of the retries canonicalization saved; compare prices B beside A and the refresh round."""
    from pipelines.demo import example_prices

    _, root, printed = demo_run
    prices = orjson.loads(example_prices().read_bytes())
    assert "EXAMPLE ONLY" in prices["note"] and "invented" in prices["note"]
    assert f"prices: {example_prices()} (an EXAMPLE" in printed
    # Most archived attempts carry usage, some do not: the cost is known for part of them, never made up.
    archived = [orjson.loads(line) for line in gzip.open(root / "archive" / "candidates.jsonl.gz")]
    with_usage = [c for c in archived if c.get("usage")]
    assert 0.8 * len(archived) < len(with_usage) < len(archived)
    assert all(c["usage"]["batch"] is False and c["usage"]["output_tokens"] == -(-len(c["raw_response"].encode()) // 4)
               for c in with_usage)
    backfill = [orjson.loads(line) for line in (root / "archive" / "candidates-backfill.jsonl").read_bytes().splitlines()]
    assert backfill and all(c["usage"]["batch"] is True and c["usage"]["input_tokens"] > 0 for c in backfill)
    lines = printed.splitlines()
    attempts = [line for line in lines if "cost of the run's attempts:" in line]
    assert len(attempts) == 2 and all("cost known for" in line and "USD" in line for line in attempts)
    # Run 1 asked the judges and had no answer yet; run 2 applied every verdict, each billed.
    assert [line.split("verdicts: ", 1)[1][:12] for line in lines if "cost of the judges' verdicts: " in line][0] == \
        "no verdicts"
    assert sum("cost of the judges' verdicts: " in line and "cost of all" in line for line in lines) == 1
    assert sum("the retries endpoint canonicalization saved would have cost: " in line and "USD" in line
               for line in lines) == 2
    # Run 1's open requests are what export-batch then states for the same requests: the same rule, the same code.
    opened = next(line for line in lines if "open requests, as export-batch would send them to openai-chat/sim-2" in line)
    export = next(line.strip() for line in lines if line.strip().startswith("estimate: "))
    kinds = re.compile(r"\(([^()]*)\)")  # the kinds in either order (the export's manifest is read back sorted)
    ours, theirs = opened.split(": ", 1)[1], export.removeprefix("estimate: ")
    assert kinds.sub("", ours) == kinds.sub("", theirs)
    assert sorted(kinds.search(ours).group(1).split(", ")) == sorted(kinds.search(theirs).group(1).split(", "))
    assert "the revision's refresh round" in printed and "has no price for" not in printed
    for page in (root / "report.html", root / "run1" / "report.html"):
        html = page.read_text(encoding="utf-8")
        assert '<section id="cost">' in html and "The open requests, before they are sent" in html
    cost = orjson.loads((root / "compare" / "compare.json").read_bytes())["cost"]
    refresh = cost["refresh_round"]["total"]
    assert refresh["attempts"] == read_manifest(root / "run1")["refresh"]["refresh_requests"] and refresh["cost"] > 0
    assert cost["attempts"]["b"]["total"]["cost"] > cost["attempts"]["a"]["total"]["cost"] > 0
    assert cost["unpriced"] == []


# --- issue 42 items 3 and 4: the comparison shows what changed; one name per state ----------------------

def test_the_comparison_names_which_spells_changed_in_each_changed_spells_slot(demo_run):
    """Every spells slot whose records the revision changed says which spells were added, removed or changed
    (by spell and caster, the fields that differ), in slots/ and on its source's page."""
    from analysis.compare_folder import page_name

    _, root, _ = demo_run
    rows = read_rows(root / "compare" / "slots")
    changed = [r for r in rows if r["family"] == "spells" and r["change"] == "records_changed"]
    document = orjson.loads((root / "compare" / "compare.json").read_bytes())
    assert len(changed) == document["by_family"]["spells"]["changes"]["records_changed"] > 0
    for row in changed:
        records = row["records"]
        assert records["listed"] and records["more"] == 0, row  # a chunk's spells fit the bound
        assert records["added"] + records["removed"] + records["changed"] == len(records["listed"])
        page = (root / "compare" / page_name(row["source_id"])).read_text(encoding="utf-8")
        for change in records["listed"]:
            assert change["record"].startswith('The spell "') and '" cast by "' in change["record"], change
            assert (change["change"] == "changed") == bool(change["fields"])
            assert escape(change["record"]) in page


def test_the_comparison_page_lists_every_changed_slot_and_what_to_do_next(demo_run):
    _, root, _ = demo_run
    from analysis.compare import SITUATIONS
    from analysis.compare_folder import page_name

    document = orjson.loads((root / "compare" / "compare.json").read_bytes())
    html = (root / "compare" / "compare.html").read_text(encoding="utf-8")
    rows = read_rows(root / "compare" / "slots")
    assert len(rows) == document["total"]["changed_slots"] > 20  # more than the old page's cap of 20 per kind
    pages = {}
    for row in rows:
        name = page_name(row["source_id"])
        if name not in pages:
            pages[name] = (root / "compare" / name).read_text(encoding="utf-8")
            assert f'<a href="{name}">' in html
        assert f"<td>{escape(row['chunk_id'])}</td><td>{row['transition']['from']} → " in pages[name]
    assert sum(page.count("<tr><td>") for page in pages.values()) == len(rows)
    assert set(orjson.loads((root / "compare" / "manifest.json").read_bytes())["documents"]) == {
        "compare.json", "compare.html", *pages}
    situations = document["total"]["situations"]
    assert sum(situations.values()) == len(rows) and set(situations) == set(SITUATIONS)
    for name, n in situations.items():
        assert (f'id="situation-{name}"' in html) == bool(n)
    if document["total"]["changes"]["regression"]:  # every regression says why, and what to do next
        assert "what to do next" in html and "export-batch --retry-requests" in html


def test_one_name_per_state_in_the_job_its_manifest_and_the_comparison(demo_run):
    """Issue 42 item 4: the comparison counts each run's slots by the outcomes the run's manifest counts
    (a reconciliation waiting for its entry list is deferred in both), and the refresh counts the demo prints
    say one thing."""
    _, root, printed = demo_run
    from domain.manifest import refresh_reasons

    document = orjson.loads((root / "compare" / "compare.json").read_bytes())
    for run, side in (("run1", "a"), ("run2", "b")):
        manifest = read_manifest(root / run)
        for family, block in document["by_family"].items():
            transitions = block["transitions"]
            if side == "a":
                counted = {src: sum(row.values()) for src, row in transitions.items()}
            else:
                counted = {}
                for row in transitions.values():
                    for dst, n in row.items():
                        counted[dst] = counted.get(dst, 0) + n
            for outcome in ("accepted", "retry", "deferred"):
                assert counted.get(outcome, 0) == manifest["outcomes"][family][outcome], (run, family, outcome)
            assert counted.get("exhausted", 0) + counted.get("refresh", 0) == manifest["outcomes"][family]["exhausted"]
    run2 = read_manifest(root / "run2")["refresh"]
    stale, waiting = refresh_reasons(run2)
    assert stale == 0  # the revision's refreshes were answered: nothing rests on the earlier prompt
    assert "rest only on attempts under an earlier prompt" not in printed.split("7/8 reprocess job, run 2")[1]
    if run2["refresh_requests"]:
        assert f"{run2['refresh_requests']} refresh request(s) in retry_requests/ (kind refresh): {waiting} for " \
               "reconciliation slots deferred, waiting for their entry list" in printed
        assert f"run 2 wrote {run2['refresh_requests']} refresh request(s): 0 for slots resting only on an earlier " \
               f"prompt, {waiting} for reconciliation slots deferred, waiting for their entry list" in printed
    else:
        assert "run 2 wrote" not in printed
    assert "refresh requests left" not in printed and "0 spells slots left on the earlier prompt" in printed


def test_the_examples_of_docs_outputs_md_are_rows_of_the_demo(demo_run):
    """Every example docs/outputs.md says comes from out/demo/ is a row there (this demo is smaller than make demo's:
    the examples are rows it writes too)."""
    from doc_examples import missing_examples
    from docgen.data_dictionary import example_sources

    _, root, _ = demo_run
    assert len([e for e in example_sources() if e.folder.startswith("out/demo/")]) >= 12
    assert missing_examples("out/demo/", root) == []


def test_the_manifest_example_is_the_demos_run_2_manifest_cut(demo_run):
    """The manifest docs/outputs.md shows is run 2's, cut (its counts are make demo's, which this smaller demo
    cannot have; what does not depend on the archive's size is the same)."""
    from docgen.data_dictionary import manifest_paths
    from docgen.manifest_prose import MANIFEST_CUT, MANIFEST_EXAMPLE, MANIFEST_EXAMPLE_FROM, cut_manifest

    _, root, _ = demo_run
    assert MANIFEST_EXAMPLE_FROM == "out/demo/run2/manifest.json"
    cut = cut_manifest(read_manifest(root / "run2"), str(root.resolve()))
    assert manifest_paths(cut) == manifest_paths(MANIFEST_EXAMPLE)
    for block in ("fingerprints", "options", "runner", "unreadable_files", "prior_registry_conservation"):
        assert cut[block] == MANIFEST_EXAMPLE[block], block
    judge = MANIFEST_CUT["judge"]
    for key in ("family", "fingerprint"):
        assert cut["judges"][judge][key] == MANIFEST_EXAMPLE["judges"][judge][key]
    assert [f["path"] for files in cut["files"].values() for f in files] == [
        f["path"] for files in MANIFEST_EXAMPLE["files"].values() for f in files]
