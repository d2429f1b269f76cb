"""A local HTTP fake of Langfuse's prompts API (v2), for tests that use the real SDK.

Versions are numbered from 1 per prompt; a label lives on one version at a time (setting
it elsewhere takes it off), and "latest" follows the newest version, as in Langfuse.
"""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

from tests.fake_langfuse_server import FakeLangfuseServer, JsonHandler

PREFIX = "/api/public/v2/prompts"
PROJECT = {
    "id": "proj-fake",
    "name": "fake",
    "metadata": {},
    "organization": {"id": "org", "name": "org"},
}


class PromptStore:
    def __init__(self):
        self.prompts: dict[str, list[dict]] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path)

    def create(self, body: dict) -> dict:
        versions = self.prompts.setdefault(body["name"], [])
        record = {
            "name": body["name"],
            "type": body.get("type") or "text",
            "prompt": body["prompt"],
            "config": body.get("config") or {},
            "tags": body.get("tags") or [],
            "commitMessage": body.get("commitMessage"),
            "version": len(versions) + 1,
            "labels": [],
        }
        versions.append(record)
        self.relabel(body["name"], record["version"], list(body.get("labels") or []))
        for other in versions:
            other["labels"] = [x for x in other["labels"] if x != "latest"]
        record["labels"].append("latest")
        return record

    def relabel(self, name: str, version: int, labels: list[str]) -> dict:
        versions = self.prompts[name]
        for other in versions:
            other["labels"] = [x for x in other["labels"] if x not in labels]
        record = versions[version - 1]
        latest = ["latest"] if "latest" in record["labels"] else []
        record["labels"] = sorted(set(labels) | set(latest))
        return record

    def find(self, name: str, label: str | None, version: int | None) -> dict | None:
        for record in self.prompts.get(name, []):
            if version is not None and record["version"] == version:
                return record
            if version is None and (label or "production") in record["labels"]:
                return record
        return None


class _Handler(JsonHandler):
    store: PromptStore

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        self.store.requests.append(("GET", url.path))
        if url.path == "/api/public/projects":  # the project the keys belong to
            self._reply(200, {"data": [PROJECT]})
            return
        name = unquote(url.path.removeprefix(PREFIX + "/"))
        query = parse_qs(url.query)
        version = int(query["version"][0]) if "version" in query else None
        found = self.store.find(name, query.get("label", [None])[0], version)
        if found is None:
            self._reply(404, {"message": f"Prompt not found: {name}"})
        else:
            self._reply(200, found)

    def do_POST(self) -> None:
        self.store.requests.append(("POST", self.path))
        self._reply(200, self.store.create(self._body()))

    def do_PATCH(self) -> None:
        path = urlsplit(self.path).path
        self.store.requests.append(("PATCH", path))
        name, _, version = path.removeprefix(PREFIX + "/").rpartition("/versions/")
        labels = self._body()["newLabels"]
        self._reply(200, self.store.relabel(unquote(name), int(version), labels))


class FakeLangfusePrompts(FakeLangfuseServer):
    """`with FakeLangfusePrompts() as fake:` serves on `fake.host` until the block ends."""

    def __init__(self):
        super().__init__(PromptStore(), _Handler)
