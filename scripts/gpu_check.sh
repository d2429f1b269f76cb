#!/usr/bin/env bash
# The weight step where the model is: a few LoRA SFT steps of the embedded agent on the
# CPU and, when torch sees one, on a CUDA GPU (seconds per step side by side), then the
# adapter served by flywheel's own server and asked one question by its name
# (benchmarks/weight_step_device.py). Run from anywhere; it works in the repo root.
#
#   scripts/gpu_check.sh [--steps 4] [--batch 8]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=.venv/bin/python
# offline and quiet, as a night runs (flows/plumbing/environment.py): the model is on disk
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
export HF_DATASETS_DISABLE_PROGRESS_BARS=1 HF_HUB_DISABLE_PROGRESS_BARS=1
export PYTHONWARNINGS=ignore::FutureWarning
if [[ ! -x $PYTHON ]]; then
    echo "no $PYTHON: run 'make install' first" >&2
    exit 1
fi
$PYTHON - <<'PY'
import torch

cuda = torch.cuda.is_available()
where = torch.cuda.get_device_name(0) if cuda else "none (a CPU build of torch, or no GPU visible)"
print(f"torch {torch.__version__}, CUDA build {torch.version.cuda}, GPU: {where}")
PY
# `make install` pins the CPU build of torch: on a GPU box the venv needs PyPI's CUDA
# build of the same release before this check can use the GPU.
if command -v nvidia-smi >/dev/null && ! $PYTHON -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
    echo "a GPU is here but this torch cannot use it: .venv/bin/pip install --force-reinstall --no-deps torch==2.13.0 (PyPI's CUDA build), then run this again" >&2
fi
exec $PYTHON -m benchmarks.weight_step_device "$@"
