"""Election by bind and failover: exactly one host; a guest takes over when the host goes;
executors reconnect and ownership is rebuilt from their ``tabs``; the window fails fast."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading

import pytest

from bridgecli.browser import frames as F
from bridgecli.browser import token_file
from bridgecli.browser.agent_client import NotConnected
from bridgecli.browser.connect import GUEST, HOST, RE_ELECTING, BrowserBridge
from tests.browser.conftest import TOKEN, eventually
from tests.support.env import BRIDGE_BIN


def test_racing_starts_elect_exactly_one_host(port, cache):
    count = 8
    barrier = threading.Barrier(count)
    bridges: list[BrowserBridge] = []
    errors: list[BaseException] = []

    def start() -> None:
        bridge = BrowserBridge(port, TOKEN)
        barrier.wait()
        try:
            bridges.append(bridge.start())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    try:
        assert not errors
        modes = sorted(b.mode for b in bridges)
        assert modes == [GUEST] * (count - 1) + [HOST]
        assert all(b.send("targets")["targets"] == [] for b in bridges)
    finally:
        for bridge in bridges:
            bridge.close()


def test_guest_only_with_no_broker_fails_fast_naming_serve(port, cache):
    token_file.write(port, TOKEN)
    with pytest.raises(NotConnected, match="bridge browser serve"):
        BrowserBridge(port, None, allow_host=False).start()
    token_file.clear()
    with pytest.raises(NotConnected, match="does not exist yet"):
        BrowserBridge(port, None, allow_host=False).start()


def test_guest_reads_the_hosts_token_from_bridge_json(port, cache):
    with BrowserBridge(port, None) as host:  # generates and writes a token
        with BrowserBridge(port, None) as guest:
            assert guest.mode == GUEST and guest.send("targets")["targets"] == []
        assert host.mode == HOST


def test_failover_rebuilds_ownership_and_the_window_fails_fast(port, cache, start_executor):
    host = BrowserBridge(port, TOKEN, label="host").start()
    guest = BrowserBridge(port, TOKEN, label="guest").start()
    other = BrowserBridge(port, TOKEN, label="other").start()
    try:
        e1 = start_executor("e1", label="work")
        e2 = start_executor("e2", label="home")
        host.send("open", "host-group", {"url": "http://h"})
        guest.send("open", "guest-group", {"url": "http://g"}, target="home")
        with pytest.raises(F.CommandError, match="owned by another client"):
            other.send("text", "guest-group")

        gate = threading.Event()  # hold the guest's re-election to observe the window
        real_attempt = guest._attempt
        guest._attempt = lambda: (gate.wait(10), real_attempt())[1]
        other.close()
        host.close()
        assert guest.wait_mode(RE_ELECTING) == RE_ELECTING
        with pytest.raises(F.CommandError) as info:
            guest.send("text", "guest-group")
        assert info.value.code == F.E_RE_ELECTING and "bridge re-electing" in str(info.value)
        gate.set()

        assert guest.wait_mode(HOST) == HOST
        e1.wait_readies(2)
        e2.wait_readies(2)
        groups = eventually(
            lambda: guest.broker.snapshot()["groups"] if len(guest.broker.snapshot()["groups"]) == 2 else None
        )
        assert groups == {"host-group": ("e1", None), "guest-group": ("e2", None)}  # orphaned
        assert guest.send("text", "host-group")["text"] == "text of http://h"  # adopted
        assert guest.send("text", "guest-group")["executor"] == "e2"
        late = BrowserBridge(port, TOKEN, label="late").start()
        assert late.mode == GUEST
        with pytest.raises(F.CommandError, match='group "host-group" is owned by another client'):
            late.send("text", "host-group")
        late.close()
        assert token_file.read()["pid"] == os.getpid() and token_file.read()["token"] == TOKEN
    finally:
        guest.close()
        host.close()


def test_in_flight_command_when_the_host_dies_reports_re_electing(port, cache, start_executor):
    host = BrowserBridge(port, TOKEN).start()
    guest = BrowserBridge(port, TOKEN).start()
    try:
        start_executor("e1")
        guest.send("open", "g")
        threading.Timer(0.2, host.close).start()
        with pytest.raises(F.CommandError) as info:
            guest.send("text", "g", {"sleep": 5}, timeout=30)
        assert info.value.code == F.E_RE_ELECTING
        assert guest.wait_mode(HOST) == HOST
    finally:
        guest.close()
        host.close()


def test_two_guests_one_becomes_host_the_other_rejoins(port, cache, start_executor):
    host = BrowserBridge(port, TOKEN).start()
    guests = [BrowserBridge(port, TOKEN).start() for _ in range(3)]
    try:
        start_executor("e1")
        host.close()
        modes = [g.wait_mode(HOST, GUEST, timeout=10) for g in guests]
        eventually(lambda: sorted(g.mode for g in guests) == [GUEST, GUEST, HOST])
        assert all(g.send("targets") is not None for g in guests), modes
    finally:
        for guest in guests:
            guest.close()


def test_failover_after_killing_a_host_process(bridge_home, port, start_executor):
    env = dict(bridge_home.env, BRIDGE_BROWSER_PORT=str(port), BRIDGE_BROWSER_TOKEN=TOKEN)
    proc = subprocess.Popen(
        [BRIDGE_BIN, "browser", "serve"], env=env, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
    )
    try:
        assert "hosting the browser broker" in proc.stderr.readline()
        guest = BrowserBridge(port, TOKEN, label="in-test").start()
        assert guest.mode == GUEST
        executor = start_executor("e1")
        guest.send("open", "g", {"url": "http://before"})
        os.kill(proc.pid, signal.SIGKILL)  # no goodbye: the socket just dies
        proc.wait(10)
        assert guest.wait_mode(HOST, timeout=10) == HOST
        executor.wait_readies(2)
        eventually(lambda: "g" in guest.broker.snapshot()["groups"])
        assert guest.broker.snapshot()["groups"]["g"] == ("e1", None)
        assert guest.send("text", "g")["text"] == "text of http://before"
        guest.close()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
        proc.stderr.close()


def test_a_port_held_by_another_program_is_a_clear_error(port, cache):
    import socket

    token_file.write(port, TOKEN)
    with socket.create_server(("127.0.0.1", port)) as squatter:
        squatter.settimeout(5)

        def slam() -> None:  # accept connections and close them without a word
            try:
                while True:
                    squatter.accept()[0].close()
            except OSError:
                pass

        threading.Thread(target=slam, daemon=True).start()
        with pytest.raises(NotConnected):
            BrowserBridge(port, TOKEN, reelect_give_up=0.5).start()


def test_re_election_gives_up_when_asked_and_then_reports_not_connected(port, cache):
    host = BrowserBridge(port, TOKEN).start()
    follower = BrowserBridge(port, TOKEN, allow_host=False, reelect_give_up=0.3).start()
    one_shot = BrowserBridge(port, TOKEN, allow_host=False, failover=False).start()
    host.close()
    assert follower.wait_mode("closed", timeout=10) == "closed"
    assert one_shot.wait_mode("closed", timeout=10) == "closed"
    for bridge in (follower, one_shot):
        with pytest.raises(F.CommandError) as info:
            bridge.send("targets")
        assert info.value.code == F.E_NOT_CONNECTED


def test_one_shot_during_the_window_says_re_electing(port, cache):
    dead = subprocess.Popen(["true"])
    dead.wait()
    token_file.write(port, TOKEN, host=True)  # as a host would: with its pid …
    raw = json.loads(token_file.path().read_text())
    raw["pid"] = dead.pid  # … of a host that has since died
    token_file.path().write_text(json.dumps(raw))
    with pytest.raises(F.CommandError) as info:
        BrowserBridge(port, None, allow_host=False, failover=False).start()
    assert info.value.code == F.E_RE_ELECTING and f"host pid {dead.pid} exited" in str(info.value)


def test_a_clean_host_exit_drops_its_pid_but_keeps_the_token(port, cache):
    host = BrowserBridge(port, None).start()
    token = token_file.read()["token"]
    assert token_file.read()["pid"] == os.getpid()
    host.close()
    assert token_file.read() == {"v": 1, "port": port, "token": token}
    with pytest.raises(NotConnected, match="bridge browser serve"):
        BrowserBridge(port, None, allow_host=False).start()


def test_a_close_while_hosting_is_under_way_still_drops_the_pid(port, cache, monkeypatch):
    """A signal can end a session between the host writing its pid into bridge.json and its
    server being up: the close waits for that step, then leaves as a host does."""
    from bridgecli.browser import connect

    wrote_pid, may_finish = threading.Event(), threading.Event()
    real_start = connect.BrokerServer.start

    def slow_start(server):
        wrote_pid.set()  # resolve_token(write_file=True) ran just before
        may_finish.wait(10)
        return real_start(server)

    monkeypatch.setattr(connect.BrokerServer, "start", slow_start)
    bridge = BrowserBridge(port, None)
    starter = threading.Thread(target=bridge.start)
    starter.start()
    assert wrote_pid.wait(10) and token_file.read()["pid"] == os.getpid()
    closer = threading.Thread(target=bridge.close)
    closer.start()
    closer.join(0.5)
    assert closer.is_alive(), "close() returned while the hosting step was still under way"
    may_finish.set()
    starter.join(10)
    closer.join(10)
    assert "pid" not in token_file.read() and bridge.mode == "closed"
    with pytest.raises(NotConnected, match="bridge browser serve"):
        BrowserBridge(port, None, allow_host=False).start()
