"""The embedded broker's building blocks, against real RabbitMQ nodes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pika
import pika.exceptions
import pytest

from bridgecli import config, localbroker
from bridgecli.amqp.uri import resolve_broker_uri
from bridgecli.errors import BrokerUnavailable, MissingDependency
from bridgecli.localbroker import LocalNode


def test_session_node_accepts_amqp_and_routes_a_message(rabbitmq):
    conn = pika.BlockingConnection(pika.URLParameters(rabbitmq.uri))
    try:
        ch = conn.channel()
        ch.queue_declare("lb.test", auto_delete=True)
        ch.basic_publish("", "lb.test", b"hello")
        method, _, body = ch.basic_get("lb.test", auto_ack=True)
        assert body == b"hello"
    finally:
        conn.close()


def test_amqp_ready_tells_a_broker_from_a_plain_listener(rabbitmq):
    assert localbroker.amqp_ready("127.0.0.1", rabbitmq.port)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        # a listener that never speaks AMQP is not a ready broker
        assert not localbroker.amqp_ready("127.0.0.1", server.getsockname()[1], timeout=0.3)
    assert not localbroker.amqp_ready("127.0.0.1", localbroker.free_port(), timeout=0.3)


def test_ctl_runs_with_the_nodes_cookie(rabbitmq):
    result = rabbitmq.ctl("list_queues", "name", "-q")
    assert result.returncode == 0


def test_extra_conf_lines_reach_the_node_and_stop_leaves_no_process(rabbitmq_node_factory):
    broker = rabbitmq_node_factory(["consumer_timeout = 5000"])
    node = broker.node
    assert node.consumer_timeout_ms() == 5000
    vm, pgid = node.vm_pid, node.pgid
    assert localbroker.pid_alive(vm) and localbroker.group_alive(pgid)
    node.stop()
    assert not localbroker.pid_alive(vm)
    assert not localbroker.group_alive(pgid)
    node.stop()  # idempotent


def test_taken_ports_are_replaced_by_free_ones(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        node = LocalNode(tmp_path, amqp_port=taken, dist_port=taken)
        node._pick_ports()
        assert node.amqp_port != taken and node.dist_port != taken
        assert node.amqp_port != node.dist_port
        assert localbroker.port_is_free(node.amqp_port)


def test_nodename_is_stable_per_dir_and_distinct_between_dirs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert localbroker.default_nodename(a) == localbroker.default_nodename(a)
    assert localbroker.default_nodename(a) != localbroker.default_nodename(b)
    assert localbroker.default_nodename(a).endswith("@localhost")


def test_missing_rabbitmq_server_names_the_apt_package(tmp_path, monkeypatch):
    monkeypatch.setenv("BRIDGE_RABBITMQ_BIN", str(tmp_path / "nowhere"))
    with pytest.raises(MissingDependency) as err:
        LocalNode(tmp_path).start()
    assert "apt-get install rabbitmq-server" in str(err.value)


def test_a_node_that_dies_during_boot_reports_its_log(tmp_path):
    # A config line RabbitMQ rejects makes the node exit during boot.
    node = LocalNode(Path(str(tmp_path)), extra_conf=["no_such_setting_at_all = 1"])
    with pytest.raises(BrokerUnavailable) as err:
        node.start(timeout=60)
    assert "exited during start-up" in str(err.value)
    assert not node.is_running()


def test_recorded_uri_is_none_without_state_and_for_a_dead_pid(bridge_home):
    assert localbroker.recorded_uri() is None
    state = localbroker.broker_dir() / "state.json"
    state.parent.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    info = {
        "uri": "amqp://guest:guest@127.0.0.1:1/",
        "pid": dead.pid,
        "pgid": dead.pid,
        "nodename": "x@localhost",
        "amqp_port": 1,
        "dist_port": 2,
        "base": "/",
        "started": 0,
    }
    state.write_text(json.dumps(info))
    assert localbroker.recorded_uri() is None
    info["pid"] = os.getpid()  # a live process: the record counts
    state.write_text(json.dumps(info))
    assert localbroker.recorded_uri() == info["uri"]
    state.write_text("{not json")
    assert localbroker.recorded_uri() is None


def test_resolve_broker_uri_prefers_config_then_embedded_then_fails(bridge_home):
    cfg = config.load(env={"BRIDGE_BROKER_URI": "amqp://a:1/, amqp://b:2/"})
    assert resolve_broker_uri(cfg) == ["amqp://a:1/", "amqp://b:2/"]
    with pytest.raises(BrokerUnavailable) as err:
        resolve_broker_uri(config.load(env={}))
    assert "bridge broker start" in str(err.value)
    state = localbroker.broker_dir() / "state.json"
    state.parent.mkdir(parents=True)
    state.write_text(
        json.dumps(
            {
                "uri": "amqp://guest:guest@127.0.0.1:9/",
                "pid": os.getpid(),
                "pgid": 0,
                "nodename": "x@localhost",
                "amqp_port": 9,
                "dist_port": 10,
                "base": "/",
                "started": 0,
            }
        )
    )
    assert resolve_broker_uri(config.load(env={})) == ["amqp://guest:guest@127.0.0.1:9/"]


def test_uri_module_does_not_import_pika():
    code = "import sys, bridgecli.amqp.uri; print('pika' in sys.modules)"
    out = subprocess.run([os.sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_stop_start_keeps_the_uri_and_durable_messages(rabbitmq):
    uri = rabbitmq.uri
    conn = pika.BlockingConnection(pika.URLParameters(uri))
    ch = conn.channel()
    ch.queue_declare("lb.durable", durable=True)
    ch.confirm_delivery()
    ch.basic_publish("", "lb.durable", b"kept", pika.BasicProperties(delivery_mode=2))
    conn.close()
    rabbitmq.stop()
    assert not localbroker.amqp_ready("127.0.0.1", rabbitmq.port, timeout=0.3)
    rabbitmq.start()
    assert rabbitmq.uri == uri
    conn = pika.BlockingConnection(pika.URLParameters(uri))
    try:
        ch = conn.channel()
        assert ch.basic_get("lb.durable", auto_ack=True)[2] == b"kept"
        ch.queue_delete("lb.durable")
    finally:
        conn.close()


def test_start_timeout_stops_the_half_started_node(tmp_path):
    import shutil
    import time

    from bridgecli.errors import Timeout

    node = LocalNode(Path(tempfile_dir()))
    began = time.monotonic()
    try:
        with pytest.raises(Timeout) as err:
            node.start(timeout=0.5)
        assert "did not accept AMQP connections within 0.5s" in str(err.value)
        assert not node.is_running() and not localbroker.group_alive(node.pgid)
        assert time.monotonic() - began < 25  # killed at once, not after stop()'s 30 s wait
    finally:
        node.stop()
        shutil.rmtree(node.base, ignore_errors=True)


def test_failing_ctl_command_raises_with_the_tools_message(rabbitmq):
    from bridgecli.errors import BridgeError

    with pytest.raises(BridgeError) as err:
        rabbitmq.ctl("delete_vhost", "no-such-vhost")
    assert "rabbitmqctl delete_vhost no-such-vhost failed" in str(err.value)
    assert rabbitmq.ctl("delete_vhost", "no-such-vhost", check=False).returncode != 0


def tempfile_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="lbt", dir="/tmp")


def test_a_port_taken_at_bind_time(tmp_path):
    """The port is free when probed but taken when the node binds: with ports we chose the
    node retries on fresh ones; with ports it must keep, the error names the port."""
    import shutil

    node = LocalNode(Path(tempfile_dir()))
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        node.amqp_port, node.dist_port = taken, localbroker.free_port()
        try:
            with pytest.raises(BrokerUnavailable) as err:
                node.start(keep_ports=True)
            assert f"could not listen on 127.0.0.1:{taken}: the port is in use" in str(err.value)
            assert not node.is_running()
            real_pick = node._pick_ports
            picks = []

            def squatted_first():  # the first pick loses the race, the retry gets a free port
                real_pick()
                if not picks:
                    node.amqp_port = taken
                picks.append(node.amqp_port)

            node._pick_ports = squatted_first
            node.start()
            assert picks[0] == taken and node.port != taken
            assert localbroker.amqp_ready("127.0.0.1", node.port)
        finally:
            node.stop()
            shutil.rmtree(node.base, ignore_errors=True)


def test_another_broker_on_our_port_is_not_mistaken_for_our_node(rabbitmq):
    """Node B is told to keep the session node's port: B dies at bind, and B's readiness
    check must not be fooled by the session node answering AMQP on that port."""
    import shutil

    if not hasattr(rabbitmq, "node"):
        pytest.skip("needs a test-managed RabbitMQ node")
    node = LocalNode(Path(tempfile_dir()), amqp_port=rabbitmq.port, dist_port=localbroker.free_port())
    try:
        with pytest.raises(BrokerUnavailable, match="the port is in use"):
            node.start(keep_ports=True)
    finally:
        node.stop()
        shutil.rmtree(node.base, ignore_errors=True)
    assert localbroker.amqp_ready("127.0.0.1", rabbitmq.port)  # the session node is unharmed


def test_start_secures_a_running_node_of_the_previous_version_in_place(bridge_home, monkeypatch):
    """A node an earlier version started (guest/guest, still running) is secured by the next
    `bridge broker start` without a restart: this host's user and the admin are made, guest
    is deleted, and the recorded URI (0600) logs in as this host."""
    from dataclasses import asdict

    monkeypatch.setenv("BRIDGE_HOST_ID", "lbhost")
    old = LocalNode(localbroker.broker_dir())
    try:
        old.start()
        before = old.info()
        state = localbroker.broker_dir() / "state.json"
        state.write_text(json.dumps(asdict(before)))
        result = localbroker.start()
        assert result.already_running and result.info.pid == before.pid
        assert "removed broker user guest" in result.changes
        with pytest.raises(pika.exceptions.ProbableAuthenticationError):
            pika.BlockingConnection(pika.URLParameters(before.uri))
        assert localbroker.recorded_uri().startswith("amqp://lbhost:")
        pika.BlockingConnection(pika.URLParameters(localbroker.recorded_uri())).close()
        assert os.stat(state).st_mode & 0o777 == 0o600
        assert localbroker.start().changes == []  # nothing left to do
    finally:
        localbroker.stop()
        old.stop()
