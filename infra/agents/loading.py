"""Load an agent from a `package.module:factory` entry point named in settings, checked
against the contract before anything runs on it."""

from __future__ import annotations

import importlib

from infra.agents.contract import check_agent
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
    check_agent(agent, repr(entry_point))
    return agent
