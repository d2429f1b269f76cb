"""A night's held-out evaluations as a Langfuse dataset and its runs (experiments), through
the v5 SDK's REST client.

The dataset (`api.datasets`) is found by name or made; each held-out example is upserted
as an item (`api.dataset_items.create`, id from `HeldoutItem.item_id`), its source trace
the production trace it was held out from. Langfuse v5 has no REST call that makes a
run item: a run is an experiment, which Langfuse builds from spans carrying its
`langfuse.experiment.*` attributes. So each run item goes as one span through the
OpenTelemetry endpoint (`api.opentelemetry.export_traces`), as the SDK's
`run_experiment` sends it, and its score through `api.scores.create` on that span.

What a run item links to, honestly: the held-out replies were made offline, by replaying
the item's request on each version, and no trace of that replay exists in Langfuse. The
span is that trace: the request, the version's reply, and the production trace it came
from in its metadata (the item links it too). It is a span in Langfuse's experiment
environment, so the next night, which reads generations and tool calls, never reads it
back as a production trace. Trace, span and score ids are derived from the run's id and
the item, so a night sent again updates them in place.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime
from typing import TYPE_CHECKING

from langfuse.api import NotFoundError
from langfuse.api.opentelemetry import (
    OtelAttribute,
    OtelAttributeValue,
    OtelResource,
    OtelResourceSpan,
    OtelScope,
    OtelScopeSpan,
    OtelSpan,
)
from langfuse.api.scores import CreateScoreBatchResults, CreateScoreRequest

from infra.traces.heldout_runs import SCORE_NAME, HeldoutItem, HeldoutRun, SentRuns
from infra.traces.source import TraceSourceError

if TYPE_CHECKING:
    from langfuse.api import LangfuseAPI
    from langfuse.api.commons import Dataset

EXPERIMENT_ENVIRONMENT = "sdk-experiment"  # where Langfuse's own SDK puts experiment traces
# Langfuse's OpenTelemetry endpoint processes spans at once only with this header
INGESTION = {"additional_headers": {"x-langfuse-ingestion-version": "4"}}
SPAN_BATCH = 100  # spans per export call
SCORE_BATCH = 100


def send_runs(
    api: LangfuseAPI,
    dataset: str,
    items: list[HeldoutItem],
    runs: list[HeldoutRun],
    at: datetime,
    ui_base: str,
) -> SentRuns:
    """Upsert the dataset's items, then each run's items and scores, stamped `at` (the
    same time when sent again: Langfuse updates a score with the same id and time)."""
    found = _dataset(api, dataset)
    for item in items:
        api.dataset_items.create(
            dataset_name=found.name,
            id=item.item_id(found.name),
            input=item.input,
            expected_output=item.expected_output,
            source_trace_id=item.trace_id,
            metadata={"flywheel_example_id": item.example_id},
        )
    project = _project_id(api)
    sent = {}
    for run in runs:
        experiment = experiment_id(project, found.id, run.name)
        scored = run.scored(items)
        spans = [_span(found, run, experiment, item, at) for item in scored]
        for start in range(0, len(spans), SPAN_BATCH):
            api.opentelemetry.export_traces(
                resource_spans=[_resource(spans[start : start + SPAN_BATCH])],
                request_options=INGESTION,
            )
        _scores(api, [_score(found, run, experiment, item, at) for item in scored])
        sent[run.name] = len(scored)
    link = f"{ui_base}/project/{project}/datasets/{found.id}"
    return SentRuns(dataset=found.name, items=len(items), runs=sent, link=link)


def experiment_id(project_id: str, dataset_id: str, run_name: str) -> str:
    """The run's id as Langfuse itself derives it from the dataset and the run's name (the
    SDK's `_create_experiment_id`), so a run sent again, or by the SDK under the same
    name, is the same run."""
    payload = json.dumps(
        ["langfuse-experiment-v1", project_id, dataset_id, run_name],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def replay_ids(experiment: str, item_id: str) -> tuple[str, str]:
    """The (trace id, span id) of the run item: 32 and 16 hex digits, as OpenTelemetry
    wants them, from the run and the item only."""
    digest = uuid.uuid5(uuid.NAMESPACE_URL, f"flywheel/{experiment}/{item_id}").hex
    return digest, hashlib.sha256(digest.encode()).hexdigest()[:16]


def _dataset(api: LangfuseAPI, name: str) -> Dataset:
    try:
        return api.datasets.get(name)
    except NotFoundError:
        return api.datasets.create(
            name=name,
            description="flywheel's held-out examples: each night's versions are its runs",
        )


def _project_id(api: LangfuseAPI) -> str:
    projects = api.projects.get().data
    if not projects:
        raise TraceSourceError(
            "Langfuse named no project for these API keys, and a run's id is derived from "
            "its project: use a project's keys (LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY)."
        )
    return projects[0].id


def _span(
    dataset: Dataset, run: HeldoutRun, experiment: str, item: HeldoutItem, at: datetime
) -> OtelSpan:
    item_id = item.item_id(dataset.name)
    trace_id, span_id = replay_ids(experiment, item_id)
    stamp = str(int(at.timestamp() * 1e9))
    attributes: dict[str, str | None] = {
        "langfuse.observation.type": "span",
        "langfuse.environment": EXPERIMENT_ENVIRONMENT,
        "langfuse.trace.name": "flywheel-heldout-replay",
        "langfuse.observation.input": json.dumps(item.input, ensure_ascii=False),
        "langfuse.observation.output": json.dumps(run.replies[item.example_id], ensure_ascii=False),
        "langfuse.observation.metadata.source_trace_id": item.trace_id,
        "langfuse.observation.metadata.flywheel_example_id": item.example_id,
        "langfuse.experiment.id": experiment,
        "langfuse.experiment.name": run.name,
        "langfuse.experiment.description": run.description or None,
        "langfuse.experiment.dataset.id": dataset.id,
        "langfuse.experiment.item.id": item_id,
        "langfuse.experiment.item.root_observation_id": span_id,
        "langfuse.experiment.item.expected_output": None
        if item.expected_output is None
        else json.dumps(item.expected_output, ensure_ascii=False),
    }
    return OtelSpan(
        trace_id=trace_id,
        span_id=span_id,
        name="flywheel-heldout-replay",
        kind=1,  # internal
        start_time_unix_nano=stamp,
        end_time_unix_nano=stamp,
        attributes=[
            OtelAttribute(key=key, value=OtelAttributeValue(string_value=value))
            for key, value in attributes.items()
            if value is not None
        ],
        status={},
    )


def _resource(spans: list[OtelSpan]) -> OtelResourceSpan:
    service = OtelAttribute(key="service.name", value=OtelAttributeValue(string_value="flywheel"))
    return OtelResourceSpan(
        resource=OtelResource(attributes=[service]),
        scope_spans=[OtelScopeSpan(scope=OtelScope(name="flywheel"), spans=spans)],
    )


def _score(
    dataset: Dataset, run: HeldoutRun, experiment: str, item: HeldoutItem, at: datetime
) -> CreateScoreRequest:
    trace_id, span_id = replay_ids(experiment, item.item_id(dataset.name))
    return CreateScoreRequest(
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"flywheel/{trace_id}/{SCORE_NAME}")),
        environment=EXPERIMENT_ENVIRONMENT,
        trace_id=trace_id,
        observation_id=span_id,
        name=SCORE_NAME,
        value=float(run.scores[item.example_id]),
        data_type="NUMERIC",
        metadata={"run": run.name, "flywheel_example_id": item.example_id},
        timestamp=at,
    )


def _scores(api: LangfuseAPI, scores: list[CreateScoreRequest]) -> None:
    """Every score accepted, or an error: the run's figures are the report's, and a run
    missing some would disagree with it without saying so."""
    for start in range(0, len(scores), SCORE_BATCH):
        response = api.scores.create(request=scores[start : start + SCORE_BATCH])
        if isinstance(response, CreateScoreBatchResults) and response.errors:
            raise TraceSourceError(
                f"Langfuse refused {len(response.errors)} held-out scores: "
                f"{response.errors[0].message}"
            )
