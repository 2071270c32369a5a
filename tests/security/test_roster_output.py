"""What ``bridge roster`` and ``bridge hub hosts`` print never carries a terminal control
sequence, whoever chose the label."""

from __future__ import annotations

import json

from bridgecli.cli import hub as hub_cli
from bridgecli.cli import roster as roster_cli
from bridgecli.results import RosterResult
from bridgecli.sanitize import is_inert

EVIL = "rev\x1b]0;owned\x07\x1b[2J\r\nfake-row\x9b31m"


def test_the_roster_table_prints_no_control_character(capsys):
    entry = {"label": EVIL, "gid": "\x1b[31mabcdef", "host": "b\r", "role": EVIL, "status": EVIL, "last_seen": 0}
    roster_cli._render(RosterResult.from_wire({"entries": [entry], "gateways": [{"host": EVIL}]}))
    out = capsys.readouterr()
    assert is_inert(out.out.replace("\n", "")) and is_inert(out.err.replace("\n", ""))
    assert out.out.count("\n") == 2  # the header and one row: no forged line


def test_hub_hosts_prints_no_control_character_in_either_form(monkeypatch, capsys):
    from bridgecli.hub import host_admin

    row = {"host": "hostb", "user": "hostb", "hub": False, "joined": 1.0, "revoked": None, "gateway_connected": True}
    row["entities"] = [{"gid": "0123abcd-0000-4000-8000-000000000000", "label": EVIL}]
    monkeypatch.setattr(host_admin, "list_hosts", lambda: [dict(row)])
    # and one entity more, as its host announces it on the roster
    announced = {"gid": "0123abcd-0000-4000-8000-000000000001", "label": EVIL}
    monkeypatch.setattr(
        hub_cli, "_with_announced", lambda app, rows: [{**r, "entities": [*r["entities"], announced]} for r in rows]
    )
    hosts = hub_cli.hosts.callback.__wrapped__  # without click's context: the app is not used
    hosts(None, as_json=False)
    assert is_inert(capsys.readouterr().out.replace("\n", ""))
    hosts(None, as_json=True)
    out = capsys.readouterr().out
    assert is_inert(out.replace("\n", ""))
    [printed] = json.loads(out)["hosts"]
    assert printed["entities"][0]["label"].startswith("rev") and printed["host"] == "hostb"
    assert printed["entities"][1]["label"].startswith("rev") and len(printed["entities"]) == 2
