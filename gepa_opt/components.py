"""Which component(s) of the parent a proposal rewrites."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

ModuleSelection = Literal["round_robin", "all", "blamed"]


class ComponentSelector(Protocol):
    def select(self, components: list[str], cursor: int) -> tuple[list[str], int]:
        """Components to update, and the parent's cursor for its next proposal.

        The cursor lives in the run state (one per candidate), not in the selector, so
        it is saved and resumed with everything else.
        """
        ...


@dataclass(frozen=True)
class RoundRobinSelector:
    """One component per proposal, cycling per candidate: each reflection stays focused
    on one prompt, and a child goes on with its parent's cycle from the component after
    the one that made it (as upstream gepa), so every component gets its turns along a
    lineage of winners."""

    def select(self, components: list[str], cursor: int) -> tuple[list[str], int]:
        return [components[cursor % len(components)]], (cursor + 1) % len(components)


@dataclass(frozen=True)
class AllSelector:
    """Every component at once (one reflection call each), for tightly coupled prompts."""

    def select(self, components: list[str], cursor: int) -> tuple[list[str], int]:
        return list(components), cursor


@dataclass(frozen=True)
class BlamedSelector(RoundRobinSelector):
    """One component per proposal: the one the parent's minibatch feedback blames most
    (`Adapter.blame`), so a failure of a multi-module program is fixed where it arose; in
    round-robin order when nothing is blamed (ties: the earliest component)."""

    def blamed(self, components: list[str], blame: dict[str, float]) -> list[str] | None:
        most = max((blame.get(c, 0.0) for c in components), default=0.0)
        if most <= 0:
            return None
        return [next(c for c in components if blame.get(c, 0.0) == most)]


def make_component_selector(name: ModuleSelection) -> ComponentSelector:
    if name == "round_robin":
        return RoundRobinSelector()
    if name == "blamed":
        return BlamedSelector()
    if name == "all":
        return AllSelector()
    raise ValueError(f"unknown module_selection {name!r}")
