"""HTTPS for ``bench_realsites``: the benchmark's own certificate authority, nginx's https
listeners, and what nginx's log says about connections and resumed TLS sessions.

- :func:`make_certificates` makes a fresh authority and a server certificate for the sites'
  addresses (ECDSA P-256, SHA-256, valid two days), in the benchmark's temporary folder. webcrawl
  trusts it through ``WEBCRAWL_TLS_CA_FILE`` and verifies as it does by default; vanilla Scrapy
  keeps its defaults (``DOWNLOAD_VERIFY_CERTIFICATES = False``: it checks nothing).
- :data:`HTTPS_SERVERS`: the https listeners a crawl can be run against (``BENCH_REALSITES_HTTPS_SERVERS``):
  connections kept alive or closed after each answer (nginx's ``keepalive_timeout 0``: a new
  connection and a new handshake per request), TLS sessions resumable (a shared session cache
  and session tickets) or not.
- :func:`connection_counts` reads, from the requests of one crawl, how many connections it
  opened and how many of their handshakes resumed a session: nginx's ``$ssl_session_reused``.
- :func:`resumption_probe`: a client that does resume (Python's ``ssl`` given the previous
  connection's session), so that a count of 0 resumed handshakes is known to be the client's;
  and its CPU per connection with and without resuming, what resumption saves a client.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from bench._realsites_nginx import HTTP, Access, Listener

SCHEMES = ("http", "https")
#: The https listeners, by the name ``BENCH_REALSITES_HTTPS_SERVERS`` gives them.
HTTPS_SERVERS = {
    "keepalive": Listener(tls=True),
    "close": Listener(tls=True, keepalive=False),
    "close-noresume": Listener(tls=True, keepalive=False, resume=False),
    "keepalive-noresume": Listener(tls=True, resume=False),
}
DEFAULT_HTTPS_SERVERS = ("keepalive", "close", "close-noresume")
#: The listener the targets are judged on: what a documentation site's nginx usually is.
MAIN = "https keepalive"


def _names(variable: str, default: tuple[str, ...], known: tuple[str, ...]) -> list[str]:
    names = [n for n in os.environ.get(variable, ",".join(default)).replace(",", " ").split() if n]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise SystemExit(f"{variable}: {unknown[0] if unknown else '(empty)'!r} is not one of "
                         f"{', '.join(known)}")
    return list(dict.fromkeys(names))


def listeners() -> dict[str, Listener]:
    """The listeners of this run, by ``BENCH_REALSITES_SCHEMES`` (http,https) and
    ``BENCH_REALSITES_HTTPS_SERVERS``: ``"http"`` and ``"https <server>"``."""
    schemes = _names("BENCH_REALSITES_SCHEMES", SCHEMES, SCHEMES)
    chosen: dict[str, Listener] = {"http": HTTP} if "http" in schemes else {}
    if "https" in schemes:
        servers = _names("BENCH_REALSITES_HTTPS_SERVERS", DEFAULT_HTTPS_SERVERS, tuple(HTTPS_SERVERS))
        if "keepalive" not in servers:
            servers.insert(0, "keepalive")  # the listener the targets are judged on
        chosen.update({f"https {name}": HTTPS_SERVERS[name] for name in servers})
    return chosen


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the authority's certificate: what a client trusts
    chain: Path  # the server's certificate
    key: Path  # the server's private key


def make_certificates(folder: Path, addresses: list[str]) -> Certificates:
    """A new authority and, signed by it, a certificate for ``addresses`` (and localhost)."""
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.now(timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "webcrawl bench realsites CA")])
    ca_id = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())

    def usage(sign_certificates: bool) -> x509.KeyUsage:
        return x509.KeyUsage(digital_signature=not sign_certificates, content_commitment=False,
                             key_encipherment=False, data_encipherment=False, key_agreement=False,
                             key_cert_sign=sign_certificates, crl_sign=sign_certificates,
                             encipher_only=False, decipher_only=False)

    def builder(subject: x509.Name, public: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_name)
                .public_key(public).serial_number(x509.random_serial_number())
                .not_valid_before(now - timedelta(hours=1)).not_valid_after(now + timedelta(days=2))
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False))

    ca = (builder(ca_name, ca_key.public_key())
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(usage(True), critical=True)
          .sign(ca_key, hashes.SHA256()))
    names = [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses] + [x509.DNSName("localhost")]
    server = (builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "realsites")]), key.public_key())
              .add_extension(x509.SubjectAlternativeName(names), critical=False)
              .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
              .add_extension(usage(False), critical=True)
              .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
              .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_id),
                             critical=False)
              .sign(ca_key, hashes.SHA256()))
    files = Certificates(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.chain.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    files.key.touch(mode=0o600)
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return files


def connection_counts(entries: list[Access]) -> tuple[int, int, str]:
    """``(connections, of which resumed a TLS session, protocols)`` of one crawl's requests."""
    first: dict[int, Access] = {}
    for entry in entries:
        first.setdefault(entry.connection, entry)
    protocols = sorted({e.protocol for e in first.values() if e.protocol})
    return len(first), sum(e.resumed for e in first.values()), "/".join(protocols)


@dataclass(frozen=True)
class Probe:
    """Python's ``ssl`` against one listener: how many of the connections offering the previous
    session resumed it, and the client's CPU per connection (connect, handshake, one small request
    read to its end) when it offers no session and when it offers the previous one."""

    resumed: int
    offered: int
    protocol: str
    new_ms: float
    offered_ms: float


def _fetch(address: str, port: int, context: ssl.SSLContext,
           session: ssl.SSLSession | None) -> tuple[ssl.SSLSession | None, bool, str]:
    """One connection: ``(its session, whether it resumed one, the protocol)``."""
    with socket.create_connection((address, port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=address, session=session) as tls:
        tls.sendall(f"GET /robots.txt HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n".encode())
        while tls.recv(65536):  # to the end, which also reads the TLS 1.3 session tickets
            pass
        return tls.session, tls.session_reused, tls.version() or ""


def resumption_probe(address: str, port: int, ca: Path, count: int = 200) -> Probe:
    """Connections to ``address:port`` with Python's ``ssl`` (verifying through ``ca``):
    ``count`` offering no session, then ``count`` each offering the previous one's."""
    context = ssl.create_default_context(cafile=str(ca))
    cpu = time.process_time()
    for _ in range(count):
        session, _, protocol = _fetch(address, port, context, None)
    new = (time.process_time() - cpu) / count
    cpu, resumed = time.process_time(), 0
    for _ in range(count):
        session, reused, protocol = _fetch(address, port, context, session)
        resumed += reused
    offered = (time.process_time() - cpu) / count
    return Probe(resumed, count, protocol, 1000 * new, 1000 * offered)


def method(rounds: int, listeners: dict[str, Listener], order: list[str], concurrency: dict[str, int],
           nginx_version: str, scrapy_version: str) -> str:
    """How the https runs were measured."""
    described = {
        "https keepalive": "connections kept (`keepalive_timeout 65`, no limit of requests), sessions "
                           "resumable (`ssl_session_cache shared:bench:10m`, `ssl_session_tickets on`): "
                           "a usual production nginx, the one the targets are judged on",
        "https close": "`keepalive_timeout 0`: nginx closes each connection after one answer, so every "
                       "request is a new TCP connection and a new TLS handshake; sessions resumable",
        "https close-noresume": "the same with `ssl_session_cache off` and `ssl_session_tickets off`: "
                                "every handshake is a full one",
        "https keepalive-noresume": "connections kept, sessions not resumable",
    }
    kinds = "; ".join(f"`{name}`: {described[name]}" for name in listeners if name in described)
    return (
        f"Method. {rounds} round(s); in each, every site is crawled on each listener by each "
        f"contender ({', '.join(order)}), the order of the listeners and of the contenders rotating "
        f"every round. nginx {nginx_version} (one worker) serves the same files as over http, with "
        "TLS 1.2 and 1.3 (`ssl_protocols TLSv1.2 TLSv1.3`, nginx's default ciphers) and an ECDSA "
        "P-256 certificate for the sites' addresses, signed by an authority the benchmark makes for "
        f"the run (`bench/_realsites_tls.py`, with the `cryptography` package). Listeners: {kinds}. "
        "`webcrawl` verifies the chain and the address against that authority "
        "(`WEBCRAWL_TLS_CA_FILE`; verification is on by default). `vanilla` runs with Scrapy's "
        f"default settings (Scrapy {scrapy_version}), which do not verify certificates "
        "(`DOWNLOAD_VERIFY_CERTIFICATES = False`): it would accept any certificate. Connections and "
        "resumed handshakes are nginx's account: each request is logged with its connection's "
        "serial number and `$ssl_session_reused`. The control, before the crawls: Python's `ssl` "
        "module (blocking sockets, verifying), 200 connections offering no session, then 200 each "
        "offering its previous connection's session (`SSLContext.wrap_socket(session=...)`), each "
        "connection one small request (a 404) read to its end; its CPU per connection is "
        "`time.process_time()` over each series. Both crawlers at "
        + ", ".join(f"{k}={v}" for k, v in concurrency.items()) + ". pages/s, CPU and "
        "completeness as over http (the section above): 200 answers over the crawl process's wall "
        "time, start-up and exit included; CPU of the crawl process (`os.wait4`); nginx CPU per "
        "page: its master and worker during the crawl, from /proc. Knobs besides those of the "
        "section above: `BENCH_REALSITES_SCHEMES` (`http,https` by default; `https` crawls this "
        "section alone), `BENCH_REALSITES_HTTPS_SERVERS` (the listeners: `keepalive,close,"
        "close-noresume` by default, also `keepalive-noresume`; `keepalive` is always crawled). "
        "The machine has 2 cores shared with other sessions running tests meanwhile: figures are "
        "provisional, ratios of neighbouring runs hold better than absolute figures.")
