"""From response bytes to parser input: truncate, recognise non-HTML, decode. Never raises.

Order of work, cheapest first: cut the body to ``max_bytes``; look at its first kilobyte for a
PDF or another binary format sent as text/html; pick the encoding (byte-order mark, then the
encoding the caller declares from the Content-Type header, then ``<meta charset>`` in the first
4 KB, then UTF-8, then windows-1252 for an undeclared body that is not UTF-8, as browsers do);
decode with ``errors="replace"``, counting the replaced sequences.

selectolax's Lexbor parser reads bytes as UTF-8 whatever the page declares, so a valid UTF-8 body
is handed over as bytes (no decode + re-encode) and any other body as ``str``.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from w3lib.encoding import html_body_declared_encoding, read_bom, resolve_encoding

__all__ = ["Body", "prepare_body"]

_SAMPLE = 1024
# Formats a server sends as text/html by mistake, by their first bytes.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "pdf"),
    (b"\x89PNG", "binary"),
    (b"GIF8", "binary"),
    (b"\xff\xd8\xff", "binary"),
    (b"PK\x03\x04", "binary"),
    (b"\x1f\x8b", "binary"),
    (b"\xfd7zXZ", "binary"),
    (b"7z\xbc\xaf", "binary"),
    (b"Rar!", "binary"),
    (b"RIFF", "binary"),
    (b"OggS", "binary"),
    (b"ID3\x03", "binary"),
    (b"ID3\x04", "binary"),
    (b"\x7fELF", "binary"),
    (b"\xd0\xcf\x11\xe0", "binary"),
    (b"\x00\x00\x01\x00", "binary"),
    (b"wOFF", "binary"),
    (b"wOF2", "binary"),
)
# Control bytes that do not occur in text: everything below 0x20 except \t \n \f \r and ESC
# (ISO-2022-JP uses ESC), plus DEL.
_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27)) + b"\x7f"
_NOT_CONTROL = bytes(b for b in range(256) if b not in _CONTROL)
_MAX_CONTROL_RATIO = 0.05


@dataclass(frozen=True)
class Body:
    """The outcome of ``prepare_body``.

    ``kind``: ``html`` (parse ``data``), ``empty`` (nothing but whitespace), ``pdf`` or
    ``binary`` (not parsed). ``data`` is UTF-8 bytes or text for the parser (``b""`` unless
    ``kind == "html"``); ``encoding`` the Python codec name used; ``truncated`` whether the body
    was cut; ``replaced`` the number of undecodable byte sequences replaced by U+FFFD;
    ``guessed`` whether the encoding was a fallback guess rather than declared or valid UTF-8.
    """

    kind: str
    data: bytes | str
    encoding: str
    size: int
    truncated: bool = False
    replaced: int = 0
    guessed: bool = False


def _sniff_kind(sample: bytes, wide: bool) -> str | None:
    """``pdf`` / ``binary`` when ``sample`` (the body's first bytes) is not text, else ``None``.
    ``wide``: the encoding is UTF-16/32, where NUL bytes are normal."""
    if sample.lstrip()[:5] == b"%PDF-":
        return "pdf"
    for magic, kind in _MAGIC:
        if sample.startswith(magic):
            return kind
    if wide:
        return None
    if b"\x00" in sample:
        return "binary"
    controls = len(sample.translate(None, _NOT_CONTROL))  # deleting the rest leaves controls
    if controls > _MAX_CONTROL_RATIO * len(sample):
        return "binary"
    return None


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    resolved = resolve_encoding(label)
    if resolved is None:
        return None
    try:
        return codecs.lookup(resolved).name
    except LookupError:
        return None


def prepare_body(body: bytes, max_bytes: int, declared_encoding: str | None = None) -> Body:
    """Cut ``body`` to ``max_bytes``, classify it and decode it. ``declared_encoding`` is the
    charset of the Content-Type header, if any (any label; unknown labels are ignored)."""
    size = len(body)
    truncated = size > max_bytes
    if truncated:
        body = body[:max_bytes]
    if not body or body.isspace():  # isspace stops at the first other byte; strip() copies
        return Body("empty", b"", "utf-8", size, truncated)
    bom_encoding, found_bom = read_bom(body)
    bom = found_bom or b""
    encoding = _codec(bom_encoding) or _codec(declared_encoding)
    sample = body[len(bom) : len(bom) + _SAMPLE]
    wide = encoding is not None and encoding.startswith(("utf-16", "utf-32"))
    kind = _sniff_kind(sample, wide)
    if kind is not None:
        return Body(kind, b"", encoding or "utf-8", size, truncated)
    if encoding is None:
        encoding = _codec(html_body_declared_encoding(body[:4096]))
    guessed = False
    if encoding is None or encoding == "utf-8":
        if bom:
            body = body[len(bom) :]
        if body.isascii():
            return Body("html", body, "utf-8", size, truncated)
        try:
            text = _decode(body, "utf-8", "strict", truncated)
        except UnicodeDecodeError:
            if encoding is None:  # undeclared and not UTF-8: the browsers' western default
                encoding, guessed = "cp1252", True
            else:
                encoding = "utf-8"
        else:
            # Valid UTF-8: hand the bytes over unless a cut character had to be dropped.
            return Body("html", body if not truncated else text.encode(), "utf-8", size, truncated)
    else:
        body = body[len(bom) :]
    text = _decode(body, encoding, "replace", truncated)
    replaced = 0
    if "\ufffd" in text:
        # "replace" puts one U+FFFD per bad sequence and "ignore" drops it: the length difference
        # counts the bad sequences, not the U+FFFD characters the page itself contains.
        replaced = len(text) - len(_decode(body, encoding, "ignore", truncated))
    return Body("html", text, encoding, size, truncated, replaced, guessed)


def _decode(data: bytes, encoding: str, errors: str, truncated: bool) -> str:
    if not truncated:
        return data.decode(encoding, errors)
    # An incremental decoder that is not told the input is final keeps a trailing partial
    # character back instead of reporting it: the cut, not the page, made it.
    return codecs.getincrementaldecoder(encoding)(errors).decode(data, final=False)
