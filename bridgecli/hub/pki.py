"""The hub's private certificate authority and the broker's TLS server certificate.

One EC P-256 CA per hub (``ca.pem``/``ca.key``) signs one leaf (``server.pem``/``server.key``)
whose SANs are the hub's addresses and names plus ``localhost``/``127.0.0.1``, and the
certificates of cluster nodes (:meth:`HubPki.issue_node_cert`, handed out, not kept). Hosts pin the
CA by its SHA-256 fingerprint, so the CA is created once and never replaced; the leaf is
re-issued whenever its SANs or remaining validity no longer fit. Every file is written
atomically with mode 0600 in a 0700 directory, because ``*.key`` are the hub's secrets.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from bridgecli import paths
from bridgecli.errors import CannotWrite, ConfigError

CA_VALIDITY = dt.timedelta(days=3652)  # ~10 years: re-pairing every host is costly
SERVER_VALIDITY = dt.timedelta(days=730)
RENEW_BEFORE = dt.timedelta(days=30)  # re-issue the leaf when it expires sooner than this
BACKDATE = dt.timedelta(days=1)  # tolerate clocks of other hosts that run a little behind
ALWAYS_NAMES = ("localhost",)
ALWAYS_IPS = ("127.0.0.1",)


def _now() -> dt.datetime:
    """The current UTC time (one place, so tests can move the clock)."""
    return dt.datetime.now(dt.UTC)


def fingerprint_of_der(der: bytes) -> str:
    """SHA-256 of a DER certificate as 64 lowercase hex digits (what hosts pin)."""
    return hashlib.sha256(der).hexdigest()


def load_ca_pem_from_der(der: bytes) -> bytes:
    """PEM text of the DER certificate ``der``; ValueError when it is not a certificate."""
    try:
        cert = x509.load_der_x509_certificate(bytes(der))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a DER X.509 certificate: {exc}") from exc
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class HubPki:
    """The hub's CA and server certificate files inside ``directory``."""

    directory: Path

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def server_cert(self) -> Path:
        return self.directory / "server.pem"

    @property
    def server_key(self) -> Path:
        return self.directory / "server.key"

    # --- the CA ------------------------------------------------------------------------
    def ensure_ca(self, hub_id: str) -> bool:
        """Create the directory (0700) and, unless ``ca.pem`` exists, a new self-signed CA.

        Returns True when it created a CA. An existing CA is never replaced: hosts pinned its
        fingerprint. A leftover ``ca.key`` without ``ca.pem`` (a crash between the two
        writes) is replaced, as no host can have pinned a CA whose certificate never existed.
        """
        try:
            paths.ensure_private_dir(self.directory)
        except OSError as exc:
            raise _cannot_write(self.directory, exc) from exc
        if self.ca_cert.exists():
            if not self.ca_key.exists():
                raise ConfigError(
                    f"the hub CA key {self.ca_key} is missing (its certificate {self.ca_cert} is there)",
                    f"restore {self.ca_key} from a backup; only if that is lost, "
                    f"remove {self.ca_cert} to create a new CA, which every host "
                    f"must then pair with again",
                )
            return False
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"bridge hub CA {hub_id}")])
        now = _now()
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + CA_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        # key first: ca.pem is the marker of a complete CA
        _write_private(self.ca_key, _key_pem(key))
        _write_private(self.ca_cert, cert.public_bytes(serialization.Encoding.PEM))
        return True

    def ca_der(self) -> bytes:
        """The CA certificate in DER form (what a joining host receives and pins)."""
        return self._load_ca_cert().public_bytes(serialization.Encoding.DER)

    def ca_fingerprint(self) -> str:
        """SHA-256 of the CA certificate's DER, 64 lowercase hex digits."""
        return fingerprint_of_der(self.ca_der())

    # --- the server certificate ----------------------------------------------------------
    def ensure_server_cert(self, addresses: list[str], names: list[str]) -> bool:
        """(Re)issue ``server.pem``/``server.key`` unless the current pair is signed by our CA,
        matches, has exactly the wanted SANs and is valid for more than 30 more days.

        SANs: ``addresses`` as IP addresses, ``names`` as DNS names, plus ``localhost`` and
        ``127.0.0.1``. Returns True when it (re)issued. ConfigError on a bad address.
        """
        ips = _parse_ips([*addresses, *ALWAYS_IPS])
        dns = list(dict.fromkeys([*(n.strip().lower() for n in names if n.strip()), *ALWAYS_NAMES]))
        wanted = {("ip", str(ip)) for ip in ips} | {("dns", n) for n in dns}
        ca_cert, ca_key = self._load_ca_cert(), self._load_ca_key()
        if not self._needs_issue(wanted, ca_cert):
            return False
        common = next((n.strip() for n in [*names, *addresses] if n.strip()), "localhost")
        key, cert = _issue_leaf((ca_cert, ca_key), common, dns, ips, [ExtendedKeyUsageOID.SERVER_AUTH])
        _write_private(self.server_key, _key_pem(key))
        _write_private(self.server_cert, cert.public_bytes(serialization.Encoding.PEM))
        return True

    def issue_node_cert(self, name: str, addresses: list[str]) -> tuple[bytes, bytes]:
        """(key PEM, certificate PEM) of a new cluster-node leaf signed by our CA, for TLS
        server *and* client use: distribution verifies both ends against this CA. SANs:
        ``addresses`` as IPs and, with ``name``, as DNS names, since the connecting node
        checks the host part of the node name (``bridge@10.0.0.5``) as a DNS name. Nothing is
        saved: the key belongs to the node's machine. ConfigError on a bad address.
        """
        ips = _parse_ips(addresses)
        dns = list(dict.fromkeys([name.strip().lower(), *(str(ip) for ip in ips)]))
        key, cert = _issue_leaf(
            (self._load_ca_cert(), self._load_ca_key()),
            name.strip(),
            dns,
            ips,
            [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
        )
        return _key_pem(key), cert.public_bytes(serialization.Encoding.PEM)

    def issue_amqps_cert(self, addresses: list[str]) -> tuple[bytes, bytes]:
        """(key PEM, certificate PEM) of a new AMQPS server leaf for another cluster node's
        ``addresses`` (IP SANs), signed by our CA, so that hosts pinning the CA trust every
        node. Nothing is saved: the key belongs to that node's machine."""
        ips = _parse_ips(addresses)
        key, cert = _issue_leaf(
            (self._load_ca_cert(), self._load_ca_key()), str(ips[0]), [], ips, [ExtendedKeyUsageOID.SERVER_AUTH]
        )
        return _key_pem(key), cert.public_bytes(serialization.Encoding.PEM)

    def san_of_server(self) -> dict[str, list[str]]:
        """``{"ips": [...], "names": [...]}``: the SANs of ``server.pem``, in its order."""
        san = _sans(_load_cert(self.server_cert, "the hub's server certificate"))
        return {"ips": [v for k, v in san if k == "ip"], "names": [v for k, v in san if k == "dns"]}

    def _needs_issue(self, wanted: set[tuple[str, str]], ca_cert: x509.Certificate) -> bool:
        """True unless the existing leaf is ours, matches its key, its SANs and has time left."""
        try:
            cert = x509.load_pem_x509_certificate(self.server_cert.read_bytes())
            key = serialization.load_pem_private_key(self.server_key.read_bytes(), None)
            cert.verify_directly_issued_by(ca_cert)
        except (OSError, ValueError, TypeError, InvalidSignature):
            return True  # missing, unreadable, damaged or from another CA: issue a fresh one
        if key.public_key() != cert.public_key():
            return True
        if set(_sans(cert)) != wanted:
            return True
        return cert.not_valid_after_utc - _now() < RENEW_BEFORE

    # --- loading -------------------------------------------------------------------------
    def _load_ca_cert(self) -> x509.Certificate:
        return _load_cert(self.ca_cert, "the hub CA certificate")

    def _load_ca_key(self) -> Any:
        """The CA's private key; ConfigError when missing, unreadable or not the cert's."""
        try:
            key = serialization.load_pem_private_key(self.ca_key.read_bytes(), None)
        except FileNotFoundError:
            raise ConfigError(
                f"the hub CA key {self.ca_key} is missing",
                f"restore it from a backup, or create the CA first in {self.directory}",
            ) from None
        except (OSError, ValueError, TypeError) as exc:
            raise ConfigError(f"cannot read the hub CA key {self.ca_key}: {exc}", "restore it from a backup") from exc
        if key.public_key() != self._load_ca_cert().public_key():
            raise ConfigError(
                f"the hub CA key {self.ca_key} does not belong to {self.ca_cert}",
                "restore the matching pair from a backup",
            )
        return key


def _issue_leaf(
    ca: tuple[x509.Certificate, Any],
    common: str,
    dns: list[str],
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address],
    usages: list[x509.ObjectIdentifier],
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A new P-256 key and its leaf certificate signed by ``ca`` (certificate, key)."""
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + SERVER_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in dns] + [x509.IPAddress(ip) for ip in ips]),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def _parse_ips(addresses: list[str]) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """Distinct IP addresses in order; ConfigError naming the first that is not one."""
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for text in addresses:
        try:
            ip = ipaddress.ip_address(text.strip())
        except ValueError:
            raise ConfigError(
                f"{text!r} is not an IP address", "give IP addresses as addresses and host names as names"
            ) from None
        if ip not in ips:
            ips.append(ip)
    return ips


def _sans(cert: x509.Certificate) -> list[tuple[str, str]]:
    """``("ip", "1.2.3.4")``/``("dns", "name")`` pairs of the certificate's SAN extension."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [("dns", n.lower()) for n in san.get_values_for_type(x509.DNSName)] + [
        ("ip", str(ip)) for ip in san.get_values_for_type(x509.IPAddress)
    ]


def _load_cert(path: Path, what: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except FileNotFoundError:
        raise ConfigError(
            f"{what} {path} is missing",
            "create it first (the hub creates its CA and server certificate when it is set up)",
        ) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc}", "restore it from a backup") from exc


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cannot_write(path: Path, exc: OSError) -> CannotWrite:
    return CannotWrite(
        f"cannot write {path}: {exc.strerror or exc}",
        "nothing was replaced; check that its directory is a writable directory and the disk is not full, then retry",
    )


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` with mode 0600 via a temp file and ``os.replace``: a reader
    never sees half a key, and a failure leaves the old file intact (CannotWrite)."""
    tmp = None
    try:
        # mkstemp creates the file O_EXCL with mode 0600: a key is never briefly readable
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _cannot_write(path, exc) from exc
        raise
