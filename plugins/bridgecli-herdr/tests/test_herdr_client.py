"""Socket path resolution, ping and protocol checks of the herdr client."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_herdr import FakeHerdr

from bridgecli_herdr.client import HerdrClient, HerdrError, resolve_socket_path


def test_socket_path_resolution_order(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": "/x", "HOME": "/h", "HERDR_SOCKET_PATH": "/env.sock", "HERDR_SESSION": "s2"}
    assert resolve_socket_path({"socket": "/set.sock", "session": "s1"}, env) == Path("/set.sock")
    assert resolve_socket_path({"session": "s1"}, env) == Path("/x/herdr/sessions/s1/herdr.sock")
    assert resolve_socket_path({}, env) == Path("/env.sock")
    del env["HERDR_SOCKET_PATH"]
    assert resolve_socket_path({}, env) == Path("/x/herdr/sessions/s2/herdr.sock")
    env["HERDR_SESSION"] = "default"
    assert resolve_socket_path({}, env) == Path("/x/herdr/herdr.sock")
    assert resolve_socket_path({}, {"HOME": "/h"}) == Path("/h/.config/herdr/herdr.sock")


@pytest.mark.parametrize("protocol", [20, 22])
def test_supported_protocols(short_tmp: Path, protocol: int) -> None:
    fake = FakeHerdr(short_tmp / "h.sock", version="0.9.0" if protocol == 22 else "0.8.2", protocol=protocol).start()
    try:
        client = HerdrClient(fake.path)
        assert client.request("pane.list")["type"] == "pane_list"
        assert [r["method"] for r in fake.requests] == ["ping", "pane.list"]  # ping first, once
        client.request("pane.list")
        assert [r["method"] for r in fake.requests].count("ping") == 1
    finally:
        fake.stop()


def test_protocol_mismatch_is_refused(short_tmp: Path) -> None:
    fake = FakeHerdr(short_tmp / "h.sock", version="0.7.0", protocol=19).start()
    try:
        with pytest.raises(HerdrError) as info:
            HerdrClient(fake.path).request("pane.list")
        assert info.value.code == "protocol_mismatch"
        assert "speaks protocol 19" in str(info.value) and "20 and 22" in str(info.value)
        assert [r["method"] for r in fake.requests] == ["ping"]  # nothing else was sent
    finally:
        fake.stop()


def test_server_not_running(short_tmp: Path) -> None:
    with pytest.raises(HerdrError, match="herdr is not running") as info:
        HerdrClient(short_tmp / "nothing.sock").request("pane.list")
    assert info.value.code == "server_not_running"
    assert "HERDR_SOCKET_PATH" in str(info.value)


def test_error_answers_keep_herdr_codes(herdr: FakeHerdr) -> None:
    with pytest.raises(HerdrError) as info:
        HerdrClient(herdr.path).request("pane.get", {"pane_id": "w1:p9"})
    assert info.value.code == "pane_not_found" and "pane w1:p9 not found" in str(info.value)
