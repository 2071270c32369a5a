"""What the Channels view shows: every channel with its members on every host, from the local
gateway's ``channel_list`` answer.

Pure data. Each channel also carries its pseudo-gid (the ``to`` of a message sent to it), so
the traffic view can name ``#reviewers`` instead of an unknown gid.
"""

from __future__ import annotations

from typing import Any

from bridgecli import channels as channels_mod


def channels(answer: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """``[{"name", "gid", "members": [{"gid", "label", "host"}]}]`` sorted by name, members
    by host and label; None when ``answer`` is (no gateway, or one without the operation).
    A malformed entry is skipped: the answer is shown, never trusted to be well formed."""
    if answer is None:
        return None
    shown = []
    for found in answer.get("channels") or []:
        if not isinstance(found, dict) or not channels_mod.valid_name(found.get("name")):
            continue
        members = [
            {"gid": str(m.get("gid")), "label": str(m.get("label")), "host": str(m.get("host"))}
            for m in found.get("members") or []
            if isinstance(m, dict)
        ]
        members.sort(key=lambda m: (m["host"], m["label"], m["gid"]))
        name = found["name"]
        shown.append({"name": name, "gid": channels_mod.channel_gid(name), "members": members})
    return sorted(shown, key=lambda c: c["name"])
