"""Property: whatever an agent sends, the broker does not raise and never forwards a command
into a group another live agent owns (hypothesis drives the frames)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bridgecli.browser import frames as F
from tests.browser.test_browser_broker import Net

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.text(max_size=8),
    st.sampled_from(["g", "mine", "browser_open", "e1", "w"]),
)
frames = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["command", "result", "event", "ping", "hello", "ready", "x"]) | scalars,
        "id": scalars,
        "action": st.sampled_from(
            list(F.EXECUTOR_ACTIONS + F.BROKER_ACTIONS) + ["browser_open", "browser_release", "eval"]
        )
        | scalars,
        "group": st.sampled_from(["g", "mine", None, ""]) | scalars,
        "params": st.one_of(
            st.none(), st.dictionaries(st.sampled_from(["url", "target", "tab"]), scalars, max_size=2), scalars
        ),
        "target": st.sampled_from(["e1", "w", "nope"]) | scalars,
        "ok": scalars,
        "data": scalars,
    },
)


@settings(max_examples=150, deadline=None)
@given(st.lists(frames, max_size=12))
def test_intruder_frames_never_reach_an_owned_group(sequence):
    net = Net()
    net.executor("e1", label="w")
    net.agent("owner")
    net.agent("intruder")
    net.roundtrip("owner", 1, "open", "g")
    for frame in sequence:
        net.broker.handle(net.ids["intruder"], frame)
        for sent in net.conns["e1"].pop():
            assert sent.get("group") != "g", (frame, sent)
            net.reply("e1", sent["id"], {})
    assert net.broker.snapshot()["groups"]["g"] == ("e1", net.ids["owner"])
    assert net.roundtrip("owner", 2, "text", "g")[0] == "e1"
