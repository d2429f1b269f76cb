"""The trace source named in settings."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from infra.redaction import Redactor
from infra.settings import TraceSettings
from infra.traces.managed_prompts import ManagedPrompt, read_prompt_file
from infra.traces.redacting import RedactingTraceSource
from infra.traces.source import TraceSource, TraceSourceError

OUTBOX = "outbox"  # under the state folder, when traces.outbox_dir is empty


def make_trace_source(
    settings: TraceSettings,
    state_dir: Path,
    redactor: Redactor | None = None,
    timeout_s: int = 30,
) -> TraceSource:
    """The source, its text masked by `redactor` (None: as it is); `timeout_s` per
    request to a server."""
    source = _raw_source(settings, state_dir, timeout_s)
    return source if redactor is None else RedactingTraceSource(source, redactor)


def _raw_source(settings: TraceSettings, state_dir: Path, timeout_s: int) -> TraceSource:
    if settings.source == "langfuse":
        from infra.traces.langfuse_source import LangfuseTraceSource

        return LangfuseTraceSource(settings, timeout_s=timeout_s)
    from infra.traces.jsonl import JsonlTraceSource

    return JsonlTraceSource(settings.jsonl_dir, settings.outbox_dir or state_dir / OUTBOX)


PROMPTS = "prompts.jsonl"  # a JSONL export's managed prompts, Langfuse's API shape


def production_prompts(
    settings: TraceSettings, names: Collection[str], api: Any = None
) -> dict[str, ManagedPrompt]:
    """The production version of each managed prompt named (those the traces used): from
    Langfuse (`api`: its SDK client, else one from the environment), or from the export's
    prompts.jsonl. A name with no production version is left out."""
    if settings.source == "langfuse":
        from infra.traces.prompt_hub import PromptHub

        named = settings.model_copy(update={"managed_prompts": {n: n for n in names}})
        return dict(PromptHub(named, api=api).production())
    from infra.traces.jsonl import DEMO_DIR

    path = (Path(settings.jsonl_dir) if settings.jsonl_dir else DEMO_DIR) / PROMPTS
    if not path.is_file():
        raise TraceSourceError(
            f"No {PROMPTS} in {path.parent}: a replayed agent (agent = 'replay') reads the "
            "managed prompts its traces used from there, one per line in Langfuse's prompt "
            "API shape (GET /api/public/v2/prompts/{name})."
        )
    return {name: prompt for name, prompt in read_prompt_file(path).items() if name in names}
