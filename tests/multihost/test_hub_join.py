"""Two commands on the hub, two on a new host, across real network stacks: then every use
case works, under least privilege the broker enforces and that follows registration.

The hub is a bridge installation in the broker namespace (``bridge hub start``); hostB and
hostC start with no broker settings and reach the hub only over their veth addresses.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pika
import pika.exceptions
import pytest

from bridgecli.errors import ExitCode
from tests.multihost.helpers import poll, poll_until, register, wait_announced, wait_for
from tests.multihost.hub_lab import as_host, invite, queue_depth
from tests.support.env import BRIDGE_BIN
from tests.support.netns import NetnsLab

pytestmark = [pytest.mark.netns, pytest.mark.slow]


def test_join_then_u1_both_ways(hub_lab: NetnsLab):
    lab = hub_lab
    main = register(lab, "hub", "j-main", role="main")
    worker = register(lab, "hostB", "j-worker")
    wait_announced(lab, "hub", worker)
    wait_announced(lab, "hostB", main)
    sent = lab.bridge_json("hub", "send", "j-worker", "review PR 7", "--from", "j-main")
    got = poll(lab, "hostB", worker)
    assert [(m["content"], m["fromHost"], m["user"]) for m in got] == [("review PR 7", "hub", "hub")]
    reply = lab.bridge("hostB", "reply", sent["msgId"], "LGTM", "--from", "j-worker").stdout.strip()
    back = poll(lab, "hub", main)
    assert [(m["msgId"], m["content"], m["user"]) for m in back] == [(reply, "LGTM", "hostb")]
    # the joined host checks senders by default: a message claiming another host is refused
    config = lab.host("hostB").home.config_file.read_text()
    assert 'sender_check = "host"' in config and '[hub]\nid = "hub"' in config

    def hostb() -> dict:  # the broker's connection list lags its statistics interval (5 s)
        row = {h["host"]: h for h in lab.bridge_json("hub", "hub", "hosts")["hosts"]}["hostb"]
        return row if row["gateway_connected"] else {}

    assert worker in [e["gid"] for e in wait_for(hostb, 20, what="hostB connected")["entities"]]


def test_what_a_joined_host_must_not_do_is_refused_by_the_broker(hub_lab: NetnsLab):
    lab = hub_lab
    theirs = register(lab, "hub", "lp-hub")
    mine = register(lab, "hostB", "lp-b")
    inbox = f"agent.{theirs}.inbox"

    def refused(action) -> int:
        def attempt(connection):
            channel = connection.channel()
            channel.confirm_delivery()  # a publish waits for its answer: a refusal raises here
            try:
                action(channel)
            except pika.exceptions.ChannelClosedByBroker as exc:
                return exc.reply_code
            return 0

        return as_host(lab, "hostB", attempt)

    assert refused(lambda ch: ch.basic_consume(inbox, lambda *a: None)) == 403
    assert refused(lambda ch: ch.basic_get(inbox)) == 403
    assert refused(lambda ch: ch.queue_purge(inbox)) == 403
    assert refused(lambda ch: ch.queue_delete(inbox)) == 403
    assert refused(lambda ch: ch.queue_bind(f"agent.{mine}.inbox", "bridge.msg", routing_key=theirs)) == 403
    assert refused(lambda ch: ch.basic_publish("bridge.roster", f"roster.hub.{theirs}", b"{}")) == 403
    assert refused(lambda ch: ch.basic_publish("", inbox, b"{}")) == 403
    assert refused(lambda ch: ch.basic_publish("bridge.msg", theirs, b"{}", pika.BasicProperties(user_id="hub"))) == 406
    # a gid another host owns cannot be claimed through the registrar either
    from bridgecli.hub import claims

    def claim(connection):
        channel = connection.channel()
        answers: list[bytes] = []
        channel.basic_consume(claims.REPLY_TO, lambda c, m, p, b: answers.append(b), auto_ack=True)
        channel.basic_publish(
            claims.EXCHANGE,
            claims.ROUTING_KEY,
            json.dumps({"op": "claim", "entities": [{"gid": theirs}]}).encode(),
            pika.BasicProperties(reply_to=claims.REPLY_TO, user_id="hostb"),
        )
        deadline = time.monotonic() + 10
        while not answers and time.monotonic() < deadline:
            connection.process_data_events(time_limit=0.2)
        return json.loads(answers[0])

    answer = as_host(lab, "hostB", claim)
    assert answer["ok"] is False and answer["kind"] == "denied" and "carries the tag of host hub" in answer["error"]
    assert refused(lambda ch: ch.basic_get(inbox)) == 403  # and still no access after the attempt


def test_cross_host_spawn_onto_a_joined_host_needs_no_operator_step(hub_lab: NetnsLab):
    lab = hub_lab
    host_b = lab.host("hostB")
    marker = host_b.home.root / "spawned.txt"
    with host_b.home.config_file.open("a") as config:
        config.write(f"""
[profiles.hubworker]
launcher = "subprocess"
command = "echo $BRIDGE_GID > {marker}; echo READY; exec sleep 300"
ready_line = "^READY$"
""")
    lab.stop_gateway("hostB")  # profiles are read from the target's own config at start
    lab.start_gateway("hostB")
    register(lab, "hub", "sp-main", role="main")
    wait_for(
        lambda: "hostb" in {g["host"] for g in lab.bridge_json("hub", "roster")["gateways"]},
        30,
        what="hostB's gateway in the hub's roster",
    )
    handle = lab.bridge_json("hub", "spawn", "hubworker", "--host", "hostb", "--label", "sp-rev", "--from", "sp-main")
    assert marker.read_text().split() == [handle["gid"]]
    lab.bridge("hub", "send", "sp-rev", "first task", "--from", "sp-main")
    assert [m["content"] for m in poll(lab, "hostB", handle["gid"])] == ["first task"]
    lab.bridge("hub", "stop", "sp-rev", "--from", "sp-main")

    def gone_from_hub_hosts() -> bool:  # the hub lists announced entities: soft state, soon gone
        hosts = {h["host"]: h for h in lab.bridge_json("hub", "hub", "hosts")["hosts"]}
        return handle["gid"] not in [e["gid"] for e in hosts["hostb"]["entities"]]

    wait_for(gone_from_hub_hosts, 30, what="the stopped entity gone from `bridge hub hosts`")


def test_bridge_mcp_on_a_joined_host(hub_lab: NetnsLab):
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    lab = hub_lab
    peer = register(lab, "hub", "mcp-peer")
    host_b = lab.host("hostB")

    async def session() -> str:
        params = StdioServerParameters(
            command="ip",
            args=["netns", "exec", host_b.ns, BRIDGE_BIN, "mcp", "--label", "bmain", "--no-browser"],
            env=host_b.env,
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                result = await client.call_tool("bridge_send", {"target": peer, "content": "from an MCP main"})
                assert not result.is_error, result.content
                return result.content[0].text

    anyio.run(session)
    assert [m["content"] for m in poll(lab, "hub", peer)] == ["from an MCP main"]


def test_invite_refusals_each_say_what_to_do(hub_lab: NetnsLab, tmp_path):
    from bridgecli.hub import invite as invite_mod
    from bridgecli.hub.pki import HubPki

    lab = hub_lab
    line = invite(lab, "hostc")
    assert lab.bridge("hub", "hub", "invite", "hostb", check=False).returncode == ExitCode.CONFLICT
    # malformed, and an invite whose CA is another hub's: nothing is sent to that server
    bad = lab.bridge("hostC", "join", line[:-20], check=False)
    assert bad.returncode == ExitCode.INVITE and "malformed invite" in bad.stderr
    other = HubPki(tmp_path / "other")
    other.ensure_ca("elsewhere")
    forged = invite_mod.decode(line)
    forged = invite_mod.Invite(**{**forged.__dict__, "ca_der": other.ca_der()})
    wrong = lab.bridge("hostC", "join", forged.encode(), check=False)
    assert wrong.returncode == ExitCode.TLS and "not the hub this invite is for" in wrong.stderr
    dead = invite_mod.Invite(**{**forged.__dict__, "addresses": (f"{lab.broker_addr}:1",)})
    unreachable = lab.bridge("hostC", "join", dead.encode(), check=False)
    assert unreachable.returncode == ExitCode.BROKER_UNAVAILABLE and f"{lab.broker_addr}:1" in unreachable.stderr
    # the real invite works once; a second use and an expired one are refused
    lab.bridge("hostC", "join", line)
    again = lab.bridge("hostC", "join", line, "--force", check=False)
    assert again.returncode == ExitCode.INVITE and ("used" in again.stderr or "closed" in again.stderr)
    short = invite(lab, "late", "--expires", "1s")
    time.sleep(1.5)
    expired = lab.bridge("hostC", "join", short, "--force", check=False)
    assert expired.returncode == ExitCode.INVITE and "expired" in expired.stderr
    withdrawn = invite(lab, "withdrawn")
    invite_id = invite_mod.decode(withdrawn).invite_id
    assert invite_id in [i["id"] for i in lab.bridge_json("hub", "hub", "invites")["invites"]]
    lab.bridge("hub", "hub", "invites", "--revoke", invite_id)
    revoked = lab.bridge("hostC", "join", withdrawn, "--force", check=False)
    assert revoked.returncode == ExitCode.INVITE and "used or revoked" in revoked.stderr
    listed = lab.bridge_json("hub", "hub", "invites", "--all")["invites"]
    assert {i["state"] for i in listed if i["host"] == "late"} == {"expired"}
    assert {i["state"] for i in listed if i["host"] == "withdrawn"} == {"revoked"}
    # joining while a gateway of the old configuration runs
    lab.start_gateway("hostC")
    try:
        busy = lab.bridge("hostC", "join", invite(lab, "hostc", "--replace"), "--force", check=False)
        assert busy.returncode == ExitCode.CONFLICT and "gateway" in busy.stderr
    finally:
        lab.stop_gateway("hostC")


def test_revoke_cuts_a_live_gateway_off_and_keeps_its_messages(hub_lab: NetnsLab):
    lab = hub_lab
    if "hostc" not in {h["host"] for h in lab.bridge_json("hub", "hub", "hosts")["hosts"] if not h["revoked"]}:
        lab.bridge("hostC", "join", invite(lab, "hostc", "--replace"), "--force")
    lab.start_gateway("hostC")
    gid = register(lab, "hostC", "rv-c")
    wait_announced(lab, "hub", gid)
    mark = len(lab.gateway_text("hostC"))
    cut = lab.bridge_json("hub", "hub", "revoke", "hostc")
    assert cut["connections_closed"] >= 1
    lab.wait_log("hostC", "refused the credentials", timeout=15, after=mark)
    assert lab.host("hostC").gateway.poll() is None, "the revoked gateway keeps retrying, it does not crash"
    register(lab, "hub", "rv-main", role="main")
    lab.bridge("hub", "send", gid, "for later", "--from", "rv-main")
    wait_for(lambda: queue_depth(lab, f"agent.{gid}.inbox") == 1, 10, what="the message kept in the inbox")
    lab.stop_gateway("hostC")


def test_hub_restart_mid_stream_loses_nothing_and_grants_survive(hub_lab: NetnsLab):
    lab = hub_lab
    main = register(lab, "hub", "rs-main", role="main")
    worker = register(lab, "hostB", "rs-worker")
    wait_announced(lab, "hostB", main)
    ids = [str(uuid.uuid4()) for _ in range(20)]
    failures: list[str] = []

    def sender() -> None:
        for n, msg_id in enumerate(ids):
            deadline = time.monotonic() + 90
            while (
                lab.bridge(
                    "hostB", "send", main, f"m{n}", "--id", msg_id, "--from", "rs-worker", check=False, timeout=60
                ).returncode
                != 0
            ):
                if time.monotonic() > deadline:
                    failures.append(msg_id)
                    break
                time.sleep(0.5)

    thread = threading.Thread(target=sender)
    thread.start()
    time.sleep(1)
    lab.stop_gateway("hub")
    lab.bridge("hub", "hub", "stop", timeout=120)
    lab.bridge("hub", "hub", "start", timeout=180)
    lab.start_gateway("hub")
    thread.join(timeout=240)
    assert not failures
    got = poll_until(lab, "hub", main, len(ids), timeout=90)
    assert sorted(m["msgId"] for m in got) == sorted(ids)
    # the joined host's grants are still in force: its inbox is served after the restart
    wait_announced(lab, "hub", worker)
    lab.bridge("hub", "send", worker, "after restart", "--from", "rs-main")
    assert [m["content"] for m in poll(lab, "hostB", worker, wait="30s")] == ["after restart"]


def test_the_hub_reports_itself(hub_lab: NetnsLab):
    status = hub_lab.bridge_json("hub", "hub", "status")
    assert status["running"] and status["registrar"]["alive"]
    assert status["addresses"] == [f"{hub_lab.broker_addr}:5671"]
    config = hub_lab.host("hostB").home.config_file
    assert config.stat().st_mode & 0o777 == 0o600, "join's bridge.toml holds a password"
