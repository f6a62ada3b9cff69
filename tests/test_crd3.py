"""CRD3 -> transcript record conversion (contract §3.1) and the bundled sample."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sample import crd3
from sample.jsonl import dumps_line, iter_lines, read_bytes, read_jsonl, write_jsonl

try:  # tests/ on sys.path, or tests/ as a package
    from flink_support import shared_path
except ImportError:
    from tests.flink_support import shared_path

REPO_ROOT = Path(__file__).resolve().parents[1]
CORPUS = shared_path("corpus", "crd3")
SAMPLE = REPO_ROOT / "sample" / "data" / "crd3-sample.transcripts.jsonl.gz"

needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="CRD3 corpus not available")


def corpus_transcript(episode: str) -> dict:
    path = CORPUS / f"{episode}.json"
    return crd3.episode_to_transcript(crd3.load_episode(path), crd3.source_id_for(path))


def corpus_turns(episode: str) -> list[dict]:
    return crd3.load_episode(CORPUS / f"{episode}.json")["TURNS"]


def assert_plans_cover_units(record: dict) -> None:
    """Each plan (extraction, scene) lists every unit exactly once, in document order."""
    unit_ids = [unit["unit_id"] for unit in record["units"]]
    for kind, prefix in (("extraction", "x"), ("scene", "s")):
        chunks = [chunk for chunk in record["chunks"] if chunk["kind"] == kind]
        assert [chunk["chunk_id"] for chunk in chunks] == [
            f"{prefix}-{n:04d}" for n in range(1, len(chunks) + 1)]
        assert [u for chunk in chunks for u in chunk["unit_ids"]] == unit_ids
        assert all(chunk["unit_ids"] for chunk in chunks)


# ---------------------------------------------------------------- converter basics

def test_turn_becomes_one_unit_with_joined_names_and_utterances():
    turn = {"NAMES": ["ORION", "MATT"], "UTTERANCES": ["Welcome to", "the  show,", "friends."],
            "NUMBER": 0}
    assert crd3.turn_to_unit(turn) == {"unit_id": 1, "speaker": "ORION, MATT",
                                       "text": "Welcome to the  show, friends."}


def test_source_id_is_episode_stem():
    assert crd3.source_id_for("/x/y/C1E001.json") == "crd3:C1E001"


def test_duplicate_numbers_are_rejected():
    episode = {"TURNS": [{"NAMES": ["MATT"], "UTTERANCES": ["a"], "NUMBER": 0},
                         {"NAMES": ["MATT"], "UTTERANCES": ["b"], "NUMBER": 0}]}
    with pytest.raises(ValueError, match="unique"):
        crd3.episode_to_transcript(episode, "crd3:X")


def test_chunk_sizes_are_configurable():
    units = [{"unit_id": i, "speaker": "MATT", "text": "t"} for i in range(1, 11)]
    record = crd3.transcript_record("crd3:X", units, extraction_units=4, scene_units=6)
    sizes = [(c["chunk_id"], len(c["unit_ids"])) for c in record["chunks"]]
    assert sizes == [("x-0001", 4), ("x-0002", 4), ("x-0003", 2), ("s-0001", 6), ("s-0002", 4)]


@given(unit_ids=st.lists(st.integers(min_value=1, max_value=10**9), unique=True, max_size=300),
       extraction=st.integers(min_value=1, max_value=50),
       scene=st.integers(min_value=1, max_value=200))
def test_chunk_plans_cover_every_unit_once_in_order(unit_ids, extraction, scene):
    units = [{"unit_id": u, "speaker": "S", "text": ""} for u in unit_ids]
    record = crd3.transcript_record("crd3:H", units, extraction, scene)
    assert_plans_cover_units(record)
    for chunk in record["chunks"]:
        limit = extraction if chunk["kind"] == "extraction" else scene
        assert 1 <= len(chunk["unit_ids"]) <= limit


# ---------------------------------------------------------------- JSON Lines hazard

LINE_BREAKS_OTHER_THAN_LF = "\x85\u2028\u2029\x0b\x0c\x1c\x1d\x1e\r"


@given(texts=st.lists(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(
    LINE_BREAKS_OTHER_THAN_LF + "\n♪’"), max_size=40), min_size=1, max_size=5))
def test_every_record_is_exactly_one_lf_terminated_line(texts):
    units = [{"unit_id": i + 1, "speaker": "SAM", "text": t} for i, t in enumerate(texts)]
    record = {"source_id": "crd3:H", "units": units}
    line = dumps_line(record)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert list(iter_lines(line + line)) == [line[:-1], line[:-1]]
    assert orjson.loads(line) == record


def test_str_splitlines_is_not_safe_for_these_files():
    """orjson writes U+0085 / U+2028 raw (valid JSON); only a split on \\n is safe."""
    line = dumps_line({"text": "pay for\x85 lady favors \u2028 again"})
    assert b"\xc2\x85" in line and "\u2028".encode() in line  # written raw, not escaped
    assert len(line.decode().splitlines()) == 3                # would cut the record
    assert len(list(iter_lines(line))) == 1


def test_gzip_output_is_deterministic(tmp_path):
    records = [{"source_id": "crd3:H", "units": [], "chunks": []}]
    first, second = tmp_path / "a" / "out.jsonl.gz", tmp_path / "b" / "out.jsonl.gz"
    write_jsonl(first, records)
    write_jsonl(second, records)
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes()[4:8] == b"\0\0\0\0"  # mtime 0
    assert list(read_jsonl(first)) == records


# ---------------------------------------------------------------- corpus oddities

@needs_corpus
def test_duplicate_turns_in_c1e014_stay_separate_units():
    record = corpus_transcript("C1E014")
    units = {unit["unit_id"]: unit for unit in record["units"]}
    # turns 384 and 385 repeat each other: units 385 and 386
    assert units[385]["text"] == units[386]["text"] == "You hear some rustling."
    assert units[385]["speaker"] == units[386]["speaker"] == "MATT"
    assert len(record["units"]) == len(corpus_turns("C1E014")) == 2054
    assert_plans_cover_units(record)


@needs_corpus
def test_next_line_character_in_c1e010_survives_and_lines_stay_one_per_record(tmp_path):
    out = tmp_path / "c1e010.jsonl"
    assert crd3.main(["--output", str(out), str(CORPUS / "C1E010.json")]) == 0
    data = out.read_bytes()
    assert data.count(b"\n") == 1 and data.endswith(b"\n")
    assert b"\xc2\x85" in data  # raw U+0085, inside one line
    (record,) = read_jsonl(out)
    unit = record["units"][2]  # turn NUMBER 2
    assert unit["unit_id"] == 3 and unit["speaker"] == "TRAVIS"
    assert "where you pay for\x85 lady favors." in unit["text"]
    assert len(data.decode().splitlines()) > 1  # the hazard the reader must avoid


@needs_corpus
def test_curly_and_straight_apostrophes_are_kept():
    turns = corpus_turns("C1E014")
    units = corpus_transcript("C1E014")["units"]
    curly = sum(u["text"].count("’") for u in units)
    straight = sum(u["text"].count("'") for u in units)
    assert curly == sum(x.count("’") for t in turns for x in t["UTTERANCES"]) > 0
    assert straight == sum(x.count("'") for t in turns for x in t["UTTERANCES"]) > 0


@needs_corpus
def test_song_lyrics_in_c1e080_are_kept():
    record = corpus_transcript("C1E080")
    assert record["units"][0] == {"unit_id": 1, "speaker": "SOUND", "text": "♪"}
    lyric = next(u for u in record["units"] if u["unit_id"] == 37)
    assert lyric["speaker"] == "TALIESIN"
    assert lyric["text"].startswith(
        "♪ Do you believe in life after-- ♪♪ (growling, screaming) ♪")


@needs_corpus
def test_multi_name_and_non_person_speakers_are_kept():
    speakers = {u["speaker"] for u in corpus_transcript("C1E010")["units"]}
    assert {"ALL - SAM - MATT", "ALL", "SAM, TALIESIN, LAURA"} <= speakers
    turns = corpus_turns("C1E010")
    assert sum(", " in s for s in (", ".join(t["NAMES"]) for t in turns)) == 42


@needs_corpus
def test_text_is_utterances_joined_with_single_spaces_everywhere():
    for episode in ("C1E001", "C1E058"):
        turns = corpus_turns(episode)
        units = corpus_transcript(episode)["units"]
        assert [u["text"] for u in units] == [" ".join(t["UTTERANCES"]) for t in turns]
        assert [u["unit_id"] for u in units] == [t["NUMBER"] + 1 for t in turns]


@needs_corpus
def test_cli_writes_gzip_when_name_ends_in_gz(tmp_path):
    out = tmp_path / "two.jsonl.gz"
    crd3.main(["--output", str(out), "--extraction-chunk-units", "50",
               str(CORPUS / "C1E001.json"), str(CORPUS / "C1E035.json")])
    records = list(read_jsonl(out))
    assert [r["source_id"] for r in records] == ["crd3:C1E001", "crd3:C1E035"]
    assert len(records[0]["units"]) == 2160
    assert len([c for c in records[0]["chunks"] if c["kind"] == "extraction"]) == 44


# ---------------------------------------------------------------- bundled sample

@pytest.fixture(scope="module")
def sample_records() -> list[dict]:
    return list(read_jsonl(SAMPLE))


def test_bundled_sample_holds_two_episodes(sample_records):
    assert [r["source_id"] for r in sample_records] == ["crd3:C1E001", "crd3:C1E035"]
    assert [len(r["units"]) for r in sample_records] == [2160, 2076]


def test_bundled_sample_units_and_plans_are_well_formed(sample_records):
    for record in sample_records:
        ids = [u["unit_id"] for u in record["units"]]
        assert ids == list(range(1, len(ids) + 1))
        assert all(u["speaker"] and isinstance(u["text"], str) for u in record["units"])
        assert_plans_cover_units(record)
        sizes = {c["kind"]: len(c["unit_ids"]) for c in record["chunks"][:1]}
        assert sizes == {"extraction": crd3.DEFAULT_EXTRACTION_CHUNK_UNITS}
        first_scene = next(c for c in record["chunks"] if c["kind"] == "scene")
        assert len(first_scene["unit_ids"]) == crd3.DEFAULT_SCENE_CHUNK_UNITS


def test_bundled_sample_is_one_line_per_record_and_gzip_is_reproducible(sample_records, tmp_path):
    data = read_bytes(SAMPLE)
    assert data.count(b"\n") == len(sample_records) == 2
    again = tmp_path / "again.jsonl.gz"
    write_jsonl(again, sample_records)
    assert gzip.decompress(again.read_bytes()) == data
    assert again.read_bytes() == SAMPLE.read_bytes()


@needs_corpus
def test_bundled_sample_matches_a_fresh_conversion(tmp_path):
    out = tmp_path / "sample.jsonl.gz"
    crd3.main(["--output", str(out), str(CORPUS / "C1E001.json"), str(CORPUS / "C1E035.json")])
    assert out.read_bytes() == SAMPLE.read_bytes()


@settings(max_examples=25)
@given(st.data())
def test_sample_chunks_slice_the_document_contiguously(sample_records, data):
    record = data.draw(st.sampled_from(sample_records))
    chunk = data.draw(st.sampled_from(record["chunks"]))
    ids = [u["unit_id"] for u in record["units"]]
    start = ids.index(chunk["unit_ids"][0])
    assert ids[start:start + len(chunk["unit_ids"])] == chunk["unit_ids"]
