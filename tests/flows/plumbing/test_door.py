"""Every command that changes a state folder comes in by the same door: the scheduled
deployment's night and the command line's run, promote and rollback wait for each other
or refuse with one sentence, and what they leave in the folder is the user's alone."""

import asyncio
import os
import subprocess
import sys

import pytest

from flows.cli import main
from flows.plumbing.night_lock import NightRunning

# A scheduled night, as the deployment runs it, that holds the door until told to end.
DEPLOYMENT_NIGHT = """
import asyncio, sys
from flows import nightly
from flows.night.runtime import Runtime
from flows.plumbing.deployment import nightly_deployment

async def night(run_id, knobs, runtime):
    print(f"night {run_id}", flush=True)
    sys.stdin.readline()

Runtime.preflight = lambda self: None  # no model to load: the door is what is tested
nightly.nightly = night
asyncio.run(nightly_deployment.fn())
"""

# `flywheel rollback` by ana, holding the door until told to end.
CLI_ROLLBACK = """
import contextlib, sys
import flows.plumbing.prefect_server as server
from flows import cli
from flows.production import moves
from flows.production.promotion import Move

async def rollback(by):
    print("rolling back", flush=True)
    sys.stdin.readline()
    return Move("rolled back", 1, 2, "as asked", by, "now")

moves.rollback_flow = rollback
server.night_prefect = contextlib.nullcontext
cli.main(["rollback", "--by", "ana"])
"""


@pytest.fixture
def state(tmp_path, monkeypatch):
    folder = tmp_path / "state"
    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(folder))
    return folder


def _holding(script: str) -> tuple[subprocess.Popen, str]:
    held = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    return held, held.stdout.readline().strip()


def _let_go(held: subprocess.Popen) -> None:
    held.stdin.write("done\n")
    held.stdin.close()
    held.wait(timeout=120)


def test_a_command_line_run_or_move_refuses_while_the_deployment_s_night_runs(state, capsys):
    held, said = _holding(DEPLOYMENT_NIGHT)
    try:
        assert said.startswith("night ")  # the deployment's run id: its scheduled start
        for command in (["run"], ["promote", "3", "--by", "ana"], ["rollback"]):
            assert main(command) == 3  # LOCKED
            err = capsys.readouterr().err.strip()
            assert "\n" not in err and "Traceback" not in err, err
            assert f"is in use by {said} (process {held.pid}" in err, err
    finally:
        _let_go(held)
    assert held.returncode == 0


def test_the_deployment_s_night_refuses_while_a_command_line_move_runs(state, monkeypatch):
    from flows.plumbing.deployment import nightly_deployment

    held, said = _holding(CLI_ROLLBACK)
    try:
        assert said == "rolling back"
        with pytest.raises(NightRunning, match=r"in use by `flywheel rollback` by ana \(process"):
            asyncio.run(nightly_deployment.fn())
    finally:
        _let_go(held)


def test_the_deployment_refuses_a_settings_file_that_is_not_there(state, monkeypatch):
    from flows.plumbing.deployment import nightly_deployment
    from infra.settings_errors import SettingsError

    missing = state.parent / "nowhere.toml"
    monkeypatch.setenv("FLYWHEEL_CONFIG", str(missing))  # the worker's environment
    with pytest.raises(SettingsError, match=f"the settings file {missing} does not exist"):
        asyncio.run(nightly_deployment.fn())
    assert not state.exists()  # refused before the door: nothing made


def test_what_a_guarded_command_leaves_in_the_state_folder_is_the_user_s_alone(state, monkeypatch):
    from flows.production.promotion import Move

    # a folder an earlier version left readable by others
    (state / "runs" / "n1").mkdir(parents=True, mode=0o755)
    state.chmod(0o755)
    for name in ("labels.sqlite", "mlflow.db", "runs/n1/calls.jsonl"):
        (state / name).write_text("trace text")
        (state / name).chmod(0o644)

    served = state.parent / "adapters" / "agent-v2.safetensors"  # a volume vLLM reads

    async def promote(version, by):
        (state / "outbox").mkdir()
        (state / "outbox" / "labels.jsonl").write_text("trace text")
        served.parent.mkdir()
        served.write_text("weights")
        return Move("promoted", version, None, "passed the gate", by, "now")

    monkeypatch.setattr("flows.plumbing.prefect_server.night_prefect", _no_prefect)
    monkeypatch.setattr("flows.production.moves.promote_flow", promote)
    umask = os.umask(0o022)
    try:
        assert main(["promote", "2", "--by", "ana"]) == 0
    finally:
        os.umask(umask)
    # outside the state folder, what the command wrote keeps the user's own modes
    assert served.stat().st_mode & 0o777 == 0o644
    modes = {str(path.relative_to(state)): path.stat().st_mode & 0o777 for path in state.rglob("*")}
    assert state.stat().st_mode & 0o777 == 0o700
    assert modes["labels.sqlite"] == modes["mlflow.db"] == modes["runs/n1/calls.jsonl"] == 0o600
    assert modes["outbox/labels.jsonl"] == 0o600 and modes["outbox"] == modes["runs"] == 0o700
    assert not [name for name, mode in modes.items() if mode & 0o077], modes


def _no_prefect():
    from contextlib import nullcontext

    return nullcontext("no Prefect")


def test_a_night_that_can_run_keeps_its_heap_trimmed_and_one_that_cannot_does_not(
    tmp_path, monkeypatch
):
    from flows.night.runtime import Runtime
    from flows.plumbing import door as door_module
    from infra import settings as settings_module
    from infra.lm import heap

    started: list[str] = []
    monkeypatch.setattr(heap, "keep_heap_trimmed", lambda: started.append("trimmed"))
    settings = settings_module.Settings(state_dir=tmp_path / "state")

    def unreachable(self) -> None:
        raise RuntimeError("no model here")

    monkeypatch.setattr(Runtime, "preflight", unreachable)
    with pytest.raises(RuntimeError), door_module.night_door(settings, "20261207T000000Z"):
        pass
    assert started == []  # refused before it ran: nothing started in this process
    monkeypatch.setattr(Runtime, "preflight", lambda self: None)
    with door_module.night_door(settings, "20261207T000001Z"):
        assert started == ["trimmed"]
