"""The label-scale benchmark's data and draws: the shipped labels load (a bad line is
named), the held-out set is fixed and apart from every size's labels, sizes are nested."""

import json

import pytest

from benchmarks.judge_label_scale import DATA, label_pool, router_labels, sized


def test_the_shipped_labels_are_the_demo_annotators_on_other_requests():
    items = router_labels()
    assert len(items) == 490 and len({i.id for i in items}) == 490
    assert all(isinstance(i.human_pass, bool) and i.human_comment for i in items)
    assert 0.15 < sum(i.human_pass for i in items) / len(items) < 0.35  # the demo's 0.22
    rows = [json.loads(line) for line in DATA.read_text().splitlines()]
    # the stand-in annotator: a reply passes exactly when the comment says it was correct
    assert all(r["passed"] == r["comment"].startswith("correct:") for r in rows)


def test_a_malformed_line_is_named_with_its_field(tmp_path):
    path = tmp_path / "labels.jsonl"
    good = {"id": "a", "request": "r", "reply": "x", "passed": True, "comment": "c"}
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "passed": "yes"}) + "\n")
    with pytest.raises(ValueError, match=r"labels.jsonl:2: field 'passed'"):
        router_labels(path)
    path.write_text(json.dumps({k: v for k, v in good.items() if k != "reply"}) + "\n")
    with pytest.raises(ValueError, match=r"labels.jsonl:1: .*'reply'"):
        router_labels(path)


def test_heldout_is_fixed_and_apart_from_nested_sizes():
    heldout, rest = label_pool(256)
    again, _ = label_pool(256)
    assert [i.id for i in heldout] == [i.id for i in again]
    # the demo's 376 labels, 210 of them on shipped exchanges, counted once
    assert len(heldout) == 256 and len(rest) == 376 + 490 - 210 - 256
    assert len({i.input_text for i in heldout + rest}) == len(heldout) + len(rest)
    held = {i.input_text for i in heldout}
    small, big = sized(rest, 100), sized(rest, 200)
    assert (len(small[0]), len(small[1])) == (60, 40)
    assert not held & {i.input_text for i in big[0] + big[1]}
    assert {i.id for i in small[0] + small[1]} <= {i.id for i in big[0] + big[1]}
    with pytest.raises(ValueError, match="400 labels to learn from, not 401"):
        sized(rest, 401)
