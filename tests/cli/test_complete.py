"""Dynamic TAB completion: labels, gids, hosts, profiles, message ids, browser groups.

Each test sets up a host's files the way bridge itself writes them (the registry through
`bridge register`, the message store through the gateway's Store, the caches through
bridgecli.cache) and asks the real `bridge` what a TAB offers, through click's
``_BRIDGE_COMPLETE`` protocol — the call every generated shell script makes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from bridgecli import cache
from bridgecli.envelope import Envelope
from tests.support.env import run_bridge

HEAVY = ("pika", "websockets", "websocket", "mcp")
A = "aaaaaaaa-1111-4111-8111-111111111111"
B = "bbbbbbbb-2222-4222-8222-222222222222"
C = "cccccccc-3333-4333-8333-333333333333"


def tab(env: dict[str, str], line: str) -> dict[str, str]:
    """What zsh would be offered for ``line`` (cursor at its end): value -> description."""
    words = line.split()
    cword = len(words) if line.endswith(" ") else len(words) - 1
    proc = run_bridge(env={**env, "_BRIDGE_COMPLETE": "zsh_complete", "COMP_WORDS": line, "COMP_CWORD": str(cword)})
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = proc.stdout.split("\n")
    return {out[i + 1]: out[i + 2] for i in range(0, len(out) - 2, 3) if out[i] == "plain"}


def write_roster(entries: list[tuple[str, str, str]], gateways: tuple[str, ...] = ("hb", "hc")) -> None:
    cache.write(
        cache.ROSTER,
        {
            "entries": [
                {"gid": g, "label": label, "host": h, "role": "agent", "status": "idle"} for g, label, h in entries
            ],
            "gateways": [{"host": h, "version": "9.9", "entities": 1} for h in gateways],
        },
    )


@pytest.fixture
def home(bridge_home):
    """A host with one local entity (`reviewer`) and, in the roster cache, remote ones."""
    proc = run_bridge("register", "--label", "reviewer", "--deliver", "hold", env=bridge_home.env)
    assert proc.returncode == 0, proc.stderr
    bridge_home.reviewer = proc.stdout.strip()
    write_roster(
        [
            (A, "coder", "hb"),
            (B, "coder", "hc"),
            (C, "writer", "hc"),
            ("dddddddd-4444-4444-8444-444444444444", "evil label;rm", "hc"),
        ]
    )
    return bridge_home


def test_targets_are_roster_labels_plus_local_ones_and_ambiguous_labels_become_gids(home):
    offered = tab(home.env, "bridge send ")
    assert set(offered) == {"reviewer", "writer", A, B}  # `coder` is on two hosts
    assert offered["writer"] == "agent on hc, idle"
    assert offered[A] == "coder on hb" and offered[B] == "coder on hc"
    assert "evil label;rm" not in offered  # a value a shell would split is never offered
    assert set(tab(home.env, "bridge ask wr")) == {"writer"}
    assert set(tab(home.env, "bridge stop cc")) == {C}  # a typed hex prefix completes gids
    assert set(tab(home.env, "bridge send reviewer hi --from ")) == {"reviewer"}  # local only


def test_hosts_come_from_the_roster(home):
    offered = tab(home.env, "bridge spawn worker --host ")
    assert offered == {"hb": "gateway 9.9, 1 entities", "hc": "gateway 9.9, 1 entities"}
    assert set(tab(home.env, "bridge roster --host h")) == {"hb", "hc"}


def test_no_gateway_and_no_cache_offers_only_local_entities(bridge_home):
    proc = run_bridge("register", "--label", "solo", "--deliver", "hold", env=bridge_home.env)
    assert proc.returncode == 0
    assert set(tab(bridge_home.env, "bridge send ")) == {"solo"}
    assert tab(bridge_home.env, "bridge spawn x --host ") == {}


def test_spawn_profiles_come_from_this_hosts_config(bridge_home):
    bridge_home.config_file.parent.mkdir(parents=True, exist_ok=True)
    bridge_home.config_file.write_text(
        '[host]\nid = "ha"\n'
        '[profiles.reviewer]\nlauncher = "tmux"\ncommand = "claude"\n'
        '[profiles.tester]\nlauncher = "exec"\ncommand = "pytest"\n'
    )
    assert tab(bridge_home.env, "bridge spawn ") == {
        "reviewer": "tmux: claude — on ha (here)",
        "tester": "exec: pytest — on ha (here)",
    }
    assert set(tab(bridge_home.env, "bridge spawn te")) == {"tester"}
    bridge_home.config_file.write_text("[profiles.broken\n")  # invalid TOML: no candidates, no noise
    assert tab(bridge_home.env, "bridge spawn ") == {}


def test_spawn_profiles_of_another_host_come_from_its_gateways_heartbeat(bridge_home):
    """`spawn --host H` runs H's own profiles: H's gateway names them in its roster heartbeat
    (names only), and a TAB after `--host H` offers exactly those."""
    bridge_home.config_file.parent.mkdir(parents=True, exist_ok=True)
    bridge_home.config_file.write_text(
        '[host]\nid = "ha"\n[profiles.local-only]\nlauncher = "subprocess"\ncommand = "true"\n'
    )
    cache.write(
        cache.ROSTER,
        {
            "entries": [],
            "gateways": [
                {"host": "hb", "version": "9.9", "entities": 0, "profiles": ["coder", "shared"]},
                {"host": "hc", "version": "9.9", "entities": 0, "profiles": ["shared", "x;rm -rf /"]},
            ],
        },
    )
    assert tab(bridge_home.env, "bridge spawn --host hb ") == {"coder": "profile — on hb", "shared": "profile — on hb"}
    assert set(tab(bridge_home.env, "bridge spawn --host ha ")) == {"local-only"}
    everywhere = tab(bridge_home.env, "bridge spawn ")
    assert set(everywhere) == {"local-only", "coder", "shared"}  # an unsafe name is never offered
    assert everywhere["shared"] == "profile — on hb, hc"


def test_the_gateway_heartbeat_names_its_profiles_and_the_view_keeps_them():
    from bridgecli.roster import RosterView, heartbeat_frame

    view = RosterView()
    view.apply(heartbeat_frame(host="hb", version="1", interval=5, entities=0, profiles={"b": {}, "a": {}}))
    assert view.gateways()[0].profiles == ("a", "b")
    view.apply(
        json.dumps({"v": 1, "type": "heartbeat", "host": "hc", "gid": "_gateway", "profiles": "not a list"}).encode()
    )
    assert [g.profiles for g in view.gateways()] == [("a", "b"), ()]


@pytest.fixture
def store(bridge_home):
    """The gateway's message store with a held ASK, a delivered SEND and a held hostile REPLY."""
    from bridgecli.hoststate.store import DELIVERED, HELD, Store, default_path

    s = Store(default_path())
    me = "eeeeeeee-5555-4555-8555-555555555555"
    ask = Envelope(kind="ASK", sender=A, recipient=me, content="which branch?", sender_label="coder")
    sent = Envelope(kind="SEND", sender=B, recipient=me, content="done", sender_label="writer")
    hostile = Envelope(
        kind="REPLY", sender=C, recipient=me, content="\x1b[31mred\x1b]0;title\x07 ok", in_reply_to=ask.msg_id
    )
    assert s.record(ask, HELD) and s.record(sent, DELIVERED) and s.record(hostile, HELD)
    s.close()
    return {"ask": ask.msg_id, "sent": sent.msg_id, "hostile": hostile.msg_id}


def test_message_ids_for_reply_show_and_answer(bridge_home, store):
    offered = tab(bridge_home.env, "bridge reply ")
    assert set(offered) == set(store.values())
    assert offered[store["ask"]] == "ASK from coder (held): which branch?"
    assert offered[store["sent"]] == "SEND from writer (delivered): done"
    assert "\x1b" not in offered[store["hostile"]] and "\x07" not in offered[store["hostile"]]
    assert set(tab(bridge_home.env, "bridge answer ")) == {store["ask"]}  # only ASKs are answerable
    assert set(tab(bridge_home.env, f"bridge show {store['sent'][:6]}")) == {store["sent"]}


def test_message_ids_offer_held_then_newest_up_to_the_limit_with_each_ones_own_body(bridge_home):
    from bridgecli.cli import complete
    from bridgecli.hoststate.store import DELIVERED, HELD, Store, default_path

    s = Store(default_path())
    me = "eeeeeeee-5555-4555-8555-555555555555"
    made = []  # (msg_id, kind, state, received, content)
    for i in range(complete.MAX_MESSAGES + 15):
        kind, state, received = ("ASK" if i % 3 == 0 else "SEND"), (HELD if i % 4 == 0 else DELIVERED), 1000.0 + i
        envelope = Envelope(kind=kind, sender=A, recipient=me, content=f"message {i}", sender_label="coder")
        assert s.record(envelope, state, received=received)
        made.append((envelope.msg_id, kind, state, received, f"message {i}"))
    s.close()

    def expected(rows):
        rows = sorted(rows, key=lambda r: (r[2] != HELD, -r[3]))[: complete.MAX_MESSAGES]
        return [(r[0], f"{r[1]} from coder ({r[2]}): {r[4]}") for r in rows]

    def offered(callback, incomplete):
        return [(item.value, item.help) for item in callback(None, None, incomplete)]

    assert offered(complete.message_ids, "") == expected(made)
    assert offered(complete.ask_ids, "") == expected([r for r in made if r[1] == "ASK"])
    prefix = made[7][0][:1]
    assert offered(complete.message_ids, prefix.upper()) == expected([r for r in made if r[0].startswith(prefix)])


def test_browser_groups_and_targets_come_from_the_browser_cache(bridge_home):
    assert tab(bridge_home.env, "bridge browser open ") == {}
    cache.update_browser(targets=[{"id": "ex1", "label": "work", "groups": ["research"]}], groups=["research"])
    cache.update_browser(add_group="docs")
    assert set(tab(bridge_home.env, "bridge browser do ")) == {"docs", "research"}
    assert set(tab(bridge_home.env, "bridge browser tabs r")) == {"research"}
    assert tab(bridge_home.env, "bridge browser open g https://x --target ") == {
        "ex1": "browser work",
        "work": "browser ex1",
    }


def test_install_and_uninstall_complete_client_names(bridge_home):
    """Client names, each described by its title, minus those already on the line; the same
    through the click-free path and through click (an option first sends the TAB to click)."""
    from bridgecli import clients
    from bridgecli.cli import complete

    assert complete.CLIENTS == {name: c.title for name, c in clients.CLIENTS.items()}
    assert tab(bridge_home.env, "bridge install ") == complete.CLIENTS
    assert tab(bridge_home.env, "bridge uninstall c") == {
        "claude-code": "Claude Code",
        "codex": "Codex",
        "cursor": "Cursor",
    }
    assert set(tab(bridge_home.env, "bridge install codex c")) == {"claude-code", "cursor"}
    assert set(tab(bridge_home.env, "bridge install --scope project opencode ")) == set(complete.CLIENTS) - {"opencode"}
    assert tab(bridge_home.env, "bridge uninstall x") == {}


def test_a_tab_never_imports_pika_or_a_websocket_library(home, store):
    """In-process probe: complete several command lines and list the heavy modules loaded."""
    lines = [
        "bridge send ",
        "bridge reply ",
        "bridge spawn x --host ",
        "bridge stop ",
        "bridge browser open ",
        "bridge install c",
    ]
    probe = (
        "import os, sys\nfrom bridgecli.cli import main\n"
        f"for line in {lines!r}:\n"
        "    os.environ['COMP_WORDS'] = line\n"
        "    os.environ['COMP_CWORD'] = str(len(line.split()))\n"
        "    try:\n        main([])\n    except SystemExit:\n        pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    )
    env = {**home.env, "_BRIDGE_COMPLETE": "bash_complete"}
    proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert "plain,writer" in proc.stdout.splitlines()  # the probe really completed something
    assert f"plain,{store['ask']}" in proc.stdout.splitlines()
    assert proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr


def test_cache_write_is_atomic_and_a_corrupt_cache_reads_as_empty(bridge_home):
    assert cache.write(cache.ROSTER, {"entries": []})
    assert cache.read(cache.ROSTER)["entries"] == []
    assert [p.name for p in cache.path(cache.ROSTER).parent.iterdir()] == ["roster.json"]  # no temp left
    cache.path(cache.ROSTER).write_text("{not json")
    assert cache.read(cache.ROSTER) == {}
    assert set(tab(bridge_home.env, "bridge send ")) == set()


def test_roster_from_the_live_gateway_then_from_its_cache_after_it_stops(host_factory):
    """Two hosts: a's TAB offers b's entity via a's gateway socket; after a's gateway stops,
    from the roster.json it wrote on its heartbeats."""
    a, b = host_factory("a"), host_factory("b")
    for h in (a, b):
        h.write_config("[roster]\ninterval = 1\n")
    a.register("main", role="main")
    worker = b.register("worker")
    a.start_gateway(), b.start_gateway()
    no_cache = {**a.env, "XDG_CACHE_HOME": str(a.root / "empty-cache")}  # only the socket can answer
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        # b's entity, and both gateways' own first heartbeats (each comes after a random delay)
        offered, hosts = tab(no_cache, "bridge send "), set(tab(no_cache, "bridge spawn p --host "))
        if "worker" in offered and hosts == {a.name, b.name}:
            break
        time.sleep(0.5)
    assert offered["worker"].startswith(f"agent on {b.name}")
    assert hosts == {a.name, b.name}
    cached = a.root / "cache" / "bridge" / "roster.json"

    def cached_gids() -> set[str]:  # written on each heartbeat: may lag the live view by one
        try:
            return {e["gid"] for e in json.loads(cached.read_text())["entries"]}
        except (FileNotFoundError, ValueError):
            return set()

    deadline = time.monotonic() + 10
    while worker not in cached_gids() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert worker in cached_gids()
    a.stop_gateway()
    assert not a.socket.exists()
    assert "worker" in tab(a.env, "bridge send ")


def test_browser_commands_fill_the_cache_that_a_tab_reads(bridge_home):
    """`bridge browser targets`/`open` against a served broker with a (fake) browser leave
    behind what TAB then offers — without TAB ever talking to the broker."""
    from tests.browser.conftest import free_port
    from tests.browser.fake_executor import FakeExecutor
    from tests.cli.test_browser import serve, stop

    env = dict(bridge_home.env, BRIDGE_BROWSER_PORT=str(free_port()))
    server = serve(env)
    try:
        assert "hosting the browser broker" in server.stderr.readline()
        token = json.loads(run_bridge("token", "show", "--json", env=env).stdout)["token"]
        executor = FakeExecutor(int(env["BRIDGE_BROWSER_PORT"]), token, id="e1", label="work").start()
        try:
            assert run_bridge("browser", "targets", env=env, timeout=30).returncode == 0
            assert tab(env, "bridge browser open g http://x --target ") == {"e1": "browser work", "work": "browser e1"}
            opened = run_bridge("browser", "open", "research", "http://example.test/", env=env, timeout=30)
            assert opened.returncode == 0, opened.stderr
        finally:
            executor.stop()
    finally:
        stop(server)
    assert set(tab(env, "bridge browser do ")) == {"research"}  # the broker is gone: the cache answers
