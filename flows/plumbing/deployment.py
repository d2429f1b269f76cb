"""The flow as a Prefect deployment runs it: a fresh run id per night from the
scheduled start time; models and services from flywheel.toml and FLYWHEEL_* in the
worker's environment; the night's knobs from there too, unless the deployment or a run
overrides them (Prefect shows them as this flow's parameters). The night goes through
the same door as `flywheel run`: the folder's lock, the preflight, a private state
folder and offline model libraries."""

from __future__ import annotations

import logging

from prefect import flow
from prefect.runtime import flow_run

from flows.night.run_id import RUN_ID_FORMAT
from flows.plumbing.door import night_door
from infra.settings import NightKnobs
from infra.settings_errors import load_settings

# A worker has no progress bars to watch: flywheel's progress lines (each stage's start,
# new bests, its end) go to the run's logs in the Prefect UI, beside its warnings.
for package in ("flows", "judges", "infra", "gepa_opt", "weights"):
    logging.getLogger(package).setLevel(logging.INFO)

# A night stuck past this is stopped (Prefect marks it TimedOut), so it never holds the
# deployment's one concurrency slot when the next night is due.
NIGHT_TIMEOUT_S = 6 * 3600


@flow(name="nightly-scheduled", timeout_seconds=NIGHT_TIMEOUT_S)
async def nightly_deployment(knobs: NightKnobs | None = None):
    # no return annotation: the night's NightReport would load the model libraries
    # here, before the door sets them offline (Prefect resolves the hints as it loads)
    settings = load_settings()  # a file named but missing is a sentence, not the defaults
    run_id = flow_run.scheduled_start_time.strftime(RUN_ID_FORMAT)
    with night_door(settings, run_id) as runtime:
        # imported behind the door: the night loads the model libraries, which read the
        # offline settings the door sets only as they load
        from flows.nightly import nightly

        return await nightly(run_id=run_id, knobs=knobs or settings.knobs(), runtime=runtime)
