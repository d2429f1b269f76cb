import pytest

from judges.scales import ScaleError, ScoreScale


def test_langfuse_boolean_config_ignores_its_true_false_categories():
    config = {
        "name": "correct",
        "dataType": "BOOLEAN",
        "categories": [{"label": "True", "value": 1}, {"label": "False", "value": 0}],
    }
    assert ScoreScale.from_langfuse(config) == ScoreScale("boolean", name="correct")


def test_langfuse_categorical_config_keeps_order_and_values():
    config = {
        "name": "quality",
        "dataType": "CATEGORICAL",
        "categories": [
            {"label": "bad", "value": 0},
            {"label": "ok", "value": 1},
            {"label": "good", "value": 2},
        ],
    }
    scale = ScoreScale.from_langfuse(config, ordinal=True)
    assert scale.categories == ("bad", "ok", "good")
    assert scale.values == (0.0, 1.0, 2.0)
    assert scale.levels == ("bad", "ok", "good")
    assert ScoreScale.from_langfuse(config).levels is None  # nominal unless said otherwise


def test_langfuse_numeric_config_range_is_optional():
    scale = ScoreScale.from_langfuse({"dataType": "NUMERIC", "minValue": 1, "maxValue": 5})
    assert (scale.minimum, scale.maximum) == (1.0, 5.0)
    assert scale.levels == (1.0, 2.0, 3.0, 4.0, 5.0)
    open_ended = ScoreScale.from_langfuse({"dataType": "NUMERIC", "maxValue": None})
    assert (open_ended.minimum, open_ended.maximum, open_ended.levels) == (None, None, None)
    assert ScoreScale("numeric", minimum=0, maximum=1.5).levels is None  # continuous


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({}, "dataType"),
        ({"dataType": "TEXT"}, "dataType"),
        ({"dataType": "CATEGORICAL"}, "categories"),
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
        ({"dataType": "NUMERIC", "minValue": 5, "maxValue": 1}, "maximum"),
        ({"dataType": "BOOLEAN", "name": 3}, "name"),
    ],
)
def test_langfuse_config_errors_name_the_field(config, field):
    with pytest.raises(ScaleError) as caught:
        ScoreScale.from_langfuse(config)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


def test_constructor_rejects_fields_of_another_kind():
    with pytest.raises(ScaleError, match="^categories:"):
        ScoreScale("boolean", ("a",))
    with pytest.raises(ScaleError, match="^ordinal:"):
        ScoreScale("numeric", ordinal=True)
    with pytest.raises(ScaleError, match="^minimum:"):
        ScoreScale("categorical", ("a",), minimum=0)
    with pytest.raises(ScaleError, match="^values:"):
        ScoreScale("categorical", ("a", "b"), values=(1,))
    with pytest.raises(ScaleError, match="^kind:"):
        ScoreScale("ordinal")


def test_infer_from_observed_values():
    assert ScoreScale.infer([1.0, 0.0, True], "BOOLEAN") == ScoreScale("boolean")
    categorical = ScoreScale.infer(["ok", "bad", "ok"], "CATEGORICAL")
    assert categorical == ScoreScale("categorical", ("bad", "ok"))  # sorted, not ordinal
    numeric = ScoreScale.infer([3.0, 1.0, 4.0], "numeric")
    assert (numeric.minimum, numeric.maximum) == (1.0, 4.0)
    assert ScoreScale.infer([], "NUMERIC") == ScoreScale("numeric")  # unbounded


@pytest.mark.parametrize(
    ("values", "data_type", "field"),
    [
        ([1.0, 2.0], "BOOLEAN", "values"),
        ([], "CATEGORICAL", "values"),
        ([1.0], "CATEGORICAL", "values"),
        (["high"], "NUMERIC", "values"),
        ([1.0], "TEXT", "data_type"),
    ],
)
def test_infer_errors_name_the_field(values, data_type, field):
    with pytest.raises(ScaleError) as caught:
        ScoreScale.infer(values, data_type)
    assert caught.value.field == field


def test_contains():
    assert ScoreScale("boolean").contains(True) and not ScoreScale("boolean").contains(1)
    assert ScoreScale("categorical", ("a", "b")).contains("a")
    assert not ScoreScale("categorical", ("a", "b")).contains("A")
    scale = ScoreScale("numeric", minimum=1, maximum=10)
    assert scale.contains(1) and scale.contains(10.0)
    assert not scale.contains(10.5) and not scale.contains(True)
    assert not scale.contains(float("nan"))
    assert ScoreScale("numeric").contains(-1e9)
