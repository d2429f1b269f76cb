"""A secret in a trace reaches no log line, no skipped record's reason and no file: the
forms masking used to miss (`password=...`, a secret as a dict key or under a
credential's name, a URL password holding an @), and the raw value a skipped record's
log line used to quote before the batch was masked."""

import json
import logging
from datetime import UTC, datetime

import pytest

from flows.night.runtime import Runtime
from infra.redaction import Redactor
from infra.settings import Settings, TraceSettings

WHEN = datetime(2026, 11, 30, tzinfo=UTC).isoformat()
API_KEY = "sk-proj-4f9aQ2mZr8LxT1vB6nW3yK0cH5jD7eU9sA"
GITHUB = "ghp_4f9aQ2mZr8LxT1vB6nW3yK0cH5jD7eU9sAbc"
PLANTED = {  # each secret, and the text it is planted in
    "hunter2-planted": "log in with password=hunter2-planted please",
    # the middle of the password h@x0r-pl4nted@42, which used to show between two masks
    "x0r-pl4nted": "it lives at postgres://bob:h@x0r-pl4nted@42@db.example.com/app",
    API_KEY: "(as a dict key)",
    "Tr0ub4dor-planted": "(under a credential's name)",
    GITHUB: "(a field a skipped trace holds)",
    "zebra-planted": "(a field a skipped score holds)",
}


def test_the_forms_masking_used_to_miss():
    r = Redactor.standard()
    assert r.text("password=hunter2 and pwd: s3cret") == (
        "password=[REDACTED:credential] and pwd: [REDACTED:credential]"
    )
    assert r.text('{"client_secret": "abc123"}') == '{"client_secret": "[REDACTED:credential]"}'
    assert r.text("postgres://bob:p@ss@word@db.example.com/app") == (
        "postgres://[REDACTED:url_password]@db.example.com/app"
    )
    assert r.value({API_KEY: 1, "db_password": "x", "max_tokens": 5}) == {
        "[REDACTED:api_key]": 1,
        "db_password": "[REDACTED:credential]",
        "max_tokens": 5,
    }
    assert r.text("https://x.com/?password=abc") == "https://x.com/?password=[REDACTED:url_secret]"


def _export(folder) -> None:
    good = {
        "id": "o1",
        "traceId": "t1",
        "type": "GENERATION",
        "startTime": WHEN,
        "input": [{"role": "user", "content": PLANTED["hunter2-planted"]}],
        "output": {"role": "assistant", "content": PLANTED["x0r-pl4nted"]},
        "metadata": {API_KEY: "pasted as a key", "db_password": "Tr0ub4dor-planted"},
    }
    skipped = {**good, "id": "o2", "traceId": "t2", "promptVersion": GITHUB}
    label = {
        "id": "s1",
        "traceId": "t1",
        "name": "correct",
        "value": 1,
        "dataType": "BOOLEAN",
        "source": "ANNOTATION",
        "timestamp": WHEN,
        "comment": PLANTED["hunter2-planted"],
    }
    bad_label = {**label, "id": "s2", "source": "password=zebra-planted"}
    (folder / "observations.jsonl").write_text(f"{json.dumps(good)}\n{json.dumps(skipped)}\n")
    (folder / "scores.jsonl").write_text(f"{json.dumps(label)}\n{json.dumps(bad_label)}\n")


@pytest.mark.parametrize("secret", PLANTED)
def test_a_planted_secret_is_in_no_log_line_no_reason_and_no_file(tmp_path, caplog, secret):
    _export(tmp_path)
    state = tmp_path / "state"
    rt = Runtime(Settings(state_dir=state, traces=TraceSettings(jsonl_dir=str(tmp_path))))
    with caplog.at_level(logging.DEBUG):
        batch = rt.traces.fetch(since=None, limit=10)
        labels = rt.traces.fetch_labels("correct", since=None)
        assert rt.labels.add(labels.annotations, batch.traces) == 1

    assert [t.id for t in batch.traces] == ["o1"]  # the rest of the batch is read
    reasons = [s.reason for s in batch.skipped + labels.skipped]
    assert [s.field for s in batch.skipped] == ["promptVersion", "source"]
    assert secret not in caplog.text
    assert caplog.records  # the skips were logged, masked
    assert not any(secret in reason for reason in reasons)
    assert not any(secret in str(record.metadata) for record in batch.traces)
    written = [p for p in state.rglob("*") if p.is_file()]
    assert written and not any(secret.encode() in p.read_bytes() for p in written)
