"""Fault scenarios on the namespace lab, shared by the slow tests and
``bench/reliability_report.py``.

Each scenario returns an :class:`Outcome` with counts (what the sender saw confirmed, what the
receiving entity got, lost, duplicated) and measured times. The tests assert only on the
counts (nothing confirmed may be lost); the times are reported, never asserted, because a
shared 2-core machine makes them noisy.

Accounting: *sent* = message ids the sending CLI printed (the broker confirmed them);
*delivered* = distinct ids the receiving exec entity wrote to its sink; *lost* = sent but never
delivered; *duplicated* = deliveries beyond the first of an id (at-least-once allows them, the
dedup store should absorb them); *unconfirmed delivered* = delivered though the sender got an
error (a confirm lost with the connection: the sender should retry, dedup absorbs it).
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.multihost.helpers import (
    exec_sink,
    read_sink,
    register,
    roster_gids,
    roster_snapshot,
    wait_announced,
    wait_for,
)
from tests.support.netns import NetnsLab


@dataclass
class Outcome:
    fault: str
    sent: int = 0
    delivered: int = 0
    lost: int = 0
    duplicated: int = 0
    unconfirmed_delivered: int = 0
    send_errors: int = 0
    times: dict[str, float | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: facts the tests check besides the counts (e.g. the exit code a sender got)
    observed: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Traffic:
    """A receiving exec entity on one host and a sending main on another, with bookkeeping."""

    def __init__(self, lab: NetnsLab, tag: str, sender_host: str = "hostA", receiver_host: str = "hostB") -> None:
        self.lab = lab
        self.tag = f"{tag}-{uuid.uuid4().hex[:6]}"
        self.sender_host, self.receiver_host = sender_host, receiver_host
        self.sink: Path = lab.host(receiver_host).home.root / f"{self.tag}.jsonl"
        self.sender_label = f"{self.tag}-main"
        register(lab, sender_host, self.sender_label, role="main")
        self.receiver = register(lab, receiver_host, f"{self.tag}-worker", deliver=exec_sink(self.sink))
        wait_announced(lab, sender_host, self.receiver)
        self.sent: set[str] = set()
        self.attempted = 0
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def send(self, count: int, force: bool = False) -> list[str]:
        """Send ``count`` messages in one bulk CLI call; returns the confirmed ids."""
        start = self.attempted
        self.attempted += count
        lines = "\n".join(f"{self.tag} #{start + i}" for i in range(count)) + "\n"
        args = ["send", self.receiver, "-", "--lines", "--from", self.sender_label]
        if force:
            args.append("--force")
        result = self.lab.bridge(self.sender_host, *args, input=lines, check=False, timeout=60)
        ids = result.stdout.split() if result.returncode == 0 else []
        with self.lock:
            self.sent.update(ids)
            if result.returncode != 0:
                self.errors.append(f"exit {result.returncode}: {result.stderr.strip()[-200:]}")
        return ids

    def deliveries(self) -> list[str]:
        return [body["msgId"] for body in read_sink(self.sink)]

    def wait_all(self, timeout: float = 90.0) -> float:
        """Wait until every confirmed id has been delivered; returns when (monotonic)."""
        wait_for(
            lambda: self.sent <= set(self.deliveries()),
            timeout,
            0.3,
            f"all {len(self.sent)} confirmed messages delivered on {self.receiver_host}",
        )
        return time.monotonic()

    def outcome(self, fault: str) -> Outcome:
        got = self.deliveries()
        unique = set(got)
        return Outcome(
            fault=fault,
            sent=len(self.sent),
            delivered=len(unique & self.sent),
            lost=len(self.sent - unique),
            duplicated=len(got) - len(unique),
            unconfirmed_delivered=len(unique - self.sent),
            send_errors=len(self.errors),
        )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


class LogWatch:
    """From now on, note when a gateway log first shows ``needle`` (past its current end).

    Runs on a thread so that a scenario can measure when each gateway *noticed* something
    while it is busy doing something else (restarting the broker, say): polling the log
    afterwards would only tell when we looked.
    """

    def __init__(self, lab: NetnsLab, host: str, needle: str, timeout: float = 120.0) -> None:
        self.lab, self.host, self.needle = lab, host, needle
        self.mark = len(lab.gateway_text(host))
        self.seen_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(timeout,), name=f"watch-{host}", daemon=True)
        self._thread.start()

    def _run(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self._stop.is_set() and time.monotonic() < deadline:
            if self.needle in self.lab.gateway_text(self.host)[self.mark :]:
                self.seen_at = time.monotonic()
                return
            self._stop.wait(0.05)

    def since(self, start: float, wait: float = 0.0) -> float | None:
        """Seconds from ``start`` until the needle appeared (waits up to ``wait`` for it);
        None if it never did. Stops the watch."""
        self._thread.join(wait)
        self._stop.set()
        return None if self.seen_at is None else self.seen_at - start


def partition(lab: NetnsLab, seconds: float = 15.0, burst: int = 20) -> Outcome:
    """Cut the receiving host off the LAN for ``seconds`` (beyond the AMQP heartbeat expiry
    and the roster expiry), send to it meanwhile, heal, and wait for everything."""
    traffic = Traffic(lab, "part")
    traffic.send(5)
    traffic.wait_all(30)
    log_mark = len(lab.gateway_text("hostB"))
    t_cut = time.monotonic()
    lab.partition("hostB")
    out_notes = []
    observed: dict[str, Any] = {}
    roster_gone = None
    try:
        wait_for(lambda: traffic.receiver not in roster_gids(lab, "hostA"), seconds, 0.3, "roster expiry")
        roster_gone = time.monotonic() - t_cut
    except AssertionError:
        out_notes.append("hostB's entity did not expire from hostA's roster during the partition")
    refused = lab.bridge("hostA", "send", traffic.receiver, "no force", "--from", traffic.sender_label, check=False)
    observed["send without --force while expired"] = refused.returncode
    out_notes.append(
        f"send without --force to the expired gid: exit {refused.returncode} ({refused.stderr.strip()[:120]})"
    )
    traffic.send(burst, force=True)  # the documented way to queue for an absent entity
    b_detect = None
    try:
        b_detect = (
            lab.wait_log(
                "hostB", "broker connection lost", max(1.0, seconds - (time.monotonic() - t_cut)), after=log_mark
            )
            - t_cut
        )
    except AssertionError:
        out_notes.append("hostB's gateway did not notice the partition before the heal")
    remaining = seconds - (time.monotonic() - t_cut)
    if remaining > 0:
        time.sleep(remaining)
    t_heal = time.monotonic()
    lab.heal("hostB")
    reconnected = None
    try:
        reconnected = lab.wait_log("hostB", "connected to broker", 60, after=log_mark) - t_heal
    except AssertionError:
        pass
    done = traffic.wait_all(90) - t_heal
    wait_for(lambda: traffic.receiver in roster_gids(lab, "hostA"), 60, 0.3, "roster recovery")
    roster_back = time.monotonic() - t_heal
    result = traffic.outcome(f"partition hostB for {seconds:g}s")
    result.times = {
        "hostB gateway detects loss": _round(b_detect),
        "hostA roster expires hostB": _round(roster_gone),
        "reconnect after heal": _round(reconnected),
        "all delivered after heal": _round(done),
        "roster recovers after heal": _round(roster_back),
    }
    result.notes = out_notes
    result.observed = observed
    return result


def broker_restart(lab: NetnsLab) -> Outcome:
    """Restart the broker node while a sender keeps sending in small batches."""
    assert lab.broker is not None
    traffic = Traffic(lab, "brst")
    stop_sending = threading.Event()

    def sender() -> None:
        while not stop_sending.is_set():
            traffic.send(5, force=True)
            time.sleep(0.2)

    thread = threading.Thread(target=sender, daemon=True)
    thread.start()
    wait_for(lambda: len(traffic.sent) >= 10, 30, 0.1, "first confirmed batches")
    hosts = ("hostA", "hostB")
    lost = {h: LogWatch(lab, h, "broker connection lost") for h in hosts}
    back = {h: LogWatch(lab, h, "connected to broker") for h in hosts}
    t_stop = time.monotonic()
    lab.broker.stop()
    t_down = time.monotonic()
    lab.broker.start()
    t_up = time.monotonic()
    detect = {h: lost[h].since(t_stop, wait=30) for h in hosts}
    reconnect = {}
    for host in hosts:
        seen = back[host].since(t_up, wait=90)
        if seen is None:  # fail like before, with the gateway's log in the message
            seen = lab.wait_log(host, "connected to broker", 1, after=back[host].mark) - t_up
        reconnect[host] = max(seen, 0.0)  # the log is polled every 50 ms: never "before" the start
    before = len(traffic.sent)  # a few batches through the recovered broker as well
    wait_for(lambda: len(traffic.sent) >= before + 15, 60, 0.1, "three batches after the restart")
    stop_sending.set()
    thread.join(120)
    done = traffic.wait_all(90) - t_up
    result = traffic.outcome("broker restart (clean stop + start)")
    result.times = {
        "broker stop": _round(t_down - t_stop),
        "broker start": _round(t_up - t_down),
        "hostA detects loss after stop": _round(detect["hostA"]),
        "hostB detects loss after stop": _round(detect["hostB"]),
        "hostA reconnect after start": _round(reconnect["hostA"]),
        "hostB reconnect after start": _round(reconnect["hostB"]),
        "all delivered after start": _round(done),
    }
    if traffic.errors:
        result.notes.append(
            f"{len(traffic.errors)} send batches refused while the broker was down (first: {traffic.errors[0][:140]})"
        )
    return result


def gateway_kill9(lab: NetnsLab, burst: int = 150, expiry_wait: float = 30.0) -> Outcome:
    """SIGKILL the receiving host's gateway in the middle of a burst, wait until hostA's roster
    has dropped hostB (its entity and its gateway: no "gone" frame comes from a killed
    gateway, so this is the roster expiry), then restart it."""
    traffic = Traffic(lab, "kill")
    sending = threading.Thread(target=traffic.send, args=(burst,), daemon=True)
    sending.start()
    wait_for(lambda: len(traffic.deliveries()) >= burst // 5, 60, 0.05, "burst under way")
    at_kill = len(traffic.deliveries())
    t_kill = time.monotonic()
    lab.stop_gateway("hostB", signal.SIGKILL)
    entity_gone = gateway_gone = None
    deadline = t_kill + expiry_wait
    while time.monotonic() < deadline and (entity_gone is None or gateway_gone is None):
        gids, gateways = roster_snapshot(lab, "hostA")
        now = time.monotonic()
        if entity_gone is None and traffic.receiver not in gids:
            entity_gone = now - t_kill
        if gateway_gone is None and "hostb" not in gateways:
            gateway_gone = now - t_kill
        time.sleep(0.1)
    sending.join(60)
    t_start = time.monotonic()
    lab.start_gateway("hostB")
    restarted = time.monotonic() - t_start
    entity_back = gateway_back = None
    deadline = t_start + 60
    while time.monotonic() < deadline and (entity_back is None or gateway_back is None):
        gids, gateways = roster_snapshot(lab, "hostA")
        now = time.monotonic()
        if entity_back is None and traffic.receiver in gids:
            entity_back = now - t_start
        if gateway_back is None and "hostb" in gateways:
            gateway_back = now - t_start
        time.sleep(0.1)
    done = traffic.wait_all(90) - t_start
    result = traffic.outcome("gateway kill -9 mid-burst, then restart")
    result.times = {
        "hostA roster drops hostB's entity": _round(entity_gone),
        "hostA roster drops hostB's gateway": _round(gateway_gone),
        "down": _round(t_start - t_kill),
        "gateway restart to connected": _round(restarted),
        "hostA roster has hostB's entity again": _round(entity_back),
        "hostA roster has hostB's gateway again": _round(gateway_back),
        "all delivered after restart": _round(done),
    }
    result.notes.append(
        f"killed after {at_kill} of {burst} deliveries; restarted once hostA's roster "
        f"had dropped hostB (roster expiry: 3 missed 1 s heartbeats)"
    )
    if entity_gone is None or gateway_gone is None:
        result.notes.append(f"hostA's roster still listed hostB {expiry_wait:g}s after the kill")
    return result
