from judges.splits import stratified_split
from judges.types import JudgedItem


def items(n_pass: int, n_fail: int) -> list[JudgedItem]:
    return [JudgedItem(f"t{i}", "in", "out", human_pass=i < n_pass) for i in range(n_pass + n_fail)]


def test_split_is_stratified_and_disjoint():
    rest, part = stratified_split(items(20, 30), 0.4, seed=1)
    assert {i.id for i in rest}.isdisjoint({i.id for i in part})
    assert sum(i.human_pass for i in part) == 8 and sum(not i.human_pass for i in part) == 12
    assert len(rest) + len(part) == 50


def test_split_is_fixed_by_seed():
    a = stratified_split(items(10, 10), 0.3, seed=7)
    b = stratified_split(items(10, 10), 0.3, seed=7)
    c = stratified_split(items(10, 10), 0.3, seed=8)
    assert a == b
    assert a != c


def test_one_trace_never_on_both_sides():
    # Two annotations on the same trace must land on the same side.
    data = items(5, 5) + [JudgedItem("t0", "in", "out", human_pass=False)]
    rest, part = stratified_split(data, 0.5, seed=0)
    assert {i.id for i in rest}.isdisjoint({i.id for i in part})


def test_categories_are_stratified_and_many_numbers_by_rank():
    labels = ["bad"] * 10 + ["ok"] * 20 + ["good"] * 30
    data = [JudgedItem(f"c{i}", "in", "out", human_value=v) for i, v in enumerate(labels)]
    rest, part = stratified_split(data, 0.5, seed=3)
    assert [sum(i.human_value == v for i in part) for v in ("bad", "ok", "good")] == [5, 10, 15]
    # 40 distinct scores: ten rank bins of four, two of each bin held out
    scores = [JudgedItem(f"n{i}", "in", "out", human_value=float(i)) for i in range(40)]
    rest, part = stratified_split(scores, 0.5, seed=3)
    held = [int(i.human_value) for i in part]
    assert len(held) == 20
    assert [sum(v // 4 == b for v in held) for b in range(10)] == [2] * 10
