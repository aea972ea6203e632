"""Crawling through a real forward proxy (proxy.py, in its own process on loopback), behind a relay
that counts every byte between the crawler and the proxy: what a gateway billing by the byte
sees. For http and for https through CONNECT, the handler's count (what bandwidth billing books)
equals the relay's; with the SSRF guard on, a request to a refused address is refused before a
byte goes to the proxy."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from tests._net_servers import BODY, Relay, fetch, forward_proxy, handler_for, http_server, run
from webcrawl.net.handler import AddressRefused
from webcrawl.net.meter import measured_bytes


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Relay]:
    with forward_proxy(tmp_path_factory.mktemp("proxy")) as port:
        counting = Relay(("127.0.0.1", port))
        yield counting
        counting.close()


def test_http_through_the_proxy_counts_every_byte(relay):
    with http_server("127.0.0.1") as server:
        handler = handler_for(WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=["127.0.0.0/8"],
                              WEBCRAWL_PROXIES=[f"http://127.0.0.1:{relay.port}"])
        before = relay.total
        try:
            response, request = fetch(handler, f"http://127.0.0.1:{server.server_address[1]}/p")
            relayed = relay.total - before
        finally:
            run(handler.close())
    assert response.body == BODY and server.hits == ["/p"]
    assert request.meta["webcrawl_proxy"] == f"http://127.0.0.1:{relay.port}"
    assert measured_bytes(request.meta) == relayed > len(BODY)


def test_https_through_connect_counts_the_tunnel_and_tls(relay, tmp_path: Path):
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    with http_server("127.0.0.1", tls=context) as server:
        handler = handler_for(WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=["127.0.0.0/8"],
                              WEBCRAWL_TLS_CA_FILE=str(tmp_path / "ca.pem"))
        before = relay.total
        url = f"https://127.0.0.1:{server.server_address[1]}/s"
        try:
            response, request = fetch(handler, url, proxy=f"http://127.0.0.1:{relay.port}")
            relayed = relay.total - before  # before closing: TLS says goodbye in bytes too
        finally:
            run(handler.close())
    assert response.body == BODY and server.hits == ["/s"]
    counted = measured_bytes(request.meta)
    assert counted == relayed
    assert counted > len(BODY) + 1000  # CONNECT, the handshake and TLS records besides


@pytest.mark.parametrize("url", ["http://10.1.2.3/", "http://169.254.169.254/latest/",
                                 "http://localhost/"])
def test_a_refused_address_is_refused_before_sending(relay, url):
    handler = handler_for(WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=[],
                          WEBCRAWL_PROXIES=[f"http://127.0.0.1:{relay.port}"])
    connections = relay.connections
    try:
        with pytest.raises(AddressRefused):
            fetch(handler, url)
    finally:
        run(handler.close())
    assert relay.connections == connections  # nothing went to the proxy


def test_a_failed_transfer_through_the_proxy_is_counted(relay):
    """The proxy answers 502 (nothing listens behind it): an answer, billed by its bytes."""
    import socket

    unused = socket.socket()
    unused.bind(("127.0.0.1", 0))
    port = unused.getsockname()[1]
    unused.close()
    handler = handler_for(WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=["127.0.0.0/8"],
                          WEBCRAWL_PROXIES=[f"http://127.0.0.1:{relay.port}"])
    before = relay.total
    try:
        response, request = fetch(handler, f"http://127.0.0.1:{port}/gone")
        relayed = relay.total - before
    finally:
        run(handler.close())
    assert response.status >= 500
    assert measured_bytes(request.meta) == relayed > 0
