"""Label requests and judge scores sent to Langfuse through the v5 SDK's REST client.

Label requests become annotation queue items (`api.annotation_queues.create_queue_item`,
object type TRACE); Langfuse's queue items carry no note, so the reason and margin are
only logged here. Judge scores go in batches through `api.scores.create`. Their source
is API: the public API refuses EVAL (reserved for Langfuse's own evaluators), and
ANNOTATION would make them read as human labels on the next night.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from langfuse.api.annotation_queues import AnnotationQueueObjectType, AnnotationQueueStatus
from langfuse.api.scores import CreateScoreBatchResults, CreateScoreRequest

from infra.traces.feedback import JudgeScore, LabelRequest
from infra.traces.source import TraceSourceError

if TYPE_CHECKING:
    from langfuse.api import LangfuseAPI

log = logging.getLogger(__name__)

QUEUE_PAGE = 100
SCORE_BATCH = 100  # scores per create call


def resolve_queue_id(api: LangfuseAPI, queue: str) -> str:
    """The id of the annotation queue named `queue` or with id `queue`."""
    matches: list[Any] = []
    page = 1
    while True:
        listing = api.annotation_queues.list_queues(page=page, limit=QUEUE_PAGE)
        matches += [q for q in listing.data if queue in (q.id, q.name)]
        if page >= (listing.meta.total_pages or 0):
            break
        page += 1
    ids = {q.id for q in matches}
    if len(ids) == 1:
        return ids.pop()
    if not ids:
        raise TraceSourceError(
            f"Langfuse has no annotation queue named or with id {queue!r} in this project: "
            "create it under Annotation Queues, or fix FLYWHEEL_TRACES__ANNOTATION_QUEUE."
        )
    raise TraceSourceError(
        f"{len(ids)} Langfuse annotation queues are named {queue!r}: set "
        "FLYWHEEL_TRACES__ANNOTATION_QUEUE to the id of the one to use."
    )


def pending_traces(api: LangfuseAPI, queue_id: str) -> set[str]:
    """The traces of the queue's pending items, through every page."""
    traces: set[str] = set()
    page = 1
    while True:
        listing = api.annotation_queues.list_queue_items(
            queue_id, status=AnnotationQueueStatus.PENDING, page=page, limit=QUEUE_PAGE
        )
        traces |= {
            item.object_id
            for item in listing.data
            if item.object_type == AnnotationQueueObjectType.TRACE
        }
        if page >= (listing.meta.total_pages or 0):
            return traces
        page += 1


def create_queue_items(api: LangfuseAPI, queue_id: str, items: list[LabelRequest]) -> int:
    for item in items:
        api.annotation_queues.create_queue_item(
            queue_id, object_id=item.trace_id, object_type=AnnotationQueueObjectType.TRACE
        )
        log.info(
            "asked for a label on trace %s (%s; judge %s)",
            item.trace_id,
            item.reason,
            item.judge_version,
        )
    return len(items)


def create_scores(
    api: LangfuseAPI,
    scores: list[JudgeScore],
    environments: dict[str, str] | None = None,
    environment: str | None = None,
    config_id: str | None = None,
) -> int:
    """Scores written, each in its trace's environment (`environments`, else
    `environment`, else Langfuse's default) and under the score config `config_id`; a
    batch Langfuse partly rejects (HTTP 207) is logged, not resent."""
    environments = environments or {}
    written = 0
    for start in range(0, len(scores), SCORE_BATCH):
        batch = scores[start : start + SCORE_BATCH]
        requests = [
            _request(score, environments.get(score.trace_id, environment), config_id)
            for score in batch
        ]
        response = api.scores.create(request=requests)
        if isinstance(response, CreateScoreBatchResults):
            written += response.accepted
            for error in response.errors:
                log.warning("Langfuse rejected a judge score: %s", error.message)
        else:  # 202: all accepted
            written += len(batch)
    return written


def _request(
    score: JudgeScore, environment: str | None, config_id: str | None
) -> CreateScoreRequest:
    return CreateScoreRequest(
        id=score.id,
        environment=environment,
        config_id=config_id,
        trace_id=score.trace_id,
        name=score.name,
        value=score.value,
        data_type=score.data_type,
        comment=score.comment,
        metadata=score.metadata,
        timestamp=score.timestamp,
    )
