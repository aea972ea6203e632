"""Connecting: Happy Eyeballs past a black-holed address, DNS answers kept no longer than their
TTL, TLS verified against a test CA. Real servers on loopback and a DNS server the test controls
(tests/_net_servers.py)."""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

import pytest
import trustme

from tests._net_servers import BODY, dns_server, fetch, handler_for, http_server, run
from webcrawl.net.tls import CertificateRefused

LOOPBACK = ["127.0.0.0/8", "::1/128"]


def black_hole(port: int) -> list[socket.socket]:
    """A listener on [::1]:``port`` whose accept queue is full: new connections get no answer
    (their SYNs are dropped), as behind a firewall that drops packets."""
    listener = socket.socket(socket.AF_INET6)
    listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    listener.bind(("::1", port))
    listener.listen(0)
    held = [listener]
    for _ in range(4):
        filler = socket.socket(socket.AF_INET6)
        filler.setblocking(False)
        try:
            filler.connect(("::1", port))
        except BlockingIOError:
            pass
        held.append(filler)
    return held


def test_a_black_holed_ipv6_address_is_passed_by_happy_eyeballs():
    with dns_server() as (records, dns), http_server("127.0.0.1") as server:
        port = server.server_address[1]
        held = black_hole(port)
        records.names["dual.test"] = ["::1", "127.0.0.1"]
        handler = handler_for(WEBCRAWL_DNS_SERVERS=[dns], WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=LOOPBACK,
                              WEBCRAWL_CONNECT_TIMEOUT_SECONDS=5)
        try:
            started = time.monotonic()
            response, _ = fetch(handler, f"http://dual.test:{port}/", download_timeout=60)
            elapsed = time.monotonic() - started
        finally:
            run(handler.close())
            for sock in held:
                sock.close()
        assert response.body == BODY
        assert str(response.ip_address) == "127.0.0.1"
        assert elapsed < 5  # within the connect timeout of the black-holed address


def test_a_changed_dns_answer_is_followed_once_its_ttl_passes():
    with dns_server(ttl=1) as (records, dns), \
            http_server("127.0.0.2", close_each=True) as old:
        port = old.server_address[1]
        with http_server("127.0.0.3", port, close_each=True) as new:
            records.names["shop.test"] = ["127.0.0.2"]
            handler = handler_for(WEBCRAWL_DNS_SERVERS=[dns],
                                  WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=LOOPBACK,
                                  WEBCRAWL_DNS_MIN_TTL_SECONDS=0.5)
            try:
                fetch(handler, f"http://shop.test:{port}/a")
                records.names["shop.test"] = ["127.0.0.3"]
                deadline = time.monotonic() + 30
                while not new.hits and time.monotonic() < deadline:
                    fetch(handler, f"http://shop.test:{port}/b")
            finally:
                run(handler.close())
    assert old.hits[0] == "/a" and new.hits, (old.hits, new.hits)


def test_the_ttl_floor_and_ceiling_bound_how_long_an_answer_is_kept():
    with dns_server(ttl=0) as (records, dns), http_server("127.0.0.2") as server:
        port = server.server_address[1]
        records.names["zero.test"] = ["127.0.0.2"]
        handler = handler_for(WEBCRAWL_DNS_SERVERS=[dns], WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=LOOPBACK,
                              WEBCRAWL_DNS_MIN_TTL_SECONDS=3600, WEBCRAWL_DNS_MAX_TTL_SECONDS=7200)
        try:
            for path in ("/1", "/2", "/3"):
                fetch(handler, f"http://zero.test:{port}{path}")
            assert handler.resolver.lookups == 1  # a TTL of 0 held for the floor
        finally:
            run(handler.close())


def test_a_name_resolving_to_a_refused_address_is_refused_before_connecting():
    from webcrawl.net.handler import AddressRefused

    with dns_server() as (records, dns), http_server("127.0.0.2") as server:
        records.names["inside.test"] = ["127.0.0.2"]
        handler = handler_for(WEBCRAWL_DNS_SERVERS=[dns], WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=[])
        try:
            with pytest.raises(AddressRefused, match="loopback"):
                fetch(handler, f"http://inside.test:{server.server_address[1]}/")
        finally:
            run(handler.close())
        assert server.hits == []
        assert handler.stats.get_value("ssrf/refused/loopback") == 1


# -- TLS ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def https_context(ca: trustme.CA, *names: str) -> object:
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(context)
    return context


def test_a_certificate_from_the_trusted_ca_passes(ca, tmp_path: Path):
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    with http_server("127.0.0.1", tls=https_context(ca, "127.0.0.1")) as server:
        handler = handler_for(WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=LOOPBACK,
                              WEBCRAWL_TLS_CA_FILE=str(tmp_path / "ca.pem"))
        try:
            response, _ = fetch(handler, f"https://127.0.0.1:{server.server_address[1]}/")
        finally:
            run(handler.close())
    assert response.body == BODY and response.certificate


@pytest.mark.parametrize("issued_for", ["127.0.0.1", "other.example"])
def test_an_unverified_certificate_is_one_line_naming_site_and_host(ca, tmp_path, caplog,
                                                                    issued_for):
    # Trusted CA but the wrong name, or an untrusted CA: either way refused.
    trusted = ca if issued_for == "other.example" else trustme.CA()
    trusted.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    with http_server("127.0.0.1", tls=https_context(ca, issued_for)) as server:
        handler = handler_for(WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=LOOPBACK,
                              WEBCRAWL_TLS_CA_FILE=str(tmp_path / "ca.pem"))
        url = f"https://127.0.0.1:{server.server_address[1]}/"
        try:
            with caplog.at_level(logging.WARNING):
                for _ in range(2):
                    with pytest.raises(CertificateRefused):
                        fetch(handler, url)
        finally:
            run(handler.close())
    lines = [r.getMessage() for r in caplog.records
             if r.levelno >= logging.WARNING and r.name == "webcrawl.net.handler"]
    assert len(lines) == 1, lines
    assert "site netsite, host 127.0.0.1" in lines[0] and "\n" not in lines[0]
    assert handler.stats.get_value("webcrawl/tls/refused") == 2


def test_the_per_site_opt_out_passes_an_unverified_certificate(ca):
    with http_server("127.0.0.1", tls=https_context(ca, "other.example")) as server:
        handler = handler_for(WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=LOOPBACK,
                              WEBCRAWL_TLS_VERIFY=False)
        try:
            response, _ = fetch(handler, f"https://127.0.0.1:{server.server_address[1]}/")
        finally:
            run(handler.close())
    assert response.body == BODY
