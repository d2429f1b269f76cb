import pytest

from infra.scales import MAX_LEVELS, ScaleError, ScoreScale


def test_levels_of_numeric_and_categorical_scales():
    assert ScoreScale("numeric", minimum=1, maximum=5).levels == (1.0, 2.0, 3.0, 4.0, 5.0)
    assert ScoreScale("numeric", maximum=5).levels is None  # unbounded below
    assert ScoreScale("numeric", minimum=0, maximum=1.5).levels is None  # continuous
    assert ScoreScale("numeric", minimum=0, maximum=MAX_LEVELS).levels is None  # too many
    assert ScoreScale("categorical", ("bad", "good"), ordinal=True).levels == ("bad", "good")
    assert ScoreScale("categorical", ("bad", "good")).levels is None  # nominal
    assert ScoreScale("boolean").levels is None


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
    assert ScoreScale.infer([1.0, 0.0, True], "boolean") == ScoreScale("boolean")
    categorical = ScoreScale.infer(["ok", "bad", "ok"], "categorical")
    assert categorical == ScoreScale("categorical", ("bad", "ok"))  # sorted, not ordinal
    numeric = ScoreScale.infer([3.0, 1.0, 4.0], "numeric")
    assert (numeric.minimum, numeric.maximum) == (1.0, 4.0)
    assert ScoreScale.infer([], "numeric") == ScoreScale("numeric")  # unbounded
    assert ScoreScale.infer([2.0], "Numeric") == ScoreScale("numeric", minimum=2, maximum=2)


@pytest.mark.parametrize(
    ("values", "kind", "field"),
    [
        ([1.0, 2.0], "boolean", "values"),
        ([], "categorical", "values"),
        ([1.0], "categorical", "values"),
        (["high"], "numeric", "values"),
        ([float("nan")], "numeric", "values"),
        ([1.0], "text", "kind"),
        ([1.0], None, "kind"),
    ],
)
def test_infer_errors_name_the_field(values, kind, field):
    with pytest.raises(ScaleError) as caught:
        ScoreScale.infer(values, kind)
    assert caught.value.field == field


def test_an_unknown_kind_lists_ours():
    with pytest.raises(ScaleError, match=r"^kind: 'text' is not boolean, categorical or numeric$"):
        ScoreScale.infer([], "text")


@pytest.mark.parametrize(
    ("scale", "words"),
    [
        (ScoreScale("boolean"), "boolean"),
        (ScoreScale("categorical", ("bad", "ok", "good")), "categorical (bad, ok, good)"),
        (
            ScoreScale("categorical", ("bad", "good"), ordinal=True),
            "ordinal categorical (bad < good)",
        ),
        (ScoreScale("numeric", minimum=1, maximum=5), "numeric 1 to 5"),
        (ScoreScale("numeric", minimum=0, maximum=0.5), "numeric 0 to 0.5"),
        (ScoreScale("numeric", minimum=-2.5), "numeric from -2.5"),
        (ScoreScale("numeric", maximum=10), "numeric up to 10"),
        (ScoreScale("numeric"), "numeric"),
    ],
)
def test_describe_says_the_scale_in_a_few_words(scale, words):
    assert scale.describe() == words


def test_contains():
    assert ScoreScale("boolean").contains(True) and not ScoreScale("boolean").contains(1)
    assert ScoreScale("categorical", ("a", "b")).contains("a")
    assert not ScoreScale("categorical", ("a", "b")).contains("A")
    scale = ScoreScale("numeric", minimum=1, maximum=10)
    assert scale.contains(1) and scale.contains(10.0)
    assert not scale.contains(10.5) and not scale.contains(True)
    assert not scale.contains(float("nan"))
    assert ScoreScale("numeric").contains(-1e9)
