"""Seconds per LoRA step of the weight step on the CPU beside a CUDA GPU, then the adapter
served: the check that training runs where the model is (`lora.device`) and that what it
trained there is served by flywheel's own server.

The same few SFT steps (`weights.lora.train_sft_adapter`, the night's LoRA settings with
`--batch` records per step) of the embedded agent model on synthetic intent records, once
with `lora.device = "cpu"` and once with "cuda" when torch sees a GPU. A step's time is
read between the first and the last step's progress report, so loading the model and
the GPU's start-up are left out (total seconds are printed beside it). Then the
GPU-trained adapter (else the CPU's) is hot-loaded into `infra.lm.engine.server` over the local
engine, reached in-process through the OpenAI-compatible client as a night reaches vLLM,
and asked one question by its name.

    python -m benchmarks.weight_step_device [--steps 4] [--batch 8]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import httpx
import torch

from infra.lm.engine.local import LocalLM
from infra.lm.engine.server import create_app
from infra.lm.model_files import resolve_model_path
from infra.lm.openai_lm import OpenAILM
from infra.settings import LMSettings, LoraSettings
from weights.lora import AdapterResult, train_sft_adapter

INTENTS = ["billing", "refund", "login", "shipping"]
SYSTEM = "Answer with the intent only."
ADAPTER = "weight-step-device"


def records(count: int) -> list[dict]:
    """Synthetic prompt-completion records: a message about an intent, the intent."""
    return [
        {
            "prompt": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"Message {i} about {INTENTS[i % len(INTENTS)]}."},
            ],
            "completion": [{"role": "assistant", "content": INTENTS[i % len(INTENTS)]}],
        }
        for i in range(count)
    ]


def train(device: str, steps: int, batch: int, folder: Path) -> tuple[AdapterResult, float]:
    """`steps` SFT steps on `device`; the result and the seconds per step after the first
    (the first carries the trainer's and the device's start-up)."""
    # the night's settings but for the rate: 4x its default, so that a few steps show in
    # the served answer (a step's time does not depend on it)
    cfg = LoraSettings(
        device=device, batch_size=batch, max_steps=steps, checkpoints=1, learning_rate=2e-3
    )
    stamps: list[float] = []
    result = train_sft_adapter(
        records(batch),
        resolve_model_path(),
        folder / device,
        cfg,
        progress_callback=lambda *_: stamps.append(time.perf_counter()),
    )
    if len(stamps) < 2:  # one step: nothing to leave out
        return result, result.seconds / max(result.steps, 1)
    return result, (stamps[-1] - stamps[0]) / (len(stamps) - 1)


def table(runs: list[tuple[AdapterResult, float]]) -> None:
    print(f"{'device':<44} {'s/step':>8} {'total s':>8} {'loss':>7}")
    for result, per_step in runs:
        figures = f"{per_step:>8.3f} {result.seconds:>8.1f} {result.train_loss:>7.3f}"
        print(f"{result.device:<44} {figures}")
    if len(runs) == 2:
        (_, cpu), (_, gpu) = runs
        print(f"per step, the GPU is {cpu / gpu:.1f}x the CPU's speed ({cpu:.3f} s vs {gpu:.3f} s)")


async def ask_served(adapter: AdapterResult) -> None:
    """Hot-load `adapter` into flywheel's server over the local engine and ask it once by
    name, beside the base model."""
    local = LocalLM(LMSettings(batch_wait_ms=2))
    try:
        app = create_app(local, "smollm2")
        settings = LMSettings(backend="openai", base_url="http://flywheel.test/v1", model="smollm2")
        lm = OpenAILM(settings, transport=httpx.ASGITransport(app=app))
        await lm.load_adapter(ADAPTER, adapter.path)
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Message 99 about refund."},
        ]
        served = await lm.complete(messages, max_tokens=8, adapter=ADAPTER)
        base = await lm.complete(messages, max_tokens=8)
        print(f"served adapters: {await lm.adapters()}")
        print(f"{ADAPTER} (trained on {adapter.device}) answered: {served.text.strip()!r}")
        print(f"the base model answered: {base.text.strip()!r}")
    finally:
        local.close()


def main(steps: int, batch: int) -> None:
    threads = torch.get_num_threads()
    print(f"model {resolve_model_path()}  torch {torch.__version__}  CPU threads {threads}")
    print(f"{steps} SFT steps of {batch} records each, per device")
    with tempfile.TemporaryDirectory(prefix="flywheel-weight-step-") as scratch:
        runs = [train("cpu", steps, batch, Path(scratch))]
        if torch.cuda.is_available():
            runs.append(train("cuda", steps, batch, Path(scratch)))
        else:
            print("no CUDA device: CPU only")
        table(runs)
        asyncio.run(ask_served(runs[-1][0]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps per device")
    parser.add_argument("--batch", type=int, default=8, help="records per step")
    args = parser.parse_args()
    main(args.steps, args.batch)
