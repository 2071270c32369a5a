"""Real-browser fixtures: a page server on loopback and Chromium processes that never stray.

Used by tests/browser_targets and plugins/bridgecli-cdp/tests. Every Chromium started here
is killed (whole process group) in teardown, and a final check fails the session if one of
ours survived.
"""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterator

import pytest

PAGES = {
    "/form.html": """<!doctype html><html><head><title>Form page</title></head><body>
<h1>Greeter</h1>
<label>Name <input id="name" placeholder="your name"></label>
<button id="go" onclick="document.getElementById('out').textContent='Hello, '+document.getElementById('name').value">Greet</button>
<p id="out">nobody yet</p>
<a href="/other.html">other page</a>
</body></html>""",
    "/other.html": """<!doctype html><html><head><title>Other page</title></head><body>
<h2>Second</h2><p id="para">the other page</p></body></html>""",
    "/slow.html": None,  # answered after a delay, to exercise load waits
}


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server API)
        path = self.path.split("?")[0]
        if path == "/slow.html":
            import time

            time.sleep(0.5)
            body = b"<!doctype html><title>Slow page</title><p id='s'>slow done</p>"
        elif path in PAGES and PAGES[path] is not None:
            body = PAGES[path].encode()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="session")
def page_server() -> Iterator[str]:
    """Base URL (``http://127.0.0.1:PORT``) of the test pages."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def free_port() -> int:
    """A currently free loopback port (for brokers under test)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def chromium_available() -> bool:
    from bridgecli_cdp.chromium import find_binary

    try:
        find_binary()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def chromium_factory() -> Iterator[Callable[..., object]]:
    """``start(**kwargs) -> Chromium`` (bridgecli_cdp.chromium); all are stopped at the end."""
    if not chromium_available():
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    from bridgecli_cdp.chromium import Chromium

    started: list[Chromium] = []

    def start(**kwargs: object) -> Chromium:
        browser = Chromium(**kwargs).start()
        started.append(browser)
        return browser

    yield start
    pids = [b.proc.pid for b in started if b.proc is not None]
    for browser in started:
        browser.stop()
    import os

    for pid in pids:  # no strays: the process groups must be gone
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            continue
        pytest.fail(f"Chromium process group {pid} survived teardown")


def extension_copy(config: dict[str, object]) -> Path:
    """A temp copy of the shipped extension with a ``config.json`` (port, token, label) —
    the documented way to provision it without a human at the options page."""
    from importlib import resources

    src = Path(str(resources.files("bridgecli.browser").joinpath("extension")))
    dest = Path(tempfile.mkdtemp(prefix="bridge-ext-")) / "extension"
    shutil.copytree(src, dest)
    (dest / "config.json").write_text(json.dumps(config))
    return dest
