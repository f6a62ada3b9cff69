"""The targets make bench prints are the ones in force (issue 43), judged on the figures given."""

import pytest

from bench import peers, run
from bench.targets import BEAM_TARGET, beam_part_row, pyspark_row

RETIRED = ("20,000", "0.85x", "0.5x")


def measured(wall_s: float, candidates: int = 101_520) -> dict:
    return {"wall_s": wall_s, "rate": candidates / wall_s}


def peers_result(mp2_wall: float, spark_wall: float, candidates: int = 101_520) -> dict:
    """bench.peers' result for one size, three rounds of each configuration at the given walls."""
    raw = {"loop": [measured(5.0, candidates)] * 3, "direct": [measured(7.4, candidates)] * 3,
           "direct-mp2": [measured(mp2_wall, candidates)] * 3, "spark-p4": [measured(spark_wall, candidates)] * 3}
    summaries = {name: {"rate": {"median": rows[0]["rate"], "min": rows[0]["rate"], "max": rows[0]["rate"], "n": 3}}
                 for name, rows in raw.items()}
    return {"points": [{"size": candidates, "candidates": candidates, "summaries": summaries, "raw": raw}]}


def printed(rows) -> str:
    return "\n".join(" | ".join(str(cell) for cell in row) for row in rows)


@pytest.mark.parametrize("spark_wall, verdict", [(10.0, "yes"), (7.0, "no")])
def test_peers_print_the_pyspark_target_in_force_and_judge_it_on_the_rounds(spark_wall, verdict):
    rows = peers.targets(peers_result(mp2_wall=4.0, spark_wall=spark_wall))
    pyspark = [row for row in rows if row[0].startswith("job on 2 workers vs the best PySpark")]
    assert len(pyspark) == 1 and pyspark[0][0].endswith(": 2x")
    assert pyspark[0][1].startswith(f"{spark_wall / 4.0:.3f}x") and pyspark[0][2] == verdict
    assert not any(retired in printed(rows) for retired in RETIRED)


def test_peers_print_beams_own_part_from_the_instruction_section_when_it_ran():
    without = peers.targets(peers_result(4.0, 10.0))
    assert [BEAM_TARGET, "in make bench's instruction section (bench.instructions)", "-"] in without
    within = peers.targets(peers_result(4.0, 10.0), beam_part=(20_000.0, 370_000.0))
    assert [BEAM_TARGET, "20.0 k = 5.4% of the loop's 370.0 k", "yes"] in within
    over = peers.targets(peers_result(4.0, 10.0), beam_part=(25_000.0, 370_000.0))
    assert [BEAM_TARGET, "25.0 k = 6.8% of the loop's 370.0 k", "no"] in over


def test_at_a_million_the_job_on_two_workers_only_has_to_be_ahead():
    assert pyspark_row(1.2, 1_000_000)[0].endswith(": ahead") and pyspark_row(1.2, 1_000_000)[2] == "yes"
    assert pyspark_row(0.9, 1_000_000)[2] == "no"
    assert pyspark_row(1.99, 101_520)[2] == "no" and pyspark_row(2.0, 101_520)[2] == "yes"


def test_beams_own_part_is_met_at_six_percent_of_the_loop_and_not_above():
    assert beam_part_row(6_000, 100_000)[2] == "yes"
    assert beam_part_row(6_001, 100_000)[2] == "no"


def test_make_bench_summary_prints_the_targets_in_force_not_the_retired_ones():
    sbs = {f"{key}/jsonl": {"rate": {"median": rate}, "cpu_s": {"median": 1.0}}
           for key, rate in (("loop", 25_000.0), ("direct", 14_000.0), ("direct-mp2", 25_000.0), ("direct-mp1", 13_000.0))}
    report = {"side_by_side": sbs, "peers": peers_result(mp2_wall=4.0, spark_wall=10.0),
              "instructions_split": {"loop": 370_000.0, "job": 430_000.0, "extra": 60_000.0, "sha256": 25_000.0,
                                     "zstd": 15_000.0, "beam": 20_000.0}}
    text = run.targets(report)
    assert "job on 2 workers vs the best PySpark at 101,520: 2x | 2.500x (within rounds 2.50–2.50x) | yes" in text
    assert f"{BEAM_TARGET} | 20.0 k = 5.4% of the loop's 370.0 k | yes" in text
    assert not any(retired in text for retired in RETIRED)
    assert "candidates/s (one core)" not in text


def test_without_peers_or_instructions_the_summary_names_no_target_it_cannot_judge():
    text = run.targets({"side_by_side": {}})
    assert "PySpark" not in text and BEAM_TARGET not in text


def test_the_instruction_cut_is_met_at_ninety_percent_of_the_baselines_count_and_not_above():
    from bench.targets import instruction_cut_row

    assert instruction_cut_row(415_800.0, 462_000.0, "868435c")[1:] == ["415.8 k against 462.0 k = 0.900x", "yes"]
    assert instruction_cut_row(416_000.0, 462_000.0, "868435c")[2] == "no"


def test_make_bench_summary_judges_the_instruction_cut_when_a_baseline_was_counted():
    from bench.targets import instruction_cut_of

    report = {"instructions": {"direct": {"per_candidate": 410_000.0}}}
    assert instruction_cut_of(report) is None  # no baseline counted: no row, not a "no"
    report["instructions_baseline"] = {"revision": "868435c", "per_candidate": 461_700.0}
    text = run.targets(report)
    assert ("job in-process's instructions per further candidate <= 0.90x 868435c's | "
            "410.0 k against 461.7 k = 0.888x | yes") in text
