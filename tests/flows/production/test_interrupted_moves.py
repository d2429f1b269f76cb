"""A promotion or rollback cut at any step is finished by the next command that reads or
moves production, and `rollback` then knows the version before: on a real sqlite MLflow
and Langfuse's SDK against a local fake."""

import asyncio
import json
from contextlib import contextmanager

import pytest

from flows import nightly
from flows.cli import main
from flows.night.clock import StageClock
from flows.night.runtime import Runtime
from flows.production import serving
from flows.production.promotion import (
    DECISION,
    HISTORY_TAG,
    PENDING_TAG,
    PRODUCTION,
    history,
    publish_managed,
    rollback_target,
)
from flows.report.status import render, status_data
from infra.registry.mlflow_registry import Registry
from infra.settings import Settings, StateSettings
from infra.traces.prompt_hub import PromptHub
from tests.flows.production.test_promotion import CFG, MODEL, gain_over, night
from tests.flows.production.test_serving import langfuse_hub


class Cut(Exception):
    """The command killed at one step of its move."""


@contextmanager
def cut_at(monkeypatch, owner, method: str, when):
    """`owner.method` raises `Cut` on the call `when(args)` picks: that step never happens."""
    real = getattr(owner, method)

    def cut(*args, **kwargs):
        if when(args):
            raise Cut(method)
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(owner, method, cut)
        yield


def versioned_night(registry: Registry, hub: PromptHub, name: str, evidence) -> int:
    """A night's version, its prompt published to the hub under "candidate" as a night does."""
    version = night(registry, name, evidence)
    publish_managed(
        registry, hub, MODEL, version, {"instructions": f"instructions of {name}"}, ["candidate"]
    )
    return version


def promote(registry, version, hub):
    return asyncio.run(serving.promote(None, registry, MODEL, version, CFG, "ada", hub=hub))


def rollback(registry, hub):
    return asyncio.run(serving.rollback(None, registry, MODEL, "bob", hub))


def production(registry: Registry, hub: PromptHub) -> tuple[int | None, str | None, str]:
    """What each place says production is: the model alias, the prompt alias, the hub."""
    prompt = registry.prompt_at_alias(registry.prompt_name("instructions"), PRODUCTION)
    return registry.get_alias(MODEL, PRODUCTION), prompt, hub.production()["instructions"].text


def run_names(registry: Registry) -> list[str]:
    return [run.name for run in registry.recent_runs(50)]


def by_status(registry, hub, settings):
    """`flywheel status`: the move finished first, then shown."""
    finished = asyncio.run(serving.finish_interrupted(None, registry, MODEL, hub))
    text = "\n".join(render(status_data(registry, settings, finished=finished)))
    assert "Finished a move a cut command left under way: promoted v2" in text
    assert "Production: agent v2: prompts agent-instructions v2" in text


def by_promote(registry, hub, settings):
    """`flywheel promote 2` again: the promotion asked for is done, not "unchanged"."""
    again = promote(registry, 2, hub)
    assert (again.action, again.version, again.previous) == ("promoted", 2, 1)


def by_night(registry, hub, settings, monkeypatch):
    """The next night: production finished before it reads its baseline."""

    class Baseline(Exception):
        pass

    def reads_production(rt, stage):
        async def read(*args):
            assert production(registry, hub)[:2] == (2, "instructions of n2")
            raise Baseline

        return read

    monkeypatch.setattr(nightly, "require_offline", lambda agent, origin: None)
    monkeypatch.setattr(nightly, "_retrying", reads_production)
    rt = Runtime(settings, registry=registry, agent=object())  # its agent is never run
    with pytest.raises(Baseline):
        asyncio.run(nightly._night(rt, "n3", StageClock()))


# Each step of a promotion, by the call that makes it, and the command that comes next.
STEPS = {
    "prompt aliases": (Registry, "set_prompt_alias", lambda a: a[2] == PRODUCTION, by_promote),
    "hub labels": (PromptHub, "label", lambda a: PRODUCTION in a[3], by_status),
    "model alias": (Registry, "set_model_alias", lambda a: a[2] == PRODUCTION, by_night),
    "version record": (
        Registry,
        "set_model_version_tags",
        lambda a: DECISION + "decision" in a[3],
        None,  # `flywheel rollback`: finishes the promotion, then rolls it back
    ),
    "history": (Registry, "set_model_tag", lambda a: a[2] == HISTORY_TAG, by_promote),
    "intent cleared": (Registry, "delete_model_tag", lambda a: a[2] == PENDING_TAG, by_status),
}


@pytest.mark.parametrize("step", list(STEPS))
def test_a_promotion_cut_at_any_step_is_finished_by_the_next_command(step, tmp_path, monkeypatch):
    owner, method, when, next_command = STEPS[step]
    settings = Settings(state_dir=tmp_path, state=StateSettings(retention_days=None))
    registry = Registry(settings.mlflow)
    with langfuse_hub() as hub:
        v1 = versioned_night(registry, hub, "n1", gain_over(None, 12))
        assert promote(registry, v1, hub).action == "promoted"
        v2 = versioned_night(registry, hub, "n2", gain_over(v1, 12))
        with cut_at(monkeypatch, owner, method, when), pytest.raises(Cut):
            promote(registry, v2, hub)
        assert registry.model_tag(MODEL, PENDING_TAG) is not None  # the intent, kept

        if next_command is None:
            back = rollback(registry, hub)
            assert (back.action, back.version, back.previous) == ("rolled back", v1, v2)
        else:
            if next_command is by_night:
                next_command(registry, hub, settings, monkeypatch)
            else:
                next_command(registry, hub, settings)
            assert production(registry, hub) == (v2, "instructions of n2", "instructions of n2")
            assert registry.model_version(MODEL, v2).tags[DECISION + "decision"] == "promoted"
            assert run_names(registry).count(f"promoted-v{v2}") == 1  # reopened, not twice
            back = rollback(registry, hub)
            assert (back.action, back.version, back.previous) == ("rolled back", v1, v2)

        assert production(registry, hub) == (v1, "instructions of n1", "instructions of n1")
        moves = [(m["action"], m["version"]) for m in history(registry, MODEL)]
        assert moves == [("promoted", v1), ("promoted", v2), ("rolled back", v1)]
        assert registry.model_tag(MODEL, PENDING_TAG) is None


def test_a_rollback_cut_and_asked_again_goes_back_one_version_not_two(tmp_path, monkeypatch):
    registry = Registry(Settings(state_dir=tmp_path).mlflow)
    with langfuse_hub() as hub:
        v1 = versioned_night(registry, hub, "n1", gain_over(None, 12))
        promote(registry, v1, hub)
        v2 = versioned_night(registry, hub, "n2", gain_over(v1, 12))
        promote(registry, v2, hub)
        v3 = versioned_night(registry, hub, "n3", gain_over(v2, 12))
        promote(registry, v3, hub)
        is_production = lambda a: a[2] == PRODUCTION  # noqa: E731
        with cut_at(monkeypatch, Registry, "set_model_alias", is_production), pytest.raises(Cut):
            rollback(registry, hub)
        assert production(registry, hub) == (v3, "instructions of n2", "instructions of n2")

        again = rollback(registry, hub)
        assert (again.action, again.version, again.previous) == ("rolled back", v2, v3)
        assert production(registry, hub) == (v2, "instructions of n2", "instructions of n2")
        assert json.loads(registry.model_tag(MODEL, HISTORY_TAG))[-1]["by"] == "bob"
        assert rollback(registry, hub).version == v1  # and the one before is still known


def test_flywheel_status_finishes_a_cut_promotion_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    registry = Registry(Settings().mlflow)
    v1 = night(registry, "n1", gain_over(None, 12))
    promote(registry, v1, None)
    v2 = night(registry, "n2", gain_over(v1, 12))
    is_production = lambda a: a[2] == PRODUCTION  # noqa: E731
    with cut_at(monkeypatch, Registry, "set_model_alias", is_production), pytest.raises(Cut):
        promote(registry, v2, None)

    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Finished a move a cut command left under way: promoted v{v2}")
    assert f"Production: agent v{v2}" in out
    assert registry.get_alias(MODEL, PRODUCTION) == v2
    assert rollback_target(registry, MODEL) == v1
