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
