"""Prefect's test harness, given as long to start its server as the night gives its own:
its database migrations take over 30 s (the harness's default) on two slow cores busy
with other work."""

from contextlib import AbstractContextManager

from prefect.testing.utilities import prefect_test_harness

from flows.plumbing.prefect_server import STARTUP_TIMEOUT_S


def prefect_harness() -> AbstractContextManager:
    return prefect_test_harness(server_startup_timeout=int(STARTUP_TIMEOUT_S))
