"""Model calls per stage of a night: how many, their tokens and cost, and what a call
that fails becomes.

A backend retries what waiting may cure (its SDK's own retries, with backoff and
`Retry-After`); a call that still fails, or whose reply cannot be read (truncated JSON,
no log-probabilities, none of the asked choices among them), raises `ModelCallFailed`.
Callers leave such a call out of every score and count it: it is never a verdict.

`CallTally` counts per stage (`current_stage`, set by whoever runs the stages): every
call, its tokens and their cost at the backend's prices, every failed attempt of one
(retried or not) and every call that failed for good.
"""

from __future__ import annotations

from collections import Counter
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal

import httpx

FaultKind = Literal["server_error", "rate_limited", "timeout", "connection", "refused", "malformed"]
"""refused: the server turned this request down (400, 413, 422: too long, say);
malformed: a reply that cannot be read."""

current_stage: ContextVar[str] = ContextVar("flywheel_stage", default="other")
"""The stage the calls made in this context are counted under."""


class ModelCallFailed(RuntimeError):
    """A model call that failed for good: the backend's retries are spent, or the reply
    cannot be read."""

    def __init__(self, kind: FaultKind, detail: str) -> None:
        super().__init__(f"model call failed ({kind}): {detail}")
        self.kind = kind


@dataclass
class CallTally:
    """Per stage: calls made, their tokens and cost, failed attempts by kind, calls
    failed for good by kind. `prices`: USD per million prompt and completion tokens."""

    prices: tuple[float, float] = (0.0, 0.0)
    calls: Counter[str] = field(default_factory=Counter)
    prompt_tokens: Counter[str] = field(default_factory=Counter)
    completion_tokens: Counter[str] = field(default_factory=Counter)
    attempts_failed: Counter[tuple[str, FaultKind]] = field(default_factory=Counter)
    calls_failed: Counter[tuple[str, FaultKind]] = field(default_factory=Counter)

    def call(self) -> None:
        self.calls[current_stage.get()] += 1

    def tokens(self, prompt: int, completion: int) -> None:
        stage = current_stage.get()
        self.prompt_tokens[stage] += prompt
        self.completion_tokens[stage] += completion

    def attempt_failed(self, kind: FaultKind) -> None:
        self.attempts_failed[(current_stage.get(), kind)] += 1

    def call_failed(self, kind: FaultKind) -> None:
        self.calls_failed[(current_stage.get(), kind)] += 1

    def stage(self, name: str) -> StageCalls:
        prompt, completion = self.prompt_tokens[name], self.completion_tokens[name]
        return StageCalls(
            calls=self.calls[name],
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost_usd=(prompt * self.prices[0] + completion * self.prices[1]) / 1e6,
            attempts_failed={k: n for (s, k), n in self.attempts_failed.items() if s == name},
            calls_failed={k: n for (s, k), n in self.calls_failed.items() if s == name},
        )

    def stages(self) -> dict[str, StageCalls]:
        names = set(self.calls) | {s for s, _ in self.attempts_failed | self.calls_failed}
        return {name: self.stage(name) for name in sorted(names)}


@dataclass(frozen=True)
class StageCalls:
    """One stage's model calls (plain data, for the night's report)."""

    calls: int
    attempts_failed: dict[str, int]
    """Failed attempts by kind, the retried ones included."""
    calls_failed: dict[str, int]
    """Calls that failed for good, by kind: left out of the stage's scores."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def failed(self) -> int:
        return sum(self.calls_failed.values())

    def __add__(self, other: StageCalls) -> StageCalls:
        """The same stage's calls on two models (agent and reflection, say)."""
        return StageCalls(
            calls=self.calls + other.calls,
            attempts_failed=dict(Counter(self.attempts_failed) + Counter(other.attempts_failed)),
            calls_failed=dict(Counter(self.calls_failed) + Counter(other.calls_failed)),
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )

    @property
    def failed_share(self) -> float:
        return self.failed / self.calls if self.calls else 0.0


def fault_of_status(status: int) -> FaultKind | None:
    """What an HTTP status says about the call (the SDK retries 408, 409, 429 and 5xx);
    None for a success, or for a status the settings cause (key, model name, URL: 401,
    403, 404), which must stop the night rather than count as one failed call."""
    if status == 429:
        return "rate_limited"
    if status >= 500 or status in (408, 409):
        return "server_error"
    if status in (400, 413, 422):  # this request: too long, or turned down
        return "refused"
    return None


class CountingTransport(httpx.AsyncBaseTransport):
    """Counts every failed attempt that goes through it, the SDK's retries included."""

    def __init__(self, inner: httpx.AsyncBaseTransport, tally: CallTally) -> None:
        self._inner = inner
        self._tally = tally

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.TimeoutException:
            self._tally.attempt_failed("timeout")
            raise
        except httpx.TransportError:
            self._tally.attempt_failed("connection")
            raise
        if (kind := fault_of_status(response.status_code)) is not None:
            self._tally.attempt_failed(kind)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
