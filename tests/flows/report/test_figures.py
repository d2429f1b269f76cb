"""The night's curves and diffs, as a person sees them."""

from dataclasses import replace

from flows.report.figures import prompt_diffs
from flows.report.pictures.gepa import curves_figure
from flows.report.summary import render_markdown
from tests.flows.report.test_report import report


def test_the_diff_shows_what_changed_and_names_what_did_not():
    night = replace(report(0.5), seed_prompts={"instructions": "Route the request."})
    text = prompt_diffs(night)
    assert "### judge `rubric`" in text and "-r\n+r2" in text  # the seed rubric, aligned
    assert "### agent `instructions`" in text
    assert "-Route the request.\n+i" in text
    same = replace(night, seed_prompts={"instructions": "i"})
    assert "- agent `instructions`: unchanged" in prompt_diffs(same)
    assert "## What the night changed" in render_markdown(night)


def test_the_curves_have_one_panel_per_stage_with_its_steps():
    night = report(0.5)
    night.steps[0].prompt.curve = [(10, 0.2), (40, 0.35), (90, 0.5)]
    figure = curves_figure(night)
    judge, agent = figure.axes  # one panel per prompt step: the night has one
    assert agent.get_title() == "agent prompts, step 1"
    assert agent.get_xlabel() == "metric calls spent"
    (line,) = agent.get_lines()
    assert list(line.get_xdata()) == [10, 40, 90] and list(line.get_ydata()) == [0.2, 0.35, 0.5]
    assert not judge.get_lines() and "no curve recorded" in judge.texts[0].get_text()
