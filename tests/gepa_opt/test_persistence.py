"""Durable GEPA run state: exact round trips, content-addressed texts, crash-safe saves."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import fields, replace
from pathlib import Path

import pytest

from gepa_opt.budget import Budget
from gepa_opt.cache import CachedEvaluation, EvaluationCache, Split
from gepa_opt.checkpoint import GroupInFlight, Position
from gepa_opt.events import RejectReason
from gepa_opt.persistence import RunStore
from gepa_opt.snapshot import NOT_PERSISTED, RunSnapshot, restore, snapshot_of
from gepa_opt.state import GEPAState, ProposalRecord
from gepa_opt.types import candidate_digest

REPO_ROOT = Path(__file__).resolve().parents[2]
SEED = {"system": "Answer briefly.", "rubric": "Score 1 when the answer is correct."}
CHILD = {**SEED, "system": "Answer briefly and cite the source."}


def live_run() -> tuple[GEPAState, Budget, EvaluationCache, dict[str, random.Random]]:
    """A small mid-run state touching every field, with int and str example ids mixed."""
    state = GEPAState()
    state.add(SEED, (), {0: 0.5, "q1": 0.0})
    state.add(CHILD, (0,), {0: 1.0, "q1": 0.25})
    state.component_cursor[0] = 1
    accepted = ProposalRecord(1, 0, ("system",), (3, "t4"), (0.0, 1.0), (1.0, 1.0), None, 1)
    state.history += [
        replace(accepted, metric_calls=4),
        ProposalRecord(
            2, 1, ("rubric",), (5, 6), (1.0, 0.0), (0.0, 0.0), RejectReason.NOT_IMPROVED, None
        ),
        ProposalRecord(3, 1, ("system",), (7,), (1.0,), None, RejectReason.PERFECT_PARENT, None),
    ]
    state.iteration, state.idle_iterations = 3, 1
    budget = Budget(max_metric_calls=100, metric_calls_used=12, reflection_calls=2)
    cache = EvaluationCache()
    cache.put(candidate_digest(SEED), Split.VAL, 0, CachedEvaluation("Paris", 0.5, None))
    cache.put(candidate_digest(SEED), Split.VAL, "q1", CachedEvaluation(None, 0.0, None))
    trajectory = {"steps": ["look up", "answer"], "feedback": "cite it", "ok": False}
    cache.put(candidate_digest(SEED), Split.TRAIN, 3, CachedEvaluation([1, "a"], 0.0, trajectory))
    cache.put(candidate_digest(CHILD), Split.TRAIN, "t4", CachedEvaluation({"x": 1.5}, 1.0, {}))
    rngs = {"selection": random.Random("gepa:0:selection"), "minibatch": random.Random(7)}
    rngs["selection"].random()
    rngs["minibatch"].shuffle(list(range(10)))
    rngs["minibatch"].gauss(0.0, 1.0)  # leaves a pending gauss_next float in the state
    return state, budget, cache, rngs


def test_load_without_saved_state_returns_none(tmp_path: Path) -> None:
    assert RunStore(tmp_path / "run").load() is None


def test_round_trip_restores_state_budget_cache_and_rngs(tmp_path: Path) -> None:
    state, budget, cache, rngs = live_run()
    snapshot = snapshot_of(state, budget, cache, rngs, extra={"queue": ["i:3", "s:t4"]})
    RunStore(tmp_path).save(snapshot)

    loaded = RunStore(tmp_path).load()

    assert loaded == snapshot
    state2, budget2, cache2, rngs2 = restore(loaded)
    assert state2 == state  # dataclass equality covers the private duplicate index too
    assert state2.contains(CHILD) and not state2.contains({"system": "other"})
    assert budget2 == budget
    assert len(cache2) == len(cache) == 4
    for key, evaluation in loaded.cache.items():
        assert cache2.get(*key) == cache.get(*key) == evaluation
    assert rngs2.keys() == rngs.keys()
    for name, rng in rngs.items():
        assert rngs2[name].gauss(0.0, 1.0) == rng.gauss(0.0, 1.0)
        assert [rngs2[name].random() for _ in range(5)] == [rng.random() for _ in range(5)]


def test_example_id_types_survive_json(tmp_path: Path) -> None:
    """0 and "0" are different examples; untagged JSON keys would merge them."""
    state = GEPAState()
    state.add(SEED, (), {0: 0.0, "0": 1.0})
    state.history.append(ProposalRecord(1, 0, ("system",), (0, "0"), (0.0, 1.0), None, None, 0))
    cache = EvaluationCache()
    cache.put(candidate_digest(SEED), Split.VAL, 0, CachedEvaluation("int", 0.0, None))
    cache.put(candidate_digest(SEED), Split.VAL, "0", CachedEvaluation("str", 1.0, None))
    RunStore(tmp_path).save(snapshot_of(state, Budget(10), cache, {}))

    state2, _, cache2, _ = restore(RunStore(tmp_path).load())

    assert [type(i) for i in state2.val_scores[0]] == [int, str]
    assert state2.val_scores[0] == {0: 0.0, "0": 1.0}
    assert [type(i) for i in state2.history[0].minibatch_ids] == [int, str]
    assert cache2.get(candidate_digest(SEED), Split.VAL, 0).output == "int"
    assert cache2.get(candidate_digest(SEED), Split.VAL, "0").output == "str"


def test_unsupported_example_id_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    state = GEPAState()
    state.add(SEED, (), {(1, 2): 0.0})
    with pytest.raises(ValueError, match="tuple"):
        RunStore(tmp_path).save(snapshot_of(state, Budget(10), EvaluationCache(), {}))
    assert RunStore(tmp_path).load() is None
    assert not (tmp_path / "texts").exists()


def test_non_json_payloads_keep_their_score_and_come_back_marked(tmp_path: Path) -> None:
    digest = candidate_digest(SEED)
    cache = EvaluationCache()
    cache.put(digest, Split.TRAIN, 1, CachedEvaluation(object(), 0.5, ("a", "tuple")))
    cache.put(digest, Split.TRAIN, 2, CachedEvaluation(float("nan"), 1.0, None))
    state = GEPAState()
    state.add(SEED, (), {0: 0.0})
    RunStore(tmp_path).save(snapshot_of(state, Budget(10), cache, {}))

    _, _, cache2, _ = restore(RunStore(tmp_path).load())

    assert cache2.get(digest, Split.TRAIN, 1) == CachedEvaluation(NOT_PERSISTED, 0.5, NOT_PERSISTED)
    assert cache2.get(digest, Split.TRAIN, 2) == CachedEvaluation(NOT_PERSISTED, 1.0, None)


def test_restored_budget_has_nothing_in_flight(tmp_path: Path) -> None:
    """Work in flight at the kill is gone; what it charged stays spent (it may have run)."""
    budget = Budget(max_metric_calls=50, metric_calls_used=10)
    reservation = budget.reserve(20)
    reservation.charge(5)
    state = GEPAState()
    state.add(SEED, (), {0: 0.0})
    RunStore(tmp_path).save(snapshot_of(state, budget, EvaluationCache(), {}))

    _, budget2, _, _ = restore(RunStore(tmp_path).load())

    assert (budget2.metric_calls_used, budget2.reserved, budget2.remaining) == (15, 0, 35)


def test_snapshot_has_a_field_for_everything_state_and_budget_hold() -> None:
    """Trips when GEPAState or Budget grows a field that a resumed run would silently lose."""
    # rebuilt by GEPAState.add; in-flight work only; a wake-up signal for waiting work; the
    # resumed run's own GEPAConfig sets the reflection limit (a resume may change it)
    not_persisted = {
        "_index",
        "reserved",
        "reflections_reserved",
        "_freed",
        "max_reflection_calls",
    }
    snapshot_fields = {f.name for f in fields(RunSnapshot)}
    for holder in (GEPAState, Budget):
        assert {f.name for f in fields(holder)} - not_persisted <= snapshot_fields


def test_texts_are_written_once_per_digest_and_not_into_the_state(tmp_path: Path) -> None:
    state, budget, cache, rngs = live_run()
    state.add(SEED, (0,), {0: 0.5, "q1": 0.0})  # same texts again: same digest, one file
    RunStore(tmp_path).save(snapshot_of(state, budget, cache, rngs))
    text_files = sorted((tmp_path / "texts").iterdir())
    inodes = {path.name: path.stat().st_ino for path in text_files}

    state.add({"system": "new"}, (1,), {0: 1.0, "q1": 1.0})
    RunStore(tmp_path).save(snapshot_of(state, budget, cache, rngs))  # a fresh store: no memory

    names = {f"{candidate_digest(c)}.json" for c in (SEED, CHILD, {"system": "new"})}
    assert {path.name for path in (tmp_path / "texts").iterdir()} == names
    assert {path.name: path.stat().st_ino for path in text_files} == inodes
    assert json.loads((tmp_path / "texts" / f"{candidate_digest(CHILD)}.json").read_text()) == CHILD
    assert SEED["rubric"] not in (tmp_path / "state.json").read_text()


def test_texts_land_before_the_state_that_names_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replaced: list[str] = []
    real_replace = os.replace

    def recording_replace(source: str, destination: str | Path) -> None:
        replaced.append(Path(destination).name)
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", recording_replace)
    store = RunStore(tmp_path)
    state, budget, cache, rngs = live_run()
    store.save(snapshot_of(state, budget, cache, rngs))
    state.add({"system": "new"}, (1,), {0: 1.0})
    store.save(snapshot_of(state, budget, cache, rngs))

    seed_file, child_file = (f"{candidate_digest(c)}.json" for c in (SEED, CHILD))
    new_file = f"{candidate_digest({'system': 'new'})}.json"
    assert replaced == [seed_file, child_file, "state.json", new_file, "state.json"]


def test_unknown_format_version_is_refused_naming_the_file(tmp_path: Path) -> None:
    RunStore(tmp_path).save(snapshot_of(*live_run()))
    state_path = tmp_path / "state.json"
    document = json.loads(state_path.read_text())
    state_path.write_text(json.dumps({**document, "format_version": 99}))

    with pytest.raises(ValueError, match="format_version") as error:
        RunStore(tmp_path).load()
    assert str(state_path) in str(error.value) and "99" in str(error.value)


def test_missing_text_file_is_refused_naming_file_and_field(tmp_path: Path) -> None:
    RunStore(tmp_path).save(snapshot_of(*live_run()))
    child_text = tmp_path / "texts" / f"{candidate_digest(CHILD)}.json"
    child_text.unlink()

    with pytest.raises(ValueError, match=r"candidates\[1\]\.digest") as error:
        RunStore(tmp_path).load()
    assert str(child_text) in str(error.value)


VAL_IDS = [*range(12), "q-a", "q-b"]


def growing_snapshot(n: int) -> RunSnapshot:
    """Snapshot number n of a run that adds one candidate per step, with cache entries that
    make state.json grow by a few KB per step (so kills often land inside a write)."""
    state = GEPAState()
    cache = EvaluationCache()
    for k in range(n + 1):
        candidate = {"system": f"prompt version {k} " + "x" * 300, "rubric": "grade " * 20}
        digest = candidate_digest(candidate)
        val_scores = {i: (k * 7 + j) % 10 / 10 for j, i in enumerate(VAL_IDS)}
        state.add(candidate, () if k == 0 else (k - 1,), val_scores)
        for i, score in val_scores.items():
            cache.put(
                digest, Split.VAL, i, CachedEvaluation({"text": f"{k}/{i} " * 20}, score, None)
            )
        cache.put(digest, Split.TRAIN, f"t{k}", CachedEvaluation("out", 1.0, {"fb": "y" * 200}))
        if k:
            state.history.append(
                ProposalRecord(k, k - 1, ("system",), (f"t{k}",), (0.0,), (1.0,), None, k)
            )
    state.iteration = n
    budget = Budget(max_metric_calls=10**6, metric_calls_used=len(cache), reflection_calls=n)
    return snapshot_of(state, budget, cache, {"selection": random.Random(n)}, extra={"n": n})


def save_forever(path: str) -> None:
    """Child process of the kill test: resumes from disk, then saves growing snapshots."""
    store = RunStore(path)
    loaded = store.load()
    n = 0 if loaded is None else loaded.iteration + 1
    store.save(growing_snapshot(n))
    print("saved", flush=True)
    while True:
        n += 1
        store.save(growing_snapshot(n))


def test_sigkill_at_any_moment_leaves_the_old_or_the_new_snapshot(tmp_path: Path) -> None:
    delays = random.Random(0)  # only the kill moment itself is left to chance
    child_code = (
        "import sys; from tests.gepa_opt.test_persistence import save_forever as f; f(sys.argv[1])"
    )
    last_seen = -1
    for _ in range(20):
        child = subprocess.Popen(
            [sys.executable, "-c", child_code, str(tmp_path)],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
        )
        assert child.stdout.readline() == b"saved\n"  # at least one save finished this round
        time.sleep(delays.uniform(0.0, 0.03))
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()

        loaded = RunStore(tmp_path).load()

        assert loaded is not None and loaded.iteration > last_seen  # nothing finished is lost
        assert loaded == growing_snapshot(loaded.iteration)  # complete and self-consistent
        assert not [p for p in tmp_path.rglob(".tmp-*")]  # load cleared the killed temp files
        last_seen = loaded.iteration
    for text_file in (tmp_path / "texts").iterdir():  # no text file is ever half-written
        assert f"{candidate_digest(json.loads(text_file.read_text()))}.json" == text_file.name


def test_a_group_in_flight_keeps_whether_its_minibatch_was_reused() -> None:
    groups = [GroupInFlight(1, [3, "t4"], [(5, ["system"])], reused=True)]
    position = Position([0, "q1"], 0.5, 2, 10, groups)
    saved = json.loads(json.dumps(position.to_json()))
    assert Position.from_json(saved) == position
    saved["in_flight"][0].pop()  # saved before minibatches were reused: drawn anew
    assert Position.from_json(saved).groups == [replace(groups[0], reused=False)]
