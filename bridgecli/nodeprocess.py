"""Processes and ports of a node run as a plain process: free ports, the AMQP readiness
handshake, whether a pid or process group lives, stopping them, and the machine's epmd.

Why apart from :mod:`bridgecli.rabbitnode`: these know nothing of RabbitMQ's files or users,
and the hub's lifecycle and the tests use them on their own.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

from bridgecli.errors import BrokerUnavailable

#: the AMQP 0-9-1 protocol header a client sends first; a ready broker answers with
#: a Connection.Start method frame (frame type 1)
_AMQP_HEADER = b"AMQP\x00\x00\x09\x01"


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on ``host:port`` and we could bind it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # like the Erlang listener: connections in TIME_WAIT do not make a port "taken"
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(avoid: Iterable[int] = ()) -> int:
    """A currently free TCP port in 20000-32000.

    Not the kernel's ephemeral range (32768+), so an outgoing connection cannot grab it
    between our check and the node's bind; and well below 65535 - 10000 for Erlang's CLI.
    """
    avoid = set(avoid)
    rng = random.Random()
    for _ in range(200):
        port = rng.randint(20000, 32000)
        if port not in avoid and port_is_free(port):
            return port
    raise BrokerUnavailable("found no free TCP port for the broker", "free some ports and retry")


def amqp_ready(host: str, port: int, timeout: float = 1.0, *, expect: bytes | None = None) -> bool:
    """True when ``host:port`` answers the AMQP 0-9-1 header with a Connection.Start frame
    (and, with ``expect``, that frame's server properties contain those bytes).

    A bare open port is not enough: an unrelated service might hold it, or another broker
    might (``expect`` = our node's name, which RabbitMQ reports as ``cluster_name``).
    """
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(_AMQP_HEADER)
            frame = b""
            while len(frame) < 7 or len(frame) < 8 + int.from_bytes(frame[3:7], "big"):
                chunk = sock.recv(4096)
                if not chunk:
                    break
                frame += chunk
    except OSError:
        return False
    if len(frame) < 7 or frame[0] != 1:
        return False
    return expect is None or expect in frame


def pid_alive(pid: int | None) -> bool:
    """True when process ``pid`` exists (and is not a zombie)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def group_alive(pgid: int | None) -> bool:
    """True when any process of process group ``pgid`` is left (zombies excluded)."""
    if not pgid:
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def stop_processes(vm_pid: int | None, pgid: int | None, timeout: float) -> None:
    """TERM the VM, wait for the group to empty, then TERM/KILL what is left of it.

    Without a live VM pid (no pid file yet: the node is still booting) the group is
    signalled at once instead of waiting ``timeout`` for nothing.
    """
    if pid_alive(vm_pid):
        try:
            os.kill(vm_pid, signal.SIGTERM)  # type: ignore[arg-type]
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (pid_alive(vm_pid) or group_alive(pgid)):
            time.sleep(0.1)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not group_alive(pgid):
            break
        try:
            os.killpg(pgid, sig)  # type: ignore[arg-type]
        except ProcessLookupError:
            break
        end = time.monotonic() + 5
        while time.monotonic() < end and group_alive(pgid):
            time.sleep(0.1)


def epmd_names() -> list[str] | None:
    """Node names registered with the local epmd; None when no epmd runs."""
    try:
        result = subprocess.run(["epmd", "-names"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0 or "up and running" not in result.stdout:
        return None
    return [line.split()[1] for line in result.stdout.splitlines() if line.startswith("name ")]


def stop_epmd_if_idle() -> bool:
    """Stop epmd when no node is registered with it (it is shared machine-wide, so a node
    of another user or broker keeps it alive). Returns whether epmd was stopped."""
    names = epmd_names()
    if names is None or names:
        return False
    subprocess.run(["epmd", "-kill"], capture_output=True, timeout=10)
    return True
