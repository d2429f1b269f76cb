"""Production on its serving server, over HTTP: flywheel's own server (`serve-model`'s app,
vLLM's adapter endpoints) on a tiny random Qwen2, a real sqlite MLflow and Langfuse's SDK
against a local fake. Promote and rollback load and unload the right adapters, the agent's
next call through the name published with its prompt gets that adapter's output, a cut
promotion and a restarted server are mended by the next command."""

from __future__ import annotations

import asyncio
import json
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import Qwen2ForCausalLM

from flows.cli import main
from flows.production import promotion, serving
from flows.production.promotion import ADAPTER_TAG, PRODUCTION, PROMPTS_TAG, log_evidence
from infra.lm.engine.local import LocalLM
from infra.lm.engine.server import create_app
from infra.lm.openai_lm import OpenAILM
from infra.registry.mlflow_registry import Registry
from infra.settings import LMSettings, PromotionSettings, ServingSettings, Settings, TraceSettings
from infra.traces.prompt_hub import PromptHub
from tests.fake_langfuse_prompts import FakeLangfusePrompts
from tests.fake_openai import free_port, on_loopback
from tests.flows.production.test_promotion import gain_over
from tests.infra.lm.engine.test_qwen2 import (
    ALL_PROJECTIONS,
    reference,
    save_checkpoint,
    tiny_qwen2_config,
)
from tests.prefect_harness import prefect_harness

MODEL = "agent"
BASE = "tiny"  # the base model's served name
CFG = PromotionSettings(resamples=300)
ASK = [{"role": "user", "content": "What is 2+2?"}]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return save_checkpoint(Qwen2ForCausalLM, tiny_qwen2_config(), tmp_path_factory.mktemp("q"))


@pytest.fixture(scope="module")
def adapters(checkpoint, tmp_path_factory):
    """Two adapters of the tiny model that answer ASK differently from it and each other."""
    folders = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        config = LoraConfig(r=4, target_modules=ALL_PROJECTIONS, init_lora_weights=False)
        folder = tmp_path_factory.mktemp(f"adapter{seed}")
        get_peft_model(reference(checkpoint), config).save_pretrained(folder)
        folders.append(folder)
    return folders


@contextmanager
def model_server(checkpoint, port: int | None = None):
    """`flywheel serve-model`'s app on a loopback port; a fresh engine, so a second one on
    the same port is a server that restarted."""
    lm = LocalLM(LMSettings(model_path=str(checkpoint), dtype="float32", batch_wait_ms=2))
    try:
        with on_loopback(create_app(lm, BASE), port) as url:
            yield url
    finally:
        lm.close()


def settings_for(tmp_path, url: str, **serving) -> Settings:
    return Settings(
        state_dir=tmp_path / "state",
        lm=LMSettings(model=BASE),
        serving=ServingSettings(base_url=url, **serving),
    )


def night(registry: Registry, name: str, evidence, adapter) -> int:
    """A night's version with its adapter, its prompt and its evidence, as `candidate`."""
    with registry.start_run(name):
        log_evidence(registry, evidence)
        prompt = registry.prompt_name("instructions")
        version = registry.register_prompt(prompt, f"instructions of {name}")
        tags = {PROMPTS_TAG: json.dumps({prompt: version}), ADAPTER_TAG: "true"}
        uris = [f"prompts:/{prompt}/{version}"]
        return registry.register_model_version(MODEL, adapter, uris, {}, tags, alias="candidate")


async def answer(url: str, model: str) -> str:
    """What a caller of the server gets for ASK from `model`, greedy."""
    client = OpenAILM(LMSettings(backend="openai", base_url=url, model=BASE))
    return (await client.complete(ASK, max_tokens=8, temperature=0.0, model=model)).text


async def loaded(url: str) -> list[str]:
    return sorted(await OpenAILM(LMSettings(backend="openai", base_url=url, model=BASE)).adapters())


@contextmanager
def langfuse_hub():
    with FakeLangfusePrompts() as fake:
        fake.store.create({"name": "router", "prompt": "seed", "labels": [PRODUCTION]})
        api = fake.sdk_api()
        yield PromptHub(TraceSettings(managed_prompts={"instructions": "router"}), api=api)


def published_model(hub: PromptHub) -> str:
    """The model the agent calls: the one its production prompt's config names."""
    return hub.production()["instructions"].config["model"]


async def test_promote_and_rollback_serve_the_version_the_agent_calls(
    checkpoint, adapters, tmp_path
):
    with model_server(checkpoint) as url, langfuse_hub() as hub:
        # the outputs to tell apart: the base model's and each adapter's
        srv = serving.make_serving(settings_for(tmp_path, url, unload_after_s=0))
        for name, folder in (("a1", adapters[0]), ("a2", adapters[1])):
            await srv.server.load_adapter(name, folder)
        base, out1, out2 = [await answer(url, m) for m in (BASE, "a1", "a2")]
        assert len({base, out1, out2}) == 3
        for name in ("a1", "a2"):
            await srv.server.unload_adapter(name)

        registry = Registry(settings_for(tmp_path, url).mlflow)
        v1 = night(registry, "n1", gain_over(None, 12), adapters[0])
        move = await serving.promote(srv, registry, MODEL, None, CFG, "ada", hub=hub)
        assert (move.action, move.version) == ("promoted", v1)
        assert await loaded(url) == [f"agent-v{v1}"]
        assert published_model(hub) == f"agent-v{v1}"
        assert await answer(url, published_model(hub)) == out1  # the adapter's, not the base's

        v2 = night(registry, "n2", gain_over(v1, 12), adapters[1])
        assert (await serving.promote(srv, registry, MODEL, v2, CFG, "ada", hub=hub)).action == (
            "promoted"
        )
        assert await loaded(url) == [f"agent-v{v2}"]  # v1 unloaded: no grace period here
        assert await answer(url, published_model(hub)) == out2
        assert not (srv.folder / f"agent-v{v1}").exists()  # its copy gone with it

        back = await serving.rollback(srv, registry, MODEL, "bob", hub)
        assert (back.action, back.version) == ("rolled back", v1)
        assert await loaded(url) == [f"agent-v{v1}"]
        assert await answer(url, published_model(hub)) == out1


async def test_a_demoted_adapter_stays_loaded_for_its_grace_period(checkpoint, adapters, tmp_path):
    with model_server(checkpoint) as url:
        srv = serving.make_serving(settings_for(tmp_path, url, unload_after_s=600))
        registry = Registry(settings_for(tmp_path, url).mlflow)
        v1 = night(registry, "n1", gain_over(None, 12), adapters[0])
        await serving.promote(srv, registry, MODEL, v1, CFG, "ada")
        v2 = night(registry, "n2", gain_over(v1, 12), adapters[1])
        await serving.promote(srv, registry, MODEL, v2, CFG, "ada")
        assert await loaded(url) == [f"agent-v{v1}", f"agent-v{v2}"]  # in flight, or rolled back to

        later = datetime.now(UTC) + timedelta(seconds=601)
        done = await serving.reconcile(srv, registry, MODEL, now=later)
        assert await loaded(url) == [f"agent-v{v2}"]
        assert f"unloaded 'agent-v{v1}': no longer production" in done


async def test_a_cut_promotion_and_a_restarted_server_are_mended_by_the_next_command(
    checkpoint, adapters, tmp_path, monkeypatch
):
    port = free_port()
    with model_server(checkpoint, port) as url:
        srv = serving.make_serving(settings_for(tmp_path, url, unload_after_s=0))
        registry = Registry(settings_for(tmp_path, url).mlflow)
        v1 = night(registry, "n1", gain_over(None, 12), adapters[0])
        await serving.promote(srv, registry, MODEL, v1, CFG, "ada")
        v2 = night(registry, "n2", gain_over(v1, 12), adapters[1])

        def cut(*args, **kwargs):
            raise KeyboardInterrupt  # killed between loading the adapter and the aliases

        with monkeypatch.context() as patch:
            patch.setattr(promotion, "carry_out", cut)
            with pytest.raises(KeyboardInterrupt):
                await serving.promote(srv, registry, MODEL, v2, CFG, "ada")
        assert registry.get_alias(MODEL, PRODUCTION) == v1
        assert await loaded(url) == [f"agent-v{v1}", f"agent-v{v2}"]  # they disagree
        lines = await serving.serving_lines(srv, registry, MODEL)
        assert any(f"not production: agent-v{v2}" in line for line in lines)

        await serving.reconcile(srv, registry, MODEL)  # `flywheel serving sync`
        assert await loaded(url) == [f"agent-v{v1}"]

    with model_server(checkpoint, port) as url:  # restarted: it holds nothing
        assert await loaded(url) == []
        lines = "\n".join(await serving.serving_lines(srv, registry, MODEL))
        assert f"should be served as 'agent-v{v1}', which the server does not hold" in lines
        await serving.reconcile(srv, registry, MODEL)
        assert await loaded(url) == [f"agent-v{v1}"]


async def test_a_version_the_server_cannot_load_is_refused_and_production_stays(
    checkpoint, adapters, tmp_path
):
    with model_server(checkpoint) as url:
        srv = serving.make_serving(settings_for(tmp_path, url))
        registry = Registry(settings_for(tmp_path, url).mlflow)
        v1 = night(registry, "n1", gain_over(None, 12), adapters[0])
        await serving.promote(srv, registry, MODEL, v1, CFG, "ada")
        v2 = night(registry, "n2", gain_over(v1, 12), adapters[1])
        # the server reads the shared folder at another path than the one it mounts
        wrong = serving.make_serving(
            settings_for(tmp_path, url, server_adapter_dir=str(tmp_path / "not-mounted"))
        )
        move = await serving.promote(wrong, registry, MODEL, v2, CFG, "ada")
        assert move.action == "refused" and registry.get_alias(MODEL, PRODUCTION) == v1
        assert f"could not serve v{v2} as 'agent-v{v2}'" in move.reason
        tags = registry.model_version(MODEL, v2).tags
        assert tags["flywheel.promotion.decision"] == "refused"
        assert await loaded(url) == [f"agent-v{v1}"]


def test_the_command_line_shows_and_syncs_the_server(
    checkpoint, adapters, tmp_path, monkeypatch, capsys
):
    with model_server(checkpoint) as url:
        for key, value in {
            "STATE_DIR": str(tmp_path / "state"),
            "LM__MODEL": BASE,
            "SERVING__BASE_URL": url,
        }.items():
            monkeypatch.setenv(f"FLYWHEEL_{key}", value)
        registry = Registry(Settings().mlflow)
        v1 = night(registry, "n1", gain_over(None, 12), adapters[0])
        asyncio.run(serving.promote(None, registry, MODEL, v1, CFG, "ada"))  # registry alone
        assert not asyncio.run(loaded(url))
        assert main(["status"]) == 0
        out = capsys.readouterr().out
        assert f"Serving at {url}: loaded no adapter" in out
        assert f"should be served as 'agent-v{v1}'" in out
        with prefect_harness():
            assert main(["serving", "sync"]) == 0
        assert f"production v{v1} answers as 'agent-v{v1}'" in capsys.readouterr().out
        assert asyncio.run(loaded(url)) == [f"agent-v{v1}"]


async def test_a_server_lost_after_the_move_is_a_warning_not_a_failed_move(
    checkpoint, adapters, tmp_path, monkeypatch, caplog
):
    with model_server(checkpoint) as url:
        srv = serving.make_serving(settings_for(tmp_path, url))
        registry = Registry(settings_for(tmp_path, url).mlflow)
        v1 = night(registry, "n1", gain_over(None, 12), adapters[0])

        async def lost(*args, **kwargs):
            raise ConnectionError("the server went away")

        monkeypatch.setattr(serving, "reconcile", lost)
        move = await serving.promote(srv, registry, MODEL, v1, CFG, "ada")
        assert move.action == "promoted" and registry.get_alias(MODEL, PRODUCTION) == v1
        assert "was not synced: the server went away" in caplog.text
