"""MLflow's own judge alignment (`make_judge` + `judge.align` with its GEPA optimizer) on the
same MT-Bench split, for `judge_alignment.py` to print beside flywheel's.

MLflow learns from traces: each training pair becomes a trace whose root span holds the
question (inputs) and both answers (outputs), with the expert's preference logged on it as
a HUMAN feedback assessment named after the judge. `GEPAAlignmentOptimizer` turns those
into DSPy examples and runs `dspy.GEPA` on the judge's instructions; it takes one list of
traces and uses it as both GEPA's feedback set and its Pareto set, so it gets train + val.

The model is the one flywheel uses, served by `flywheel serve-model` on a localhost port:
MLflow's judge reaches it as `openai:/<model>` through OPENAI_BASE_URL (its own HTTP
client), DSPy's reflection LM through the same variable. MLflow's judge asks the model for
a JSON object `{"result": ..., "rationale": ...}` (a `response_format` schema the local
server does not enforce) and raises when the reply does not parse; such a call is counted
as unparseable here, never mapped to a label.

Everything MLflow-specific is imported lazily: the pure helpers at the top need neither
MLflow nor DSPy, and DSPy (the `bench` extra) is only needed to align.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from judges.types import PairwiseItem, Preference

JUDGE_NAME = "preference"
HUMAN_SOURCE = "mtbench-expert"
ASK = "Which answer is better? Answer A or B."


# ---------------------------------------------------------------------------------------
# Pure helpers: items as MLflow judge fields, MLflow feedback values as preferences
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairFields:
    """What MLflow's judge reads for one item in one order, and the matching human label."""

    inputs: str  # the trace's root-span inputs: the question
    outputs: str  # its outputs: both answers, labelled as shown
    label: Preference | None  # the human preference in this order's labels


def pair_fields(item: PairwiseItem, swapped: bool = False) -> PairFields:
    """The item as MLflow judge fields; with `swapped`, answer B is shown first as "A" and
    the label follows the answer, not the position."""
    first, second = (item.answer_b, item.answer_a) if swapped else (item.answer_a, item.answer_b)
    label = item.human_prefers
    if swapped and label is not None:
        label = "B" if label == "A" else "A"
    return PairFields(
        inputs=item.question,
        outputs=f"Answer A:\n{first}\n\nAnswer B:\n{second}",
        label=label,
    )


def judge_instructions(rubric: str) -> str:
    """MLflow judge instructions carrying the same rubric and question as flywheel's judge:
    `{{ inputs }}` and `{{ outputs }}` are filled from the trace (or the call)."""
    return (
        f"{rubric}\n\nQuestion:\n{{{{ inputs }}}}\n\nThe two answers:\n{{{{ outputs }}}}\n\n{ASK}"
    )


def read_preference(value: Any) -> Preference | None:
    """An MLflow feedback value as "A"/"B"; anything else (None, "tie", a sentence) is None."""
    if not isinstance(value, str):
        return None
    text = value.strip().strip(".\"'*` ").upper()
    return text if text in ("A", "B") else None  # type: ignore[return-value]


def unswap(label: Preference | None) -> Preference | None:
    """A verdict given with the answers swapped, in the item's own labels."""
    return None if label is None else ("B" if label == "A" else "A")


def first_line(error: BaseException, limit: int = 240) -> str:
    """The error's type and the first non-empty line of its message, cut to `limit`."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = f"{type(error).__name__}: {lines[0] if lines else '(no message)'}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------
# The local model behind an OpenAI-compatible localhost endpoint
# ---------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def served_model(
    port: int, log_path: Path, model_path: str = "", ready_timeout_s: float = 300.0
) -> Iterator[str]:
    """`flywheel serve-model` of `model_path` (empty: the embedded model) in a subprocess on
    127.0.0.1:`port`; yields its /v1 base URL once /v1/models answers, and stops the server
    on the way out."""
    cmd = [sys.executable, "-m", "flows.cli", "serve-model", "--host", "127.0.0.1"]
    base_url = f"http://127.0.0.1:{port}/v1"
    env = os.environ | {"FLYWHEEL_LM__MODEL_PATH": model_path}  # the judge's model, served
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [*cmd, "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env
        )
        try:
            deadline = time.monotonic() + ready_timeout_s
            while True:
                if proc.poll() is not None:
                    tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
                    raise RuntimeError(f"the server exited with {proc.returncode}: {tail}")
                try:
                    with urllib.request.urlopen(f"{base_url}/models", timeout=2):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        waited = f"{ready_timeout_s:.0f} s"
                        raise TimeoutError(f"no answer on {base_url} in {waited}") from None
                    time.sleep(1.0)
            yield base_url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def local_environment(base_url: str, state_dir: Path) -> dict[str, str]:
    """Variables MLflow, DSPy and LiteLLM read (some at import): the local endpoint, a
    throwaway key (the server checks none), local-only caches and no network look-ups."""
    return {
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_BASE": base_url,  # MLflow's gateway reads this one first
        "OPENAI_API_KEY": "flywheel-local",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # else LiteLLM fetches a price list
        "DSPY_CACHEDIR": str(state_dir / "dspy-cache"),
        "MLFLOW_TRACKING_URI": f"sqlite:///{state_dir / 'mlflow.db'}",
        "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING": "false",  # feedback needs the trace stored
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "1",
    }


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ---------------------------------------------------------------------------------------
# MLflow's path
# ---------------------------------------------------------------------------------------


@contextmanager
def quiet_dspy() -> Iterator[None]:
    """DSPy logs every failed judge call with the whole example (this path counts them
    instead), and its progress bars go to stdout, where the benchmark prints its table.
    Enter after importing dspy: its import sets its logger's level."""
    logger = logging.getLogger("dspy")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        logger.setLevel(level)


class StepFailed(Exception):
    """A step of MLflow's path failed; `step` names it, the cause is chained."""

    def __init__(self, step: str, cause: BaseException):
        super().__init__(f"{step}: {first_line(cause)}")
        self.step = step
        self.cause = cause


@contextmanager
def step(name: str) -> Iterator[None]:
    try:
        yield
    except StepFailed:
        raise
    except Exception as error:
        raise StepFailed(name, error) from error


@dataclass
class OrderVerdicts:
    """A judge's held-out verdicts in both orders, in the items' own labels (None where the
    call failed or its value named no answer), and why the first failures happened."""

    first: list[Preference | None]
    second: list[Preference | None]
    errors: list[str] = field(default_factory=list)  # first_line of each failed call

    @property
    def failed_calls(self) -> int:
        return sum(v is None for v in (*self.first, *self.second))


@dataclass
class JudgeCalls:
    """MLflow judge model calls made during `judge.align` (the metric calls of its search)."""

    calls: int = 0
    failures: int = 0
    first_failure: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, error: BaseException | None) -> None:
        with self._lock:
            self.calls += 1
            if error is not None:
                self.failures += 1
                self.first_failure = self.first_failure or first_line(error)


@dataclass
class AlignmentRun:
    seed: int
    wall_s: float
    judge_calls: JudgeCalls
    instructions: str
    changed: bool  # GEPA's result differs from the seed instructions
    heldout: OrderVerdicts


@dataclass
class MlflowResult:
    model_uri: str
    n_traces: int = 0
    seed_heldout: OrderVerdicts | None = None
    runs: list[AlignmentRun] = field(default_factory=list)
    failure: StepFailed | None = None
    timings: dict[str, float] = field(default_factory=dict)


@contextmanager
def counting_judge_calls(counter: JudgeCalls) -> Iterator[None]:
    """Counts every judge model call MLflow makes, by wrapping the one function its
    instructions judge calls the model through (restored afterwards)."""
    from mlflow.genai.judges import instructions_judge

    original = instructions_judge.invoke_judge_model

    def counted(*args: Any, **kwargs: Any) -> Any:
        try:
            result = original(*args, **kwargs)
        except Exception as error:
            counter.record(error)
            raise
        counter.record(None)
        return result

    instructions_judge.invoke_judge_model = counted
    try:
        yield
    finally:
        instructions_judge.invoke_judge_model = original


def log_training_traces(items: list[PairwiseItem], experiment: str) -> list[Any]:
    """One trace per item (question in, both answers out) with the expert's preference as a
    HUMAN feedback assessment; returns the stored traces, assessments included."""
    import mlflow
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    mlflow.set_experiment(experiment)
    source = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id=HUMAN_SOURCE)
    trace_ids = []
    for item in items:
        fields = pair_fields(item)
        with mlflow.start_span(name="mtbench_pair") as span:
            span.set_inputs(fields.inputs)
            span.set_outputs(fields.outputs)
        mlflow.log_feedback(
            trace_id=span.trace_id,
            name=JUDGE_NAME,
            value=fields.label,
            rationale=item.human_comment or None,
            source=source,
        )
        trace_ids.append(span.trace_id)
    return [mlflow.get_trace(trace_id) for trace_id in trace_ids]


def judge_both_orders(
    judge: Callable[..., Any], items: list[PairwiseItem], workers: int
) -> OrderVerdicts:
    """Each item asked in both orders, `workers` calls in flight."""

    def ask(job: tuple[PairwiseItem, bool]) -> tuple[Preference | None, str | None]:
        item, swapped = job
        fields = pair_fields(item, swapped)
        try:
            feedback = judge(inputs=fields.inputs, outputs=fields.outputs)
        except Exception as error:
            return None, first_line(error)
        verdict = read_preference(feedback.value)
        if verdict is None:
            return None, f"value {feedback.value!r} names no answer"
        return (unswap(verdict) if swapped else verdict), None

    jobs = [(item, swapped) for swapped in (False, True) for item in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        answers = list(pool.map(ask, jobs))
    n = len(items)
    return OrderVerdicts(
        first=[verdict for verdict, _ in answers[:n]],
        second=[verdict for verdict, _ in answers[n:]],
        errors=[error for _, error in answers if error is not None],
    )


@dataclass(frozen=True)
class MlflowSettings:
    """The knobs of MLflow's path; the benchmark sets them to match flywheel's run."""

    model_name: str  # as the local server names it
    seeds: list[int]
    budget: int  # GEPAAlignmentOptimizer(max_metric_calls=...)
    minibatch: int  # dspy.GEPA reflection_minibatch_size
    workers: int  # dspy.GEPA num_threads, and held-out calls in flight
    judge_max_tokens: int  # the judge's reply budget on held-out calls
    model_path: str = ""  # the checkpoint the server loads (empty: the embedded model)


def run_mlflow(
    train: list[PairwiseItem],
    heldout: list[PairwiseItem],
    rubric: str,
    settings: MlflowSettings,
    log: Callable[[str], None],
) -> MlflowResult:
    """Start the server, log `train` as traces, align MLflow's judge once per seed and judge
    `heldout` in both orders with the seed judge and each aligned one. A failing step ends
    the path and is returned in `failure`, with whatever was measured before it."""
    result = MlflowResult(model_uri=f"openai:/{settings.model_name}")
    state = Path(tempfile.mkdtemp(prefix="flywheel-mlflow-align-"))
    clock = time.monotonic()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.monotonic()
        result.timings[name] = now - clock
        clock = now

    with ExitStack() as stack:
        try:
            with step("start `flywheel serve-model`"):
                log_path = state / "server.log"
                served = served_model(free_port(), log_path, settings.model_path)
                base_url = stack.enter_context(served)
            log(f"... MLflow: local model served on {base_url} (log {log_path})")
            lap("server start")
            stack.enter_context(environment(local_environment(base_url, state)))
            _align_and_judge(result, train, heldout, rubric, settings, log, lap)
        except StepFailed as failure:
            result.failure = failure
    return result


def _align_and_judge(
    result: MlflowResult,
    train: list[PairwiseItem],
    heldout: list[PairwiseItem],
    rubric: str,
    settings: MlflowSettings,
    log: Callable[[str], None],
    lap: Callable[[str], None],
) -> None:
    with step("import mlflow.genai.judges"):
        from mlflow.genai.judges import make_judge
    with step("import MLflow's GEPA alignment optimizer (needs dspy: the `bench` extra)"):
        from mlflow.genai.judges.optimizers import GEPAAlignmentOptimizer

    def judge_with(instructions: str) -> Any:
        # Greedy and short, like flywheel's judge: a verdict, not an essay. (judge.align
        # rebuilds the judge without these, so during its search the server's defaults
        # apply: temperature 1.0, up to 256 tokens.)
        return make_judge(
            name=JUDGE_NAME,
            instructions=instructions,
            model=result.model_uri,
            feedback_value_type=Literal["A", "B"],
            inference_params={"temperature": 0.0, "max_tokens": settings.judge_max_tokens},
        )

    with step("log training traces with human feedback"):
        traces = log_training_traces(train, "judge-alignment-mtbench")
        result.n_traces = len(traces)
    lap("log traces")
    with step("make_judge"):
        seed_judge = judge_with(judge_instructions(rubric))
    log(f"... MLflow: seed judge on {len(heldout)} held-out items, both orders")
    with step("held-out verdicts of the seed judge"):
        result.seed_heldout = judge_both_orders(seed_judge, heldout, settings.workers)
    lap("held-out, seed judge")
    for seed in settings.seeds:
        log(f"... MLflow: judge.align(GEPAAlignmentOptimizer), seed {seed}")
        optimizer = GEPAAlignmentOptimizer(
            model=result.model_uri,
            max_metric_calls=settings.budget,
            # parity with flywheel's run: same minibatch, seed and calls in flight, no merge
            gepa_kwargs={
                "num_threads": settings.workers,
                "seed": seed,
                "reflection_minibatch_size": settings.minibatch,
                "use_merge": False,
            },
        )
        calls = JudgeCalls()
        start = time.monotonic()
        with step(f"judge.align (seed {seed})"), counting_judge_calls(calls), quiet_dspy():
            aligned = seed_judge.align(traces, optimizer)
        wall = time.monotonic() - start
        lap(f"align, seed {seed}")
        changed = aligned.instructions != seed_judge.instructions
        if changed:
            with step(f"held-out verdicts of the aligned judge (seed {seed})"):
                aligned_judge = judge_with(aligned.instructions)
                verdicts = judge_both_orders(aligned_judge, heldout, settings.workers)
            lap(f"held-out, aligned judge, seed {seed}")
        else:  # the same judge: greedy decoding gives the same verdicts
            verdicts = result.seed_heldout
        result.runs.append(AlignmentRun(seed, wall, calls, aligned.instructions, changed, verdicts))
