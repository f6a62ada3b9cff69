"""bench.judges: the judges' cost beside the job without, on a tiny archive; and how the figures are made."""

import json

import pytest

from bench import judges


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One round of bench.judges' section at 200 candidates: archive, first round, judges off and on."""
    root = tmp_path_factory.mktemp("judges")
    report: dict = {}
    text = judges.section([200], 1, root / "cache", root / "scratch", report, lambda message: None)
    return report["judges"]["points"][0], text, root


def test_every_judge_request_of_the_first_run_gets_a_verdict_and_the_run_applies_them_all(measured):
    point, _, root = measured
    assert point["judge_requests"] > 0 and point["verdicts"] == point["judge_requests"]
    # point_of stops the bench unless the manifest's verdict conservation counts every verdict applied
    assert point["runs"] == 1 and point["candidates"] >= 200  # the producer writes at least as many as asked
    truth = next((root / "cache").glob("c200-*")) / judges.JUDGE_TRUTH
    assert truth.exists() and any(json.loads(line)["judge_defects"] for line in truth.read_bytes().splitlines())


def test_the_cost_per_candidate_and_per_verdict_is_computed_from_the_measured_cpu(measured):
    point, text, _ = measured
    off, on = point["configs"]["off"]["cpu_s"]["median"], point["configs"]["on"]["cpu_s"]["median"]
    assert off > 0 and on > 0
    assert point["extra_cpu_us_per_candidate"]["median"] == pytest.approx((on - off) / point["candidates"] * 1e6)
    assert point["cpu_us_per_verdict"]["median"] == pytest.approx((on - off) / point["verdicts"] * 1e6)
    assert point["configs"]["on"]["rss_mb"]["median"] > 0
    assert text.startswith("## Judges") and f"{point['verdicts']:,} verdicts, every one applied" in text


def rounds(applied: int, verdicts_in: int) -> list[dict]:
    off = {"cpu_s": 10.0, "wall_s": 12.0, "rss_mb": 500.0, "load1": 1.0}
    on = {"cpu_s": 12.0, "wall_s": 14.0, "rss_mb": 650.0, "load1": 1.0,
          "verdicts": {"verdicts_in": verdicts_in, "applied": applied}}
    return [{"off": off, "on": on}]


def test_the_figures_per_candidate_and_per_verdict():
    point = judges.point_of(100_000, {"judge_requests": 20_000, "verdicts": 20_000}, rounds(20_000, 20_000))
    assert point["cpu_us_per_candidate"] == {"off": pytest.approx(100.0), "on": pytest.approx(120.0)}
    assert point["extra_cpu_us_per_candidate"]["median"] == pytest.approx(20.0)
    assert point["extra_cpu_share"]["median"] == pytest.approx(0.2)
    assert point["cpu_us_per_verdict"]["median"] == pytest.approx(100.0)
    assert point["extra_rss_mb"]["median"] == pytest.approx(150.0)


def test_a_round_that_left_a_verdict_unapplied_stops_the_bench():
    with pytest.raises(SystemExit, match="applied 19999"):
        judges.point_of(100_000, {"judge_requests": 20_000, "verdicts": 20_000}, rounds(19_999, 20_000))


def test_judges_off_is_held_against_the_baseline_within_the_counters_noise():
    counted = {"candidates": 5_000, "verdicts": 1_000, "off": 2_000_000_000, "on": 2_100_000_000,
               "baseline": "../base", "baseline_off": 2_000_500_000}
    text = judges.counts_text(counted)
    assert "the judges add 20.0 k instructions per candidate, 100 k per verdict" in text
    assert "-0.025% (within the counter's noise" in text
    assert "beyond the counter's noise" in judges.counts_text({**counted, "baseline_off": 1_990_000_000})
