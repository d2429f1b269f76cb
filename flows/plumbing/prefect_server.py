"""Prefect's API server for a night on this machine, as a child that dies with it.

Prefect's own ephemeral mode starts the same server (uvicorn on loopback, its database
under PREFECT_HOME) but stops it only at a clean exit: a night ended by SIGTERM or
SIGKILL leaves it running, holding its port and database. Started here, the child asks
the kernel for SIGTERM when its parent dies (Linux `PR_SET_PDEATHSIG`), whatever
killed the parent.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

STARTUP_TIMEOUT_S = 180.0  # its database migrations, on two slow cores
DRAIN_TIMEOUT_S = 10.0  # the last batches of logs and events, to a server on loopback


@contextmanager
def prefect_server() -> Iterator[str]:
    """Start the server, yield its API URL, stop it at the end (and with this process)."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "prefect.server.api.server:create_app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "error",
            "--lifespan",
            "on",
        ],
        env=os.environ | {"PREFECT_UI_ENABLED": "0"},
        preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
    )
    try:
        _wait_healthy(url, child)
        yield url
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _die_with_parent() -> None:
    """Runs in the child before uvicorn starts: SIGTERM when the parent dies."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_healthy(url: str, child: subprocess.Popen) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"Prefect's server exited at start-up (status {child.returncode})")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"Prefect's server did not answer on {url} in {STARTUP_TIMEOUT_S:.0f} s")


@contextmanager
def night_prefect() -> Iterator[str]:
    """Where this process's flow runs go, said in words: the Prefect server the settings
    point at (the team's: PREFECT_API_URL or the active profile), else a server of ours
    for as long as this block (and this process) lives."""
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    from infra.redaction import mask

    if team := get_current_settings().api.url:
        yield f"Prefect at {mask(team)}"
        return
    with prefect_server() as url, temporary_settings(updates={PREFECT_API_URL: url}):
        try:
            yield "Prefect's own server in the state folder"
        finally:
            _drain()


def _drain() -> None:
    """Send the logs and events still queued (they go in batches, every few seconds)
    while the server is up: stopped first, the night's last log lines were lost, and
    "Error logging to API" ended the night's output. Prefect's own test harness does
    the same before it stops its server."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=DRAIN_TIMEOUT_S)
    EventsWorker.drain_all(timeout=DRAIN_TIMEOUT_S)
