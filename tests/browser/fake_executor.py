"""An in-memory test double of a browser: connects to the broker over a real WebSocket as role
``extension`` and answers commands from a dict of groups → tabs.

It deliberately uses *websocket-client* (not the ``websockets`` library the broker is built
on), with an extension ``Origin``, so the tests also prove interop with a second WebSocket
implementation, as the real extension is. Like the extension, its groups survive reconnects
(the extension keeps them in IndexedDB), it reconnects after a close, and it answers ``tabs``
with every group it runs — which is what the broker's ownership rebuild relies on.

Test hooks: ``params.sleep`` delays the answer (timeouts/abort), ``params.fail`` makes it fail,
``commands`` records every command received (to assert what was and was not routed here).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from typing import Any

import websocket

ORIGIN = "chrome-extension://abcdefghijklmnopabcdefghijklmnop"


class FakeExecutor:
    def __init__(
        self,
        port: int,
        token: str,
        *,
        id: str,
        label: str | None = None,
        default: bool = False,
        reconnect: bool = True,
        origin: str | None = ORIGIN,
        groups: dict[str, list[dict[str, Any]]] | None = None,
    ) -> None:
        self.url = f"ws://127.0.0.1:{port}/"
        self.token = token
        self.id = id
        self.label = label
        self.default = default
        self.reconnect = reconnect
        self.origin = origin
        #: what the browser already has open (a reconnecting browser reports it on `tabs`)
        self.groups: dict[str, list[dict[str, Any]]] = dict(groups or {})
        self.commands: list[dict[str, Any]] = []
        self.ready = threading.Event()
        self.readies = 0
        self.pings = 0
        self.close_codes: list[int | None] = []
        self._stop = threading.Event()
        self._ws: websocket.WebSocket | None = None
        self._send_lock = threading.Lock()
        self._next_tab = 100
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"fake-{id}")

    def start(self, wait: bool = True) -> FakeExecutor:
        self._thread.start()
        if wait:
            assert self.ready.wait(10), f"fake executor {self.id} never got ready"
        return self

    def stop(self) -> None:
        self._stop.set()
        ws = self._ws
        if ws is not None:
            try:
                ws.close()
            except Exception:
                pass
        self._thread.join(5)

    def wait_readies(self, count: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self.readies < count:
            assert time.monotonic() < deadline, f"{self.id}: {self.readies} readies, wanted {count}"
            time.sleep(0.01)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._session()
            except Exception:
                pass
            self.ready.clear()
            if not self.reconnect:
                return
            self._stop.wait(0.05)

    def _session(self) -> None:
        options: dict[str, Any] = {"timeout": 5}
        if self.origin is None:
            options["suppress_origin"] = True
        else:
            options["origin"] = self.origin
        ws = websocket.create_connection(self.url, **options)
        ws.settimeout(None)
        self._ws = ws
        hello = {
            "v": 1,
            "type": "hello",
            "token": self.token,
            "role": "extension",
            "id": self.id,
            "browser": "fake",
            "default": self.default,
        }
        if self.label:
            hello["label"] = self.label
        ws.send(json.dumps(hello))
        try:
            while True:
                opcode, data = ws.recv_data()
                if opcode == websocket.ABNF.OPCODE_CLOSE:
                    self.close_codes.append(int.from_bytes(data[:2], "big") if len(data) >= 2 else None)
                    try:
                        ws.send_close()  # answer the close handshake, as a browser does
                    except Exception:
                        pass
                    return
                frame = json.loads(data)
                kind = frame.get("type")
                if kind == "ready":
                    self.readies += 1
                    self.ready.set()
                elif kind == "ping":
                    self.pings += 1
                    self._send({"type": "pong"})
                elif kind == "command":
                    self.commands.append(frame)
                    sleep = frame.get("params", {}).get("sleep")
                    if sleep:
                        threading.Thread(target=self._answer_later, args=(frame, sleep), daemon=True).start()
                    else:
                        self._send(self.answer(frame))
        except (websocket.WebSocketConnectionClosedException, ConnectionError, OSError):
            self.close_codes.append(None)
        finally:
            ws.shutdown()

    def _answer_later(self, frame: dict[str, Any], sleep: float) -> None:
        time.sleep(sleep)
        try:
            self._send(self.answer(frame))
        except Exception:
            pass

    def _send(self, frame: dict[str, Any]) -> None:
        with self._send_lock:
            assert self._ws is not None
            self._ws.send(json.dumps(frame))

    def send_event(self, name: str, group: str | None = None, data: Any = None) -> None:
        self._send({"type": "event", "event": name, "group": group, "data": data})

    def answer(self, frame: dict[str, Any]) -> dict[str, Any]:
        """The executor's behaviour, dict-backed."""
        fid, action, group, params = frame["id"], frame["action"], frame.get("group"), frame["params"]

        def ok(data: Any = None) -> dict[str, Any]:
            return {"type": "result", "id": fid, "ok": True, "data": data if data is not None else {}}

        if params.get("fail"):
            return {
                "type": "result",
                "id": fid,
                "ok": False,
                "error": {"code": "executor_error", "message": "Element not found: #nope"},
            }
        if action == "tabs":
            names = [group] if group else sorted(self.groups)
            return ok({"groups": [{"group": g, "tabs": list(self.groups[g])} for g in names if g in self.groups]})
        if action == "open":
            self._next_tab += 1
            tab = {"tab": self._next_tab, "url": params.get("url", "about:blank"), "title": ""}
            self.groups.setdefault(group, []).append(tab)
            return ok({"tab": tab["tab"], "url": tab["url"], "executor": self.id})
        tabs = self.groups.get(group)
        if not tabs:
            return {
                "type": "result",
                "id": fid,
                "ok": False,
                "error": {"code": "executor_error", "message": f"no group {group!r} here"},
            }
        if action == "navigate":
            tabs[-1]["url"] = params["url"]
            return ok({"tab": tabs[-1]["tab"], "url": params["url"]})
        if action == "text":
            return ok(
                {"text": f"text of {tabs[-1]['url']}", "executor": self.id, "pad": "x" * int(params.get("pad", 0))}
            )
        if action in ("click", "type"):
            return ok({})
        if action == "snapshot":
            return ok({"snapshot": f"- document {tabs[-1]['url']}"})
        if action == "screenshot":
            return ok({"png": base64.b64encode(b"\x89PNG fake").decode()})
        if action == "close":
            self.groups.pop(group, None)
            return ok({})
        return {
            "type": "result",
            "id": fid,
            "ok": False,
            "error": {"code": "unknown_action", "message": f"Unknown tool: {action}"},
        }
