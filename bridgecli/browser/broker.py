"""The role-aware broker: routes agents' commands to executors by tab-group ownership.

Pure routing (docs/design.md#browser-pure-broker): a connection is anything with
``send(frame)`` and ``close(code, reason)`` (:class:`~bridgecli.browser.broker_records.Conn`),
so tests feed fake connections, and the host's in-process agent is one more ``Conn``. State
(records in :mod:`bridgecli.browser.broker_records`): ``executors`` and ``agents`` by client
id, ``group_owner`` (group → executor and owning agent, ``None`` = orphaned), ``pending``
requests and ``primary`` (the default executor).

Concurrency: state changes under ``_lock``; their frames are sent under ``_send_lock``, taken
before ``_lock`` is released, so every connection sees frames in state-change order while a
slow socket holds up only its own send.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from bridgecli.browser import frames as F
from bridgecli.browser.broker_records import Agent, Conn, Executor, Owner, Pending

#: Commands in flight across all agents before new ones are refused with ``busy``.
MAX_PENDING = 10_000


class Broker:
    """Routing state and rules; see the module docstring and ``docs/browser-protocol.md``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, log: Callable[[str], None] | None = None) -> None:
        self.executors: dict[str, Executor] = {}
        self.agents: dict[str, Agent] = {}
        self.group_owner: dict[str, Owner] = {}
        self.pending: dict[str, Pending] = {}
        self.primary: str | None = None
        self._clock = clock
        self._log = log or (lambda text: None)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._out: list[tuple[Conn, dict[str, Any] | None, tuple[int, str] | None]] = []

    # --- plumbing ------------------------------------------------------------------------------

    def _queue(self, conn: Conn, frame: dict[str, Any]) -> None:
        self._out.append((conn, frame, None))

    def _queue_close(self, conn: Conn, code: int, reason: str) -> None:
        self._out.append((conn, None, (code, reason)))

    def _run(self, func: Callable[..., Any], *args: Any) -> Any:
        """Run ``func`` under the state lock, then flush the frames it queued, in order."""
        with self._lock:
            self._out = []
            result = func(*args)
            out, self._out = self._out, []
            self._send_lock.acquire()
        try:
            for conn, frame, close in out:
                try:
                    if frame is not None:
                        conn.send(frame)
                    elif close is not None:
                        conn.close(*close)
                except Exception:  # a dead peer is detached by its own thread
                    pass
        finally:
            self._send_lock.release()
        return result

    def _live_executor(self, executor_id: str) -> Executor | None:
        for executor in self.executors.values():
            if executor.executor_id == executor_id:
                return executor
        return None

    # --- connections ---------------------------------------------------------------------------

    def attach(self, conn: Conn, hello: dict[str, Any]) -> str:
        """Register a connection after its (validated, authenticated) hello; returns its
        client id. The ``ready`` frame is sent to it, and executors are asked for their groups."""
        return self._run(self._attach, conn, hello)

    def _attach(self, conn: Conn, hello: dict[str, Any]) -> str:
        seq = next(self._ids)
        client_id = f"c{seq}"
        role = hello.get("role") or F.ROLE_EXTENSION
        if role == F.ROLE_AGENT:
            self.agents[client_id] = Agent(client_id, conn, hello.get("label"))
            self._queue(conn, F.ready(client_id, role))
            return client_id
        executor_id = hello.get("id") or client_id
        old = self._live_executor(executor_id)
        if old is not None:  # same browser reconnecting before its old socket timed out
            self._queue_close(old.conn, F.CLOSE_REPLACED, "replaced by a newer connection")
            self._detach(old.client_id)
        executor = Executor(client_id, conn, executor_id, hello.get("label") or executor_id, hello.get("browser"), seq)
        self.executors[client_id] = executor
        if hello.get("default") or self.primary is None or self._live_executor(self.primary) is None:
            self.primary = executor_id
        self._queue(conn, F.ready(client_id, role))
        known = frozenset(g for g, o in self.group_owner.items() if o.executor_id == executor_id)
        self._forward(executor, None, None, F.TABS_ACTION, None, {}, False, internal=True, known=known)
        self._log(f"executor {executor.label} ({executor_id}) connected")
        return client_id

    def detach(self, client_id: str) -> None:
        """Forget a closed connection: an agent's groups become orphaned; an executor's
        in-flight commands fail with ``executor_gone``."""
        self._run(self._detach, client_id)

    def _detach(self, client_id: str) -> None:
        if self.agents.pop(client_id, None) is not None:
            for owner in self.group_owner.values():
                if owner.agent_id == client_id:
                    owner.agent_id = None
            for req_id in [k for k, p in self.pending.items() if p.agent_id == client_id]:
                self.pending[req_id].agent_id = None  # the result is dropped when it comes
                self.pending[req_id].agent_req_id = None
            return
        executor = self.executors.pop(client_id, None)
        if executor is None:
            return
        self._log(f"executor {executor.label} ({executor.executor_id}) disconnected")
        for req_id in [k for k, p in self.pending.items() if p.executor_id == executor.executor_id]:
            pending = self.pending.pop(req_id)
            self._reply_fail(pending, F.E_EXECUTOR_GONE, f"browser {executor.label!r} disconnected before answering")
        if self.primary == executor.executor_id:
            rest = sorted(self.executors.values(), key=lambda e: e.seq)
            self.primary = rest[0].executor_id if rest else None

    # --- frames --------------------------------------------------------------------------------

    def handle(self, client_id: str, frame: dict[str, Any]) -> None:
        """Process one decoded frame from a connection (``frames.decode`` already passed)."""
        self._run(self._handle, client_id, frame)

    def _handle(self, client_id: str, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        agent = self.agents.get(client_id)
        executor = self.executors.get(client_id)
        conn = agent.conn if agent else executor.conn if executor else None
        if conn is None:
            return
        if kind == "ping":
            self._queue(conn, F.PONG)
        elif kind == "pong":
            pass
        elif agent is not None and kind == "command":
            try:
                self._command(agent, frame)
            except F.FrameError as exc:
                self._queue(
                    conn, F.fail(exc.frame_id if exc.frame_id is not None else frame.get("id"), exc.code, exc.message)
                )
        elif executor is not None and kind == "result":
            try:
                self._result(executor, F.validate_result(frame))
            except F.FrameError as exc:
                self._queue(conn, F.error(exc.code, exc.message, frame.get("id")))
        elif executor is not None and kind == "event":
            self._event(executor, frame)
        else:
            role = "agent" if agent else "executor"
            self._queue(conn, F.error(F.E_BAD_FRAME, f"an {role} may not send {kind!r} frames", frame.get("id")))

    def _command(self, agent: Agent, raw: dict[str, Any]) -> None:
        cmd = F.validate_command(raw)
        action, group, req_id = cmd["action"], cmd["group"], cmd["id"]
        if action in F.BROKER_ACTIONS or (action == F.TABS_ACTION and group is None):
            self._queue(agent.conn, self._broker_action(agent, cmd))
            return
        if len(self.pending) >= MAX_PENDING:
            raise F.FrameError(F.E_BUSY, "too many commands in flight — retry shortly", req_id)
        owner = self.group_owner.get(group)
        created = False
        if owner is not None:
            self._check_owner(agent, group, owner, req_id)
            executor = self._live_executor(owner.executor_id)
            if executor is None:
                raise F.FrameError(
                    F.E_EXECUTOR_GONE,
                    f"the browser running group {group!r} "
                    f"({owner.executor_id}) is disconnected — wait for it to "
                    "reconnect, or release the group and open it elsewhere",
                    req_id,
                )
            owner.agent_id = agent.client_id  # adopts an orphan (no-op for the owner)
        else:
            if action != F.OPEN_ACTION:
                raise F.FrameError(F.E_UNKNOWN_GROUP, f"no group {group!r} — create it with open first", req_id)
            executor = self._resolve(cmd["target"], req_id)
            self.group_owner[group] = Owner(executor.executor_id, agent.client_id)
            created = True
        self._forward(executor, agent.client_id, req_id, action, group, cmd["params"], created)

    def _check_owner(self, agent: Agent, group: str, owner: Owner, req_id: Any) -> None:
        if owner.agent_id is not None and owner.agent_id != agent.client_id and owner.agent_id in self.agents:
            raise F.FrameError(F.E_NOT_OWNER, f'group "{group}" is owned by another client', req_id)

    def _resolve(self, target: str | None, req_id: Any) -> Executor:
        live = sorted(self.executors.values(), key=lambda e: e.seq)
        if target is None:
            executor = self._live_executor(self.primary) if self.primary else None
            if executor is None:
                raise F.FrameError(
                    F.E_NO_EXECUTOR,
                    "no browser is connected to the bridge — "
                    "start one with `bridge browser launch --label NAME` or "
                    "load the extension",
                    req_id,
                )
            return executor
        by_id = [e for e in live if e.executor_id == target]
        if by_id:
            return by_id[0]
        by_label = [e for e in live if e.label == target]
        if len(by_label) == 1:
            return by_label[0]
        if by_label:
            raise F.FrameError(
                F.E_AMBIGUOUS_TARGET,
                f"target {target!r} matches several "
                "browsers: " + ", ".join(e.executor_id for e in by_label) + " — pass one of these ids instead",
                req_id,
            )
        known = ", ".join(f"{e.label} ({e.executor_id})" for e in live) or "none"
        raise F.FrameError(
            F.E_UNKNOWN_TARGET, f"no connected browser has id or label {target!r} (connected: {known})", req_id
        )

    def _forward(
        self,
        executor: Executor,
        agent_id: str | None,
        agent_req_id: Any,
        action: str,
        group: str | None,
        params: dict[str, Any],
        created_group: bool,
        internal: bool = False,
        known: frozenset[str] = frozenset(),
    ) -> None:
        broker_id = f"b{next(self._ids)}"
        self.pending[broker_id] = Pending(
            agent_id,
            agent_req_id,
            executor.executor_id,
            action,
            group,
            params,
            created_group,
            self._clock(),
            internal,
            known,
        )
        self._queue(executor.conn, F.command(broker_id, action, group, params))

    def _reply_fail(self, pending: Pending, code: str, message: str) -> None:
        if pending.created_group:
            self._forget_group(pending.group, pending.executor_id)
        agent = self.agents.get(pending.agent_id) if pending.agent_id else None
        if agent is not None:
            self._queue(agent.conn, F.fail(pending.agent_req_id, code, message))

    def _forget_group(self, group: str | None, executor_id: str) -> None:
        if group is None:
            return
        owner = self.group_owner.get(group)
        if owner is not None and owner.executor_id == executor_id:
            del self.group_owner[group]

    def _result(self, executor: Executor, result: dict[str, Any]) -> None:
        pending = self.pending.get(str(result["id"]))
        if pending is None or pending.executor_id != executor.executor_id:
            return  # late (timed out / agent gone) or not this executor's to answer: drop
        del self.pending[str(result["id"])]
        if pending.internal:
            if result["ok"]:
                self._rebuild(executor, result.get("data"), pending.known)
            return
        if result["ok"]:
            if pending.action == "close" and "tab" not in pending.params:
                self._forget_group(pending.group, executor.executor_id)
            agent = self.agents.get(pending.agent_id) if pending.agent_id else None
            if agent is not None:
                self._queue(agent.conn, F.ok(pending.agent_req_id, result.get("data")))
        else:
            self._reply_fail(pending, result["error"]["code"], result["error"]["message"])

    def _rebuild(self, executor: Executor, data: Any, known: frozenset[str] = frozenset()) -> None:
        """Make the executor's answer its group set: record every group it reports as run by it
        (new ones orphaned — the failover rule), and forget the groups recorded for it when it
        was asked that it no longer reports (closed while it was away), telling their owner.

        Only ``known`` groups may be dropped: a group opened on this executor after the query
        went out is legitimately missing from the answer."""
        names = list(group_names(data))
        reported = set(names)
        for name in sorted(known - reported):
            owner = self.group_owner.get(name)
            if owner is None or owner.executor_id != executor.executor_id:
                continue
            if any(
                p.group == name and p.executor_id == executor.executor_id and not p.internal
                for p in self.pending.values()
            ):
                continue  # a command on it is in flight: let its answer decide
            del self.group_owner[name]
            self._log(f"group {name!r} is no longer run by {executor.executor_id}; forgotten")
            agent = self.agents.get(owner.agent_id) if owner.agent_id else None
            if agent is not None:
                self._queue(agent.conn, dict(F.event("group_closed", name), executor=executor.executor_id))
        for name in names:
            owner = self.group_owner.get(name)
            if owner is None:
                self.group_owner[name] = Owner(executor.executor_id, None)
            elif owner.executor_id != executor.executor_id:
                self._log(
                    f"group {name!r} reported by {executor.executor_id} is already run "
                    f"by {owner.executor_id}; keeping the first"
                )

    def _event(self, executor: Executor, frame: dict[str, Any]) -> None:
        group = frame.get("group") if isinstance(frame.get("group"), str) else None
        out = F.event(str(frame.get("event") or "event"), group, frame.get("data"))
        out["executor"] = executor.executor_id
        owner = self.group_owner.get(group) if group else None
        if owner is not None and owner.executor_id != executor.executor_id:
            return  # an executor may not speak for a group another browser runs
        if out["event"] == "group_closed" and group:
            self._forget_group(group, executor.executor_id)
        target = self.agents.get(owner.agent_id) if owner and owner.agent_id else None
        for agent in [target] if target else list(self.agents.values()):
            self._queue(agent.conn, out)

    # --- broker-answered actions ---------------------------------------------------------------

    def _broker_action(self, agent: Agent, cmd: dict[str, Any]) -> dict[str, Any]:
        action, req_id, group = cmd["action"], cmd["id"], cmd["group"]
        if action == "targets":
            return F.ok(req_id, {"targets": self.targets(), "agents": self.agent_list()})
        if action == F.TABS_ACTION:
            return F.ok(req_id, {"groups": self.groups(agent.client_id)})
        if action == "default":
            target = cmd["params"].get("target") or cmd["target"]
            if not isinstance(target, str):
                raise F.FrameError(F.E_BAD_FRAME, "default needs a target (label or id)", req_id)
            self.primary = self._resolve(target, req_id).executor_id
            return F.ok(req_id, {"default": self.primary})
        # release
        owner = self.group_owner.get(group)
        if owner is None:
            raise F.FrameError(F.E_UNKNOWN_GROUP, f"no group {group!r} to release", req_id)
        self._check_owner(agent, group, owner, req_id)
        owner.agent_id = None
        for other in self.agents.values():
            if other is not agent:
                self._queue(other.conn, F.event("released", group))
        return F.ok(req_id, {"released": group})

    def targets(self) -> list[dict[str, Any]]:
        """Connected executors in connection order, with the groups each runs.

        ``kind`` is the executor's kind (hello ``browser``: ``chrome``, ``cdp``, …); ``browser``
        repeats it for clients written before it was named ``kind``."""
        return [
            {
                "id": e.executor_id,
                "label": e.label,
                "kind": e.browser,
                "browser": e.browser,
                "groups": sorted(g for g, o in self.group_owner.items() if o.executor_id == e.executor_id),
                "default": e.executor_id == self.primary,
            }
            for e in sorted(self.executors.values(), key=lambda e: e.seq)
        ]

    def agent_list(self) -> list[dict[str, Any]]:
        """Connected agents with the groups each owns (what ``bridge dashboard`` shows)."""
        return [
            {
                "id": a.client_id,
                "label": a.label,
                "groups": sorted(g for g, o in self.group_owner.items() if o.agent_id == a.client_id),
            }
            for a in sorted(self.agents.values(), key=lambda a: a.client_id)
        ]

    def groups(self, agent_id: str | None) -> list[dict[str, Any]]:
        """Every known group with its executor and whose it is, relative to ``agent_id``."""
        rows = []
        for name, owner in sorted(self.group_owner.items()):
            executor = self._live_executor(owner.executor_id)
            who = "orphan" if owner.agent_id is None else "you" if owner.agent_id == agent_id else "other"
            rows.append(
                {
                    "group": name,
                    "executor": owner.executor_id,
                    "label": executor.label if executor else None,
                    "owner": who,
                    "connected": executor is not None,
                }
            )
        return rows

    # --- housekeeping --------------------------------------------------------------------------

    def expire(self, max_age: float) -> int:
        """Fail commands an executor has not answered for ``max_age`` seconds (so a hung tab
        cannot leak pending entries); returns how many expired."""
        return self._run(self._expire, max_age)

    def _expire(self, max_age: float) -> int:
        now = self._clock()
        stale = [k for k, p in self.pending.items() if now - p.started > max_age]
        for req_id in stale:
            pending = self.pending.pop(req_id)
            self._reply_fail(
                pending, F.E_TIMEOUT, f"the browser did not answer {pending.action!r} within {max_age:.0f} s"
            )
        return len(stale)

    def snapshot(self) -> dict[str, Any]:
        """A consistent copy of the routing state, for tests and diagnostics."""
        with self._lock:
            return {
                "executors": sorted(e.executor_id for e in self.executors.values()),
                "agents": sorted(self.agents),
                "groups": {g: (o.executor_id, o.agent_id) for g, o in self.group_owner.items()},
                "pending": len(self.pending),
                "primary": self.primary,
            }


def group_names(data: Any) -> Iterable[str]:
    """Group names from a ``tabs`` answer: ``{"groups": [{"group": G, …}]}`` (documented),
    also tolerating ``{"groups": {G: …}}`` and bare lists, since executors are third-party."""
    groups = data.get("groups") if isinstance(data, dict) else data
    if isinstance(groups, dict):
        return [g for g in groups if isinstance(g, str) and g]
    names = []
    for item in groups if isinstance(groups, list) else []:
        if isinstance(item, str) and item:
            names.append(item)
        elif isinstance(item, dict):
            name = item.get("group") or item.get("name") or item.get("title")
            if isinstance(name, str) and name:
                names.append(name)
    return names
