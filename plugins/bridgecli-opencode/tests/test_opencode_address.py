"""The ``opencode`` address form, checked at registration without asking any server."""

from __future__ import annotations

import pytest

from bridgecli.errors import ConfigError
from bridgecli_opencode.backend import OpenCodeBackend, OpenCodeSettings
from bridgecli_opencode.client import new_message_id, parse_address


def test_check_address() -> None:
    backend = OpenCodeBackend(OpenCodeSettings(), env={})
    backend.check_address("http://127.0.0.1:4096#ses_abc123")
    backend.check_address("http://[::1]:4096#ses_abc123")
    for bad in (
        None,
        "",
        "127.0.0.1:4096#ses_abc",
        "http://127.0.0.1#ses_abc",
        "http://127.0.0.1:4096",
        "http://127.0.0.1:4096#abc",
        "http://u:secret@127.0.0.1:4096#ses_abc",
        "http://127.0.0.1:4096/x#ses_abc",
        "ftp://127.0.0.1:4096#ses_abc",
    ):
        with pytest.raises(ConfigError, match="opencode"):
            backend.check_address(bad)


def test_message_ids_sort_in_time_order() -> None:
    """OpenCode orders a session's messages by id: ours must sort like its own."""
    ids = [new_message_id(1_796_438_738_395), new_message_id(1_796_438_738_395), new_message_id(1_796_438_738_396)]
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert ids[0].startswith("msg_24417c5db") and len(ids[0]) == len("msg_24417c5890010OxHP2vKR6PgmZ")
    assert parse_address("http://127.0.0.1:4096#ses_abc").url == "http://127.0.0.1:4096"
