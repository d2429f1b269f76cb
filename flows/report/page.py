"""The night's report as one page a person opens: the markdown report with its pictures
inline, as a Prefect markdown artifact (images as data URIs, which Prefect's UI renders)
and as a static HTML file with nothing beside it to lose (`report.html`)."""

from __future__ import annotations

import base64
import html
import re

from markdown_it import MarkdownIt

# a picture is referenced in the markdown by its file name: ![what it shows](gate.png)
PAGE = "report.html"  # a night's page, in its run folder and its MLflow run
_PICTURE = re.compile(r"\]\(([\w.-]+\.png)\)")
# for the page: wide enough for a 1000 px figure, tables that scroll rather than squash
STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 1040px; margin: 2em auto;
       padding: 0 1em; color: #1b1b1b; }
h1, h2, h3 { line-height: 1.2; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
table { border-collapse: collapse; display: block; overflow-x: auto; margin: 1em 0; }
th, td { border: 1px solid #ddd; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f6f6f6; }
code, pre { font: 13px/1.4 ui-monospace, monospace; background: #f6f6f6; }
pre { padding: .8em; overflow-x: auto; }
"""


def embed(markdown: str, pictures: dict[str, bytes]) -> str:
    """The markdown with each referenced picture it has as a data URI; one it does not
    have stays a file name (MLflow keeps the file beside report.md)."""

    def inline(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in pictures:
            return match.group(0)
        return f"](data:image/png;base64,{base64.b64encode(pictures[name]).decode()})"

    return _PICTURE.sub(inline, markdown)


def page(title: str, markdown: str, pictures: dict[str, bytes]) -> str:
    """One self-contained HTML file: the report rendered, pictures inline, no scripts."""
    # commonmark without raw HTML: text from traces and people's comments stays text
    body = (
        MarkdownIt("commonmark", {"html": False}).enable("table").render(embed(markdown, pictures))
    )
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n"
        f"<body>\n{body}</body></html>\n"
    )
