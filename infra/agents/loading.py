"""Load an agent from a `package.module:factory` entry point named in settings."""

from __future__ import annotations

import importlib

from infra.agents.protocol import Agent


def load_agent(entry_point: str) -> Agent:
    module_name, _, factory_name = entry_point.partition(":")
    if not module_name or not factory_name:
        raise ValueError(
            f"agent entry point {entry_point!r} must look like 'package.module:factory'"
        )
    try:
        factory = getattr(importlib.import_module(module_name), factory_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load agent {entry_point!r}: {exc}") from exc
    agent = factory()
    if not isinstance(agent, Agent):
        raise TypeError(f"{entry_point} returned {type(agent).__name__}, which is not an Agent")
    return agent
