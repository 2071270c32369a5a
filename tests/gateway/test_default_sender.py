"""A plain shell (no BRIDGE_GID, no --from) sends and polls as USER@HOSTID, a hold entity
registered on first use: through the gateway (the click-free fast path and the click path)
and without one (the direct path), all agreeing on the same entity; real CLI, gateway and
RabbitMQ."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys

from bridgecli.errors import ExitCode


def _label(host) -> str:
    return f"{pwd.getpwuid(os.getuid()).pw_name}@{host.name}"


def _entities(host, label: str) -> list[dict]:
    return [e for e in host.bridge_json("entities")["entities"] if e["label"] == label]


def _click_path(host, *args: str) -> subprocess.CompletedProcess[str]:
    """The command through the click CLI, which the console script skips while a gateway runs."""
    code = "import sys; from bridgecli.cli import main; main(sys.argv[1:])"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=host.env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def _spawn(host, *args: str) -> subprocess.Popen[str]:
    from tests.support.env import BRIDGE_BIN

    return subprocess.Popen(
        [BRIDGE_BIN, *args],
        env=host.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def test_first_send_registers_the_default_identity_and_every_path_reuses_it(host_factory):
    a = host_factory("a")
    sink = a.register("sink")
    label = _label(a)

    # no gateway: the direct path registers USER@HOSTID and says so, once
    first = a.bridge("send", "sink", "one")
    assert first.returncode == 0, first.stderr
    [entity] = _entities(a, label)
    assert (entity["role"], entity["deliver"]) == ("main", "hold")
    assert first.stderr == (
        f"bridge: sending as {label} (gid {entity['gid']}), registered now; read replies with `bridge poll`\n"
    )
    again = a.bridge("send", "sink", "two")
    assert again.returncode == 0 and again.stderr == "", again.stderr

    # a gateway: the fast path, the click path and ask all speak as that same entity, silently
    a.start_gateway()
    for proc in (
        a.bridge("send", "sink", "three"),
        _click_path(a, "send", "sink", "four"),
        a.bridge("ask", "sink", "five?"),
    ):
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    got = a.bridge_json("poll", "--as", "sink", "--wait", "5s")["messages"]
    while len(got) < 5:
        more = a.bridge_json("poll", "--as", "sink", "--wait", "5s")["messages"]
        assert more, f"only {len(got)} of 5 arrived"
        got += more
    assert {(m["from"], m["fromLabel"]) for m in got} == {(entity["gid"], label)}
    assert len(_entities(a, label)) == 1

    # its replies wait for a plain `bridge poll`; a plain `bridge reply` answers as it too
    a.bridge("reply", got[0]["msgId"], "pong", "--from", sink, check=True)
    polled = a.bridge_json("poll", "--wait", "5s")
    assert polled["gid"] == entity["gid"] and [m["content"] for m in polled["messages"]] == ["pong"]
    a.bridge("reply", polled["messages"][0]["msgId"], "thanks", check=True)
    [back] = a.bridge_json("poll", "--as", "sink", "--wait", "5s")["messages"]
    assert (back["kind"], back["from"], back["content"]) == ("REPLY", entity["gid"], "thanks")

    # --from and BRIDGE_GID still win
    a.bridge("send", "sink", "from main", "--from", sink, check=True)
    a.bridge("send", "sink", "env", env={"BRIDGE_GID": sink}, check=True)
    senders = [m["from"] for m in a.bridge_json("poll", "--as", "sink", "--wait", "5s")["messages"]]
    assert senders and set(senders) == {sink}


def test_first_poll_through_a_gateway_registers_it_and_reports_it(host_factory):
    a = host_factory("a")
    a.start_gateway()
    label = _label(a)
    polled = a.bridge("poll", "--json")
    assert polled.returncode == 0, polled.stderr
    result = json.loads(polled.stdout)
    assert result["messages"] == [] and result["registered"] == {"gid": result["gid"], "label": label}
    assert polled.stderr.startswith(f"bridge: polling as {label} (gid {result['gid']}), registered now")
    # a message sent to the label by someone else is there for the next plain poll
    other = a.register("other")
    a.bridge("send", label, "for the shell", "--from", other, check=True)
    again = a.bridge_json("poll", "--wait", "5s")
    assert [m["content"] for m in again["messages"]] == ["for the shell"] and "registered" not in again


def test_concurrent_first_sends_register_one_entity(host_factory):
    a = host_factory("a")
    a.register("sink")
    label = _label(a)
    # no gateway: separate processes race on the registry file itself
    procs = [_spawn(a, "send", "sink", f"direct {i}") for i in range(3)]
    results = [(p.wait(60), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close(), p.stderr.close()
    assert [code for code, _ in results] == [0, 0, 0], results
    assert sum("registered now" in err for _, err in results) == 1, results
    [entity] = _entities(a, label)

    # through the gateway: its API threads race, after the first entity is gone
    a.bridge("unregister", label, check=True)
    a.start_gateway()
    procs = [_spawn(a, "send", "sink", f"gateway {i}") for i in range(4)]
    results = [(p.wait(60), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close(), p.stderr.close()
    assert [code for code, _ in results] == [0] * 4, results
    assert sum("registered now" in err for _, err in results) == 1, results
    [fresh] = _entities(a, label)
    assert fresh["gid"] != entity["gid"]


def test_a_default_label_held_by_another_kind_of_entity_is_refused(host_factory, tmp_path):
    a = host_factory("a")
    a.register("sink")
    label = _label(a)
    taken = a.register(label, deliver=f"exec:cat >> {tmp_path / 'out'}", role="agent")
    for running in (False, True):
        if running:
            a.start_gateway()
        refused = a.bridge("send", "sink", "hi")
        assert refused.returncode == ExitCode.CONFLICT, refused.stderr
        assert len(refused.stderr.splitlines()) == 1 and label in refused.stderr and "--from" in refused.stderr
        assert a.bridge("poll").returncode == ExitCode.CONFLICT
    assert [e["gid"] for e in _entities(a, label)] == [taken]
    assert a.bridge_json("poll", "--as", "sink")["messages"] == []

    # a hold entity the user registered under that label is theirs: reused, nothing registered
    a.bridge("unregister", label, check=True)
    mine = a.register(label, role="orchestrator")
    sent = a.bridge("send", "sink", "hi")
    assert sent.returncode == 0 and sent.stderr == "", sent.stderr
    assert [m["from"] for m in a.bridge_json("poll", "--as", "sink", "--wait", "5s")["messages"]] == [mine]
