"""Promotion, rollback and the serving server's re-sync as Prefect flows, so that each
move is a flow run with an artifact a person can find beside the nights (the command
line runs these)."""

from __future__ import annotations

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from flows.production import promotion, serving
from flows.report.links import move_links
from infra.agents.replay import REPLAY
from infra.redaction import mask
from infra.registry.mlflow_registry import Registry
from infra.settings import Settings
from infra.traces.prompt_hub import PromptHub, make_prompt_hub


def production_hub(settings: Settings) -> PromptHub | None:
    """The hub whose production labels move with production (None: no prompt of the agent
    lives in Langfuse)."""
    return make_prompt_hub(settings.traces, () if settings.agent == REPLAY else None)


async def recorded(
    move: promotion.Move,
    registry: Registry,
    model: str,
    hub: PromptHub | None,
    description: str = "",
) -> promotion.Move:
    """`move`, after leaving it as a Prefect artifact (key "promotion") of the flow run,
    with links to what production holds after it (MLflow's version, Langfuse's prompts)."""
    body = [f"# production of `{model}`", "", move.line(), ""]
    if move.action in ("promoted", "rolled back") and move.version is not None:
        info = registry.model_version(model, move.version)
        versions = promotion.hub_versions(info.tags if info else {}) or {}
        uri = mask(registry.settings.tracking_uri)
        body += move_links(uri, model, move.version, promotion.hub_pages(hub, versions))
    await create_markdown_artifact(
        markdown="\n".join(body),
        key="promotion",
        description=description or f"{move.action} v{move.version}",
    )
    return move


@flow(name="promote")
async def promote_flow(version: int | None, by: str) -> promotion.Move:
    """Move production to `version` (default: the candidate) if it passes the gate, and
    its server answers it."""
    settings = Settings()
    model = settings.registry.model_name
    hub = production_hub(settings)
    registry = Registry(settings.mlflow)
    move = await serving.promote(
        serving.make_serving(settings),
        registry,
        model,
        version,
        settings.promotion,
        by,
        settings.seed,
        hub=hub,
    )
    return await recorded(move, registry, model, hub)


@flow(name="rollback")
async def rollback_flow(by: str) -> promotion.Move:
    """Move production back to the version before it."""
    settings = Settings()
    model = settings.registry.model_name
    hub = production_hub(settings)
    served, registry = serving.make_serving(settings), Registry(settings.mlflow)
    move = await serving.rollback(served, registry, model, by, hub)
    return await recorded(move, registry, model, hub)


@flow(name="serving-sync")
async def serving_sync_flow() -> list[str]:
    """Bring the serving server back to what the registry says (after it restarted)."""
    settings = Settings()
    served = serving.make_serving(settings)
    if served is None:
        return ["no serving server is set ([serving] base_url): nothing to sync"]
    model = settings.registry.model_name
    done = await serving.reconcile(served, Registry(settings.mlflow), model)
    await create_markdown_artifact(
        markdown=f"# serving of `{model}`\n\n" + "\n".join(f"- {line}" for line in done),
        key="serving-sync",
    )
    return done
