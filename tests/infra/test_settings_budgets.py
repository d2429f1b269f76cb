"""A budget, a count or a timeout of zero or less is refused as the settings load, with
the key named, not midway through a night (where GEPA, a sampler or a client would
fail on it, or loop)."""

import pytest
from pydantic import ValidationError

from infra.settings import Settings

AT_LEAST_ONE = [
    ("agent_opt", "max_metric_calls"),
    ("agent_opt", "reflection_minibatch_size"),
    ("agent_opt", "max_concurrency"),
    ("agent_opt", "reflection_max_tokens"),
    ("agent_opt", "pareto_size"),
    ("agent_opt", "max_tokens"),
    ("judge", "rationale_max_tokens"),
    ("judge", "label_window_days"),
    ("lm", "max_batch_size"),
    ("lm", "max_concurrency"),
    ("lm", "timeout_s"),
    ("traces", "max_traces"),
    ("traces", "lookback_hours"),
    ("lora", "samples_per_example"),
    ("lora", "sample_temperature"),
    ("lora", "max_train_examples"),
    ("promotion", "resamples"),
]
AT_LEAST_ZERO = [
    ("agent_opt", "max_merge_invocations"),
    ("judge", "max_metric_calls"),  # 0: the rubric measured as written, no search
    ("lm", "max_retries"),
    ("lm", "batch_wait_ms"),
    ("promotion", "approval_timeout_s"),
    ("promotion", "min_slice_size"),
]


@pytest.mark.parametrize(("section", "key"), AT_LEAST_ONE)
def test_a_budget_of_zero_or_less_is_refused(section: str, key: str) -> None:
    for value in (0, -5):
        with pytest.raises(ValidationError, match=rf"{section}\.{key}\n.*greater than 0"):
            Settings(**{section: {key: value}})


@pytest.mark.parametrize(("section", "key"), AT_LEAST_ZERO)
def test_a_negative_count_is_refused_and_zero_means_none(section: str, key: str) -> None:
    with pytest.raises(ValidationError, match=rf"{section}\.{key}\n.*greater than or equal to 0"):
        Settings(**{section: {key: -1}})
    assert getattr(getattr(Settings(**{section: {key: 0}}), section), key) == 0
