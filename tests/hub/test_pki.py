"""The hub PKI with real certificates: CA stability, file modes, SANs, re-issue, TLS."""

from __future__ import annotations

import contextlib
import datetime as dt
import socket
import ssl
import stat
import threading
from collections.abc import Iterator

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from bridgecli.errors import CannotWrite, ConfigError
from bridgecli.hub import pki
from bridgecli.hub.pki import HubPki, fingerprint_of_der, load_ca_pem_from_der


@pytest.fixture
def hub(tmp_path) -> HubPki:
    p = HubPki(tmp_path / "pki")
    assert p.ensure_ca("hub-1") is True
    assert p.ensure_server_cert(["192.0.2.7", "2001:db8::1"], ["hub.example"]) is True
    return p


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_ca_is_created_once_and_never_replaced(hub):
    first = hub.ca_fingerprint()
    assert len(first) == 64 and first == first.lower() and int(first, 16) >= 0
    assert hub.ensure_ca("hub-1") is False and hub.ensure_ca("other") is False
    assert hub.ca_fingerprint() == first == HubPki(hub.directory).ca_fingerprint()
    assert fingerprint_of_der(hub.ca_der()) == first
    ca = x509.load_pem_x509_certificate(hub.ca_cert.read_bytes())
    assert ca.subject.rfc4514_string() == "CN=bridge hub CA hub-1"
    basic = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert basic.critical and basic.value.ca and basic.value.path_length == 0
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage)
    assert usage.critical and usage.value.key_cert_sign and usage.value.crl_sign


def test_private_modes(hub):
    assert _mode(hub.directory) == 0o700
    for path in (hub.ca_cert, hub.ca_key, hub.server_cert, hub.server_key):
        assert _mode(path) == 0o600, path
    assert sorted(p.name for p in hub.directory.iterdir()) == [
        "ca.key",
        "ca.pem",
        "server.key",
        "server.pem",
    ]  # no temp files left behind


def test_server_sans_and_reissue(hub):
    assert hub.san_of_server() == {
        "ips": ["192.0.2.7", "2001:db8::1", "127.0.0.1"],
        "names": ["hub.example", "localhost"],
    }
    leaf = x509.load_pem_x509_certificate(hub.server_cert.read_bytes())
    assert leaf.subject.rfc4514_string() == "CN=hub.example"
    ski = (
        x509.load_pem_x509_certificate(hub.ca_cert.read_bytes())
        .extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
        .value.digest
    )
    aki = leaf.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    assert aki.key_identifier == ski
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]

    before = hub.server_cert.read_bytes()
    # same set (order, duplicates and the implicit entries do not matter): no re-issue
    assert hub.ensure_server_cert(["2001:db8::1", "192.0.2.7", "127.0.0.1"], ["hub.example", "localhost"]) is False
    assert hub.server_cert.read_bytes() == before
    assert hub.ensure_server_cert(["192.0.2.8"], ["hub.example"]) is True
    assert hub.san_of_server()["ips"] == ["192.0.2.8", "127.0.0.1"]
    assert hub.ensure_server_cert(["192.0.2.8"], ["hub.example"]) is False
    with pytest.raises(ConfigError, match="not an IP address"):
        hub.ensure_server_cert(["hub.example"], [])


def test_node_cert_is_server_and_client_for_its_addresses(hub):
    key_pem, cert_pem = hub.issue_node_cert("node-a", ["192.0.2.11"])
    leaf = x509.load_pem_x509_certificate(cert_pem)
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(hub.ca_cert.read_bytes()))
    assert serialization.load_pem_private_key(key_pem, None).public_key() == leaf.public_key()
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(eku) == {x509.oid.ExtendedKeyUsageOID.SERVER_AUTH, x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH}
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    # the address as a DNS name too: distribution checks the node name's host part as one
    assert san.get_values_for_type(x509.DNSName) == ["node-a", "192.0.2.11"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["192.0.2.11"]
    with pytest.raises(ConfigError, match="not an IP address"):
        hub.issue_node_cert("node-a", ["node-a.example"])


def test_reissue_when_expiring_soon(hub, monkeypatch):
    real_now = pki._now()
    monkeypatch.setattr(pki, "_now", lambda: real_now + dt.timedelta(days=710))
    assert hub.ensure_server_cert(["192.0.2.7", "2001:db8::1"], ["hub.example"]) is True
    monkeypatch.setattr(pki, "_now", lambda: real_now + dt.timedelta(days=712))
    assert hub.ensure_server_cert(["192.0.2.7", "2001:db8::1"], ["hub.example"]) is False


def test_reissue_when_key_is_missing_or_not_the_certificates(hub):
    wanted = (["192.0.2.7", "2001:db8::1"], ["hub.example"])
    hub.server_key.write_bytes(hub.ca_key.read_bytes())
    assert hub.ensure_server_cert(*wanted) is True
    hub.server_key.unlink()
    assert hub.ensure_server_cert(*wanted) is True
    assert hub.ensure_server_cert(*wanted) is False


def test_lost_ca_key_is_an_error_not_a_new_ca(hub):
    fingerprint = hub.ca_fingerprint()
    hub.ca_key.unlink()
    with pytest.raises(ConfigError, match="ca.key"):
        hub.ensure_ca("hub-1")
    with pytest.raises(ConfigError, match="ca.key"):
        hub.ensure_server_cert(["192.0.2.9"], [])
    assert hub.ca_fingerprint() == fingerprint


def test_unwritable_directory_is_cannot_write(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(CannotWrite, match="cannot write"):
        HubPki(blocker).ensure_ca("x")
    with pytest.raises(CannotWrite):
        HubPki(blocker / "pki").ensure_ca("x")


def test_der_pem_round_trip(hub):
    pem = load_ca_pem_from_der(hub.ca_der())
    assert pem.startswith(b"-----BEGIN CERTIFICATE-----")
    assert x509.load_pem_x509_certificate(pem) == x509.load_pem_x509_certificate(hub.ca_cert.read_bytes())
    with pytest.raises(ValueError):
        load_ca_pem_from_der(b"garbage, not DER")


@contextlib.contextmanager
def _tls_server(hub: HubPki) -> Iterator[int]:
    """A TLS server on 127.0.0.1 presenting the hub's server certificate; yields its port."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(hub.server_cert, hub.server_key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:  # timeout: look at the stop flag again
                continue
            conn.settimeout(5)
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"hello")
            except OSError:  # the client rejected our certificate (ssl.SSLError is an OSError)
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def _handshake(port: int, cafile, hostname: str) -> bytes:
    context = ssl.create_default_context(cafile=str(cafile))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=hostname) as tls,
    ):
        return tls.recv(5)


def test_real_tls_handshake(hub, tmp_path):
    stranger = HubPki(tmp_path / "other")
    stranger.ensure_ca("stranger")
    with _tls_server(hub) as port:
        assert _handshake(port, hub.ca_cert, "127.0.0.1") == b"hello"
        assert _handshake(port, hub.ca_cert, "localhost") == b"hello"
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(port, stranger.ca_cert, "127.0.0.1")
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(port, hub.ca_cert, "192.0.2.99")  # not in the SANs
