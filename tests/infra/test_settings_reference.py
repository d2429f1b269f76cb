import os
import tomllib
from pathlib import Path

import pytest

from infra.settings import JudgeLoraSettings, LoraSettings, LoraTraining, Settings
from infra.settings_reference import COMMAND, models, render

ROOT = Path(__file__).resolve().parents[2]


def test_every_knob_says_what_it_does():
    undocumented = {
        f"{declared_in(model, name).__name__}.{name}"
        for model in models()
        for name, field in model.model_fields.items()
        if not (field.description or "").strip()
    }
    assert not undocumented, (
        f"settings fields without a docstring: {', '.join(sorted(undocumented))}; write one on the "
        f"line after each field, then run `{COMMAND}`"
    )


def declared_in(model: type, name: str) -> type:
    """The class whose body declares the field (a base's, unless a subclass redeclares it)."""
    return next(c for c in model.__mro__ if name in c.__dict__.get("__annotations__", {}))


def test_the_committed_reference_is_the_rendered_one():
    committed = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == render(), f"docs/configuration.md is out of date: run `{COMMAND}`"


def test_the_reference_names_every_section_and_key():
    text = render()
    for heading in ("[lm]", "[reflection]", "[judge]", "[judge.lora]", "[judge.head]", "[lora]"):
        assert f"# {heading}\n" in text
    assert "| `api_key` | secret string or none | *environment only* |" in text
    assert "| `rank` | integer > 0 | `8` |" in text


def test_the_judges_lora_knobs_are_the_trainers():
    judge = JudgeLoraSettings(
        enabled=True, rank=4, alpha=8, learning_rate=1e-3, epochs=2, batch_size=4,
        max_seq_length=256, max_steps=10, checkpoints=1, device="cpu", quantize="4bit",
    )  # fmt: skip
    trainer = judge.training()
    shared = set(LoraTraining.model_fields) - {"enabled"}
    assert {k: getattr(trainer, k) for k in shared} == {k: getattr(judge, k) for k in shared}
    assert trainer.method == LoraSettings().method and trainer.enabled  # the rest: defaults
    assert (JudgeLoraSettings().epochs, LoraSettings().epochs) == (3, 1)  # their own defaults


@pytest.mark.parametrize(
    "toml", ["infra/deploy/flywheel.toml", "examples/request_reply/flywheel.toml"]
)
def test_shipped_config_files_still_load(toml, monkeypatch):
    for name in list(os.environ):
        if name.startswith("FLYWHEEL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("FLYWHEEL_CONFIG", str(ROOT / toml))
    written = tomllib.loads((ROOT / toml).read_text(encoding="utf-8"))
    settings = Settings()
    for section, loaded in (("lora", settings.lora), ("judge", settings.judge)):
        for key, value in written.get(section, {}).items():
            if key != "lora":
                assert getattr(loaded, key) == value, f"[{section}] {key}"
    for key, value in written.get("judge", {}).get("lora", {}).items():
        assert getattr(settings.judge.lora, key) == value, f"[judge.lora] {key}"
    monkeypatch.setenv("FLYWHEEL_JUDGE__LORA__EPOCHS", "7")
    monkeypatch.setenv("FLYWHEEL_LORA__MAX_STEPS", "5")
    settings = Settings()
    assert (settings.judge.lora.epochs, settings.lora.max_steps) == (7, 5)
