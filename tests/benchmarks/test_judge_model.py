"""The judge benchmarks read the night's judge model from the project's settings, so a
larger judge model is measured by one environment variable, with no code change."""

from __future__ import annotations

import pytest

from benchmarks.judge_model import judge_lm
from infra.lm.model_files import ModelNotFoundError, resolve_model_path


@pytest.mark.parametrize("variable", ["FLYWHEEL_LM__MODEL_PATH", "FLYWHEEL_JUDGE_LM__MODEL_PATH"])
def test_a_model_path_from_the_environment_reaches_the_benchmark(tmp_path, monkeypatch, variable):
    if variable.startswith("FLYWHEEL_JUDGE_LM"):  # else conftest's "null": the judge is lm
        monkeypatch.delenv("FLYWHEEL_JUDGE_LM", raising=False)
    monkeypatch.setenv(variable, str(tmp_path))  # no checkpoint there
    with pytest.raises(ModelNotFoundError, match=str(tmp_path)):
        judge_lm()


@pytest.mark.slow
def test_the_benchmark_loads_the_checkpoint_the_setting_names(tmp_path, monkeypatch, capsys):
    embedded = resolve_model_path()
    checkpoint = tmp_path / "my-judge"
    checkpoint.mkdir()
    for file in embedded.iterdir():
        (checkpoint / file.name).symlink_to(file)
    monkeypatch.delenv("FLYWHEEL_JUDGE_LM", raising=False)
    monkeypatch.setenv("FLYWHEEL_JUDGE_LM__MODEL_PATH", str(checkpoint))
    lm = judge_lm()
    lm.close()
    assert lm.base_model_path == str(checkpoint)
    assert f"model: {checkpoint}" in capsys.readouterr().out
