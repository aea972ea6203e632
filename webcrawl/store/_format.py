"""The binary framing of one body-store record (docs/store.md has the table).

A record is, little-endian::

    fixed   32 B  magic b"\\x89WCB", version, flags, status u16, record length u32,
                  body length u32, fetch time f64, url len u16, hash len u8, type len u8, headers len u32
    meta     M B  url (UTF-8), content hash, content type (latin-1), headers (name NUL value NUL ...)
    hcrc     4 B  CRC-32 of fixed + meta
    payload  P B  snappy raw block of the body (or the body itself when flag RAW: it did not shrink)
    pcrc     4 B  CRC-32 of payload

Two checksums, because they answer two questions: the header CRC makes the lengths trustworthy
(so a scan can step over a record whose payload rotted, and tell a torn tail from a mid-file
corruption); the payload CRC guards the body. CRC-32 (zlib) is the one available without a new
dependency; it runs at several GB/s and detects every error burst up to 32 bits, so any flipped byte.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import snappy  # type: ignore[import-untyped]

from webcrawl.store.pointer import Pointer
from webcrawl.store.records import RecordMeta

MAGIC = b"\x89WCB"
VERSION = 1
FIXED = struct.Struct("<4sBBHIIdHBBI")
CRC = struct.Struct("<I")
OVERHEAD = FIXED.size + 2 * CRC.size  # bytes of a record that are neither meta nor payload

FLAG_RAW = 0x01  # payload is the body itself (snappy would not have shrunk it)
FLAG_HASH_HEX = 0x02  # content hash was lower-case hex; stored as its bytes, half the size
_KNOWN_FLAGS = FLAG_RAW | FLAG_HASH_HEX

MAX_U32 = 0xFFFFFFFF
_HEX = re.compile(r"(?:[0-9a-f]{2})+")

Header = tuple[str | bytes, str | bytes]
HeaderValue = str | bytes | list[str] | list[bytes] | tuple[str | bytes, ...]
Headers = Mapping[str | bytes, HeaderValue] | Iterable[Header]


@dataclass(frozen=True, slots=True)
class Head:
    """A record's header, checked by its CRC; payload bounds are relative to the record start."""

    flags: int
    status: int
    record_length: int
    body_length: int
    fetch_time: float
    url: str
    content_hash: str
    content_type: str
    headers: tuple[tuple[str, str], ...]
    payload_start: int
    payload_length: int


def _header_bytes(value: str | bytes) -> bytes:
    raw = value if isinstance(value, bytes) else value.encode("latin-1", "replace")
    return raw.replace(b"\0", b"")  # NUL separates the fields; it is not valid in HTTP anyway


def encode_headers(headers: Headers | None) -> bytes:
    """(name, value) pairs, or a mapping whose values may be lists (Scrapy's ``Headers``)."""
    if headers is None:
        return b""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for name, value in pairs:
        for one in value if isinstance(value, (list, tuple)) else (value,):
            out.append(_header_bytes(name) + b"\0" + _header_bytes(one) + b"\0")
    return b"".join(out)


def encode(
    url: str,
    body: bytes,
    fetch_time: float,
    status: int,
    content_hash: str,
    content_type: str,
    headers: Headers | None,
) -> tuple[bytes, bytes, bytes]:
    """A record as (head, payload, trailer): three buffers for one ``writev``, no body copy.

    ``ValueError`` names the field when a value cannot be framed (URL over 64 KiB, status outside
    0..65535, body or record over 4 GiB, content hash over 255 bytes). A content type longer than
    255 bytes is cut there: it is informational.
    """
    url_b = url.encode("utf-8")
    if len(url_b) > 0xFFFF:
        raise ValueError(f"body store: url of {len(url_b)} bytes is over the 65535-byte limit")
    if not 0 <= status <= 0xFFFF:
        raise ValueError(f"body store: status {status!r} is outside 0..65535")
    flags = 0
    if _HEX.fullmatch(content_hash):
        hash_b, flags = bytes.fromhex(content_hash), flags | FLAG_HASH_HEX
    else:
        hash_b = content_hash.encode("utf-8")
    if len(hash_b) > 0xFF:
        raise ValueError(f"body store: content hash of {len(hash_b)} bytes is over the 255-byte limit")
    type_b = content_type.encode("latin-1", "replace")[:0xFF]
    headers_b = encode_headers(headers)
    if len(body) > MAX_U32:
        raise ValueError(f"body store: body of {len(body)} bytes is over the 4 GiB limit")
    payload = snappy.compress(body) if body else b""
    if len(payload) >= len(body):
        payload, flags = bytes(body), flags | FLAG_RAW
    meta = url_b + hash_b + type_b + headers_b
    length = OVERHEAD + len(meta) + len(payload)
    if length > MAX_U32:
        raise ValueError(f"body store: record of {length} bytes is over the 4 GiB limit")
    fixed = FIXED.pack(
        MAGIC, VERSION, flags, status, length, len(body), fetch_time,
        len(url_b), len(hash_b), len(type_b), len(headers_b),
    )  # fmt: skip
    head = fixed + meta
    return head + CRC.pack(zlib.crc32(head)), payload, CRC.pack(zlib.crc32(payload))


def parse_head(buf: bytes | memoryview, start: int, end: int) -> Head | str:
    """The checked header of the record at ``buf[start:]``, or why there is none.

    ``end`` bounds the readable bytes. The reasons starting with ``"short"`` mean the header runs
    past ``end``: at the end of a segment that is a torn tail, not a corruption.
    """
    if end - start < FIXED.size:
        return "short: fixed header cut"
    magic, version, flags, status, length, body_len, fetch_time, url_len, hash_len, type_len, hdr_len = (
        FIXED.unpack_from(buf, start)
    )
    if magic != MAGIC:
        return "bad magic"
    meta_end = start + FIXED.size + url_len + hash_len + type_len + hdr_len
    if meta_end + CRC.size > end:
        # Lengths are not trusted yet; a rotten length looks like a cut, the caller resyncs.
        return "short: header cut"
    (stored,) = CRC.unpack_from(buf, meta_end)
    if zlib.crc32(buf[start:meta_end]) != stored:
        return "header checksum mismatch"
    if version != VERSION or flags & ~_KNOWN_FLAGS:
        return f"unknown version {version} or flags {flags:#x}"
    payload_start = meta_end + CRC.size - start
    payload_length = length - payload_start - CRC.size
    if payload_length < 0:
        return "record length shorter than its header"
    pos = start + FIXED.size
    url = bytes(buf[pos : pos + url_len]).decode("utf-8", "replace")
    pos += url_len
    hash_raw = bytes(buf[pos : pos + hash_len])
    content_hash = hash_raw.hex() if flags & FLAG_HASH_HEX else hash_raw.decode("utf-8", "replace")
    pos += hash_len
    content_type = bytes(buf[pos : pos + type_len]).decode("latin-1")
    pos += type_len
    fields = bytes(buf[pos : pos + hdr_len]).decode("latin-1").split("\0")[:-1]
    headers = tuple(zip(fields[0::2], fields[1::2]))
    return Head(
        flags, status, length, body_len, fetch_time, url, content_hash, content_type, headers,
        payload_start, payload_length,
    )  # fmt: skip


def meta_of(head: Head, pointer: Pointer) -> RecordMeta:
    return RecordMeta(
        head.url, head.fetch_time, head.status, head.content_hash, head.content_type, head.headers,
        head.body_length, pointer,
    )  # fmt: skip


def payload_ok(buf: bytes | memoryview, start: int, head: Head) -> bool:
    """Whether the payload of the record at ``start`` matches its CRC (the record must be whole)."""
    p0 = start + head.payload_start
    p1 = p0 + head.payload_length
    (stored,) = CRC.unpack_from(buf, p1)
    return bool(zlib.crc32(buf[p0:p1]) == stored)


def decode_body(payload: bytes | memoryview, head: Head) -> bytes:
    """The body from a checked payload; ``ValueError`` if it does not decompress to its length."""
    if head.flags & FLAG_RAW:
        body = bytes(payload)
    else:
        try:
            body = snappy.decompress(bytes(payload))
        except snappy.UncompressError as exc:
            raise ValueError(f"snappy decompression failed: {exc}") from None
    if len(body) != head.body_length:
        raise ValueError(f"body is {len(body)} bytes, header says {head.body_length}")
    return body
