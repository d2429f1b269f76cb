"""Where a team's agent reads its prompts in production: Langfuse prompt management.

A prompt component the agent takes from Langfuse (`traces.managed_prompts`: component ->
Langfuse prompt name) starts each night from the version labelled `production`, and the
flywheel's winners go back as new versions of that same prompt: labelled `candidate` when
a night's candidate passes its gate, `canary` while it serves a share of the traffic
(`promotion.canary_share`), and `production` when it is promoted (Langfuse moves a label
off the version that held it; a canary that lost has its label taken off). A chat prompt
keeps its other messages; the component is its system message. Each version's commit
message names the MLflow version. The SDK's REST client is the seam, as for traces.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from langfuse.api.prompts import CreateChatPromptRequest, CreateTextPromptRequest

from infra.settings import TraceSettings
from infra.traces.langfuse_source import api_errors, project_page, sdk_api
from infra.traces.managed_prompts import PRODUCTION, ManagedPrompt
from infra.traces.source import TraceSourceError

if TYPE_CHECKING:
    from langfuse.api import LangfuseAPI


class SameName(dict):
    """Component -> prompt name for a replayed agent, whose components are the Langfuse
    prompts themselves: every component is managed, under its own name; those `known`
    (the agent's, where the caller has it) are the ones `production` reads."""

    def __init__(self, known: Collection[str] = ()):
        super().__init__({name: name for name in known})

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str)

    def __getitem__(self, key: str) -> str:
        return key

    def __bool__(self) -> bool:
        return True


class PromptHub:
    def __init__(
        self,
        settings: TraceSettings,
        api: LangfuseAPI | None = None,
        replayed: Collection[str] | None = None,
    ):
        # component -> Langfuse prompt name; `replayed`: the replayed agent's components
        managed = dict(settings.managed_prompts)
        self.names: dict[str, str] = managed if replayed is None else SameName(replayed)
        self._api = api if api is not None else sdk_api()
        self._project: str | None = None  # its UI address, asked for once

    def page(self, name: str, version: int) -> str:
        """A version's page in Langfuse's UI, for links ("" when the server does not
        name its project)."""
        if self._project is None:
            self._project = project_page(self._api)
        if not self._project:
            return ""
        return f"{self._project}/prompts/{quote(name, safe='')}?version={version}"

    def production(self) -> dict[str, ManagedPrompt]:
        """Each managed component's version labelled production; a prompt without one is
        left out (the night then starts from the agent's own seed for it)."""
        return self.labelled(PRODUCTION)

    def labelled(self, label: str) -> dict[str, ManagedPrompt]:
        """Each managed component's version that holds `label`; one with none is left out."""
        found = {}
        for component, name in self.names.items():
            prompt = self._get(name, label)
            if prompt is not None:
                found[component] = prompt
        return found

    def publish(
        self,
        component: str,
        text: str,
        labels: list[str],
        commit_message: str,
        config: dict[str, Any] | None = None,
    ) -> ManagedPrompt:
        """A new version of the component's prompt with `text`, like the one in production
        (type, other chat messages, config; `config`'s keys replace that config's)."""
        name = self.names[component]
        like = self._get(name, PRODUCTION)
        common = {"name": name, "labels": labels, "commit_message": commit_message}
        config = (like.config if like else {}) | (config or {})
        if like is not None and like.messages is not None:
            messages = [
                {**m, "content": text} if m.get("role") == "system" else m for m in like.messages
            ]
            if not any(m.get("role") == "system" for m in like.messages):
                messages = [{"role": "system", "content": text}, *messages]
            request = CreateChatPromptRequest(type="chat", prompt=messages, config=config, **common)
        else:
            request = CreateTextPromptRequest(type="text", prompt=text, config=config, **common)
        with api_errors(f"did not take a new version of prompt {name!r}"):
            return _managed(self._api.prompts.create(request=request))

    def label(self, name: str, version: int, labels: list[str]) -> None:
        """Add `labels` to a version (Langfuse takes each off the version that held it)."""
        with api_errors(f"did not label prompt {name!r} v{version}"):
            current = _managed(self._api.prompts.get(name, version=version))
            wanted = sorted(set(current.labels) - {"latest"} | set(labels))
            self._api.prompt_version.update(name, version, new_labels=wanted)

    def unlabel(self, name: str, version: int, labels: list[str]) -> None:
        """Take `labels` off a version (a canary rolled back); the others stay."""
        with api_errors(f"did not unlabel prompt {name!r} v{version}"):
            current = _managed(self._api.prompts.get(name, version=version))
            wanted = sorted(set(current.labels) - {"latest"} - set(labels))
            if wanted != sorted(set(current.labels) - {"latest"}):
                self._api.prompt_version.update(name, version, new_labels=wanted)

    def _get(self, name: str, label: str) -> ManagedPrompt | None:
        try:
            with api_errors(f"did not give prompt {name!r} (traces.managed_prompts)"):
                return _managed(self._api.prompts.get(name, label=label))
        except TraceSourceError as err:
            if getattr(err.__cause__, "status_code", None) == 404:
                return None  # no version carries the label yet
            raise


def _managed(prompt: Any) -> ManagedPrompt:
    if prompt.type == "chat":
        messages = [m.dict() if hasattr(m, "dict") else dict(m) for m in prompt.prompt]
        system = [m.get("content", "") for m in messages if m.get("role") == "system"]
        text = system[0] if system else ""
    else:
        messages, text = None, prompt.prompt
    return ManagedPrompt(
        prompt.name, prompt.version, text, messages, dict(prompt.config or {}), tuple(prompt.labels)
    )


def make_prompt_hub(
    settings: TraceSettings, replayed: Collection[str] | None = None
) -> PromptHub | None:
    """The hub when the agent's prompts are Langfuse-managed (`replayed`: the agent is its
    Langfuse prompts, replayed from the traces, these ones where known); None otherwise."""
    if replayed is not None and settings.source == "langfuse":
        return PromptHub(settings, replayed=replayed)
    return PromptHub(settings) if settings.managed_prompts else None
