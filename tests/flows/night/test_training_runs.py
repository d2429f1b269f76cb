"""Each LoRA step's training reaches the night's MLflow run as a child run: a real SFT run
on a tiny random checkpoint, trained as a weight step trains (`train_once`, a progress bar
listening), its per-step history registered with the night, and only once however often
registration is resumed."""

import asyncio
import json
import shutil
from dataclasses import replace

import pytest
from mlflow import MlflowClient
from transformers import AutoTokenizer

from flows.night.registration import register_versions
from flows.night.runtime import Runtime
from flows.night.training_runs import JUDGE_LORA, judge_lora_dir, weight_step_dir
from flows.report.progress import StageProgress
from infra.lm.model_files import resolve_model_path
from infra.registry.mlflow_registry import Registry
from infra.settings import LoraSettings, Settings
from judges.judge_lora import JudgeLora
from tests.flows.report.test_report import report
from tests.weights.test_lora_architectures import records, tiny_checkpoint
from weights.lora import TRAINING_SUMMARY
from weights.round import train_once

STEPS = 3
# 4 records, 2 a step: two passes hold the 3 steps max_steps allows (a cap, not a repeat)
LORA = LoraSettings(batch_size=2, micro_batch_size=2, epochs=2, max_steps=STEPS, checkpoints=2)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Three SFT steps on a tiny llama, saved at step 1 and at the end, while a LoRA
    round's progress bar hears each step from the training thread."""
    tmp = tmp_path_factory.mktemp("trained")
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path())
    base = tiny_checkpoint(tmp / "base", "llama", tokenizer)
    cfg = LORA.model_copy(update={"max_seq_length": 64})

    async def train():
        with StageProgress("step 2: LoRA round (sft)", None, "rollouts") as progress:
            folder, summary = await train_once(
                "sft", base, None, records(), tmp / "adapter", cfg, 0, None, progress.on_train_step
            )
        return folder, summary, progress

    return asyncio.run(train())


def night_with_training(tmp_path, trained):
    """A runtime whose night trained the judge's adapter and weight step 2's as above,
    and the report of that night."""
    folder, summary, _ = trained
    settings = Settings(state_dir=tmp_path / "state", lora=LORA)
    rt = Runtime(settings, registry=Registry(settings.mlflow))
    judge_dir, round_dir = judge_lora_dir(rt, "n1"), weight_step_dir(rt, "n1", 2)
    shutil.copytree(folder, judge_dir / "adapter")
    shutil.copytree(folder, round_dir / "adapter")
    history = tuple(summary["history"])
    night = report(0.5)
    weights = night.steps[1]
    weights.lora = replace(
        weights.lora,
        trained_path=str(round_dir / "adapter"),
        records=4,
        train_steps=STEPS,
        train_device=summary["device"],
        history=history,
        val_curve=((0, 0.4), (1, 0.45), (STEPS, 0.3)),
    )
    judge = JudgeLora(
        records=4,
        rubric_val=0.1,
        checkpoints={"step-1": 0.2, "adapter": 0.4},
        kept=str(judge_dir / "adapter"),
        heldout={"kappa": 0.35, "n": 8.0},
        history=history,
        train_steps=STEPS,
        device=summary["device"],
    )
    return rt, replace(night, judge_lora=judge)


def children(rt: Runtime, parent: str) -> dict[str, str]:
    """The child runs of `parent`: name -> run id (a name twice fails the test)."""
    client = rt.registry.client
    found = client.search_runs(
        [rt.registry.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'"
    )
    names = [run.info.run_name for run in found]
    assert len(names) == len(set(names)), f"logged twice: {sorted(names)}"
    return {run.info.run_name: run.info.run_id for run in found}


def test_training_hears_each_step_and_keeps_its_history(trained):
    folder, summary, progress = trained
    task = progress.task
    assert (task.fields["unit"], task.total, task.completed) == ("steps", STEPS, STEPS)
    assert task.fields["info"].startswith("loss ") and " lr " in task.fields["info"]
    history = summary["history"]
    assert [log["step"] for log in history] == [1, 2, 3]
    assert all({"loss", "learning_rate", "grad_norm"} <= set(log) for log in history)
    assert json.loads((folder / TRAINING_SUMMARY).read_text())["history"] == history


def test_each_lora_step_s_curve_is_a_child_run_of_the_night(tmp_path, trained):
    rt, night = night_with_training(tmp_path, trained)
    _, summary, _ = trained
    registered = register_versions(rt, "n1", night)
    runs = children(rt, registered.mlflow_run_id)
    assert set(runs) == {JUDGE_LORA, "lora-round-step2"}
    client = MlflowClient(rt.settings.tracking_uri)

    step2 = runs["lora-round-step2"]
    loss = client.get_metric_history(step2, "loss")
    assert [(m.step, m.value) for m in loss] == [
        (int(log["step"]), pytest.approx(log["loss"])) for log in summary["history"]
    ]
    for name in ("learning_rate", "grad_norm"):
        assert [m.step for m in client.get_metric_history(step2, name)] == [1, 2, 3]
    val = client.get_metric_history(step2, "val_score")
    assert sorted((m.step, m.value) for m in val) == [(0, 0.4), (1, 0.45), (3, 0.3)]
    params = client.get_run(step2).data.params
    assert params["method"] == "sft" and params["rank"] == "8" and params["alpha"] == "16"
    assert params["learning_rate"] == str(LORA.learning_rate) and params["epochs"] == "2"
    assert params["max_steps"] == str(STEPS) and params["records"] == "4"
    assert params["device"] == summary["device"] and params["kept"] == "false"
    files = {a.path for a in client.list_artifacts(step2, "adapter")}
    assert files == {"adapter/training.json", "adapter/adapter_config.json"}  # no weights
    assert client.get_run(step2).data.tags["flywheel.run_id"] == "n1"

    judge = runs[JUDGE_LORA]
    val = client.get_metric_history(judge, "val_kappa")
    assert sorted((m.step, m.value) for m in val) == [(0, 0.1), (1, 0.2), (3, 0.4)]
    (heldout,) = client.get_metric_history(judge, "heldout_kappa")
    assert (heldout.step, heldout.value) == (3, 0.35)  # where the kept adapter was saved
    assert len(client.get_metric_history(judge, "loss")) == STEPS
    params = client.get_run(judge).data.params
    assert params["kept"] == "adapter" and params["records"] == "4"


def test_a_resumed_registration_logs_no_child_run_twice(tmp_path, trained, monkeypatch):
    rt, night = night_with_training(tmp_path, trained)

    def crash(*args, **kwargs):
        raise RuntimeError("killed between the child runs and the model version")

    register_model = Registry.register_model_version
    monkeypatch.setattr(Registry, "register_model_version", crash)
    with pytest.raises(RuntimeError):
        register_versions(rt, "n1", night)
    monkeypatch.setattr(Registry, "register_model_version", register_model)
    first = register_versions(rt, "n1", night)
    again = register_versions(rt, "n1", night)
    assert first.mlflow_run_id == again.mlflow_run_id
    runs = children(rt, first.mlflow_run_id)  # fails on a name logged twice
    assert set(runs) == {JUDGE_LORA, "lora-round-step2"}
    client = MlflowClient(rt.settings.tracking_uri)
    for run_id in runs.values():
        assert len(client.get_metric_history(run_id, "loss")) == STEPS


def test_a_result_persisted_before_training_curves_loads_and_logs_no_child(tmp_path):
    """A night resumed across this change: its LoRA results have no history; they load
    with the defaults, and registration logs no empty child runs for them."""
    import pickle

    from weights.round import LoraRound

    old = LoraRound("/a", False, 12, 1.5, 0.4, 0.3)
    del old.__dict__["history"], old.__dict__["val_curve"]  # as pickled before the fields
    loaded = pickle.loads(pickle.dumps(old))
    assert loaded.history == () and loaded.val_curve == ()
    judge = JudgeLora(4, 0.1)
    for name in ("history", "train_steps", "device"):
        del judge.__dict__[name]
    judge = pickle.loads(pickle.dumps(judge))
    assert (judge.history, judge.train_steps, judge.device) == ((), 0, "")
    settings = Settings(state_dir=tmp_path / "state")
    rt = Runtime(settings, registry=Registry(settings.mlflow))
    registered = register_versions(rt, "n1", replace(report(0.5), judge_lora=judge))
    assert children(rt, registered.mlflow_run_id) == {}
