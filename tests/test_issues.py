from hypothesis import given, settings
from hypothesis import strategies as st

from domain.issues import (
    MAX_GUIDANCE_CHARS,
    MAX_ISSUES,
    Correction,
    Issue,
    operator_issue_records,
    quote_name,
    render_guidance,
    render_range,
    render_ranges,
)


def issue(n, problem="It is wrong.", fix="Fix it.", correction=True):
    c = Correction(f'The spell "S{n}"', render_range(n, n + 2), problem, fix) if correction else None
    return Issue("spells.shape", "code_x", f"spells[{n}].cast", f"operator detail {n}", c)


def test_render_range_words():
    assert render_range(40, 44) == "units 40–44"
    assert render_range(7, 7) == "unit 7"
    assert render_ranges([(1, 2), (1, 2), (5, 5), (8, 9), (10, 11)]) == "units 1–2, unit 5, units 8–9 and 1 more range"


def test_guidance_names_every_record_and_never_operator_text():
    text = render_guidance([issue(1), issue(2, "Level is bad.", "Use 3."), issue(3, correction=False)])
    assert '"S1"' in text and '"S2"' in text and "units 2–4" in text
    assert '"S3"' not in text  # operator-only issues never reach the model
    for forbidden in ("operator detail", "code_x", "spells.shape", "spells[", "[1]"):
        assert forbidden not in text


def test_repeated_instructions_are_written_once():
    text = render_guidance([issue(1), issue(2), issue(1)])
    assert text.count("It is wrong.") == 1
    assert '"S1"' in text and '"S2"' in text


def test_guidance_is_bounded_with_an_explicit_more_line():
    many = [issue(n, problem=f"Problem {n} " + "x" * 200) for n in range(MAX_ISSUES * 3)]
    text = render_guidance(many)
    assert len(text) <= MAX_GUIDANCE_CHARS
    assert "more problems" in text


def test_operator_records_are_bounded_with_and_n_more():
    rows = operator_issue_records([issue(n) for n in range(MAX_ISSUES + 7)])
    assert len(rows) == MAX_ISSUES + 1
    assert rows[-1]["message"] == "and 7 more issues"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_quote_name_is_one_safe_line(value):
    quoted = quote_name(value)
    assert "\n" not in quoted and "\r" not in quoted and "\x00" not in quoted
    assert len(quoted) <= 82
    inner = quoted[1:-1] if quoted.startswith('"') else ""
    assert '"' not in inner and "`" not in inner


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.sampled_from(["A.", "B.", "C."])), max_size=80))
def test_guidance_is_deterministic_and_bounded(spec):
    issues = [issue(n, problem=p) for n, p in spec]
    assert render_guidance(issues) == render_guidance(list(issues))
    assert len(render_guidance(issues)) <= MAX_GUIDANCE_CHARS


def test_one_instruction_for_many_records_is_never_dropped():
    same = [issue(n) for n in range(300)]
    text = render_guidance(same)
    assert "It is wrong." in text and '"S0"' in text
    assert "292 more records with the same problem" in text
    assert len(text) <= MAX_GUIDANCE_CHARS
