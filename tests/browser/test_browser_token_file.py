"""bridge.json: private, atomic, explicit-token-wins, refuses unsafe permissions."""

from __future__ import annotations

import json
import os
import stat

import pytest

from bridgecli.browser import token_file
from bridgecli.errors import ConfigError, PermissionProblem


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_host_generates_writes_0600_in_0700_dir_and_reuses(cache):
    token, generated = token_file.resolve_token(None, 4600, write_file=True)
    assert generated and len(token) >= 40
    path = token_file.path()
    assert path == cache / "opencode-browser" / "bridge.json"
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    data = json.loads(path.read_text())
    assert data == {"v": 1, "port": 4600, "token": token, "pid": os.getpid()}
    assert token_file.resolve_token(None, 4600, write_file=True) == (token, False)
    assert token_file.guest_token(None) == token
    assert [p.name for p in path.parent.iterdir()] == ["bridge.json"]  # no temp files left


def test_explicit_token_wins_and_is_written(cache):
    token_file.resolve_token(None, 4600, write_file=True)
    assert token_file.resolve_token("explicit-token-1234", 4601, write_file=True) == ("explicit-token-1234", False)
    assert token_file.read()["token"] == "explicit-token-1234"
    assert token_file.guest_token("other") == "other"


def test_guest_does_not_write(cache):
    assert token_file.guest_token(None) is None
    token_file.resolve_token("t" * 20, 1, write_file=False)
    assert not token_file.path().exists()


@pytest.mark.parametrize("bad_mode", [0o640, 0o604, 0o660])
def test_group_or_other_readable_file_is_refused(cache, bad_mode):
    path = token_file.write(4600, "secret-secret-secret")
    os.chmod(path, bad_mode)
    with pytest.raises(PermissionProblem, match="accessible by group or others") as info:
        token_file.read()
    assert f"chmod 600 {path}" in str(info.value)
    with pytest.raises(PermissionProblem):
        token_file.resolve_token(None, 4600, write_file=True)


def test_damaged_file_is_a_clear_error(cache):
    path = token_file.write(4600, "secret-secret-secret")
    path.write_text("{oops")
    with pytest.raises(ConfigError, match="damaged"):
        token_file.read()


def test_clear(cache):
    assert token_file.clear() is False
    token_file.write(1, "secret-secret-secret")
    assert token_file.clear() is True and not token_file.path().exists()
