"""bench.instructions: reading callgrind's count, and what it refuses to count."""

import pytest

from bench.instructions import instructions_of, main

HEADER = b"""# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 8864
cmd:  python -m bench.loop --summary: 12
part: 1

positions: line
events: Ir
summary: 8477609884

fl=(1) ???
fn=(1) 0x0000000000001100
0 3
"""


def test_the_count_is_the_summary_line_of_the_header():
    assert instructions_of(HEADER) == 8_477_609_884  # not the "--summary: 12" inside the command line


def test_a_file_with_only_the_closing_totals_still_counts():
    assert instructions_of(b"events: Ir\nfn=(1) main\n0 7\ntotals: 7\n") == 7


def test_anything_else_is_refused():
    with pytest.raises(ValueError, match="not a callgrind output"):
        instructions_of(b"==1== I   refs: 8,477,609,884\n")


def test_multi_processing_configurations_are_refused_before_anything_runs(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/valgrind")
    with pytest.raises(SystemExit, match="callgrind counts one process"):
        main(["--configs", "loop,direct-mp2"])


def test_a_configuration_counted_at_two_sizes_splits_into_fixed_part_and_per_candidate_cost():
    from bench.instructions import fixed_and_marginal

    fixed, per_candidate = fixed_and_marginal([(5_000, 3_200_000_000), (10_000, 5_900_000_000)])
    assert per_candidate == pytest.approx(540_000)
    assert fixed == pytest.approx(500_000_000)
    assert fixed_and_marginal([(5_000, 3_200_000_000)]) is None


def test_the_section_says_why_when_valgrind_is_missing(monkeypatch, tmp_path):
    from bench.instructions import section

    monkeypatch.setattr("shutil.which", lambda name: None)
    text = section([5_000], ["loop"], tmp_path, {}, print)
    assert text.startswith("## Instructions") and "valgrind is not installed" in text


def test_the_section_refuses_multi_processing_before_counting(monkeypatch, tmp_path):
    from bench.instructions import section

    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/valgrind")
    with pytest.raises(SystemExit, match="callgrind counts one process"):
        section([5_000], ["loop", "direct-mp2"], tmp_path, {}, print)


def test_a_counted_process_draws_the_same_random_numbers_every_run():
    """Beam samples the elements it sizes with Python's random: seeded (bench/seeded/sitecustomize.py), a count repeats."""
    import os
    import subprocess
    import sys

    from bench.instructions import REPEATABLE_ENV, SEEDED

    env = {**os.environ, **REPEATABLE_ENV, "PYTHONPATH": str(SEEDED)}
    draws = {subprocess.run([sys.executable, "-c", "import random; print(random.random())"], env=env,
                            capture_output=True, text=True, check=True).stdout for _ in range(2)}
    assert len(draws) == 1 and REPEATABLE_ENV["PYTHONHASHSEED"] == "0"


# A callgrind output file in the shape valgrind 3.19 writes: names defined at first use (on an ``ob=`` or a
# ``cob=`` line) and referred back to by number, relative positions, and calls whose inclusive cost follows.
CALLGRIND = """# callgrind format
version: 1
creator: callgrind-3.19.0
cmd:  python -m pipelines.reprocess
part: 1

positions: line
events: Ir
summary: 950

ob=(1) /usr/lib/libpython3.11.so.1.0
fl=(1) ceval.c
fn=(1) _PyEval_EvalFrameDefault
0 400
+2 100
cob=(2) /usr/lib/x86_64-linux-gnu/libcrypto.so.3
cfi=(2) ???
cfn=(2) sha256_block_data_order_avx2
calls=3 0
* 250
cob=(3) /venv/site-packages/zstandard/backend_c.cpython-311-x86_64-linux-gnu.so
cfn=(3) ZSTD_compressBlock
calls=1 0
-1 90

ob=(2)
fl=(2)
fn=(2)
0 200
* 50

ob=(3)
fn=(3)
0 90

ob=(4) /lib/python3.11/lib-dynload/_hashlib.cpython-311-x86_64-linux-gnu.so
fn=(4) _hashlib_openssl_sha256
0 10

ob=(1)
fn=(1)
-3 100

totals: 950
"""


def test_the_cost_of_each_object_file_is_its_own_lines_not_what_it_calls():
    from bench.instructions import cost_by_object

    by_object = cost_by_object(CALLGRIND)
    assert by_object == {"/usr/lib/libpython3.11.so.1.0": 600, "/usr/lib/x86_64-linux-gnu/libcrypto.so.3": 250,
                         "/venv/site-packages/zstandard/backend_c.cpython-311-x86_64-linux-gnu.so": 90,
                         "/lib/python3.11/lib-dynload/_hashlib.cpython-311-x86_64-linux-gnu.so": 10}
    assert sum(by_object.values()) == 950  # every instruction in exactly one object: the summary


def test_the_run_splits_into_sha256_zstd_and_the_rest():
    from bench.instructions import parts_of

    assert parts_of(CALLGRIND) == {"total": 950, "sha256": 260, "zstd": 90}


def test_the_jobs_extra_is_split_in_three_parts_each_net_of_the_loops_own():
    from bench.instructions import split_extra, split_text

    loop = {"total": 370_000, "sha256": 3_000, "zstd": 0}
    job = {"total": 430_000, "sha256": 28_000, "zstd": 15_000}
    split = split_extra(loop, job)
    assert split == {"loop": 370_000, "job": 430_000, "extra": 60_000, "sha256": 25_000, "zstd": 15_000,
                     "beam": 20_000}
    text = split_text(split)
    assert "| SHA-256 of every output byte (the manifest's per-file hash) | 25.0 | 6.8% |" in text
    assert "Beam's own part (the rest" in text and "| 20.0 | 5.4% |" in text
    assert "20.0 k = 5.4% of the loop's 370.0 k | yes |" in text
    over = split_text(split_extra(loop, {**job, "total": 440_000}))
    assert "30.0 k = 8.1% of the loop's 370.0 k | no |" in over


def test_the_baseline_is_this_repositorys_commit_as_a_source_tree_made_once(tmp_path):
    import subprocess

    from bench.archive import REPO
    from bench.instructions import baseline_checkout

    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, text=True, capture_output=True, check=True).stdout
    tree = baseline_checkout("HEAD", tmp_path)
    assert tree.name == head.strip()[:12] and (tree / "domain" / "reprocess.py").is_file()
    (tree / "marker").write_text("kept")
    assert baseline_checkout("HEAD", tmp_path) == tree and (tree / "marker").exists()  # not extracted again
    assert baseline_checkout(str(tmp_path), tmp_path / "other") == tmp_path.resolve()  # a folder as it is
    with pytest.raises(ValueError, match="neither a folder nor a commit"):
        baseline_checkout("no-such-revision-anywhere", tmp_path)


def test_the_section_counts_the_job_on_the_baseline_and_judges_the_cut(monkeypatch, tmp_path):
    import bench.instructions as instructions

    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/valgrind")
    monkeypatch.setattr(instructions, "ensure_archive",
                        lambda spec, cache, log: type("A", (), {"candidates_in": spec.candidates})())
    monkeypatch.setattr(instructions, "checkout_bytecode", lambda checkout: None)
    per = {instructions.REPO: 410_000, tmp_path.resolve(): 462_000}  # instructions per candidate, this tree and the base

    def parts(config, archive, checkout=instructions.REPO, extra=()):
        return {"total": 3_000_000_000 + per[checkout] * archive.candidates_in, "sha256": 0, "zstd": 0}

    monkeypatch.setattr(instructions, "count_parts", parts)
    monkeypatch.setattr(instructions, "count_configuration",
                        lambda config, archive, checkout=instructions.REPO: parts(config, archive, checkout)["total"])
    report: dict = {}
    text = instructions.section([5_000, 10_000], ["direct"], tmp_path, report, lambda *a: None, str(tmp_path))
    assert report["instructions_baseline"]["per_candidate"] == pytest.approx(462_000)
    assert f"at {tmp_path}" in text and "| 462.0 |" in text
    assert "410.0 k against 462.0 k = 0.887x | yes" in text
    elsewhere = instructions.section([5_000, 10_000], ["direct"], tmp_path, {}, lambda *a: None, "no-such-revision")
    assert "Not counted against a baseline: instruction baseline 'no-such-revision' is neither" in elsewhere
