"""The browser bridge as the page shows it: executors and tab groups of this host's browser
broker, read through a guest connection (the dashboard never hosts the broker, so it cannot
win an election and then take the broker down when it exits)."""

from __future__ import annotations

import time
from typing import Any

from bridgecli.config import Config
from bridgecli.errors import BridgeError

#: seconds between two questions to the browser broker
EVERY = 2.0
#: the dashboard's own name among the broker's agents (left out of the agents it shows)
LABEL = "bridge-dashboard"


class BrowserView:
    """:meth:`snapshot` answers from a cache refreshed at most every :data:`EVERY` seconds."""

    def __init__(self, config: Config) -> None:
        self.port = config.get("browser.port")
        self.token = config.get("browser.token")
        self._bridge: Any = None
        self._asked = 0.0
        self._last: dict[str, Any] = {"running": False, "port": self.port}

    def snapshot(self) -> dict[str, Any]:
        if time.monotonic() - self._asked < EVERY:
            return self._last
        self._asked = time.monotonic()
        try:
            bridge = self._connect()
            answer = bridge.send("targets", timeout=5)
            groups = bridge.send("tabs", timeout=5).get("groups", [])
        except BridgeError as exc:
            self.close()
            self._last = {"running": False, "port": self.port, "why": str(exc)}
            return self._last
        agents = [a for a in answer.get("agents", []) if a.get("label") != LABEL]
        owners = {group: a.get("label") or a["id"] for a in agents for group in a.get("groups", [])}
        self._last = {
            "running": True,
            "port": self.port,
            "executors": [
                {
                    "id": t["id"],
                    "label": t["label"],
                    "kind": t.get("kind"),
                    "default": t["default"],
                    "groups": t.get("groups", []),
                }
                for t in answer["targets"]
            ],
            "agents": [{"id": a["id"], "label": a.get("label"), "groups": a.get("groups", [])} for a in agents],
            "groups": [
                {
                    "group": g["group"],
                    "executor": g.get("label") or g["executor"],
                    "owner": "orphan" if g["owner"] == "orphan" else owners.get(g["group"], "an agent"),
                    "connected": g["connected"],
                }
                for g in groups
            ],
        }
        return self._last

    def _connect(self) -> Any:
        if self._bridge is None or self._bridge.mode != "guest":
            from bridgecli.browser.connect import BrowserBridge

            self.close()
            self._bridge = BrowserBridge(
                self.port, self.token, label=LABEL, allow_host=False, failover=False, connect_timeout=2.0
            ).start()
        return self._bridge

    def close(self) -> None:
        if self._bridge is not None:
            try:
                self._bridge.close()
            except Exception:  # shutting down: a bridge that fails to close has nothing left to release
                pass
            self._bridge = None
