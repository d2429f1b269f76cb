"""Agents: what the flywheel optimizes. The demo agent is one; users bring theirs."""

from infra.agents.loading import load_agent
from infra.agents.protocol import Agent

__all__ = ["Agent", "load_agent"]
