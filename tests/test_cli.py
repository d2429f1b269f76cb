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


@pytest.mark.slow
def test_serve_model_answers_openai_chat_completions(tmp_path):
    import socket
    import subprocess
    import sys
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", "serve-model", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}/v1"
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                models = httpx.get(f"{base}/models").json()
                break
            except httpx.TransportError:
                time.sleep(0.5)
        assert models["data"][0]["id"] == "smollm2-135m-instruct"
        reply = httpx.post(
            f"{base}/chat/completions",
            json={
                "model": "smollm2-135m-instruct",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "Say hi"}],
            },
            timeout=60,
        ).json()
        assert reply["choices"][0]["message"]["content"]
        assert 0 < reply["usage"]["completion_tokens"] <= 5 + 1
    finally:
        server.terminate()
        server.wait(timeout=30)
