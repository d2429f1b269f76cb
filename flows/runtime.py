"""The live objects a run needs (model, agent, trace source, registry), built once.

They hold a loaded model and open connections, so they are not Prefect parameters:
tasks receive plain data and ask this module for the objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from infra.agents import Agent, load_agent
from infra.lm import LM
from infra.lm.factory import make_lm
from infra.lm.model_files import resolve_model_path
from infra.registry.mlflow_registry import Registry
from infra.settings import Settings
from infra.traces import TraceSource
from infra.traces.factory import make_trace_source
from infra.traces.jsonl import DEMO_DIR


@dataclass
class Runtime:
    settings: Settings

    @cached_property
    def lm(self) -> LM:
        return make_lm(self.settings.lm)

    @cached_property
    def reflection_lm(self) -> LM:
        """The model that writes proposals: its own endpoint when configured, else `lm`."""
        return make_lm(self.settings.reflection) if self.settings.reflection else self.lm

    @cached_property
    def agent(self) -> Agent:
        return load_agent(self.settings.agent)

    @cached_property
    def traces(self) -> TraceSource:
        return make_trace_source(self.settings.traces, self.settings.state_dir)

    @cached_property
    def registry(self) -> Registry:
        return Registry(self.settings)

    def preflight(self) -> None:
        """Fail before the night starts, with one sentence, if the model, the trace source
        or the registry cannot be reached (each raises a UserFacingError)."""
        if self.settings.lm.backend == "local":
            resolve_model_path(self.settings.lm.model_path)
        self.traces.fetch(since=None, limit=1)
        self.registry  # noqa: B018 - opening the store is the check

    def heldout_path(self) -> Path:
        if self.settings.eval.heldout_path:
            return Path(self.settings.eval.heldout_path)
        return Path(self.settings.traces.jsonl_dir or DEMO_DIR) / "heldout.jsonl"

    def run_dir(self, run_id: str) -> Path:
        path = self.settings.state_dir / "runs" / run_id
        path.mkdir(parents=True, exist_ok=True)
        return path


_current: Runtime | None = None


def runtime(settings: Settings | None = None) -> Runtime:
    """The process's runtime; a new settings object replaces it."""
    global _current
    if settings is not None and (_current is None or _current.settings is not settings):
        _current = Runtime(settings)
    if _current is None:
        _current = Runtime(Settings())
    return _current
