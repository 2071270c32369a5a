"""The ``cdp`` browser target: a Chromium driven over DevTools, served as an executor."""

from __future__ import annotations

import logging
import threading
from typing import Any

from bridgecli.errors import BrowserError
from bridgecli.interfaces import ExecutorOptions
from bridgecli_cdp.actions import CdpActions
from bridgecli_cdp.cdp import Cdp, browser_ws_url
from bridgecli_cdp.chromium import Chromium
from bridgecli_cdp.registry import GroupRegistry, stable_executor_id
from bridgecli_cdp.session import ExecutorSession

log = logging.getLogger("bridgecli.cdp")


class CdpTarget:
    """``bridge browser launch --kind cdp`` / ``bridge browser attach --cdp URL``.

    Settings (``[plugins.cdp]`` in bridge.toml): ``binary`` (Chromium path), ``args``
    (extra Chromium flags).
    """

    kind = "cdp"

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        self.settings = dict(settings or {})

    def launch(self, options: ExecutorOptions, *, headless: bool, stop: threading.Event) -> None:
        """Start a private Chromium, serve it until ``stop`` is set, then kill it."""
        extra = list(self.settings.get("args", [])) + list(options.settings.get("chromium_args", []))
        with Chromium(headless=headless, binary=self.settings.get("binary"), extra_args=extra) as browser:
            _notify(options, "launched", {"devtools": browser.endpoint, "pid": browser.pid})
            self._serve(options, browser.endpoint, stop, alive=browser.alive)

    def attach(self, options: ExecutorOptions, *, endpoint: str, stop: threading.Event) -> None:
        """Serve an already running Chromium at ``endpoint`` until ``stop`` is set."""
        self._serve(options, endpoint, stop, alive=lambda: True)

    def _serve(self, options: ExecutorOptions, endpoint: str, stop: threading.Event, *, alive) -> None:
        cdp = Cdp(browser_ws_url(endpoint))
        try:
            executor_id = options.executor_id or stable_executor_id(options.label)
            registry = GroupRegistry(executor_id)
            session_box: list[ExecutorSession] = []

            def emit(event: dict[str, Any]) -> None:
                if session_box:
                    session_box[0].emit(event)

            actions = CdpActions(cdp, registry, emit=emit)
            gone = lambda: cdp.closed.is_set() or not alive()  # noqa: E731
            session = ExecutorSession(
                options,
                executor_id=executor_id,
                browser="cdp",
                handler=actions.handle,
                should_stop=lambda: stop.is_set() or gone(),
                on_status=options.settings.get("on_status"),
            )
            session_box.append(session)
            session.run()
            if gone() and not stop.is_set():
                raise BrowserError(
                    "the browser went away (Chromium exited or closed DevTools)",
                    "relaunch it with `bridge browser launch`",
                )
        finally:
            cdp.close()


def _notify(options: ExecutorOptions, state: str, info: dict[str, Any]) -> None:
    callback = options.settings.get("on_status")
    if callback is not None:
        callback(state, info)
