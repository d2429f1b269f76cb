"""The live objects a night needs (models, agent, trace source, registry), built from the
settings on first use and passed to every stage; tests hand in fakes instead.

They hold a loaded model and open connections, so they are never Prefect parameters'
values: a flow records a runtime as "<Runtime>" (it has no __dict__ to walk), and the
night's knobs travel as parameters of their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flows.collect import load_heldout
from infra.agents import Agent, load_agent
from infra.labels import LabelStore
from infra.lm import LM
from infra.lm.factory import make_lm
from infra.registry.mlflow_registry import Registry
from infra.settings import NightKnobs, Settings
from infra.traces import TraceSource
from infra.traces.factory import make_trace_source
from infra.traces.prompt_hub import PromptHub, make_prompt_hub
from infra.types import Example


class Runtime:
    __slots__ = ("settings", "_objects")

    def __init__(
        self,
        settings: Settings,
        *,
        lm: LM | None = None,
        reflection_lm: LM | None = None,
        agent: Agent | None = None,
        traces: TraceSource | None = None,
        registry: Registry | None = None,
    ):
        self.settings = settings
        given = {
            "lm": lm,
            "reflection_lm": reflection_lm,
            "agent": agent,
            "traces": traces,
            "registry": registry,
        }
        self._objects: dict[str, Any] = {k: v for k, v in given.items() if v is not None}

    def _get(self, name: str, build) -> Any:
        if name not in self._objects:
            self._objects[name] = build()
        return self._objects[name]

    @property
    def lm(self) -> LM:
        return self._get("lm", lambda: make_lm(self.settings.lm))

    @property
    def reflection_lm(self) -> LM:
        """The model that writes proposals: its own endpoint when configured, else `lm`."""
        if self.settings.reflection is None:
            return self.lm
        return self._get("reflection_lm", lambda: make_lm(self.settings.reflection))

    @property
    def agent(self) -> Agent:
        return self._get("agent", lambda: load_agent(self.settings.agent))

    @property
    def traces(self) -> TraceSource:
        return self._get(
            "traces", lambda: make_trace_source(self.settings.traces, self.settings.state_dir)
        )

    @property
    def prompt_hub(self) -> PromptHub | None:
        """Where the agent reads its managed prompts in production; None: nowhere."""
        return self._get("prompt_hub", lambda: make_prompt_hub(self.settings.traces))

    @property
    def labels(self) -> LabelStore:
        """Every human label read so far, in the state folder."""
        return self._get("labels", lambda: LabelStore(self.settings.state_dir / "labels.sqlite"))

    @property
    def registry(self) -> Registry:
        return self._get("registry", lambda: Registry(self.settings))

    def with_knobs(self, knobs: NightKnobs) -> Runtime:
        """The same live objects under a flow run's knobs."""
        other = Runtime(self.settings.with_knobs(knobs))
        other._objects = self._objects  # shared: one model, one connection
        return other

    def preflight(self) -> None:
        """Fail before the night starts, with one sentence, if the model, the trace source
        or the registry cannot be reached (each raises a UserFacingError)."""
        self.traces.fetch(since=None, limit=1)
        self.registry  # noqa: B018 - opening the store is the check
        self.lm  # noqa: B018 - loading the model (or opening its client) is the check

    def heldout_examples(self, trace_slice: list[Example] | None = None) -> list[Example]:
        """The held-out examples: `eval.heldout_path`, else `eval.dataset`, else the night's
        slice of traces (`eval.heldout_trace_share`), else the file that comes with the
        traces (the demo export's); none otherwise."""
        cfg = self.settings.eval
        if cfg.heldout_path:
            return load_heldout(Path(cfg.heldout_path))
        if cfg.dataset:
            return self.traces.dataset_examples(cfg.dataset)
        if trace_slice:
            return trace_slice
        path = self.traces.heldout_file()
        return load_heldout(path) if path else []

    def run_dir(self, run_id: str) -> Path:
        path = self.settings.state_dir / "runs" / run_id
        path.mkdir(parents=True, exist_ok=True)
        return path
