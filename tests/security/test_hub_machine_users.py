"""Nobody but the owner takes the hub machine's broker over: no ``guest`` with a known
password, credentials and state private, epmd and the Erlang distribution on loopback.

Real RabbitMQ nodes and real ``bridge`` subprocesses. The upgrade test starts a node as the
previous version did (``guest``/``guest``, 0644 files in 0755 directories) and lets
``bridge hub start`` secure it under a running gateway.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
import tomllib
import uuid
from dataclasses import asdict
from pathlib import Path

import pika
import pika.exceptions
import pytest

from bridgecli.errors import BrokerUnavailable
from bridgecli.hoststate.entities import Registry
from bridgecli.hoststate.store import Store
from bridgecli.hub.rabbitadmin import ManagementRefused, RabbitAdmin
from bridgecli.nodeprocess import free_port, stop_epmd_if_idle
from bridgecli.nodeusers import ADMIN_USER
from bridgecli.rabbitnode import LocalNode
from tests.support.env import BRIDGE_BIN, make_home
from tests.support.hosts import Host
from tests.support.netns import _kill_ns_processes, netns_supported, run_in_netns

HOST = "hubhost"


def _login(port: int, user: str, password: str) -> None:
    pika.BlockingConnection(
        pika.ConnectionParameters("127.0.0.1", port, "/", pika.PlainCredentials(user, password), connection_attempts=1)
    ).close()


def _guest_refused(port: int) -> bool:
    try:
        _login(port, "guest", "guest")
    except pika.exceptions.ProbableAuthenticationError:
        return True
    return False


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _loosen(root: Path) -> None:
    """What the previous version left: 0755 directories and 0644 files."""
    for top, _dirs, files in os.walk(root):
        os.chmod(top, 0o755)
        for name in files:
            path = Path(top) / name
            if not path.is_symlink() and not stat.S_ISSOCK(os.lstat(path).st_mode):
                os.chmod(path, 0o644)


def _open_to_others(root: Path) -> list[str]:
    """Every entry under ``root`` (and ``root``) that a group or other user may use."""
    found = []
    for top, _dirs, files in os.walk(root):
        for path in [Path(top)] + [Path(top) / n for n in files]:
            if not path.is_symlink() and _mode(path) & 0o077:
                found.append(f"{path} {oct(_mode(path))}")
    return found


def test_databases_and_their_dirs_are_private_even_when_they_existed(tmp_path):
    state = tmp_path / "state" / "bridge"
    state.mkdir(parents=True, mode=0o755)
    (state / "gateway.db").touch(mode=0o644)
    os.chmod(state / "gateway.db", 0o644)
    Store(state / "gateway.db")._db()
    assert _mode(state) == 0o700
    assert {p.name: _mode(p) for p in state.iterdir()} == {
        name: 0o600 for name in ("gateway.db", "gateway.db-wal", "gateway.db-shm") if (state / name).exists()
    }
    assert (state / "gateway.db-wal").exists()

    data = tmp_path / "new" / "data" / "bridge"  # none of it exists yet
    Registry(data / "entities.db")
    assert _mode(data / "entities.db") == 0o600
    assert _mode(data) == _mode(data.parent) == _mode(data.parent.parent) == 0o700


def _wait(predicate, timeout: float = 60.0, what: str = "") -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_hub_start_secures_a_hub_of_the_previous_version_under_its_gateway():
    root = Path(tempfile.mkdtemp(prefix="bsec", dir="/tmp"))
    host = Host(HOST, root, "")
    host.env.pop("BRIDGE_BROKER_URI")
    host.write_config("""
[profiles.echo]
command = "echo READY; exec sleep 300"
ready_line = "^READY$"
""")
    data, state = host.home.data_dir, Path(host.env["XDG_STATE_HOME"]) / "bridge"
    old = LocalNode(data / "broker")  # as the previous version ran it: guest/guest
    try:
        old.start()
        info = old.info()
        assert info.uri.startswith("amqp://guest:guest@")
        (data / "broker" / "state.json").write_text(json.dumps(asdict(info)))
        (data / "broker" / "ports.json").write_text(
            json.dumps({"amqp_port": info.amqp_port, "dist_port": info.dist_port})
        )
        host.start_gateway(timeout=60)
        main = host.register("main")
        host.bridge("send", "main", "held before", "--from", "main", check=True)
        spawned = host.bridge_json("spawn", "echo", "--host", HOST, "--label", "s1", "--from", "main", timeout=90)
        assert (state / "spawn" / "s1").is_dir()
        for tree in (data, state):
            _loosen(tree)
        assert _open_to_others(state)

        mark = len(host.whole_log())
        started = host.bridge("hub", "start", "--listen", f"127.0.0.1:{free_port()}", timeout=240)
        assert started.returncode == 0, started.stderr

        # guest is gone, on AMQP and on the management API
        node = json.loads((data / "broker" / "state.json").read_text())
        assert _guest_refused(node["amqp_port"])
        with pytest.raises(ManagementRefused) as refused:
            RabbitAdmin(node["management_port"], "guest", "guest").overview()
        assert refused.value.status == 401
        # the admin and this host's own user work; their secrets are the owner's only
        creds = json.loads((data / "broker" / "credentials.json").read_text())
        assert creds["admin_user"] == ADMIN_USER and creds["host_user"] == HOST
        admin = RabbitAdmin(node["management_port"], ADMIN_USER, creds["admin_password"])
        assert admin.overview()["rabbitmq_version"]  # only an administrator may read it all
        assert not admin.user_exists("guest")
        assert pika.URLParameters(node["uri"]).credentials.username == HOST
        pika.BlockingConnection(pika.URLParameters(node["uri"])).close()
        for name in ("credentials.json", "state.json"):
            assert _mode(data / "broker" / name) == 0o600
        # the machine checks senders now, and its gateway came back as the host's user
        config = tomllib.loads(host.home.config_file.read_text())
        assert config["security"]["sender_check"] == "host"
        _wait(lambda: "connected to broker" in host.whole_log()[mark:], what="the gateway to reconnect")
        # a first reconnect may still be guest's, closed when guest goes: retry the send under
        # one message id until the gateway is back as the host's user (never twice: --id)
        msg_id = str(uuid.uuid4())

        def sent() -> bool:
            result = host.bridge("send", "main", "held after", "--from", "main", "--id", msg_id)
            assert result.returncode in (0, 4), result.stderr  # 4: not connected right now
            return result.returncode == 0

        _wait(sent, what="a send once the gateway is back as the host's user")
        got = host.bridge_json("poll", "--as", main, "--wait", "10s")["messages"]
        assert [m["content"] for m in got] == ["held before", "held after"]
        # every file of this host is private: databases, held messages, spawn logs, hub
        assert _open_to_others(data) == [] and _open_to_others(state) == []
        assert _mode(data) == _mode(state) == 0o700
        for name in ("gateway.db", "spawn/s1", "spawn/s1/stdout.log"):
            assert (state / name).exists() and _mode(state / name) in (0o600, 0o700)
        for name in ("entities.db", "hub/hub.db", "hub/registrar.log", "broker/log"):
            assert (data / name).exists() and _mode(data / name) in (0o600, 0o700)
        host.bridge("stop", spawned["label"], timeout=60)
    finally:
        host.close()
        subprocess.run([BRIDGE_BIN, "hub", "stop"], env=host.env, capture_output=True, timeout=120)
        subprocess.run([BRIDGE_BIN, "broker", "stop"], env=host.env, capture_output=True, timeout=120)
        old.stop()
        stop_epmd_if_idle()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def netns() -> str:
    """A network namespace of its own (loopback up): the epmd in it is the node's own."""
    reason = netns_supported()
    if reason:
        pytest.skip(reason)
    name = f"bsec{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True, capture_output=True)
        yield name
    finally:
        _kill_ns_processes(name)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def test_embedded_node_listens_on_loopback_only_and_refuses_guest(netns):
    home = make_home(Path(tempfile.mkdtemp(prefix="bsen", dir="/tmp")))
    env = {**home.env, "BRIDGE_HOST_ID": HOST}

    def bridge(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", netns, BRIDGE_BIN, *args], env=env, capture_output=True, text=True, timeout=180
        )

    try:
        started = bridge("broker", "start", "--json")
        assert started.returncode == 0, started.stderr
        uri = json.loads(started.stdout)["uri"]
        listeners = subprocess.run(
            ["ip", "netns", "exec", netns, "ss", "-ltnpH"], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        programs = {line.split()[5].split('"')[1] for line in listeners}
        assert {"epmd", "beam.smp"} <= programs, listeners
        exposed = [line for line in listeners if not line.split()[3].startswith(("127.0.0.1:", "[::1]:"))]
        assert exposed == [], exposed  # AMQP, the Erlang distribution and epmd alike

        port = pika.URLParameters(uri).port
        assert run_in_netns(netns, lambda: _guest_refused(port))
        run_in_netns(netns, lambda: pika.BlockingConnection(pika.URLParameters(uri)).close())
        assert pika.URLParameters(uri).credentials.username == HOST
        creds = home.data_dir / "broker" / "credentials.json"
        assert _mode(creds) == 0o600 and _mode(home.data_dir / "broker" / "state.json") == 0o600
        assert _open_to_others(home.data_dir) == []
    finally:
        bridge("broker", "stop")
        shutil.rmtree(home.root, ignore_errors=True)


def test_rabbit_admin_without_a_user_needs_the_nodes_admin(bridge_home):
    with pytest.raises(BrokerUnavailable, match="no admin credential"):
        RabbitAdmin(free_port())
