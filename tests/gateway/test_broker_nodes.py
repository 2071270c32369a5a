"""The rule a joined host uses to add cluster nodes it learns to its ``broker.uri``."""

from __future__ import annotations

from bridgecli.gateway.broker_nodes import merge_uris, node_address

FIRST = "amqps://hostb:s%40cret@192.0.2.10:5671/%2Fv"
SECOND = "amqps://hostb:s%40cret@192.0.2.11:5671/%2Fv"


def test_new_nodes_get_the_first_uris_credentials_after_the_existing_ones():
    merged, ignored = merge_uris([SECOND, FIRST], ["192.0.2.10:5671", "192.0.2.11:5671", "192.0.2.12:5671"])
    assert merged == [SECOND, FIRST, "amqps://hostb:s%40cret@192.0.2.12:5671/%2Fv"]
    assert ignored == []


def test_duplicates_are_not_added():
    merged, _ = merge_uris([FIRST], ["192.0.2.11:5671", "192.0.2.11:5671", "192.0.2.10:5671"])
    assert merged == [FIRST, SECOND]


def test_malformed_entries_are_ignored():
    bad = [7, None, "no-port", "192.0.2.13:0", "192.0.2.13:99999", "bad host:5671", "a@b:5671", "x/y:1", "h:²"]
    merged, ignored = merge_uris([FIRST], [*bad, "node3.example:5671"])
    assert merged == [FIRST, "amqps://hostb:s%40cret@node3.example:5671/%2Fv"]
    assert ignored == bad
    assert merge_uris([FIRST], "192.0.2.11:5671") == ([FIRST], ["192.0.2.11:5671"])


def test_ipv6_addresses_are_bracketed_and_compared_normalised():
    first = "amqps://u:p@[fd00::a]:5671/"
    merged, _ = merge_uris([first], ["[fd00:0::a]:5671", "fd00::b:5671", "[fd00::c]:5671"])
    assert merged == [first, "amqps://u:p@[fd00::b]:5671/", "amqps://u:p@[fd00::c]:5671/"]
    assert node_address("[fd00::1]") is None


def test_a_uri_without_a_port_counts_as_the_schemes_default():
    merged, _ = merge_uris(["amqps://u:p@Node1.Example/"], ["node1.example:5671", "node1.example:5672"])
    assert merged == ["amqps://u:p@Node1.Example/", "amqps://u:p@node1.example:5672/"]
