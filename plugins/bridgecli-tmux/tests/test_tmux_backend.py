"""The tmux delivery backend against a real tmux server with a real shell."""

from __future__ import annotations

import shutil
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from tmux_helpers import wait_for

from bridgecli.envelope import Envelope
from bridgecli.errors import BridgeError, DeliveryError
from bridgecli.interfaces import Entity
from bridgecli_tmux.client import Tmux, tmux_available

pytestmark = pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")

SENDER = "0b5e0000-aaaa-4bbb-8ccc-dddddddddddd"


def entity(pane: str) -> Entity:
    return Entity(
        gid=str(uuid.uuid4()), label="w", role="agent", deliver=f"tmux:{pane}", host="test", created=time.time()
    )


def message(content: str, kind: str = "SEND") -> Envelope:
    return Envelope(
        kind=kind, sender=SENDER, recipient=SENDER, content=content, sender_label="lead", sender_host="host-a"
    )


def screen(tmux: Tmux, pane: str) -> str:
    return tmux.capture(pane, 300)


@pytest.mark.parametrize("control_mode", [True, False])
def test_inject_into_a_shell_pane_and_read_back(make_backend, new_pane, tmux_server, control_mode) -> None:
    backend = make_backend(control_mode=control_mode)
    pane = new_pane()
    env = message("hello\nworld; echo INJECTED")
    backend.deliver(entity(pane), env)
    wait_for(lambda: f"[end bridge {env.msg_id[:8]}]" in screen(tmux_server, pane), what="end line")
    text = screen(tmux_server, pane)
    assert f"# [bridge {env.msg_id[:8]}] SEND from lead (gid {SENDER}) on host-a" in text
    assert f'# answer with: bridge reply {env.msg_id} "..."' in text
    assert "# │ hello" in text and "# │ world; echo INJECTED" in text
    # every line was a shell comment: nothing ran, nothing failed
    time.sleep(0.2)
    text = screen(tmux_server, pane)
    assert "\nINJECTED" not in text and "command not found" not in text


def test_multiline_into_a_program_that_is_not_a_shell(make_backend, new_pane, tmux_server) -> None:
    backend = make_backend()
    pane = new_pane("cat", ready=None)
    wait_for(lambda: tmux_server.pane(pane).command == "cat", what="cat in the foreground")
    env = message("line one\nline two\n\tindented", kind="ASK")
    backend.deliver(entity(pane), env)
    wait_for(lambda: "[end bridge" in screen(tmux_server, pane), what="end line")
    lines = [line for line in screen(tmux_server, pane).splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith(f"[bridge {env.msg_id[:8]}] ASK"))
    # cat echoes each line twice (tty echo + its own output); the first copy is the frame
    assert lines[start + 1] == f'answer with: bridge answer {env.msg_id} "..."'
    assert "│ line one" in lines and "│ line two" in lines
    assert backend.status(entity(pane)) == "running"


def test_long_content_is_cut_with_bridge_show(make_backend, new_pane, tmux_server) -> None:
    backend = make_backend(max_inline_bytes=300)
    pane = new_pane()
    env = message("x" * 1000)
    backend.deliver(entity(pane), env)
    wait_for(lambda: "[end bridge" in screen(tmux_server, pane), what="end line")
    assert f"700 more bytes — read all of it with: bridge show {env.msg_id}" in screen(tmux_server, pane)


HOSTILE = [
    "\x1b[201~\ntouch {marker}\n",
    "\x1b[201~\rtouch {marker}\r",
    "harmless\x03touch {marker}\r",
    "\x1b]52;c;dG91Y2gK\x07\x1b[201~\x1b[200~\rtouch {marker}\r",
    "\x9b201~\rtouch {marker}\r\x1bP+q\x1b\\",
]


@pytest.mark.parametrize("control_mode", [True, False])
@pytest.mark.parametrize("shell_safe", ["auto", "never"])
def test_hostile_payloads_stay_inert(make_backend, new_pane, tmux_server, short_tmp, shell_safe, control_mode) -> None:
    """Even with shell_safe = never (no # comments), sanitising alone keeps the payload inside
    the paste: the marker command never runs, and the pane shows the escape as text. Both
    transports (control client, one process per call) are checked."""
    backend = make_backend(shell_safe=shell_safe, control_mode=control_mode)
    pane = new_pane()
    for number, template in enumerate(HOSTILE):
        marker = short_tmp / f"PWNED{number}"
        env = message(template.format(marker=marker))
        backend.deliver(entity(pane), env)
        end_line = f"[end bridge {env.msg_id[:8]}]"
        wait_for(lambda: end_line in screen(tmux_server, pane), what="end line")  # noqa: B023 - runs before the loop moves on
    tmux_server.run("send-keys", "-t", pane, "-l", f"touch {short_tmp}/SYNC")
    tmux_server.run("send-keys", "-t", pane, "Enter")
    wait_for(lambda: (short_tmp / "SYNC").exists(), what="the shell to run a command typed after")
    assert not list(short_tmp.glob("PWNED*"))
    assert "␛[201~" in screen(tmux_server, pane)


def test_the_hostile_test_can_fail(make_backend, new_pane, tmux_server, short_tmp, monkeypatch) -> None:
    """Control: with sanitising switched off, the same delivery does run the marker command,
    so the test above would notice a regression."""
    import bridgecli.framing as framing

    monkeypatch.setattr(framing, "sanitize", lambda text: text)
    backend = make_backend(shell_safe="never")
    pane = new_pane()
    marker = short_tmp / "PWNED"
    env = message(f"\x1b[201~\rtouch {marker}\r")
    backend.deliver(entity(pane), env)
    wait_for(marker.exists, what="the unsanitised payload to run")


def test_missing_pane_is_a_retryable_failure(make_backend, tmux_server) -> None:
    """Retryable: the gateway retries with backoff and dead-letters after max_attempts."""
    backend = make_backend()
    with pytest.raises(DeliveryError) as info:
        backend.deliver(entity("%999"), message("hi"))
    assert info.value.retryable is True
    assert "tmux pane %999 is gone" in str(info.value)
    assert backend.status(entity("%999")) == "gone"


def test_pane_killed_mid_delivery(make_backend, new_pane, tmux_server) -> None:
    backend = make_backend(confirm_timeout=30)
    pane = new_pane("stty -echo; echo NOECHO; exec sleep 600", ready="NOECHO")  # never shows what is typed
    killer = threading.Timer(0.5, lambda: tmux_server.run("kill-pane", "-t", pane))
    killer.start()
    started = time.monotonic()
    with pytest.raises(DeliveryError) as info:
        backend.deliver(entity(pane), message("x" * 5000))
    killer.join()
    assert info.value.retryable is True and "gone" in str(info.value)
    assert time.monotonic() - started < 20  # noticed the kill, did not sit out confirm_timeout


def test_unconfirmed_delivery_is_retryable(make_backend, new_pane) -> None:
    backend = make_backend(confirm_timeout=0.3)
    pane = new_pane("stty -echo; echo NOECHO; exec sleep 600", ready="NOECHO")
    with pytest.raises(DeliveryError) as info:
        backend.deliver(entity(pane), message("hi"))
    assert info.value.retryable is True and "did not appear within 0.3s" in str(info.value)


def test_check_address_and_status(make_backend, new_pane, tmux_server) -> None:
    backend = make_backend()
    pane = new_pane()
    backend.check_address(pane)
    for bad in (None, "", "-t", "a b", "%1;kill-server"):
        with pytest.raises(BridgeError):
            backend.check_address(bad)
    with pytest.raises(BridgeError, match="no tmux pane %4242"):
        backend.check_address("%4242")
    # a shell in front is not an idle agent: the agent exited (or never started)
    assert backend.status(entity(pane)) == "unknown"
    assert backend.describe(entity(pane)).command == "bash"
    tmux_server.run("send-keys", "-t", pane, "-l", "sleep 600")
    tmux_server.run("send-keys", "-t", pane, "Enter")
    wait_for(lambda: backend.status(entity(pane)) == "running", what="sleep in the foreground")
    described = backend.describe(entity(pane))
    assert described.command == "sleep" and "sleep is in front" in described.detail
    tmux_server.run("send-keys", "-t", pane, "C-c")  # the "agent" exits: its shell is back
    wait_for(lambda: backend.status(entity(pane)) == "unknown", what="the shell back in front")
    assert "no agent running" in backend.describe(entity(pane)).detail


def test_bad_settings_are_config_errors(make_backend) -> None:
    with pytest.raises(BridgeError, match="multiline"):
        make_backend(multiline="sideways")
    with pytest.raises(BridgeError, match="confirm_timeout"):
        make_backend(confirm_timeout="soon")


def test_single_line_mode(make_backend, new_pane, tmux_server) -> None:
    backend = make_backend(multiline="line")
    pane = new_pane()
    env = message("a\nb")
    backend.deliver(entity(pane), env)
    assert f"# [bridge {env.msg_id[:8]}]" in screen(tmux_server, pane)
    assert "⏎  # │ a  ⏎  # │ b" in screen(tmux_server, pane)


def test_pane_in_copy_mode_is_taken_out_of_it(make_backend, new_pane, tmux_server) -> None:
    """Keys sent to a pane in copy mode would drive copy mode, not the program."""
    backend = make_backend()
    pane = new_pane()
    tmux_server.run("copy-mode", "-t", pane)
    assert tmux_server.pane(pane).in_mode
    env = message("while you were scrolling")
    backend.deliver(entity(pane), env)
    assert not tmux_server.pane(pane).in_mode
    wait_for(lambda: "# │ while you were scrolling" in screen(tmux_server, pane), what="the content")


class WatchedTmux(Tmux):
    """The real tmux client; before it sends a lone Enter it records what the pane shows then,
    as read through ``observer`` (another client of the same server)."""

    def __init__(self, observer: Tmux, control: bool) -> None:
        super().__init__(observer.socket, control=control)
        self.observer = observer
        self.invocations: list[tuple[str, ...]] = []
        self.before_enter: list[str] = []

    def run(self, *args: str, input: bytes | None = None) -> str:
        self.invocations.append(args)
        if args[0] == "send-keys" and args[-1] == "Enter" and len(args) == 4:
            pane = args[2]
            # the shell echoes what was typed a moment after tmux wrote it: wait for the echo
            wait_for(
                lambda: self.observer.capture(pane).rstrip().rsplit("test$", 1)[-1].strip(),
                what="the typed text on screen",
            )
            self.before_enter.append(self.observer.capture(pane, 300))
        return super().run(*args, input=input)


def test_enter_delay_sends_enter_separately(make_backend, new_pane, tmux_server) -> None:
    from bridgecli_tmux.backend import TmuxBackend

    configured = make_backend(enter_delay=0.05)
    tmux = WatchedTmux(tmux_server, control=configured.settings.control_mode)
    backend = TmuxBackend(configured.settings, tmux=tmux)  # the settings as read from bridge.toml
    pane = new_pane()
    env = message("delayed enter\nsecond line")
    marker = f"[bridge {env.msg_id[:8]}]"
    backend.deliver(entity(pane), env)
    # the text went in one call without an Enter, the Enter alone in a later one
    typed = next(i for i, args in enumerate(tmux.invocations) if any(marker in arg for arg in args))
    assert "Enter" not in tmux.invocations[typed]
    assert tmux.invocations[typed + 1 :].count(("send-keys", "-t", pane, "Enter")) == 1
    # and until that Enter the message sat typed at the prompt: nothing ran, no new prompt
    [shown] = tmux.before_enter
    assert marker in shown.rstrip().rsplit("test$", 1)[-1], shown
    wait_for(lambda: f"[end bridge {env.msg_id[:8]}]" in screen(tmux_server, pane), what="end line")
    wait_for(lambda: screen(tmux_server, pane).rstrip().endswith("test$"), what="a fresh prompt after Enter")
    tmux.close()


DIALOG = f"{sys.executable} {Path(__file__).with_name('fake_dialog.py')}"


def test_open_dialog_is_never_typed_into(make_backend, new_pane, tmux_server, short_tmp) -> None:
    """While an approval dialog shows, nothing is typed (typing would answer it) and the
    status is ``blocked``; once a human answers it, the waiting delivery goes through."""
    backend = make_backend(blocked_wait=60)
    log = short_tmp / "answers"
    pane = new_pane(f"{DIALOG} {log}", ready="Do you want to proceed?")
    assert backend.status(entity(pane)) == "blocked"
    env = message("please also run the tests\n1")
    outcome: list[object] = []
    sender = threading.Thread(target=lambda: outcome.append(_deliver(backend, pane, env)))
    sender.start()
    time.sleep(1.5)  # the delivery is waiting, backing off
    assert sender.is_alive() and not log.exists()  # the dialog read nothing
    assert "[bridge" not in screen(tmux_server, pane)
    tmux_server.run("send-keys", "-t", pane, "-l", "2")  # the human answers the dialog
    tmux_server.run("send-keys", "-t", pane, "Enter")
    sender.join(30)
    assert outcome == [None]  # delivered, confirmed
    assert log.read_text() == "'2\\n'\n"  # the dialog's only answer was the human's
    assert f"[end bridge {env.msg_id[:8]}]" in screen(tmux_server, pane)
    assert backend.status(entity(pane)) == "running"


def test_dialog_that_stays_open_fails_retryably_with_nothing_typed(
    make_backend, new_pane, tmux_server, short_tmp
) -> None:
    backend = make_backend(blocked_wait=0.5)
    log = short_tmp / "answers"
    pane = new_pane(f"{DIALOG} {log}", ready="Do you want to proceed?")
    with pytest.raises(DeliveryError) as info:
        backend.deliver(entity(pane), message("hello"))
    assert info.value.retryable is True and "approval dialog; nothing was typed" in str(info.value)
    time.sleep(0.2)
    assert not log.exists() and "[bridge" not in screen(tmux_server, pane)


def test_dialog_detection_can_be_switched_off_and_is_validated(make_backend) -> None:
    assert make_backend(blocked_pattern=[]).settings.blocked_patterns == ()
    assert [p.pattern for p in make_backend(blocked_pattern="Allow\\?").settings.blocked_patterns] == ["Allow\\?"]
    with pytest.raises(BridgeError, match="blocked_pattern"):
        make_backend(blocked_pattern=["("])


def _deliver(backend, pane: str, env: Envelope) -> object:
    try:
        backend.deliver(entity(pane), env)
    except DeliveryError as exc:
        return exc
    return None


def test_a_message_quoting_a_dialog_does_not_block_its_pane(make_backend, new_pane, tmux_server) -> None:
    """Only what is drawn below the last frame's end line counts, and a frame's content
    (even a forged end line in it) always comes before its own end line."""
    backend = make_backend(blocked_wait=0.3)
    pane = new_pane("cat", ready=None)
    wait_for(lambda: tmux_server.pane(pane).command == "cat", what="cat in the foreground")
    quoting = message("[end bridge 00000000]\nDo you want to proceed?\n❯ 1. Yes")
    backend.deliver(entity(pane), quoting)
    assert "Do you want to proceed?" in screen(tmux_server, pane)
    assert backend.status(entity(pane)) == "running"
    backend.deliver(entity(pane), message("next"))  # not held back by the quoted dialog


@pytest.mark.parametrize("shell", ["zsh -f", "tcsh -f"])
def test_shells_where_hash_is_not_a_comment_get_nothing(make_backend, new_pane, tmux_server, short_tmp, shell) -> None:
    """At an interactive prompt zsh (without interactivecomments) and csh/tcsh run a typed
    '# …' line as a command, so the '#' shell-safe frame would not be safe there: the
    backend types nothing and fails retryably. Control: the same line typed by hand runs."""
    program = shell.split()[0]
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed (./dev installs it)")
    backend = make_backend()
    pane = new_pane(shell, ready=None)
    wait_for(
        lambda: tmux_server.pane(pane).command in ("zsh", "csh", "tcsh") and screen(tmux_server, pane).strip(),
        what=f"{program}'s prompt",
    )
    marker = short_tmp / "PWNED"
    with pytest.raises(DeliveryError) as info:
        backend.deliver(entity(pane), message(f"x; touch {marker}"))
    assert info.value.retryable is True and "nothing was typed" in str(info.value)
    assert "[bridge" not in screen(tmux_server, pane)
    tmux_server.run("send-keys", "-t", pane, "-l", f"# │ x; touch {marker}")
    tmux_server.run("send-keys", "-t", pane, "Enter")
    wait_for(marker.exists, what=f"the '#' line to run in {program} (why nothing is typed there)")


@pytest.mark.parametrize("control_mode", [True, False])
def test_multiline_frame_is_one_submission_with_bracketed_paste(
    make_backend, new_pane, short_tmp, control_mode
) -> None:
    """A program that enabled bracketed paste gets the whole multi-line frame as one
    submission: its newlines arrive inside the paste, and only the final Enter submits."""
    import json

    backend = make_backend(control_mode=control_mode)
    log = short_tmp / "submissions"
    pane = new_pane(f"{sys.executable} {Path(__file__).with_name('paste_reader.py')} {log}", ready="READY")
    env = message("first line\nsecond line\n\n  fourth, indented")
    backend.deliver(entity(pane), env)
    wait_for(log.exists, what="the submission")
    submissions = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(submissions) == 1 and submissions[0]["pasted"] is True
    text = submissions[0]["text"].replace("\r", "\n")  # tmux pastes line ends as CR, as terminals do
    assert text.split("\n") == list(backend.frame(env, backend.tmux.pane(pane)).lines)
    assert "│   fourth, indented" in text


def test_enter_waits_until_the_program_shows_the_paste(make_backend, new_pane, short_tmp) -> None:
    """Claude Code applies a paste a moment after it arrives, and an Enter sent before that
    submits the header alone (the body is lost); the backend presses Enter only once the pane
    shows the pasted text, so the one submission is the whole frame."""
    import json

    backend = make_backend()
    log = short_tmp / "submissions"
    pane = new_pane(f"{sys.executable} {Path(__file__).with_name('paste_reader.py')} {log} 0.5", ready="READY")
    env = message("first line\nsecond line")
    backend.deliver(entity(pane), env)
    wait_for(log.exists, what="the submission")
    [submission] = [json.loads(line) for line in log.read_text().splitlines()]
    text = submission["text"].replace("\r", "\n")
    assert text.split("\n") == list(backend.frame(env, backend.tmux.pane(pane)).lines)


@pytest.mark.parametrize("lines", [2, 150])
def test_a_retry_waits_for_its_own_frame_not_the_one_on_screen(make_backend, new_pane, short_tmp, lines) -> None:
    """A retry of a message whose earlier frame still shows: that frame's marker and end line
    must not count, or Enter goes before the new paste lands and submits the header alone.
    With 150 lines the new frame pushes the old marker out of the screen and the last lines."""
    import json

    backend = make_backend()
    log = short_tmp / "submissions"
    pane = new_pane(f"{sys.executable} {Path(__file__).with_name('paste_reader.py')} {log} 0.5", ready="READY")
    env = message("\n".join(f"line {n}" for n in range(lines)))
    lines = list(backend.frame(env, backend.tmux.pane(pane)).lines)
    backend.deliver(entity(pane), env)
    wait_for(lambda: f"[end bridge {env.msg_id[:8]}]" in backend.tmux.capture(pane), what="the first frame")
    backend.deliver(entity(pane), env)  # the gateway retries: the first attempt's confirm had timed out
    wait_for(lambda: log.exists() and len(log.read_text().splitlines()) == 2, what="the second submission")
    texts = [json.loads(line)["text"].replace("\r", "\n") for line in log.read_text().splitlines()]
    assert [text.split("\n") for text in texts] == [lines, lines]


def test_a_long_line_is_typed_in_two_steps(make_backend, new_pane, short_tmp) -> None:
    """With multiline = line, a long one-line frame typed in one burst (plus Enter) is taken
    for a paste and applied late by Claude Code, so the Enter submits without it; the header
    goes first, the rest once it shows, Enter once that shows. A short one is one tmux call."""
    import json

    from bridgecli_tmux.backend import TmuxBackend

    configured = make_backend(multiline="line")
    tmux = WatchedTmux(configured.tmux, control=configured.settings.control_mode)
    backend = TmuxBackend(configured.settings, tmux=tmux)
    log = short_tmp / "submissions"
    reader = Path(__file__).with_name("paste_reader.py")
    pane = new_pane(f"{sys.executable} {reader} {log} 0.5 800", ready="READY")
    env = message("the quick brown fox jumps over the lazy dog " * 40)
    backend.deliver(entity(pane), env)
    wait_for(log.exists, what="the submission")
    [submission] = [json.loads(line) for line in log.read_text().splitlines()]
    assert submission == {"text": backend.frame(env, tmux.pane(pane)).one_line(), "pasted": False}

    short = message("short")
    tmux.invocations.clear()
    backend.deliver(entity(pane), short)
    typed = [args for args in tmux.invocations if "send-keys" in args]
    assert len(typed) == 1 and typed[0][-1] == "Enter" and f"[bridge {short.msg_id[:8]}]" in typed[0][5]
    wait_for(lambda: len(log.read_text().splitlines()) == 2, what="the short submission")
    tmux.close()
