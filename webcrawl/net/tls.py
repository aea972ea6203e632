"""TLS for webcrawl's download handler: certificates verified by default.

A crawl whose output is a trusted local copy must know it talked to the site: the context checks
the chain against the system's authorities (plus ``WEBCRAWL_TLS_CA_FILE``, for a private CA) and
the certificate against the host name. ``WEBCRAWL_TLS_VERIFY = False`` (a site file's
``network.tls_verify = false``) turns both checks off for that crawl: the connection is still
encrypted, but anyone on the path could be answering.

A certificate that fails is one WARNING per host naming the site, the host and the reason, with
the stat ``webcrawl/tls/refused``; its requests are refused (:class:`CertificateRefused`, an
``IgnoreRequest``: not retried, no traceback).
"""

from __future__ import annotations

import ssl

from scrapy.exceptions import IgnoreRequest

__all__ = ["CertificateRefused", "client_context", "reason_of"]


class CertificateRefused(IgnoreRequest):
    """A host whose certificate failed verification."""


def client_context(*, verify: bool = True, ca_file: str | None = None) -> ssl.SSLContext:
    """The client context of every https connection (and of https proxies)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if ca_file:
        try:
            context.load_verify_locations(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"WEBCRAWL_TLS_CA_FILE={ca_file!r}: not a PEM file of "
                             f"certificates ({exc})") from None
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def reason_of(exc: BaseException) -> str:
    """The verification failure in a few words ("certificate has expired", "Hostname
    mismatch, ...")."""
    cause: BaseException | None = exc
    while cause is not None:
        inner = getattr(cause, "certificate_error", None)  # aiohttp's wrapper of the ssl error
        if inner is not None:
            cause = inner
            continue
        message = getattr(cause, "verify_message", None)
        if isinstance(cause, ssl.SSLCertVerificationError) and message:
            return str(message)
        cause = cause.__cause__
    return str(exc)
