"""Converting an existing hub's node (or a plain embedded broker's) into a cluster hub's first node.

``bridge hub start --cluster`` on a node made without ``--cluster`` keeps its database: the
stopped node is renamed from ``bridge-<hash>@localhost`` to ``bridge@ADDR`` with RabbitMQ's
``rename_cluster_node`` (users, permissions, exchanges, queues, bindings and messages stay),
then started as a :class:`bridgecli.node_dist.ClusterNode`. A marker file, kept from
before the first change until the hub is saved as a cluster, makes the next ``hub start``
finish an interrupted conversion. Quorum queues and streams cannot be renamed.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bridgecli import localbroker
from bridgecli.errors import BrokerUnavailable, CannotWrite, Conflict, NotACluster
from bridgecli.hub.layout import HubSettings
from bridgecli.node_dist import node_name
from bridgecli.nodeusers import write_private_json
from bridgecli.rabbitnode import LocalNode, default_nodename

#: free disk space a conversion needs beyond twice the database (the rename copies it)
MARGIN_BYTES = 64 << 20
AGAIN = "run `bridge hub start --cluster` again: the old database is kept until the conversion is done"


@dataclass(frozen=True)
class Conversion:
    """Renaming node ``old`` to ``bridge@address`` (``new``), as the marker file records it."""

    old: str
    new: str
    address: str


def _mnesia() -> Path:
    return localbroker.broker_dir() / "mnesia"


def pending() -> Conversion | None:
    """The conversion an earlier ``hub start --cluster`` began and did not finish (None: none)."""
    try:
        return Conversion(**json.loads(localbroker.conversion_file().read_text()))
    except (OSError, ValueError, TypeError):
        return None


def old_node(before: HubSettings | None, cluster: bool) -> str | None:
    """The node whose database a ``--cluster`` start must convert (None: nothing to convert).
    NotACluster when the broker directory holds a node this machine did not make."""
    if not cluster or (before is not None and before.cluster):
        return None
    own = default_nodename(localbroker.broker_dir())
    found = [
        p.name
        for p in _mnesia().glob("*@*")
        if p.is_dir() and not p.name.endswith(("-plugins-expand", "-rename")) and not p.name.startswith("bridge@")
    ]
    if own in found:
        return own
    if found:
        raise NotACluster(
            f"this machine's broker directory holds a node it did not make ({found[0]})",
            f"move {_mnesia() / found[0]} away, or start the cluster hub from another data directory",
        )
    return None


def begin(old: str, address: str) -> Conversion:
    """Check that ``old`` can be converted, then write the marker (before anything stops).
    Conflict for quorum queues or streams; CannotWrite when the disk is too full."""
    plan = Conversion(old, node_name(address), address)
    data = _mnesia() / old
    replicated = [p.name for p in (data / "quorum" / old).glob("*") if p.is_dir()]
    replicated += [p.name for p in (data / "stream").glob("*") if p.is_dir()]
    if replicated:
        raise Conflict(
            f"node {old} has {len(replicated)} quorum queues or streams, which a renamed node cannot keep",
            "make them classic first: stop every gateway, run `bridge broker migrate-queues --to classic` "
            "and `bridge config set messaging.inbox_queue_type classic`, then convert",
        )
    size = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
    free = shutil.disk_usage(_mnesia()).free
    if free < 2 * size + MARGIN_BYTES:
        raise CannotWrite(
            f"converting node {old} needs {(2 * size + MARGIN_BYTES) >> 20} MiB free in {_mnesia()}, "
            f"there are {free >> 20} MiB",
            "free some disk space, then run `bridge hub start --cluster` again",
        )
    write_private_json(localbroker.conversion_file(), asdict(plan))
    return plan


def rename(plan: Conversion, timeout: float = 120.0) -> list[str]:
    """Rename the stopped node's database to ``plan.new``; safe to run again after an
    interruption at any point. Returns what it changed, one phrase each."""
    mnesia = _mnesia()
    if (mnesia / plan.new).is_dir():  # the last move below happened: nothing left to do
        return []
    if not (mnesia / plan.old).is_dir():
        raise BrokerUnavailable(
            f"neither node {plan.old} nor {plan.new} has a database in {mnesia}",
            f"restore {mnesia} from a backup, or remove {localbroker.conversion_file()} to start an empty hub",
        )
    began = time.monotonic()
    _roll_back(mnesia, plan)
    node = LocalNode(localbroker.broker_dir(), nodename=plan.old)
    try:
        # umask: the renamed database is the owner's only, as the node writes it
        result = node.ctl("rename_cluster_node", plan.old, plan.new, check=False, timeout=timeout, umask=0o077)
    finally:
        localbroker.stop_epmd_if_idle()  # the tool started one to impersonate both names
    if result.returncode != 0:
        said = " ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        raise BrokerUnavailable(f"renaming node {plan.old} to {plan.new} failed: {said}", AGAIN)
    # the database moves last: until it does, the old name owns everything
    for suffix in ("-rename", "-feature_flags"):
        if (mnesia / (plan.old + suffix)).exists():
            (mnesia / (plan.old + suffix)).rename(mnesia / (plan.new + suffix))
    (mnesia / plan.old).rename(mnesia / plan.new)
    shutil.rmtree(mnesia / f"{plan.old}-plugins-expand", ignore_errors=True)
    return [f"renamed node {plan.old} to {plan.new} in {time.monotonic() - began:.1f}s"]


def _roll_back(mnesia: Path, plan: Conversion) -> None:
    """Undo what an interrupted :func:`rename` left, so that the tool starts from the old
    database: files moved back to the old name, and a half-renamed database replaced by
    the tool's own copy of the original (kept in ``<old>-rename/mnesia-copy``)."""
    for suffix in ("-rename", "-feature_flags"):
        moved, origin = mnesia / (plan.new + suffix), mnesia / (plan.old + suffix)
        if moved.exists() and not origin.exists():
            moved.rename(origin)
    work = mnesia / f"{plan.old}-rename"
    if not work.exists():
        return
    copy = work / "mnesia-copy"
    if (work / "pending.config").exists() and copy.is_dir():  # the tool had begun to change it
        shutil.rmtree(mnesia / plan.old)
        copy.rename(mnesia / plan.old)
    shutil.rmtree(work)


def replicate_registrar_queue(info: localbroker.NodeInfo) -> list[str]:
    """Make the registrar's queue the one a cluster hub's registrars share (quorum, one
    consumer active): a plain hub's classic queue is deleted, so that they can declare it.
    A request still in it is dropped: its sender waits on a reply-to that a conversion
    outlasts, and sends it again (a join with the same invite, a claim at the next connect)."""
    import pika
    import pika.exceptions

    from bridgecli.amqp.connection import open_blocking
    from bridgecli.hub.registrar_loop import QUEUE
    from bridgecli.hub.state_replica import REGISTRAR_ARGUMENTS

    connection = open_blocking(pika.URLParameters(localbroker.admin_uri(info)))
    try:
        try:
            connection.channel().queue_declare(QUEUE, durable=True, arguments=REGISTRAR_ARGUMENTS)
            return []
        except pika.exceptions.ChannelClosedByBroker as exc:
            if exc.reply_code != 406:
                raise
        connection.channel().queue_delete(QUEUE)
        return [f"deleted the classic queue {QUEUE} for the cluster's registrars"]
    finally:
        if connection.is_open:
            connection.close()


def finish() -> None:
    """The hub is saved as a cluster hub: forget the conversion."""
    localbroker.conversion_file().unlink(missing_ok=True)
