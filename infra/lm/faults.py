"""Model calls that fail: what they become, and how many each stage of a night saw.

A backend retries what waiting may cure (its SDK's own retries, with backoff and
`Retry-After`); a call that still fails, or whose reply cannot be read (truncated JSON,
no log-probabilities, none of the asked choices among them), raises `ModelCallFailed`.
Callers leave such a call out of every score and count it: it is never a verdict.

`FaultTally` counts per stage (`current_stage`, set by whoever runs the stages): every
call, every failed attempt of one (retried or not) and every call that failed for good.
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
class FaultTally:
    """Per stage: calls made, failed attempts by kind, calls failed for good by kind."""

    calls: Counter[str] = field(default_factory=Counter)
    attempts_failed: Counter[tuple[str, FaultKind]] = field(default_factory=Counter)
    calls_failed: Counter[tuple[str, FaultKind]] = field(default_factory=Counter)

    def call(self) -> None:
        self.calls[current_stage.get()] += 1

    def attempt_failed(self, kind: FaultKind) -> None:
        self.attempts_failed[(current_stage.get(), kind)] += 1

    def call_failed(self, kind: FaultKind) -> None:
        self.calls_failed[(current_stage.get(), kind)] += 1

    def stage(self, name: str) -> StageFaults:
        return StageFaults(
            calls=self.calls[name],
            attempts_failed={k: n for (s, k), n in self.attempts_failed.items() if s == name},
            calls_failed={k: n for (s, k), n in self.calls_failed.items() if s == name},
        )

    def stages(self) -> dict[str, StageFaults]:
        names = set(self.calls) | {s for s, _ in self.attempts_failed | self.calls_failed}
        return {name: self.stage(name) for name in sorted(names)}


@dataclass(frozen=True)
class StageFaults:
    """One stage's model calls (plain data, for the night's report)."""

    calls: int
    attempts_failed: dict[str, int]
    """Failed attempts by kind, the retried ones included."""
    calls_failed: dict[str, int]
    """Calls that failed for good, by kind: left out of the stage's scores."""

    @property
    def failed(self) -> int:
        return sum(self.calls_failed.values())

    @property
    def failed_share(self) -> float:
        return self.failed / self.calls if self.calls else 0.0


def fault_of_status(status: int) -> FaultKind | None:
    if status == 429:
        return "rate_limited"
    return "server_error" if status >= 500 else None


class CountingTransport(httpx.AsyncBaseTransport):
    """Counts every failed attempt that goes through it, the SDK's retries included."""

    def __init__(self, inner: httpx.AsyncBaseTransport, tally: FaultTally) -> None:
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
