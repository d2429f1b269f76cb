"""What the state folder keeps, for how long, and for whom."""

import os
import time

import pytest
from pydantic import ValidationError

from flows.night.retention import DAY_S, expire
from infra.settings import StateSettings


def _touch(path, age_days: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("masked trace text")
    stamp = time.time() - age_days * DAY_S
    os.utime(path, (stamp, stamp))


def test_results_and_run_folders_older_than_the_retention_go(tmp_path) -> None:
    results, runs = tmp_path / "prefect" / "storage", tmp_path / "runs"
    _touch(results / "old", 31)
    _touch(results / "new", 29)
    _touch(runs / "old-night" / "gepa" / "calls.jsonl", 40)
    _touch(runs / "resumed-night" / "state.json", 40)
    _touch(runs / "resumed-night" / "calls.jsonl", 1)  # written again tonight: kept whole
    assert expire(tmp_path, results, days=30) == 2
    assert sorted(p.name for p in results.iterdir()) == ["new"]
    assert sorted(p.name for p in runs.iterdir()) == ["resumed-night"]
    assert (runs / "resumed-night" / "state.json").exists()


def test_results_that_are_not_flywheel_s_alone_are_left(tmp_path) -> None:
    state, team_results = tmp_path / "state", tmp_path / "team-prefect" / "storage"
    _touch(state / "runs" / "n1" / "state.json", 40)
    _touch(team_results / "another-flow", 40)
    assert expire(state, team_results, days=30) == 1  # the run folder only
    assert (team_results / "another-flow").exists()
    assert expire(tmp_path / "missing", team_results, days=30) == 0


def test_retention_is_whole_days_or_forever() -> None:
    assert StateSettings().retention_days == 30 and StateSettings(retention_days=None)
    with pytest.raises(ValidationError, match="retention_days"):
        StateSettings(retention_days=0)


def test_the_state_folder_is_private_to_the_user(tmp_path) -> None:
    from flows.plumbing.environment import prepare_environment

    made, opened = tmp_path / "new" / "state", tmp_path / "shared"
    opened.mkdir(mode=0o755)
    for folder in (made, opened):
        prepare_environment(folder)
        assert folder.stat().st_mode & 0o777 == 0o700


def test_a_team_prefect_server_keeps_prefect_where_the_user_has_it(tmp_path, monkeypatch):
    from flows.plumbing.environment import prepare_environment, team_prefect_server

    monkeypatch.delenv("PREFECT_HOME", raising=False)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    profiles = tmp_path / "profiles.toml"
    monkeypatch.setenv("PREFECT_PROFILES_PATH", str(profiles))
    assert team_prefect_server() is None  # no profile file: flywheel's own server
    prepare_environment(tmp_path / "own")
    assert os.environ["PREFECT_HOME"] == str((tmp_path / "own" / "prefect").resolve())

    monkeypatch.delenv("PREFECT_HOME")
    profiles.write_text(
        'active = "team"\n[profiles.team]\nPREFECT_API_URL = "http://prefect.internal:4200/api"\n'
    )
    assert team_prefect_server() == "http://prefect.internal:4200/api"
    prepare_environment(tmp_path / "team")
    assert "PREFECT_HOME" not in os.environ  # the user's profile, and its server, stay in use
    monkeypatch.setenv("PREFECT_API_URL", "http://other:4200/api")
    assert team_prefect_server() == "http://other:4200/api"
