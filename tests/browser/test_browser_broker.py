"""Routing rules of the broker, pure: fake connections in, frames out (docs/design.md#browser-pure-broker)."""

from __future__ import annotations

from typing import Any

import pytest

from bridgecli.browser import frames as F
from bridgecli.browser.broker import Broker, group_names


class FakeConn:
    def __init__(self, name: str) -> None:
        self.name = name
        self.sent: list[dict[str, Any]] = []
        self.closed: tuple[int, str] | None = None

    def send(self, frame: dict[str, Any]) -> None:
        self.sent.append(frame)

    def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)

    def pop(self) -> list[dict[str, Any]]:
        out, self.sent = self.sent, []
        return out

    def last(self) -> dict[str, Any]:
        return self.sent[-1]


class Net:
    """A broker plus helpers that act like executors and agents."""

    def __init__(self) -> None:
        self.now = 0.0
        self.broker = Broker(clock=lambda: self.now)
        self.ids: dict[str, str] = {}
        self.conns: dict[str, FakeConn] = {}

    def executor(
        self,
        name: str,
        label: str | None = None,
        groups: list[str] = (),
        default: bool = False,
        answer_tabs: bool = True,
    ) -> FakeConn:
        conn = FakeConn(name)
        self.conns[name] = conn
        self.ids[name] = self.broker.attach(
            conn, {"role": "extension", "id": name, "label": label, "browser": "fake", "default": default}
        )
        ready, query = conn.pop()
        assert ready["type"] == "ready" and ready["role"] == "extension"
        assert query["action"] == "tabs" and query["group"] is None  # ownership rebuild query
        if answer_tabs:
            self.reply(name, query["id"], {"groups": [{"group": g, "tabs": []} for g in groups]})
        return conn

    def agent(self, name: str) -> FakeConn:
        conn = FakeConn(name)
        self.conns[name] = conn
        self.ids[name] = self.broker.attach(conn, {"role": "agent", "label": name})
        assert conn.pop()[0]["type"] == "ready"
        return conn

    def cmd(
        self,
        agent: str,
        req_id: Any,
        action: str,
        group: str | None = None,
        params: dict | None = None,
        target: str | None = None,
    ) -> None:
        self.broker.handle(self.ids[agent], F.command(req_id, action, group, params, target))

    def reply(self, executor: str, broker_id: str, data: Any = None, ok: bool = True) -> None:
        frame = F.ok(broker_id, data) if ok else F.fail(broker_id, "executor_error", "boom")
        self.broker.handle(self.ids[executor], frame)

    def forwarded(self, executor: str) -> dict[str, Any]:
        sent = self.conns[executor].pop()
        assert len(sent) == 1, sent
        return sent[0]

    def roundtrip(
        self,
        agent: str,
        req_id: Any,
        action: str,
        group: str | None = None,
        params: dict | None = None,
        target: str | None = None,
        data: Any = None,
    ) -> tuple[str | None, dict[str, Any]]:
        """Send a command; if an executor got it, answer it; return (executor, agent's frame)."""
        self.cmd(agent, req_id, action, group, params, target)
        hit = None
        for name, conn in self.conns.items():
            for frame in list(conn.sent):
                if frame.get("type") == "command":
                    hit = name
                    conn.sent.remove(frame)
                    self.reply(name, frame["id"], data if data is not None else {"from": name})
        return hit, self.conns[agent].pop()[-1]


@pytest.fixture
def net() -> Net:
    return Net()


def test_new_group_goes_to_first_connected_executor_and_result_returns_to_origin(net):
    net.executor("e1")
    net.executor("e2")
    net.agent("a1")
    net.agent("a2")
    net.cmd("a1", 7, "browser_open", "g", {"url": "http://x"})
    forwarded = net.forwarded("e1")
    assert forwarded["action"] == "open" and forwarded["id"] != 7 and "target" not in forwarded
    assert net.conns["e2"].sent == []
    net.reply("e1", forwarded["id"], {"tab": 1})
    assert net.conns["a1"].pop() == [F.ok(7, {"tab": 1})]
    assert net.conns["a2"].sent == []  # correlation: the other agent hears nothing
    assert net.broker.snapshot()["groups"] == {"g": ("e1", net.ids["a1"])}


def test_known_group_routes_to_its_owner_executor(net):
    net.executor("e1")
    net.executor("e2", label="work")
    net.agent("a")
    assert net.roundtrip("a", 1, "open", "g", target="work")[0] == "e2"
    hit, frame = net.roundtrip("a", 2, "text", "g")
    assert hit == "e2" and frame["ok"] and frame["id"] == 2


def test_target_by_id_and_label_and_errors(net):
    net.executor("e1", label="work")
    net.executor("e2", label="work")
    net.executor("e3", label="home")
    net.agent("a")
    assert net.roundtrip("a", 1, "open", "g1", target="e2")[0] == "e2"
    assert net.roundtrip("a", 2, "open", "g2", target="home")[0] == "e3"
    hit, frame = net.roundtrip("a", 3, "open", "g3", target="work")
    assert hit is None and frame["error"]["code"] == F.E_AMBIGUOUS_TARGET
    assert "e1" in frame["error"]["message"] and "e2" in frame["error"]["message"]
    hit, frame = net.roundtrip("a", 4, "open", "g4", target="nope")
    assert hit is None and frame["error"]["code"] == F.E_UNKNOWN_TARGET
    assert "g3" not in net.broker.group_owner and "g4" not in net.broker.group_owner


def test_owner_exclusive_with_the_documented_error_text(net):
    net.executor("e1")
    net.agent("a1")
    net.agent("a2")
    net.roundtrip("a1", 1, "open", "g")
    for action in ("text", "open", "close", "release", "tabs"):
        hit, frame = net.roundtrip("a2", 2, action, "g")
        assert hit is None, action
        assert frame["error"] == {"code": F.E_NOT_OWNER, "message": 'group "g" is owned by another client'}
    assert net.broker.snapshot()["groups"]["g"] == ("e1", net.ids["a1"])


def test_orphan_is_adopted_once(net):
    net.executor("e1")
    net.agent("a1")
    net.roundtrip("a1", 1, "open", "g")
    net.broker.detach(net.ids["a1"])
    assert net.broker.snapshot()["groups"]["g"] == ("e1", None)
    net.agent("a2")
    net.agent("a3")
    assert net.roundtrip("a2", 1, "text", "g")[0] == "e1"  # adopts
    hit, frame = net.roundtrip("a3", 1, "text", "g")  # the adoption was one-time
    assert hit is None and frame["error"]["code"] == F.E_NOT_OWNER


def test_release_orphans_and_notifies_other_agents(net):
    net.executor("e1")
    net.agent("a1")
    net.agent("a2")
    net.roundtrip("a1", 1, "open", "g")
    _, frame = net.roundtrip("a1", 2, "release", "g")
    assert frame == F.ok(2, {"released": "g"})
    assert net.conns["a2"].pop() == [F.event("released", "g")]
    assert net.roundtrip("a2", 3, "text", "g")[0] == "e1"
    _, frame = net.roundtrip("a1", 4, "release", "nope")
    assert frame["error"]["code"] == F.E_UNKNOWN_GROUP


def test_unknown_group_and_no_executor(net):
    net.agent("a")
    hit, frame = net.roundtrip("a", 1, "open", "g")
    assert frame["error"]["code"] == F.E_NO_EXECUTOR and "g" not in net.broker.group_owner
    net.executor("e1")
    hit, frame = net.roundtrip("a", 2, "click", "never-opened", {"selector": "#a"})
    assert hit is None and frame["error"]["code"] == F.E_UNKNOWN_GROUP


def test_executor_disconnect_fails_pending_and_marks_group_gone_until_it_returns(net):
    net.executor("e1")
    net.agent("a")
    net.roundtrip("a", 1, "open", "g")
    net.cmd("a", 2, "text", "g")
    assert net.forwarded("e1")["action"] == "text"
    net.broker.detach(net.ids["e1"])
    assert net.conns["a"].pop() == [F.fail(2, F.E_EXECUTOR_GONE, "browser 'e1' disconnected before answering")]
    hit, frame = net.roundtrip("a", 3, "text", "g")
    assert hit is None and frame["error"]["code"] == F.E_EXECUTOR_GONE
    net.executor("e1", groups=["g"])  # same stable id reconnects
    assert net.roundtrip("a", 4, "text", "g")[0] == "e1"


def test_default_executor_first_connected_overridable_and_moves_on_disconnect(net):
    net.executor("e1")
    net.executor("e2")
    net.agent("a")
    assert net.broker.primary == "e1"
    _, frame = net.roundtrip("a", 1, "default", params={"target": "e2"})
    assert frame == F.ok(1, {"default": "e2"})
    assert net.roundtrip("a", 2, "open", "g")[0] == "e2"
    net.executor("e3", default=True)  # the dashboard's "default browser" toggle
    assert net.broker.primary == "e3"
    net.broker.detach(net.ids["e3"])
    assert net.broker.primary == "e1"  # earliest remaining
    _, frame = net.roundtrip("a", 3, "default")
    assert frame["error"]["code"] == F.E_BAD_FRAME


def test_ownership_rebuilt_from_tabs_answers_starts_orphaned(net):
    net.executor("e1", groups=["old1", "old2"])
    net.executor("e2", groups=["old1", "other"])  # a duplicate name keeps the first
    assert net.broker.snapshot()["groups"] == {"old1": ("e1", None), "old2": ("e1", None), "other": ("e2", None)}
    net.agent("a")
    assert net.roundtrip("a", 1, "text", "old2")[0] == "e1"
    _, frame = net.roundtrip("a", 2, "targets")
    assert [t["groups"] for t in frame["data"]["targets"]] == [["old1", "old2"], ["other"]]


def test_rebuild_replaces_the_reconnecting_executors_group_set(net):
    """Groups closed while their browser was away are forgotten when it reconnects (not left
    as routable ghosts); its owner is told; groups opened after the query went out survive."""
    net.executor("e1", groups=["kept", "gone"])
    net.executor("e2", groups=["elsewhere"])
    net.agent("a")
    net.roundtrip("a", 1, "open", "mine")  # on e1 (the default), owned by "a"
    net.broker.detach(net.ids["e1"])
    net.executor("e1", groups=["kept"], answer_tabs=False)  # "gone" and "mine" closed meanwhile
    query_id = next(k for k, p in net.broker.pending.items() if p.internal)
    net.cmd("a", 2, "open", "fresh", target="e1")  # opened before the rebuild answer arrives
    net.reply("e1", net.forwarded("e1")["id"], {"tab": 7})
    assert net.conns["a"].pop() == [F.ok(2, {"tab": 7})]
    net.reply("e1", query_id, {"groups": [{"group": "kept", "tabs": []}]})
    assert net.broker.snapshot()["groups"] == {
        "kept": ("e1", None),
        "elsewhere": ("e2", None),
        "fresh": ("e1", net.ids["a"]),
    }
    assert net.conns["a"].pop() == [
        {"type": "event", "event": "group_closed", "group": "mine", "data": None, "executor": "e1"}
    ]
    hit, frame = net.roundtrip("a", 3, "text", "gone")
    assert hit is None and frame["error"]["code"] == F.E_UNKNOWN_GROUP


def test_group_listing_relative_to_caller(net):
    net.executor("e1", label="work")
    net.agent("a1")
    net.agent("a2")
    net.roundtrip("a1", 1, "open", "mine")
    net.roundtrip("a2", 1, "open", "theirs")
    _, frame = net.roundtrip("a1", 2, "tabs")
    owners = {row["group"]: row["owner"] for row in frame["data"]["groups"]}
    assert owners == {"mine": "you", "theirs": "other"}


def test_events_go_to_owner_or_broadcast_and_foreign_group_events_are_dropped(net):
    net.executor("e1")
    net.executor("e2")
    net.agent("a1")
    net.agent("a2")
    net.roundtrip("a1", 1, "open", "g")
    net.broker.handle(net.ids["e1"], F.event("tab_updated", "g", {"tab": 1}))
    assert [f["event"] for f in net.conns["a1"].pop()] == ["tab_updated"]
    assert net.conns["a2"].sent == []
    net.broker.handle(net.ids["e1"], F.event("browser_closing"))
    assert len(net.conns["a1"].pop()) == len(net.conns["a2"].pop()) == 1
    net.broker.handle(net.ids["e2"], F.event("tab_updated", "g"))  # e2 does not run g
    assert net.conns["a1"].sent == [] and net.conns["a2"].sent == []
    net.broker.handle(net.ids["e1"], F.event("group_closed", "g"))
    assert "g" not in net.broker.group_owner


def test_results_only_accepted_from_the_executor_that_was_asked(net):
    net.executor("e1")
    net.executor("e2")
    net.agent("a")
    net.cmd("a", 1, "open", "g")
    forwarded = net.forwarded("e1")
    net.reply("e2", forwarded["id"], {"forged": True})  # wrong executor: ignored
    assert net.conns["a"].sent == []
    net.reply("e1", forwarded["id"], {"tab": 5})
    assert net.conns["a"].pop() == [F.ok(1, {"tab": 5})]
    net.reply("e1", forwarded["id"], {"tab": 6})  # duplicate: dropped
    assert net.conns["a"].sent == []


def test_failed_open_forgets_the_new_group_and_close_forgets_it(net):
    net.executor("e1")
    net.agent("a")
    net.cmd("a", 1, "open", "g")
    net.reply("e1", net.forwarded("e1")["id"], ok=False)
    assert net.conns["a"].pop()[0]["error"]["code"] == "executor_error"
    assert "g" not in net.broker.group_owner
    net.roundtrip("a", 2, "open", "g")
    net.roundtrip("a", 3, "close", "g", {"tab": 1})
    assert "g" in net.broker.group_owner  # closing one tab keeps the group
    net.roundtrip("a", 4, "close", "g")
    assert "g" not in net.broker.group_owner


def test_agent_gone_before_result_drops_it(net):
    net.executor("e1")
    net.agent("a")
    net.cmd("a", 1, "open", "g")
    forwarded = net.forwarded("e1")
    net.broker.detach(net.ids["a"])
    net.reply("e1", forwarded["id"], {})
    assert net.conns["a"].sent == [] and net.broker.snapshot()["pending"] == 0


def test_bad_frames_from_each_role_get_errors_not_crashes(net):
    net.executor("e1")
    net.agent("a")
    for bad in (
        {"type": "command", "id": 1, "action": 5},
        {"type": "command", "id": 2, "action": "frobnicate", "group": "g"},
        {"type": "command", "id": 3, "action": "click"},
        {"type": "command", "id": 4, "action": "open", "group": "g", "params": []},
        {"type": "command", "id": {}, "action": "open", "group": "g"},
        {"type": "result", "id": 1, "ok": True},
    ):
        net.broker.handle(net.ids["a"], bad)
    codes = [f["error"]["code"] for f in net.conns["a"].pop()]
    assert codes == [F.E_BAD_FRAME, F.E_UNKNOWN_ACTION, F.E_BAD_FRAME, F.E_BAD_FRAME, F.E_BAD_FRAME, F.E_BAD_FRAME]
    net.broker.handle(net.ids["e1"], {"type": "command", "id": 1, "action": "open", "group": "g"})
    net.broker.handle(net.ids["e1"], {"type": "result", "id": "b1"})
    assert [f["type"] for f in net.conns["e1"].pop()] == ["error", "error"]
    net.broker.handle(net.ids["a"], F.PING)
    assert net.conns["a"].pop() == [F.PONG]
    assert net.broker.snapshot()["groups"] == {}


def test_same_executor_id_replaces_the_old_connection(net):
    old = net.executor("e1")
    net.agent("a")
    net.cmd("a", 1, "open", "g")
    net.executor("e1")
    assert old.closed == (F.CLOSE_REPLACED, "replaced by a newer connection")
    assert net.conns["a"].pop()[0]["error"]["code"] == F.E_EXECUTOR_GONE
    assert net.broker.snapshot()["executors"] == ["e1"]


def test_unanswered_commands_expire(net):
    net.executor("e1")
    net.agent("a")
    net.cmd("a", 1, "open", "g")
    net.now = 10
    assert net.broker.expire(30) == 0
    net.now = 31
    assert net.broker.expire(30) == 1
    assert net.conns["a"].pop()[0]["error"]["code"] == F.E_TIMEOUT


def test_busy_when_too_many_pending(net, monkeypatch):
    from bridgecli.browser import broker as broker_mod

    monkeypatch.setattr(broker_mod, "MAX_PENDING", 2)
    net.executor("e1")
    net.agent("a")
    net.cmd("a", 1, "open", "g")
    net.cmd("a", 2, "text", "g")
    net.cmd("a", 3, "text", "g")
    assert net.conns["a"].pop()[-1]["error"]["code"] == F.E_BUSY


def test_group_names_tolerates_executor_shapes():
    assert group_names({"groups": [{"group": "a"}, {"name": "b"}, {"title": "c"}, "d", {}, 5]}) == ["a", "b", "c", "d"]
    assert group_names({"groups": {"x": [], "": []}}) == ["x"]
    assert group_names(None) == [] and group_names({"groups": "junk"}) == []
