import pytest

from flows.cli import main


def test_missing_model_is_one_sentence_not_a_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("FLYWHEEL_LM__MODEL_PATH", str(tmp_path / "no-model"))
    assert main(["run"]) == 2
    err = capsys.readouterr().err
    assert "holds no config.json" in err and "Traceback" not in err


def test_missing_trace_export_is_explained(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("FLYWHEEL_TRACES__JSONL_DIR", str(tmp_path / "empty"))
    assert main(["run"]) == 2
    assert "FLYWHEEL_TRACES__JSONL_DIR" in capsys.readouterr().err


def test_secret_in_toml_is_refused(tmp_path, monkeypatch):
    config = tmp_path / "flywheel.toml"
    config.write_text('[lm]\napi_key = "sk-secret"\n')
    monkeypatch.setenv("FLYWHEEL_CONFIG", str(config))
    from infra.settings import Settings

    with pytest.raises(ValueError, match="environment"):
        Settings()
