"""The night's own Prefect server: the night's last logs reach it before it stops."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# a flow that logs right up to its end, on the night's own server, in a fresh process
CHATTY_NIGHT = """
from prefect import flow, get_run_logger
from flows.plumbing.prefect_server import night_prefect

@flow
def chatty():
    for i in range(200):
        get_run_logger().info("line %d of the night's end", i)

with night_prefect():
    chatty()
print("the night ended", flush=True)
"""


def test_the_nights_last_logs_are_sent_before_its_server_stops(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "PREFECT_HOME": str(tmp_path),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    done = subprocess.run(
        [sys.executable, "-c", CHATTY_NIGHT],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "the night ended" in done.stdout, done.stderr[-2000:]
    # stopped with logs still queued, Prefect's log worker says so as the process exits
    assert "Error logging to API" not in done.stderr, done.stderr[-2000:]
