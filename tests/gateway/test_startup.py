"""A gateway's first start on a fresh broker is quiet: nothing in its log reads as a failure."""

from __future__ import annotations

import uuid


def test_first_start_on_a_fresh_broker_logs_no_retry(host_factory, rabbitmq):
    vhost = f"bt-fresh-{uuid.uuid4().hex[:6]}"
    rabbitmq.ctl("add_vhost", vhost)
    rabbitmq.ctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    try:
        a = host_factory("a", broker_uri=rabbitmq.uri.rstrip("/") + "/" + vhost)
        a.register("main", role="main")
        a.start_gateway()
        log = a.log()
        assert "connected to broker" in log
        assert "retrying" not in log and "warning" not in log, log
    finally:
        rabbitmq.ctl("delete_vhost", vhost, check=False)
