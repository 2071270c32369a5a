"""Pure logic of the CDP executor: the persisted group registry and stable ids."""

from __future__ import annotations

from bridgecli_cdp.registry import GroupRegistry, stable_executor_id


def test_registry_persists_and_prunes(bridge_home):
    registry = GroupRegistry("e1")
    registry.add("a", "t1")
    registry.add("a", "t2")
    registry.add("b", "t3")
    assert registry.active("a") == "t2"

    reloaded = GroupRegistry("e1")  # a restarted executor reads the file
    assert reloaded.tabs("a") == ["t1", "t2"] and reloaded.names() == ["a", "b"]
    reloaded.prune(["t1"])  # t2, t3 were closed while the executor was away
    assert reloaded.names() == ["a"] and reloaded.active("a") == "t1"
    assert GroupRegistry("e2").names() == []  # keyed by executor id


def test_remove_tab_reports_its_group_and_drops_empty_groups(bridge_home):
    registry = GroupRegistry("e1")
    registry.add("a", "t1")
    assert registry.remove_tab("t1") == "a"
    assert registry.names() == [] and registry.remove_tab("t1") is None


def test_stable_executor_id_is_per_label(bridge_home):
    first = stable_executor_id("work")
    assert stable_executor_id("work") == first
    assert stable_executor_id("other") != first
    assert first.startswith("cdp-")
