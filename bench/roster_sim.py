"""The simulated gateways of ``bench/roster_scale.py``: the presence half of a gateway on a
shared pika I/O loop (:class:`SimGateway`), the worker process that runs a few of them
(:func:`worker`, entered as ``roster_scale.py --worker``) and the parent's handle on such a
process (:class:`Worker`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENV_BIN = Path(sys.executable).parent
PYTHON = str(VENV_BIN / "python")
#: the script a worker process runs (its ``--worker`` mode)
ENTRY = BENCH / "roster_scale.py"

if str(REPO) not in sys.path:  # loaded from anywhere
    sys.path.insert(0, str(REPO))


class SimGateway:
    """One simulated gateway on a shared pika I/O loop: the presence half of a real one, in
    the per-entity protocol (``protocol="entity"``), with host frames (``"host"``: one frame
    per interval, a sync request on connect answered by every host), or fed by a roster relay
    (``"relay"``: host frames out, only ``relay.#`` in, the relay answers syncs; ``"relay-lite"``
    counts relay frames without keeping a view). Relay sims reconnect like a gateway."""

    def __init__(
        self,
        host: str,
        entities: int,
        interval: float,
        ioloop: Any,
        uri: str,
        emit: Any,
        target: int = 0,
        random_phase: bool = True,
        protocol: str = "entity",
    ) -> None:
        from bridgecli import __version__, roster
        from bridgecli.gateway.host_beats import HostBeats
        from bridgecli.interfaces import Entity

        self.host = host
        self.interval = interval
        self.ioloop = ioloop
        self.uri = uri
        self.emit = emit
        self.target = target
        self.random_phase = random_phase
        created = time.time()
        self.entities = [
            Entity(
                gid=str(uuid.uuid4()), label=f"{host}-e{i}", role="agent", deliver="hold", host=host, created=created
            )
            for i in range(entities)
        ]
        self.protocol = protocol
        self.beats = HostBeats(host, __version__, interval)
        self.view = roster.RosterView(local_host=host, on_sync=self._sync_asked)
        self.reply_key = ""
        self.sent = 0
        self.received = 0
        self.connection: Any = None
        self.channel: Any = None
        self.started_at = time.time()
        self.consuming_at: float | None = None
        self.converged_at: float | None = None
        self.closing = False
        self.relayed = protocol.startswith("relay")
        self.keep_view = protocol != "relay-lite"
        self.epoch = ""
        self.reconnects = 0

    # wiring (the callback chain of an async pika connection)
    def connect(self) -> None:
        import pika

        self.connection = pika.SelectConnection(
            pika.URLParameters(self.uri),
            on_open_callback=self._on_open,
            on_open_error_callback=lambda _c, exc: self.emit({"event": "error", "host": self.host, "error": repr(exc)}),
            on_close_callback=self._on_closed,
            custom_ioloop=self.ioloop,
        )

    def _on_closed(self, _connection: Any, _reason: Any) -> None:
        """A relay sim reconnects after 0.1..1 s, as a gateway's backoff does."""
        self.channel, self.consuming_at = None, None
        if self.relayed and not self.closing:
            self.reconnects += 1
            self.beats.want_full()
            self.ioloop.call_later(random.uniform(0.1, 1.0), self._reconnect)

    def _reconnect(self) -> None:
        if self.closing:
            return
        try:
            self.connect()
        except Exception:  # the broker is still down: try again
            self.ioloop.call_later(random.uniform(0.5, 1.0), self._reconnect)

    def _on_open(self, connection: Any) -> None:
        connection.channel(on_open_callback=self._on_channel)

    def _on_channel(self, channel: Any) -> None:
        from bridgecli.amqp import topology

        self.channel = channel
        queue = topology.roster_queue(self.host)
        self.binding = queue.bindings[0]
        if self.relayed:
            self.binding = topology.Binding(topology.ROSTER, "relay.#")
        channel.queue_declare(
            queue.name,
            durable=queue.durable,
            exclusive=queue.exclusive,
            auto_delete=queue.auto_delete,
            callback=self._on_declared,
        )

    def _on_declared(self, _frame: Any) -> None:
        self.channel.queue_bind(
            f"roster.{self.host}", self.binding.exchange, routing_key=self.binding.routing_key, callback=self._on_bound
        )

    def _on_bound(self, _frame: Any) -> None:
        if self.protocol != "entity":  # a reply queue for the sync answers, consumed first
            from bridgecli.amqp import topology

            replies = topology.reply_queue(self.host)
            self.reply_key = replies.bindings[0].routing_key
            self.channel.queue_declare(replies.name, exclusive=True, auto_delete=True, callback=lambda _f: None)
            self.channel.queue_bind(replies.name, topology.CONTROL, routing_key=self.reply_key)
            self.channel.basic_consume(replies.name, self._on_frame, auto_ack=True)
        self.channel.basic_consume(f"roster.{self.host}", self._on_frame, auto_ack=True, callback=self._on_consuming)

    def _on_consuming(self, _frame: Any) -> None:
        first_time = self.consuming_at is None and not self.reconnects
        self.consuming_at = time.time()
        if self.relayed and not first_time:  # a reconnect fed by a relay asks for nothing
            self._schedule(time.monotonic() + random.uniform(0, self.interval))
            return
        if self.protocol != "entity":
            from bridgecli import roster, roster_frames

            sync = roster_frames.sync_frame(host=self.host, reply=self.reply_key)
            self._publish(roster.GATEWAY_KEY, sync, count=False)
        self.heartbeat_all()  # a gateway announces itself on connect
        if self.relayed and self.keep_view:
            self.ioloop.call_later(1.0, self._ask_wanted)
        first = random.uniform(0, self.interval) if self.random_phase else self.interval
        self._schedule(time.monotonic() + first)
        if self.target:
            self._check_converged()

    # traffic
    def _on_frame(self, _channel: Any, method: Any, props: Any, body: bytes) -> None:
        self.received += 1
        if self.keep_view:
            self.view.apply_delivery(method, props, body)
        if self.relayed:
            self._relay_heard(body)

    def _relay_heard(self, body: bytes) -> None:
        """A new relay epoch: our next frame is a full one (as presence does)."""
        head = body[:300]
        start = head.find(b'"epoch":"')
        epoch = head[start + 9 : head.find(b'"', start + 9)].decode() if start >= 0 else ""
        if epoch and epoch != self.epoch:
            self.epoch = epoch
            self.beats.want_full()

    def _ask_wanted(self) -> None:
        """Once a second, ask the relay for the hosts whose digest differs from ours."""
        if self.closing:
            return
        wanted = self.view.relay.take_wanted() if self.keep_view else []
        if wanted and self.channel is not None and self.channel.is_open and self.reply_key:
            from bridgecli import roster, roster_frames

            sync = roster_frames.sync_frame(host=self.host, reply=self.reply_key, hosts=wanted)
            self._publish(roster.GATEWAY_KEY, sync, count=False)
        self.ioloop.call_later(1.0, self._ask_wanted)

    def _publish(self, gid: str, body: bytes, count: bool = True, exchange: str = "", key: str = "") -> None:
        import pika

        from bridgecli import roster
        from bridgecli.amqp import topology

        props = pika.BasicProperties(
            content_type="application/json", delivery_mode=1, expiration=str(int(self.interval * 1000 * 3))
        )
        routing = key or roster.routing_key(self.host, gid)
        self.channel.basic_publish(exchange or topology.ROSTER, routing, body, props)
        self.sent += count

    def _sync_asked(self, host: str, reply: str, hosts: list[str] | None = None) -> None:
        """Answer a joiner with our full frame on its reply key, after a jitter within T/2."""
        if hosts is not None and self.host not in hosts:
            return
        from bridgecli import roster_frames
        from bridgecli.amqp import topology

        def answer() -> None:
            if not self.closing and self.channel is not None and self.channel.is_open:
                items = [roster_frames.entity_item(e, "idle") for e in self.entities]
                self._publish("", self.beats.answer(items), count=False, exchange=topology.CONTROL, key=reply)

        self.ioloop.call_later(random.uniform(0, self.interval / 2), answer)

    def heartbeat_all(self) -> None:
        from bridgecli import __version__, roster, roster_frames

        if self.protocol != "entity":
            items = [roster_frames.entity_item(e, "idle") for e in self.entities]
            self._publish(roster.GATEWAY_KEY, self.beats.frame(items))
            return

        for entity in self.entities:
            self._publish(
                entity.gid,
                roster.heartbeat_frame(
                    host=self.host, version=__version__, interval=self.interval, entity=entity, status="idle"
                ),
            )
        self._publish(
            roster.GATEWAY_KEY,
            roster.heartbeat_frame(
                host=self.host, version=__version__, interval=self.interval, entities=len(self.entities)
            ),
        )

    def _schedule(self, due: float) -> None:
        def tick() -> None:
            if self.closing or self.channel is None or not self.channel.is_open:
                return
            self.heartbeat_all()
            next_due = due + self.interval
            while next_due < time.monotonic():  # an overloaded loop skips beats, as a gateway would
                next_due += self.interval
            self._schedule(next_due)

        self.ioloop.call_later(max(0.0, due - time.monotonic()), tick)

    def _check_converged(self) -> None:
        """Poll the view every 20 ms (0.4 % of a 5 s interval) until it holds ``target``."""
        if self.converged_at is not None or self.closing:
            return
        if len(self.view.entries()) >= self.target:
            self.converged_at = time.time()
            self.emit(
                {
                    "event": "converged",
                    "host": self.host,
                    "started_at": self.started_at,
                    "consuming_at": self.consuming_at,
                    "converged_at": self.converged_at,
                    "gateways": len(self.view.gateways()),
                    "received": self.received,
                }
            )
            return
        self.ioloop.call_later(0.02, self._check_converged)

    def close(self) -> None:
        """Leave like a cleanly stopped gateway: ``gone`` for each entity and itself."""
        from bridgecli import roster

        self.closing = True
        if self.channel is not None and self.channel.is_open:
            for entity in self.entities if self.protocol == "entity" else ():
                self._publish(entity.gid, roster.gone_frame(host=self.host, gid=entity.gid, reason="gateway stopped"))
            self._publish(
                roster.GATEWAY_KEY, roster.gone_frame(host=self.host, gid=roster.GATEWAY_KEY, reason="gateway stopped")
            )
        if self.connection is not None and self.connection.is_open:
            self.connection.close()


def worker(args: argparse.Namespace) -> int:
    """``--worker``: run ``args.hosts`` simulated gateways on one I/O loop; report JSON lines
    on stdout every 0.5 s (cumulative counters) and events (convergence); "stop" or EOF on
    stdin makes them leave cleanly."""
    from pika.adapters.select_connection import IOLoop

    ioloop = IOLoop()
    out_lock = threading.Lock()

    def emit(obj: dict[str, Any]) -> None:
        with out_lock:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    gateways = [
        SimGateway(
            host,
            args.entities,
            args.interval,
            ioloop,
            args.uri,
            emit,
            target=args.target,
            random_phase=not args.target,
            protocol=getattr(args, "protocol", "entity"),
        )
        for host in args.hosts.split(",")
    ]
    for gw in gateways:
        # a fleet in steady state did not boot in the same second: spread the connects (and
        # the announce burst each makes) over one interval; a joining gateway starts at once
        ioloop.call_later(0 if args.target else random.uniform(0, args.interval), gw.connect)

    def report() -> None:
        emit(
            {
                "t": time.time(),
                "sent": sum(g.sent for g in gateways),
                "received": sum(g.received for g in gateways),
                "consuming": sum(g.consuming_at is not None for g in gateways),
                "reconnects": sum(g.reconnects for g in gateways),
                "view": len(gateways[0].view.entries()),
            }
        )
        ioloop.call_later(0.5, report)

    def stop() -> None:
        for gw in gateways:
            gw.close()
        ioloop.call_later(2.0, ioloop.stop)  # let the closes and gone frames go out

    def read_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        ioloop.add_callback_threadsafe(stop)

    threading.Thread(target=read_stdin, daemon=True).start()
    ioloop.call_later(0.5, report)
    ioloop.start()
    return 0


class Worker:
    """The parent's handle on one worker process: its latest report and its events."""

    def __init__(
        self,
        uri: str,
        hosts: list[str],
        entities: int,
        interval: float,
        log: Path,
        target: int = 0,
        protocol: str = "entity",
    ) -> None:
        argv = [
            PYTHON,
            str(ENTRY),
            "--worker",
            "--uri",
            uri,
            "--hosts",
            ",".join(hosts),
            "--entities",
            str(entities),
            "--interval",
            str(interval),
            "--target",
            str(target),
            "--protocol",
            protocol,
        ]
        self.hosts = hosts
        self.log = log
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(log, "ab"),
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        self.last: dict[str, Any] = {}
        self.events: list[dict[str, Any]] = []
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            with self.changed:
                if "event" in obj:
                    self.events.append(obj)
                else:
                    self.last = obj
                self.changed.notify_all()

    def wait_event(self, kind: str, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for event in self.events:
                    if event["event"] == kind:
                        return event
                    if event["event"] == "error":
                        raise RuntimeError(f"simulated gateway failed: {event}")
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return None
                self.changed.wait(left)

    def wait_consuming(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.last.get("consuming") == len(self.hosts):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)
        raise RuntimeError(f"worker not consuming after {timeout}s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
                self.proc.wait(15)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(5)
