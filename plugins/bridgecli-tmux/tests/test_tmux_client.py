"""Which tmux server the plugin talks to, and how it names it in errors."""

from __future__ import annotations

import pytest

from bridgecli.errors import BridgeError
from bridgecli_tmux.client import PaneGone, Tmux, socket_from
from bridgecli_tmux.control import quote


def test_socket_precedence_setting_then_env_then_default() -> None:
    assert socket_from({"socket": "/a/s"}, {"BRIDGE_TMUX_SOCKET": "/b/s"}) == "/a/s"
    assert socket_from({}, {"BRIDGE_TMUX_SOCKET": "/b/s"}) == "/b/s"
    assert socket_from({}, {}) is None


def test_path_or_name() -> None:
    assert Tmux("/tmp/x/s").argv("ls") == ["tmux", "-S", "/tmp/x/s", "ls"]
    assert Tmux("agents").argv("ls") == ["tmux", "-L", "agents", "ls"]
    assert Tmux(None).argv("ls") == ["tmux", "ls"]


def test_quote_escapes_every_ascii_symbol() -> None:
    assert quote('a b;$~"\\\n#{x}é') == '"a b\\073\\044\\176\\042\\134\\012\\043\\173x\\175é"'


def test_a_server_that_is_not_running_is_named(short_tmp) -> None:
    tmux = Tmux(str(short_tmp / "nothing"))
    with pytest.raises(PaneGone, match=f"tmux server {short_tmp}/nothing is not running"):
        tmux.pane("%1")


def test_missing_binary_is_a_missing_dependency() -> None:
    with pytest.raises(BridgeError, match="tmux is not installed"):
        Tmux("/tmp/x", binary="/nonexistent/tmux").run("ls")
