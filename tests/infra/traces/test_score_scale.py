"""Langfuse score configs (public API shape) read as scales."""

import pytest

from infra.errors import UserFacingError
from infra.scales import ScaleError, ScoreScale
from infra.traces.score_scale import scale_from_config, scale_in_force


def test_a_boolean_config_ignores_its_true_false_categories():
    config = {
        "name": "correct",
        "dataType": "BOOLEAN",
        "categories": [{"label": "True", "value": 1}, {"label": "False", "value": 0}],
    }
    assert scale_from_config(config) == ScoreScale("boolean", name="correct")


def test_a_categorical_config_keeps_order_and_values():
    config = {
        "name": "quality",
        "dataType": "CATEGORICAL",
        "categories": [
            {"label": "bad", "value": 0},
            {"label": "ok", "value": 1},
            {"label": "good", "value": 2},
        ],
    }
    scale = scale_from_config(config, ordinal=True)
    assert scale.name == "quality" and scale.kind == "categorical"
    assert scale.categories == ("bad", "ok", "good")
    assert scale.values == (0.0, 1.0, 2.0)
    assert scale.levels == ("bad", "ok", "good")
    assert not scale_from_config(config).ordinal  # nominal unless said otherwise
    assert scale_from_config(config).levels is None


def test_a_numeric_config_range_is_optional():
    scale = scale_from_config({"dataType": "NUMERIC", "minValue": 1, "maxValue": 5})
    assert scale == ScoreScale("numeric", minimum=1.0, maximum=5.0)
    assert scale.levels == (1.0, 2.0, 3.0, 4.0, 5.0)
    open_ended = scale_from_config({"dataType": "NUMERIC", "maxValue": None})
    assert (open_ended.minimum, open_ended.maximum, open_ended.levels) == (None, None, None)


def test_the_data_type_is_read_in_any_case():
    assert scale_from_config({"dataType": "numeric", "minValue": 0}).minimum == 0.0
    assert scale_from_config({"dataType": "Boolean"}).kind == "boolean"


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ([], "<config>"),
        ({}, "dataType"),
        ({"dataType": "TEXT"}, "dataType"),
        ({"dataType": 1}, "dataType"),
        ({"dataType": "CATEGORICAL"}, "categories"),
        ({"dataType": "CATEGORICAL", "categories": []}, "categories"),
        ({"dataType": "CATEGORICAL", "categories": ["a"]}, "categories[0]"),
        (
            {"dataType": "CATEGORICAL", "categories": [{"label": "a", "value": 0}, {"value": 1}]},
            "categories[1].label",
        ),
        (
            {"dataType": "CATEGORICAL", "categories": [{"label": "a", "value": "x"}]},
            "categories[0].value",
        ),
        (
            {
                "dataType": "CATEGORICAL",
                "categories": [{"label": "Good", "value": 0}, {"label": "good", "value": 1}],
            },
            "categories",
        ),
        ({"dataType": "NUMERIC", "minValue": "low"}, "minValue"),
        ({"dataType": "NUMERIC", "maxValue": float("inf")}, "maxValue"),
        ({"dataType": "NUMERIC", "minValue": 5, "maxValue": 1}, "maximum"),
        ({"dataType": "BOOLEAN", "name": 3}, "name"),
    ],
)
def test_config_errors_name_the_field(config, field):
    with pytest.raises(ScaleError) as caught:
        scale_from_config(config)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


def test_an_unknown_data_type_lists_langfuses():
    with pytest.raises(ScaleError, match=r"'TEXT' is not BOOLEAN, CATEGORICAL or NUMERIC$"):
        scale_from_config({"dataType": "TEXT"})


def test_the_config_in_force_is_the_newest_active_one():
    configs = [
        {"name": "q", "dataType": "NUMERIC", "createdAt": "2026-09-01", "maxValue": 3},
        {"name": "q", "dataType": "NUMERIC", "createdAt": "2026-11-01", "isArchived": True},
        {"name": "q", "dataType": "NUMERIC", "createdAt": "2026-10-01", "maxValue": 5},
    ]
    assert scale_in_force("q", configs) == ScoreScale("numeric", maximum=5, name="q")
    assert scale_in_force("q", []) is None


def test_a_config_in_force_that_cannot_be_read_is_one_sentence_naming_it():
    broken = {"name": "colour", "dataType": "CATEGORICAL", "categories": [{"label": "blue"}]}
    with pytest.raises(UserFacingError) as caught:
        scale_in_force("colour", [broken])
    assert str(caught.value) == (
        "The Langfuse score config 'colour' cannot be read (categories[0].value: expected a "
        "finite number, got None): fix it in the project's score configs, or annotate with "
        "another one (traces.annotation_name)."
    )
    assert isinstance(caught.value.__cause__, ScaleError)
    assert caught.value.__cause__.field == "categories[0].value"
