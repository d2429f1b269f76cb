"""The judge benchmarks read their model from the project's settings, so a larger judge
model is measured by setting FLYWHEEL_LM__MODEL_PATH, with no code change."""

from __future__ import annotations

import pytest

from benchmarks.judge_model import judge_lm
from infra.lm.model_files import ModelNotFoundError, resolve_model_path


def test_a_model_path_from_the_environment_reaches_the_benchmark(tmp_path, monkeypatch):
    monkeypatch.setenv("FLYWHEEL_LM__MODEL_PATH", str(tmp_path))  # no checkpoint there
    with pytest.raises(ModelNotFoundError, match="FLYWHEEL_LM__MODEL_PATH"):
        judge_lm()


@pytest.mark.slow
def test_the_benchmark_loads_the_checkpoint_the_setting_names(tmp_path, monkeypatch, capsys):
    embedded = resolve_model_path()
    checkpoint = tmp_path / "my-judge"
    checkpoint.mkdir()
    for file in embedded.iterdir():
        (checkpoint / file.name).symlink_to(file)
    monkeypatch.setenv("FLYWHEEL_LM__MODEL_PATH", str(checkpoint))
    lm = judge_lm()
    lm.close()
    assert lm.base_model_path == str(checkpoint)
    assert f"model: {checkpoint}" in capsys.readouterr().out
