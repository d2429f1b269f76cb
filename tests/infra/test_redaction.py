"""Secrets and personal data are masked where trace text comes in."""

import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from flows.night.runtime import Runtime
from infra.redaction import Redactor
from infra.settings import RedactionSettings, Settings, TraceSettings
from infra.traces.factory import make_trace_source
from infra.types import Example

SECRETS = {
    "api_key": "sk-proj-4f9aQ2mZr8LxT1vB6nW3yK0cH5jD7eU9sA",
    "stripe_key": "sk_live_51HxQ2mZr8LxT1vB6nW3yK0c",
    "aws_access_key": "AKIAIOSFODNN7EXAMPLE",
    "github_token": "ghp_4f9aQ2mZr8LxT1vB6nW3yK0cH5jD7eU9sAbc",
    "slack_token": "xoxb-1234567890-abcdefghijkl",
    "google_api_key": "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "huggingface_token": "hf_4f9aQ2mZr8LxT1vB6nW3yK0cH5jD7eU9sAb",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    "email": "jane.doe+billing@example.co.uk",
}
PHONES = ["+1 415 555 0100", "(415) 555-0100", "415.555.0100", "+14155550100", "+44 20 7946 0958"]
NOT_SECRETS = [
    "2026-12-01",
    "192.168.100.200",
    "order 123456789012",
    "v1.2.3",
    "ORD-1234-5678",
    "3f786850e387550fdab836ed7e6dc881de23001b",  # a git sha
    "sk-short",
    "I want to cancel my card",
]


@pytest.mark.parametrize(("kind", "secret"), SECRETS.items())
def test_each_kind_of_secret_is_masked_and_named(kind: str, secret: str) -> None:
    redactor = Redactor.standard()
    assert redactor.text(f"see {secret} now") == f"see [REDACTED:{kind}] now"
    assert redactor.counts == {kind: 1}


@pytest.mark.parametrize("phone", PHONES)
def test_phone_numbers_in_common_forms_are_masked(phone: str) -> None:
    assert Redactor.standard().text(f"call {phone} today") == "call [REDACTED:phone] today"


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor.standard().text(text) == text


def test_only_the_secret_part_of_its_context_is_masked() -> None:
    r = Redactor.standard()
    assert r.text("postgres://admin:hunter2@db:5432/x") == (
        "postgres://[REDACTED:url_password]@db:5432/x"
    )
    assert r.text("Authorization: Bearer abc.def-ghi_jkl012") == (
        "Authorization: Bearer [REDACTED:bearer_token]"
    )
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert r.text(f"aws_secret_access_key = {secret}") == (
        "aws_secret_access_key = [REDACTED:aws_secret_key]"
    )
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----"
    assert r.text(f"key: {pem} end") == "key: [REDACTED:private_key] end"


def test_user_patterns_are_masked_too_and_a_bad_one_is_named() -> None:
    r = Redactor.standard([r"ACME-\d{6}", r"account (\d{8})"])
    assert r.text("ticket ACME-123456 on account 12345678") == (
        "ticket [REDACTED:custom] on account [REDACTED:custom]"
    )
    with pytest.raises(ValidationError, match=r"redaction pattern '\(unclosed'"):
        RedactionSettings(patterns=["(unclosed"])


def test_every_string_inside_a_json_value_is_masked() -> None:
    value = {"messages": [{"role": "user", "content": f"mail {SECRETS['email']}"}], "n": 3}
    assert Redactor.standard().value(value) == {
        "messages": [{"role": "user", "content": "mail [REDACTED:email]"}],
        "n": 3,
    }


def _export(folder, secret: str) -> None:
    when = datetime(2026, 11, 30, tzinfo=UTC).isoformat()
    observation = {
        "id": "o1",
        "traceId": "t1",
        "type": "GENERATION",
        "startTime": when,
        "input": [{"role": "user", "content": f"my key is {secret}, refund please"}],
        "output": {"role": "assistant", "content": "refund"},
        "metadata": {"user": SECRETS["email"]},
    }
    score = {
        "id": "s1",
        "traceId": "t1",
        "name": "correct",
        "value": 1,
        "dataType": "BOOLEAN",
        "source": "ANNOTATION",
        "timestamp": when,
        "comment": f"customer wrote from {SECRETS['email']}",
    }
    corrected = {  # what the reply should have been, in the flat export shape
        "id": "c1",
        "traceId": "t1",
        "name": "output",
        "value": 0,
        "stringValue": f"refund sent to {SECRETS['email']}",
        "dataType": "CORRECTION",
        "source": "ANNOTATION",
        "timestamp": when,
    }
    (folder / "observations.jsonl").write_text(json.dumps(observation) + "\n")
    (folder / "scores.jsonl").write_text(json.dumps(score) + "\n" + json.dumps(corrected) + "\n")
    heldout = {"id": "h1", "inputs": {"request": f"call me at {PHONES[0]}"}, "reference": "x"}
    (folder / "heldout.jsonl").write_text(json.dumps(heldout) + "\n")


def test_a_night_reads_traces_labels_and_held_out_examples_masked(tmp_path) -> None:
    _export(tmp_path, SECRETS["api_key"])
    settings = Settings(state_dir=tmp_path / "state", traces=TraceSettings(jsonl_dir=str(tmp_path)))
    runtime = Runtime(settings)
    batch = runtime.traces.fetch(since=None, limit=10)
    (trace,) = batch.traces
    assert trace.user_text == "my key is [REDACTED:api_key], refund please"
    assert trace.metadata == {"user": "[REDACTED:email]"}
    assert batch.annotations[0].comment == "customer wrote from [REDACTED:email]"
    assert [c.text for c in batch.corrections] == ["refund sent to [REDACTED:email]"]
    labels = runtime.traces.fetch_labels("correct", since=None)
    assert labels.annotations[0].comment == "customer wrote from [REDACTED:email]"
    (example,) = runtime.heldout_examples()
    assert example == Example("h1", {"request": "call me at [REDACTED:phone]"}, "x")


def test_redaction_can_be_turned_off(tmp_path) -> None:
    _export(tmp_path, SECRETS["api_key"])
    settings = Settings(
        state_dir=tmp_path / "state",
        traces=TraceSettings(jsonl_dir=str(tmp_path)),
        redaction=RedactionSettings(enabled=False),
    )
    (trace,) = Runtime(settings).traces.fetch(since=None, limit=10).traces
    assert SECRETS["api_key"] in trace.user_text
    raw = make_trace_source(settings.traces, tmp_path / "state")
    assert SECRETS["api_key"] in raw.fetch(since=None, limit=10).traces[0].user_text
