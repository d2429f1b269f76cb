import base64
from html.parser import HTMLParser
from pathlib import Path

from matplotlib.figure import Figure

from flows.report.links import MLFLOW_UI_DEFAULT, move_links, night_links
from flows.report.night_report import Registered
from flows.report.page import embed, page
from flows.report.pictures import png


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _picture() -> bytes:
    figure = Figure(figsize=(2, 1))
    figure.subplots().plot([0, 1], [1, 0])
    return png(figure)


def test_a_page_carries_its_pictures_inline_and_nothing_beside_it():
    gate = _picture()
    markdown = "# night\n\n![the gate](gate.png)\n\n![missing](time.png)\n\n"
    markdown += "| a | b |\n|---|---|\n| 1 | 2 |\n"
    parsed = _Tags()
    parsed.feed(page("night", markdown, {"gate.png": gate}))
    images = [attrs for tag, attrs in parsed.tags if tag == "img"]
    inline = images[0]["src"].removeprefix("data:image/png;base64,")
    assert base64.b64decode(inline) == gate and images[0]["alt"] == "the gate"
    assert images[1]["src"] == "time.png"  # not given: left as the file beside report.md
    assert ("table", {}) in parsed.tags  # markdown tables render as tables
    assert not [tag for tag, _ in parsed.tags if tag in {"script", "link"}]


def test_text_from_traces_stays_text_in_the_page():
    parsed = _Tags()
    parsed.feed(page("night", "a reply said <script>alert(1)</script>", {}))
    assert "script" not in [tag for tag, _ in parsed.tags]


def test_embed_leaves_markdown_without_pictures_as_it_was():
    text = "see [the docs](https://example.com/a.png) and ![x](gate.png)"
    assert embed(text, {}) == text
    assert "data:image/png;base64," in embed(text, {"gate.png": b"\x89PNG"})


def _registered(uri: str) -> Registered:
    return Registered(
        tracking_uri=uri,
        mlflow_run_id="r2",
        prompt_versions={"agent.system": 3},
        judge_prompt_versions={"judge.rubric": 2},
        model_name="agent",
        model_version=4,
        with_adapter=True,
        experiment_id="7",
        hub_prompts={"router v5": "https://lf.example.com/project/p1/prompts/router?version=5"},
    )


def test_links_go_to_the_mlflow_server_the_night_used(tmp_path):
    lines = night_links(_registered("https://mlflow.example.com/"), "r1", None)
    text = "\n".join(lines)
    assert "(https://mlflow.example.com/#/experiments/7/runs/r2)" in text
    assert "(https://mlflow.example.com/#/models/agent/versions/4)" in text
    assert "[agent.system v3](https://mlflow.example.com/#/prompts/agent.system)" in text
    assert "judge prompts: [judge.rubric v2]" in text
    assert (
        "the night before: [MLflow run](https://mlflow.example.com/#/experiments/7/runs/r1)" in text
    )
    assert "mlflow ui" not in text
    langfuse = "[router v5](https://lf.example.com/project/p1/prompts/router?version=5)"
    assert f"- Langfuse prompts (label candidate): {langfuse}" in text


def test_a_local_store_links_to_mlflow_ui_and_says_how_to_start_it(tmp_path):
    before = tmp_path / "report.html"
    before.write_text("<html></html>")
    lines = night_links(_registered("sqlite:///state/mlflow.db"), None, before)
    text = "\n".join(lines)
    assert f"({MLFLOW_UI_DEFAULT}/#/experiments/7/runs/r2)" in text
    assert "`mlflow ui --backend-store-uri sqlite:///state/mlflow.db`" in text
    assert before.as_uri() in text and "the night before: [MLflow run]" not in text


def test_the_night_before_in_a_relative_state_folder_links_by_its_absolute_path(
    tmp_path, monkeypatch
):
    """The default state folder is `.flywheel`: every second `make demo` lost its report
    to "relative path can't be expressed as a file URI"."""
    monkeypatch.chdir(tmp_path)
    before = Path(".flywheel/runs/n1/report.html")
    before.parent.mkdir(parents=True)
    before.write_text("<html></html>")
    text = "\n".join(night_links(_registered("sqlite:///.flywheel/mlflow.db"), "n1", before))
    assert f"[{before}]({(tmp_path / before).as_uri()})" in text


def test_a_move_links_the_version_production_holds_and_its_langfuse_prompts():
    pages = {"router v2": "https://lf.example.com/project/p1/prompts/router?version=2", "x v1": ""}
    text = "\n".join(move_links("sqlite:///m.db", "my agent", 3, pages))
    assert f"[my agent v3]({MLFLOW_UI_DEFAULT}/#/models/my%20agent/versions/3)" in text
    # a version whose page Langfuse did not give stays as text, never a broken link
    assert "(label production): [router v2](https://lf.example.com" in text
    assert text.split("(label production): ")[1].split("\n")[0].endswith(", x v1")
    assert "mlflow ui --backend-store-uri sqlite:///m.db" in text
