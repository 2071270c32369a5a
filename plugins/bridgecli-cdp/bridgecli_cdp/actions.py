"""The executor actions (open, navigate, tabs, click, type, text, snapshot, screenshot,
close) carried out over CDP, with the same parameters and answers as the MV3 extension.

Page-side work goes through ``page.js`` from the extension folder, so both executors read
and fill pages with the very same code and error texts.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from bridgecli.browser import frames
from bridgecli.errors import BrowserError
from bridgecli_cdp.cdp import Cdp
from bridgecli_cdp.registry import GroupRegistry

DEFAULT_TIMEOUT = 30.0
ACTIONS = frames.EXECUTOR_ACTIONS


def page_script() -> str:
    """The shared page helper source shipped with the extension."""
    return resources.files("bridgecli.browser").joinpath("extension/page.js").read_text()


class CdpActions:
    """Dispatches one command to its action; every action is bounded by ``timeout``."""

    def __init__(self, cdp: Cdp, registry: GroupRegistry, emit: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.cdp = cdp
        self.registry = registry
        self.emit = emit or (lambda event: None)
        self._sessions: dict[str, str] = {}
        self._lock = threading.Lock()
        self._page = page_script()
        cdp.listen(self._on_event)
        cdp.call("Target.setDiscoverTargets", {"discover": True})
        registry.prune(t["targetId"] for t in self._page_targets())

    # --- plumbing -----------------------------------------------------------------------

    def _on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Target.targetDestroyed":
            target_id = params.get("targetId", "")
            with self._lock:
                self._sessions.pop(target_id, None)
            group = self.registry.remove_tab(target_id)
            if group is not None:
                self.emit(frames.event("tab_closed", group, {"tab": target_id}))
                if not self.registry.tabs(group):
                    self.emit(frames.event("group_closed", group))
        elif method == "Target.detachedFromTarget":
            with self._lock:
                for target, session in list(self._sessions.items()):
                    if session == params.get("sessionId"):
                        del self._sessions[target]

    def _page_targets(self) -> list[dict[str, Any]]:
        infos = self.cdp.call("Target.getTargets").get("targetInfos", [])
        return [t for t in infos if t.get("type") == "page"]

    def _session(self, target_id: str) -> str:
        with self._lock:
            session = self._sessions.get(target_id)
        if session:
            return session
        session = self.cdp.call("Target.attachToTarget", {"targetId": target_id, "flatten": True})["sessionId"]
        self.cdp.call("Page.enable", session=session)
        self.cdp.call("Page.setLifecycleEventsEnabled", {"enabled": True}, session=session)
        with self._lock:
            self._sessions[target_id] = session
        return session

    def _tab(self, group: str, params: dict[str, Any]) -> str:
        """The tab an action applies to: ``params.tab`` (must be in the group) or the
        group's active tab."""
        tabs = self.registry.tabs(group)
        if not tabs:
            raise BrowserError(f'group "{group}" has no tabs in this browser', "open one first with the open action")
        wanted = params.get("tab")
        if wanted is None:
            return self.registry.active(group) or tabs[-1]
        if str(wanted) not in tabs:
            raise BrowserError(f'tab {wanted} is not in group "{group}"', "list the group's tabs with the tabs action")
        self.registry.set_active(group, str(wanted))
        return str(wanted)

    def _evaluate(self, session: str, op: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
        expression = f"(() => {{ {self._page}\n return __bridgePage({json.dumps(op)}, {json.dumps(args)}); }})()"
        reply = self.cdp.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=session,
            timeout=timeout,
        )
        if "exceptionDetails" in reply:
            text = reply["exceptionDetails"].get("exception", {}).get("description") or reply["exceptionDetails"].get(
                "text"
            )
            raise BrowserError(f"{op} failed in the page: {text}", "check the page and the selector")
        value = reply.get("result", {}).get("value") or {}
        if value.get("error"):
            raise BrowserError(value["error"])
        value.pop("ok", None)
        return value

    def _load(self, session: str, url: str, timeout: float) -> None:
        """Navigate and wait for that navigation's load event.

        The waiter is registered *before* ``Page.navigate`` is sent and matches the loader id
        the navigation reports, so neither an early event nor a stale one from the previous
        page can fool it; a readyState poll of the same loader backs it up.
        """
        waiter = self.cdp.waiter(
            lambda m, p: m == "Page.lifecycleEvent" and p.get("name") == "load" and p.get("__session") == session
        )
        deadline = time.monotonic() + timeout  # one budget for the request and the load
        too_slow = BrowserError(f"{url} did not finish loading within {timeout:g} s", "retry, or raise params.timeout")
        try:
            try:  # Page.navigate itself waits for the response headers
                reply = self.cdp.call("Page.navigate", {"url": url}, session=session, timeout=timeout)
            except BrowserError as exc:
                if "got no answer" in exc.message:
                    raise too_slow from None
                raise
            if reply.get("errorText"):
                raise BrowserError(
                    f"navigation to {url} failed: {reply['errorText']}", "check the URL and that its server is up"
                )
            loader = reply.get("loaderId")
            if not loader:  # same-document navigation (#hash): nothing to load
                return
            while time.monotonic() < deadline:
                if waiter.wait_for(lambda e: e[1].get("loaderId") == loader, 0.5):
                    return
                tree = self.cdp.call("Page.getFrameTree", session=session, timeout=5)["frameTree"]["frame"]
                if tree.get("loaderId") == loader:
                    state = self.cdp.call(
                        "Runtime.evaluate",
                        {"expression": "document.readyState", "returnByValue": True},
                        session=session,
                        timeout=5,
                    )
                    if state.get("result", {}).get("value") == "complete":
                        return
            raise too_slow
        finally:
            self.cdp.drop(waiter)

    def _info(self, session: str) -> dict[str, Any]:
        # A one-liner rather than page.js: this runs after every open/navigate.
        reply = self.cdp.call(
            "Runtime.evaluate",
            {"expression": "({url: location.href, title: document.title})", "returnByValue": True},
            session=session,
            timeout=10,
        )
        return reply.get("result", {}).get("value") or {}

    # --- actions ------------------------------------------------------------------------

    def handle(self, action: str, group: str | None, params: dict[str, Any]) -> dict[str, Any]:
        """Run one command; returns the result payload or raises BrowserError."""
        action = action.removeprefix("browser_")
        if action not in ACTIONS:
            raise BrowserError(f"unknown action {action!r}", "use one of " + ", ".join(ACTIONS))
        if action != "tabs" and not group:
            raise BrowserError(f"{action} needs a group", "pass the group name")
        timeout = float(params.get("timeout") or DEFAULT_TIMEOUT)
        return getattr(self, "do_" + action)(group, params, timeout)

    def do_open(self, group: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        url = params.get("url") or "about:blank"
        target_id = self.cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.registry.add(group, target_id)
        session = self._session(target_id)
        if url != "about:blank":
            self._load(session, url, timeout)
        return {"group": group, "tab": target_id, **self._info(session)}

    def do_navigate(self, group: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        url = params.get("url")
        if not url:
            raise BrowserError("navigate needs a url", "pass url=https://…")
        target_id = self._tab(group, params)
        session = self._session(target_id)
        self._load(session, url, timeout)
        return {"group": group, "tab": target_id, **self._info(session)}

    def do_tabs(self, group: str | None, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        infos = {t["targetId"]: t for t in self._page_targets()}
        self.registry.prune(infos)
        names = [group] if group else self.registry.names()
        groups = []
        for name in names:
            active = self.registry.active(name)
            tabs = [
                {"tab": t, "url": infos[t].get("url", ""), "title": infos[t].get("title", ""), "active": t == active}
                for t in self.registry.tabs(name)
                if t in infos
            ]
            if tabs:  # an unknown group answers {"groups": []} (protocol)
                groups.append({"group": name, "tabs": tabs})
        return {"groups": groups}

    def do_click(self, group: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        return self._evaluate(
            self._session(self._tab(group, params)), "click", {"selector": params.get("selector")}, timeout
        )

    def do_type(self, group: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        args = {"selector": params.get("selector"), "text": params.get("text"), "clear": params.get("clear", True)}
        return self._evaluate(self._session(self._tab(group, params)), "type", args, timeout)

    def do_text(self, group: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        return self._evaluate(
            self._session(self._tab(group, params)), "text", {"selector": params.get("selector")}, timeout
        )

    def do_snapshot(self, group: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        return self._evaluate(self._session(self._tab(group, params)), "snapshot", {}, timeout)

    def do_screenshot(self, group: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        target_id = self._tab(group, params)
        session = self._session(target_id)
        # A background tab may not paint; bringing it to the front makes capture reliable.
        self.cdp.call("Page.bringToFront", session=session, timeout=timeout)
        shot = self.cdp.call("Page.captureScreenshot", {"format": "png"}, session=session, timeout=timeout)
        return {"tab": target_id, "png": shot["data"]}

    def do_close(self, group: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        tabs = [self._tab(group, params)] if params.get("tab") is not None else self.registry.tabs(group)
        for target_id in tabs:
            try:
                self.cdp.call("Target.closeTarget", {"targetId": target_id}, timeout=timeout)
            except BrowserError:
                pass  # already gone: closing is idempotent
            self.registry.remove_tab(target_id)
        return {"group": group, "closed": tabs}
