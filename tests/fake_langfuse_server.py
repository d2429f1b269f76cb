"""What the local HTTP fakes of Langfuse share: a JSON handler, a threaded server on a free
loopback port serving while a `with` block runs, and the real SDK's REST client pointed
at it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from langfuse import Langfuse
from langfuse.api import LangfuseAPI


class JsonHandler(BaseHTTPRequestHandler):
    """A handler that reads and answers JSON, quietly."""

    def log_message(self, *args) -> None:  # quiet
        pass

    def _reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")


class FakeLangfuseServer:
    """`with Fake() as fake:` serves on `fake.host` until the block ends; `handler` reads
    and writes `store`."""

    def __init__(self, store: Any, handler: type[BaseHTTPRequestHandler]):
        self.store = store
        bound = type("Handler", (handler,), {"store": store})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), bound)
        self.host = f"http://127.0.0.1:{self.server.server_address[1]}"

    def sdk_api(self) -> LangfuseAPI:
        """The real SDK's REST client, pointed at this fake (one key per server: the SDK
        keeps one client per public key)."""
        client = Langfuse(
            public_key=f"pk-{self.host}", secret_key="sk", host=self.host, tracing_enabled=False
        )
        return client.api

    def __enter__(self) -> Self:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
