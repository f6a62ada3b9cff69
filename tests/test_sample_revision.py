"""The demo's prompt revision: an earlier wording kept as real text, and a
simulated archive whose first attempts of one family were made under it."""

from __future__ import annotations

import hashlib

import orjson

from test_simulated_producer import produce
from domain.assets import SHARED_EVIDENCE_PROMPT, composed_prompt, current_fingerprints, read_asset
from sample.revision import earlier_fingerprints, earlier_prompt, earlier_prompt_fingerprint, revisable_families


def test_the_earlier_prompt_is_real_text_hashed_as_the_model_read_it():
    assert "spells" in revisable_families()
    text = earlier_prompt("spells")
    assert read_asset(SHARED_EVIDENCE_PROMPT) in text  # the shared evidence instruction, byte-identical
    assert b"{{include" not in text and text != composed_prompt("spells")
    assert earlier_prompt_fingerprint("spells") == "sha256:" + hashlib.sha256(text).hexdigest()
    prompt, schema = earlier_fingerprints("spells")
    assert prompt != current_fingerprints("spells")[0] and schema == current_fingerprints("spells")[1]


def test_only_first_attempts_of_the_revised_family_change_and_only_their_fingerprint(tmp_path):
    args = ("--candidates", "300", "--defect-rate", "stale_prompt_fingerprint=0")
    plain = produce(tmp_path / "plain", *args)
    revised = produce(tmp_path / "revised", *args, "--revised-family", "spells")
    assert len(plain.candidates) == len(revised.candidates) and plain.truth == revised.truth
    earlier = earlier_prompt_fingerprint("spells")
    changed = 0
    for before, after in zip(plain.candidates, revised.candidates):
        if after["family"] == "spells" and after["attempt"] == 1:
            assert after["prompt_fingerprint"] == earlier
            changed += 1
            after = {**after, "prompt_fingerprint": before["prompt_fingerprint"]}
        assert orjson.dumps(after) == orjson.dumps(before)
    assert changed > 0


def test_the_simulated_batch_writes_openai_result_lines_the_import_reads(tmp_path):
    """Its lines are what OpenAI's own models describe, and each answer is a passing current-prompt extraction."""
    from test_batch_provider_shapes import validate_result_line

    from domain.batch.providers import PROVIDERS
    from domain.families import FAMILIES
    from domain.evaluate import evaluate_response
    from domain.families.base import EvaluationContext
    from domain.source import transcript_from_record
    from sample import simulated_batch

    run = produce(tmp_path / "archive", "--candidates", "150")
    answerer = simulated_batch.Answerer(list(run.transcripts.values()), seed=3)
    checked = 0
    for record in run.transcripts.values():
        transcript = transcript_from_record(record)
        for chunk in record["chunks"][:6]:
            family = "spells" if chunk["kind"] == "extraction" else "scene-descriptions"
            text = answerer.answer(family, record["source_id"], chunk["chunk_id"])
            line = orjson.loads(orjson.dumps(simulated_batch.result_line(1, "r-1", "sim-2", text)))
            validate_result_line("openai-chat", line)
            outcome = PROVIDERS["openai-chat"].parse_result(line)
            assert outcome.text == text and outcome.ending == "complete"
            ctx = EvaluationContext(transcript, transcript.chunk(chunk["chunk_id"]))
            assert evaluate_response(FAMILIES[family], text, ctx).passed, text
            checked += 1
    assert checked > 0
    assert answerer.answer("npc-occurrences", record["source_id"], record["chunks"][0]["chunk_id"]) is None


def test_the_simulated_batch_takes_a_transcripts_glob_like_every_command(tmp_path, capsys):
    """Copied from the docs with the archive's glob, it runs (it took one file and crashed on a glob)."""
    import pytest

    from sample import simulated_batch

    with pytest.raises(SystemExit, match="--transcripts '.*nothing-\\*' matches no files"):
        simulated_batch.main(["--requests", str(tmp_path / "requests-*"), "--transcripts", str(tmp_path / "nothing-*"),
                              "--results-out", str(tmp_path / "r.jsonl"), "--truth-out", str(tmp_path / "t.jsonl")])
    (tmp_path / "transcripts-1.jsonl").write_bytes(b"")
    assert simulated_batch.main(["--requests", str(tmp_path / "requests-*"), "--transcripts",
                                 str(tmp_path / "transcripts-*"), "--results-out", str(tmp_path / "r.jsonl"),
                                 "--truth-out", str(tmp_path / "t.jsonl")]) == 0
    assert "answered 0 of 0 requests" in capsys.readouterr().err
