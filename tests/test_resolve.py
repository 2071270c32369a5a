"""Target resolution: gids, labels, prefixes, ambiguity."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from bridgecli.errors import Ambiguous, ConfigError, NotFound
from bridgecli.hoststate.entities import Registry
from bridgecli.resolve import resolve_target


class FakeRoster:
    """A roster view with fixed entries (the real RosterView is tested in test_roster)."""

    def __init__(self, entries):
        self._entries = entries

    def entries(self):
        return self._entries

    def get(self, gid):
        return next((e for e in self._entries if e.gid == gid), None)


def _entry(label, host):
    return SimpleNamespace(gid=str(uuid.uuid4()), label=label, host=host)


def test_local_label_and_gid(tmp_path):
    reg = Registry(tmp_path / "e.db")
    ent = reg.add(label="main", role="main", deliver="hold", host="a")
    assert resolve_target("main", registry=reg) == ent.gid
    assert resolve_target(ent.gid.upper(), registry=reg) == ent.gid
    assert resolve_target(ent.gid[:8], registry=reg) == ent.gid


def test_ambiguous_label_lists_candidates_with_hosts(tmp_path):
    reg = Registry(tmp_path / "e.db")
    roster = FakeRoster([_entry("rev", "hostb"), _entry("rev", "hostc")])
    with pytest.raises(Ambiguous) as info:
        resolve_target("rev", registry=reg, roster=roster)
    assert "hostb" in str(info.value) and "hostc" in str(info.value)


def test_unknown_label_and_unannounced_gid(tmp_path):
    reg = Registry(tmp_path / "e.db")
    roster = FakeRoster([])
    with pytest.raises(NotFound):
        resolve_target("ghost", registry=reg, roster=roster)
    gid = str(uuid.uuid4())
    with pytest.raises(NotFound) as info:
        resolve_target(gid, registry=reg, roster=roster)
    assert "--force" in str(info.value)
    assert resolve_target(gid, registry=reg, roster=roster, force=True) == gid
    with pytest.raises(ConfigError):
        resolve_target("  ", registry=reg)


def test_registry_refuses_duplicate_labels_and_bad_input(tmp_path):
    from bridgecli.errors import Conflict

    reg = Registry(tmp_path / "e.db")
    reg.add(label="x", role="agent", deliver="hold", host="a")
    with pytest.raises(Conflict):
        reg.add(label="x", role="agent", deliver="hold", host="a")
    with pytest.raises(ConfigError):
        reg.add(label="bad label!", role="agent", deliver="hold", host="a")
    with pytest.raises(ConfigError):
        reg.add(label="y", role="boss", deliver="hold", host="a")
