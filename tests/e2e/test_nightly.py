"""The whole night on real parts: the local model, sqlite MLflow, Prefect (test harness)."""

import asyncio
import json
from pathlib import Path

import mlflow
import pytest
from mlflow import MlflowClient
from prefect import get_client
from prefect.settings import get_current_settings

from flows.night.runtime import Runtime
from flows.nightly import nightly
from flows.production.gate import Evidence
from flows.production.promotion import PRODUCTION, PROMPTS_TAG, log_evidence
from flows.report.summary import render_markdown
from infra.agents.intent_router import SEED_PROMPTS
from infra.lm.model_files import resolve_model_path
from infra.registry.mlflow_registry import Registry
from infra.settings import Settings
from infra.traces.jsonl import DEMO_DIR
from judges.memory import FILE as MEMORY_FILE
from tests.fakes import random_lora_adapter
from tests.prefect_harness import prefect_harness

pytestmark = pytest.mark.slow


def small_export(folder: Path, traces: int = 48, heldout: int = 21) -> Path:
    """The demo export cut down, plus one malformed line of each kind."""
    folder.mkdir()
    observations = (DEMO_DIR / "observations.jsonl").read_text().splitlines()[:traces]
    kept = {json.loads(line)["traceId"] for line in observations}
    scores = [
        s
        for s in (DEMO_DIR / "scores.jsonl").read_text().splitlines()
        if json.loads(s)["traceId"] in kept
    ]
    (folder / "observations.jsonl").write_text("\n".join(observations + ['{"id": "broken"']) + "\n")
    bad_score = json.dumps(
        {
            "id": "s-bad",
            "traceId": next(iter(kept)),
            "name": "correct",
            "value": 1,
            "dataType": "BOOLEAN",
            "source": "ANNOTATION",
        }
    )  # no timestamp
    (folder / "scores.jsonl").write_text("\n".join(scores + [bad_score]) + "\n")
    rows = (DEMO_DIR / "heldout.jsonl").read_text().splitlines()[:heldout]
    (folder / "heldout.jsonl").write_text("\n".join(rows) + "\n")
    return folder


# What users paste into requests, planted in the export: none of it may leave the source.
PLANTED = {
    "stripe": "sk_live_51HxQ2mZr8LxT1vB6nW3yK0c",
    "aws_access": "AKIAIOSFODNN7EXAMPLE",
    "aws_secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "bearer": "tok_9f8e7d6c5b4a39281706",
    "email": "jane.doe@example.com",
    "phone": "+1 415 555 0100",
}


def plant_secrets(export: Path) -> None:
    """Every third request and every human comment get the planted secrets."""
    p = PLANTED
    leak = (
        f" (I am {p['email']}, {p['phone']}; key {p['stripe']}; "
        f"aws_secret_access_key={p['aws_secret']} id {p['aws_access']}; "
        f"Authorization: Bearer {p['bearer']})"
    )
    lines = (export / "observations.jsonl").read_text().splitlines()
    for n, line in enumerate(lines):
        if n % 3 == 0 and not line.startswith('{"id": "broken"'):
            row = json.loads(line)
            row["input"][-1]["content"] += leak
            lines[n] = json.dumps(row)
    (export / "observations.jsonl").write_text("\n".join(lines) + "\n")
    scores = [json.loads(line) for line in (export / "scores.jsonl").read_text().splitlines()]
    for score in scores:
        score["comment"] = (score.get("comment") or "") + leak
    (export / "scores.jsonl").write_text("\n".join(json.dumps(s) for s in scores) + "\n")


def leaked(folders: list[Path], *texts: str) -> dict[str, list[str]]:
    """Which planted secrets appear in which files under `folders` or in `texts`."""
    found: dict[str, list[str]] = {}
    for name, secret in PLANTED.items():
        needle = secret.encode()
        files = [f for d in folders if d.exists() for f in d.rglob("*") if f.is_file()]
        hits = [str(f) for f in files if needle in f.read_bytes()]
        hits += ["logs" for text in texts if secret in text]
        if hits:
            found[name] = hits
    return found


async def flow_run_parameters() -> dict:
    async with get_client() as client:
        (run, *_) = await client.read_flow_runs(limit=1)
        return run.parameters


@pytest.fixture
def runtime_for():
    """A runtime per night the test runs, whose models are let go of as the test ends: an
    in-process night's engine holds its weights for the rest of the suite otherwise."""
    built: list[Runtime] = []

    def build(settings: Settings) -> Runtime:
        built.append(Runtime(settings))
        return built[-1]

    yield build
    for rt in built:
        rt.close()


def test_nightly_registers_versions_with_metrics(tmp_path, runtime_for):
    export = small_export(tmp_path / "export")
    # a must-pass case any reply passes: the gate runs it on a changed candidate
    cases = tmp_path / "must_pass.jsonl"
    cases.write_text(json.dumps({"id": "any", "inputs": {"request": "hi"}, "regex": "[\\s\\S]*"}))
    settings = Settings(
        state_dir=tmp_path / "state",
        traces={"jsonl_dir": str(export)},
        promotion={"must_pass_path": str(cases)},
        # the 135M judge is not trusted: the agent's steps run all the same
        judge={
            "max_metric_calls": 40,
            "reflection_minibatch_size": 3,
            "untrusted_night": "optimize",
            "lora": {"enabled": False},  # the judge's: trained in the untrusted night's test
        },
        agent_opt={
            "max_metric_calls": 30,
            "pareto_size": 6,
            "reflection_minibatch_size": 3,
            "reflection_max_tokens": 48,
        },
        lora={
            "max_train_examples": 8,
            "samples_per_example": 1,
            "batch_size": 4,
            "max_seq_length": 256,
        },
    )
    rt = runtime_for(settings)
    with prefect_harness():
        report = asyncio.run(nightly(run_id="e2e", knobs=settings.knobs(), runtime=rt))
        # A second run of the same night reuses every finished stage: nothing is redone.
        again = asyncio.run(nightly(run_id="e2e", knobs=settings.knobs(), runtime=rt))
        parameters = asyncio.run(flow_run_parameters())

    # Prefect shows the night's knobs; the runtime (a loaded model) is only named.
    assert parameters["knobs"]["agent_opt"]["max_metric_calls"] == 30
    assert parameters["knobs"]["seed"] == 0 and parameters["runtime"] == "<Runtime>"
    assert report.collected["skipped_records"] >= 2  # the two malformed lines
    spent = sum(stage.metric_calls for _, stage in report.prompt_steps)
    assert spent <= 30 and report.alignment.metric_calls <= 40
    assert set(report.evals) == {"seed", "candidate"}
    # the default schedule, each step decided on the held-out slice the gate does not read
    assert [s.kind for s in report.steps] == ["p", "w"]
    assert all("held-out selection slice (10 examples, true labels)" in s.decision.on
               for s in report.steps)  # fmt: skip
    registered = report.registered
    assert registered is not None and registered.model_version == 1
    assert again.registered.model_version == 1 and again.prompts == report.prompts

    mlflow.set_tracking_uri(settings.tracking_uri)
    client = MlflowClient()
    version = client.get_model_version("agent", "1")
    assert version.tags["flywheel.judge_trusted"] == str(report.judge_trusted).lower()
    assert version.tags["flywheel.judge_version"] == "agent-judge-rubric v1"
    # The promotion gate measured it against the seed prompts on the held-out examples:
    # "candidate" only if it passed, and production too (promotion.auto).
    passed = report.promotion.passed
    assert version.tags["flywheel.gate.passed"] == str(passed).lower()
    assert version.tags["flywheel.gate.reason"] == report.promotion.reason
    assert ("candidate" in version.aliases) == passed == ("production" in version.aliases)
    # each held-out evaluation is an MLflow evaluation run beside the night's, same numbers
    assert set(registered.evaluation_runs) == {"seed", "candidate"}
    for label, run_id in registered.evaluation_runs.items():
        evaluated = client.get_run(run_id).data.metrics["flywheel_score/mean"]
        scores = report.evals[label].scores
        assert abs(evaluated - sum(scores.values()) / len(scores)) < 1e-9
    changed = any(step.decision.kept for step in report.steps)
    assert [(r.id, r.passed) for r in report.must_pass] == ([("any", True)] if changed else [])
    assert report.evidence.production_version is None and report.evidence.by_labels
    assert set(report.evidence.candidate) == set(report.evidence.production)
    assert len(report.evidence.candidate) == report.evals["seed"].n == 11  # 21 less 10
    prompt = mlflow.genai.load_prompt("prompts:/agent-instructions/1")
    assert prompt.template == report.prompts["instructions"]
    metrics = client.get_run(registered.mlflow_run_id).data.metrics
    for key in (
        "judge_seed_kappa",
        "judge_aligned_kappa",
        "heldout_seed_accuracy",
        "heldout_candidate_accuracy",
        "step1_kept",
        "step2_kept",
        "agent_metric_calls",
        "wall_seconds",
    ):
        assert key in metrics, key
    assert metrics["agent_metric_calls"] == spent
    curve = client.get_metric_history(registered.mlflow_run_id, "agent_step1_best_val_score")
    assert curve and curve[0].step <= curve[-1].step <= 30
    assert metrics["heldout_seed_accuracy"] == pytest.approx(report.evals["seed"].accuracy)

    # The judge: a registered version with what it learned from and how it did, the
    # production alias only if it passed its gate (no judge was in use before this night).
    gate = report.gate
    assert gate.registered == {"agent-judge-rubric": 1} and gate.previous is None
    judge = client.get_prompt_version("agent-judge-rubric", 1)
    aligned = report.alignment.judge
    assert judge.template == aligned.prompts["rubric"]
    assert float(judge.tags["flywheel.judge.threshold"]) == aligned.threshold
    assert float(judge.tags["flywheel.judge.heldout.kappa"]) == pytest.approx(
        aligned.heldout["kappa"], abs=1e-4
    )
    for key in ("kappa_low", "kappa_high", "accuracy", "accuracy_low", "accuracy_high"):
        assert f"flywheel.judge.heldout.{key}" in judge.tags, key
    assert judge.tags["flywheel.judge.window.labels"] == str(report.collected["annotations"])
    assert judge.tags["flywheel.judge.window.first_label"] != "none"
    assert judge.tags["flywheel.judge.gate"] == ("passed" if gate.decision.passed else "failed")
    assert ("judge-production" in judge.aliases) == gate.decision.passed
    params = client.get_run(registered.mlflow_run_id).data.params
    assert params["flywheel.judge.gate_reason"] == gate.decision.reason
    assert metrics["judge_gate_passed"] == float(gate.decision.passed)

    # What went back to the (JSONL) source: label requests and one score per trace.
    outbox = settings.state_dir / "outbox"
    asked = (outbox / "label_requests.jsonl").read_text().splitlines()
    scored = (outbox / "scores.jsonl").read_text().splitlines()
    # 26 traces are unlabelled; an untrusted judge asks for judge.untrusted_label_requests
    assert report.feedback.labels_requested == len(asked) == (5 if report.judge_trusted else 20)
    assert report.feedback.scores_written == len(scored) == report.collected["traces"]
    human = [json.loads(line) for line in (export / "scores.jsonl").read_text().splitlines()]
    labelled = {score["traceId"] for score in human if "timestamp" in score}  # not the bad one
    assert not {json.loads(a)["objectId"] for a in asked} & labelled
    assert json.loads(scored[0])["metadata"]["judge_version"] == "agent-judge-rubric v1"
    assert again.feedback.scores_written == len(scored)  # the rerun sent nothing twice
    final = client.get_run(registered.mlflow_run_id).data.metrics
    assert final["labels_requested"] == len(asked) and final["scores_written"] == len(scored)
    # the night's page: one file with its five pictures inline, in its folder and its run
    page = (rt.run_dir("e2e") / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 5, page[:2000]
    logged = {a.path for a in client.list_artifacts(registered.mlflow_run_id)}
    assert {"report.html", "gate.png", "judge.png", "gepa.png", "trend.png", "time.png"} <= logged


def test_a_night_starts_from_production_and_builds_on_its_adapter(
    tmp_path, runtime_for, caplog, capfd
):
    """Production holds prompts and a LoRA adapter: the night measures against it, trains
    on from its adapter, and the candidate must beat it. Its traces carry secrets, which
    reach no store, result or log."""
    export = small_export(tmp_path / "export")
    plant_secrets(export)
    settings = Settings(
        state_dir=tmp_path / "state",
        traces={"jsonl_dir": str(export)},
        judge={
            "max_metric_calls": 20,
            "reflection_minibatch_size": 3,
            "untrusted_night": "optimize",
            "lora": {"enabled": False},  # the judge's: trained in the untrusted night's test
        },
        agent_opt={"max_metric_calls": 12, "pareto_size": 4, "reflection_minibatch_size": 3},
        lora={"max_train_examples": 4, "samples_per_example": 1, "batch_size": 4},
    )
    registry = Registry(settings.mlflow)
    adapter = random_lora_adapter(str(resolve_model_path("")), tmp_path / "earlier-adapter")
    with registry.start_run("nightly-earlier"):  # what an earlier night promoted
        log_evidence(registry, Evidence({"e": 1.0}, {"e": 0.0}, by_labels=True))
        versions = {}
        for component, text in SEED_PROMPTS.items():
            name = registry.prompt_name(component)
            versions[name] = registry.register_prompt(name, text + "\nBe brief.")
        uris = [f"prompts:/{name}/{v}" for name, v in versions.items()]
        tags = {PROMPTS_TAG: json.dumps(versions), "flywheel.with_adapter": "true"}
        registry.register_model_version("agent", adapter, uris, {}, tags, alias=None)
    for name, version in versions.items():  # production, as an earlier promotion left it
        registry.set_prompt_alias(name, PRODUCTION, version)
    registry.set_model_alias("agent", PRODUCTION, 1)

    rt = runtime_for(settings)
    with prefect_harness():
        report = asyncio.run(nightly(run_id="n2", knobs=settings.knobs(), runtime=rt))
        results = Path(get_current_settings().results.local_storage_path)

    out, err = capfd.readouterr()
    assert leaked([settings.state_dir, results], caplog.text, out, err) == {}
    assert report.collected["traces"] > 0  # the planted traces were read, masked

    assert report.evidence.production_version == 1
    assert "production-v1" in asyncio.run(rt.lm.adapters())  # served for the baseline
    ((_, lora),) = report.weight_steps
    if lora.trained_path:  # trained on from production's adapter: its rank and targets
        config = json.loads((Path(lora.trained_path) / "adapter_config.json").read_text())
        assert config["r"] == 4 and set(config["target_modules"]) == {"q_proj", "v_proj"}
    assert "over v1" in report.promotion.reason
    # the candidate carries an adapter either way: tonight's if kept, else production's
    assert report.adapter_path is not None and report.registered.with_adapter


def test_a_night_whose_judge_is_not_trusted_asks_for_labels_instead_of_optimizing(
    tmp_path, runtime_for
):
    """No judge can reach the floor (1.01): GEPA and the LoRA round would optimize noise, so
    neither runs; the night aligns and registers the judge, asks for more labels, and its
    report says why."""
    export = small_export(tmp_path / "export")
    settings = Settings(
        state_dir=tmp_path / "state",
        traces={"jsonl_dir": str(export)},
        judge={
            "max_metric_calls": 12,
            "reflection_minibatch_size": 3,
            "min_agreement": 1.01,
            "lora": {"enabled": True, "max_steps": 4, "checkpoints": 2, "batch_size": 4},
        },
    )
    rt = runtime_for(settings)
    with prefect_harness():
        report = asyncio.run(nightly(run_id="untrusted", knobs=settings.knobs(), runtime=rt))

    assert not report.judge_trusted and not report.agent_optimized
    assert report.steps == [] and report.prompts == SEED_PROMPTS  # production, untouched
    assert report.alignment.metric_calls > 0 and report.gate.registered
    assert not any(stage.startswith(("step", "select")) for stage in report.calls)
    assert report.feedback.labels_requested == 20  # judge.untrusted_label_requests
    assert not report.promotion.passed
    assert "so the agent was not optimized tonight" in render_markdown(report)

    # the judge's LoRA step ran on the real model: two checkpoints read on validation
    # labels, the adapter kept only if one agreed better than the rubric alone
    step = report.judge_lora
    assert step.records > 0 and len(step.checkpoints) == 2 and step.seconds > 0
    assert "Judge LoRA step: " in render_markdown(report)
    version = MlflowClient(settings.tracking_uri).get_prompt_version("agent-judge-rubric", 1)
    assert step.memory == Settings().judge.lora.memory > 0  # notes in the judge's prompt
    # then the reward head on the judge model's features, against the judge so far
    head = report.judge_head
    assert head.val is not None or "too few labels" in head.note  # the engine read features
    assert "Judge head step: " in render_markdown(report)
    assert head.so_far_val == (step.kept_val if step.kept else report.alignment.judge_val_score)
    if head.kept:  # rubric plus head, registered together; the adapter is left behind
        assert report.alignment.judge.head == head.kept and report.alignment.judge.adapter is None
        assert version.tags["flywheel.judge.head"].startswith("runs:/")
        assert "flywheel.judge.adapter" not in version.tags
    elif step.kept:  # rubric, adapter and the notes it reads, registered together
        assert report.alignment.judge.adapter == step.kept
        assert (Path(step.kept) / MEMORY_FILE).is_file()
        assert version.tags["flywheel.judge.adapter"].startswith("runs:/")
    else:
        assert "flywheel.judge.adapter" not in version.tags
        assert "flywheel.judge.head" not in version.tags


def test_a_judge_model_of_its_own_trains_and_serves_the_judges_adapter(tmp_path, runtime_for):
    """`judge_lm` set: the judge's LoRA step trains from the judge's checkpoint and its
    adapter is served by the judge's engine, never the agent's (here a copy of the embedded
    model, loaded as a second engine)."""
    checkpoint = tmp_path / "judge-model"
    checkpoint.mkdir()
    for file in resolve_model_path().iterdir():
        (checkpoint / file.name).symlink_to(file)
    export = small_export(tmp_path / "export")
    settings = Settings(
        state_dir=tmp_path / "state",
        traces={"jsonl_dir": str(export)},
        judge_lm={"model_path": str(checkpoint)},
        judge={
            "max_metric_calls": 12,
            "reflection_minibatch_size": 3,
            "min_agreement": 1.01,  # no judge is trusted: the agent's steps do not run
            "lora": {"enabled": True, "max_steps": 2, "checkpoints": 1, "batch_size": 4},
        },
    )
    rt = runtime_for(settings)
    with prefect_harness():
        report = asyncio.run(nightly(run_id="own-judge", knobs=settings.knobs(), runtime=rt))

    assert rt.judge_lm is not rt.lm and rt.judge_lm.base_model_path == str(checkpoint)
    step = report.judge_lora
    assert step.records > 0 and len(step.checkpoints) == 1
    trained = list(settings.state_dir.rglob("adapter_config.json"))
    assert trained  # every adapter of this night is the judge's: from its own checkpoint
    assert all(json.loads(c.read_text())["base_model_name_or_path"] == str(checkpoint)
               for c in trained)  # fmt: skip
    judge_served = asyncio.run(rt.judge_lm.adapters())
    assert any(name.startswith("judge-") for name in judge_served)
    assert not any(name.startswith("judge-") for name in asyncio.run(rt.lm.adapters()))
