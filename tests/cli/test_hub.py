"""`bridge hub` and `bridge join` before there is any hub: each mistake is one line with its
own exit code, and nothing is written. (The working path is tests/multihost/test_hub_join.py.)"""

from __future__ import annotations

import json
import socket
import time

from bridgecli.errors import ExitCode
from bridgecli.hub import invite as invite_mod
from bridgecli.hub.pki import HubPki
from tests.support.env import run_bridge


def _invite_to(tmp_path, address: str, expires: float) -> str:
    pki = HubPki(tmp_path / "pki")
    pki.ensure_ca("nohub")
    return invite_mod.Invite(
        hub="nohub",
        host="lonely",
        addresses=(address,),
        invite_id="0123456789ab",
        secret="s" * 32,
        expires=expires,
        ca_der=pki.ca_der(),
    ).encode()


def test_hub_commands_without_a_hub(bridge_home):
    env = bridge_home.env
    status = run_bridge("hub", "status", "--json", env=env)
    assert status.returncode == 0 and json.loads(status.stdout) == {
        "running": False,
        "configured": False,
        "dir": str(bridge_home.data_dir / "hub"),
    }
    for args in (("invite", "buildbox"), ("invites",), ("hosts",), ("revoke", "buildbox")):
        result = run_bridge("hub", *args, env=env)
        assert result.returncode == ExitCode.NOT_FOUND and "no hub runs on this machine" in result.stderr, args
    stop = run_bridge("hub", "stop", env=env)
    assert stop.returncode == 0 and "no hub is running" in stop.stderr


def test_hub_start_needs_a_real_address(bridge_home):
    env = bridge_home.env
    missing = run_bridge("hub", "start", env=env)
    assert missing.returncode == ExitCode.CONFIG and "--listen ADDR" in missing.stderr
    for bad in ("buildbox.example", "10.0.0.1:99999", "10.0.0.1:x"):
        result = run_bridge("hub", "start", "--listen", bad, env=env)
        assert result.returncode == ExitCode.CONFIG and f"bad --listen {bad!r}" in result.stderr, bad
    assert not (bridge_home.data_dir / "hub").exists(), "nothing is made before the input is valid"


def test_join_refuses_bad_invites_without_writing_anything(bridge_home, tmp_path):
    env = bridge_home.env
    good = _invite_to(tmp_path, "127.0.0.1:1", time.time() + 3600)
    cases = {
        "hello": "not a bridge invite",
        good[:40]: "malformed invite",
        good.replace(".", "!", 1): "malformed invite",
        _invite_to(tmp_path, "127.0.0.1:1", time.time() - 7200): "this invite expired",
    }
    for text, why in cases.items():
        result = run_bridge("join", text, env=env)
        assert result.returncode == ExitCode.INVITE and why in result.stderr, (text[:30], result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1
    assert not bridge_home.config_file.exists()


def test_join_names_an_unreachable_hub_and_a_server_that_is_not_one(bridge_home, tmp_path):
    env = bridge_home.env
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    gone = run_bridge("join", _invite_to(tmp_path, f"127.0.0.1:{port}", time.time() + 3600), env=env)
    assert gone.returncode == ExitCode.BROKER_UNAVAILABLE and f"cannot reach the hub at 127.0.0.1:{port}" in gone.stderr
    with socket.socket() as plain:  # something listens there, but it does not speak TLS
        plain.bind(("127.0.0.1", 0))
        plain.listen(1)
        address = f"127.0.0.1:{plain.getsockname()[1]}"
        result = run_bridge("join", _invite_to(tmp_path, address, time.time() + 3600), env=env, timeout=30)
    assert result.returncode == ExitCode.TLS and "TLS" in result.stderr, result.stderr
    assert not bridge_home.config_file.exists()
