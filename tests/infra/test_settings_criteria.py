"""`traces.criteria`: each secondary annotation name with its weight and tolerance; a bad
entry is an error naming the field."""

import pytest
from pydantic import ValidationError

from infra.settings import Settings
from infra.settings_errors import SettingsError, load_settings


def test_no_criteria_by_default():
    assert Settings().traces.criteria == {}


def test_a_criterion_reads_with_its_defaults():
    cfg = Settings(traces={"criteria": {"polite": {"weight": 0.5}}}).traces.criteria["polite"]
    assert (cfg.weight, cfg.max_drop, cfg.rubric) == (0.5, 0.05, "")


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"polite": {"weight": -1}}, "traces.criteria.polite.weight"),
        ({"polite": {"max_drop": -0.1}}, "traces.criteria.polite.max_drop"),
        ({"polite": {"wieght": 1}}, "traces.criteria.polite.wieght"),
        ({"correct": {}}, "traces.criteria.correct: 'correct' is traces.annotation_name"),
        ({" ": {}}, "traces.criteria: an annotation name must not be empty"),
    ],
)
def test_a_bad_entry_names_its_field(entry, said):
    with pytest.raises(ValidationError, match=said.replace(".", r"\.")):
        Settings(traces={"criteria": entry})


def test_the_command_line_names_the_file_and_the_key(tmp_path, monkeypatch):
    toml = tmp_path / "flywheel.toml"
    toml.write_text("[traces.criteria.polite]\nweight = -1\n")
    monkeypatch.setenv("FLYWHEEL_CONFIG", str(toml))
    with pytest.raises(SettingsError) as error:
        load_settings()
    assert "criteria" in str(error.value) and "weight" in str(error.value)
    assert str(toml) in str(error.value)
