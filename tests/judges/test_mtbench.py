import json
from collections import Counter

import pytest

from benchmarks.mtbench_data import DATA, load, split_by_question


def test_the_shipped_file_loads_with_its_labels():
    items = load()
    assert len(items) == 162
    assert Counter(i.human_prefers for i in items) == {"A": 85, "B": 77}
    assert len({i.id for i in items}) == 162
    assert len({i.group for i in items}) == len({i.question for i in items}) == 60
    first = json.loads(DATA.read_text())[0]
    assert (items[0].question, items[0].answer_a, items[0].answer_b) == (
        first["input"],
        first["output_1"],
        first["output_2"],
    )
    for name in ("LICENSE", "SOURCE.txt", "README.md"):
        assert (DATA.parent / name).is_file()


GOOD = {"input": "q", "output_1": "a", "output_2": "b", "label": 1}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({**GOOD, "label": 3}, "record 1: field 'label'"),
        ({**GOOD, "label": True}, "record 1: field 'label'"),
        ({k: v for k, v in GOOD.items() if k != "output_2"}, "record 1: field 'output_2'"),
        ({**GOOD, "input": "  "}, "record 1: field 'input'"),
        (["q", "a", "b", 1], "record 1: must be an object"),
    ],
)
def test_a_malformed_record_is_named_with_its_field(tmp_path, bad, message):
    path = tmp_path / "data.json"
    path.write_text(json.dumps([GOOD, bad]))
    with pytest.raises(ValueError, match=message):
        load(path)


def test_a_file_that_is_not_a_list_is_refused(tmp_path):
    path = tmp_path / "data.json"
    path.write_text(json.dumps(GOOD))
    with pytest.raises(ValueError, match="list"):
        load(path)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_split_never_shares_a_question_and_keeps_the_label_mix(seed):
    items = load()
    train, val, heldout = split_by_question(items, heldout_fraction=0.2, seed=seed)
    assert sorted(i.id for i in train + val + heldout) == sorted(i.id for i in items)
    groups = [{i.group for i in part} for part in (train, val, heldout)]
    assert not (groups[0] & groups[1] or groups[0] & groups[2] or groups[1] & groups[2])
    for part, share in ((train, 0.6), (val, 0.2), (heldout, 0.2)):
        assert abs(len(part) / len(items) - share) < 0.05
        assert abs(sum(i.human_prefers == "A" for i in part) / len(part) - 85 / 162) < 0.05


def test_the_split_is_fixed_by_its_seed():
    items = load()
    ids = lambda parts: [[i.id for i in part] for part in parts]  # noqa: E731
    assert ids(split_by_question(items, 0.2, seed=7)) == ids(split_by_question(items, 0.2, seed=7))
    assert ids(split_by_question(items, 0.2, seed=7)) != ids(split_by_question(items, 0.2, seed=8))


def test_no_validation_part_when_asked_for_none():
    train, val, heldout = split_by_question(load(), 0.25, seed=0, val_fraction=0.0)
    assert val == [] and train and heldout


@pytest.mark.parametrize(("heldout", "val"), [(0.0, 0.2), (0.5, 0.5), (0.2, -0.1)])
def test_impossible_fractions_are_refused(heldout, val):
    with pytest.raises(ValueError, match="fraction"):
        split_by_question(load(), heldout, seed=0, val_fraction=val)
