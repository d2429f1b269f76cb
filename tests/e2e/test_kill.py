"""A night killed from outside (SIGTERM, SIGKILL) takes Prefect's server with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_nightly import small_export
from tests.fake_openai import FakeOpenAI, serving

pytestmark = pytest.mark.slow

FLYWHEEL = str(Path(sys.executable).with_name("flywheel"))


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for a reaper."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def prefect_child(pid: int, timeout_s: float = 120) -> int:
    """The night's Prefect server, once it answers (its night has started)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for child in children(pid):
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"prefect.server.api.server" in cmdline:
                return child
        time.sleep(0.2)
    raise AssertionError("the night started no Prefect server")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_prefect_server_dies_with_a_killed_night(tmp_path, signum):
    export = small_export(tmp_path / "export", traces=24, heldout=6)
    with serving(FakeOpenAI()) as url:
        env = {
            **os.environ,
            "FLYWHEEL_STATE_DIR": str(tmp_path / "state"),
            "FLYWHEEL_LM__BACKEND": "openai",
            "FLYWHEEL_LM__BASE_URL": url,
            "FLYWHEEL_TRACES__JSONL_DIR": str(export),
            "FLYWHEEL_LORA__ENABLED": "false",
            "FLYWHEEL_JUDGE__LORA__ENABLED": "false",
        }
        night = subprocess.Popen([FLYWHEEL, "run"], env=env, stdout=subprocess.DEVNULL)
        try:
            server = prefect_child(night.pid)
            time.sleep(3)  # into the night
            night.send_signal(signum)
            night.wait(timeout=60)
        finally:
            if night.poll() is None:
                night.kill()
        deadline = time.monotonic() + 30
        while alive(server) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not alive(server), f"Prefect's server {server} outlived its night"
