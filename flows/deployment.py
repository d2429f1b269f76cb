"""The flow as a Prefect deployment runs it: a fresh run id per night from the
scheduled start time; models and services from flywheel.toml and FLYWHEEL_* in the
worker's environment; the night's knobs from there too, unless the deployment or a run
overrides them (Prefect shows them as this flow's parameters)."""

from __future__ import annotations

from prefect import flow
from prefect.runtime import flow_run

from flows.night_report import NightReport
from flows.nightly import nightly
from flows.runtime import RUN_ID_FORMAT, Runtime
from infra.settings import NightKnobs, Settings


@flow(name="nightly-scheduled")
async def nightly_deployment(knobs: NightKnobs | None = None) -> NightReport:
    settings = Settings()
    run_id = flow_run.scheduled_start_time.strftime(RUN_ID_FORMAT)
    return await nightly(run_id=run_id, knobs=knobs or settings.knobs(), runtime=Runtime(settings))
