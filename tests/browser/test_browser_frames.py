"""Frame validation: the protocol's single source of truth (pure)."""

from __future__ import annotations

import pytest

from bridgecli.browser import frames as F


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"\xff\xfe", "not UTF-8"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"id": 1}', "no string 'type'"),
    ],
)
def test_decode_rejects_junk(raw, message):
    with pytest.raises(F.FrameError, match=message) as info:
        F.decode(raw)
    assert info.value.code == F.E_BAD_FRAME


def test_hello_role_defaults_to_extension_and_fields_are_checked():
    hello = F.validate_hello({"type": "hello", "token": "t"})
    assert hello["role"] == "extension" and hello["v"] == F.PROTOCOL_VERSION
    assert F.validate_hello(F.hello("t", "agent", label="cli"))["label"] == "cli"
    for bad in (
        {"type": "ready", "token": "t"},
        {"type": "hello"},
        {"type": "hello", "token": "t", "role": "admin"},
        {"type": "hello", "token": "t", "v": "1"},
        {"type": "hello", "token": "t", "label": "x" * 201},
        {"type": "hello", "token": "t", "default": "yes"},
    ):
        with pytest.raises(F.FrameError):
            F.validate_hello(bad)


def test_command_normalises_prefix_and_requires_group_where_routing_needs_it():
    cmd = F.validate_command({"id": "r1", "action": "browser_open", "group": "g"})
    assert cmd == {"type": "command", "id": "r1", "action": "open", "group": "g", "params": {}, "target": None}
    assert F.validate_command({"id": 1, "action": "tabs"})["group"] is None
    assert F.validate_command({"id": 1, "action": "targets"})["action"] == "targets"
    for bad, code in (
        ({"id": 1, "action": "click"}, F.E_BAD_FRAME),
        ({"id": 1, "action": "release"}, F.E_BAD_FRAME),
        ({"id": 1, "action": "eval", "group": "g"}, F.E_UNKNOWN_ACTION),
        ({"id": True, "action": "open", "group": "g"}, F.E_BAD_FRAME),
        ({"id": "", "action": "open", "group": "g"}, F.E_BAD_FRAME),
        ({"id": 1, "action": "open", "group": ""}, F.E_BAD_FRAME),
        ({"id": 1, "action": "open", "group": "g", "target": 3}, F.E_BAD_FRAME),
    ):
        with pytest.raises(F.FrameError) as info:
            F.validate_command(bad)
        assert info.value.code == code, bad


def test_result_shapes():
    assert F.validate_result({"id": "b1", "ok": True, "data": 1})["data"] == 1
    assert F.validate_result({"id": "b1", "ok": False, "error": "Element not found"})["error"] == {
        "code": F.E_EXECUTOR,
        "message": "Element not found",
    }
    assert F.validate_result({"id": "b1", "ok": False})["error"]["code"] == F.E_EXECUTOR
    with pytest.raises(F.FrameError):
        F.validate_result({"id": "b1", "ok": "yes"})


def test_command_error_carries_code_and_hint():
    exc = F.CommandError(F.E_RE_ELECTING, "bridge re-electing")
    assert exc.code == F.E_RE_ELECTING and str(exc) == "bridge re-electing — retry in a moment"
