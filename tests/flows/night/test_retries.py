"""A blip of a service is waited out; bad input is not retried."""

import httpx
import pytest
from prefect import flow, task

from flows import nightly
from flows.night.runtime import Runtime
from infra.errors import UserFacingError, is_transient
from infra.settings import Settings
from tests.prefect_harness import prefect_harness


class Unavailable(Exception):
    status_code = 503


class NotFound(Exception):
    status_code = 404


def test_which_faults_are_worth_waiting_for():
    assert is_transient(TimeoutError())
    assert is_transient(httpx.ConnectError("refused"))
    assert is_transient(Unavailable())
    wrapped = UserFacingError("Langfuse could not be read (503)")
    wrapped.__cause__ = Unavailable()
    assert is_transient(wrapped)
    assert not is_transient(NotFound())
    assert not is_transient(ValueError("trainset is empty"))
    assert not is_transient(UserFacingError("No human annotation named 'correct'"))


@pytest.fixture(scope="module")
def harness():
    with prefect_harness():
        yield


def test_a_network_stage_retries_blips_but_not_bad_input(tmp_path, harness):
    rt = Runtime(Settings(state_dir=tmp_path, network={"retry_delay_s": 0}))
    calls = {"blip": 0, "bad": 0}

    @task(retries=0)
    def blip() -> str:
        calls["blip"] += 1
        if calls["blip"] < 3:
            raise httpx.ReadTimeout("slow server")
        return "read"

    @task(retries=0)
    def bad() -> None:
        calls["bad"] += 1
        raise ValueError("a page of the wrong shape")

    @flow
    def night() -> tuple[str, str]:
        first = nightly._retrying(rt, blip)()
        try:
            nightly._retrying(rt, bad)()
        except ValueError as error:
            return first, str(error)
        return first, "not raised"

    assert night() == ("read", "a page of the wrong shape")
    assert calls == {"blip": 3, "bad": 1}  # two retries, as [network] says; none for bad input
