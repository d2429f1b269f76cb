"""The live objects a night needs (models, agent, trace source, registry), built from the
settings on first use and passed to every stage; tests hand in fakes instead.

They hold a loaded model and open connections, so they are never Prefect parameters'
values: a flow records a runtime as "<Runtime>" (it has no __dict__ to walk), and the
night's knobs travel as parameters of their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flows.night.collect import load_heldout, window_start
from flows.night.preflight import check_traces
from flows.night.run_id import check_run_id
from infra.agents import Agent, load_agent
from infra.agents.contract import check_agent
from infra.agents.file_components import load_files
from infra.agents.replay import REPLAY, ReplayAgent, fixed_placeholders, recorded_tools
from infra.agents.tool_policy import load_tool_functions
from infra.errors import UserFacingError
from infra.labels import LabelStore
from infra.lm import LM, CallTally
from infra.lm.factory import make_lm
from infra.redaction import Redactor
from infra.registry.mlflow_registry import Registry
from infra.settings import LMSettings, NightKnobs, Settings
from infra.traces import TraceSource
from infra.traces.factory import make_trace_source, production_prompts
from infra.traces.prompt_hub import PromptHub, make_prompt_hub
from infra.types import Example

MODEL_ROLES = ("lm", "reflection_lm", "judge_lm")


class Runtime:
    __slots__ = ("settings", "_objects", "_given")

    def __init__(
        self,
        settings: Settings,
        *,
        lm: LM | None = None,
        reflection_lm: LM | None = None,
        judge_lm: LM | None = None,
        agent: Agent | None = None,
        traces: TraceSource | None = None,
        registry: Registry | None = None,
    ):
        self.settings = settings
        given = {
            "lm": lm,
            "reflection_lm": reflection_lm,
            "judge_lm": judge_lm,
            "agent": agent,
            "traces": traces,
            "registry": registry,
        }
        self._objects: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        self._given = set(self._objects)  # the caller's, to close: never closed here

    def close(self) -> None:
        """Let go of the in-process models this runtime loaded: their engines' threads hold
        the weights for as long as the process lives otherwise. A later use loads them
        again. A remote model's client holds only connections, gone with the object."""
        loaded = {}  # one engine may serve several roles
        for name in MODEL_ROLES:
            model = None if name in self._given else self._objects.pop(name, None)
            if model is not None:
                loaded[id(model)] = model
        for model in loaded.values():
            if callable(close := getattr(model, "close", None)):
                close()

    async def rest_models_but_agent(self) -> int:
        """The judge's and reflection's models, where they are their own and can rest,
        let go of their weights until their next call (`LocalLM.rest`): for work that needs
        the memory and not them, such as training the agent's adapter. How many rested."""
        agent = self._objects.get("lm")
        models = {id(m): m for n in MODEL_ROLES if (m := self._objects.get(n)) is not agent}
        rested = 0
        for model in models.values():
            if callable(rest := getattr(model, "rest", None)) and await rest():
                rested += 1
        return rested

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, name: str, build) -> Any:
        if name not in self._objects:
            self._objects[name] = build()
        return self._objects[name]

    @property
    def lm(self) -> LM:
        return self._model("lm", self.settings.lm)

    def _model(self, name: str, settings: LMSettings) -> LM:
        """One engine per distinct model: a teacher that judges and reflects (both set to
        the same settings) is loaded once and serves both."""
        roles = {
            "lm": self.settings.lm,
            "judge_lm": self.settings.judge_lm,
            "reflection_lm": self.settings.reflection,
        }
        for role, its in roles.items():
            if role != name and role in self._objects and its == settings:
                return self._objects.setdefault(name, self._objects[role])
        return self._get(name, lambda: make_lm(settings))

    def call_tallies(self) -> list[CallTally]:
        """The fault counts of each distinct model the night has used (a backend that
        counts none, like the in-process one whose calls do not fail, gives none)."""
        models = [self._objects.get(name) for name in MODEL_ROLES]
        tallies = {id(t): t for m in models if (t := getattr(m, "tally", None)) is not None}
        return list(tallies.values())

    @property
    def reflection_lm(self) -> LM:
        """The model that writes proposals and corrections: its own when configured (or
        given), else `lm`."""
        if self.settings.reflection is None and "reflection_lm" not in self._objects:
            return self.lm
        return self._model("reflection_lm", self.settings.reflection)

    @property
    def judge_lm(self) -> LM:
        """The model that judges and serves the judge's adapter: its own when configured,
        else `lm`."""
        if self.settings.judge_lm is None and "judge_lm" not in self._objects:
            return self.lm
        return self._model("judge_lm", self.settings.judge_lm)

    @property
    def agent(self) -> Agent:
        """The entry point in `agent`, or with `agent = "replay"`, the managed prompts the
        window's traces used, replayed from the traces (no code)."""
        if self.settings.agent == REPLAY:
            return self._get("agent", self._replay_agent)
        return self._get("agent", lambda: load_agent(self.settings.agent))

    def _replay_agent(self) -> Agent:
        cfg = self.settings.traces
        batch = self.traces.fetch(since=window_start(cfg.lookback_hours), limit=cfg.max_traces)
        names = {t.prompt_name for t in batch.traces if t.prompt_name}
        prompts = production_prompts(cfg, names)
        if not prompts:
            found = ", ".join(sorted(names)) or "none"
            raise UserFacingError(
                "agent = 'replay' optimizes the Langfuse-managed prompts the traces were made "
                f"from, and none has a production version (prompts on the traces: {found}): "
                "link each generation to its prompt (update_current_generation(prompt=...))."
            )
        try:
            functions = load_tool_functions(self.settings.replay.tool_functions)
            files = load_files(self.settings.replay.component_files)
        except ValueError as error:
            raise UserFacingError(str(error)) from error
        agent = ReplayAgent(
            prompts,
            recorded_models=self.settings.lm.replay_recorded_models,
            tool_functions=functions,
            tools=recorded_tools(batch.traces),
            placeholders=fixed_placeholders(batch.traces, prompts),
            files=files,
        )
        check_agent(agent, repr(REPLAY))
        return agent

    @property
    def traces(self) -> TraceSource:
        return self._get(
            "traces",
            lambda: make_trace_source(
                self.settings.traces,
                self.settings.state_dir,
                self.redactor,
                self.settings.network.langfuse_timeout_s,
            ),
        )

    @property
    def prompt_hub(self) -> PromptHub | None:
        """Where the agent reads its managed prompts in production; None: nowhere."""
        return self._get("prompt_hub", self._prompt_hub)

    def _prompt_hub(self) -> PromptHub | None:
        if self.settings.agent != REPLAY:
            return make_prompt_hub(self.settings.traces)
        # the replayed agent's components are Langfuse prompts: production is read there
        return make_prompt_hub(self.settings.traces, list(self.agent.seed_prompts()))

    @property
    def labels(self) -> LabelStore:
        """Every human label read so far, in the state folder."""
        return self._get("labels", lambda: LabelStore(self.settings.state_dir / "labels.sqlite"))

    @property
    def registry(self) -> Registry:
        return self._get("registry", lambda: Registry(self.settings.mlflow))

    def with_knobs(self, knobs: NightKnobs) -> Runtime:
        """The same live objects under a flow run's knobs."""
        other = Runtime(self.settings.with_knobs(knobs))
        other._objects = self._objects  # shared: one model, one connection
        other._given = self._given
        return other

    def preflight(self) -> None:
        """Fail before the night starts, with one sentence, if the model, the trace source
        or the registry cannot be reached (each raises a UserFacingError), or if there is
        nothing to learn from: no usable trace in a sample of the window, or no human label
        at all."""
        check_traces(self.traces, self.settings.traces, self.labels)
        self.registry  # noqa: B018 - opening the store is the check
        self.lm  # noqa: B018 - loading the model (or opening its client) is the check
        self.judge_lm  # noqa: B018 - the same for the judge's own model, when it has one

    def heldout_examples(self, trace_slice: list[Example] | None = None) -> list[Example]:
        """The held-out examples: `eval.heldout_path`, else `eval.dataset`, else the night's
        slice of traces (`eval.heldout_trace_share`), else the file that comes with the
        traces (the demo export's); none otherwise."""
        cfg = self.settings.eval
        if cfg.heldout_path:
            return self._masked(load_heldout(Path(cfg.heldout_path)))
        if cfg.dataset:
            return self.traces.dataset_examples(cfg.dataset)
        if trace_slice:
            return trace_slice
        path = self.traces.heldout_file()
        return self._masked(load_heldout(path)) if path else []

    @property
    def redactor(self) -> Redactor | None:
        """What masks trace text as it comes in (`[redaction]`); None when turned off."""
        cfg = self.settings.redaction
        return self._get(
            "redactor", lambda: Redactor.standard(cfg.patterns) if cfg.enabled else None
        )

    def _masked(self, examples: list[Example]) -> list[Example]:
        """A held-out file reaches the agent and the reports as traces do: masked."""
        redactor = self.redactor
        return examples if redactor is None else [redactor.example(e) for e in examples]

    def run_dir(self, run_id: str) -> Path:
        path = self.settings.state_dir / "runs" / check_run_id(run_id)
        path.mkdir(parents=True, exist_ok=True)
        return path
