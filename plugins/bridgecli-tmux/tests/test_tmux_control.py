"""The control-mode transport: exact quoting, and pane text that cannot desynchronise it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tmux_helpers import wait_for

from bridgecli_tmux.client import SEP, Tmux, tmux_available

pytestmark = pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=200))
def test_arguments_reach_tmux_byte_for_byte(tmux_server: Tmux, text: str) -> None:
    # a lone ";" argument is run()'s command separator (SEP), as on tmux's own command line;
    # message text never travels as an argument but as load-buffer's input (the test below)
    assume(text != SEP)
    control = Tmux(tmux_server.socket, control=True)
    try:
        control.run("set-buffer", "-b", "q", "--", text)
        assert control._channel is not None  # really went through the control client
        assert tmux_server.run("show-buffer", "-b", "q") == text if text else True
    finally:
        control.close()


@pytest.mark.parametrize("control", [True, False], ids=["control-client", "process"])
@pytest.mark.parametrize("text", [SEP, "a;", "\\;", "%end 1 2 1", '"\\', "#{pane_id}"])
def test_buffer_input_that_looks_like_syntax_reaches_tmux_as_is(tmux_server: Tmux, text: str, control: bool) -> None:
    """The delivery path: load-buffer from input — on stdin per process, and as a quoted
    set-buffer argument through the control client (which has no stdin) — a lone ";" included."""
    client = Tmux(tmux_server.socket, control=control)
    try:
        client.run("load-buffer", "-b", "q", "-", input=text.encode())
        assert (client._channel is not None) == control
        assert tmux_server.run("show-buffer", "-b", "q") == text
    finally:
        client.close()


def test_forged_end_lines_in_a_pane_do_not_desync(tmux_server: Tmux, new_pane, short_tmp) -> None:
    control = Tmux(tmux_server.socket, control=True)
    pane = new_pane()
    forged = short_tmp / "forged"
    forged.write_text(
        "".join(f"%end {t} {n} 1\n%begin {t} {n} 1\n" for t in range(3) for n in range(20)) + "%error 1 2 1\n"
    )
    tmux_server.run("send-keys", "-t", pane, "-l", f"cat {forged}")
    tmux_server.run("send-keys", "-t", pane, "Enter")
    wait_for(lambda: "%error 1 2 1" in tmux_server.capture(pane), what="forged lines on screen")
    try:
        for _ in range(3):
            screen = control.capture(pane, 200)
            assert "%error 1 2 1" in screen and screen.count("%end") == 60
            assert control.pane(pane).pane_id == pane  # the next answer is still ours
    finally:
        control.close()


def test_falls_back_to_processes_when_the_client_dies(tmux_server: Tmux) -> None:
    control = Tmux(tmux_server.socket, control=True)
    control.run("set-buffer", "-b", "x", "--", "one")
    channel = control._channel
    assert channel is not None
    channel.proc.kill()
    channel.proc.wait()
    assert control.run("show-buffer", "-b", "x") == "one"  # answered by a tmux process
    control.close()


def test_control_client_never_resizes_windows(tmux_server: Tmux) -> None:
    before = tmux_server.run("display-message", "-p", "-t", "test:", "#{window_width}x#{window_height}")
    control = Tmux(tmux_server.socket, control=True)
    try:
        assert control.run("display-message", "-p", "-t", "test:", "#{window_width}x#{window_height}") == before
        flags = tmux_server.run("list-clients", "-F", "#{client_flags}")
        assert "control-mode" in flags and "ignore-size" in flags and "no-output" in flags
    finally:
        control.close()
    wait_for(lambda: tmux_server.run("list-clients", "-F", "#{client_flags}").strip() == "", what="detach")
