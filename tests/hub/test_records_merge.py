"""The three-way merge of hub records: each side's own changes kept, a row both changed
resolved the same way whichever side merges, a merge that breaks a constraint left undone."""

from __future__ import annotations

import sqlite3

import pytest

from bridgecli.hub.hub_store import HubStore
from bridgecli.hub.records_merge import holds, merge_into, three_way
from bridgecli.hub.state_replica import snapshot


def _rows(invites=None, hosts=None):
    return {"invites": invites or {}, "hosts": hosts or {}, "gids": {}, "nodes": {}}


OPEN = ("i1", "hostb", 1.0, 9.0, None, None)
USED = ("i1", "hostb", 1.0, 9.0, 5.0, None)
REVOKED = ("i1", "hostb", 1.0, 9.0, None, 6.0)


@pytest.mark.parametrize(
    "ours, theirs, written",
    [
        (OPEN, USED, USED),  # only they changed it
        (USED, OPEN, None),  # only we did: nothing to write
        (USED, USED, None),  # both, alike
        (REVOKED, USED, USED),  # both, differently: the used one (a set field beats an unset one)
        (USED, REVOKED, None),
        (None, USED, USED),  # we deleted it, they used it: the row is kept
    ],
)
def test_each_row_takes_the_side_that_changed_it(ours, theirs, written) -> None:
    base = _rows({"i1": OPEN})
    writes, conflicts = three_way(base, _rows({"i1": ours} if ours else {}), _rows({"i1": theirs} if theirs else {}))
    assert writes.get("invites", {}).get("i1", "none") == (written if written is not None else "none")
    assert bool(conflicts) == (ours not in (OPEN, theirs) and theirs != OPEN)


def test_a_row_both_sides_changed_is_resolved_alike_by_each() -> None:
    base = _rows({"i1": OPEN}, {"hostc": ("hostc", "hostc", 1.0, None)})
    one = _rows({"i1": REVOKED}, {"hostc": ("hostc", "hostc", 1.0, 7.0)})
    two = _rows({"i1": USED}, {"hostc": ("hostc", "hostc", 8.0, None)})
    to_one, _ = three_way(base, one, two)
    to_two, _ = three_way(base, two, one)
    after_one = {t: {**one[t], **to_one.get(t, {})} for t in one}
    after_two = {t: {**two[t], **to_two.get(t, {})} for t in two}
    assert after_one == after_two


def test_merge_into_writes_their_rows_beside_ours(tmp_path) -> None:
    store = HubStore(tmp_path / "hub.db")
    base = snapshot(store.db)
    theirs = HubStore(tmp_path / "theirs.db")
    theirs.add_host("hostb", "hostb")
    store.add_invite("inv", "hostc", 2e9, False)
    assert merge_into(store.db, base, snapshot(theirs.db)) == 1
    assert [h.host for h in store.hosts()] == ["hostb"] and store.invite("inv") is not None
    assert not holds(store.db, snapshot(theirs.db))
    theirs.add_invite("inv", "hostc", 2e9, False)
    theirs.db.execute("UPDATE invites SET created=? WHERE id='inv'", (store.invite("inv").created,))
    assert holds(store.db, snapshot(theirs.db))


def test_a_merge_that_breaks_a_unique_column_changes_nothing(tmp_path) -> None:
    store = HubStore(tmp_path / "hub.db")
    base = snapshot(store.db)
    store.add_host("hostb", "shared-user")
    theirs = HubStore(tmp_path / "theirs.db")
    theirs.add_host("hostc", "shared-user")  # two hosts cannot have one broker user
    with pytest.raises(sqlite3.IntegrityError):
        merge_into(store.db, base, snapshot(theirs.db))
    assert [h.host for h in store.hosts()] == ["hostb"]
