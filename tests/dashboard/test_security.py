"""The dashboard's front door, over real HTTP against a real `bridge dashboard`: loopback
only, the token traded for an HttpOnly SameSite=Strict cookie, 403 without it, Host and
Origin checked, and state changes POST-only."""

from __future__ import annotations

import json

from tests.dashboard.letters import dead_letter


def _listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as the kernel writes them) of sockets listening on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.rsplit(":", 1)
                if state == "0A" and int(hex_port, 16) == port:  # 0A = LISTEN
                    found.add(address)
    return found


def test_token_cookie_and_refusals(host_factory, dashboard_factory, vhost_uri):
    a = host_factory("a", broker_uri=vhost_uri)  # a DLQ of its own, so the purge's count is exact
    board = dashboard_factory(a)
    assert board.url.startswith(f"http://127.0.0.1:{board.port}/?token=")
    assert _listening_addresses(board.port) == {"0100007F"}  # 127.0.0.1 and nothing else

    # no token: 403 and no data, on every path
    for path in ("/", "/api/state", "/api/events", "/static/app.js", "/api/message/x", "/api/history?q=x"):
        response = board.request("GET", path)
        assert response.status == 403, path
        assert b"fleet" not in response.body and b"forbidden" in response.body
    assert board.request("GET", "/?token=wrong").status == 403

    # the printed URL trades the token for the cookie and drops it from the address
    response = board.request("GET", "/?token=" + board.token, {"Sec-Fetch-Site": "none"})
    assert response.status == 303 and response.getheader("Location") == "/"
    cookie = response.getheader("Set-Cookie")
    assert cookie.startswith(f"bridge_dashboard_{board.port}={board.token};")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")

    page = board.request("GET", "/", {"Cookie": board.cookie})
    assert page.status == 200 and b"bridge dashboard" in page.body
    assert "script-src 'self'" in page.getheader("Content-Security-Policy")
    assert "fleet" in board.get_json("/api/state")

    # another name for this address (DNS rebinding) or another site: refused with the cookie
    for headers in (
        {"Host": f"evil.example:{board.port}"},
        {"Origin": "http://evil.example"},
        {"Origin": f"http://127.0.0.1:{board.port + 1}"},
        {"Sec-Fetch-Site": "cross-site"},
    ):
        response = board.request("GET", "/api/state", {"Cookie": board.cookie, **headers})
        assert response.status == 403, headers
        assert b"fleet" not in response.body
    nameless = board.request("GET", "/api/state", {"Cookie": board.cookie, "Host": None})
    assert nameless.status in (400, 403) and b"fleet" not in nameless.body  # HTTP/1.1 requires Host

    upgrade = board.request(
        "GET",
        "/api/events",
        {
            "Cookie": board.cookie,
            "Connection": "Upgrade",
            "Upgrade": "websocket",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        },
    )
    assert upgrade.status == 403  # no websocket endpoint to probe

    # state changes: POST only, with the token, from this origin, as JSON
    origin = f"http://127.0.0.1:{board.port}"
    json_type = {"Content-Type": "application/json"}
    assert board.request("GET", "/api/dlq/purge", {"Cookie": board.cookie}).status == 405
    assert board.request("POST", "/api/dlq/purge", {"Origin": origin, **json_type}, b"{}").status == 403
    assert board.request("POST", "/api/dlq/purge", {"Cookie": board.cookie, **json_type}, b"{}").status == 403
    assert (
        board.request(
            "POST", "/api/dlq/purge", {"Cookie": board.cookie, "Origin": "http://evil.example", **json_type}, b"{}"
        ).status
        == 403
    )
    form = {"Cookie": board.cookie, "Origin": origin, "Content-Type": "application/x-www-form-urlencoded"}
    assert board.request("POST", "/api/dlq/purge", form, b"a=1").status == 415
    assert a.bridge_json("dlq", "list")["dead_letters"] == []  # the refused purges purged nothing
    dead_letter(vhost_uri, "0" * 8 + "-0000-4000-8000-" + "0" * 12, "ghost", "purge me", "test")
    done = board.request("POST", "/api/dlq/purge", {"Cookie": board.cookie, "Origin": origin, **json_type}, b"{}")
    assert done.status == 200 and json.loads(done.body)["purged"] == 1


def test_refuses_a_port_in_use(host_factory, dashboard_factory):
    a = host_factory("a")
    board = dashboard_factory(a)
    busy = a.bridge("dashboard", "--no-open", "--port", str(board.port), timeout=30)
    assert busy.returncode == 13 and "pass another --port" in busy.stderr
    assert len(busy.stderr.strip().splitlines()) == 1


def test_says_how_to_install_a_missing_web_stack(host_factory, tmp_path):
    """Without the ``dashboard`` extra: one line naming what is missing and the pip command."""
    from bridgecli.errors import ExitCode

    shadow = tmp_path / "uvicorn"  # found before the installed one, as if it were absent
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('No module named uvicorn')\n")
    a = host_factory("a")
    proc = a.bridge("dashboard", "--no-open", env={"PYTHONPATH": str(tmp_path)}, timeout=30)
    assert proc.returncode == ExitCode.MISSING_DEPENDENCY, proc.stderr
    assert "Starlette and uvicorn" in proc.stderr and "pip install 'bridgecli[dashboard]'" in proc.stderr
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1
