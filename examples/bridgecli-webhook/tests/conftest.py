"""A real HTTP receiver on 127.0.0.1 for the webhook plugin's tests.

``receiver`` is a :class:`Receiver`: an ``http.server`` in a thread that records every POST
and answers from a per-path script (``receiver.script("/flaky", [503, 200])``: first 503,
then 200 for ever). A status of ``"hang"`` sleeps past any client timeout.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict:
        return json.loads(self.body)


class Receiver:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.scripts: dict[str, list] = {}
        self.lock = threading.Lock()
        self.release = threading.Event()  # set at teardown so hanging handlers end
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    receiver.requests.append(Received(self.path, dict(self.headers), body))
                    script = receiver.scripts.setdefault(self.path, [200])
                    status = script.pop(0) if len(script) > 1 else script[0]
                if status == "hang":
                    receiver.release.wait(30)
                    return
                payload = f"status {status}".encode()
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", "http://127.0.0.1:1/elsewhere")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def script(self, path: str, statuses: list) -> str:
        """Answer POSTs to ``path`` with ``statuses`` in turn (the last one repeats); returns its URL."""
        with self.lock:
            self.scripts[path] = list(statuses)
        return self.url + path

    def posts(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.path == path]

    def wait_for(self, path: str, count: int, timeout: float = 60) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.posts(path)
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"{path}: {len(self.posts(path))} POST(s) after {timeout}s, wanted {count}")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.thread.start()
    yield r
    r.release.set()
    r.server.shutdown()
    r.server.server_close()
