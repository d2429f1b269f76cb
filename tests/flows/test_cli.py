import pytest

from flows.cli import main


def test_missing_model_is_one_sentence_not_a_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("FLYWHEEL_LM__MODEL_PATH", str(tmp_path / "no-model"))
    assert main(["run"]) == 2
    err = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    assert "holds no config.json" in err and "Traceback" not in err


def test_square_brackets_in_an_error_are_text_not_markup(monkeypatch, capsys):
    import flows.cli
    from infra.errors import UserFacingError

    def refuse(args):
        raise UserFacingError("set [lm] model_path, or [judge_lm] for the judge")

    monkeypatch.setattr(flows.cli, "_status", refuse)
    assert main(["status"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "set [lm] model_path, or [judge_lm] for the judge" in err


def test_missing_trace_export_is_explained(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("FLYWHEEL_TRACES__JSONL_DIR", str(tmp_path / "empty"))
    assert main(["run"]) == 2
    assert "FLYWHEEL_TRACES__JSONL_DIR" in capsys.readouterr().err


def test_a_resume_outside_the_state_folder_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    assert main(["run", "--resume", "../../etc"]) == 2
    err = capsys.readouterr().err
    assert "not a night's run id" in err and "Traceback" not in err
    assert not (tmp_path / "etc").exists()


def test_a_second_night_in_the_same_folder_exits_with_a_sentence(tmp_path, monkeypatch, capsys):
    from flows.plumbing.night_lock import one_night

    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    with one_night(tmp_path / "state", "night 20261201T020000Z", wait_s=0):
        assert main(["run"]) == 3  # LOCKED
    err = _one_line(capsys)
    assert "is in use by night 20261201T020000Z (process" in err, err


def _export(folder, observations: str, scores: str = ""):
    folder.mkdir()
    (folder / "observations.jsonl").write_text(observations)
    (folder / "scores.jsonl").write_text(scores)
    return folder


def test_an_empty_or_unlabelled_export_stops_before_start_up(tmp_path, monkeypatch, capsys):
    from infra.traces.jsonl import DEMO_DIR

    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("FLYWHEEL_TRACES__JSONL_DIR", str(_export(tmp_path / "empty", "")))
    assert main(["run"]) == 2
    assert "no usable trace" in capsys.readouterr().err
    broken = _export(tmp_path / "broken", '{"id": "o1", "traceId": 7}\n')
    monkeypatch.setenv("FLYWHEEL_TRACES__JSONL_DIR", str(broken))
    assert main(["run"]) == 2
    err = capsys.readouterr().err
    assert "no usable trace" in err and "the first left out" in err
    traces = (DEMO_DIR / "observations.jsonl").read_text()
    monkeypatch.setenv("FLYWHEEL_TRACES__JSONL_DIR", str(_export(tmp_path / "unlabelled", traces)))
    assert main(["run"]) == 2
    err = capsys.readouterr().err
    assert "No human annotation named 'correct'" in err and "Traceback" not in err
    assert not (tmp_path / "state" / "prefect").exists()  # Prefect never started


def test_init_writes_settings_that_load_and_never_overwrites_by_accident(
    tmp_path, monkeypatch, capsys
):
    from infra.settings import Settings

    config = tmp_path / "flywheel.toml"
    assert main(["init", "--path", str(config)]) == 0
    monkeypatch.setenv("FLYWHEEL_CONFIG", str(config))
    settings = Settings()  # every key in the template is a real setting
    assert settings.traces.source == "langfuse" and settings.lm.backend == "openai"
    assert settings.judge.min_heldout_labels == 20 and settings.promotion.auto is False
    config.write_text("# mine\n")
    assert main(["init", "--path", str(config)]) == 2
    assert "--force" in capsys.readouterr().err and config.read_text() == "# mine\n"
    assert main(["init", "--path", str(config), "--force"]) == 0
    assert "LANGFUSE_SECRET_KEY" in config.read_text()


def test_a_failed_night_exits_1_with_a_sentence_and_keeps_the_traceback(
    tmp_path, monkeypatch, capsys
):
    from flows import nightly
    from flows.night.runtime import Runtime

    async def broken(**kwargs):
        raise RuntimeError("the model server went away")

    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(Runtime, "preflight", lambda self: None)
    monkeypatch.setattr(nightly, "nightly", broken)
    assert main(["run", "--resume", "n1"]) == 1
    err = capsys.readouterr().err  # the night's start line, then why it ended, in one
    assert "Traceback" not in err
    err = err.strip().splitlines()[-1]
    assert "night n1 failed: RuntimeError: the model server went away" in err
    assert "flywheel run --resume n1" in err and "error.txt" in err
    trace = tmp_path / "state" / "runs" / "n1" / "error.txt"
    assert "Traceback" in trace.read_text() and "went away" in trace.read_text()


@pytest.mark.parametrize("section", ["lm", "reflection", "judge_lm", "serving"])
def test_secret_in_toml_is_refused(tmp_path, monkeypatch, section):
    config = tmp_path / "flywheel.toml"
    config.write_text(f'[{section}]\napi_key = "sk-secret"\n')
    monkeypatch.setenv("FLYWHEEL_CONFIG", str(config))
    from infra.errors import UserFacingError
    from infra.settings import Settings

    with pytest.raises(UserFacingError, match=f"FLYWHEEL_{section.upper()}__API_KEY"):
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


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "toml, said",
    [
        ("[lora]\nrnak = 4\n", "[lora] has no key 'rnak' (did you mean 'rank'?)"),
        ("[lora]\nrank = 'eight'\n", "[lora] rank: Input should be a valid integer"),
        ("[judge.lora]\nepoch = 2\n", "[judge.lora] has no key 'epoch' (did you mean 'epochs'?)"),
        ("agnet = 'x'\n", "has no key 'agnet' (did you mean 'agent'?)"),
        ("[lora\nrank = 4\n", "is not valid TOML"),
        ("[lm]\napi_key = 'sk-1'\n", "lm.api_key must not be written in the TOML file"),
        (
            "[agent_opt]\nmax_metric_calls = -5\n",
            "[agent_opt] max_metric_calls: Input should be greater than 0 (got -5)",
        ),
        (
            "[agent_opt]\nmax_metric_calls = 0\n",
            "[agent_opt] max_metric_calls: Input should be greater than 0 (got 0)",
        ),
    ],
)
def test_settings_that_cannot_load_are_one_sentence_and_exit_2(
    toml, said, tmp_path, monkeypatch, capsys
):
    config = tmp_path / "flywheel.toml"
    config.write_text(toml)
    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("FLYWHEEL_CONFIG", "")  # --config sets it: undone after the test
    assert main(["--config", str(config), "status"]) == 2
    err = _one_line(capsys)
    assert said in err, err
    if "TOML file" not in said:
        assert str(config) in err  # the file it is in
    assert "sk-1" not in err


def test_a_wrong_environment_variable_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("FLYWHEEL_LORA__RANK", "eight")
    assert main(["status"]) == 2
    assert "the environment variable FLYWHEEL_LORA__RANK: [lora] rank" in _one_line(capsys)


def test_a_settings_file_named_but_missing_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    missing = tmp_path / "nowhere.toml"
    monkeypatch.setenv("FLYWHEEL_CONFIG", "")  # --config sets it: undone after the test
    assert main(["--config", str(missing), "status"]) == 2
    assert f"the settings file {missing} does not exist" in _one_line(capsys)
    monkeypatch.setenv("FLYWHEEL_CONFIG", str(missing))
    assert main(["status"]) == 2


def test_version_help_and_usage_errors(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("flywheel 0.")
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and "4  the gate refused the candidate" in out
    with pytest.raises(SystemExit) as done:
        main(["promote", "--bogus"])
    assert done.value.code == 2  # USAGE


def test_status_json_is_the_same_facts_for_scripts(tmp_path, monkeypatch, capsys):
    import json

    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    assert main(["status", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == "agent" and data["production"] is None
    assert data["candidate"] is None and data["nights"] == [] and data["history"] == []
    # the MLflow store status made on this first run is the user's alone
    assert (tmp_path / "state" / "mlflow.db").stat().st_mode & 0o777 == 0o600


def test_a_refused_promote_exits_4_with_its_reason(tmp_path, monkeypatch, capsys):
    from contextlib import nullcontext

    from flows.production.promotion import Move

    async def refused(version, by):
        return Move("refused", version, 1, "v2 has no held-out evidence recorded", by, "now")

    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr("flows.plumbing.prefect_server.night_prefect", nullcontext)
    monkeypatch.setattr("flows.production.moves.promote_flow", refused)
    assert main(["promote", "2", "--by", "ana"]) == 4  # GATE_REFUSED
    err = _one_line(capsys)
    assert err.startswith("flywheel: refused v2") and "no held-out evidence" in err, err


def test_lines_for_scripts_stay_whole_on_a_narrow_console(tmp_path, monkeypatch, capsys):
    from contextlib import nullcontext

    from flows.production.promotion import Move

    move = Move("promoted", 2, 1, "held-out gain +0.12, 95% interval 0.04 to 0.20", "ana", "now")

    async def promoted(version, by):
        return move

    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "30")  # narrower than every line below
    monkeypatch.setattr("flows.plumbing.prefect_server.night_prefect", nullcontext)
    monkeypatch.setattr("flows.production.moves.promote_flow", promoted)
    assert main(["promote", "2", "--by", "ana"]) == 0
    assert capsys.readouterr().out == move.line() + "\n"
    assert main(["status"]) == 0
    assert "Production: none (the agent's seed prompts)" in capsys.readouterr().out.splitlines()


def test_a_night_whose_gate_refused_exits_4_with_the_gates_reason(tmp_path, monkeypatch, capsys):
    from contextlib import nullcontext
    from types import SimpleNamespace

    class Runtime:
        def __init__(self, settings):
            pass

        def preflight(self):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    async def night(run_id, knobs, runtime):
        decision = SimpleNamespace(passed=False, reason="held-out gain -0.02 is not above 0")
        return SimpleNamespace(promotion=decision)

    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr("flows.night.runtime.Runtime", Runtime)
    monkeypatch.setattr("flows.nightly.nightly", night)
    monkeypatch.setattr("flows.plumbing.prefect_server.night_prefect", lambda: nullcontext("x"))
    monkeypatch.setattr("flows.report.summary.print_summary", lambda report, console: None)
    assert main(["run"]) == 4  # GATE_REFUSED
    err = capsys.readouterr().err  # the night's start line, then why it ended so
    assert "Traceback" not in err, err
    err = err.strip().splitlines()[-1]
    assert "the gate refused night" in err and "held-out gain -0.02" in err, err
