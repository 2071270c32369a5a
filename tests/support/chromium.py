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
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

PAGES = {
    "/form.html": """<!doctype html><html><head><title>Form page</title></head><body>
<h1>Greeter</h1>
<label>Name <input id="name" placeholder="your name"></label>
<button id="go"
  onclick="document.getElementById('out').textContent='Hello, '+document.getElementById('name').value">Greet</button>
<p id="out">nobody yet</p>
<a href="/other.html">other page</a>
</body></html>""",
    "/other.html": """<!doctype html><html><head><title>Other page</title></head><body>
<h2>Second</h2><p id="para">the other page</p></body></html>""",
    "/held.html": """<!doctype html><html><head><title>Held page</title></head><body>
<p id="section">a section</p><img src="/hang.html" alt="an image that takes 3 s"></body></html>""",
    "/slow.html": None,  # answered after 0.5 s, to exercise load waits
    "/hang.html": None,  # answered after 3 s, to exercise action timeouts
}


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server API)
        path = self.path.split("?")[0]
        if path in ("/slow.html", "/hang.html"):
            import time

            time.sleep(0.5 if path == "/slow.html" else 3)
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
    server.handle_error = lambda *args: None  # a browser aborting a request is not a test failure
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


@pytest.fixture
def chromium_factory() -> Iterator[Callable[..., object]]:
    """``start(**kwargs) -> Chromium`` (bridgecli_cdp.chromium); all are stopped when the test
    ends, and the test fails if any of their processes survived."""
    if not chromium_available():
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    from bridgecli_cdp.chromium import Chromium

    started: list[Chromium] = []

    def start(**kwargs: object) -> Chromium:
        # 60 s, not the 20 s default: a first start on a fresh CI machine builds Chromium's
        # caches, and on a busy 2-core box that once took longer than 20 s
        browser = Chromium(**kwargs).start(timeout=60.0)
        started.append(browser)
        return browser

    yield start
    from bridgecli_cdp.chromium import _group_alive

    pids = [b.proc.pid for b in started if b.proc is not None]
    for browser in started:
        browser.stop()
    strays = [pid for pid in pids if _group_alive(pid)]
    assert not strays, f"Chromium process groups {strays} survived teardown"


def extension_copy(config: dict[str, object]) -> Path:
    """A temp copy of the shipped extension with a ``config.json`` (port, token, label) —
    the documented way to provision it without a human at the options page."""
    from importlib import resources

    src = Path(str(resources.files("bridgecli.browser").joinpath("extension")))
    dest = Path(tempfile.mkdtemp(prefix="bridge-ext-")) / "extension"
    shutil.copytree(src, dest)
    (dest / "config.json").write_text(json.dumps(config))
    return dest


# --- executors and brokers under test ----------------------------------------------------------

EXTENSION_FLAGS = ("--disable-features=DisableLoadExtensionCommandLineSwitch",)


def wait_for(predicate: Callable[[], object], timeout: float = 15.0, what: str = "condition") -> object:
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout``."""
    import time

    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as exc:  # e.g. re_electing while a broker restarts
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")


def targets(bridge) -> list[dict]:
    """The broker's executor list (``targets`` action)."""
    return bridge.send("targets", timeout=10)["targets"]


def wait_for_target(bridge, label: str, timeout: float = 20.0) -> dict:
    """Wait until an executor labelled ``label`` is connected; return its entry."""

    def find() -> dict | None:
        return next((t for t in targets(bridge) if t["label"] == label), None)

    return wait_for(find, timeout, f"executor {label!r} to connect")  # type: ignore[return-value]


def start_extension_browser(chromium_factory, port: int, token: str, label: str, **config):
    """A headless Chromium with a provisioned copy of the shipped extension loaded."""
    ext = extension_copy({"port": port, "token": token, "label": label, **config})
    browser = chromium_factory(
        extra_args=[f"--load-extension={ext}", f"--disable-extensions-except={ext}", *EXTENSION_FLAGS]
    )
    browser.extension_dir = ext
    return browser


class CdpExecutorThread:
    """The CDP executor of bridgecli-cdp serving ``endpoint`` in a thread (what
    ``bridge browser attach`` runs), stopped and joined by :meth:`stop`."""

    def __init__(
        self, endpoint: str, port: int, token: str, label: str, executor_id: str | None = None, default: bool = False
    ) -> None:
        from bridgecli.interfaces import ExecutorOptions
        from bridgecli_cdp.target import CdpTarget

        self.states: list[tuple[str, dict]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        options = ExecutorOptions(
            url=f"ws://127.0.0.1:{port}/",
            token=token,
            label=label,
            executor_id=executor_id,
            settings={"on_status": lambda s, i: self.states.append((s, i)), "default": default},
        )

        def run() -> None:
            try:
                CdpTarget().attach(options, endpoint=endpoint, stop=self._stop)
            except BaseException as exc:  # surfaced by stop()
                self.error = exc

        self.thread = threading.Thread(target=run, name=f"cdp-executor-{label}", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(15)
        assert not self.thread.is_alive(), "the CDP executor did not stop"


@pytest.fixture
def cdp_executors() -> Iterator[Callable[..., CdpExecutorThread]]:
    """``start(endpoint, port, token, label, ...)``; every executor is stopped at the end."""
    started: list[CdpExecutorThread] = []

    def start(*args: object, **kwargs: object) -> CdpExecutorThread:
        executor = CdpExecutorThread(*args, **kwargs)  # type: ignore[arg-type]
        started.append(executor)
        return executor

    yield start
    for executor in started:
        executor.stop()


@pytest.fixture
def host_bridge(bridge_home) -> Iterator[Callable[..., object]]:
    """``start(port=None, token="t0k", label="agent") -> BrowserBridge`` hosting a broker on a
    free port (the real broker of bridgecli.browser); all are closed at the end."""
    from bridgecli.browser.connect import BrowserBridge

    opened: list[BrowserBridge] = []

    def start(
        port: int | None = None, token: str = "test-token", label: str = "agent", **kwargs: object
    ) -> BrowserBridge:
        bridge = BrowserBridge(port or free_port(), token, label=label, **kwargs).start()  # type: ignore[arg-type]
        opened.append(bridge)
        return bridge

    yield start
    for bridge in opened:
        bridge.close()
