"""Promotion and rollback as Prefect flows, so that each move is a flow run with an
artifact a person can find beside the nights (the command line runs these)."""

from __future__ import annotations

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from flows import promotion
from infra.agents.replay import REPLAY
from infra.registry.mlflow_registry import Registry
from infra.settings import Settings
from infra.traces.prompt_hub import make_prompt_hub


async def recorded(move: promotion.Move, model: str, description: str = "") -> promotion.Move:
    """`move`, after leaving it as a Prefect artifact (key "promotion") of the flow run."""
    await create_markdown_artifact(
        markdown=f"# production of `{model}`\n\n{move.line()}",
        key="promotion",
        description=description or f"{move.action} v{move.version}",
    )
    return move


@flow(name="promote")
async def promote_flow(version: int | None, by: str) -> promotion.Move:
    """Move production to `version` (default: the candidate) if it passes the gate."""
    settings = Settings()
    model = settings.registry.model_name
    hub = make_prompt_hub(settings.traces, () if settings.agent == REPLAY else None)
    move = promotion.promote(
        Registry(settings), model, version, settings.promotion, by, settings.seed, hub=hub
    )
    return await recorded(move, model)


@flow(name="rollback")
async def rollback_flow(by: str) -> promotion.Move:
    """Move production back to the version before it."""
    settings = Settings()
    model = settings.registry.model_name
    hub = make_prompt_hub(settings.traces, () if settings.agent == REPLAY else None)
    return await recorded(promotion.rollback(Registry(settings), model, by, hub), model)
