"""The webhook plugin end to end: two simulated hosts on the session's real RabbitMQ, real
`bridge gateway` processes, and a real HTTP receiver on 127.0.0.1.

Host a has a main session (hold); host b has three webhook entities whose receiver answers
200, 503-then-200 and 400. A message to each is delivered once, retried until delivered,
or dead-lettered at once with the receiver's answer as the reason.
"""

from __future__ import annotations

import json
import time


def test_messages_reach_webhooks_retry_on_5xx_and_dead_letter_on_4xx(host_factory, receiver):
    a, b = host_factory("a"), host_factory("b")
    main = a.register("main", role="main")
    ok = b.register("ok-hook", deliver="webhook:" + receiver.script("/ok", [200]))
    flaky = b.register("flaky-hook", deliver="webhook:" + receiver.script("/flaky", [503, 200]))
    gone = b.register("gone-hook", deliver="webhook:" + receiver.script("/gone", [400]))
    a.start_gateway(), b.start_gateway()

    def send(gid: str, text: str) -> str:
        return a.bridge_json("send", gid, text, "--from", "main", "--force")["msgId"]

    sent_ok, sent_flaky, sent_gone = send(ok, "hello"), send(flaky, "again"), send(gone, "lost?")

    [post] = receiver.wait_for("/ok", 1)
    body = post.json
    assert (body["msgId"], body["from"], body["fromLabel"], body["to"], body["content"]) == (
        sent_ok,
        main,
        "main",
        ok,
        "hello",
    )
    assert post.headers["X-Bridge-Msg-Id"] == sent_ok

    first, second = receiver.wait_for("/flaky", 2)
    assert first.json["msgId"] == second.json["msgId"] == sent_flaky  # the same message, retried

    receiver.wait_for("/gone", 1)
    deadline = time.monotonic() + 30
    while True:
        proc = b.bridge("dlq", "show", sent_gone, "--json")
        if proc.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert proc.returncode == 0, proc.stderr
    letter = json.loads(proc.stdout)
    assert letter["reason"] == "delivery_failed" and "HTTP 400" in letter["detail"]
    time.sleep(1.5)  # a delivered message is not posted again, a dead-lettered one not retried
    assert [len(receiver.posts(p)) for p in ("/ok", "/flaky", "/gone")] == [1, 2, 1]
