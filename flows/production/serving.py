"""Production on its serving server: a version's adapter is loaded under its own name and
answers before production moves to it, a demoted one is unloaded after a grace period, and
a server that restarted is brought back to what the registry says.

The server is any OpenAI-compatible one with vLLM's runtime LoRA endpoints (vLLM with
`--enable-lora` and VLLM_ALLOW_RUNTIME_LORA_UPDATING, or `flywheel serve-model`), reached
through the `AdapterLM` seam. Adapters travel through a folder both sides mount: flywheel
copies a version's adapter there from MLflow, the server reads it at its own path for that
folder. Every command that moves production ends by reconciling the server with the
registry, so one cut short (between loading and moving the aliases) leaves them agreeing
after the next command.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flows.production import promotion
from flows.production.gate import PromotionDecision
from flows.production.promotion import CANARY, PRODUCTION, Move, served_model
from infra.lm.openai_lm import OpenAILM
from infra.lm.protocol import AdapterLM
from infra.registry.mlflow_registry import Registry
from infra.settings import LMSettings, PromotionSettings, Settings
from infra.traces.prompt_hub import PromptHub
from weights.adapters import adapter_files_ok

log = logging.getLogger(__name__)

# What a bring-up asks: one greedy token proves the name answers, and costs nothing.
PROBE = [{"role": "user", "content": "Say OK."}]


class ServingFailed(Exception):
    """The server could not serve a version: the sentence says what, production stays."""


@dataclass(frozen=True)
class Serving:
    server: AdapterLM
    where: str  # the server's URL, for people
    base_model: str  # the base model's name there
    folder: Path  # where flywheel writes adapters for it
    server_folder: str  # that folder as the server sees it
    unload_after_s: float


def make_serving(settings: Settings, server: AdapterLM | None = None) -> Serving | None:
    """The serving server `settings.serving` names; None when it names none. `server`:
    a client to use instead of one built from the settings (tests)."""
    cfg = settings.serving
    if not cfg.base_url:
        return None
    base_model = cfg.model or settings.lm.model
    if server is None:
        lm = LMSettings(
            backend="openai",
            base_url=cfg.base_url,
            model=base_model,
            api_key=cfg.api_key,
            timeout_s=cfg.timeout_s,
            max_retries=2,  # a person waits on a move: two tries more, then a sentence
        )
        server = OpenAILM(lm)
    folder = Path(cfg.adapter_dir) if cfg.adapter_dir else settings.state_dir / "serving"
    server_folder = cfg.server_adapter_dir or str(folder.resolve())
    return Serving(server, cfg.base_url, base_model, folder, server_folder, cfg.unload_after_s)


def owned(model: str, name: str) -> bool:
    """Whether a served name is one of `model`'s versions (the only ones flywheel unloads:
    a night's own adapters and other teams' stay as they are)."""
    return re.fullmatch(rf"{re.escape(model)}-v\d+", name) is not None


async def bring_up(serving: Serving, registry: Registry, model: str, version: int) -> str:
    """Make the server answer `version` under its served name, and return the name: its
    adapter copied into the shared folder (once) and loaded (once), then one request."""
    info = registry.model_version(model, version)
    if info is None:
        raise ServingFailed(f"model {model} has no v{version}")
    name = served_model(model, version, info.tags, serving.base_model)
    try:
        if name != serving.base_model:
            target = serving.folder / name
            if not adapter_files_ok(target):
                await asyncio.to_thread(_copy_adapter, registry, model, version, target)
            if name not in await serving.server.adapters():
                await serving.server.load_adapter(name, f"{serving.server_folder}/{name}")
        adapter = None if name == serving.base_model else name
        await serving.server.complete(PROBE, max_tokens=1, temperature=0.0, adapter=adapter)
    except ServingFailed:
        raise
    except Exception as error:  # whatever stops the answer is a reason not to move
        raise ServingFailed(
            f"the server at {serving.where} could not serve v{version} as {name!r}: "
            f"{type(error).__name__}: {error}"
        ) from error
    return name


def _copy_adapter(registry: Registry, model: str, version: int, target: Path) -> None:
    """The version's adapter from MLflow into `target`, whole or not at all."""
    partial = target.with_name(f".{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)  # left by a copy cut short
    found = registry.download_adapter(model, version, partial)
    if found is None:
        raise ServingFailed(f"model {model} v{version} is tagged with an adapter but holds none")
    shutil.rmtree(target, ignore_errors=True)
    found.rename(target)
    shutil.rmtree(partial, ignore_errors=True)


def still_wanted(registry: Registry, model: str, unload_after_s: float, now: datetime) -> set[str]:
    """The served names the server should hold: production's, the canary's (it serves its
    share), and those of versions that left production less than `unload_after_s` ago
    (requests in flight, a quick rollback)."""
    names = set()
    current = registry.get_alias(model, PRODUCTION)
    canary = registry.get_alias(model, CANARY)
    recent = [
        move["previous"]
        for move in promotion.history(registry, model)
        if move.get("previous") is not None
        and (now - datetime.fromisoformat(move["at"])).total_seconds() < unload_after_s
    ]
    for version in [v for v in (current, canary) if v is not None] + recent:
        info = registry.model_version(model, version)
        if info is not None:
            names.add(served_model(model, version, info.tags, ""))
    return {name for name in names if owned(model, name)}


async def reconcile(
    serving: Serving,
    registry: Registry,
    model: str,
    now: datetime | None = None,
    ensure_production: bool = True,
) -> list[str]:
    """Bring the server to what the registry says: production's adapter loaded (a server
    that restarted has none; `ensure_production=False` after a move that just brought it
    up), every other version of `model` unloaded once its grace period is over (one a cut
    promotion loaded, one demoted long ago). What it did, as sentences."""
    now = now or datetime.now(UTC)
    done = []
    current = registry.get_alias(model, PRODUCTION)
    if current is not None and ensure_production:
        name = await bring_up(serving, registry, model, current)
        done.append(f"production v{current} answers as {name!r} at {serving.where}")
    wanted = still_wanted(registry, model, serving.unload_after_s, now)
    for name in sorted(await serving.server.adapters()):
        if owned(model, name) and name not in wanted:
            await serving.server.unload_adapter(name)
            shutil.rmtree(serving.folder / name, ignore_errors=True)
            done.append(f"unloaded {name!r}: no longer production")
    return done


async def promote(
    serving: Serving | None,
    registry: Registry,
    model: str,
    version: int | None,
    cfg: PromotionSettings,
    by: str,
    seed: int = 0,
    decision: PromotionDecision | None = None,
    hub: PromptHub | None = None,
) -> Move:
    """Move production to `version` (default: the candidate) if it passes the gate on the
    evidence of its night, and (with a `serving` server) only once that server answers it:
    one the server cannot serve is refused with the reason, and production stays where it
    is. Every promotion goes through here: the command line, the night, the tests."""
    finished = await finish_interrupted(serving, registry, model, hub)
    verdict = promotion.review(registry, model, version, cfg, by, seed, decision)
    if isinstance(verdict, Move):
        if finished and finished.action == "promoted" and finished.version == verdict.version:
            return finished  # the promotion asked for again after a cut: done now, as asked
        return verdict
    served = None
    if serving is not None:
        try:
            served = await bring_up(serving, registry, model, verdict.version)
        except ServingFailed as failure:
            return promotion.refuse(registry, model, verdict, str(failure))
    move = promotion.carry_out(registry, model, verdict, hub, served)
    await tidy(serving, registry, model, ensure_production=False)  # brought up above
    return move


async def rollback(
    serving: Serving | None, registry: Registry, model: str, by: str, hub: PromptHub | None = None
) -> Move:
    """`flows.production.promotion.rollback`, with the earlier version brought up on the server
    first; one the server cannot serve leaves production where it is."""
    finished = await finish_interrupted(serving, registry, model, hub)
    if finished and finished.action == "rolled back":
        return finished  # the rollback asked for again after a cut: one step back, not two
    target = promotion.rollback_target(registry, model)
    served = None
    if serving is not None and target is not None:
        try:
            served = await bring_up(serving, registry, model, target)
        except ServingFailed as failure:
            now = datetime.now(UTC).isoformat(timespec="seconds")
            current = registry.get_alias(model, PRODUCTION)
            return Move("refused", target, current, f"no rollback: {failure}", by, now)
    move = promotion.rollback(registry, model, by, hub, served)
    await tidy(serving, registry, model, ensure_production=False)  # brought up above
    return move


async def finish_interrupted(
    serving: Serving | None, registry: Registry, model: str, hub: PromptHub | None = None
) -> Move | None:
    """`flows.production.promotion.finish_interrupted`, and the server brought to what it
    finished. Every command that reads or moves production calls this first: `status`,
    `promote`, `rollback` and the night."""
    move = promotion.finish_interrupted(registry, model, hub)
    if move is not None:
        log.warning("finished a move a cut command left under way: %s", move.line())
        await tidy(serving, registry, model)
    return move


async def tidy(
    serving: Serving | None, registry: Registry, model: str, ensure_production: bool = True
) -> None:
    """After a move, and after each night: the server reconciled with the registry. A
    failure is a warning: production has moved already (or the night is registered), and
    the next command, night or `flywheel serving sync` tries again."""
    if serving is None:
        return
    try:
        for line in await reconcile(serving, registry, model, None, ensure_production):
            log.info("serving: %s", line)
    except Exception as error:
        log.warning("the server at %s was not synced: %s", serving.where, error)


async def serving_state(serving: Serving, registry: Registry, model: str) -> dict[str, Any]:
    """What the server holds beside what the registry says it should (`status --json`);
    a server that cannot be asked is an `error`, not a failure."""
    state: dict[str, Any] = {"url": serving.where, "loaded": None, "error": None}
    try:
        loaded = sorted(await serving.server.adapters())
    except Exception as error:  # status reports; it never fails on the server's account
        return state | {"error": f"{type(error).__name__}: {error}"}
    state["loaded"] = loaded
    current = registry.get_alias(model, PRODUCTION)
    info = registry.model_version(model, current) if current is not None else None
    if info is not None:
        name = served_model(model, current, info.tags, serving.base_model)
        state["production"] = {
            "version": current,
            "served_as": name,
            "answering": name == serving.base_model or name in loaded,
        }
    wanted = still_wanted(registry, model, serving.unload_after_s, datetime.now(UTC))
    state["not_production"] = [n for n in loaded if owned(model, n) and n not in wanted]
    return state


async def serving_lines(serving: Serving, registry: Registry, model: str) -> list[str]:
    """`serving_state` for people, under `flywheel status`."""
    state = await serving_state(serving, registry, model)
    head = f"Serving at {state['url']}:"
    if state["error"]:
        return [f"{head} not reachable ({state['error']})"]
    lines = [f"{head} loaded {', '.join(state['loaded']) or 'no adapter'}"]
    if production := state.get("production"):
        version, name = production["version"], production["served_as"]
        if production["answering"]:
            lines.append(f"  production v{version} is served as {name!r}")
        else:
            lines.append(
                f"  production v{version} should be served as {name!r}, which the server does "
                "not hold (restarted?): `flywheel serving sync` loads it"
            )
    if extra := state["not_production"]:
        lines.append(f"  not production: {', '.join(extra)} (`flywheel serving sync` unloads)")
    return lines
