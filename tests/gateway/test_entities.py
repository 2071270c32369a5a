"""The entity registry's in-memory cache never hides a change, whoever made it."""

from __future__ import annotations

import sqlite3
import threading

from bridgecli.hoststate.entities import Registry


def test_a_change_through_another_connection_is_seen_at_once(tmp_path):
    path = tmp_path / "entities.db"
    gateway, other = Registry(path), Registry(path)  # e.g. the gateway and `bridge register` direct
    main = gateway.add(label="main", role="main", deliver="hold", host="h")
    assert gateway.get(main.gid).label == "main" and gateway.get(main.gid).label == "main"  # cached now
    newcomer_gid = "11111111-1111-4111-8111-111111111111"
    assert gateway.get(newcomer_gid) is None  # a miss is cached too
    assert [e.label for e in gateway.all()] == ["main"]

    other.add(label="newcomer", role="agent", deliver="hold", host="h", gid=newcomer_gid)
    assert gateway.get(newcomer_gid).label == "newcomer"
    assert [e.label for e in gateway.all()] == ["main", "newcomer"]
    assert gateway.resolve("newcomer").gid == newcomer_gid

    other.remove(main.gid)
    assert gateway.get(main.gid) is None
    assert [e.label for e in gateway.all()] == ["newcomer"]

    # a plain SQLite client (no Registry at all) changing a row
    with sqlite3.connect(path) as db:
        db.execute("UPDATE entities SET deliver = 'exec:true' WHERE gid = ?", (newcomer_gid,))
    assert gateway.get(newcomer_gid).deliver == "exec:true"


def test_a_change_through_the_same_registry_is_seen_by_every_thread(tmp_path):
    registry = Registry(tmp_path / "entities.db")
    gid = "22222222-2222-4222-8222-222222222222"
    seen: list[object] = []
    worker = threading.Thread(target=lambda: seen.append(registry.get(gid)))
    worker.start()
    worker.join()
    assert seen == [None]
    registry.add(label="late", role="agent", deliver="hold", host="h", gid=gid)
    worker = threading.Thread(target=lambda: seen.append(registry.get(gid)))
    worker.start()
    worker.join()
    assert seen[-1] is not None and seen[-1].label == "late"
    registry.remove(gid)
    assert registry.get(gid) is None


def test_a_registry_in_wal_mode_is_not_cached(tmp_path):
    path = tmp_path / "entities.db"
    Registry(path)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
    registry, other = Registry(path), Registry(path)
    gid = "33333333-3333-4333-8333-333333333333"
    assert registry.get(gid) is None
    other.add(label="walled", role="agent", deliver="hold", host="h", gid=gid)
    assert registry.get(gid).label == "walled"


def test_entities_registered_and_unregistered_through_the_gateway_are_seen_at_once(host_factory):
    a = host_factory("a")
    a.start_gateway()
    a.register("peer")
    a.register("main", role="main")  # through the gateway's socket
    sent = a.bridge("send", "--from", "main", "peer", "hi")
    assert sent.returncode == 0, sent.stderr
    assert a.bridge("unregister", "main").returncode == 0
    refused = a.bridge("send", "--from", "main", "peer", "hi")
    assert refused.returncode != 0 and "no entity 'main'" in refused.stderr

    # registered behind the gateway's back, straight into its database (another process's
    # write, as `bridge register` makes without a gateway): seen by the next request
    Registry(a.home.data_dir / "entities.db").add(label="direct", role="main", deliver="hold", host="a")
    sent = a.bridge("send", "--from", "direct", "peer", "hi")
    assert sent.returncode == 0, sent.stderr
