"""The dashboard against a local gateway that knows only some operations (an older version):
a stand-in speaking the local API's wire on a Unix socket. The channel view goes without
``channel_list`` and asks once per gateway; the search says the gateway cannot search."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridgecli.dashboard import history_view
from bridgecli.dashboard.collector import gateway_view

STATUS = {"host": "old", "pid": 4242, "entities": []}
ROSTER = {"entries": [], "gateways": [], "interval": 5}


class OldGateway:
    """Answers ``answers[op]`` to each request line, and REJECTED "unknown operation" (what a
    gateway says of an operation it does not have) to any other; records the ops asked."""

    def __init__(self, path: Path, answers: dict[str, dict]) -> None:
        self.answers = answers
        self.asked: list[str] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(8)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn, conn.makefile("rwb") as stream:
                for line in stream:
                    op = json.loads(line)["op"]
                    self.asked.append(op)
                    answer = self.answers.get(op)
                    if answer is None:
                        error = {"code": "REJECTED", "message": f"unknown operation {op!r}", "hint": "restart"}
                        reply = {"ok": False, "error": error}
                    else:
                        reply = {"ok": True, **answer}
                    stream.write(json.dumps(reply).encode() + b"\n")
                    stream.flush()


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    where = Path(tempfile.mkdtemp(prefix="dash", dir="/tmp"))  # a Unix socket path must be short
    yield where
    shutil.rmtree(where, ignore_errors=True)


def test_a_gateway_without_the_new_operations(socket_dir):
    path = socket_dir / "gw.sock"
    old = OldGateway(path, {"status": STATUS, "roster": ROSTER})
    view = gateway_view(str(path))
    assert view is not None and view["channels"] is None and view["receipts"] is None
    assert old.asked == ["status", "roster", "receipts", "channel_list"]
    # told this pid lacks them, the collector does not ask again
    old.asked.clear()
    gateway_view(str(path), lacking={"receipts": 4242, "channel_list": 4242})
    assert old.asked == ["status", "roster"]
    # another pid (a restarted, maybe upgraded gateway) is asked again
    gateway_view(str(path), lacking={"channel_list": 1})
    assert old.asked[-1] == "channel_list"

    status, body = history_view.search({"search": "x", "limit": 5}, str(path))
    assert status == 502 and "unknown operation 'history'" in body["error"] and "restart" in body["error"]


def test_search_without_a_gateway_and_with_one(socket_dir):
    path = socket_dir / "gw.sock"
    status, body = history_view.search({"search": "x"}, str(path))
    assert status == 503 and "no local gateway" in body["error"]
    found = {"msgId": "m1", "direction": "sent", "from": "f", "to": "t", "content": "hi", "ts": 1.0}
    OldGateway(path, {"history": {"messages": [found]}})
    status, body = history_view.search({"search": "hi"}, str(path))
    assert status == 200 and [(m["msgId"], m["directions"], m["content"]) for m in body["messages"]] == [
        ("m1", ["sent"], "hi")
    ]
