"""The flow as a Prefect deployment runs it: a fresh run id per night from the
scheduled start time, settings from flywheel.toml and FLYWHEEL_* in the worker's env."""

from __future__ import annotations

from prefect import flow
from prefect.runtime import flow_run

from flows.nightly import nightly
from flows.report import NightReport


@flow(name="nightly-scheduled")
async def nightly_deployment() -> NightReport:
    start = flow_run.scheduled_start_time
    return await nightly(run_id=start.strftime("%Y%m%dT%H%M%SZ"))
