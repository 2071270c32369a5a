"""amqps:// with CA, client certificate and key from config, against a RabbitMQ node that
requires client certificates (``verify_peer`` + ``fail_if_no_peer_cert``)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridgecli.errors import ExitCode
from bridgecli.localbroker import LocalNode, free_port, stop_epmd_if_idle
from tests.multihost.tls import Pki, make_pki
from tests.support.rabbitmq import ManagedBroker


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory) -> Iterator[tuple[ManagedBroker, Pki, str]]:
    """A node with an amqps listener requiring client certificates (module scope: a node
    start costs ~5-15 s)."""
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    port = free_port()
    node = LocalNode(
        Path(tempfile.mkdtemp(prefix="btl", dir="/tmp")),
        extra_conf=[
            f"listeners.ssl.default = 127.0.0.1:{port}",
            f"ssl_options.cacertfile = {pki.ca}",
            f"ssl_options.certfile = {pki.server_cert}",
            f"ssl_options.keyfile = {pki.server_key}",
            "ssl_options.verify = verify_peer",
            "ssl_options.fail_if_no_peer_cert = true",
        ],
    )
    try:
        node.start()
        yield ManagedBroker(node), pki, f"amqps://guest:guest@localhost:{port}/"
    finally:
        node.stop()
        shutil.rmtree(node.base, ignore_errors=True)
        stop_epmd_if_idle()


def test_gateway_and_cli_over_amqps_with_client_certificate(tls_broker, host_factory):
    node, pki, uri = tls_broker
    host = host_factory(
        "tls",
        broker_uri=uri,
        extra_env={
            "BRIDGE_BROKER_TLS_CA": str(pki.ca),
            "BRIDGE_BROKER_TLS_CERT": str(pki.client_cert),
            "BRIDGE_BROKER_TLS_KEY": str(pki.client_key),
        },
    )
    main = host.register("main", role="main")
    host.start_gateway()
    sent = host.bridge_json("send", main, "over TLS", "--from", "main")
    got = host.bridge_json("poll", "--as", main, "--wait", "10s")["messages"]
    assert [(m["msgId"], m["content"]) for m in got] == [(sent["msgId"], "over TLS")]
    # the node has no plain listener clients: every connection is TLS with our client cert
    rows = node.ctl("list_connections", "ssl", "peer_cert_subject", "-q", "--no-table-headers").stdout
    assert rows.strip() and all(r.split("\t") == ["true", "CN=bridge-client"] for r in rows.strip().splitlines()), rows


@pytest.mark.parametrize("problem", ["wrong CA", "no client certificate"])
def test_bad_tls_settings_fail_clearly(tls_broker, host_factory, problem):
    _, pki, uri = tls_broker
    env = {
        "BRIDGE_BROKER_TLS_CA": str(pki.ca),
        "BRIDGE_BROKER_TLS_CERT": str(pki.client_cert),
        "BRIDGE_BROKER_TLS_KEY": str(pki.client_key),
    }
    if problem == "wrong CA":
        env["BRIDGE_BROKER_TLS_CA"] = str(pki.other_ca)
    else:
        env["BRIDGE_BROKER_TLS_CERT"] = env["BRIDGE_BROKER_TLS_KEY"] = ""
    host = host_factory("tlsbad", broker_uri=uri, extra_env=env)
    host.register("main", role="main")  # works offline; the inbox declaration is what fails
    result = host.bridge("send", "main", "hi", "--from", "main")
    assert result.returncode == ExitCode.TLS, result.stderr
    assert "localhost" in result.stderr and "TLS" in result.stderr
