"""Channel rules as pure data (:mod:`bridgecli.channels`), the envelope's channel fields, the
grant that lets a host bind only channel names, and hostile channel lists in roster frames."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from bridgecli import channels, envelope, gids
from bridgecli.errors import BadChannelName, ExitCode
from bridgecli.hub.permissions import for_host
from bridgecli.roster import RosterView


@pytest.mark.parametrize("name", ["reviewers", "#reviewers", "a", "team-2_b", "x" * 63])
def test_valid_names(name):
    assert channels.check_name(name) == name.removeprefix("#")


@pytest.mark.parametrize(
    "name", ["", "#", "Reviewers", "-lead", "_x", "a.b", "a*", "a#", "chan.x", "x" * 64, "ré", "a b", "a\n", None]
)
def test_bad_names_are_refused_with_their_own_exit_code(name):
    with pytest.raises(BadChannelName) as caught:
        channels.check_name(name)  # type: ignore[arg-type]
    assert caught.value.exit_code == ExitCode.BAD_CHANNEL == 21
    assert "is not a channel name" in str(caught.value)


def test_ids_are_stable_and_apart():
    msg = str(uuid.uuid4())
    one, two = gids.mint("h"), gids.mint("h")
    assert channels.copy_id(msg, one) == channels.copy_id(msg, one)  # a redelivery is a repeat
    assert channels.copy_id(msg, one) != channels.copy_id(msg, two)  # two members keep theirs
    assert channels.channel_gid("a") != channels.channel_gid("b")
    assert envelope.is_uuid(channels.copy_id(msg, one)) and envelope.is_uuid(channels.channel_gid("a"))


def channel_body(**fields) -> bytes:
    """A valid body of a message to channel ``ops``, with ``fields`` changed."""
    base = {
        "v": 1,
        "msgId": str(uuid.uuid4()),
        "kind": "SEND",
        "from": str(uuid.uuid4()),
        "to": channels.channel_gid("ops"),
        "ts": 1.0,
        "content": "hi",
        "channel": "ops",
    }
    return json.dumps({**base, **fields}).encode()


def test_the_envelope_carries_a_channel_only_to_its_own_address():
    assert envelope.parse(channel_body()).channel == "ops"
    with pytest.raises(envelope.InvalidEnvelope, match="not the address of channel ops"):
        envelope.parse(channel_body(to=str(uuid.uuid4())))
    with pytest.raises(envelope.InvalidEnvelope, match="channel must be a channel name"):
        envelope.parse(channel_body(channel="OPS"))
    with pytest.raises(envelope.InvalidEnvelope, match="channel must be a channel name"):
        envelope.parse(channel_body(channel=["ops"]))
    with pytest.raises(envelope.InvalidEnvelope, match="channel must be a channel name"):
        envelope.parse(channel_body(channel=None, copyOf=str(uuid.uuid4())))  # a copy only beside a channel
    # a member's stored copy is addressed to the member
    member = gids.mint("h")
    copy = envelope.parse(channel_body(to=member, copyOf=str(uuid.uuid4())))
    assert copy.recipient == member and copy.copy_of


def test_a_host_may_bind_channel_names_but_no_pattern():
    perms = for_host("hosta")
    for key in ("chan.reviewers", "chan.a", "chan.team-2_b"):
        assert re.match(perms.topic_msg_read, key), key
    for key in ("chan.*", "chan.#", "#", "*.*", "chan.", "chan.a.b", "chan.A", "chan.reviewers.#"):
        assert not re.match(perms.topic_msg_read, key), key


def test_roster_frames_keep_only_valid_channel_names():
    view = RosterView(local_host="me")
    gid = gids.mint("there")
    frame = {
        "v": 1,
        "type": "heartbeat",
        "host": "there",
        "gid": gid,
        "label": "w",
        "channels": ["ops", "OPS", "\x1b[31mred", "a.b", 7, "ops", *[f"c{i}" for i in range(500)]],
    }
    assert view.apply(json.dumps(frame).encode(), key=f"roster.there.{gid}")
    entry = view.get(gid)
    assert entry is not None and "ops" in entry.channels
    assert len(entry.channels) <= channels.MAX_PER_ENTITY
    assert all(channels.valid_name(name) for name in entry.channels)
    assert entry.as_dict()["channels"] == list(entry.channels)
    # not a list: no channels, and the frame still counts
    frame["channels"] = "ops"
    assert view.apply(json.dumps(frame).encode(), key=f"roster.there.{gid}")
    assert view.get(gid).channels == ()  # type: ignore[union-attr]
