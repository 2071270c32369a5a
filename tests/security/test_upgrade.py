"""A hub and a host that joined it under the previous version keep working after the upgrade:
``bridge hub start`` with the new code secures the hub, re-grants the joined host in the new
form, and the host's entities keep their (untagged) gids, inboxes and pending messages.

The previous version is the last commit before tenancy, run from a ``git archive`` of it
(``PYTHONPATH`` puts it ahead of the installed package).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pika
import pika.exceptions
import pytest

from bridgecli import gids
from tests.multihost import hub_lab as lab_module
from tests.multihost.helpers import poll, register, wait_announced
from tests.support.netns import NetnsLab, netns_supported

pytestmark = [pytest.mark.netns, pytest.mark.slow]

#: main before joined hosts became tenants
PREVIOUS = "497e40c"
REPO = Path(__file__).resolve().parents[2]


def _previous_version(into: Path) -> Path | None:
    """The previous version's ``bridgecli`` package under ``into`` (None: not in this clone)."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", PREVIOUS, "bridgecli"], capture_output=True, check=False
    )
    if archive.returncode != 0:
        return None
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


@pytest.fixture(scope="module")
def old_lab() -> Iterator[tuple[NetnsLab, dict[str, str]]]:
    reason = netns_supported()
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="bupg", dir="/tmp"))
    old = _previous_version(root / "previous")
    if old is None:  # a shallow clone: the previous version is not here to run
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"commit {PREVIOUS} is not in this clone (clone with its history to run this test)")
    lab = NetnsLab(root, hosts=("hostB",), start_broker=False, prefix=f"bu{os.getpid()}")
    failures: list[str] = []
    try:
        lab.setup()
        for key in ("BRIDGE_BROKER_URI", "BRIDGE_HOST_ID"):
            lab.host("hostB").env.pop(key, None)
        lab_module.hub_home(lab)
        for name in ("hub", "hostB"):
            lab.host(name).env["PYTHONPATH"] = str(old)
        lab.bridge("hub", "broker", "start", timeout=180)
        # the registrar runs as `python -m`, which puts the working directory first on its
        # path: from the repository it would import today's code
        here = os.getcwd()
        os.chdir(root)
        try:
            lab.bridge("hub", "hub", "start", "--listen", lab.broker_addr, timeout=180)
        finally:
            os.chdir(here)
        lab.start_gateway("hub")
        lab.bridge("hostB", "join", lab_module.invite(lab, "hostb"))
        lab.start_gateway("hostB")
        yield lab, {"old": str(old)}
    finally:
        failures = lab.teardown()
        shutil.rmtree(root, ignore_errors=True)
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)


def test_a_hub_and_host_of_the_previous_version_keep_working_after_hub_start(old_lab):
    lab, _ = old_lab
    # under the previous version: entities with untagged gids, a message both ways
    main = register(lab, "hub", "u-main", role="main")
    worker = register(lab, "hostB", "u-worker")
    assert not gids.minted_on(main, "hub") and not gids.minted_on(worker, "hostb"), "the old code minted these"
    wait_announced(lab, "hub", worker)
    lab.bridge("hub", "send", worker, "before", "--from", "u-main")
    assert [m["content"] for m in poll(lab, "hostB", worker)] == ["before"]
    # a message waits in the joined host's inbox across the upgrade
    lab.stop_gateway("hostB")
    pending = lab.bridge_json("hub", "send", worker, "during", "--from", "u-main", "--force")["msgId"]
    lab.stop_gateway("hub")

    # the upgrade: the new code on both machines, `bridge hub start` on the hub
    for name in ("hub", "hostB"):
        lab.host(name).env.pop("PYTHONPATH")
    started = lab.bridge("hub", "hub", "start", timeout=240)
    assert "secured this hub" in started.stderr, started.stderr
    lab.start_gateway("hub")
    lab.start_gateway("hostB")

    # the pending message arrives (published by the old hub as guest, which hostB's bridge.toml
    # of the previous version still trusts), and the conversation goes on both ways
    got = poll(lab, "hostB", worker)
    assert [(m["msgId"], m["content"], m["user"]) for m in got] == [(pending, "during", "guest")]
    lab.bridge("hostB", "send", main, "after", "--from", "u-worker")
    assert [(m["content"], m["user"]) for m in poll(lab, "hub", main)] == [("after", "hostb")]
    # a new entity on the joined host gets a tagged gid, and its inbox works at once
    fresh = register(lab, "hostB", "u-fresh")
    assert gids.minted_on(fresh, "hostb")
    wait_announced(lab, "hub", fresh)
    lab.bridge("hub", "send", fresh, "welcome", "--from", "u-main")
    assert [m["content"] for m in poll(lab, "hostB", fresh)] == ["welcome"]
    # and the joined host is a tenant now: no more guest, no more configure on shared objects
    with pytest.raises((pika.exceptions.ProbableAuthenticationError, pika.exceptions.AuthenticationError)):
        lab.in_ns(
            "broker",
            lambda: pika.BlockingConnection(pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{_amqp_port(lab)}/")),
        )
    from tests.multihost.hub_lab import as_host

    def redeclare(connection):
        try:
            connection.channel().exchange_declare("bridge.msg", "fanout", durable=True)
        except pika.exceptions.ChannelClosedByBroker as exc:
            return exc.reply_code
        return 0

    assert as_host(lab, "hostB", redeclare) == 403


def _amqp_port(lab: NetnsLab) -> int:
    import json

    state = json.loads((lab.host("hub").home.data_dir / "broker" / "state.json").read_text())
    return int(state["uri"].rsplit(":", 1)[1].split("/")[0])
