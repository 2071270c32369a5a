"""Presence scheduling and statuses without a broker (the wiring is tested end to end in
test_presence_control.py)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from bridgecli.gateway import presence as presence_mod
from bridgecli.interfaces import Entity


def _presence(interval=1.0, **gw_attrs):
    lane = SimpleNamespace(ready=threading.Event())
    lane.ready.set()
    gw_attrs.setdefault("tracking", SimpleNamespace(activity_of=lambda gid: None))
    gw = SimpleNamespace(
        config=SimpleNamespace(values={"roster.interval": interval, "roster.expiry_missed": 3}), lane=lane, **gw_attrs
    )
    p = presence_mod.Presence(gw)
    p.beats = []
    p.heartbeat_all = lambda: p.beats.append(p._next_due)
    return p


def test_heartbeats_keep_their_schedule_and_skip_after_a_stall(monkeypatch):
    p = _presence(interval=1.0)
    clock = [100.0]
    monkeypatch.setattr(presence_mod.time, "monotonic", lambda: clock[0])
    p._next_due = 100.0
    for now in (100.2, 100.5, 101.24, 102.03, 102.5):  # ticks arrive late by varying amounts
        clock[0] = now
        p._tick()
    # due times stay on the 1 s grid whatever each tick's lateness (now + interval drifted)
    assert p.beats == [101.0, 102.0, 103.0]
    clock[0] = 107.6  # the I/O thread stalled for several intervals: one beat, no burst
    p._tick()
    p._tick()
    assert p.beats == [101.0, 102.0, 103.0, 108.6]


class _Launcher:
    def __init__(self, answers, name):
        self.answers, self.name = answers, name

    def status(self, handle):
        return self.answers[self.name]


def _entity(launcher):
    return Entity(
        gid="0b0c3a5e-1111-4222-8333-444455556666",
        label="w",
        role="agent",
        deliver="hold",
        host="h",
        created=1.0,
        launcher=launcher,
        launch_data={"pid": 1},
    )


def test_a_spawned_entity_whose_process_is_gone_is_announced_gone():
    answers = {"subprocess": "gone"}
    plugins = SimpleNamespace(provider=lambda kind, name: lambda config: _Launcher(answers, name))
    backend = SimpleNamespace(status=lambda entity: "idle")
    p = _presence(plugins=plugins, backend_for=lambda entity: backend)
    assert p.status_of(_entity("subprocess")) == "gone"
    answers["subprocess"] = "running"
    assert p.status_of(_entity("subprocess")) == "idle"  # alive: the backend's status
    assert p.status_of(_entity(None)) == "idle"  # registered by hand: no launcher to ask


def test_what_the_agents_hooks_report_wins_unless_its_pane_is_gone():
    reported = {}
    statuses = {"now": "idle"}
    backend = SimpleNamespace(status=lambda entity: statuses["now"])
    tracking = SimpleNamespace(activity_of=reported.get)
    p = _presence(plugins=SimpleNamespace(), backend_for=lambda entity: backend, tracking=tracking)
    entity = _entity(None)
    assert p.status_of(entity) == "idle"
    reported[entity.gid] = "blocked"  # its Notification hook: waiting for the user
    assert p.status_of(entity) == "blocked"
    statuses["now"] = "gone"
    assert p.status_of(entity) == "gone"
