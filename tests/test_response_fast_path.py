"""The msgspec structs derived from each family's response model against the model itself.

For every raw response, the struct decoder either refuses it (the model then decides) or
gives the very values the model gives, types included (1 and 1.0 differ). It must also not
refuse what it is there to speed up: every response the model accepts whose numbers are all
written as integers and whose keys are written once.
"""

from typing import Annotated
from unittest import mock

import msgspec
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from domain.assets import llm_schema_path, load_json_asset
from domain.evaluate import evaluate_response
from domain.families import FAMILIES
from domain.families.base import EvaluationContext, StrictModel
from domain.families.response_structs import UnsupportedModel, fast_response_decoder, response_struct, with_items
from domain.source import transcript_from_record
from test_family_contracts import from_schema, json_values, mutate, paths_of

FAMILY_KEYS = sorted(FAMILIES)


def values(decoded):
    """A decoded response (struct or model) as nested plain values, each scalar with its type."""
    if isinstance(decoded, msgspec.Struct):
        return tuple((name, values(getattr(decoded, name))) for name in decoded.__struct_fields__)
    if isinstance(decoded, BaseModel):
        return tuple((name, values(getattr(decoded, name))) for name in type(decoded).model_fields)
    if isinstance(decoded, tuple):
        return ("tuple", *map(values, decoded))
    return type(decoded).__name__, decoded


def model_outcome(model, text: str):
    try:
        return values(model.model_validate_json(text))
    except ValidationError:
        return "refused"


def check_agreement(family: str, text: str) -> bool:
    """The struct decoder refuses ``text`` or agrees with the model; True when it accepted."""
    model = FAMILIES[family].response_model
    fast = fast_response_decoder(model)(text)
    if fast is None:
        return False
    assert values(fast) == model_outcome(model, text), text
    return True


def written_plainly(document) -> bool:
    """No float anywhere: the struct decoder reads integers only (the model also turns 3.0 into 3)."""
    if isinstance(document, float):
        return False
    if isinstance(document, dict):
        return all(map(written_plainly, document.values()))
    if isinstance(document, list):
        return all(map(written_plainly, document))
    return True


@pytest.mark.parametrize("family", FAMILY_KEYS)
def test_every_family_has_a_struct(family):
    struct = response_struct(FAMILIES[family].response_model)
    assert struct.__struct_fields__ == tuple(FAMILIES[family].response_model.model_fields)


@pytest.mark.parametrize("family", FAMILY_KEYS)
def test_structs_agree_with_the_model_on_valid_and_mutated_responses(family):
    schema = load_json_asset(llm_schema_path(family))
    model = FAMILIES[family].response_model

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
    @given(from_schema(schema), st.data())
    def check(valid, data):
        assert check_agreement(family, orjson.dumps(valid).decode()), "a valid response was refused"
        path = data.draw(st.sampled_from(list(paths_of(valid))))
        how = data.draw(st.sampled_from(["replace", "drop", "extra"]))
        changed = orjson.dumps(mutate(valid, path, how, data.draw(json_values))).decode()
        accepted = check_agreement(family, changed)
        if not accepted and written_plainly(orjson.loads(changed)):
            assert model_outcome(model, changed) == "refused", f"refused what the model accepts: {changed}"

    check()


@pytest.mark.parametrize("family", FAMILY_KEYS)
def test_structs_agree_with_the_model_on_arbitrary_json(family):
    @settings(max_examples=60, deadline=None)
    @given(json_values)
    def check(document):
        check_agreement(family, orjson.dumps(document).decode())

    check()


# A spells response written by hand, so that it can hold what no JSON library writes.
def spells_text(start="3", end="4", name='"Fireball"', level="3", evidence_extra="", item_extra="", top_extra=""):
    return ('{"spells": [{"spell_name": ' + name + ', "caster_name": "Vex", '
            '"cast": {"level": ' + level + ', "as_ritual": false, "target_names": ["Grog"]}, '
            '"evidence": [{"start_unit_id": ' + start + ', "end_unit_id": ' + end + evidence_extra + '}]'
            + item_extra + '}]' + top_extra + '}')


@pytest.mark.parametrize("text", [
    spells_text(),
    # Keys written twice: the last value counts for both, when the struct decoder reads them at all.
    spells_text(evidence_extra=', "start_unit_id": 9'), spells_text(start="1.5", evidence_extra=', "start_unit_id": 9'),
    spells_text(start='"x"', evidence_extra=', "start_unit_id": 9'), spells_text(item_extra=', "spell_name": "Shield"'),
    spells_text(name="5", item_extra=', "spell_name": "Shield"'), spells_text(top_extra=', "spells": []'),
    spells_text(top_extra=', "spells": 5'), '{"spells": 5, ' + spells_text()[1:],
    # Numbers: integral floats and exponents (the model converts them), bools, huge and negative ints.
    spells_text(start="3.0"), spells_text(start="3e0"), spells_text(level="2.0"), spells_text(start="-0"),
    spells_text(start="true"), spells_text(start="9" * 400), spells_text(start="-" + "9" * 30),
    spells_text(start="1.5"), spells_text(start="NaN"), spells_text(start="Infinity"), spells_text(start="1e999"),
    spells_text(level="null"), spells_text(level="10"), spells_text(start="03"),
    # Strings: escapes, surrogates (paired, lone escaped, lone raw), controls, non-ASCII.
    spells_text(name=r'"\u0046ireball\/"'), spells_text(name=r'"\ud83d\ude00"'), spells_text(name=r'"\ud800"'),
    spells_text(name='"\ud800"'), spells_text(name='"a\tb"'), spells_text(name='"a\x7fb"'),
    spells_text(name='"é 火"'), spells_text(name='""'), spells_text(name="null"),
    # Extra and missing keys, at every level; the wrong shapes.
    spells_text(evidence_extra=', "note": 1'), spells_text(item_extra=', "note": 1'), spells_text(top_extra=', "x": 1'),
    spells_text(evidence_extra=', "\\u0073tart_unit_id": 5'), '{"spells": [{"spell_name": "x"}]}', '{}', '[]', 'null',
    '{"spells": []}', '{"spells": [[]]}', '{"spells": [{}]}',
    # Around the document: whitespace, a byte-order mark, trailing text, a cut-off line.
    " \n" + spells_text() + "\t\r\n", "\ufeff" + spells_text(), spells_text() + " x", spells_text()[:-1], "",
])
def test_listed_responses_agree_both_ways(text):
    check_agreement("spells", text)


@pytest.mark.parametrize("text", [spells_text(start="3.0"), spells_text(level="2.0"), spells_text(start="3e0"),
                                  '{"spells": 5, ' + spells_text()[1:]])
def test_what_the_struct_decoder_refuses_the_model_may_still_accept(text):
    model = FAMILIES["spells"].response_model
    assert fast_response_decoder(model)(text) is None
    assert model_outcome(model, text) != "refused"


TRANSCRIPT = transcript_from_record({
    "source_id": "s", "units": [{"unit_id": n, "speaker": "A", "text": "x"} for n in (3, 4, 5)],
    "chunks": [{"chunk_id": "c", "kind": "extraction", "unit_ids": [3, 4, 5]}]})


def evaluate_spells(text):
    ctx = EvaluationContext(TRANSCRIPT, TRANSCRIPT.chunk("c"))
    return evaluate_response(FAMILIES["spells"], text, ctx)


def test_a_plainly_written_response_is_decoded_by_the_structs_only():
    model = FAMILIES["spells"].response_model
    with mock.patch.object(model, "model_validate_json", side_effect=AssertionError("the model was used")):
        result = evaluate_spells(spells_text(end="5", start="4"))
    assert result.passed, result.issues


def test_a_response_the_structs_refuse_is_evaluated_by_the_model():
    plain, written_as_floats = evaluate_spells(spells_text(start="3")), evaluate_spells(spells_text(start="3.0"))
    assert written_as_floats.passed and written_as_floats.adapted == plain.adapted


def test_with_items_replaces_the_list_of_a_struct_and_of_a_model():
    text = spells_text()
    model = FAMILIES["spells"].response_model
    for response in (fast_response_decoder(model)(text), model.model_validate_json(text)):
        emptied = with_items(response, "spells", ())
        assert type(emptied) is type(response) and emptied.spells == () and len(response.spells) == 1


class _Validated(StrictModel):
    name: str

    @field_validator("name")
    @classmethod
    def _upper(cls, value):
        return value.upper()


class _Aliased(StrictModel):
    name: str = Field(alias="Name")


class _Float(StrictModel):
    weight: float


class _Mapping(StrictModel):
    tags: dict[str, str]


class _Bounded(StrictModel):
    names: Annotated[tuple[str, ...], Field(max_length=2)]


class _Lenient(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str


class _Nested(StrictModel):
    inner: _Lenient


@pytest.mark.parametrize("model", [_Validated, _Aliased, _Float, _Mapping, _Bounded, _Lenient, _Nested])
def test_what_the_structs_cannot_translate_exactly_is_refused(model):
    with pytest.raises(UnsupportedModel):
        response_struct(model)
    assert fast_response_decoder(model)('{"name": "x"}') is None  # the model alone decides
