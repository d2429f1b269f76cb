"""Traces from a Langfuse server through the Langfuse v5 Python SDK's REST client.

Generations come from the observations v2 API (`api.observations.get_many`, cursor
pages) and human annotations from the scores v3 API (`api.scores.get_many`, cursor
pages, `source=ANNOTATION`). Both pass through `infra.traces.mapping`. The annotation's
score config comes from `api.score_configs.get` (numbered pages). Label requests
and judge scores go back through `infra.traces.langfuse_feedback`, the night's held-out
evaluations through `infra.traces.langfuse_datasets`. The SDK's `api` object is the
seam: tests hand in a fake with the same methods.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx
import pydantic
from langfuse.api.core.api_error import ApiError

from infra.redaction import mask
from infra.scales import ScoreScale
from infra.settings import TraceSettings
from infra.traces import langfuse_datasets, langfuse_feedback
from infra.traces.errors import RecordError
from infra.traces.feedback import JudgeScore, LabelRequest
from infra.traces.heldout_runs import HeldoutItem, HeldoutRun, SentRuns
from infra.traces.mapping import (
    annotation_from_score,
    correction_from_score,
    trace_from_observation,
)
from infra.traces.record_shape import check_shape
from infra.traces.score_scale import scale_in_force
from infra.traces.sessions import on_last_traces
from infra.traces.source import SkippedRecord, TraceBatch, TraceSourceError, as_utc
from infra.traces.types import GENERATION, TOOL, TraceRecord
from infra.types import Example

if TYPE_CHECKING:
    from langfuse.api import LangfuseAPI

log = logging.getLogger(__name__)

# Field groups of the observations v2 API that TraceRecord reads (core is always sent).
OBSERVATION_FIELDS = "basic,io,metadata,model,prompt,trace_context"
SCORE_FIELDS = "details,subject"  # comment + metadata, and which trace/observation
OBSERVATION_PAGE = 100
SCORE_PAGE = 100  # the scores v3 API's maximum
CONFIG_PAGE = 100
MAX_PAGES = 1_000  # of any listing: 100,000 records, far past a night's traces
# The SDK reads these itself; flywheel only checks that they are there, never logs them.
KEY_VARS = ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY")


class LangfuseTraceSource:
    def __init__(
        self, settings: TraceSettings, api: LangfuseAPI | None = None, timeout_s: int = 30
    ):
        self.settings = settings
        self._api = api if api is not None else sdk_api(timeout_s)
        self._queue_id: str | None = None
        self._environments: dict[str, str] = {}  # trace id -> its environment, as read

    def fetch(self, since: datetime | None, limit: int) -> TraceBatch:
        with api_errors("could not be read"):
            return self._fetch(as_utc(since), limit)

    def heldout_file(self) -> None:
        return None  # production traces carry no true labels: eval.dataset names them

    def dataset_examples(self, name: str) -> list[Example]:
        """The active items of Langfuse dataset `name` as held-out examples: the item's
        input (an object: the agent's inputs) and its expected output (the reference)."""
        with api_errors(f"did not give dataset {name!r} (eval.dataset)"):
            items = list(
                _numbered_pages(
                    lambda **page: self._api.dataset_items.list(dataset_name=name, **page)
                )
            )
        examples = []
        for item in items:
            if getattr(item, "status", "ACTIVE") == "ARCHIVED":
                continue
            _check_item(name, item)
            if not isinstance(item.input, dict):
                raise RecordError(
                    "input",
                    f"dataset {name!r} item {item.id}: the input must be an object of the "
                    f"agent's inputs, got {type(item.input).__name__}",
                )
            expected = item.expected_output
            reference = (
                expected if expected is None or isinstance(expected, str) else json.dumps(expected)
            )
            metadata = item.metadata if isinstance(item.metadata, dict) else {}
            examples.append(Example(item.id, item.input, reference, metadata))
        return examples

    def fetch_labels(
        self, name: str, since: datetime | None, have: Collection[str] = ()
    ) -> TraceBatch:
        with api_errors("could not be read"):
            return self._fetch_labels(name, as_utc(since), set(have))

    def _fetch_labels(self, name: str, since: datetime | None, have: set[str]) -> TraceBatch:
        batch = TraceBatch()
        scores = self._scores(batch, since, name=name, source="ANNOTATION")
        batch.annotations = [s for s in scores if s.is_human and s.name == name]
        # each labelled trace the caller lacks by id, whatever its age: a few per night
        for trace_id in sorted({a.trace_id for a in batch.annotations if a.trace_id} - have):
            batch.traces += self._generations(batch, None, OBSERVATION_PAGE, trace_id=trace_id)
        # a session's score: its session's traces, to find its last one and the talk before
        for session in sorted({a.session_id for a in batch.annotations if not a.trace_id}):
            batch.traces += self._generations(batch, None, OBSERVATION_PAGE, session_id=session)
        batch.annotations = on_last_traces(batch.annotations, batch.traces, batch.skipped)
        return batch

    def _generations(
        self, batch: TraceBatch, since: datetime | None, page_size: int, **params: Any
    ) -> Iterator[TraceRecord]:
        """The generations the filter selects, mapped; unmappable ones go to `batch`."""
        observations = _pages(
            self._api.observations.get_many,
            page_size=page_size,
            fields=OBSERVATION_FIELDS,
            filter=json.dumps(self._observation_filter(since)),
            **params,
        )
        for number, obs in enumerate(observations, start=1):
            trace = _mapped(trace_from_observation, obs, "langfuse:observations", number, batch)
            if trace is not None:
                if trace.environment:
                    self._environments[trace.trace_id] = trace.environment
                yield trace

    def request_labels(self, items: list[LabelRequest]) -> int:
        if not items:
            return 0
        queue = self.settings.annotation_queue
        if not queue:
            raise TraceSourceError(
                "Label requests need a Langfuse annotation queue: set "
                "FLYWHEEL_TRACES__ANNOTATION_QUEUE to its name or id."
            )
        with api_errors("did not take the label requests"):
            return langfuse_feedback.create_queue_items(self._api, self._queue(queue), items)

    def pending_label_requests(self) -> set[str]:
        queue = self.settings.annotation_queue
        if not queue:  # no queue, no requests: request_labels says how to set one
            return set()
        with api_errors("did not list the annotation queue"):
            return langfuse_feedback.pending_traces(self._api, self._queue(queue))

    def _queue(self, queue: str) -> str:
        if self._queue_id is None:
            self._queue_id = langfuse_feedback.resolve_queue_id(self._api, queue)
        return self._queue_id

    def write_scores(self, scores: list[JudgeScore]) -> int:
        if not scores:
            return 0
        with api_errors("did not take the judge scores"):
            config = self._score_config_id(scores[0].name)
            return langfuse_feedback.create_scores(
                self._api, scores, self._environments, self.settings.environment, config
            )

    def send_heldout_runs(
        self, dataset: str, items: list[HeldoutItem], runs: list[HeldoutRun], at: datetime
    ) -> SentRuns:
        with api_errors(f"did not take the held-out runs of dataset {dataset!r}"):
            return langfuse_datasets.send_runs(self._api, dataset, items, runs, at, ui_base())

    def _score_config_id(self, name: str) -> str | None:
        """The id of the score config in force named `name` (Langfuse then checks each
        value against it), or None when the project has none."""
        found = [c for c in _numbered_pages(self._api.score_configs.get) if c.name == name]
        active = [c for c in found if not getattr(c, "is_archived", False)]
        return active[-1].id if active else None

    def score_scale(self, name: str, *, ordinal: bool = False) -> ScoreScale | None:
        with api_errors("did not list the score configs"):
            found = [c for c in _numbered_pages(self._api.score_configs.get) if c.name == name]
        # read in the public API's shape: camelCase, plain values
        return scale_in_force(name, [json.loads(c.json()) for c in found], ordinal=ordinal)

    def _fetch(self, since: datetime | None, limit: int) -> TraceBatch:
        batch = TraceBatch()
        if limit <= 0:
            return batch
        for trace in self._generations(batch, since, min(limit, OBSERVATION_PAGE)):
            batch.traces.append(trace)
            if len(batch.traces) >= limit:
                break  # before the generator asks for another page
        batch.traces.sort(key=lambda t: t.start_time)

        kept = {t.trace_id for t in batch.traces}
        # a score on a trace in the window is never older than the window
        scores = self._scores(
            batch,
            since,
            name=self.settings.annotation_name,  # the one score the night learns from
            source="ANNOTATION",
            data_type="BOOLEAN,NUMERIC,CATEGORICAL",
        )
        sessions = {t.session_id for t in batch.traces if t.session_id}
        batch.annotations = on_last_traces(
            [
                s
                for s in scores
                if s.trace_id in kept or (not s.trace_id and s.session_id in sessions)
            ],
            batch.traces,
            batch.skipped,
        )
        # corrected outputs, of any name and source
        fixed = self._scores(
            batch, since, correction_from_score, "langfuse:corrections", data_type="CORRECTION"
        )
        batch.corrections = [c for c in fixed if c.trace_id in kept]
        return batch

    def _scores(
        self,
        batch: TraceBatch,
        since: datetime | None,
        mapper: Callable[[dict], Any] = annotation_from_score,
        where: str = "langfuse:scores",
        **query: Any,
    ) -> Iterator[Any]:
        """The scores `query` selects from `since` on, mapped; unmappable ones go to
        `batch`."""
        listing = _pages(
            self._api.scores.get_many,
            page_size=SCORE_PAGE,
            fields=SCORE_FIELDS,
            from_timestamp=since,
            **query,
            **self._score_filter(),
        )
        for number, raw in enumerate(listing, start=1):
            mapped = _mapped(mapper, raw, where, number, batch)
            if mapped is not None:
                yield mapped

    def _score_filter(self) -> dict[str, Any]:
        return {"environment": self.settings.environment} if self.settings.environment else {}

    def _observation_filter(self, since: datetime | None) -> list[dict[str, Any]]:
        # One structured filter: it takes precedence over the query-parameter filters, and
        # only it can select by trace name.
        # Generations, and tool calls: a later step may read a tool's recorded output.
        conditions: list[dict[str, Any]] = [
            {
                "type": "stringOptions",
                "column": "type",
                "operator": "any of",
                "value": [GENERATION, TOOL],
            }
        ]
        if since is not None:
            stamp = since.astimezone(UTC).isoformat().replace("+00:00", "Z")
            conditions.append(
                {"type": "datetime", "column": "startTime", "operator": ">=", "value": stamp}
            )
        cfg = self.settings
        if cfg.trace_name:
            conditions.append(
                {"type": "string", "column": "traceName", "operator": "=", "value": cfg.trace_name}
            )
        if cfg.environment:
            conditions.append(
                {
                    "type": "string",
                    "column": "environment",
                    "operator": "=",
                    "value": cfg.environment,
                }
            )
        if cfg.tags:
            conditions.append(
                {
                    "type": "arrayOptions",
                    "column": "traceTags",
                    "operator": "all of",
                    "value": cfg.tags,
                }
            )
        return conditions


@contextmanager
def api_errors(what: str) -> Iterator[None]:
    """SDK and network errors as one sentence; the status only, never headers or keys."""
    try:
        yield
    except (ApiError, httpx.HTTPError) as e:
        status = getattr(e, "status_code", None) or type(e).__name__
        raise TraceSourceError(
            f"Langfuse {what} ({status}): check LANGFUSE_HOST and that the API keys belong "
            "to the project."
        ) from e
    except pydantic.ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise TraceSourceError(
            f"Langfuse {what}: a page of its reply did not have the shape this SDK expects "
            f"(field {where}: {first['msg']}); check that the server and the langfuse "
            "package versions match."
        ) from None


def sdk_api(timeout_s: int = 30) -> LangfuseAPI:
    missing = [var for var in KEY_VARS if not os.environ.get(var)]
    if missing:
        raise TraceSourceError(
            f"Langfuse needs {' and '.join(missing)} in the environment (and LANGFUSE_HOST "
            "for a self-hosted server), or set FLYWHEEL_TRACES__SOURCE=jsonl."
        )
    from langfuse import Langfuse

    # No tracer, so nothing is exported from this process. Scores therefore go through the
    # REST client: `Langfuse.create_score` drops them silently when tracing is disabled.
    return Langfuse(tracing_enabled=False, timeout=timeout_s).api


def project_page(api: LangfuseAPI) -> str:
    """The address of the keys' project in Langfuse's UI, "" when the server does not name
    it: the SDK's base URL (LANGFUSE_BASE_URL, else LANGFUSE_HOST, else Langfuse Cloud)
    and the project the keys belong to (`GET /api/public/projects`). Only for links:
    a server that cannot say is logged, never an error."""
    try:
        projects = api.projects.get().data
    except Exception as err:  # an old server, a key without project scope, a timeout
        log.info("Langfuse did not name its project (no links to it): %s", err)
        return ""
    return f"{ui_base()}/project/{projects[0].id}" if projects else ""


def ui_base() -> str:
    """Where the SDK sends its requests, which is where Langfuse's UI is too."""
    base = (
        os.environ.get("LANGFUSE_BASE_URL")
        or os.environ.get("LANGFUSE_HOST")
        or "https://cloud.langfuse.com"
    )
    return base.rstrip("/")


def _pages(call: Callable[..., Any], page_size: int, **params: Any) -> Iterator[Any]:
    """Every item of a cursor-paginated listing; the next page is asked for only when needed.
    A cursor the server already gave would loop forever: that stops with an error."""
    cursor, seen = None, set()
    for _ in range(MAX_PAGES):
        page = call(limit=page_size, cursor=cursor, **params)
        yield from page.data
        cursor = page.meta.cursor
        if not cursor:
            return
        if cursor in seen:
            raise TraceSourceError(
                f"Langfuse gave the same page cursor twice while listing {_listing(call)}: "
                "the server's paging is broken, so the listing was stopped."
            )
        seen.add(cursor)
    raise _too_many_pages(call)


def _numbered_pages(call: Callable[..., Any]) -> Iterator[Any]:
    """Every item of a page-numbered listing, up to the first empty page (a server that
    reports more pages than it has would otherwise be asked for every one of them)."""
    for page in range(1, MAX_PAGES + 1):
        listing = call(page=page, limit=CONFIG_PAGE)
        yield from listing.data
        if not listing.data or page >= (listing.meta.total_pages or 0):
            return
    raise _too_many_pages(call)


def _listing(call: Callable[..., Any]) -> str:
    """`scores.get_many` for the SDK's bound method (for messages)."""
    owner = type(getattr(call, "__self__", None)).__name__.removesuffix("Client").lower()
    return f"{owner}.{getattr(call, '__name__', 'listing')}" if owner != "nonetype" else "a listing"


def _too_many_pages(call: Callable[..., Any]) -> TraceSourceError:
    return TraceSourceError(
        f"Langfuse listed more than {MAX_PAGES} pages for {_listing(call)}: narrow the "
        "window (traces.lookback_hours, traces.environment, traces.trace_name)."
    )


def _mapped(
    mapper: Callable[[dict], Any], item: Any, where: str, number: int, batch: TraceBatch
) -> Any:
    """The mapped record, or None after noting why it was skipped."""
    try:
        return mapper(_as_dict(item))
    except RecordError as e:
        reason = f"id {getattr(item, 'id', '?')}: {e.message}"
        # logged before the batch reaches the masking source, so masked here too
        log.warning("%s record %d: skipped, field %s: %s", where, number, e.field, mask(reason))
        batch.skipped.append(SkippedRecord(where, number, e.field, reason))
        return None


def _check_item(dataset: str, item: Any) -> None:
    """A dataset item within `record_shape`'s limits, before the masking walks it."""
    try:
        check_shape(
            {"input": item.input, "expectedOutput": item.expected_output, "metadata": item.metadata}
        )
    except RecordError as e:
        raise RecordError(e.field, f"dataset {dataset!r} item {item.id}: {e.message}") from None


def _as_dict(item: Any) -> dict[str, Any]:
    """The SDK model as a dict in Langfuse's camelCase keys; `dict()` recurses once per
    level of nesting, so a record nested past Python's limit is quarantined here."""
    try:
        return item.dict()
    except RecursionError:
        raise RecordError("<record>", "nested too deeply to read") from None
