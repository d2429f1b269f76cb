"""Where a model's checkpoint is: a folder the user names, or an embedded model
(`infra.lm.catalogue`), converted on first use.

transformers can read GGUF, but dequantizing takes ~15 s for the agent (minutes for the
teacher) and a GGUF-loaded model carries a quantizer that blocks training and saving. So
the first use converts it once into a plain checkpoint under the user's cache folder;
every later load reads that (~0.1 s).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from filelock import FileLock

from infra.lm.catalogue import AGENT, EMBEDDED_MODELS, EmbeddedModel
from infra.lm.gguf_parts import ModelNotFoundError, assembled_gguf, verified_parts

log = logging.getLogger(__name__)


def cache_root() -> Path:
    if os.environ.get("FLYWHEEL_CACHE_DIR"):
        return Path(os.environ["FLYWHEEL_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "flywheel"


def resolve_model_path(model_path: str = "") -> Path:
    """A folder holding a transformers checkpoint. Empty: the embedded agent; an embedded
    model's name: that model; anything else: a checkpoint folder (write `./name` for a
    folder that shares an embedded model's name)."""
    if not model_path:
        return embedded_checkpoint(AGENT)
    if model_path in EMBEDDED_MODELS:
        return embedded_checkpoint(EMBEDDED_MODELS[model_path])
    path = Path(model_path).expanduser()
    if not _is_checkpoint(path):
        names = ", ".join(EMBEDDED_MODELS)
        raise ModelNotFoundError(
            f"model_path={model_path} (of lm, judge_lm or reflection; "
            "FLYWHEEL_LM__MODEL_PATH and the like) holds no config.json: point it at a "
            f"transformers checkpoint folder, name an embedded model ({names}), or leave it "
            "empty for the embedded agent."
        )
    return path


def embedded_checkpoint(model: EmbeddedModel) -> Path:
    """The model's bf16 checkpoint under the cache folder, converted on first use. A file
    lock keeps two processes (or an agent and a judge starting together) from converting
    the same model at once; the one that waited finds the checkpoint made."""
    target = cache_root() / "models" / model.name
    if _is_checkpoint(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(target.parent / f"{model.name}.lock"):
        if not _is_checkpoint(target):
            parts = verified_parts(model)
            # WARNING, not INFO: a first run that goes quiet for minutes must say why on a
            # terminal, where the night's INFO lines are not shown.
            log.warning(_announcement(model, target.parent))
            with assembled_gguf(model, parts, target.parent) as gguf:
                convert_gguf(gguf, target)
    return target


def _is_checkpoint(folder: Path) -> bool:
    # A converted checkpoint only appears by renaming a finished folder into place.
    return (folder / "config.json").exists()


def _announcement(model: EmbeddedModel, folder: Path) -> str:
    packages = model.parts[0].package if len(model.parts) == 1 else f"{len(model.parts)} packages"
    minutes = round(model.conversion_seconds / 60)
    when = f"about {minutes} minutes" if minutes > 1 else f"about {model.conversion_seconds} s"
    return (
        f"Converting the embedded {model.role} {model.name} ({_size(model.size)} GGUF from "
        f"{packages}) into a {_size(model.checkpoint_bytes)} bf16 checkpoint under {folder}; "
        f"once, {when}"
    )


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 1e9:.1f} GB" if n_bytes >= 1e9 else f"{n_bytes / 1e6:.0f} MB"


def convert_gguf(gguf: Path, target: Path) -> None:
    """Dequantize a GGUF file into a plain bf16 checkpoint, written into `<target>.partial`
    and renamed into place: a crash midway leaves no folder that looks finished.

    Memory peaks while loading: the bf16 weights, the one tensor being dequantized (in
    float32) and the pages of the memory-mapped GGUF. For the teacher that is 4.5 GB of
    process memory plus 1.2 GB of file pages the kernel can drop (5.6 GB RSS)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)  # what a killed conversion left
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16
    )
    # A GGUF-loaded model keeps its quantizer; drop it so the model saves and trains.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False
    tmp.mkdir(parents=True)
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # a half-written 3.6 GB is worth nothing
        raise
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)
