"""A local HTTP fake of what Langfuse keeps of a dataset and its runs, for tests that use
the real SDK: datasets (v2), dataset items, the OpenTelemetry endpoint and scores.

It keeps what Langfuse keeps: items upserted on their id, spans on their (trace, span)
ids, scores on their id, and runs (experiments) as Langfuse builds them from the spans'
`langfuse.experiment.*` attributes, so a test reads what the dataset's runs page shows.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from tests.fake_langfuse_prompts import PROJECT
from tests.fake_langfuse_server import FakeLangfuseServer, JsonHandler

STAMP = "2026-12-01T00:00:00Z"


class DatasetStore:
    def __init__(self):
        self.datasets: dict[str, dict] = {}  # name -> dataset
        self.items: dict[str, dict] = {}  # id -> item
        self.spans: dict[tuple[str, str], dict[str, str]] = {}  # (trace, span) -> attributes
        self.scores: dict[str, dict] = {}  # id -> score
        self.headers: list[dict[str, str]] = []  # of each OpenTelemetry export
        self.fail: str | None = None  # a path that answers 500

    def dataset(self, body: dict) -> dict:
        """Langfuse keeps one dataset per name: made again, it is the one it has."""
        return self.datasets.setdefault(
            body["name"],
            {
                "id": f"ds-{len(self.datasets) + 1}",
                "name": body["name"],
                "description": body.get("description"),
                "metadata": body.get("metadata"),
                "projectId": PROJECT["id"],
                "createdAt": STAMP,
                "updatedAt": STAMP,
            },
        )

    def item(self, body: dict) -> dict:
        dataset = self.datasets[body["datasetName"]]
        item = {
            "id": body["id"],
            "status": "ACTIVE",
            "input": body.get("input"),
            "expectedOutput": body.get("expectedOutput"),
            "metadata": body.get("metadata"),
            "sourceTraceId": body.get("sourceTraceId"),
            "datasetId": dataset["id"],
            "datasetName": dataset["name"],
            "createdAt": STAMP,
            "updatedAt": STAMP,
            "mediaReferences": [],
        }
        self.items[body["id"]] = item
        return item

    def export(self, body: dict) -> None:
        for resource in body["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    attributes = {a["key"]: a["value"]["stringValue"] for a in span["attributes"]}
                    self.spans[span["traceId"], span["spanId"]] = attributes

    def runs(self, dataset: str) -> dict[str, dict[str, str]]:
        """Run name -> {dataset item id: the trace of its run item}, as Langfuse groups them."""
        found: dict[str, dict[str, str]] = {}
        for (trace, _), attributes in self.spans.items():
            if attributes.get("langfuse.experiment.dataset.id") == self.datasets[dataset]["id"]:
                run = found.setdefault(attributes["langfuse.experiment.name"], {})
                run[attributes["langfuse.experiment.item.id"]] = trace
        return found

    def trace_scores(self, trace: str) -> dict[str, float]:
        return {s["name"]: s["value"] for s in self.scores.values() if s["traceId"] == trace}


class _Handler(JsonHandler):
    store: DatasetStore

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == self.store.fail:
            self._reply(500, {"message": "down"})
        elif path == "/api/public/projects":
            self._reply(200, {"data": [PROJECT]})
        elif path.startswith("/api/public/v2/datasets/"):
            name = unquote(path.removeprefix("/api/public/v2/datasets/"))
            found = self.store.datasets.get(name)
            self._reply(200, found) if found else self._reply(404, {"message": "not found"})
        else:
            self._reply(404, {"message": f"no route {path}"})

    def do_POST(self) -> None:
        path, body = urlsplit(self.path).path, self._body()
        if path == self.store.fail:
            self._reply(500, {"message": "down"})
        elif path == "/api/public/v2/datasets":
            self._reply(200, self.store.dataset(body))
        elif path == "/api/public/dataset-items":
            self._reply(200, self.store.item(body))
        elif path == "/api/public/otel/v1/traces":
            self.store.headers.append(dict(self.headers))
            self.store.export(body)
            self._reply(200, {})
        elif path == "/api/public/scores":
            self.store.scores |= {score["id"]: score for score in body}
            self._reply(202, {"message": "Accepted"})
        else:
            self._reply(404, {"message": f"no route {path}"})


class FakeLangfuseDatasets(FakeLangfuseServer):
    """`with FakeLangfuseDatasets() as fake:` serves on `fake.host` until the block ends."""

    def __init__(self):
        super().__init__(DatasetStore(), _Handler)
